"""Key-range slices of sorted runs read by Spark (`jobs/compaction/merge.slice_rows`), against a brute-force
oracle: for every type the merge slices on, the runs written by Spark with small pages, cut by
`merge_runs.plan_slices` at their pages' bounds; each slice's filter, built from the bounds' order keys as
Spark literals, keeps exactly the rows whose first key lies in its range (lo, hi] or is null for the null
slice, so the slices together hold every row once; Spark pushes the range down to the Parquet reader (the
pages outside it are skipped by their column index); a slice is one partition, and their union sorted within
its partitions (the job's merge) has a task per slice and no exchange."""

from __future__ import annotations

import datetime as dt
import functools
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lossless import job_part
from pyspark.sql import functions as F
from pyspark.sql import types as T

from layout.compaction.executor.merge_runs import key_pages, plan_slices

pytestmark = pytest.mark.spark

RUNS, ROWS = 3, 300
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _order_keys(paths: list[str]) -> dict[int, object]:
    """Each row's first key as `ColumnType.order_key` orders it, from pyarrow's read of the files: ints in
    the column's unit for integer-like types, bytes for strings and binary, bools."""
    keys: dict[int, object] = {}
    for path in paths:
        table = pq.read_table(path)
        k, t = table.column("k").combine_chunks(), table.schema.field("k").type
        if pa.types.is_string(t):
            k = k.cast(pa.binary())
        elif pa.types.is_date32(t) or pa.types.is_int32(t):
            k = k.view(pa.int32())
        elif pa.types.is_timestamp(t):
            assert t.unit == "us", t  # the job writes INT64 micros (Iceberg's timestamps)
            k = k.view(pa.int64())
        keys.update(zip(table.column("n").to_pylist(), k.to_pylist(), strict=True))
    return keys


def _values(kind: str, rng: random.Random) -> list:
    def one(i: int):
        if kind in ("int", "long"):
            return rng.randint(-2**31, 2**31 - 1) if kind == "int" else rng.randint(-2**62, 2**62)
        if kind == "date":
            return dt.date(1900, 1, 1) + dt.timedelta(days=rng.randint(0, 60_000))
        if kind == "timestamp":
            return EPOCH + dt.timedelta(microseconds=rng.randint(-10**15, 10**15))
        if kind == "timestamp_ntz":
            return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=rng.randint(-10**15, 10**15))
        # multi-byte characters: Spark and Parquet both order strings by their UTF-8 bytes
        if kind == "string":
            return "".join(rng.choice("aZé日\U0001f600") for _ in range(rng.randint(0, 4)))
        if kind == "binary":
            return bytearray(rng.randbytes(rng.randint(0, 3)))
        return rng.random() < 0.5  # boolean
    return [None if i % 41 == 0 else one(i) for i in range(ROWS)]


TYPES = {"int": T.IntegerType(), "long": T.LongType(), "date": T.DateType(), "timestamp": T.TimestampType(),
         "timestamp_ntz": T.TimestampNTZType(), "string": T.StringType(), "binary": T.BinaryType(),
         "boolean": T.BooleanType()}


@pytest.mark.parametrize("kind", sorted(TYPES))
def test_slices_hold_every_row_once_and_only_their_range(spark, tmp_path: Path, kind: str) -> None:
    merge = job_part("merge")
    dtype = TYPES[kind]
    schema = T.StructType([T.StructField("k", dtype), T.StructField("n", T.IntegerType(), False)])
    rng = random.Random(kind)
    paths = []
    rows = [(v, run * ROWS + i, run) for run in range(RUNS) for i, v in enumerate(_values(kind, rng))]
    runs = spark.createDataFrame(rows, T.StructType([*schema.fields, T.StructField("run", T.IntegerType())]))
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")  # as the job writes them
    try:  # a sorted file per run, in one Spark job
        (runs.repartition(RUNS, "run").sortWithinPartitions("run", "k").write.partitionBy("run")
         .option("parquet.page.row.count.limit", "16").option("parquet.block.size", str(8 * 1024))
         .parquet(str(tmp_path / "runs")))
    finally:
        spark.conf.unset("spark.sql.parquet.outputTimestampType")
    paths = [str(p) for p in sorted((tmp_path / "runs").glob("run=*/part-*.parquet"))]
    assert len(paths) == RUNS
    files = [key_pages(p, None, ["k"]) for p in paths]
    assert all(f.unsorted is None for f in files), [f.unsorted for f in files]
    slices = plan_slices(files, 6)
    assert len(slices) > 2, "small pages give several slices"
    keys = _order_keys(paths)
    scan = spark.read.schema(schema).parquet(*paths)
    frames = []
    for i, piece in enumerate(slices):
        frame = merge.slice_rows(scan, "k", dtype, piece)
        assert frame.rdd.getNumPartitions() == 1
        plan = frame._jdf.queryExecution().executedPlan().toString()
        if not piece.nulls and kind != "boolean":  # Parquet's filters order no booleans
            assert piece.lo is None or "GreaterThan(k," in plan, plan
            assert piece.hi is None or "LessThanOrEqual(k," in plan, plan
        frames.append(frame.select("n", F.lit(i).alias("slice")))
    merged = functools.reduce(lambda a, b: a.union(b), frames).sortWithinPartitions("n")
    spark.conf.set(merge.UNION_CONF, "false")  # as the job's write sets it: a task per slice
    try:
        assert merged.rdd.getNumPartitions() == len(slices)
        assert "Exchange" not in merged._jdf.queryExecution().executedPlan().toString()  # no shuffle
        got = merged.collect()  # one Spark job for all slices
    finally:
        spark.conf.unset(merge.UNION_CONF)
    for n, i in got:
        piece, key = slices[i], keys[n]
        if piece.nulls:
            assert key is None
        else:
            assert (key is not None and (piece.lo is None or key > piece.lo)
                    and (piece.hi is None or key <= piece.hi)), \
                (key, piece.lo, piece.hi)
    assert sorted(n for n, _ in got) == list(range(RUNS * ROWS))  # every row in exactly one slice
