"""Progress in parts (issue #51): a run commits its groups in several `replace` snapshots, each carrying the
run id and its part number; a kill between two parts leaves the committed parts readable, a retried commit
step commits only the rest, and after a failure the next run finishes what is left."""

from __future__ import annotations

import pytest
from demo_tables import MONTHS, demo_spec, sorted_rows, state

import layout.compaction.pipeline.commit as commit_module
from layout.catalog import load_table
from layout.compaction.commit.summary import RunSummary, run_snapshots
from layout.compaction.pipeline.driver import compact

pytestmark = pytest.mark.spark


class Killed(BaseException):
    """The process dying between two parts (nothing after it runs, cleanup included)."""


class Failed(Exception):
    """A failure between two parts (the process lives: the run is recorded, the rest cleaned up)."""


def _kill_after_first_part(monkeypatch, *, cleanup: bool, error: type[BaseException] = Killed):
    """Returns what puts the real commit back."""
    real, real_cleanup = commit_module.commit_replace, commit_module.delete_staged
    calls = []

    def commit_replace(state, changes, properties, **kwargs):
        if calls:
            raise error("killed between two parts")
        calls.append(properties)
        return real(state, changes, properties, **kwargs)

    monkeypatch.setattr(commit_module, "commit_replace", commit_replace)
    if not cleanup:
        monkeypatch.setattr(commit_module, "delete_staged", lambda table, run_id: 0)

    def restore():
        monkeypatch.setattr(commit_module, "commit_replace", real)
        monkeypatch.setattr(commit_module, "delete_staged", real_cleanup)

    return restore


def test_a_run_commits_in_parts_and_a_retried_commit_step_commits_only_the_rest(
        demo_home, in_process_job, monkeypatch):
    from layout.compaction.pipeline import steps

    table = load_table("demo.lineitem")
    before = state(table)
    spec = demo_spec(commit={"max_part_groups": 1})
    restore = _kill_after_first_part(monkeypatch, cleanup=False)

    with pytest.raises(Killed):
        compact("demo.lineitem", spec=spec, partitions=MONTHS, work_dir=demo_home / "work",
                verify=lambda manifest: None)

    table = table.refresh()
    prepared = steps.PreparedRun.load(demo_home / "work")
    found = run_snapshots(table, prepared.run_id)
    assert list(found) == [1], "part 1 committed, the kill before part 2"
    parts = found[1][1].parts
    assert parts > 1
    assert sorted_rows(table).equals(before.rows), "the committed part reads the same rows"

    restore()
    result = steps.commit(prepared)  # Airflow's retry of the commit step

    table = table.refresh()
    found = run_snapshots(table, prepared.run_id)
    assert sorted(found) == list(range(1, parts + 1))
    assert (result.parts, result.parts_committed) == (parts, parts)
    assert {s.part for _, s in found.values()} == set(range(1, parts + 1))
    assert all(isinstance(s, RunSummary) and s.parts == parts for _, s in found.values())
    assert result.files_removed == sum(s.input_files for _, s in found.values())
    assert sorted_rows(table).equals(before.rows)
    row = _run_row(prepared.run_id)
    assert (row["status"], row["parts"], row["parts_committed"]) == ("committed", parts, parts)
    assert row["commit_attempts"] == len(result.attempts) >= parts - 1
    assert steps.commit(prepared).snapshot_id == result.snapshot_id  # every part committed: nothing to do


def _last_run_id(table) -> str:
    from layout.catalog import RUN_ID

    return table.current_snapshot().summary.additional_properties[RUN_ID]


def _run_row(run_id: str) -> dict:
    """The run's row in lakesort.compaction_runs, as the report reads it."""
    from layout.catalog import load_catalog
    from layout.metrics.runs import read_runs

    rows = [r for r in read_runs(load_catalog()).to_pylist() if r["run_id"] == run_id]
    assert len(rows) == 1, rows
    return rows[0]


def test_after_a_failure_between_parts_the_next_run_finishes_the_rest(demo_home, in_process_job, monkeypatch):
    table = load_table("demo.lineitem")
    before = state(table)
    spec = demo_spec(commit={"max_part_groups": 1})
    restore = _kill_after_first_part(monkeypatch, cleanup=True, error=Failed)

    with pytest.raises(Failed):
        compact("demo.lineitem", spec=spec, partitions=MONTHS, verify=lambda manifest: None)
    table = table.refresh()
    assert sorted_rows(table).equals(before.rows)
    first = table.current_snapshot().snapshot_id
    failed = _run_row(_last_run_id(table))  # the failed run's row: the part it left committed
    assert (failed["status"], failed["parts_committed"]) == ("failed", 1) and failed["commit_attempts"] >= 1

    restore()
    result = compact("demo.lineitem", spec=spec, partitions=MONTHS, verify=lambda manifest: None)

    table = table.refresh()
    assert result.snapshot_id is not None and table.current_snapshot().snapshot_id != first
    assert all(a.outcome == "committed" for a in result.attempts)
    assert sorted_rows(table).equals(before.rows)
