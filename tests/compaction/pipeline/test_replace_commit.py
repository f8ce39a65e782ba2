"""A lakesort commit is a `replace` snapshot, as Iceberg's own compaction (Java's `RewriteFiles`) commits: its
summary holds the fields Java writes, with the figures of the files it swapped and the table's totals
unchanged by the rewrite, and readers of a table's appends (pyiceberg's `incremental_append_scan`) see every
appended row once across it. Tables whose history holds an older lakesort commit recorded as
`overwrite` plan the same.

A real compaction of t.events (tests/conftest.py): the job's own code on the test session's Spark
(`in_process_job`), the real planner and commit; the layout rules and GX are left out (`verify`), they are not
what is tested here.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from demo_tables import live_files
from pyiceberg.manifest import ManifestContent
from pyiceberg.table.snapshots import Operation

import layout.compaction.pipeline.commit
from layout.catalog import RUN_ID, SPEC_HASH, load_table
from layout.compaction.pipeline.driver import compact
from layout.compaction.planning.planner import plan_rewrite
from layout.registry import find_spec

pytestmark = pytest.mark.spark

# The summary of a Java `RewriteFiles` commit of data files on a table without delete files, but for the
# environment Java adds (iceberg-version, engine-name, engine-version), which describes no Java here.
JAVA_REPLACE_FIELDS = {
    "added-data-files", "deleted-data-files", "added-records", "deleted-records", "added-files-size",
    "removed-files-size", "changed-partition-count", "manifests-created", "manifests-kept",
    "manifests-replaced", "total-records", "total-files-size", "total-data-files", "total-delete-files",
    "total-position-deletes", "total-equality-deletes",
}


def _compact(events):
    result = compact("t.events", verify=lambda manifest: None)
    assert result.snapshot_id == events.refresh().current_snapshot().snapshot_id
    return result


def _append(table, days: list[dt.date], first_k: int) -> None:
    rows = pa.table({"d": pa.array(days, pa.date32()),
                     "k": pa.array(range(first_k, first_k + len(days)), pa.int64()),
                     "v": pa.array([f"v{first_k + i}" for i in range(len(days))])})
    table.append(rows.cast(table.schema().as_arrow()))


def test_the_commit_is_a_replace_with_javas_summary(events, in_process_job):
    table = load_table("t.events")
    parent = table.current_snapshot()
    before = {f.file_path: f for f in live_files(table)}
    result = _compact(events)
    table = table.refresh()
    snapshot = table.current_snapshot()
    summary = snapshot.summary
    assert (summary.operation, snapshot.parent_snapshot_id) == (Operation.REPLACE, parent.snapshot_id)

    after = {f.file_path: f for f in live_files(table)}
    removed = [f for p, f in before.items() if p not in after]
    added = [f for p, f in after.items() if p not in before]
    assert removed and added and len(removed) == result.files_removed and len(added) == result.files_added
    partitions = {table.specs()[f.spec_id].partition_to_path(f.partition, table.schema())
                  for f in removed + added}
    manifests = snapshot.manifests(table.io)
    ours = [m for m in manifests if m.added_snapshot_id == snapshot.snapshot_id]
    replaced = {m.manifest_path for m in parent.manifests(table.io)} - {m.manifest_path for m in manifests}
    props = dict(summary.additional_properties)
    lakesort = {k: props.pop(k) for k in list(props) if k.startswith("lakesort.")}
    assert set(props) == JAVA_REPLACE_FIELDS
    assert props == {
        "added-data-files": str(len(added)), "deleted-data-files": str(len(removed)),
        "added-records": str(sum(f.record_count for f in added)),
        "deleted-records": str(sum(f.record_count for f in removed)),
        "added-files-size": str(sum(f.file_size_in_bytes for f in added)),
        "removed-files-size": str(sum(f.file_size_in_bytes for f in removed)),
        "changed-partition-count": str(len(partitions)),
        "manifests-created": str(len(ours)), "manifests-kept": str(len(manifests) - len(ours)),
        "manifests-replaced": str(len(replaced)),
        # The rewrite changes no rows; the files and bytes are the live ones now.
        "total-records": "91", "total-data-files": str(len(after)),
        "total-files-size": str(sum(f.file_size_in_bytes for f in after.values())),
        "total-delete-files": "0", "total-position-deletes": "0", "total-equality-deletes": "0",
    }
    assert props["added-records"] == props["deleted-records"] == "91" and len(partitions) == 4
    assert all(m.content == ManifestContent.DATA for m in manifests)
    assert lakesort[RUN_ID] == result.plan.run_id and lakesort[SPEC_HASH] == result.plan.spec_hash
    assert (lakesort["lakesort.input-files"], lakesort["lakesort.output-files"]) == (str(len(removed)),
                                                                                     str(len(added)))


def test_incremental_append_scans_see_each_appended_row_once_across_the_compaction(events, in_process_job):
    table = load_table("t.events")
    first, *_, last_append = table.snapshots()
    _compact(events)
    table = table.refresh()
    compaction = table.current_snapshot()
    _append(table, [dt.date(1995, 2, 20), dt.date(1995, 5, 2)], first_k=100)
    _append(table, [dt.date(1995, 1, 20)], first_k=102)
    table = table.refresh()

    def keys(**bounds) -> list[int]:
        return sorted(table.incremental_append_scan(**bounds).to_arrow()["k"].to_pylist())

    appended_after = [100, 101, 102]
    assert keys() == list(range(91)) + appended_after  # every append since the first snapshot, each once
    assert keys(from_snapshot_id_exclusive=first.snapshot_id) == list(range(30, 91)) + appended_after
    assert keys(from_snapshot_id_exclusive=last_append.snapshot_id) == appended_after
    assert keys(from_snapshot_id_exclusive=compaction.snapshot_id) == appended_after
    assert keys(to_snapshot_id_inclusive=compaction.snapshot_id) == list(range(91))
    # The compaction alone appends nothing.
    assert keys(from_snapshot_id_exclusive=last_append.snapshot_id,
                to_snapshot_id_inclusive=compaction.snapshot_id) == []


@pytest.mark.parametrize("operation", [Operation.OVERWRITE, Operation.REPLACE])
def test_a_history_with_an_older_overwrite_commit_plans_the_same(
    events, in_process_job, monkeypatch, operation
):
    """lakesort before `replace` committed `overwrite`: its runs are still lakesort's (found by
    `lakesort.run-id`), so the next plan skips what it compacted and sorts only what was appended since into
    a run of its own."""
    # the older lakesort's commit
    monkeypatch.setattr(layout.compaction.commit.producer, "OPERATION", operation)
    _compact(events)
    monkeypatch.setattr(layout.compaction.commit.producer, "OPERATION", Operation.REPLACE)
    table = load_table("t.events")
    assert table.current_snapshot().summary.operation == operation
    spec = find_spec("t.events")
    assert {d.action for d in plan_rewrite(table, spec).partitions} == {"skip"}

    compacted = {f.file_path for f in live_files(table)}
    _append(table, [dt.date(1995, 2, 20)], first_k=100)
    table = table.refresh()
    appended = {f.file_path for f in live_files(table)} - compacted
    plan = plan_rewrite(table, spec)
    decisions = {d.partition: d for d in plan.partitions}
    assert {p: d.action for p, d in decisions.items()} == {
        "d_month=1995-01": "skip", "d_month=1995-02": "rewrite", "d_month=1995-03": "skip",
        "d_month=1995-04": "skip"}
    february = decisions["d_month=1995-02"]
    assert (february.foreign_files, february.sorted_runs) == (1, 1)
    assert appended <= {i.path for g in plan.groups for i in g.inputs}
