"""Sorted runs merged without a shuffle (jobs/compaction/merge.py), through the real pipeline on the test
session's Spark: the runs lakesort wrote on two nights merged into one by a full compaction, with the same
rows as pyiceberg reads them (by field id, floats bit for bit), every output sorted by the keys (no exchange
in the slices' plan: tests/compaction/test_merge_slices_in_spark.py); runs sorted by their first key alone
merged into sorted files; the merge switched off by Spark conf."""

from __future__ import annotations

import datetime as dt
import logging
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from iceberg_bed import assert_same_rows
from lossless import OWNER, assert_same, by_field_id, in_process_submit, job_part, load_job, run
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DateType, DoubleType, LongType, NestedField, StringType, TimestamptzType

import layout.compaction.pipeline.driver
from layout.catalog import stamp_of
from layout.io import resolve
from layout.parquet import BoundaryOrder, ParquetFile
from layout.spec import parse_spec

pytestmark = pytest.mark.spark

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True), NestedField(2, "day", DateType()),
    NestedField(3, "name", StringType()), NestedField(4, "price", DoubleType()),
    NestedField(5, "ts", TimestamptzType()), NestedField(6, "region", StringType()),
)
MERGED = "merging"  # what the job logs when it merges groups (`merge.plan_merges`)


@pytest.fixture
def job_here(spark, monkeypatch):
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", in_process_submit(spark, load_job()))
    spark.conf.set("spark.lakesort.compact.mergeMinBytes", "0")  # these groups are KiBs: merged all the same
    yield
    spark.conf.unset("spark.lakesort.compact.mergeMinBytes")


def _spec(name: str, **extra):
    doc = {"table": name, "owner": OWNER, "sort": {"keys": [{"column": "day"}, {"column": "id"}]},
           "target_file_size": "64KiB", "max_sorted_runs": 8, "writer": {"page_row_count_limit": 500}}
    doc.update(extra)
    return parse_spec(doc, source="test")


def _rows(start: int, n: int, rng: random.Random) -> pa.Table:
    ids = list(range(start, start + n))
    rng.shuffle(ids)
    day0 = dt.date(2024, 1, 1)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "day": pa.array([day0 + dt.timedelta(days=i * 37 % 90) for i in ids], pa.date32()),
        "name": pa.array([None if i % 13 == 0 else f"name-{i * 7919 % 10007}" for i in ids]),
        "price": pa.array([float("nan") if i % 17 == 0 else -0.0 if i % 19 == 0 else i * 0.25 for i in ids]),
        "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i * 61) for i in ids],
                       pa.timestamp("us", tz="UTC")),
        "region": pa.array([("north", "south")[i % 2] for i in ids]),
    }, schema=SCHEMA.as_arrow())


def _nights(cat, name: str, partitioned: bool) -> object:
    if "." in name and not cat.namespace_exists(name.split(".")[0]):
        cat.create_namespace(name.split(".")[0])
    """The table after two nights: each appended rows (fewer the second night, so the policy keeps both runs)
    and compacted without force: two sorted runs per partition."""
    spec = (PartitionSpec(PartitionField(6, 1000, IdentityTransform(), "region")) if partitioned
            else PartitionSpec())
    table = cat.create_table(name, SCHEMA, partition_spec=spec)
    rng = random.Random(7)
    start = 0
    for n in (9_000, 2_000):
        table.append(_rows(start, n, rng))
        start += n
        run(name, spec=_spec(name), force=False)
        table = table.refresh()
    return table


def _sorted_outputs(table) -> int:
    files = [t.file.file_path for t in table.scan().plan_files()]
    for path in files:
        filesystem, inner = resolve(path)
        rows = pq.read_table(inner, filesystem=filesystem, columns=["day", "id"]).to_pylist()
        keys = [(r["day"], r["id"]) for r in rows]
        assert keys == sorted(keys), f"{path} is not sorted by (day, id)"
        pf = ParquetFile.open(inner, filesystem)
        for rg in range(pf.num_row_groups):
            index = pf.column_index(rg, "day")
            assert (index is not None
                    and (len(index.null_pages) == 1 or index.boundary_order == BoundaryOrder.ASCENDING))
    return len(files)


def merged_and_judged(catalog, name: str, partitioned: bool, caplog, *, java=None):
    """Two nights' runs merged by a full compaction, judged by pyiceberg's read (and `java()`'s, Iceberg's own
    reader, when given) before and after; every output sorted. Also run on S3 (tests/object_stores)."""
    table = _nights(catalog, name, partitioned)
    runs = {stamp_of(t.file.file_path) for t in table.scan().plan_files()}
    assert len(runs) == 2, f"two nights should leave two sorted runs, found {runs}"
    before, before_java = by_field_id(table), java() if java else None
    caplog.set_level(logging.INFO, logger="lakesort.compact")
    caplog.clear()
    result = run(name, spec=_spec(name), force=True)
    assert any(MERGED in r.getMessage() for r in caplog.records), (
        "the full compaction sorted instead of merging")
    table = table.refresh()
    assert result.files_removed > 0
    assert_same(before, by_field_id(table))
    if java:
        assert_same_rows(before_java, java(), what=f"{name} read by Iceberg Spark")
    assert _sorted_outputs(table) >= (4 if partitioned else 2)  # 64 KiB files: several slices per group
    return table


def test_runs_are_merged_without_a_shuffle_and_nothing_is_lost(bed, job_here, spark, caplog):
    """Two partitions of two runs each, every output file merged in three pieces and stitched, judged by
    pyiceberg's read and by Iceberg's own Java reader (the test bed's Iceberg Spark) before and after, on the
    same catalog file. (An unpartitioned table: on S3, in
    tests/object_stores/test_lossless_on_s3.py.)"""
    name = bed.name("runs")
    # each file merged by 3 tasks, then stitched
    spark.conf.set("spark.lakesort.compact.mergePiecesPerFile", "3")
    try:
        merged_and_judged(bed.catalog, name, True, caplog, java=lambda: bed.spark.read(name))
    finally:
        spark.conf.unset("spark.lakesort.compact.mergePiecesPerFile")
    assert any("stitched from" in r.getMessage() for r in caplog.records)


def test_runs_sorted_by_their_first_key_alone_merge_into_sorted_files(
    iceberg_catalog, job_here, spark, caplog, tmp_path, monkeypatch
):
    """Two files sorted by `day` (their page indexes say so) but not by `id` within a day: each slice is
    sorted by every key in its task, so the merged files are sorted all the same, and nothing is lost."""
    iceberg_catalog.create_namespace("t")
    table = iceberg_catalog.create_table("t.liar", SCHEMA)
    rng = random.Random(3)
    paths = []
    for k in range(2):
        data = _rows(k * 2_000, 2_000, rng)
        data = data.sort_by([("day", "ascending")])  # ids shuffled within each day
        path = tmp_path / f"liar{k}.parquet"
        pq.write_table(data, path, write_page_index=True, max_rows_per_page=200)
        paths.append(str(path))
    table.add_files(paths)
    table = table.refresh()
    before = by_field_id(table)
    merge = job_part("merge")
    real = merge.why_not
    # These files are other writers' (no lakesort run): take them as runs, so the merge is attempted.
    monkeypatch.setattr(merge, "why_not", lambda job, group: real(job, group.model_copy(update={
        "inputs": tuple(f.model_copy(update={"sorted_run": "liar"}) for f in group.inputs)})))
    caplog.set_level(logging.INFO, logger="lakesort.compact")
    run("t.liar", spec=_spec("t.liar"), force=True)
    assert any(MERGED in r.getMessage() for r in caplog.records)
    table = table.refresh()
    assert_same(before, by_field_id(table))
    _sorted_outputs(table)


def test_the_merge_can_be_switched_off(iceberg_catalog, job_here, spark, caplog, tmp_path, monkeypatch):
    """`spark.lakesort.compact.mergeRuns=false`: groups of runs are sorted
    (what the benchmarks compare with)."""
    iceberg_catalog.create_namespace("t")
    table = iceberg_catalog.create_table("t.off", SCHEMA)
    paths = []
    for k in range(2):  # two sorted files, registered as lakesort runs would be if they were merged
        path = tmp_path / f"run{k}.parquet"
        pq.write_table(
            _rows(k * 1_000, 1_000, random.Random(k)).sort_by([("day", "ascending"), ("id", "ascending")]),
            path,
            write_page_index=True,
        )
        paths.append(str(path))
    table.add_files(paths)
    before = by_field_id(table.refresh())
    merge = job_part("merge")
    real = merge.why_not
    # Other writers' files, taken as runs (as in the test above): only the switch keeps them from a merge.
    monkeypatch.setattr(merge, "why_not", lambda job, group: real(job, group.model_copy(update={
        "inputs": tuple(f.model_copy(update={"sorted_run": "r"}) for f in group.inputs)})))
    caplog.set_level(logging.INFO, logger="lakesort.compact")
    spark.conf.set("spark.lakesort.compact.mergeRuns", "false")
    try:
        run("t.off", spec=_spec("t.off"), force=True)
    finally:
        spark.conf.unset("spark.lakesort.compact.mergeRuns")
    assert not any(MERGED in r.getMessage() for r in caplog.records)
    assert_same(before, by_field_id(table.refresh()))
