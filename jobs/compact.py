"""Sort-and-compact job: `spark-submit jobs/compact.py --plan PLAN.json --manifest MANIFEST.json`.

For each group of the rewrite plan: read exactly the planned input files with the table's current
schema, apply the merge rule for keyed tables, sort (linear: range-partition on the sort keys, then
sort within partitions, so output files hold disjoint ordered key ranges; zorder: the same on
interleaved key bits), size the output file count from the input bytes, and write Parquet with the
spec's writer settings to a staging directory under the table's location. The input's row count and
content fingerprint are observed in the same pass as the write. The manifest records it all; the
commit step (outside Spark) re-checks the staged files against it before anything is committed.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from layout.manifest import StagedGroup

log = logging.getLogger("lakesort.compact")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jobs/compact.py", description=__doc__.splitlines()[0])
    parser.add_argument("--plan", required=True, help="the rewrite plan (JSON) from `lakesort plan-rewrite`")
    parser.add_argument("--manifest", required=True, help="where to write the staged-output manifest (JSON)")
    parser.add_argument("--groups", help="only these group ids, comma separated (default: all)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from pyspark.sql import SparkSession

    from layout.rewrite import RewritePlan

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


def staging_dir(plan) -> str:
    """Staged files live under the table's data directory, where they stay once committed."""
    return f"{plan.table_location.rstrip('/')}/data/lakesort-staging/{plan.run_id}"


def spark_schema(plan):
    from pyiceberg.io.pyarrow import schema_to_pyarrow
    from pyiceberg.schema import Schema
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema_to_pyarrow(Schema.model_validate_json(plan.table_schema_json), include_field_ids=False))


GROUP = "lakesort_group"  # no leading underscore: readers skip `_` directories


def compact_groups(spark, plan, groups):
    """All groups in one job: rows tagged with their group, range-partitioned on (group, sort keys),
    written with partitionBy(group) so that no file mixes groups (each group is one Iceberg partition).

    The tagged input is persisted: the files are read from storage once, and the per-group counts and
    fingerprints come from exact aggregations over that same data. (Observed metrics would not do:
    the range partitioner's sampling job runs the plan again and they would count rows twice.)
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    from layout.fingerprint import spark_row_hash_expr

    t0 = time.perf_counter()
    if not groups:
        return []
    schema = spark_schema(plan)
    columns = [f.name for f in schema.fields]
    # Which group a row belongs to, from the file it came from: a literal map in the plan, not a
    # DataFrame built in Python (which would start Python workers just for a lookup table).
    owner = F.create_map(*[x for g in groups for f in g.inputs for x in (F.lit(f.path), F.lit(g.group_id))])
    paths = [f.path for g in groups for f in g.inputs]
    base = (spark.read.schema(schema).parquet(*paths).select(*columns)
            .withColumn(GROUP, F.element_at(owner, F.input_file_name()))
            .persist(StorageLevel.MEMORY_AND_DISK))
    required = [f.name for f in table_fields(plan) if f.required]
    counts = base.groupBy(GROUP).agg(F.count(F.lit(1)).alias("rows"),
                                     *[F.count_if(F.col(c).isNull()).alias(f"nulls_{c}") for c in required]).collect()
    read = {r[GROUP]: r["rows"] for r in counts}
    nulls = {c: sum(r[f"nulls_{c}"] for r in counts) for c in required}
    if any(nulls.values()):
        bad = ", ".join(f"{c} ({n} nulls)" for c, n in nulls.items() if n)
        raise RuntimeError(f"required column(s) hold nulls in the input files: {bad}; the table's schema says they "
                           "cannot: fix the writer that produced them, or make the columns optional")
    if None in read:
        raise RuntimeError(f"{read[None]} rows came from files outside the plan: input_file_name() did not match "
                           "a planned path (scheme or path normalisation differs)")
    df = base
    if plan.keys is not None:
        order = F.col(plan.keys.sequence)
        order = order.desc_nulls_last() if plan.keys.merge == "deduplicate" else order.asc_nulls_last()
        window = Window.partitionBy(GROUP, *plan.keys.columns).orderBy(order)
        df = df.withColumn("__lakesort_rank", F.row_number().over(window)).where("__lakesort_rank = 1")
        df = df.drop("__lakesort_rank").persist(StorageLevel.MEMORY_AND_DISK)
    row_hash = F.expr(spark_row_hash_expr(columns)).cast("decimal(38,0)")
    expected = {r[GROUP]: (r["rows"], r["hash"]) for r in df.groupBy(GROUP).agg(
        F.count(F.lit(1)).alias("rows"), F.sum(row_hash).alias("hash")).collect()}
    # Output files: each group gets its own partition ids (one, or one per key-range bucket when it
    # needs several files); range-partitioning on the id keeps an id whole and neighbouring ids
    # together, so a file never mixes groups and a group's files hold disjoint, ordered key ranges.
    base_id, offset = {}, 0
    for g in groups:
        base_id[g.group_id] = offset
        offset += max(1, g.output_files)
    starts = F.create_map(*[x for g in groups for x in (F.lit(g.group_id), F.lit(base_id[g.group_id]))])
    files = F.create_map(*[x for g in groups for x in (F.lit(g.group_id), F.lit(max(1, g.output_files)))])
    if plan.strategy == "zorder":
        df = df.withColumn("__lakesort_z", zorder_column(df, [k.column for k in plan.sort_keys]))
        order = [F.col("__lakesort_z")]
    else:
        order = [sort_column(k) for k in plan.sort_keys]
    if any(g.output_files > 1 for g in groups):
        rank = F.percent_rank().over(Window.partitionBy(GROUP).orderBy(*order))
        bucket = F.least(F.floor(rank * files[F.col(GROUP)]), files[F.col(GROUP)] - 1)
    else:
        bucket = F.lit(0)
    df = df.withColumn("__lakesort_file", starts[F.col(GROUP)] + bucket)
    df = (df.repartitionByRange(offset, "__lakesort_file").sortWithinPartitions(GROUP, *order)
          .drop("__lakesort_file", "__lakesort_z"))
    # Spark reads every column as nullable; required table columns must be written REQUIRED, or Iceberg
    # refuses the files. coalesce() with a typed literal is non-nullable to Spark; nulls were ruled out
    # above, and the fingerprint was taken before this step, so a replaced null could never pass the commit.
    # Iceberg readers resolve columns by field id: parquet-mr writes `parquet.field.id` column metadata
    # as the field id (spark.sql.parquet.fieldId.write.enabled, on by default).
    ids = {f.name: f.field_id for f in table_fields(plan)}

    def out(c, t):
        col = F.coalesce(F.col(c), F.lit(_zero(t)).cast(t)) if c in required else F.col(c)
        return col.alias(c, metadata={"parquet.field.id": ids[c]})

    df = df.select(*[out(f.name, f.dataType) for f in schema.fields], GROUP)
    target = staging_dir(plan)
    df.write.mode("errorifexists").options(**plan.writer_options).partitionBy(GROUP).parquet(target)
    base.unpersist()
    seconds = time.perf_counter() - t0
    staged = []
    for g in groups:
        rows, hash_sum = expected.get(g.group_id, (0, None))
        outputs = list_outputs(f"{target}/{GROUP}={g.group_id}") if rows else []
        staged.append(StagedGroup(
            group_id=g.group_id, partition=g.partition, inputs=tuple(f.path for f in g.inputs),
            input_rows=int(read.get(g.group_id, 0)), expected_rows=int(rows),
            expected_hash_sum=str(hash_sum if hash_sum is not None else 0), outputs=tuple(outputs), seconds=seconds,
        ))
        log.info("group %d (%s): %d rows from %d files -> %d rows in %d files", g.group_id, g.partition,
                 read.get(g.group_id, 0), len(g.inputs), rows, len(outputs))
    log.info("%d group(s), %d rows in %.1fs", len(groups), sum(read.values()), seconds)
    return staged


def table_fields(plan):
    from pyiceberg.schema import Schema

    return Schema.model_validate_json(plan.table_schema_json).fields


def _zero(spark_type):
    """A literal of the type, only to make a column non-nullable (it never replaces a value)."""
    from pyspark.sql import types as T

    if isinstance(spark_type, (T.StringType,)):
        return ""
    if isinstance(spark_type, T.BinaryType):
        return bytearray()
    if isinstance(spark_type, T.BooleanType):
        return False
    if isinstance(spark_type, (T.DateType, T.TimestampType, T.TimestampNTZType)):
        return "1970-01-01"
    return 0


def sort_column(key):
    from pyspark.sql import functions as F

    col = F.col(key.column)
    if key.direction == "desc":
        return col.desc_nulls_first() if key.nulls == "first" else col.desc_nulls_last()
    return col.asc_nulls_first() if key.nulls == "first" else col.asc_nulls_last()


def zorder_column(df, keys: list[str]):
    """Interleave the bits of each key scaled to [0, 2^bits): numbers and dates by min/max, strings by
    their first bytes. Ties and nulls land together; it is a clustering, not a total order."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, NumericType, StringType, TimestampType

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
            if isinstance(t, (DateType, TimestampType)):
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


def list_outputs(directory: str):
    """The Parquet files the write produced, with sizes and row counts from their footers."""
    from layout.io import find_parquet_files
    from layout.manifest import StagedFile
    from layout.parquet import ParquetFile

    out = []
    scheme = directory.split("://", 1)[0] + "://" if "://" in directory else ""
    for filesystem, path in find_parquet_files(directory):
        pf = ParquetFile.open(path, filesystem=filesystem)
        uri = scheme + path if scheme and not path.startswith(scheme) else path
        out.append(StagedFile(path=uri, size=pf.size, rows=pf.num_rows))
    return out


def write_manifest(spark, plan, staged, target: str, seconds: float) -> None:
    from layout.manifest import StagedManifest

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
