"""A run trimmed by the nightly's budget to some of its partitions (`steps.keep_partitions`): saved over the
run before any Spark job is made, its plan and its jobs holding only the kept groups; atomic (a failure before
the run's file is replaced leaves the whole run as it was); a partition the run does not rewrite is refused; a
trim that fails defers the run whole (`nightly_budget.within_budget`)."""

from __future__ import annotations

import os

import pytest

from layout.catalog import load_catalog
from layout.compaction.pipeline import runs, steps
from layout.compaction.pipeline.nightly_budget import within_budget
from layout.compaction.pipeline.steps import PreparedRun
from layout.errors import LakesortError
from layout.metrics.runs import read_runs
from layout.upkeep.lease import LeaseOwner, read_lease


@pytest.fixture
def prepared(events, tmp_path) -> PreparedRun:
    (request,) = [r for r in runs.nightly_requests() if r.table == "t.events"]
    # Small jobs: several, so that trimming drops some and shrinks others.
    return steps.prepare(request.config, trigger="nightly", work_dir=tmp_path / "run", max_job_bytes=3000)


def test_a_run_trimmed_to_some_partitions(prepared, monkeypatch):
    plan = prepared.plan()
    months = sorted({g.partition for g in plan.groups})
    assert len(months) == 4 and len(prepared.jobs) > 1
    keep = months[1:3]

    # A failure before the rename: the saved run is the whole one, still.
    def broken(*_):
        raise OSError("disk full")

    with monkeypatch.context() as m:
        m.setattr(os, "replace", broken)
        with pytest.raises(OSError, match="disk full"):
            steps.keep_partitions(prepared, keep)
    assert PreparedRun.load(prepared.work_dir) == prepared

    trimmed = steps.keep_partitions(prepared, keep)
    assert PreparedRun.load(prepared.work_dir) == trimmed  # saved over the run
    kept = {g.group_id: g for g in trimmed.plan().groups}
    assert {g.partition for g in kept.values()} == set(keep) and trimmed.partitions == tuple(keep)
    assert [g for g in plan.groups if g.partition in keep] == list(kept.values())  # the groups as planned
    assert trimmed.input_bytes == sum(g.bytes for g in kept.values()) < prepared.input_bytes
    assert {i for j in trimmed.jobs for i in j.group_ids} == set(kept)
    assert all(j.group_ids and j.input_bytes == sum(kept[i].bytes for i in j.group_ids) for j in trimmed.jobs)
    assert {j.manifest_path for j in trimmed.jobs} <= {j.manifest_path for j in prepared.jobs}
    assert prepared.plan() == plan  # the whole plan's file untouched: the trimmed one is a file of its own
    # Readable as the whole run's files were (a temporary file is the owner's only).
    assert os.stat(trimmed.plan_path).st_mode == os.stat(prepared.plan_path).st_mode
    assert os.stat(trimmed.path).st_mode == os.stat(prepared.plan_path).st_mode
    assert f"rewriting 2 of 4 partition(s) ({', '.join(keep)})" in trimmed.summary()

    with pytest.raises(LakesortError, match="d_month=2001-01 are not in its plan"):
        steps.keep_partitions(trimmed, [months[0], "d_month=2001-01"][1:])


def test_a_run_that_cannot_be_trimmed_waits_whole(events, monkeypatch, caplog):
    """The budget never fails the nightly: a trim that fails (here: the work directory unwritable) defers the
    run whole, recorded with why, its lease released; the saved run is the whole one."""
    owner = LeaseOwner.dag("lakesort_nightly", "trim")
    (request,) = [r for r in runs.nightly_requests() if r.table == "t.events"]
    planned = runs.prepare_table(request, owner=owner)
    whole = planned.prepared()

    def unwritable(*_args, **_kwargs):
        raise OSError("read-only file system")

    monkeypatch.setattr(steps, "keep_partitions", unwritable)
    assert within_budget([planned], budget_bytes=whole.input_bytes - 1) == []
    assert "t.events: could not be trimmed to its admitted partitions (read-only file system)" in caplog.text
    assert PreparedRun.load(whole.work_dir) == whole and read_lease("t.events") is None
    (row,) = read_runs(load_catalog(whole.catalog), "t.events").to_pylist()
    assert (row["run_id"], row["status"]) == (whole.run_id, "deferred")
    assert row["reason"].startswith("over budget, and could not be trimmed (read-only file "
                                    "system): ranked #1 of 1")
