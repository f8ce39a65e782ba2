"""Real races: another *process* writes to the table while a compaction runs through the real pipeline (the
job's code on the test session's Spark, the proof, the commit). Nothing is injected at a chosen moment: the
other writer runs on its own clock, and the oracle is pyiceberg's read of the whole table afterwards, compared
with what the two writers' committed snapshots say must be there.

(Deterministic injections of the same faults live in tests/compaction/pipeline/test_faults.py; cleanup racing
committing processes in tests/upkeep/test_cleanup.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest
from lossless import _canonical, assert_same, by_field_id, in_process_submit, load_job, rows_for, run
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

import layout.compaction.pipeline.driver
from layout.compaction.integrity.staged import CommitRefused
from layout.compaction.planning.planner import RUN_ID

pytestmark = pytest.mark.spark

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "cat", StringType()),
                NestedField(3, "v", LongType()))
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="cat"))

WRITER = textwrap.dedent("""
    import json, sys, time
    import pyarrow as pa
    from layout.catalog import load_catalog

    mode, table_name, stop, log = sys.argv[1:5]
    table = load_catalog().load_table(table_name)
    n = 100_000
    while True:
        try:
            table = table.refresh()
            if mode == "append":
                rows = [{"id": n + i, "cat": "c%d" % (i % 3), "v": i} for i in range(5)]
                table.append(pa.Table.from_pylist(rows, schema=table.schema().as_arrow()))
                entry = {"append": n}
                n += 5
            else:  # delete the rows of one id at a time, oldest first
                victim = int(sys.argv[5]) + len(open(log).read().splitlines())
                table.delete("id = %d" % victim)
                entry = {"delete": victim}
            snap = table.refresh().current_snapshot().snapshot_id
            with open(log, "a") as out:
                out.write(json.dumps({**entry, "snapshot": snap}) + "\\n")
        except Exception as exc:  # a lost race of this writer itself: it simply tries again
            print("writer:", type(exc).__name__, exc, file=sys.stderr)
        import os
        if os.path.exists(stop):
            break
        time.sleep(0.1)
""")


@pytest.fixture
def job_here(spark, monkeypatch):
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", in_process_submit(spark, load_job()))


def _start_writer(tmp_path: Path, mode: str, table: str, *extra: str):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    stop, log = tmp_path / f"stop-{mode}", tmp_path / f"{mode}.log"
    log.write_text("")
    proc = subprocess.Popen([sys.executable, str(script), mode, table, str(stop), str(log), *extra],
                            cwd=os.getcwd(), env=dict(os.environ), stderr=subprocess.PIPE, text=True)
    return proc, stop, log


def _stop(proc, stop: Path) -> str:
    stop.touch()
    _, err = proc.communicate(timeout=120)
    return err


def _entries(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _table(iceberg_catalog, name: str):
    cat = iceberg_catalog
    cat.create_namespace("t")
    table = cat.create_table(name, SCHEMA, partition_spec=SPEC)
    for start in (0, 40, 80):
        table.append(rows_for(table, start, 40))
    return table.refresh()


def _with_rows(before: dict[int, list], extra: pa.Table, schema) -> dict[int, list]:
    ids = list(before)
    names = {schema.find_field(i).field_id: schema.find_field(i).name for i in ids}
    added = list(zip(*[[_canonical(v) for v in extra.column(names[i]).to_pylist()] for i in ids]))
    rows = sorted([*zip(*[before[i] for i in ids]), *added], key=repr)
    return {fid: [r[k] for r in rows] for k, fid in enumerate(ids)}


def test_a_compaction_races_an_appending_process(iceberg_catalog, job_here, tmp_path):
    """Another process appends to the same partitions every 100 ms for the whole run: the compaction commits
    (retried on the new table state), and the table holds exactly the old rows plus every committed append."""
    table = _table(iceberg_catalog, "t.race_append")
    before = by_field_id(table)
    proc, stop, log = _start_writer(tmp_path, "append", "t.race_append")
    try:
        time.sleep(1.0)
        result = run("t.race_append")
        time.sleep(0.5)
    finally:
        err = _stop(proc, stop)
    appended = [e["append"] for e in _entries(log)]
    table = table.refresh()
    assert result.snapshot_id is not None, err
    assert len(appended) >= 3, err
    assert any(RUN_ID in s.summary.additional_properties for s in table.snapshots())
    extra = pa.Table.from_pylist([{"id": n + i, "cat": f"c{i % 3}", "v": i} for n in appended
                                  for i in range(5)],
                                 schema=table.schema().as_arrow())
    assert_same(_with_rows(before, extra, table.schema()), by_field_id(table))


def test_a_compaction_races_a_deleting_process(iceberg_catalog, job_here, tmp_path):
    """Another process deletes rows (copy-on-write: it rewrites or drops the compaction's input files) while
    the compaction runs. Either the compaction's commit is refused (an input is gone) or it lands before the
    delete; never may a deleted row come back. The table holds exactly the old rows minus every
    committed delete."""
    table = _table(iceberg_catalog, "t.race_delete")
    before = by_field_id(table)
    proc, stop, log = _start_writer(tmp_path, "delete", "t.race_delete", "0")
    try:
        time.sleep(0.5)
        try:
            run("t.race_delete")
        except CommitRefused:
            pass  # an input was rewritten by the deleter first: refused, nothing committed
        time.sleep(0.5)
    finally:
        err = _stop(proc, stop)
    deleted = {e["delete"] for e in _entries(log)}
    assert deleted, err
    table = table.refresh()
    id_field = table.schema().find_field("id").field_id
    keep = [k for k, v in enumerate(before[id_field]) if v not in deleted]
    expected = {fid: [col[k] for k in keep] for fid, col in before.items()}
    assert_same(expected, by_field_id(table))


def test_a_commit_that_loses_the_race_retries_on_the_new_state_and_records_each_attempt(
        iceberg_catalog, job_here, monkeypatch):
    """Twice, another writer commits between the commit's read of the table and its compare-and-swap: the
    catalog refuses those attempts (CommitFailedException), the commit retries at once on the new state with
    the same staged files (no second job), and every attempt is in the result with its reason."""
    import layout.compaction.pipeline.commit as commit_module

    table = _table(iceberg_catalog, "t.race_cas")
    before = by_field_id(table)
    real = commit_module.commit_replace
    appended: list[int] = []

    def commit_replace(state, changes, properties, **kwargs):
        if len(appended) < 2:  # another writer wins the race: the attempt's state is stale
            n = 200_000 + 5 * len(appended)
            other = iceberg_catalog.load_table("t.race_cas")
            other.append(pa.Table.from_pylist([{"id": n + i, "cat": "c0", "v": i} for i in range(5)],
                                              schema=other.schema().as_arrow()))
            appended.append(n)
        return real(state, changes, properties, **kwargs)

    monkeypatch.setattr(commit_module, "commit_replace", commit_replace)
    result = run("t.race_cas")

    outcomes = [a.outcome for a in result.attempts]
    assert outcomes == ["conflict", "conflict", "committed"], result.attempts
    assert all(a.reason for a in result.attempts[:2]) and [a.number for a in result.attempts] == [1, 2, 3]
    extra = pa.Table.from_pylist([{"id": n + i, "cat": "c0", "v": i} for n in appended for i in range(5)],
                                 schema=table.schema().as_arrow())
    assert_same(_with_rows(before, extra, table.schema()), by_field_id(table.refresh()))
