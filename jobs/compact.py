"""Sort-and-compact job: `spark-submit jobs/compact.py --plan PLAN.json --manifest MANIFEST.json`.

For the groups of the rewrite plan, in one Spark application and parallel in every stage: read exactly
the planned input files as Iceberg defines their rows (Spark's own reader for files whose columns match
the schema by name, field id and type; pyiceberg's reader in the executors for the others:
`layout.compaction.inputs`), tag each row with its group and the partition of the table's current spec,
apply the merge rule for keyed tables, and in a pass over the sort and partition columns count rows and
sample the sort key. File boundaries are the sample's quantiles; a file is cut into slots (a large file
into several pieces, `layout.compaction.slots`) and each row goes to the task of its slot (the pass that
reads every column for that shuffle fingerprints the input; small files' slots share a task), which sorts it
(linear: by one long prefix of several keys where their types allow, `layout.compaction.sort_prefix`; or a
z-order or Hilbert curve over the keys' quantile ranks) and writes Parquet with the spec's writer settings
and Iceberg field ids to a staging directory under the table's location; a file written in pieces is then
stitched from their row groups (`layout.parquet.stitch`). Then the staged files are read back
from storage and fingerprinted file by file. The manifest records it all, with each output file's
partition values; verify (outside Spark) compares the figures, proves the output against Iceberg's own
metadata and checks the layout before anything is committed.
"""
from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
from pyarrow import fs as pafs
from pyiceberg import types as I
from pyiceberg.schema import Schema
from pyspark import StorageLevel
from pyspark.sql import Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.functions import arrow_udf
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.window import Window

from layout import curves
from layout.catalog import STAGING, stamped_dir
from layout.compaction import partitions as partitioning
from layout.compaction.figures import (
    ManifestRangeMiss,
    check_native_rows,
    check_ranges,
    file_counts,
    manifest_figures,
)
from layout.compaction.fingerprint import SPARK_CONF as FINGERPRINT_CONF
from layout.compaction.fingerprint import exact_hash_sum, hash_halves, spark_hash_halves, spark_row_hash_expr
from layout.compaction.memory import memory_per_input_byte, memory_piece_bytes, task_memory
from layout.compaction.partitions import GROUP, PART, PART_KEY
from layout.compaction.plan import RewritePlan
from layout.compaction.slots import (
    PACK_BYTES,
    PIECE_BYTES,
    SlotPlan,
    flat_destinations,
    plan_slots,
    quantile_picks,
    stitch_lists,
    task_keys,
)
from layout.compaction.sort_prefix import PrefixPlan, key_ordinals, sort_prefix
from layout.compaction.staging import finish_staged_file, nested_field_ids
from layout.errors import InputError
from layout.expr.predicate import sql_literal
from layout.io import find_parquet_files, list_parquet_files, resolve
from layout.manifest import JobWarning, StagedFile, StagedGroup, StagedManifest
from layout.parquet import ParquetFile

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
        timings: dict[str, float] = {}
        staged = compact_groups(spark, plan, groups, timings)
        write_manifest(spark, plan, staged, args.manifest, time.perf_counter() - started, timings)
    finally:
        spark.stop()
    return 0


SESSION_CONF = {
    # Iceberg requires INT64 microseconds for timestamps; Spark's default for TimestampType is INT96.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # The write keeps the rows in the order each task sorted them (by the sort key alone: a task holds at most
    # one slot, so one file, of each group and partition: `layout.compaction.slots`). By default Spark plans a
    # partitioned write under a sort by the partition columns, which replaces the task's own sort (the key
    # order then survives only while the sort does not spill). Without the planned write, and with a writer
    # per partition directory kept open, each row goes to its directory's writer as it comes. Past this many
    # writers Spark's concurrent writer sorts the rest of the task's rows by directory alone, and the key
    # order would be lost (the files would fail verification's order checks): the job raises it to one more
    # than the most slots a task holds.
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "2",
    # Let adaptive execution coalesce the shuffle partitions of a cached plan (the per-file summary): by
    # default it keeps spark.sql.shuffle.partitions of them, 400 tasks of nothing at TPC-H SF1 (4 s).
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
    # What the fingerprint's xxhash64 needs (hashing maps: their entries keep their order from read to
    # write, so the hash Spark refuses on maps by default is deterministic here).
    **FINGERPRINT_CONF,
}


def staging_dir(plan) -> str:
    """The run's staging directory under the table's data directory, where its files stay once committed."""
    return f"{plan.table_location.rstrip('/')}/data/{STAGING}/{plan.run_id}"


def write_dir(plan) -> str:
    """Where the job writes (`layout.catalog.stamped_dir`): the path names the run and spec of every file."""
    return stamped_dir(f"{plan.table_location.rstrip('/')}/data", plan.run_id, plan.spec_hash)


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


def finish_files(spark, plan, target: str, slots: SlotPlan) -> None:
    """After the write, in the executors: each output file written in pieces is stitched from them
    (`layout.parquet.stitch`: row groups copied byte for byte, the pieces deleted), and list elements and
    map keys/values get their Iceberg field ids in every footer (`layout.parquet.field_ids`)."""

    ids = nested_field_ids(plan.table_schema_json)
    scheme = target.split("://", 1)[0] + "://" if "://" in target else ""
    paths = [scheme + p if scheme and not p.startswith(scheme) else p for _, p in find_parquet_files(target)]
    work = stitch_lists(slots, paths, GROUP, PART) if slots.most_pieces > 1 else [[p] for p in paths]
    if not ids:
        work = [w for w in work if len(w) > 1]
    if not work:
        return
    t0 = time.perf_counter()
    tasks = max(1, min(len(work), spark.sparkContext.defaultParallelism * 2))
    done = spark.sparkContext.parallelize(work, tasks).map(lambda w: finish_staged_file(w, ids)).collect()
    stitched = [w for w in work if len(w) > 1]
    log.info("stitched %d file(s) from %d piece(s), %d footer(s) given list/map field ids, in %.1fs", len(stitched),
             sum(len(w) for w in stitched), sum(done), time.perf_counter() - t0)


def read_inputs(spark, plan, groups):
    """The planned files' rows as Iceberg defines them, tagged with group, partition key and SOURCE (the file
    a natively read row came from; null for the others). Files marked `spark_native` by the prepare step
    are read by Spark's own vectorized reader; the others by pyiceberg's reader in the executors
    (`layout.compaction.inputs`), spread over tasks balanced by bytes. Returns (rows, column names, the
    native files by SOURCE, Spark's name for them -> (path, rows the manifest records))."""

    schema = spark_schema(plan)
    tags = [T.StructField(GROUP, T.IntegerType(), False), T.StructField(PART, T.StringType(), False),
            T.StructField(PART_KEY, T.StringType(), False)]
    out_schema = T.StructType([*schema.fields, *tags])
    columns = [f.name for f in schema.fields]
    native = [(g.group_id, f) for g in groups for f in g.inputs if f.spark_native]
    others = sorted(((g.group_id, f) for g in groups for f in g.inputs if not f.spark_native), key=lambda x: -x[1].size)
    parts = []
    sources: dict[str, tuple[str, int]] = {}
    native_scan = None
    if native:
        if all(_is_local(f.path) for _, f in native):
            # Spark lists more than 32 paths with a Spark job (a task per path: 2.7 s for 252 files on two
            # cores); on a local file system the driver stats them in milliseconds. Object stores keep it.
            spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", str(10 * len(native) + 32))
        rows = spark.read.schema(schema).parquet(*[f.path for _, f in native])
        # input_file_name() names a file as inputFiles() does: the join key, so no row needs a regex.
        planned = {_source_name(f.path): (gid, f) for gid, f in native}
        listing = []
        for name in rows.inputFiles():
            if _source_name(name) not in planned:
                raise InputError(f"{name}: Spark lists a file the plan does not hold (planned: "
                                 f"{sorted(planned)[:3]}...); nothing was rewritten")
            gid, f = planned.pop(_source_name(name))
            listing.append((name, gid, partitioning.key_dir(f.partition_key), f.partition_key))
            sources[name] = (f.path, f.rows)
        if planned:
            raise InputError(f"{min(planned)}: Spark does not list this planned file; nothing was rewritten")
        single = listing[0][1:] if len({row[1:] for row in listing}) == 1 else None
        listing = _literal_frame(spark, listing, [SOURCE, GROUP, PART, PART_KEY])
        native_scan = NativeScan(rows, listing, single)
        parts.append(native_scan.tagged(rows).select(*columns, GROUP, PART, PART_KEY, SOURCE))
    if others:
        target = to_arrow_schema(out_schema, timezone="UTC")  # the job's session time zone
        tasks = max(1, min(len(others), spark.sparkContext.defaultParallelism * 4))
        slices: list[list] = [[] for _ in range(tasks)]
        for i, (gid, f) in enumerate(others):  # round robin over size-descending files: balanced bytes
            slices[i % tasks].append((gid, f.path, f.spec_id, f.partition_key, f.rows, f.size))
        file_schema = T.StructType([T.StructField("group_id", T.IntegerType()), T.StructField("path", T.StringType()),
                                    T.StructField("spec_id", T.IntegerType()), T.StructField("partition", T.StringType()),
                                    T.StructField("record_count", T.LongType()), T.StructField("size", T.LongType())])
        listing = spark.createDataFrame(spark.sparkContext.parallelize([r for s in slices for r in s], tasks),
                                        file_schema)
        # pyiceberg's reader (and its table module) is imported only when some file needs it: 0.4 s of the
        # driver's start otherwise.
        from layout.compaction.inputs import InputSource, tagged_batches

        source = InputSource(metadata_location=plan.metadata_location, io_properties=dict(plan.io_properties),
                             schema_json=plan.table_schema_json)
        spec_id = plan.partition_spec_id

        def read(batches):
            return tagged_batches(source, batches, target, spec_id)

        parts.append(listing.mapInArrow(read, out_schema).withColumn(SOURCE, F.lit(None).cast("string")))
    df = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    log.info("reading %d file(s) with Spark's reader, %d through pyiceberg", len(native), len(others))
    return Inputs(df, columns, sources, native_scan if not others else None)


class NativeScan(NamedTuple):
    """Spark's scan of the natively read files and their listing (SOURCE -> GROUP, PART, PART_KEY)."""

    rows: object
    listing: object
    single: tuple[int, str, str] | None  # (GROUP, PART, PART_KEY) when every file has the same

    def tagged(self, rows, extra=None):
        """`rows` of this scan with each file's group, partition and SOURCE: a broadcast join on the file name
        (input_file_name() names a file as inputFiles() does), or literals when every file has the same.
        `extra`: a small frame by (GROUP, PART) whose columns the same join brings (files of one partition)."""
        rows = rows.withColumn(SOURCE, F.input_file_name())
        if self.single is not None and extra is None:
            return (rows.withColumn(GROUP, F.lit(self.single[0])).withColumn(PART, F.lit(self.single[1]))
                    .withColumn(PART_KEY, F.lit(self.single[2])))
        listing = self.listing if extra is None else self.listing.join(extra, [GROUP, PART], "left")
        return rows.join(F.broadcast(listing), SOURCE, "left")


class Inputs(NamedTuple):
    """`read_inputs`: the rows, the table's column names, the natively read files by SOURCE -> (path, rows the
    manifest records), and the native scan when Spark's reader reads every file (else None)."""

    rows: object
    columns: list[str]
    native: dict[str, tuple[str, int]]
    scan: NativeScan | None


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file:")


def _source_name(path: str) -> str:
    """A path as the plan records it and as Spark's input_file_name() reports it, alike: scheme and leading
    slashes dropped (file:///a, file:/a and /a are one file; s3:// and s3a:// one object)."""
    return re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*:", "", path).lstrip("/")


# Rows drawn per output file to place the file boundaries (sampled quantiles of the sort key): with 1,000
# a file's share of its partition's rows is off by about 3% (1/sqrt(1000)); at most MAX_SAMPLE per
# partition, so the sample never grows with the data. It is drawn in the pass that fingerprints the input.
SAMPLES_PER_FILE = 1000
MAX_SAMPLE = 1_000_000
SAMPLE_SEED = 42
SLOT = "__lakesort_slot"  # the row's slot: a piece of an output file (`layout.compaction.slots`)
SOURCE = "__lakesort_source"
PREFIX = "__lakesort_prefix"  # the sort prefix over several keys (`layout.compaction.sort_prefix`)
CURVE_SAMPLE = 200_000  # rows whose keys place a curve's quantile boundaries (2**bits cells per key)
FLAT_MAX_TASKS = 256  # unpacked slots past which several partitions' slots are packed (`_plan_write`)


def compact_groups(spark, plan, groups, timings: dict[str, float] | None = None) -> Staged:
    """All groups in one Spark job, in parallel in every stage, each row sorted once:

    1. one pass over the planned files' sort and partition columns (`read_inputs`; Parquet reads only those):
       per (group, partition, natively read file) the rows and a Bernoulli sample of the sort key; keyed
       tables first keep one row per key (a window partitioned by the keys: parallel); natively read
       files' row counts are checked. When Spark reads every file natively (no merge rule, a linear order)
       there is no such pass: rows and the sort prefix's key ranges come from the manifests
       (`layout.compaction.figures`), the write checks both, and only partitions cut into several slots draw a sample
       (`sample_keys`: the drawn rows alone are tagged); a value outside the bounds writes it all again;
    2. how many files each (group, partition) gets (its share of the group's planned output files), their
       slots and write tasks (`_plan_write`), and where a partition has several slots, their boundaries:
       quantiles of the sample, sorted in Spark (`boundaries`);
    3. a second read (or the persisted rows, when some files go through pyiceberg: reading them is the
       costly part), every row's slot (its partition's first slot plus the number of boundaries at or
       below its key, so equal keys share a slot and a partition's slots hold disjoint, ordered key ranges),
       the input's fingerprint (`InputFingerprint`: observed in this pass, the one that reads every
       column), one shuffle that sends each slot to its task, a sort within each task, and the write;
    4. files written in pieces stitched, list and map field ids added (`finish_files`, in the executors);
    5. the staged files read back from storage by Spark (`read_back`): each file's rows and fingerprint.

    Every row's hash is salted with its group id: the fingerprint is one sum over all groups (observed
    metrics are global), and a row in another group's files still changes it. `timings` gets each part's
    seconds.
    """
    if not groups:
        return Staged([], 0)
    timings = timings if timings is not None else {}
    try:
        return _compact(spark, plan, groups, timings, trust_manifests=True)
    except ManifestRangeMiss as miss:
        log.warning("%s; writing again with ranges from a pass over the input", miss)
        timings["written again: manifest bounds missed values"] = timings.pop("fingerprint, shuffle, sort, write", 0.0)
        staged = _compact(spark, plan, groups, timings, trust_manifests=False)
        warning = JobWarning(rule="manifest_bounds", column=miss.column,
                             message=f"{miss}; the job wrote its files again with key ranges from a pass over the input")
        return staged._replace(warnings=(warning,))


def _compact(spark, plan, groups, timings: dict[str, float], *, trust_manifests: bool) -> Staged:
    clock = _Clock(timings, spark, "read, sample")
    for key, value in SESSION_CONF.items():
        spark.conf.set(key, value)
    df, columns, native, scan = read_inputs(spark, plan, groups)
    df_read = df
    cached = []  # unpersisted after the write
    if plan.keys is not None or len(native) < sum(len(g.inputs) for g in groups):
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(df)
    read = None
    if plan.keys is not None:  # rows as read, before the merge: per group, and per natively read file
        counted = df.groupBy(GROUP, SOURCE).agg(F.count(F.lit(1)).alias("rows")).collect()
        check_native_rows(native, [(r[SOURCE], r["rows"]) for r in counted])
        read = {}
        for r in counted:
            read[r[GROUP]] = read.get(r[GROUP], 0) + r["rows"]
        order = F.col(plan.keys.sequence)
        order = order.desc_nulls_last() if plan.keys.merge == "deduplicate" else order.asc_nulls_last()
        # Keys are unique per current-spec partition: a partition column is a function of the row.
        window = Window.partitionBy(GROUP, PART, *plan.keys.columns).orderBy(order)
        df = df.withColumn("__lakesort_rank", F.row_number().over(window)).where("__lakesort_rank = 1")
        df = df.drop("__lakesort_rank").persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(df)
    if plan.strategy != "linear":
        rows = sum(f.rows for g in groups for f in g.inputs)
        df = df.withColumn("__lakesort_z", curve_column(df, plan.strategy, [k.column for k in plan.sort_keys], rows))
        keys = [("__lakesort_z", "asc", "last")]
    else:
        keys = [(k.column, k.direction, k.nulls) for k in plan.sort_keys]
    ordinals = key_ordinals(plan.table_schema_json, [name for name, _, _ in keys])
    known = (manifest_figures(groups, ordinals)
             if trust_manifests and scan is not None and plan.keys is None and plan.strategy == "linear" else None)
    if known is not None:  # no first pass: rows and key ranges from the manifests, checked by the write
        parts, figures = known
        summary = None
    else:
        summary = summarize(spark, df, groups, keys, ordinals).cache()  # small: a row per partition and file
        cached.append(summary)
        ranges = [(f"__low{i}", f"__high{i}") for i, o in enumerate(ordinals) if o is not None]
        figures = summary.select(GROUP, PART, SOURCE, PART_KEY, "rows",
                                 *[c for pair in ranges for c in pair]).collect()
        parts = {}
        for r in figures:
            pair = (r[GROUP], r[PART])
            parts[pair] = (r[PART_KEY], parts.get(pair, (None, 0))[1] + r["rows"])
        if plan.keys is None:
            check_native_rows(native, [(r[SOURCE], r["rows"]) for r in figures])
    clock.lap("read, sample", "file boundaries")
    if read is None:
        read = {}
        for (gid, _), (_, rows) in parts.items():
            read[gid] = read.get(gid, 0) + rows
    expected: dict[int, int] = {}
    for (gid, _), (_, rows) in parts.items():
        expected[gid] = expected.get(gid, 0) + rows
    files_of = file_counts(groups, parts)
    slots, prefix, flat = _plan_write(spark, plan, groups, parts, files_of, keys, ordinals, figures)
    order = [_ordered(F.col(name), direction, nulls) for name, direction, nulls in keys]
    drawn = None
    if summary is None and any(n > 1 for n in slots.slot_counts().values()):
        drawn = sample_keys(spark, scan, groups, keys)
        summary = as_summary(drawn, keys)
    placed = known is not None and scan.single is None and bool(slots.slot_counts())
    if placed:
        # Files of several partitions: the join that tags each row with its file's group and partition
        # brings its partition's first slot and boundaries too (one broadcast join per row instead of two).
        info = slot_frame(spark, summary, slots.slot_counts(), keys, prefix)
        df = scan.tagged(scan.rows, info).select(*columns, GROUP, PART, PART_KEY, SOURCE,
                                                 *[c for c in info.columns if c not in (GROUP, PART)])
    if prefix is not None:
        df = df.withColumn(PREFIX, F.expr(prefix.sql()))
    df = with_slots(spark, df, summary, slots.slot_counts(), keys, prefix, placed=placed, drawn=drawn)
    if prefix is not None:
        # Computed again after the shuffle from the key columns (a few integer operations per row) rather than
        # carried through it: see `_slot_values`.
        order = [F.expr(prefix.sql())] if prefix.exact else [F.expr(prefix.sql()), *order]
        log.info("sorting by a prefix of %d key(s) in %d bits%s", len(prefix.keys), sum(k.bits for k in prefix.keys),
                 " (exact: the prefix alone)" if prefix.exact else ", then the keys")
    # Only the table's columns and the slot (and a curve's index) cross the shuffle: the row's group and
    # partition are the slot's (`_slot_values`), its task key is computed from the slot by the partitioning.
    df = df.select(*columns, SLOT, *(["__lakesort_z"] if "__lakesort_z" in df.columns else []))
    watched = [k.ordinal for k in prefix.keys] if known is not None and prefix is not None else []
    fingerprint = InputFingerprint(df, columns, watched, salt=_slot_values(slots, "group_id"))
    clock.lap("file boundaries", "fingerprint, shuffle, sort, write")
    # A task holds slots of distinct (group, partition)s: sorted by the key (its prefix, where the key types
    # allow it), written as sorted by a writer per slot's directory (SESSION_CONF), a file per slot.
    spark.conf.set("spark.sql.maxConcurrentOutputFileWriters", str(max(2, slots.most_per_task + 1)))
    keys_of = task_keys(max(1, slots.tasks))
    task_key = F.element_at(_sql_array([keys_of[s.task] for s in slots.slots] or [0]), F.col(SLOT) + 1)
    df = fingerprint.observed.repartition(max(1, slots.tasks), task_key).sortWithinPartitions(*order)
    # Iceberg readers resolve columns by field id: parquet-mr writes each struct field's
    # `parquet.field.id` metadata as its field id (spark.sql.parquet.fieldId.write.enabled, on by default).
    declared = [_as_declared(f).alias(f.name, metadata=f.metadata) for f in spark_schema(plan).fields]
    target = write_dir(plan)
    mode = "errorifexists" if trust_manifests else "overwrite"  # written again: the first attempt's files go
    pairs = sorted(slots.slot_counts())
    if len(pairs) == 1:
        # One (group, partition): its directory is written as a plain directory, without a writer looking up
        # each row's partition directory.
        (gid, part), = pairs
        df.select(*declared).write.mode(mode).options(**plan.writer_options).parquet(f"{target}/{GROUP}={gid}/{PART}={part}")
    elif flat:
        if not trust_manifests:  # written again: the first attempt's files, already placed, go
            fs, path = _hadoop_fs(spark, target)
            fs.delete(path(target), True)
        df.select(*declared).write.mode("errorifexists").options(**plan.writer_options).parquet(f"{target}/_flat")
        _place_flat_files(spark, f"{target}/_flat", target, slots)
    else:
        df = df.select(*declared, F.expr(_slot_values(slots, "group_id")).alias(GROUP),
                       F.expr(_slot_values(slots, "part")).alias(PART))
        df.write.mode(mode).options(**plan.writer_options).partitionBy(GROUP, PART).parquet(target)

    def diagnose():  # without a first pass, a count per file names the file that reads short
        check_native_rows(native, [(r[0], r[1]) for r in df_read.groupBy(SOURCE).count().collect()])

    _, hash_sum = fingerprint.result(sum(expected.values()), diagnose if known is not None else None)
    for frame in cached:
        frame.unpersist()
    if watched:
        check_ranges(prefix, fingerprint.ranges(), [name for name, _, _ in keys])
    clock.lap("fingerprint, shuffle, sort, write", "stitch, field ids")
    finish_files(spark, plan, target, slots)
    clock.lap("stitch, field ids", "read back")
    checked = read_back(spark, plan, target, columns)
    problems = key_problems(spark, plan, target) if plan.keys is not None else {}
    clock.lap("read back")
    staged = []
    for g in groups:
        outputs = []
        for (gid, part), (key, _) in sorted(parts.items()):
            if gid == g.group_id:
                outputs += list_outputs(f"{target}/{GROUP}={gid}/{PART}={part}", key,
                                        {name: v for (g, p, name), v in checked.items() if (g, p) == (gid, part)})
        staged.append(StagedGroup(
            group_id=g.group_id, partition=g.partition, inputs=tuple(f.path for f in g.inputs),
            input_rows=int(read.get(g.group_id, 0)), expected_rows=int(expected.get(g.group_id, 0)),
            outputs=tuple(outputs), seconds=clock.total(),
            duplicate_keys=problems.get(g.group_id, (0, 0))[0] if plan.keys is not None else None,
            null_keys=problems.get(g.group_id, (0, 0))[1] if plan.keys is not None else None,
        ))
        log.info("group %d (%s): %d rows from %d files -> %d rows in %d files", g.group_id, g.partition,
                 read.get(g.group_id, 0), len(g.inputs), expected.get(g.group_id, 0), len(outputs))
    log.info("%d group(s), %d rows in %.1fs (%s)", len(groups), sum(read.values()), clock.total(),
             ", ".join(f"{k} {v:.1f}s" for k, v in clock.laps.items()))
    return Staged(staged, hash_sum)


class Staged(NamedTuple):
    """What the job staged: per group its files and figures, the input's fingerprint over all groups, and what
    it noticed in the input and worked around."""

    groups: list[StagedGroup]
    hash_sum: int
    warnings: tuple[JobWarning, ...] = ()


class InputFingerprint:
    """The input's fingerprint, observed in the pass that reads every column for the write: the rows and the
    sum of `xxhash64(columns..., group id)`, in the stage that reads the input (before the shuffle, so a
    shuffle that lost or changed a row differs from it).

    Observed metrics are accumulators of a shuffle's map stage: a stage that Spark re-runs (a lost
    executor's shuffle files) adds its rows again. Only adding is possible, so rows that differ from the
    first pass's count mean a re-run, and the fingerprint is then computed again in a pass of its own."""

    def __init__(self, df, columns: list[str], watched: list[str] = (), *, salt: str = f"`{GROUP}`") -> None:
        self.df = df
        self.halves = spark_hash_halves(columns, salt=salt)  # `salt`: SQL of each row's group id (an int)
        self.watched = list(watched)  # SQL of longs whose smallest and largest values are observed too
        self.observation = Observation("lakesort input fingerprint")
        self.got: dict = {}
        # The hash is taken inside the observed aggregate, not as columns of the rows: columns added for it
        # would have to be projected away again before the shuffle, a copy of every row (2 s of a 27 s write
        # at TPC-H SF1, one run; the aggregate's two halves cost less than that copy).
        self.observed = df.observe(self.observation, *self._sums())

    def _sums(self):
        high, low = self.halves
        return (F.count(F.lit(1)).alias("rows"), F.sum(F.expr(high)).alias("high"), F.sum(F.expr(low)).alias("low"),
                *[agg(F.expr(sql)).alias(f"__{name}{i}") for i, sql in enumerate(self.watched)
                  for name, agg in (("min", F.min), ("max", F.max))])

    def result(self, rows: int, diagnose=None) -> tuple[int, int]:
        """(rows, hash sum) after the write ran; `rows`: what the first pass counted, or the manifests record.
        `diagnose`, when the rows still differ in a pass of its own, raises the error that names the file."""
        got = self.observation.get
        if got.get("rows") != rows:
            log.warning("the write's observed fingerprint counts %s rows, against %d: a stage ran twice, or a file "
                        "reads differently; fingerprinting the input in a pass of its own", got.get("rows"), rows)
            got = self.df.agg(*self._sums()).first().asDict()
            if got["rows"] != rows:
                if diagnose is not None:
                    diagnose()
                raise InputError(f"Spark read {got['rows']} input rows in one pass and {rows} in another: the "
                                 "input files changed during the run or a reader is broken; nothing is committed")
        self.got = got
        return int(got["rows"]), exact_hash_sum(got["high"], got["low"])

    def ranges(self) -> list[tuple[int | None, int | None]]:
        """Each watched expression's smallest and largest value over the input (None: no non-null value)."""
        return [(self.got.get(f"__min{i}"), self.got.get(f"__max{i}")) for i in range(len(self.watched))]


def sample_keys(spark, scan: NativeScan, groups, keys):
    """The rows of the first pass's `__sample` alone (GROUP, PART and the sort keys): about SAMPLES_PER_FILE
    per planned output file, drawn from the native scan before any row is tagged (only the drawn rows join
    the listing). `as_summary` gives them the first pass's shape."""
    rates = {g.group_id: min(1.0, min(SAMPLES_PER_FILE * max(1, g.output_files), MAX_SAMPLE) / max(1, g.rows))
             for g in groups}
    top = max(rates.values())
    names = [name for name, _, _ in keys]
    drawn = scan.tagged(scan.rows.select(*names).where(F.rand(SAMPLE_SEED) < F.lit(top)))
    share = _literal_frame(spark, [(gid, rate / top) for gid, rate in sorted(rates.items())], [GROUP, "__share"])
    drawn = drawn.join(F.broadcast(share), GROUP).where(F.rand(SAMPLE_SEED + 1) < F.col("__share"))
    return drawn.select(GROUP, PART, *names)


def as_summary(drawn, keys):
    """Drawn rows (`sample_keys`) as the first pass's summary: per (group, partition) `__sample`, the keys as
    structs k0..kn."""
    key = _key_struct(keys)
    return drawn.groupBy(GROUP, PART).agg(F.collect_list(key).alias("__sample"))


_PLACEHOLDER = {"date": "1970-01-01", "timestamp": "1970-01-01 00:00:00", "timestamp_ntz": "1970-01-01 00:00:00",
                "string": "", "binary": "", "boolean": "false"}


def _as_declared(field):
    """A column as the schema declares it: Spark reads every file column as nullable, so a required
    (top-level, primitive) column would be written OPTIONAL; coalescing with a placeholder makes Spark
    know it is not null and write it REQUIRED. A null there would be a broken input file: the placeholder
    would then differ from the input's fingerprint (taken before this) and the commit be refused."""
    col = F.col(field.name)
    if field.nullable or not isinstance(field.dataType, T.AtomicType):
        return col
    placeholder = _PLACEHOLDER.get(field.dataType.typeName(), "0")
    return F.coalesce(col, F.lit(placeholder).cast(field.dataType))


def summarize(spark, df, groups, keys, ordinals: list[str | None]):
    """One aggregation over the input's sort and partition columns: per (group, partition, natively read
    file) the first partition key, rows, each key's smallest and largest ordinal (`__low<i>`, `__high<i>`, for
    the sort prefix), and `__sample`, a Bernoulli sample of the sort key (structs k0..kn) at a rate that draws
    about SAMPLES_PER_FILE rows per planned output file of the group."""
    rates = []
    for g in groups:
        rows = sum(f.rows for f in g.inputs) or 1
        rates.append((g.group_id, min(1.0, min(SAMPLES_PER_FILE * max(1, g.output_files), MAX_SAMPLE) / rows)))
    key = _key_struct(keys)
    # Drawn in a projection: Spark refuses a random expression inside an aggregate.
    drawn = (df.join(F.broadcast(_literal_frame(spark, rates, [GROUP, "__rate"])), GROUP)
             .withColumn("__drawn", F.rand(SAMPLE_SEED) < F.col("__rate")))
    return (drawn.groupBy(GROUP, PART, SOURCE)
            .agg(F.first(PART_KEY).alias(PART_KEY), F.count(F.lit(1)).alias("rows"),
                 F.collect_list(F.when(F.col("__drawn"), key)).alias("__sample"),
                 *[agg(F.expr(o)).alias(f"__{name}{i}") for i, o in enumerate(ordinals) if o is not None
                   for name, agg in (("low", F.min), ("high", F.max))]))


def _key_struct(keys):
    """A row's sort key as the sample holds it: a struct of the key columns named k0..kn."""
    return F.struct(*[F.col(name).alias(f"k{i}") for i, (name, _, _) in enumerate(keys)])


def _with_halves(df, columns, salt: str):
    """`df` with the row hash's halves (`spark_hash_halves`, salted with column `salt`) as columns __high and
    __low. The hash is computed once per row, in a compiled projection: in an aggregate each half would
    hash every column again."""
    high, low = hash_halves("`__hash`")
    return (df.withColumn("__hash", F.expr(spark_row_hash_expr(columns, salt=f"`{salt}`")))
            .withColumn("__high", F.expr(high)).withColumn("__low", F.expr(low)))


class _Clock:
    """Times the job's parts; each part's Spark jobs run in the job group `lakesort: <part>` (the Spark UI
    shows it; tests find a part's stages by it)."""

    def __init__(self, laps: dict[str, float], spark, first: str) -> None:
        self.laps, self.started, self.last = laps, time.perf_counter(), time.perf_counter()
        self.spark = spark
        spark.sparkContext.setJobGroup(f"lakesort: {first}", first)

    def lap(self, name: str, following: str | None = None) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + now - self.last
        self.last = now
        if following:
            self.spark.sparkContext.setJobGroup(f"lakesort: {following}", following)

    def total(self) -> float:
        return time.perf_counter() - self.started


def _ordered(col, direction: str, nulls: str):
    if direction == "desc":
        return col.desc_nulls_first() if nulls == "first" else col.desc_nulls_last()
    return col.asc_nulls_first() if nulls == "first" else col.asc_nulls_last()


def _before(row_values, bound, keys):
    """Spark expression: the row's sort key comes strictly before `bound`'s (a struct k0..kn) in the sort
    order, direction and null placement per key (Spark's own comparison: NaN largest, -0.0 == 0.0, as
    its sort orders them)."""
    result = F.lit(False)
    for i in reversed(range(len(keys))):
        _, direction, nulls = keys[i]
        r, b = row_values[i], bound[f"k{i}"]
        if nulls == "first":
            null_before = r.isNull() & b.isNotNull()
        else:
            null_before = r.isNotNull() & b.isNull()
        strictly = null_before | F.coalesce(r > b if direction == "desc" else r < b, F.lit(False))
        result = strictly | (r.eqNullSafe(b) & result)
    return result


def boundaries(spark, summary, files_of, keys, prefix: PrefixPlan | None = None):
    """Per (group, partition) that gets n > 1 slots: n - 1 boundaries, the n-quantiles of its sample. A small
    DataFrame (GROUP, PART, __bounds: ordered). With a sort prefix the boundaries are sampled prefixes (longs,
    sorted by value: a row's slot is then the number of boundaries at or below its prefix, one comparison of
    longs each); without one, sort keys (structs k0..kn) sorted in Spark with the sort order's own
    comparison (no value goes through Python, so every type compares exactly as Spark sorts it)."""
    wanted = _literal_frame(spark, [(g, p, n) for (g, p), n in sorted(files_of.items()) if n > 1], [GROUP, PART, "__files"])
    n = len(keys)

    def compare(left, right):
        lv, rv = [left[f"k{i}"] for i in range(n)], [right[f"k{i}"] for i in range(n)]
        return F.when(_before(lv, right, keys), -1).when(_before(rv, left, keys), 1).otherwise(0)

    if prefix is not None:
        drawn = (summary.select(GROUP, PART, F.explode("__sample").alias("__s"))
                 .select(GROUP, PART, *[F.col("__s")[f"k{i}"].alias(name) for i, (name, _, _) in enumerate(keys)])
                 .select(GROUP, PART, F.expr(prefix.sql()).alias("__p")))
        samples = (drawn.groupBy(GROUP, PART).agg(F.sort_array(F.collect_list("__p")).alias("__sample"))
                   .join(F.broadcast(wanted), [GROUP, PART]))
    else:
        samples = (summary.groupBy(GROUP, PART).agg(F.flatten(F.collect_list("__sample")).alias("__sample"))
                   .join(F.broadcast(wanted), [GROUP, PART])
                   .withColumn("__sample", F.array_sort("__sample", compare)))
    size = F.size("__sample")
    # The j-th boundary (j = 1 .. n-1) is the first sampled key of the j-th quantile.
    positions = F.filter(F.sequence(F.lit(1), F.col("__files")), lambda j: (j < F.col("__files")) & (size > 0))
    picked = F.transform(positions, lambda j: F.element_at("__sample", F.floor(j * size / F.col("__files"))
                                                            .cast("int") + 1))
    return samples.select(GROUP, PART, picked.alias("__bounds"))


def _literal_frame(spark, rows, names):
    """A small DataFrame of literal rows (ints, floats, strings), written as one SQL VALUES clause: Spark
    plans it as a local relation (a broadcast without a job). Built with createDataFrame from a Python list
    it costs a Spark job of Python workers (about 2 s at start); as Column literals, a Py4J call per value
    (3.3 s for 252 files); a literal map lookup per row scans the map (3x slower than the read itself)."""
    if not rows:
        raise ValueError("a literal frame needs at least one row (its column types come from the values)")
    values = ", ".join("(" + ", ".join(_sql_value(v) for v in row) + ")" for row in rows)
    return spark.sql(f"SELECT * FROM VALUES {values} AS t({', '.join(f'`{n}`' for n in names)})")


def _sql_value(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"literal frames hold ints, floats and strings, not {value!r}")
    if isinstance(value, float):
        return repr(value) + "D"  # a DOUBLE literal (unsuffixed, Spark reads a DECIMAL)
    return sql_literal(value)


def with_slots(spark, df, summary, counts, keys, prefix: PrefixPlan | None = None, *, placed: bool = False,
               drawn=None):
    """`df` with SLOT: the global index of the slot each row goes to (`layout.compaction.slots`): its (group,
    partition)'s first slot plus the number of that partition's boundaries at or below the row's key, so
    equal keys share a slot and the slots of a partition hold disjoint, ordered key ranges. With a sort
    prefix (column PREFIX) the boundaries and the comparisons are the prefix's:
    it never decreases along the sort order and equal keys have equal prefixes, so the same holds (TPC-H SF1
    into 6 slots: the map stage took 14.3 s comparing keys, 9.1 s comparing prefixes; one run each). `placed`:
    `df` has each row's `__start` (and `__bounds`) already. `drawn`: the sampled rows (`sample_keys`), whose
    prefixes give a single partition's boundaries in one Spark job."""
    starts = _starts(counts)
    if not starts:  # no rows were read: nothing to place
        return df.withColumn(SLOT, F.lit(0))
    several = any(n > 1 for n in counts.values())
    if placed:
        pass  # the file's listing brought its partition's first slot and boundaries (`slot_frame`) already
    elif len(starts) == 1 and (prefix is not None or not several):
        # One (group, partition), as a flat table or a single partition: its first slot is 0 and its boundaries
        # one literal array, with no join per row (a broadcast join on (group, partition) costs about 0.3 s
        # per join at TPC-H SF1, one run).
        df = df.withColumn("__start", F.lit(0))
        if several:
            if drawn is not None:
                # The drawn rows' prefixes sorted here (longs: Python's order is Spark's), as `boundaries` picks
                # them: one Spark job instead of a sort and an aggregation (about 1.5 s of a cold job, one run).
                sampled = sorted(r[0] for r in drawn.select(F.expr(prefix.sql())).collect())
                bounds = quantile_picks(sampled, next(iter(counts.values())))
            else:
                (row,) = boundaries(spark, summary, counts, keys, prefix).collect()
                bounds = row["__bounds"]
            df = df.withColumn("__bounds", F.expr(f"CAST(array({', '.join(f'{int(b)}L' for b in bounds)}) "
                                                  "AS ARRAY<BIGINT>)"))
    else:
        df = df.join(F.broadcast(slot_frame(spark, summary, counts, keys, prefix)), [GROUP, PART], "left")
    if several:
        values = [F.col(name) for name, _, _ in keys]

        def at_or_after(bound):
            return F.col(PREFIX) >= bound if prefix is not None else ~_before(values, bound, keys)

        # A binary search over the partition's sorted boundaries, one compiled step per bit: the count of
        # boundaries at or below the row (they are sorted, so those are the first ones). Each step is a
        # column of its own, which Spark keeps as a projection rather than repeating the step before inside
        # it. (Comparing every boundary costs a row one comparison per slot: TPC-H SF10 into 52 slots took the
        # write 503 s against 320 s for 13 slots; a lambda over the array is interpreted, 3x slower again.)
        most = max(counts.values()) - 1
        step = 1 << (most.bit_length() - 1)
        df = df.withColumn("__past", F.lit(0))
        while step:
            past = F.col("__past")
            probe = F.try_element_at("__bounds", past + step)
            df = df.withColumn("__past", past + F.when((past + step <= F.size("__bounds")) & at_or_after(probe), step)
                               .otherwise(0))
            step >>= 1
        bucket = F.col("__past")
        df = df.withColumn("__start", F.col("__start") + bucket).drop("__bounds", "__past")
    return df.withColumnRenamed("__start", SLOT)


def _starts(counts) -> dict[tuple[int, str], int]:
    """Each (group, partition)'s first slot: the slots of all partitions in their sorted order."""
    starts, offset = {}, 0
    for pair in sorted(counts):
        starts[pair], offset = offset, offset + counts[pair]
    return starts


def slot_frame(spark, summary, counts, keys, prefix: PrefixPlan | None = None):
    """(GROUP, PART, __start[, __bounds]): each (group, partition)'s first slot and, where a partition has
    several, its boundaries (`boundaries`), one small frame so that one join per row brings both."""
    info = _literal_frame(spark, [(g, p, s) for (g, p), s in sorted(_starts(counts).items())],
                          [GROUP, PART, "__start"])
    if any(n > 1 for n in counts.values()):
        info = info.join(boundaries(spark, summary, counts, keys, prefix), [GROUP, PART], "left")
    return info


def _slot_values(slots: SlotPlan, field: str) -> str:
    """SQL of each row's group id or partition directory (`field` of its slot), from its SLOT: a literal when
    every slot has the same. The shuffle then carries the slot (an int) instead of the group and partition
    (an int and a 16-character string): with the sort prefix computed again after it, the shuffle carried
    17% fewer bytes and the write took 7.1 s against 8.4 s (TPC-H SF1 into 6 slots, warm, one run)."""
    values = [getattr(s, field) for s in slots.slots] or [0 if field == "group_id" else ""]  # no rows
    if len(set(values)) == 1:
        return sql_literal(values[0])
    return f"element_at(array({', '.join(sql_literal(v) for v in values)}), `{SLOT}` + 1)"


def _sql_array(values: list[int]):
    """A literal array column from one SQL text (as Column literals, a Py4J call per value)."""
    return F.expr(f"array({', '.join(str(int(v)) for v in values)})")


def _plan_write(spark, plan, groups, parts, files_of, keys, ordinals, figures):
    """The write's slots and tasks (`layout.compaction.slots`), from each (group, partition)'s files and bytes
    (its group's input bytes by its share of the rows), and the sort prefix (`layout.compaction.sort_prefix`)."""
    group_bytes = {g.group_id: sum(f.size for f in g.inputs) for g in groups}
    group_rows: dict[int, int] = {}
    for (gid, _), (_, rows) in parts.items():
        group_rows[gid] = group_rows.get(gid, 0) + rows
    sizes = {pair: (files_of[pair], group_bytes[pair[0]] * rows / max(1, group_rows[pair[0]]))
             for pair, (_, rows) in parts.items()}
    piece_bytes = _piece_bytes(spark, groups, spark_schema(plan))
    parallelism = spark.sparkContext.defaultParallelism
    slots = plan_slots(sizes, piece_bytes=piece_bytes, pack_bytes=min(PACK_BYTES, piece_bytes), parallelism=parallelism)
    flat = (len(sizes) > 1 and spark.conf.get("spark.lakesort.compact.flatWrite", "true") == "true"
            and _renames_cheaply(write_dir(plan)))
    if flat:
        # Several partitions: a task per slot, written into one directory and moved into the slots' directories
        # afterwards, instead of Spark's dynamic partition writer (which copies every row to drop the partition
        # columns): TPC-H SF1 by month into 84 files, warm, sort and write in 11.6-12.2 s against 14.6-15.2 s
        # packed into 27 tasks (one run each). Past FLAT_MAX_TASKS unpacked slots (many small partitions,
        # where a task's fixed cost outweighs the copy), the slots are packed and partitioned as before.
        unpacked = plan_slots(sizes, piece_bytes=piece_bytes, parallelism=parallelism, pack=False)
        flat = unpacked.tasks <= max(FLAT_MAX_TASKS, 2 * slots.tasks)
        slots = unpacked if flat else slots
    log.info("writing %d file(s) in %d slot(s) by %d task(s) (up to %d slot(s) a task, %d piece(s) a file%s)",
             sum(files_of.values()), len(slots.slots), slots.tasks, slots.most_per_task, slots.most_pieces,
             ", into one directory" if flat else "")
    return slots, sort_prefix([(d, n) for _, d, n in keys], ordinals, figures), flat



def _renames_cheaply(path: str) -> bool:
    """Whether the file system moves a file without copying it (local, HDFS; not object stores)."""
    scheme = path.split("://", 1)[0].lower() if "://" in path else "file"
    return scheme in ("file", "hdfs", "viewfs")


def _place_flat_files(spark, flat_dir: str, target: str, slots: SlotPlan) -> None:
    """Move the files of a write into one directory (a task per slot) into their slots' directories under
    `target` (`slots.flat_destinations`), a rename each, and drop the directory: on a local file system by
    the driver itself (through Hadoop's, two Py4J calls a file took 0.54 s for 84 files), else through Hadoop's."""
    if _is_local(flat_dir):
        filesystem, root = resolve(flat_dir)
        _, dest = resolve(target)
        names = [Path(i.path).name for i in filesystem.get_file_info(pafs.FileSelector(root))]
        for name, directory in flat_destinations(slots, [n for n in names if n.endswith(".parquet")], GROUP, PART):
            filesystem.create_dir(f"{dest}/{directory}", recursive=True)
            filesystem.move(f"{root}/{name}", f"{dest}/{directory}/{name}")
            if f".{name}.crc" in names:  # Hadoop's checksum of the file, which its reader checks when present
                filesystem.move(f"{root}/.{name}.crc", f"{dest}/{directory}/.{name}.crc")
        filesystem.delete_dir(root)
        return
    fs, path = _hadoop_fs(spark, flat_dir)
    names = [status.getPath().getName() for status in fs.listStatus(path(flat_dir))]
    moves = flat_destinations(slots, [n for n in names if n.endswith(".parquet")], GROUP, PART)
    for name, directory in moves:
        fs.mkdirs(path(f"{target}/{directory}"))
        if not fs.rename(path(f"{flat_dir}/{name}"), path(f"{target}/{directory}/{name}")):
            raise RuntimeError(f"{flat_dir}/{name}: could not move it to {target}/{directory}")
    fs.delete(path(flat_dir), True)


def _hadoop_fs(spark, location: str):
    """Hadoop's file system of `location` (as Spark writes there) and its Path class."""
    path = spark._jvm.org.apache.hadoop.fs.Path
    return path(location).getFileSystem(spark._jsc.hadoopConfiguration()), path


def _piece_bytes(spark, groups, schema) -> int:
    """The input bytes a piece of an output file aims for: spark.lakesort.compact.pieceBytes when set, else
    PIECE_BYTES or less, so that a write task sorts its rows in memory (`layout.compaction.memory`)."""
    configured = spark.conf.get("spark.lakesort.compact.pieceBytes", None)
    if configured:
        return int(configured)
    sc = spark.sparkContext
    conf = sc.getConf()
    fraction = float(conf.get("spark.memory.fraction", "0.6"))
    if sc.master.startswith("local"):  # the tasks run in this JVM
        heap, cores = sc._jvm.java.lang.Runtime.getRuntime().maxMemory(), sc.defaultParallelism
    else:
        heap = sc._jvm.org.apache.spark.network.util.JavaUtils.byteStringAsMb(conf.get("spark.executor.memory", "1g")) << 20
        executors = max(1, sc._jsc.sc().getExecutorIds().size())
        cores = int(conf.get("spark.executor.cores", "0")) or max(1, sc.defaultParallelism // executors)
    per_task = task_memory(heap, fraction, cores)
    variable = sum(1 for f in schema.fields if not isinstance(f.dataType, _FIXED) or
                   isinstance(f.dataType, T.DecimalType) and f.dataType.precision > 18)
    ratio = memory_per_input_byte(groups, fields=len(schema.fields) + 1, variable_fields=variable)  # and the slot
    if ratio is None or not per_task:
        return PIECE_BYTES
    fitted = memory_piece_bytes(per_task, ratio)
    if fitted < PIECE_BYTES:
        log.info("pieces of %.1f MiB of input (not %d MiB): a write task sorts up to %.0f MiB in memory (heap %.0f "
                 "MiB, %d task(s) at once), and the input takes about %.1f bytes there per byte on disk",
                 fitted / 2**20, PIECE_BYTES >> 20, per_task / 2**20, heap / 2**20, cores, ratio)
    return min(PIECE_BYTES, fitted)


# Spark types an UnsafeRow holds in its 8-byte field (a decimal up to 18 digits as a long).
_FIXED = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DateType,
          T.TimestampType, T.TimestampNTZType, T.DecimalType)


def curve_column(df, strategy: str, keys: list[str], rows: int):
    """The curve index (`layout.curves`: z-order or Hilbert over quantile ranks) of each row, as a long.

    Each key's quantile boundaries come from a seeded sample of at most CURVE_SAMPLE rows of the key
    columns over the job's whole input (one boundary set for every group, as `lakesort advise` predicts
    with); the index is computed in the executors by an Arrow UDF over the key columns only, with the same
    code the advisor runs, so the layout written is the layout predicted."""
    bits = curves.curve_bits(len(keys))
    fraction = min(1.0, CURVE_SAMPLE / max(1, rows))
    sample = df.select(*keys).sample(fraction=fraction, seed=SAMPLE_SEED).toArrow()
    bounds = [curves.quantile_boundaries(sample.column(k), 1 << bits) for k in keys]

    def index(*columns: pa.Array) -> pa.Array:
        return pa.array(curves.curve_index(columns, bounds, strategy=strategy, bits=bits).view(np.int64))

    return arrow_udf(index, T.LongType())(*[F.col(k) for k in keys])


def read_back(spark, plan, target: str, columns: list[str]) -> dict[tuple[int, str, str], tuple[int, int]]:
    """Each staged file's rows and fingerprint, read back from storage by Spark's own Parquet reader in the
    executors: a new scan of the files as written (not the job's cached rows), so a write that lost or
    changed rows shows here; (group, partition directory, file name) -> (rows, hash sum): a task that wrote
    files of several partitions gave them one name. Keyed tables: the files of one partition
    directory must not share a key, and no key is null; both are counted here (`key_problems`)."""
    # Each row's hash is salted with its group, as the input's: the group is the directory the write
    # partitioned by, read as a partition column (a constant per file: a join or regex per row costs more).
    schema = T.StructType([*spark_schema(plan).fields, T.StructField(GROUP, T.IntegerType()),
                           T.StructField(PART, T.StringType())])
    # Splits of a few row groups, at least two per core: Spark's default (the input over the cores, at most
    # 128 MiB) leaves whole files to tasks, and three files on two cores ran as two tasks and then one.
    # (Set for this read only: the session's later reads keep their own splits.)
    total = sum(info.size for _, info in list_parquet_files(target))
    parallelism = spark.sparkContext.defaultParallelism
    before = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(max(4 << 20, min(128 << 20, total // (2 * parallelism)))))
    try:
        staged = spark.read.schema(schema).parquet(target)
        # The file's name from the scan's metadata column: grouping by input_file_name() (the whole path, a
        # string per row) took the read-back 3.1-3.4 s against 2.3 s (TPC-H SF1, warm, best of three). A
        # table column named `_metadata` would hide it.
        name = F.col("_metadata.file_name") if "_metadata" not in columns else F.input_file_name()
        files = _with_halves(staged.select("*", name.alias("__file")), columns, GROUP)
        figures = files.groupBy(GROUP, PART, "__file").agg(
            F.count(F.lit(1)).alias("rows"), F.sum("__high").alias("high"), F.sum("__low").alias("low")).collect()
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", before)
    out: dict[tuple[int, str, str], tuple[int, int]] = {}
    for r in figures:
        key = (r[GROUP], r[PART], _file_name(r["__file"]))
        if key in out:
            raise RuntimeError(f"two staged files are named {key}: cannot tell their figures apart")
        out[key] = (int(r["rows"]), exact_hash_sum(r["high"], r["low"]))
    return out


def key_problems(spark, plan, target: str) -> dict[int, tuple[int, int]]:
    """Group id -> (duplicate keys, null keys) over the staged files of a keyed table, read back by Spark:
    keys are unique per partition directory (one current-spec partition of one group)."""
    keys = list(plan.keys.columns)
    files = (_staged_rows(spark, plan, target)
             .withColumn("__dir", F.regexp_extract(F.input_file_name(), r"^(.*)/[^/]*$", 1))
             .withColumn("__group", F.regexp_extract("__dir", rf"{GROUP}=(\d+)", 1).cast("int")))
    null = F.lit(False)
    for k in keys:
        null = null | F.col(k).isNull()
    per_key = files.groupBy("__group", "__dir", *keys).agg(F.count(F.lit(1)).alias("n"),
                                                            F.max(null.cast("int")).alias("null"))
    rows = per_key.groupBy("__group").agg(F.sum(F.col("n") - 1).alias("duplicates"),
                                         F.sum(F.col("null") * F.col("n")).alias("nulls")).collect()
    return {r["__group"]: (int(r["duplicates"] or 0), int(r["nulls"] or 0)) for r in rows}


def _staged_rows(spark, plan, target: str):
    """The staged files as Spark's own reader reads them from storage (a new scan, not the job's rows)."""
    return spark.read.schema(spark_schema(plan)).option("recursiveFileLookup", "true").parquet(target)


def _file_name(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1]


def list_outputs(directory: str, partition_key: str, checked: dict[str, tuple[int, int]]):
    """The Parquet files the write produced: sizes and row counts from their footers, with the rows and
    fingerprint Spark read back from each (`read_back`)."""

    out = []
    scheme = directory.split("://", 1)[0] + "://" if "://" in directory else ""
    for filesystem, path in find_parquet_files(directory):
        pf = ParquetFile.open(path, filesystem=filesystem)
        uri = scheme + path if scheme and not path.startswith(scheme) else path
        rows, hash_sum = checked.get(_file_name(path), (0, 0))
        out.append(StagedFile(path=uri, size=pf.size, rows=pf.num_rows, partition_key=partition_key,
                              read_back_rows=rows, read_back_hash_sum=str(hash_sum)))
    return out


def write_manifest(spark, plan, staged: Staged, target: str, seconds: float,
                   timings: dict[str, float] | None = None) -> None:

    conf = {k: v for k, v in spark.sparkContext.getConf().getAll() if k.startswith(("spark.sql.", "spark.master",
                                                                                  "spark.executor", "spark.driver"))}
    manifest = StagedManifest(
        run_id=plan.run_id, table=plan.table, staging_dir=staging_dir(plan), groups=tuple(staged.groups),
        expected_hash_sum=str(staged.hash_sum),
        spark_version=spark.version, spark_master=spark.sparkContext.master, spark_conf=conf,
        writer_options=plan.writer_options, seconds=seconds, timings=timings or {}, warnings=staged.warnings,
    )
    Path(target).write_text(manifest.to_json())
    log.info("wrote manifest %s: %d group(s) in %.1fs", target, len(staged.groups), seconds)


if __name__ == "__main__":
    sys.exit(main())
