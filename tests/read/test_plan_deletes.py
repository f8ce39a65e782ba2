"""Delete files in read plans: what a reader of a merge-on-read Iceberg table must open and merge.

The counting is checked against brute force (every pair of data and delete file through
`DeleteFile.applies_to`, the rule itself) over random snapshots and selections; a pyiceberg table with
position and equality deletes (written by tests/deletes_helpers.py, applied by pyiceberg's own scan) is
planned end to end, against pyiceberg's DeleteFileIndex for its position deletes; and a table Iceberg's
own Spark wrote merge-on-read (the test bed) against the delete files Iceberg lists.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pytest
from deletes_helpers import (
    commit_deletes,
    equality_delete_file,
    position_delete_file,
    write_equality_deletes,
    write_position_deletes,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField

import layout.read.plan as lp
from layout.errors import UsageError
from layout.expr.sql import parse_where
from layout.read.cache import MetadataCache
from layout.read.deletes import DataRef, DeleteFile
from layout.read.iceberg import DeleteRead, SnapshotDeletes, snapshot_files, snapshot_scan
from layout.read.scan import read_table

# -- the counting, against brute force -------------------------------------------------------------------

_PATHS = [f"s3://b/t/data/f{i:02d}.parquet" for i in range(12)]


@st.composite
def snapshots(draw) -> tuple[list[DataRef], list[DeleteFile]]:
    """Data files over two specs and three partitions, and delete files of every kind the rules tell apart:
    position deletes unbounded, file-scoped or over a range of paths, equality deletes, global ones."""
    paths = draw(st.lists(st.sampled_from(_PATHS), unique=True, max_size=8))
    refs = [DataRef(p, draw(st.integers(0, 1)), draw(st.integers(0, 2)), draw(st.integers(0, 6)))
            for p in paths]
    deletes = []
    for n in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["position", "equality"]))
        lo = hi = None
        if kind == "position":
            bounds = draw(st.sampled_from(["none", "file", "range"]))
            if bounds == "file":
                lo = hi = draw(st.sampled_from(_PATHS))
            elif bounds == "range":
                lo, hi = sorted(draw(st.lists(st.sampled_from(_PATHS), min_size=2, max_size=2)))
        deletes.append(DeleteFile(
            path=f"s3://b/t/data/del{n}.parquet", kind=kind, spec_id=draw(st.integers(0, 1)),
            partition=draw(st.integers(0, 2)), sequence_number=draw(st.integers(0, 6)),
            record_count=draw(st.integers(1, 100)), size=draw(st.integers(1, 10_000)),
            unpartitioned=draw(st.booleans()), equality_ids=(1,) if kind == "equality" else (),
            path_lo=lo, path_hi=hi))
    return refs, deletes


def _brute(refs: list[DataRef], deletes: list[DeleteFile], chosen) -> DeleteRead:
    applying = {d.path: d.size for i in chosen for d in deletes if d.applies_to(refs[i])}
    return DeleteRead(len(applying), sum(applying.values()))


@settings(deadline=None, max_examples=300)
@given(snapshot=snapshots(), data=st.data())
def test_a_selection_reads_each_delete_file_that_applies_once(snapshot, data):
    """Per data file, exactly the delete files the rule applies; over any selection, the distinct ones and
    their bytes; the total, those that apply to any data file
    (a dangling delete file is opened by no reader)."""
    refs, deletes = snapshot
    index = SnapshotDeletes.index(deletes, refs)
    for i, ref in enumerate(refs):
        assert sorted(index.files[j].path for j in index.applying[i]) == sorted(
            d.path for d in deletes if d.applies_to(ref)), ref
    chosen = data.draw(st.sets(st.integers(0, len(refs) - 1))) if refs else set()
    assert index.read(chosen) == _brute(refs, deletes, chosen)
    assert index.total == _brute(refs, deletes, range(len(refs))) == index.read(range(len(refs)))
    assert index.read(()) == DeleteRead()


# -- a pyiceberg table with position and equality deletes ------------------------------------------------


@pytest.fixture
def merge_on_read(iceberg_catalog):
    """`mor.events`, partitioned by day: two appends per day (sequence numbers 1-4), then

    - A, a position delete scoped to the first file of day 0 (bounds: its path);
    - B, a position delete in day 1 without `file_path` bounds (every day-1 file at or below its sequence);
    - D, a position delete scoped to a file that is not live (dangling: no reader opens it);
    - C, an equality delete of id 5 in day 0 (day-0 files of a lower sequence number);
    - then a fifth file in day 0, newer than every delete: none applies to it.
    Returns (table, data files by (day, n), delete files by name, pyiceberg's position deletes per data
    file before C)."""
    iceberg_catalog.create_namespace_if_not_exists("mor")
    schema = Schema(NestedField(1, "day", LongType(), required=False),
                    NestedField(2, "id", LongType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000,
                                        transform=IdentityTransform(), name="day"))
    table = iceberg_catalog.create_table("mor.events", schema=schema, partition_spec=spec)
    arrow = pa.schema([pa.field("day", pa.int64()), pa.field("id", pa.int64())])

    def append(day: int, ids: range) -> str:
        def live() -> set[str]:  # pyiceberg's metadata table: its planning raises on equality deletes
            return set(table.refresh().inspect.data_files().column("file_path").to_pylist())

        before = live()
        table.append(pa.table({"day": [day] * len(ids), "id": list(ids)}, schema=arrow))
        (path,) = live() - before
        return path

    files = {(0, 0): append(0, range(50)), (1, 0): append(1, range(100, 150)),
             (0, 1): append(0, range(50, 100)), (1, 1): append(1, range(150, 200))}
    a = position_delete_file(table, write_position_deletes(table, [(files[0, 0], 3), (files[0, 0], 7)]),
                             partition=(0,))
    b = position_delete_file(table, write_position_deletes(table, [(files[1, 0], 1), (files[1, 1], 2)]),
                             partition=(1,), bounds=False)
    d = position_delete_file(
        table,
        write_position_deletes(table, [(files[0, 0].replace(".parquet", "-gone.parquet"), 0)]),
        partition=(0,),
    )
    table = commit_deletes(table.refresh(), [a, b, d])
    # pyiceberg's view of the position deletes, before an equality delete makes its planning raise
    positions = {t.file.file_path: {x.file_path for x in t.delete_files} for t in table.scan().plan_files()}
    assert table.scan().to_arrow().num_rows == 200 - 2 - 2, "pyiceberg applies the deletes written here"
    c = equality_delete_file(table,
                             write_equality_deletes(table, pa.table({"id": pa.array([5], pa.int64())})),
                             ["id"], partition=(0,))
    table = commit_deletes(table, [c])
    files[0, 2] = append(0, range(1000, 1010))
    return table.refresh(), files, {"A": a, "B": b, "C": c, "D": d}, positions


def test_a_plan_counts_the_delete_files_a_reader_merges_for_the_files_it_selects(merge_on_read):
    _, _, deletes, _ = merge_on_read
    size = {name: f.file_size_in_bytes for name, f in deletes.items()}

    def merged(*names: str) -> tuple[int, int]:
        return len(names), sum(size[n] for n in names)

    cases = {
        "day = 0": merged("A", "C"),  # A on its file, C on both older day-0 files; none on the newest
        "day = 1": merged("B"),
        "id >= 1000": merged(),  # the newest file only: every delete is older, or scoped elsewhere
        "id = 3": merged("A", "C"),  # one file: A and C both apply to it
        "id = 60": merged("C"),
        "day = 0 OR day = 1": merged("A", "B", "C"),
    }
    for where, (n, nbytes) in cases.items():
        counts = lp.plan("mor.events", where, cache=False).counts
        assert (counts.delete_files_selected, counts.delete_bytes_selected) == (n, nbytes), where
        assert (counts.delete_files_total, counts.delete_bytes_total) == merged("A", "B", "C"), (
            "D is dangling")
    # rows stay the data files' rows: the reader reads them, then drops the deleted ones
    everything = lp.plan("mor.events", None, cache=False)
    assert everything.counts.rows_selected == everything.counts.rows_total == 210
    with pytest.raises(UsageError, match="does not merge deletes"):  # it would return rows the table deleted
        read_table(everything)


def test_each_data_file_counts_its_delete_files_as_pyiceberg_applies_them(merge_on_read):
    """`IcebergFile.delete_files` by Iceberg's rules; before the equality delete was committed (pyiceberg's
    planning raises on those), pyiceberg's own DeleteFileIndex gave the same position deletes per file."""
    table, files, deletes, positions = merge_on_read
    by_path = {f.path: f for f in snapshot_files(table, None, None)}
    expected = {(0, 0): 2, (0, 1): 1, (1, 0): 1, (1, 1): 1, (0, 2): 0}
    assert {key: by_path[path].delete_files for key, path in files.items()} == expected
    a, b = deletes["A"].file_path, deletes["B"].file_path
    assert positions == {files[0, 0]: {a}, files[0, 1]: set(), files[1, 0]: {b}, files[1, 1]: {b}}
    # the predicate's files, the same counts
    assert [f.delete_files for f in snapshot_files(table, parse_where("id = 3"), None)] == [2]


def test_cached_plans_count_the_same_and_a_table_without_deletes_counts_none(merge_on_read, iceberg_catalog):
    cache = MetadataCache()
    cold = lp.plan("mor.events", "day = 0", cache=cache)
    warm = lp.plan("mor.events", "day = 0", cache=cache)
    assert warm.counts == cold.counts == lp.plan("mor.events", "day = 0", cache=False).counts
    exact = lp.plan("mor.events", "day = 0", cache=False, exact_totals=True)
    footer_only = {"row_groups_total": exact.counts.row_groups_total, "pages_total": exact.counts.pages_total}
    assert replace(cold.counts, **footer_only) == exact.counts, "opening every file changes no delete count"
    assert cold.to_json()["delete_files_selected"] == 2
    table = iceberg_catalog.create_table("mor.plain", schema=pa.schema([pa.field("id", pa.int64())]))
    table.append(pa.table({"id": pa.array(range(10), pa.int64())}))
    scan = snapshot_scan(table, None, None, table.refresh().current_snapshot())
    assert scan.deletes is None and scan.delete_total == DeleteRead()
    counts = lp.plan("mor.plain", "id = 3", cache=False).counts
    assert (counts.delete_files_total, counts.delete_files_selected, counts.delete_bytes_total,
            counts.delete_bytes_selected) == (0, 0, 0, 0)


# -- a table Iceberg's own Spark wrote merge-on-read (the test bed) ----------------------------------------


def test_delete_files_iceberg_spark_wrote_are_counted_as_iceberg_lists_them(bed):
    """Iceberg Spark's DELETE on a merge-on-read table writes position delete files (per partition, with
    `file_path` bounds); a plan counts, per partition and in total, the delete files Iceberg's own
    `delete_files` metadata table lists there, and its rows are the data files' rows."""
    name = bed.name("mor")
    bed.spark.sql(f"CREATE TABLE {name} (day BIGINT, id BIGINT) USING iceberg PARTITIONED BY (day) "
                  "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    for day in range(3):
        bed.spark.sql(f"INSERT INTO {name} SELECT {day}, id FROM range({day * 100}, {day * 100 + 100})")
    bed.spark.sql(f"DELETE FROM {name} WHERE id % 10 = 3 AND day < 2")
    listed = bed.spark.sql(f"SELECT partition.day, file_size_in_bytes FROM {name}.delete_files")
    assert listed, "Iceberg Spark wrote no delete file"
    by_day: dict[int, list[int]] = {}
    for day, size in listed:
        by_day.setdefault(day, []).append(size)
    assert sorted(by_day) == [0, 1], "the DELETE touched days 0 and 1 only"
    counts = lp.plan(name, None, cache=False).counts
    assert (counts.delete_files_total, counts.delete_bytes_total) == (len(listed), sum(s for _, s in listed))
    assert counts.delete_files_selected == counts.delete_files_total
    for day in range(3):
        counts = lp.plan(name, f"day = {day}", cache=False).counts
        sizes = by_day.get(day, [])
        assert (counts.delete_files_selected, counts.delete_bytes_selected) == (len(sizes), sum(sizes)), day
        assert counts.rows_selected == 100
    assert len(bed.spark.read(name)) == 300 - 20


def test_only_an_equality_delete_of_an_unpartitioned_spec_applies_in_every_partition(iceberg_catalog):
    """After partition evolution, a position delete written under the old, unpartitioned spec applies to that
    spec's files only (Iceberg's spec: same spec and partition), an equality delete under it to every file."""
    iceberg_catalog.create_namespace_if_not_exists("mor")
    arrow = pa.schema([pa.field("day", pa.int64()), pa.field("id", pa.int64())])
    table = iceberg_catalog.create_table("mor.evolved", schema=arrow)
    table.append(pa.table({"day": [0] * 10, "id": list(range(10))}, schema=arrow))
    with table.update_spec() as update:
        update.add_identity("day")
    table = table.refresh()
    table.append(pa.table({"day": [1] * 10, "id": list(range(10, 20))}, schema=arrow))
    table = table.refresh()
    old_spec = next(s.spec_id for s in table.specs().values() if not s.fields)
    written = write_position_deletes(table, [(table.location() + "/data/any.parquet", 0)])
    table = commit_deletes(table, [position_delete_file(table, written, spec_id=old_spec, bounds=False)])
    files = {row["spec_id"]: row["file_path"] for row in table.inspect.data_files().to_pylist()}
    assert len(files) == 2
    counts = {f.path: f.delete_files for f in snapshot_files(table, None, None)}
    assert counts == {files[old_spec]: 1, files[table.spec().spec_id]: 0}, (
        "the position delete stays in its spec")
    eq = write_equality_deletes(table, pa.table({"id": pa.array([3], pa.int64())}))
    table = commit_deletes(table, [equality_delete_file(table, eq, ["id"], spec_id=old_spec)])
    counts = {f.path: f.delete_files for f in snapshot_files(table, None, None)}
    assert counts == {files[old_spec]: 2, files[table.spec().spec_id]: 1}, "the equality delete is global"
    assert lp.plan("mor.evolved", "day = 1", cache=False).counts.delete_files_selected == 1
