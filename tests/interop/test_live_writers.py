"""A compaction beside a live writer (issue #51): Spark's MERGE INTO in merge-on-read mode (file-scoped
position deletes on the very files the job rewrites: updates, deletes, inserts, NULL ids) commits every 2 s
for the whole run, lakesort compacts every partition it writes to, and the oracle (`live_writers.judge`) holds
after the writer stops: Iceberg Spark reads exactly the writer's model, every retained snapshot reads whole,
the rewrite reads as its parent, no delete file applies where it must not. lakesort commits on its first
invocation. The other writers (equality-delete upserts, Structured Streaming) and ten runs of each are
tests/benchmarks/bench_live_writers.py.
"""

from __future__ import annotations

import pytest
from live_writers import (
    RUN_ID,
    MergeWriter,
    Writer,
    create_table,
    judge,
    lakesort_snapshots,
    writing,
)
from roundtrip import spec

from layout.compaction.commit.summary import CARRIED_DELETE_FILES

pytestmark = pytest.mark.usefixtures("in_process_job")


def compact_beside(bed, monkeypatch, writer: Writer):
    """lakesort's compaction of the writer's whole table while it commits (once at least between the job's
    read of the inputs and lakesort's commit, whatever the job's speed, and once after that commit); then
    the oracle."""
    from layout.compaction.pipeline import driver

    staged = driver.submit  # the in-process job

    def submit(*args, **kwargs):
        seen = len(writer.commits)
        staged(*args, **kwargs)
        writer.wait_commits(seen + 1)

    monkeypatch.setattr(driver, "submit", submit)
    name = writer.table.name
    with writing(writer):
        writer.wait_commits(1)
        result = driver.compact(name, spec=spec(name, sort={"keys": [{"column": "id"}]}), force=True)
        writer.wait_commits(len(writer.commits) + 1)
    return result, judge(bed.spark, writer.table, writer.model, catalog=bed.catalog)


def test_a_compaction_commits_beside_a_merge_into_writer(bed, monkeypatch):
    table, model = create_table(bed.spark, bed.name("live_merge"), rows=3000, days=4)
    writer = MergeWriter(bed.spark, table, model, interval=2.0, batch=12, seed=51)

    result, verdict = compact_beside(bed, monkeypatch, writer)

    ours = lakesort_snapshots(bed.spark, table.name)
    assert [s["operation"] for s in ours] == ["replace"], f"lakesort's snapshots: {ours}"
    assert ours[0]["summary"][RUN_ID] == result.planned.run_id
    # the MERGE committed between the job's read and lakesort's commit deleted rows of its inputs
    assert int(ours[0]["summary"].get(CARRIED_DELETE_FILES, 0)) > 0, ours[0]["summary"]
    assert verdict.rewrites_checked == 1 and verdict.deletes.position_files > 0
    assert len(writer.commits) >= 4
