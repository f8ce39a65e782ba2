"""Groups whose inputs are all sorted runs, merged without a shuffle
(`layout.compaction.executor.merge_runs`):
which groups qualify (`plan_merges`), and their write (`write_merges`).

A group qualifies when its rows need nothing but a merge: a linear order, no merge rule (keyed tables keep one
row per key), no deletes, every input read natively (its schema is the table's, by name, id and type) under
the current partition spec and in one partition, every column primitive, a first key the slices can bound
(`merge_runs.mergeable_keys`), at least `MIN_BYTES` of input, and every input a lakesort run of the plan's
layout (`InputFile.sorted_run`, from the runs' snapshot summaries) whose page index says it is sorted by the
first key (`merge_runs.key_pages`, in the driver for up to 64 files, else in Spark tasks: no data page is
read). The rest go through the sort.

The write: one Spark task per key-range slice (`merge_runs.plan_slices`), reading the group's runs with
Spark's Parquet reader and the slice's range of the first key pushed down (`slice_rows`: parquet-mr skips the
pages outside it by their column index), sorting what it read by every key within the task, and writing it
with the spec's options: a union of one-partition scans, so no exchange. A file per slice: into a directory of
its own and then moved into its group's and partition's directory where a move is a rename (local, HDFS),
straight into that directory on object stores (a move there is a copy). The fingerprint is observed on the
slices' rows as the sort path observes its input (`InputFingerprint`, salted with the group), their count
checked against the manifests' rows: a row that no slice's range holds, or two do, fails the job. The
read-back, the proof against the manifests' statistics, verify and commit are the same as for sorted groups.

Before this, each task merged its slice's pages with the loser tree in Python (`layout.read.merge`, pages read
by `layout.parquet.excerpt`), which sorted nulls and floats of the later keys otherwise than Spark and could
only fail over to the sort when a run was unsorted by a later key. Both took the same time on TPC-H SF1, 4
runs of one unpartitioned table (the merge's write 36.7 s here, 38.9 s through Python; the sort path's sample,
shuffle, sort and write 39.2 s: tests/benchmarks/README.md, "Peers"),
bounded by the fingerprint and the Parquet write.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from layout.compaction.executor.merge_runs import (
    KeyPages,
    Slice,
    bytes_read,
    key_pages,
    mergeable_keys,
    plan_slices,
)
from layout.compaction.executor.partitions import GROUP, PART, key_dir
from layout.compaction.executor.staging import finish_staged_file
from layout.io import find_parquet_files

from .fingerprints import InputFingerprint
from .frames import ordered
from .schema import as_declared
from .spark_versions import arrow_schema
from .storage import configured
from .write import move_files, renames_cheaply

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from layout.compaction.plan import RewriteGroup

    from .job_plan import JobPlan

log = logging.getLogger("lakesort.compact")

MERGE_CONF = "spark.lakesort.compact.mergeRuns"  # "false": every group is sorted, as before merges existed
# slices (tasks) an output file is merged in; 0: enough for every core
PIECES_CONF = "spark.lakesort.compact.mergePiecesPerFile"
# Groups smaller than this are sorted: a slice costs the driver a scan to plan and Spark a task to run, more
# than a shuffle of a few MiB. TPC-H SF1 by month, 84 groups of 1.8 MiB (bench_peers.py, nightly, one loaded
# run): merged 168.7 s, sorted 129.7 s; one group of 140 MiB (nightly-flat, quiet):
# merged 56.4 s, sorted 58.7 s.
MIN_BYTES_CONF = "spark.lakesort.compact.mergeMinBytes"
MIN_BYTES = 32 * 2**20
DRIVER_FILES = 64  # inputs whose page tables the driver reads itself; more are read by Spark tasks
UNION_CONF = "spark.sql.unionOutputPartitioning"
MERGED_DIR = "_merged"  # below the write's directory: a file per slice, moved into their groups' directories
@dataclass(frozen=True, slots=True)
class MergePlan:
    """The groups merged, each with its files' page tables and its slices, and why others are sorted."""

    groups: tuple[RewriteGroup, ...]
    files: Mapping[int, tuple[KeyPages, ...]]  # per group id, its inputs' page tables, in its inputs' order
    slices: Mapping[int, tuple[Slice, ...]]
    outputs: Mapping[int, tuple[int, ...]]  # per group, the output file (index) each slice is a piece of
    sorted_instead: Mapping[int, str]  # group id -> why it is sorted (groups that were candidates only)

    @property
    def ids(self) -> set[int]:
        return {g.group_id for g in self.groups}

    def bytes_read(self) -> int:
        return sum(bytes_read(self.files[gid], self.slices[gid]) for gid in self.files)


@dataclass(frozen=True, slots=True)
class Merged:
    """What the merge wrote: per (group, partition directory) its partition key and rows, rows per group, and
    the fingerprint observed on the merged rows."""

    parts: dict[tuple[int, str], tuple[str, int]]
    rows: dict[int, int]
    hash_sum: int


def why_not(job: JobPlan, group: RewriteGroup) -> str | None:
    """Why `group` cannot be merged, from the plan alone (None: it may be,
    if its runs' page indexes agree)."""
    plan = job.plan
    if plan.strategy != "linear":
        return f"the layout is a {plan.strategy} curve"
    if plan.keys is not None:
        return "the table is keyed (one row per key is kept)"
    if job.transformed:
        return "a sort key is a transform of its column (pages bound the column, not the transform)"
    if group.deletes:
        return "deletes apply to its inputs"
    if len(group.inputs) < 2:
        return "it has one input"
    if not all(f.sorted_run for f in group.inputs):
        return "an input is no sorted run of this layout"
    if not all(f.spark_native for f in group.inputs):
        return "an input's schema differs from the table's"
    if len({(f.spec_id, f.partition_key) for f in group.inputs}) > 1 \
            or group.inputs[0].spec_id != plan.partition_spec_id:
        return "its inputs span partitions or specs"
    nested = [f.name for f in job.spark_schema.fields
              if isinstance(f.dataType, (T.StructType, T.ArrayType, T.MapType))]
    if nested:
        return f"column {nested[0]} is nested"
    types = {f.name: f.dataType for f in job.spark_schema.fields}
    return mergeable_keys(
        plan.sort_keys,
        [arrow_schema(T.StructType([T.StructField("k", types[k.column])]))[0].type for k in plan.sort_keys],
    )


def _setting(spark: SparkSession, key: str, default: str) -> str:
    """The Spark conf `key`, `default` when unset (pyspark types the value Optional, default or not)."""
    value = spark.conf.get(key, default)
    assert value is not None  # `default` when unset
    return value


def plan_merges(spark: SparkSession, job: JobPlan, groups: Sequence[RewriteGroup]) -> MergePlan | None:
    """The groups to merge (None: none), their inputs' page tables read in the executors, and their slices."""
    if _setting(spark, MERGE_CONF, "true").lower() == "false":
        return None
    least = int(_setting(spark, MIN_BYTES_CONF, str(MIN_BYTES)))
    reasons = {g.group_id: why_not(job, g)
               or (f"it is small (under {least / 2**20:g} MiB)" if g.bytes < least else None) for g in groups}
    candidates = [g for g in groups if reasons[g.group_id] is None]
    sorted_because = Counter(r for r in reasons.values() if r is not None)
    if sorted_because:
        log.info("%d group(s) sorted, not merged: %s", sum(sorted_because.values()),
                 "; ".join(f"{why} ({n})" for why, n in sorted_because.most_common(5)))
    if not candidates:
        return None
    t0 = time.perf_counter()
    keys = [k.column for k in job.plan.sort_keys]
    first_type = {f.name: f.dataType for f in job.spark_schema.fields}[keys[0]]
    paths = [(f.path, f.size) for g in candidates for f in g.inputs]
    pages = configured(job.plan.table_location, dict(job.plan.io_properties))(key_pages)
    if len(paths) <= DRIVER_FILES:
        # A few footers and page indexes (a request or two each): read by the driver's threads. A Spark job
        # for them took 5.7 s for 4 files (its Python workers' start and imports), the threads 0.2 s.
        with ThreadPoolExecutor(max_workers=16) as pool:
            tables = list(pool.map(lambda ps: pages(ps[0], ps[1], keys), paths))
    else:
        tasks = max(1, min(len(paths), 2 * spark.sparkContext.defaultParallelism))
        tables = (
            spark.sparkContext.parallelize(paths, tasks).map(lambda ps: pages(ps[0], ps[1], keys)).collect()
        )
    found = dict(zip([p for p, _ in paths], tables, strict=True))
    merged, files, slices, outputs, instead = [], {}, {}, {}, {}
    # Pieces: an output file may be merged by several tasks, each a slice of it, stitched afterwards, so that
    # every core has work: 3 files of an unpartitioned table on 2 cores ran as 2 tasks and then 1.
    wanted = 2 * spark.sparkContext.defaultParallelism
    files_out = sum(g.output_files for g in candidates)
    per_file = int(_setting(spark, PIECES_CONF, "0")) or max(1, -(-wanted // max(1, files_out)))
    for g in candidates:
        inputs = tuple(found[f.path] for f in g.inputs)
        unsorted = next((t for t in inputs if t.unsorted), None)
        if unsorted is not None:
            instead[g.group_id] = f"{unsorted.path}: {unsorted.unsorted}"
            continue
        cut = plan_slices(inputs, g.output_files * per_file)
        if not _literal_bounds(cut, first_type):
            instead[g.group_id] = (f"a page bound of {keys[0]} is no UTF-8 text (truncated): "
                                   "no Spark literal bounds it")
            continue
        merged.append(g)
        files[g.group_id] = inputs
        valued = sum(not piece.nulls for piece in cut)
        count = min(g.output_files, valued) or 1
        slices[g.group_id] = tuple(cut)
        # Consecutive slices make a file (key ranges in order); the null keys' slice a file of its own.
        outputs[g.group_id] = tuple(i * count // max(1, valued) if not piece.nulls else count
                                    for i, piece in enumerate(cut))
    plan = MergePlan(groups=tuple(merged), files=files, slices=slices, outputs=outputs,
                     sorted_instead=instead)
    for gid, why in sorted(instead.items())[:5]:
        log.info("group %d is sorted, not merged: %s", gid, why)
    if merged:
        total = sum(g.bytes for g in merged)
        log.info("merging %d group(s) of sorted runs without a shuffle: %d file(s), %d slice(s), %.1f of "
                 "%.1f MiB to read (their pages), page indexes read in %.1fs", len(merged),
                 sum(len(g.inputs) for g in merged), sum(len(s) for s in slices.values()),
                 plan.bytes_read() / 2**20, total / 2**20, time.perf_counter() - t0)
    return plan if merged else None


def write_merges(spark: SparkSession, job: JobPlan, merges: MergePlan, target: str) -> Merged:
    """Every slice merged and written, a file each, into its group's directories under `target`."""
    work = [(g.group_id, key_dir(g.inputs[0].partition_key), g.inputs[0].partition_key,
             tuple(f.path for f in g.inputs), s, out)
            for g in merges.groups
            for s, out in zip(merges.slices[g.group_id], merges.outputs[g.group_id], strict=True)]
    rows = _slice_rows(spark, job, work)
    fingerprint = InputFingerprint(rows, list(job.columns))
    declared = [as_declared(f).alias(f.name, metadata=f.metadata) for f in job.spark_schema.fields]
    flat = f"{target}/{MERGED_DIR}"
    order = [ordered(k) for k in job.plan.sort_keys]
    renames = renames_cheaply(target)
    # A union of one-partition scans keeps a partition per slice: Spark 4.1 and later give a union of children
    # partitioned alike (here each a single partition) their partitioning, zipping the slices into one task.
    union_conf = spark.conf.get(UNION_CONF, None)
    spark.conf.set(UNION_CONF, "false")
    try:
        if renames:  # a file per task into one directory, then moved (`_place`): no copy of each row
            written = fingerprint.observed.select(*declared).sortWithinPartitions(*order)
            written.write.mode("overwrite").options(**job.plan.writer_options).parquet(flat)
        else:
            # An object store copies a file to move it: each task writes into its group's and partition's
            # directory itself (one slice a task, so one writer), beside what the sort wrote there. Sorted by
            # the directory first, as the writer requires: a sort Spark would add for it drops the keys' sort.
            written = fingerprint.observed.select(*declared, GROUP, PART) \
                .sortWithinPartitions(GROUP, PART, *order)
            written.write.mode("append").options(**job.plan.writer_options).partitionBy(GROUP, PART) \
                .parquet(target)
    finally:
        if union_conf is None:
            spark.conf.unset(UNION_CONF)
        else:
            spark.conf.set(UNION_CONF, union_conf)
    expected = {g.group_id: g.rows for g in merges.groups}
    _, hash_sum = fingerprint.result(sum(expected.values()))
    if renames:
        _place(spark, flat, target, [(gid, part) for gid, part, *_ in work])
    _stitch(spark, job, target, work)
    parts: dict[tuple[int, str], tuple[str, int]] = {}
    for g in merges.groups:
        parts[(g.group_id, key_dir(g.inputs[0].partition_key))] = (g.inputs[0].partition_key, g.rows)
    return Merged(parts=parts, rows=expected, hash_sum=hash_sum)


def _stitch(spark: SparkSession, job: JobPlan, target: str, work: Sequence[tuple[Any, ...]]) -> None:
    """The pieces of each output file (its slices' files, `part-<task>-...` by task: the slice's index in
    `work`), stitched in key order in the executors (`layout.parquet.stitch`:
    row groups copied byte for byte)."""
    scheme = target.split("://", 1)[0] + "://" if "://" in target else ""
    found = [scheme + p if scheme and not p.startswith(scheme) else p for _, p in find_parquet_files(target)]
    # By directory and task: the sort's files (other groups') are named by their own tasks.
    by_task = {(Path(p).parent.parent.name, Path(p).parent.name, int(Path(p).name.split("-", 2)[1])): p
               for p in found if Path(p).name.startswith("part-")}
    pieces: dict[tuple[int, str, int], list[str]] = {}
    for index, (gid, part, *_, out) in enumerate(work):
        path = by_task.get((f"{GROUP}={gid}", f"{PART}={part}", index))
        if path is not None:
            pieces.setdefault((gid, part, out), []).append(path)
    several = [paths for paths in pieces.values() if len(paths) > 1]
    if not several:
        return
    t0 = time.perf_counter()
    finish = configured(job.plan.table_location, dict(job.plan.io_properties))(finish_staged_file)
    tasks = max(1, min(len(several), 2 * spark.sparkContext.defaultParallelism))
    spark.sparkContext.parallelize(several, tasks).map(lambda paths: finish(paths, {})).collect()
    log.info("merged groups: %d file(s) stitched from %d piece(s) in %.1fs", len(several),
             sum(len(p) for p in several), time.perf_counter() - t0)


def _place(spark: SparkSession, flat: str, target: str, slots: Sequence[tuple[int, str]]) -> None:
    """Each task's file (`part-<task>-...`) moved into its slice's group's and partition's directory."""

    def destinations(names: list[str]) -> list[tuple[str, str]]:
        return [(name, f"{GROUP}={gid}/{PART}={part}")
                for name in names for gid, part in [slots[int(name.split("-", 2)[1])]]]

    moved = move_files(spark, flat, target, destinations)
    log.info("merged groups: %d file(s) placed in their groups' directories", moved)


def _slice_rows(spark: SparkSession, job: JobPlan, work: Sequence[tuple[Any, ...]]) -> DataFrame:
    """Every slice's rows (`slice_rows`), a partition each, tagged with its group and partition directory."""
    first = job.plan.sort_keys[0].column
    dtype = {f.name: f.dataType for f in job.spark_schema.fields}[first]
    columns = list(job.columns)
    scans: dict[int, DataFrame] = {}  # a scan per group: its files listed once for all its slices
    frames = []
    for gid, part, _, paths, piece, _ in work:
        if gid not in scans:
            scans[gid] = spark.read.schema(job.spark_schema).parquet(*paths)
        frames.append(slice_rows(scans[gid], first, dtype, piece)
                      .select(*columns, F.lit(gid).alias(GROUP), F.lit(part).alias(PART)))
    return functools.reduce(lambda a, b: a.union(b), frames)


def slice_rows(scan: DataFrame, first: str, dtype: T.DataType, piece: Slice) -> DataFrame:
    """The rows of `scan` (a group's runs read by Spark's reader) whose first key lies in the slice, in one
    partition (`coalesce(1)`: the runs' pieces read one after the other by one task, no exchange). The range
    is pushed down to the Parquet reader: parquet-mr skips the row groups and pages outside it by their
    statistics and column indexes, so a task reads about its slice's pages of each run."""
    key = F.col(first)
    if piece.nulls:
        return scan.where(key.isNull()).coalesce(1)
    within = key.isNotNull()
    if piece.lo is not None:
        within = within & (key > bound(piece.lo, dtype))
    if piece.hi is not None:
        within = within & (key <= bound(piece.hi, dtype))
    return scan.where(within).coalesce(1)


def _literal_bounds(cut: Sequence[Slice], dtype: T.DataType) -> bool:
    """Whether every bound of the slices has a Spark literal (`bound`): a string column's page bounds are
    UTF-8 unless a writer truncated one inside a character."""
    if not isinstance(dtype, T.StringType):
        return True
    try:
        for piece in cut:
            for value in (piece.lo, piece.hi):
                if value is not None:
                    bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def bound(value: int | bytes, dtype: T.DataType) -> Column:
    """A slice's bound (an order key: `ColumnType.order_key`) as a Spark literal of the first key's type,
    folded to a constant before Spark pushes the filter down."""
    if isinstance(dtype, T.BooleanType):
        return F.lit(bool(value))
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return F.lit(int(value)).cast(dtype)
    if isinstance(dtype, T.DateType):
        return F.expr(f"date_from_unix_date({int(value)})")
    if isinstance(dtype, T.TimestampType):
        return F.expr(f"timestamp_micros({int(value)})")
    if isinstance(dtype, T.TimestampNTZType):  # the job's session time zone is UTC: no shift
        return F.expr(f"cast(timestamp_micros({int(value)}) as timestamp_ntz)")
    if isinstance(dtype, T.StringType):
        return F.lit(bytes(value).decode("utf-8"))
    if isinstance(dtype, T.BinaryType):
        return F.lit(bytearray(value))
    raise TypeError(f"no merge bound of type {dtype}")
