"""Nothing is lost: tables built with pyiceberg the way users build them (evolving schemas, every type,
every partition transform, partition evolution, files of any name, a concurrent ingest), compacted through
the real pipeline (planning, the job's own code on Spark, the proof, the commit), and compared as pyiceberg
reads them before and after: by field id, floats bit for bit (`tests/lossless.py`).

The job runs on the test session's SparkSession (`in_process_submit`): a spark-submit costs about a minute
here, and the job code, planning, staging, the checks and the commit are the real ones.

The proof's refusals, and a failure after the commit, are tests/compaction/test_lossless_proof.py's.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lossless import (
    assert_same,
    by_field_id,
    committed,
    in_process_submit,
    load_job,
    rows_for,
    run,
)
from pyiceberg.partitioning import PartitionField, PartitionFieldValue, PartitionKey, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

import layout.compaction.pipeline.driver
from layout.errors import UsageError
from layout.io import resolve
from layout.upkeep.cleanup import cleanup

pytestmark = pytest.mark.spark

T0 = dt.datetime(2024, 2, 27, 22, 0, 0)


@pytest.fixture
def job_here(spark, monkeypatch):
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", in_process_submit(spark, load_job()))


def _without_ids(field: pa.Field) -> pa.Field:
    """The field with no field id anywhere in it (a file another writer wrote without ids)."""
    t = field.type
    if pa.types.is_struct(t):
        t = pa.struct([_without_ids(t.field(i)) for i in range(t.num_fields)])
    elif pa.types.is_large_list(t):
        t = pa.large_list(_without_ids(t.value_field))
    elif pa.types.is_list(t):
        t = pa.list_(_without_ids(t.value_field))
    return pa.field(field.name, t, field.nullable)


def field_ids_everywhere(path: str) -> list[str]:
    """Names of the Parquet schema nodes of a file that carry no field id (none: every node has one)."""
    missing = []

    def visit(field: pa.Field, prefix: str):
        name = f"{prefix}{field.name}"
        if b"PARQUET:field_id" not in (field.metadata or {}):
            missing.append(name)
        t = field.type
        children = [t.field(i) for i in range(t.num_fields)] if pa.types.is_struct(t) else \
            [t.value_field] if pa.types.is_list(t) or pa.types.is_large_list(t) else \
            [t.key_field, t.item_field] if pa.types.is_map(t) else []
        for child in children:
            visit(child, name + ".")

    filesystem, where = resolve(path)  # a local file or an object (the table's storage settings)
    for field in pq.read_schema(where, filesystem=filesystem):
        visit(field, "")
    return missing



def outputs_have_all_ids(table) -> None:
    for task in table.refresh().scan().plan_files():
        assert field_ids_everywhere(task.file.file_path) == [], task.file.file_path


# ---- schema evolution and file names -------------------------------------------------------------


def test_schema_evolution_and_file_names_are_lossless(iceberg_catalog, job_here, tmp_path):
    cat = iceberg_catalog
    cat.create_namespace("t")
    table = cat.create_table("t.evo", Schema(
        NestedField(1, "id", IntegerType(), required=True), NestedField(2, "a", StringType()),
        NestedField(3, "b", StringType()), NestedField(4, "n", IntegerType()),
        NestedField(5, "f", FloatType()), NestedField(6, "d", DecimalType(9, 2)),
        NestedField(7, "tags", ListType(8, StringType())),
    ))
    table.append(rows_for(table, 0, 40))
    with table.update_schema() as u:  # a rename: older rows must keep their values
        u.rename_column("a", "a_renamed")
    table.append(rows_for(table, 40, 40))
    with table.update_schema() as u:  # swap two names
        u.rename_column("a_renamed", "tmp")
        u.rename_column("b", "a_renamed")
    with table.update_schema() as u:
        u.rename_column("tmp", "b")
    table.append(rows_for(table, 80, 40))
    with table.update_schema() as u:  # drop and re-add under the same name: the old values must not return
        u.delete_column("n")
    with table.update_schema() as u:
        u.add_column("n", LongType())
    with table.update_schema() as u:  # promotions
        u.update_column("id", LongType())
        u.update_column("f", DoubleType())
        u.update_column("d", DecimalType(18, 2))
    table.append(rows_for(table, 120, 40))
    # Files of any legal name, registered with add_files: `_` and `.` prefixes (Spark's listing skips those),
    # a space, a percent sign and non-ASCII. One has no field ids at all: read through the name mapping.
    extra = tmp_path / "extra files"
    extra.mkdir()
    names = ["_underscore.parquet", ".dot.parquet", "a b%20c é.parquet", "no-ids.parquet"]
    for k, name in enumerate(names):
        data = rows_for(table, 1000 + 10 * k, 10)
        if name == "no-ids.parquet":
            data = data.cast(pa.schema([_without_ids(f) for f in data.schema]))
        pq.write_table(data, extra / name)
    table.add_files([str(extra / n) for n in names])
    table = table.refresh()
    before = by_field_id(table)
    assert len(before[1]) == 200

    result = run("t.evo")
    table = table.refresh()
    assert result.files_removed == 8 and committed(table)
    assert_same(before, by_field_id(table))
    outputs_have_all_ids(table)
    # A second compaction replaces the first one's staged files: older snapshots still reference them.
    # Cleanup (no grace period) must keep every snapshot of the history readable, with its own rows.
    run("t.evo")
    table = table.refresh()
    history = {s.snapshot_id: by_field_id(table, s.snapshot_id) for s in table.snapshots()}
    cleaned = cleanup(table, grace_hours=0)
    assert cleaned.kept_referenced >= 2
    table = table.refresh()
    for snapshot_id, rows in history.items():
        assert_same(rows, by_field_id(table, snapshot_id))


# ---- every type -----------------------------------------------------------------------------------


EVERY_TYPE = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "flag", BooleanType()), NestedField(3, "i", IntegerType()),
    NestedField(4, "f", FloatType()), NestedField(5, "x", DoubleType()),
    NestedField(6, "d9", DecimalType(9, 2)), NestedField(7, "d18", DecimalType(18, 6)),
    NestedField(8, "d38", DecimalType(38, 10)), NestedField(9, "day", DateType()),
    NestedField(10, "ts", TimestampType()), NestedField(11, "tstz", TimestamptzType()),
    NestedField(12, "s", StringType()), NestedField(13, "bin", BinaryType()),
    NestedField(14, "point", StructType(
        NestedField(15, "px", DoubleType()),
        NestedField(16, "inner", StructType(NestedField(17, "name", StringType()),
                                            NestedField(18, "n", IntegerType()))),
    )),
    NestedField(19, "items", ListType(20, StructType(NestedField(21, "sku", StringType()),
                                                     NestedField(22, "qty", IntegerType())),
                                      element_required=False)),
    NestedField(23, "attrs", MapType(24, StringType(), 25, ListType(26, DoubleType(), element_required=False),
                                     value_required=False)),
    NestedField(27, "req", StringType(), required=True),
)


@pytest.mark.parametrize("pieces", [False, True], ids=["whole", "in-pieces"])
def test_every_type_is_lossless(iceberg_catalog, job_here, spark, pieces):
    """With `pieces`, the output file is written by several tasks (spark.lakesort.compact.pieceBytes at 2 KiB)
    and stitched from their row groups, its footer given the list and map field ids in the same pass."""
    cat = iceberg_catalog
    cat.create_namespace("t")
    table = cat.create_table("t.types", EVERY_TYPE)
    for start in (0, 60, 120):
        table.append(rows_for(table, start, 60))
    before = by_field_id(table)
    if pieces:
        spark.conf.set("spark.lakesort.compact.pieceBytes", "2048")
    try:
        run("t.types")
    finally:
        spark.conf.unset("spark.lakesort.compact.pieceBytes")
    table = table.refresh()
    assert committed(table)
    assert_same(before, by_field_id(table))
    outputs_have_all_ids(table)
    if pieces:
        (task,) = table.scan().plan_files()
        path = task.file.file_path.removeprefix("file://")
        assert (path.rsplit("/", 1)[1].startswith("stitched-")
                and pq.ParquetFile(path).num_row_groups > 2), path
    # Timestamps as INT64 microseconds with the UTC flag Iceberg's types ask for (never INT96).
    for task in table.scan().plan_files():
        schema = pq.ParquetFile(task.file.file_path.removeprefix("file://")).schema
        assert "INT96" not in str(schema)
        arrow = schema.to_arrow_schema()
        assert (arrow.field("ts").type == pa.timestamp("us")
                and arrow.field("tstz").type.tz in ("UTC", "+00:00"))


@pytest.mark.parametrize(("column", "named"), [
    (NestedField(2, "u", UUIDType()), "`u` has type uuid"), (NestedField(2, "fx", FixedType(8)),
                                                             "`fx` has type fixed"),
    (NestedField(2, "t", TimeType()), "`t` has type time"),
    (NestedField(2, "nested", StructType(NestedField(3, "u", UUIDType()))), "`nested.u` has type uuid"),
], ids=["uuid", "fixed", "time", "nested-uuid"])
def test_types_spark_cannot_write_are_refused_before_spark(iceberg_catalog, job_here, column, named):
    cat = iceberg_catalog
    cat.create_namespace("t")
    cat.create_table("t.refused", Schema(NestedField(1, "id", LongType(), required=True), column))
    with pytest.raises(UsageError, match=named):
        run("t.refused")


# ---- partition transforms and partition evolution --------------------------------------------------


PARTITIONED = Schema(
    NestedField(1, "id", LongType(), required=True), NestedField(2, "cat", StringType()),
    NestedField(3, "ts", TimestampType()), NestedField(4, "tstz", TimestamptzType()),
    NestedField(5, "day", DateType()), NestedField(6, "amount", DecimalType(12, 2)),
    NestedField(7, "blob", BinaryType()),
)


@pytest.mark.parametrize("fields", [
    [(2, IdentityTransform(), "cat"), (1, BucketTransform(4), "id_bucket"), (4, DayTransform(), "tstz_day")],
    [(2, TruncateTransform(6), "cat_trunc"), (5, YearTransform(), "day_year"),
     (3, HourTransform(), "ts_hour")],
    [(3, MonthTransform(), "ts_month"), (6, TruncateTransform(100), "amount_trunc"),
     (7, VoidTransform(), "blob_void")],
], ids=["identity-bucket-day", "truncate-year-hour", "month-decimal-void"])
def test_every_partition_transform(iceberg_catalog, job_here, fields):
    cat = iceberg_catalog
    cat.create_namespace("t")
    spec = PartitionSpec(*[PartitionField(source_id=s, field_id=1000 + i, transform=t, name=n)
                           for i, (s, t, n) in enumerate(fields)])
    table = cat.create_table("t.parts", PARTITIONED, partition_spec=spec)
    for start in (0, 50):
        table.append(rows_for(table, start, 50))
    before = by_field_id(table)
    files_before = {t.file.file_path: t.file.partition for t in table.scan().plan_files()}
    run("t.parts")
    table = table.refresh()
    assert committed(table)
    assert_same(before, by_field_id(table))
    _partitions_match_rows(table)
    assert set(files_before.values()) == {t.file.partition for t in table.scan().plan_files()}


def _partitions_match_rows(table) -> None:
    """Each data file's partition values are the current spec's transforms of every row it holds."""
    spec, schema = table.spec(), table.schema()
    for task in table.scan().plan_files():
        assert task.file.spec_id == spec.spec_id
        filesystem, where = resolve(task.file.file_path)
        data = pq.read_table(where, filesystem=filesystem)
        for pos, field in enumerate(spec.fields):
            source = schema.find_field(field.source_id)
            values = field.transform.pyarrow_transform(source.field_type)(data.column(source.name)) \
                .to_pylist()
            for v in set(values):
                key = PartitionKey([PartitionFieldValue(field, v)], PartitionSpec(field), schema).partition
                assert key[0] == task.file.partition[pos], (task.file.file_path, field.name, v)


def test_partition_evolution_rewrites_into_the_current_spec(iceberg_catalog, job_here):
    cat = iceberg_catalog
    cat.create_namespace("t")
    table = cat.create_table("t.evolve", PARTITIONED, partition_spec=PartitionSpec(
        PartitionField(source_id=3, field_id=1000, transform=DayTransform(), name="ts_day")))
    table.append(rows_for(table, 0, 80))
    with table.update_spec() as u:  # day -> month, as owners do once a table grows
        u.remove_field("ts_day")
        u.add_field("ts", MonthTransform(), "ts_month")
    table = table.refresh()
    table.append(rows_for(table, 80, 40))
    before = by_field_id(table)
    result = run("t.evolve", force=False)
    table = table.refresh()
    assert not result.nothing_to_do and committed(table)
    assert_same(before, by_field_id(table))
    assert {t.file.spec_id for t in table.scan().plan_files()} == {table.spec().spec_id}
    _partitions_match_rows(table)


# ---- concurrency: an ingest appending to the same partitions during the whole run ---------------------


def test_commit_is_retried_under_a_continuous_ingest(iceberg_catalog, job_here):
    from layout.catalog import load_catalog

    cat = iceberg_catalog
    cat.create_namespace("t")
    table = cat.create_table("t.stream", PARTITIONED, partition_spec=PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=TruncateTransform(3), name="cat3")))
    for start in (0, 30):
        table.append(rows_for(table, start, 30))
    before = by_field_id(table)
    stop, appended, errors = threading.Event(), [], []

    def ingest():
        other = load_catalog().load_table("t.stream")  # its own catalog connection, as another writer has
        n = 10_000
        while not stop.is_set():
            try:
                other = other.refresh()
                other.append(rows_for(other, n, 5))
                appended.append(n)
                n += 5
            except Exception as exc:  # noqa: BLE001 - a lost race of the ingest itself: it retries
                errors.append(exc)
            time.sleep(0.1)

    writer = threading.Thread(target=ingest, daemon=True)
    writer.start()
    try:
        time.sleep(0.3)
        result = run("t.stream")
        time.sleep(0.3)
    finally:
        stop.set()
        writer.join(timeout=30)
    table = table.refresh()
    assert result.snapshot_id is not None and len(appended) >= 3
    expected = by_field_id_with(table, before, appended)
    assert_same(expected, by_field_id(table))


def by_field_id_with(table, before, starts):
    """`before` plus the ingested rows, in the oracle's canonical form."""
    from lossless import _canonical

    arrow = pa.concat_tables([rows_for(table, s, 5) for s in starts]).cast(table.schema().as_arrow())
    schema = table.schema()
    columns = {schema.find_field(n).field_id: [_canonical(v) for v in arrow.column(n).to_pylist()]
               for n in arrow.column_names}
    ids = list(before)
    rows = list(zip(*[before[i] for i in ids])) + list(zip(*[columns[i] for i in ids]))
    rows.sort(key=repr)
    return {fid: [r[k] for r in rows] for k, fid in enumerate(ids)}


# ---- random schema evolution interleaved with appends and compactions --------------------------------


STEPS = st.lists(st.sampled_from(["add", "rename", "drop", "promote", "swap", "append", "compact"]),
                 min_size=3, max_size=6)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(steps=STEPS)
def test_random_evolution_with_compactions(iceberg_catalog, job_here, steps):
    cat = iceberg_catalog
    name = f"t.rand{abs(hash(tuple(steps))) % 10**8}"
    if ("t",) not in cat.list_namespaces():
        cat.create_namespace("t")
    table = cat.create_table(name, Schema(NestedField(1, "id", LongType(), required=True),
                                          NestedField(2, "c0", IntegerType()),
                                          NestedField(3, "c1", StringType())))
    n = 0
    table.append(rows_for(table, n, 20))
    n += 20
    for counter, step in enumerate([*steps, "compact"], start=1):
        table = table.refresh()
        columns = [f for f in table.schema().fields if f.name != "id"]
        if step == "add":
            with table.update_schema() as u:
                u.add_column(f"new{counter}", IntegerType())
        elif step == "rename" and columns:
            with table.update_schema() as u:
                u.rename_column(columns[0].name, f"r{counter}")
        elif step == "drop" and len(columns) > 1:
            with table.update_schema() as u:
                u.delete_column(columns[-1].name)
        elif step == "promote":
            ints = [f for f in columns if isinstance(f.field_type, IntegerType)]
            if ints:
                with table.update_schema() as u:
                    u.update_column(ints[0].name, LongType())
        elif step == "swap" and len(columns) >= 2:
            a, b = columns[0].name, columns[1].name
            with table.update_schema() as u:
                u.rename_column(a, f"tmp{counter}")
                u.rename_column(b, a)
            with table.update_schema() as u:
                u.rename_column(f"tmp{counter}", b)
        elif step == "append":
            table.append(rows_for(table, n, 20))
            n += 20
        elif step == "compact":
            before = by_field_id(table)
            run(name)
            assert_same(before, by_field_id(table.refresh()))
