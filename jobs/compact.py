"""Sort-and-compact job: `spark-submit jobs/compact.py --plan PLAN.json --manifest MANIFEST.json`.

For each group of the rewrite plan: read exactly the planned input files as Iceberg defines their rows
(pyiceberg's reader in the executors, `layout.compaction.inputs`: field ids, name mapping, promotions; every
file's row count checked against its manifest), tag each row with the partition of the table's current
spec, apply the merge rule for keyed tables, sort (linear: range-partition on the sort keys, then sort
within partitions, so output files hold disjoint ordered key ranges; zorder: the same on interleaved key
bits), size the output file count from the input bytes, and write Parquet with the spec's writer
settings and Iceberg field ids to a staging directory under the table's location. The input's row count
and content fingerprint are observed in the same pass as the write. The manifest records it all, with
each output file's partition values; the commit step (outside Spark) re-checks the staged files against
it and against Iceberg's own metadata before anything is committed.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from pyiceberg import types as I
from pyiceberg.schema import Schema
from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DateType, NumericType, StringType, TimestampNTZType, TimestampType
from pyspark.sql.window import Window

from layout.compaction.fingerprint import SPARK_CONF as FINGERPRINT_CONF
from layout.compaction.fingerprint import spark_row_hash_expr
from layout.compaction.inputs import GROUP, PART, PART_KEY, InputSource, tagged_batches
from layout.compaction.planner import RewritePlan
from layout.io import find_parquet_files
from layout.manifest import StagedFile, StagedGroup, StagedManifest
from layout.parquet import ParquetFile
from layout.parquet.field_ids import patch_path

log = logging.getLogger("lakesort.compact")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jobs/compact.py", description=__doc__.splitlines()[0])
    parser.add_argument("--plan", required=True, help="the rewrite plan (JSON) from `lakesort plan-rewrite`")
    parser.add_argument("--manifest", required=True, help="where to write the staged-output manifest (JSON)")
    parser.add_argument("--groups", help="only these group ids, comma separated (default: all)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")



    plan = RewritePlan.from_json(Path(args.plan).read_text())
    wanted = {int(g) for g in args.groups.split(",")} if args.groups else None
    groups = [g for g in plan.groups if wanted is None or g.group_id in wanted]
    spark = (SparkSession.builder.appName(f"lakesort-compact {plan.table} {plan.run_id}")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    started = time.perf_counter()
    try:
        staged = compact_groups(spark, plan, groups)
        write_manifest(spark, plan, staged, args.manifest, time.perf_counter() - started)
    finally:
        spark.stop()
    return 0


SESSION_CONF = {
    # Iceberg requires INT64 microseconds for timestamps; Spark's default for TimestampType is INT96.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # What the fingerprint's xxhash64 needs (hashing maps: their entries keep their order from read to
    # write, so the hash Spark refuses on maps by default is deterministic here).
    **FINGERPRINT_CONF,
}


def staging_dir(plan) -> str:
    """Staged files live under the table's data directory, where they stay once committed."""
    return f"{plan.table_location.rstrip('/')}/data/lakesort-staging/{plan.run_id}"


def spark_schema(plan):
    """The table's schema as Spark types, with Iceberg's nullability and each struct field's Iceberg field
    id as `parquet.field.id` (parquet-mr writes it: spark.sql.parquet.fieldId.write.enabled is on)."""

    return T.StructType([_struct_field(f) for f in Schema.model_validate_json(plan.table_schema_json).fields])


def _struct_field(field):

    return T.StructField(field.name, _spark_type(field.field_type), nullable=not field.required,
                         metadata={"parquet.field.id": field.field_id})


def _spark_type(t):
    """Iceberg type -> Spark type. Types Spark cannot write (uuid, fixed, time) are refused at plan time
    (`layout.compaction.admission`); reaching one here is a bug."""

    simple = {I.BooleanType: T.BooleanType, I.IntegerType: T.IntegerType, I.LongType: T.LongType,
              I.FloatType: T.FloatType, I.DoubleType: T.DoubleType, I.DateType: T.DateType,
              I.StringType: T.StringType, I.BinaryType: T.BinaryType,
              # Iceberg timestamptz is an instant (Spark TimestampType); timestamp is wall-clock (NTZ).
              I.TimestamptzType: T.TimestampType, I.TimestampType: T.TimestampNTZType}
    for iceberg, spark in simple.items():
        if type(t) is iceberg:
            return spark()
    if isinstance(t, I.DecimalType):
        return T.DecimalType(t.precision, t.scale)
    if isinstance(t, I.StructType):
        return T.StructType([_struct_field(f) for f in t.fields])
    if isinstance(t, I.ListType):
        return T.ArrayType(_spark_type(t.element_type), containsNull=not t.element_required)
    if isinstance(t, I.MapType):
        return T.MapType(_spark_type(t.key_type), _spark_type(t.value_type), valueContainsNull=not t.value_required)
    raise TypeError(f"Iceberg type {t} has no Spark type lakesort writes; the planner should have refused it")


def nested_field_ids(plan) -> dict[tuple[str, ...], int]:
    """Iceberg ids of list elements and map keys/values by their Parquet path as Spark writes them
    (`x.list.element`, `x.key_value.key`, `x.key_value.value`): parquet-mr gets ids only for struct fields."""

    ids: dict[tuple[str, ...], int] = {}

    def visit(t, path):
        if isinstance(t, I.StructType):
            for f in t.fields:
                visit(f.field_type, (*path, f.name))
        elif isinstance(t, I.ListType):
            ids[(*path, "list", "element")] = t.element_id
            visit(t.element_type, (*path, "list", "element"))
        elif isinstance(t, I.MapType):
            ids[(*path, "key_value", "key")] = t.key_id
            ids[(*path, "key_value", "value")] = t.value_id
            visit(t.key_type, (*path, "key_value", "key"))
            visit(t.value_type, (*path, "key_value", "value"))

    visit(Schema.model_validate_json(plan.table_schema_json).as_struct(), ())
    return ids


def add_nested_field_ids(spark, plan, target: str) -> None:
    """Give list elements and map keys/values their Iceberg field ids in every written footer
    (`layout.parquet.field_ids`), in the executors: a footer splice, the file rewritten once."""

    ids = nested_field_ids(plan)
    if not ids:
        return
    scheme = target.split("://", 1)[0] + "://" if "://" in target else ""
    paths = [scheme + p if scheme and not p.startswith(scheme) else p for _, p in find_parquet_files(target)]
    t0 = time.perf_counter()
    slices = max(1, min(len(paths), spark.sparkContext.defaultParallelism * 2))
    changed = sum(spark.sparkContext.parallelize(paths, slices).map(lambda p: patch_path(p, ids)).collect())
    log.info("added list/map field ids to %d of %d file(s) in %.1fs", changed, len(paths), time.perf_counter() - t0)


def read_inputs(spark, plan, groups):
    """The planned files' rows as Iceberg defines them (`layout.compaction.inputs`: pyiceberg's reader in the
    executors), tagged with group and partition key. Files are spread over tasks balanced by bytes."""


    schema = spark_schema(plan)
    out_schema = T.StructType([*schema.fields, T.StructField(GROUP, T.IntegerType(), False),
                               T.StructField(PART, T.StringType(), False), T.StructField(PART_KEY, T.StringType(), False)])
    target = to_arrow_schema(out_schema, timezone="UTC")  # the job's session time zone
    files = sorted(((g.group_id, f) for g in groups for f in g.inputs), key=lambda x: -x[1].size)
    tasks = max(1, min(len(files), spark.sparkContext.defaultParallelism * 4))
    slices: list[list] = [[] for _ in range(tasks)]
    for i, (gid, f) in enumerate(files):  # round robin over size-descending files: balanced bytes
        slices[i % tasks].append((gid, f.path, f.spec_id, f.partition_key, f.rows, f.size))
    rows = [r for s in slices for r in s]
    file_schema = T.StructType([T.StructField("group_id", T.IntegerType()), T.StructField("path", T.StringType()),
                                T.StructField("spec_id", T.IntegerType()), T.StructField("partition", T.StringType()),
                                T.StructField("record_count", T.LongType()), T.StructField("size", T.LongType())])
    listing = spark.createDataFrame(spark.sparkContext.parallelize(rows, tasks), file_schema)
    source = InputSource(metadata_location=plan.metadata_location, io_properties=dict(plan.io_properties),
                         schema_json=plan.table_schema_json)
    spec_id = plan.partition_spec_id

    def read(batches):
        return tagged_batches(source, batches, target, spec_id)

    return listing.mapInArrow(read, out_schema), [f.name for f in schema.fields]


def compact_groups(spark, plan, groups):
    """All groups in one job: rows tagged with their group and current-spec partition, range-partitioned
    on (group, sort keys), written with partitionBy(group, partition) so that no file mixes partitions.

    The read input is persisted: the files are read from storage once, and the per-group counts and
    fingerprints come from exact aggregations over that same data. (Observed metrics would not do:
    the range partitioner's sampling job runs the plan again and they would count rows twice.)
    """


    t0 = time.perf_counter()
    if not groups:
        return []
    for key, value in SESSION_CONF.items():
        spark.conf.set(key, value)
    df, columns = read_inputs(spark, plan, groups)
    base = df.persist(StorageLevel.MEMORY_AND_DISK)
    counts = base.groupBy(GROUP).agg(F.count(F.lit(1)).alias("rows")).collect()
    read = {r[GROUP]: r["rows"] for r in counts}
    df = base
    if plan.keys is not None:
        order = F.col(plan.keys.sequence)
        order = order.desc_nulls_last() if plan.keys.merge == "deduplicate" else order.asc_nulls_last()
        # Keys are unique per current-spec partition: a partition column is a function of the row.
        window = Window.partitionBy(GROUP, PART, *plan.keys.columns).orderBy(order)
        df = df.withColumn("__lakesort_rank", F.row_number().over(window)).where("__lakesort_rank = 1")
        df = df.drop("__lakesort_rank").persist(StorageLevel.MEMORY_AND_DISK)
    row_hash = F.expr(spark_row_hash_expr(columns)).cast("decimal(38,0)")
    expected = {r[GROUP]: (r["rows"], r["hash"]) for r in df.groupBy(GROUP).agg(
        F.count(F.lit(1)).alias("rows"), F.sum(row_hash).alias("hash")).collect()}
    part_rows = {(r[GROUP], r[PART]): (r[PART_KEY], r["rows"]) for r in df.groupBy(GROUP, PART).agg(
        F.first(PART_KEY).alias(PART_KEY), F.count(F.lit(1)).alias("rows")).collect()}
    # Output files: each (group, partition) gets its own file ids (one, or one per key-range bucket when it
    # needs several, by its share of the group's rows; buckets by the rank of the whole sort key, so equal
    # keys share a file). Every file id goes to a task of its own: a hash partitioning on a key chosen per
    # id so that Spark's own hash puts id i in task i (`_exact_keys`). (A range partitioning on the ids lets
    # the sampled bounds put several ids into one task; on the ids and the sort keys it splits partitions
    # at arbitrary row quantiles into extra files.)
    wanted = {g.group_id: max(1, g.output_files) for g in groups}
    base_id, files_of, offset = {}, {}, 0
    for (gid, part), (_, rows) in sorted(part_rows.items()):
        n = max(1, round(wanted[gid] * rows / (expected[gid][0] or 1)))
        base_id[f"{gid}/{part}"], files_of[f"{gid}/{part}"] = offset, n
        offset += n
    offset = max(1, offset)
    pair = F.concat_ws("/", F.col(GROUP).cast("string"), F.col(PART))
    starts = F.create_map(*[x for key, v in base_id.items() for x in (F.lit(key), F.lit(v))])
    counts = F.create_map(*[x for key, v in files_of.items() for x in (F.lit(key), F.lit(v))])
    if plan.strategy == "zorder":
        df = df.withColumn("__lakesort_z", zorder_column(df, [k.column for k in plan.sort_keys]))
        order = [F.col("__lakesort_z")]
    else:
        order = [sort_column(k) for k in plan.sort_keys]
    if any(v > 1 for v in files_of.values()):
        rank = F.percent_rank().over(Window.partitionBy(GROUP, PART).orderBy(*order))
        bucket = F.least(F.floor(rank * counts[pair]), counts[pair] - 1)
    else:
        bucket = F.lit(0)
    keys = _exact_keys(spark, offset)
    key_of = F.create_map(*[x for i, k in enumerate(keys) for x in (F.lit(i), F.lit(k))])
    df = df.withColumn("__lakesort_file", key_of[(starts[pair] + bucket).cast("int")].cast("int"))
    df = (df.repartition(offset, "__lakesort_file").sortWithinPartitions(GROUP, PART, *order)
          .drop("__lakesort_file", "__lakesort_z", PART_KEY))
    # Iceberg readers resolve columns by field id: parquet-mr writes each struct field's
    # `parquet.field.id` metadata as its field id (spark.sql.parquet.fieldId.write.enabled, on by default).
    schema = spark_schema(plan)
    df = df.select(*[F.col(f.name).alias(f.name, metadata=f.metadata) for f in schema.fields], GROUP, PART)
    target = staging_dir(plan)
    df.write.mode("errorifexists").options(**plan.writer_options).partitionBy(GROUP, PART).parquet(target)
    base.unpersist()
    add_nested_field_ids(spark, plan, target)
    seconds = time.perf_counter() - t0
    staged = []
    for g in groups:
        rows, hash_sum = expected.get(g.group_id, (0, None))
        outputs = []
        for (gid, part), (key, _) in sorted(part_rows.items()):
            if gid == g.group_id:
                outputs += list_outputs(f"{target}/{GROUP}={gid}/{PART}={part}", key)
        staged.append(StagedGroup(
            group_id=g.group_id, partition=g.partition, inputs=tuple(f.path for f in g.inputs),
            input_rows=int(read.get(g.group_id, 0)), expected_rows=int(rows),
            expected_hash_sum=str(hash_sum if hash_sum is not None else 0), outputs=tuple(outputs), seconds=seconds,
        ))
        log.info("group %d (%s): %d rows from %d files -> %d rows in %d files", g.group_id, g.partition,
                 read.get(g.group_id, 0), len(g.inputs), rows, len(outputs))
    log.info("%d group(s), %d rows in %.1fs", len(groups), sum(read.values()), seconds)
    return staged


def _exact_keys(spark, n: int) -> list[int]:
    """For each task i < n, an int key that Spark's hash partitioning sends to task i: the smallest k with
    pmod(hash(k), n) == i, found with Spark's own `hash` (the Murmur3 HashPartitioning uses)."""

    span = 64 * n
    while True:
        found = dict(spark.range(span).select(F.col("id").cast("int").alias("k"))
                     .select(F.expr(f"pmod(hash(k), {n})").alias("p"), "k").groupBy("p").agg(F.min("k")).collect())
        if len(found) == n:
            return [found[i] for i in range(n)]
        span *= 4


def sort_column(key):

    col = F.col(key.column)
    if key.direction == "desc":
        return col.desc_nulls_first() if key.nulls == "first" else col.desc_nulls_last()
    return col.asc_nulls_first() if key.nulls == "first" else col.asc_nulls_last()


def zorder_column(df, keys: list[str]):
    """Interleave the bits of each key scaled to [0, 2^bits): numbers and dates by min/max, strings by
    their first bytes. Ties and nulls land together; it is a clustering, not a total order."""

    bits = 62 // len(keys)
    scaled = []
    types = {f.name: f.dataType for f in df.schema.fields}
    for name in keys:
        t = types[name]
        col = F.col(name)
        if isinstance(t, StringType):
            # The first 7 bytes as a non-negative 56-bit number keep byte order.
            value = F.conv(F.hex(F.substring(F.rpad(col, 7, "\x00"), 1, 7)), 16, 10).cast("double")
            lo, hi = 0.0, float(2**56)
        else:
            if isinstance(t, (DateType, TimestampType, TimestampNTZType)):
                col = F.unix_micros(col.cast("timestamp"))
            elif not isinstance(t, NumericType):
                raise TypeError(f"z-order key {name!r} has type {t.simpleString()}: use numbers, dates or strings")
            value = col.cast("double")
            row = df.agg(F.min(value).alias("lo"), F.max(value).alias("hi")).first()
            lo, hi = row["lo"] or 0.0, row["hi"] or 0.0
        span = (hi - lo) or 1.0
        scaled.append(F.least(F.lit(2**bits - 1), ((F.coalesce(value, F.lit(hi)) - lo) / span * (2**bits - 1))
                              .cast("long")))
    z = F.lit(0).cast("long")
    for b in range(bits):
        for i, s in enumerate(scaled):
            bit = F.shiftright(s, b).bitwiseAND(1)
            z = z.bitwiseOR(F.shiftleft(bit, b * len(keys) + i))
    return z


def list_outputs(directory: str, partition_key: str):
    """The Parquet files the write produced, with sizes and row counts from their footers."""

    out = []
    scheme = directory.split("://", 1)[0] + "://" if "://" in directory else ""
    for filesystem, path in find_parquet_files(directory):
        pf = ParquetFile.open(path, filesystem=filesystem)
        uri = scheme + path if scheme and not path.startswith(scheme) else path
        out.append(StagedFile(path=uri, size=pf.size, rows=pf.num_rows, partition_key=partition_key))
    return out


def write_manifest(spark, plan, staged, target: str, seconds: float) -> None:

    conf = {k: v for k, v in spark.sparkContext.getConf().getAll() if k.startswith(("spark.sql.", "spark.master",
                                                                                  "spark.executor", "spark.driver"))}
    manifest = StagedManifest(
        run_id=plan.run_id, table=plan.table, staging_dir=staging_dir(plan), groups=tuple(staged),
        spark_version=spark.version, spark_master=spark.sparkContext.master, spark_conf=conf,
        writer_options=plan.writer_options, seconds=seconds,
    )
    Path(target).write_text(manifest.to_json())
    log.info("wrote manifest %s: %d group(s) in %.1fs", target, len(staged), seconds)


if __name__ == "__main__":
    sys.exit(main())
