"""Faults of the object store under a compaction on S3 behind Iceberg's REST catalog (issue #37, item 5).

Each test makes a tiny partitioned table through the REST catalog (`fault_tables`) and injects faults through
the S3 front (`ObjectStore.inject`) only while one step runs: the Spark job (`driver.submit` wrapped), the
commit (`steps.commit` wrapped) or maintenance. The oracle is pyiceberg's own read of the table by field id,
floats by their bits, before and after, of the current snapshot and of every snapshot in the history; each
test also checks that its fault rules fired (`ObjectStore.faults`), so the fault was really exercised.

- the job: 503 SlowDown on GETs of the input files, connection resets on PUTs of the staged output and 1-1.5 s
  of latency on a few requests: S3A retries, the run commits;
- the job: every PUT under the staging directory (after the first few) answered 503 for longer than S3A's
  retry budget (small limits through the job's Spark conf): the run fails cleanly, the table as it was, no
  staged file left; then, on the same table (a Spark job costs most of a minute on moto), the next run's
  commit: the REST server's own metadata.json write reset every time (its S3FileIO gives up): the catalog's
  500 is "state unknown", nothing committed, the staged files kept for `lakesort cleanup`; the commit step
  retried under transient faults on pyiceberg's manifest and manifest-list uploads and the server's metadata
  write commits once;
- the commit: a manifest-list upload that keeps failing refuses the commit and removes the staged files
  (marked slow: a Spark job of its own);
- maintenance: DELETEs answered 503 while it deletes what the expired snapshots alone referenced: the run
  reports the files it could not delete, deletes nothing referenced; a later run (past the orphan grace)
  removes the rest, retrying a transient 503.
"""

from __future__ import annotations

import copy
import datetime as dt
import time

import pytest
from fault_tables import (
    Snap,
    assert_history_readable,
    assert_unchanged,
    create_table,
    new_name,
    rows,
    snap,
    spec_of,
)
from lossless import assert_same
from pyiceberg.exceptions import CommitStateUnknownException

import layout.compaction.pipeline.driver
from layout.catalog import RUN_ID, load_catalog, load_table
from layout.cli import EXIT_OK, main
from layout.compaction.pipeline import steps
from layout.compaction.pipeline.driver import compact
from layout.compaction.pipeline.submit import CompactionFailed
from layout.maintenance.referenced import MaintenanceError
from layout.upkeep.lease import LeaseOwner
from layout.upkeep.maintain import maintain_table

pytestmark = pytest.mark.spark

# S3A's retry budget, small: a fault that outlasts it fails the job in seconds, not minutes.
SMALL_RETRIES = {
    "spark.hadoop.fs.s3a.retry.limit": "1",
    "spark.hadoop.fs.s3a.retry.interval": "50ms",
    "spark.hadoop.fs.s3a.retry.throttle.limit": "1",
    "spark.hadoop.fs.s3a.retry.throttle.interval": "50ms",
    "spark.hadoop.fs.s3a.attempts.maximum": "1",
}


class Faults:
    """Fault rules injected only while one function runs (the rules are cleared when it returns or raises);
    `fired` holds, per call, how often each rule fired."""

    def __init__(self, store, *rules: dict) -> None:
        self.store, self.rules = store, rules
        self.fired: list[list[int]] = []

    def around(self, fn):
        def wrapped(*args, **kwargs):
            self.store.inject(*copy.deepcopy(self.rules))
            try:
                return fn(*args, **kwargs)
            finally:
                self.fired.append([rule.get("fired", 0) for rule in self.store.faults()])
                self.store.inject()
        return wrapped

    def assert_fired(self, *at_least: int) -> None:
        assert self.fired, "the faulted step never ran"
        total = [sum(call[i] for call in self.fired) for i in range(len(self.rules))]
        assert all(t >= n for t, n in zip(total, at_least, strict=True)), (
            f"fault rules fired {total} times, expected at least {list(at_least)}: {self.rules}")


def _table(label: str):
    name = new_name(label)
    create_table(load_catalog(), name)
    table = load_table(name)
    # the key prefix of the table's location (s3://warehouse/<ns>/<t>)
    return name, table, name.replace(".", "/")


def _staged(store, prefix: str) -> list[str]:
    """The staged files left (S3A keeps empty directory markers, `.../`: objects, but no file of a run)."""
    return [k for k in store.keys(f"{prefix}/data/lakesort-staging/") if not k.endswith("/")]


def _assert_committed_once(table, before: Snap, run_id: str) -> Snap:
    """One new snapshot, this run's, on top of the one planned; the same rows;
    every older snapshot reads as before."""
    after = snap(table)
    table = table.refresh()
    new = [s for s in table.snapshots() if s.snapshot_id not in before.history]
    assert [s.summary.additional_properties.get(RUN_ID) for s in new] == [run_id]
    assert new[0].snapshot_id == after.snapshot_id and new[0].parent_snapshot_id == before.snapshot_id
    assert_same(before.rows, after.rows)
    assert_history_readable(before, after)
    return after


def _cleanup(name: str, capsys) -> str:
    """`lakesort cleanup` with no grace period; what it printed."""
    capsys.readouterr()
    assert main(["cleanup", name, "--grace-hours", "0"]) == EXIT_OK
    return capsys.readouterr().out


# ---- during the Spark job ----------------------------------------------------------------------------------


def test_job_retries_slowdowns_resets_and_latency(on_rest, object_store, monkeypatch, tmp_path):
    """503 SlowDown on GETs of the input files, connection resets on PUTs under the staging directory, and
    1-1.5 s of latency on a few GETs and HEADs, all while the Spark job runs: S3A retries, the run commits
    once and the rows are the same."""
    name, table, prefix = _table("job_retried")
    before = snap(table)
    faults = Faults(
        object_store,
        {"kind": "GET", "key_contains": f"{prefix}/data/d_month=", "action": "503", "times": 3},
        {"kind": "PUT", "key_contains": f"{prefix}/data/lakesort-staging/", "action": "reset", "times": 2},
        {"kind": "GET", "key_contains": f"{prefix}/data/d_month=", "action": "delay",
         "seconds": 1.5, "times": 2},
        {"kind": "HEAD", "key_contains": f"{prefix}/data/lakesort-staging/", "action": "delay",
         "seconds": 1.0, "times": 2},
    )
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit",
                        faults.around(layout.compaction.pipeline.driver.submit))
    result = compact(name, spec=spec_of(name), force=True, verify=lambda manifest: None,
                     work_dir=tmp_path / "w")
    faults.assert_fired(3, 2, 2, 1)
    assert result.files_removed == len(before.files) and result.files_added == 3
    _assert_committed_once(table, before, result.plan.run_id)


def test_job_fault_outlasting_retries_fails_cleanly_then_commit_faults(on_rest, object_store, monkeypatch,
                                                                        tmp_path, capsys):
    """The job: every PUT under the staging directory after the first few answered 503, longer than S3A's
    (small) retry budget: the job fails (CompactionFailed), the table is as it was, no staged file is left
    (the run removes them; `lakesort cleanup` finds nothing more).

    The next run, at its commit: the REST server's write of the new metadata.json reset every time, so its
    S3FileIO gives up, the catalog answers 500 and pyiceberg raises CommitStateUnknownException; nothing was
    committed and the staged files are kept (they might have been the table's). The commit step retried (as
    Airflow retries a task) under a 503 on the manifest list's upload, a reset on a manifest upload and two
    503s on the metadata.json write commits exactly once; `lakesort cleanup` then removes only what no
    snapshot references. (One table for both: each Spark job costs most of a minute on moto.)"""
    name, table, prefix = _table("job_fails")
    before = snap(table)
    job_faults = Faults(object_store, {"kind": "PUT", "key_contains": f"{prefix}/data/lakesort-staging/",
                                       "action": "503", "after": 4, "times": 10_000})
    real = layout.compaction.pipeline.driver.submit
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", job_faults.around(real))
    started = time.monotonic()
    with pytest.raises(CompactionFailed, match=r"Spark job failed"):
        compact(name, spec=spec_of(name), force=True, verify=lambda manifest: None, spark_conf=SMALL_RETRIES,
                work_dir=tmp_path / "w1")
    failed_in = time.monotonic() - started
    print(f"the failing run took {failed_in:.1f}s")
    job_faults.assert_fired(1)
    assert_unchanged(before, snap(table))
    assert _staged(object_store, prefix) == [], "the failed run left staged files"
    assert "removed 0 orphaned" in _cleanup(name, capsys)
    assert failed_in < 120, f"the failing run took {failed_in:.0f}s: the retry budget is not small"
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", real)

    unknown = Faults(object_store, {"kind": "PUT", "key_contains": f"{prefix}/metadata/0000",
                                    "action": "reset", "times": 10_000})
    commit = steps.commit
    monkeypatch.setattr(steps, "commit", unknown.around(commit))
    with pytest.raises(CommitStateUnknownException):
        compact(name, spec=spec_of(name), force=True, verify=lambda manifest: None, work_dir=tmp_path / "w2")
    unknown.assert_fired(1)
    assert_unchanged(before, snap(table))
    staged = [k for k in _staged(object_store, prefix) if k.endswith(".parquet")]
    assert len(staged) == 3, "a commit of unknown outcome must keep its staged files"

    prepared = steps.PreparedRun.load(tmp_path / "w2")
    transient = Faults(
        object_store,
        {"kind": "PUT", "key_contains": f"{prefix}/metadata/snap-", "action": "503", "times": 1},
        {"kind": "POST", "key_contains": f"{prefix}/metadata/", "action": "reset", "times": 1},
        {"kind": "PUT", "key_contains": f"{prefix}/metadata/0000", "action": "503", "times": 2},
    )
    result = transient.around(commit)(prepared)
    transient.assert_fired(1, 1, 2)
    after = _assert_committed_once(table, before, prepared.run_id)
    assert result.snapshot_id == after.snapshot_id
    assert {f"s3://warehouse/{k}" for k in staged} == set(after.files)

    out = _cleanup(name, capsys)
    assert "kept 3 referenced" in out, out
    assert sorted(k for k in _staged(object_store, prefix) if not k.endswith("/")) == sorted(staged)
    assert_same(before.rows, snap(table).rows)


# ---- during the commit -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_commit_refused_when_the_manifest_list_cannot_be_written(
    on_rest, object_store, monkeypatch, tmp_path
):
    """pyiceberg's upload of the new manifest list answered 503 every time: pyarrow's retries give up, the
    commit is refused before the catalog saw it, the table is as it was and the staged files are removed."""
    name, table, prefix = _table("commit_refused")
    before = snap(table)
    faults = Faults(object_store, {"kind": "PUT", "key_contains": f"{prefix}/metadata/snap-", "action": "503",
                                   "times": 10_000})
    monkeypatch.setattr(steps, "commit", faults.around(steps.commit))
    with pytest.raises(OSError, match="SLOW_DOWN|reduce your request rate"):
        compact(name, spec=spec_of(name), force=True, verify=lambda manifest: None, work_dir=tmp_path / "w")
    faults.assert_fired(1)
    assert_unchanged(before, snap(table))
    assert [k for k in _staged(object_store, prefix) if not k.endswith("/")] == []


# ---- during maintenance ------------------------------------------------------------------------------------


def test_maintenance_delete_faults(on_rest, object_store):
    """Expiring every snapshot but the current one, then deleting what only they referenced, with DELETEs
    answered 503 after the first: maintenance reports the files it could not delete and deletes nothing the
    table references; a later run (past the orphan grace) removes the rest,
    through a transient 503 it retries."""
    name, table, prefix = _table("maintenance")
    table.overwrite(rows(0, 3 * 400).cast(table.schema().as_arrow()))  # every earlier data file unreferenced
    before = snap(table)
    spec = spec_of(name)
    assert len(before.history) > 1
    # Maintenance deletes in batches (DeleteObjects: the request names no key, its body does): the first batch
    # goes through, every later one is refused.
    faults = Faults(object_store, {"kind": "DELETE", "action": "503", "after": 1, "times": 10_000})
    with pytest.raises(MaintenanceError, match=r"could not delete") as failed:
        faults.around(maintain_table)(name, owner=LeaseOwner.cli(), spec=spec)
    faults.assert_fired(1)
    print(failed.value)
    after = snap(table)
    assert after.snapshot_id == before.snapshot_id and list(after.history) == [before.snapshot_id]
    assert_same(before.rows, after.rows)  # every live file is still there (the read opens each)
    left = set(object_store.keys(f"{prefix}/"))

    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)  # past the orphan grace (1h)
    retried = Faults(object_store, {"kind": "DELETE", "action": "503", "times": 1})
    result = retried.around(maintain_table)(name, owner=LeaseOwner.cli(), spec=spec, now=later)
    retried.assert_fired(1)
    final = snap(table)
    assert_same(before.rows, final.rows)
    assert list(final.history) == [before.snapshot_id]
    remaining = {k for k in object_store.keys(f"{prefix}/") if not k.endswith("/")}
    data = {k for k in remaining if "/data/" in k}
    assert {f"s3://warehouse/{k}" for k in data} == set(final.files)
    assert result.files_after == len(remaining) < len(left)
