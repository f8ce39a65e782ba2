"""Groups whose inputs are all sorted runs, merged without a shuffle and without a sort
(`layout.compaction.executor.merge_runs`): which groups qualify (`plan_merges`), and their write
(`write_merges`).

A group qualifies when its rows need nothing but a merge: a linear order, no merge rule (keyed tables keep one
row per key), no deletes, every input read natively (its schema is the table's, by name, id and type) under the
current partition spec and in one partition, every column primitive, keys the merge orders as Spark does
(`merge_runs.mergeable_keys`), and every input a lakesort run of the plan's layout (`InputFile.sorted_run`,
from the runs' snapshot summaries) whose page index says it is sorted (`merge_runs.key_pages`, in the
driver for up to 64 files, else in Spark tasks: no data page is read). The rest go through the sort.

The write: one Spark task per key-range slice (`merge_runs.plan_slices`), each reading the pages of each run
that overlap its slice and merging them with the loser tree (`mapInArrow`: no exchange in the plan), written
by Spark's Parquet writer with the spec's options, a file per slice: into a directory of its own and then moved
into its group's and partition's directory where a move is a rename (local, HDFS), straight into that
directory on object stores (a move there is a copy). The fingerprint is observed on the
merged rows as the sort path observes its input (`InputFingerprint`, salted with the group), their count
checked against the manifests' rows; the read-back, the proof against the manifests' statistics, verify and
commit are the same as for sorted groups. A file found unsorted while merging (by a key after the first, which
the page index cannot show) fails the merge with `MergeUnsorted`: the job then sorts every group instead.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from layout.compaction.executor.merge_runs import (
    BATCH_ROWS,
    KeyPages,
    Slice,
    bytes_read,
    key_pages,
    merge_slice,
    mergeable_keys,
    plan_slices,
)
from layout.compaction.executor.partitions import GROUP, PART, key_dir
from layout.compaction.executor.staging import finish_staged_file
from layout.io import find_parquet_files

from .fingerprints import InputFingerprint
from .schema import as_declared
from .spark_versions import arrow_schema
from .storage import configured
from .write import move_files, renames_cheaply

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from layout.compaction.plan import RewriteGroup

    from .job_plan import JobPlan

log = logging.getLogger("lakesort.compact")

MERGE_CONF = "spark.lakesort.compact.mergeRuns"  # "false": every group is sorted, as before merges existed
PIECES_CONF = "spark.lakesort.compact.mergePiecesPerFile"  # slices (tasks) an output file is merged in; 0: enough for every core
DRIVER_FILES = 64  # inputs whose page tables the driver reads itself; more are read by Spark tasks
MERGED_DIR = "_merged"  # below the write's directory: a file per slice, moved into their groups' directories
UNSORTED = "lakesort: a sorted run is not sorted"  # the executors' error, found in Spark's by the driver


class MergeUnsorted(RuntimeError):
    """A run read while merging was not sorted by the keys: the job sorts instead."""


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
    """Why `group` cannot be merged, from the plan alone (None: it may be, if its runs' page indexes agree)."""
    plan = job.plan
    if plan.strategy != "linear":
        return f"the layout is a {plan.strategy} curve"
    if plan.keys is not None:
        return "the table is keyed (one row per key is kept)"
    if group.deletes:
        return "deletes apply to its inputs"
    if len(group.inputs) < 2:
        return "it has one input"
    if not all(f.sorted_run for f in group.inputs):
        return "an input is no sorted run of this layout"
    if not all(f.spark_native for f in group.inputs):
        return "an input's schema differs from the table's"
    if len({(f.spec_id, f.partition_key) for f in group.inputs}) > 1 or group.inputs[0].spec_id != plan.partition_spec_id:
        return "its inputs span partitions or specs"
    nested = [f.name for f in job.spark_schema.fields if isinstance(f.dataType, (T.StructType, T.ArrayType, T.MapType))]
    if nested:
        return f"column {nested[0]} is nested"
    types = {f.name: f.dataType for f in job.spark_schema.fields}
    return mergeable_keys(plan.sort_keys, [arrow_schema(T.StructType([T.StructField("k", types[k.column])]))[0].type
                                           for k in plan.sort_keys])


def plan_merges(spark: SparkSession, job: JobPlan, groups: Sequence[RewriteGroup]) -> MergePlan | None:
    """The groups to merge (None: none), their inputs' page tables read in the executors, and their slices."""
    if spark.conf.get(MERGE_CONF, "true").lower() == "false":
        return None
    reasons = {g.group_id: why_not(job, g) for g in groups}
    candidates = [g for g in groups if reasons[g.group_id] is None]
    sorted_because = Counter(r for r in reasons.values() if r is not None)
    if sorted_because:
        log.info("%d group(s) sorted, not merged: %s", sum(sorted_because.values()),
                 "; ".join(f"{why} ({n})" for why, n in sorted_because.most_common(5)))
    if not candidates:
        return None
    t0 = time.perf_counter()
    keys = [k.column for k in job.plan.sort_keys]
    paths = [(f.path, f.size) for g in candidates for f in g.inputs]
    pages = configured(job.plan.table_location, dict(job.plan.io_properties))(key_pages)
    if len(paths) <= DRIVER_FILES:
        # A few footers and page indexes (a request or two each): read by the driver's threads. A Spark job
        # for them took 5.7 s for 4 files (its Python workers' start and imports), the threads 0.2 s.
        with ThreadPoolExecutor(max_workers=16) as pool:
            tables = list(pool.map(lambda ps: pages(ps[0], ps[1], keys), paths))
    else:
        tasks = max(1, min(len(paths), 2 * spark.sparkContext.defaultParallelism))
        tables = spark.sparkContext.parallelize(paths, tasks).map(lambda ps: pages(ps[0], ps[1], keys)).collect()
    found = dict(zip([p for p, _ in paths], tables, strict=True))
    merged, files, slices, outputs, instead = [], {}, {}, {}, {}
    # Pieces: an output file may be merged by several tasks, each a slice of it, stitched afterwards, so that
    # every core has work: 3 files of an unpartitioned table on 2 cores ran as 2 tasks and then 1.
    wanted = 2 * spark.sparkContext.defaultParallelism
    files_out = sum(g.output_files for g in candidates)
    per_file = int(spark.conf.get(PIECES_CONF, "0")) or max(1, -(-wanted // max(1, files_out)))
    for g in candidates:
        tables = tuple(found[f.path] for f in g.inputs)
        unsorted = next((t for t in tables if t.unsorted), None)
        if unsorted is not None:
            instead[g.group_id] = f"{unsorted.path}: {unsorted.unsorted}"
            continue
        merged.append(g)
        files[g.group_id] = tables
        cut = plan_slices(tables, g.output_files * per_file)
        valued = sum(not piece.nulls for piece in cut)
        count = min(g.output_files, valued) or 1
        slices[g.group_id] = tuple(cut)
        # Consecutive slices make a file (key ranges in order); the null keys' slice a file of its own.
        outputs[g.group_id] = tuple(i * count // max(1, valued) if not piece.nulls else count
                                    for i, piece in enumerate(cut))
    plan = MergePlan(groups=tuple(merged), files=files, slices=slices, outputs=outputs, sorted_instead=instead)
    for gid, why in sorted(instead.items())[:5]:
        log.info("group %d is sorted, not merged: %s", gid, why)
    if merged:
        total = sum(g.bytes for g in merged)
        log.info("merging %d group(s) of sorted runs without a shuffle: %d file(s), %d slice(s), %.1f of %.1f MiB "
                 "to read (their pages), page indexes read in %.1fs", len(merged),
                 sum(len(g.inputs) for g in merged), sum(len(s) for s in slices.values()),
                 plan.bytes_read() / 2**20, total / 2**20, time.perf_counter() - t0)
    return plan if merged else None


def write_merges(spark: SparkSession, job: JobPlan, merges: MergePlan, target: str) -> Merged:
    """Every slice merged and written, a file each, into its group's directories under `target`."""
    work = [(g.group_id, key_dir(g.inputs[0].partition_key), g.inputs[0].partition_key, tuple(f.path for f in g.inputs),
             s, out) for g in merges.groups for s, out in zip(merges.slices[g.group_id], merges.outputs[g.group_id],
                                                                strict=True)]
    columns = list(job.columns)
    keys = [k.column for k in job.plan.sort_keys]
    schema = arrow_schema(job.spark_schema)
    out_schema = T.StructType([*job.spark_schema.fields, T.StructField(GROUP, T.IntegerType(), False),
                               T.StructField(PART, T.StringType(), False)])

    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                gid, part, _, paths, piece, _ = work[index]
                # The slice's constant columns, built once and sliced to each batch (at most BATCH_ROWS rows).
                group = pa.array(np.full(BATCH_ROWS, gid, np.int32))
                directory = pa.DictionaryArray.from_arrays(np.zeros(BATCH_ROWS, np.int32), [part]).cast(pa.string())
                try:
                    for merged in merge_slice(piece, paths, columns, keys, schema):
                        n = merged.num_rows
                        if n > len(group):
                            group = pa.array(np.full(n, gid, np.int32))
                            directory = pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), [part]).cast(pa.string())
                        yield pa.RecordBatch.from_arrays([*merged.columns, group.slice(0, n), directory.slice(0, n)],
                                                         [*columns, GROUP, PART])
                except Exception as exc:
                    if "not sorted" in str(exc):
                        raise RuntimeError(f"{UNSORTED}: {exc}") from exc
                    raise

    merge = configured(job.plan.table_location, dict(job.plan.io_properties))(merge)
    slices = spark.range(len(work), numPartitions=len(work)).select(F.col("id").cast("int").alias("slice"))
    rows = slices.mapInArrow(merge, out_schema)
    fingerprint = InputFingerprint(rows, list(job.columns))
    declared = [as_declared(f).alias(f.name, metadata=f.metadata) for f in job.spark_schema.fields]
    flat = f"{target}/{MERGED_DIR}"
    renames = renames_cheaply(target)
    try:
        if renames:  # a file per task into one directory, then moved (`_place`): no copy of each row
            written = fingerprint.observed.select(*declared)
            written.write.mode("overwrite").options(**job.plan.writer_options).parquet(flat)
        else:
            # An object store copies a file to move it: each task writes into its group's and partition's
            # directory itself (one slice a task, so one writer, and the rows in their merged order), beside
            # what the sort wrote there.
            written = fingerprint.observed.select(*declared, GROUP, PART)
            written.write.mode("append").options(**job.plan.writer_options).partitionBy(GROUP, PART).parquet(target)
    except Exception as exc:
        if UNSORTED in str(exc):
            reason = str(exc).split(UNSORTED, 1)[1].split("\n", 1)[0]
            raise MergeUnsorted(f"a sorted run is not sorted by {', '.join(keys)}{reason}") from exc
        raise
    expected = {g.group_id: g.rows for g in merges.groups}
    _, hash_sum = fingerprint.result(sum(expected.values()))
    if renames:
        _place(spark, flat, target, [(gid, part) for gid, part, *_ in work])
    _stitch(spark, job, target, work)
    parts: dict[tuple[int, str], tuple[str, int]] = {}
    for g in merges.groups:
        parts[(g.group_id, key_dir(g.inputs[0].partition_key))] = (g.inputs[0].partition_key, g.rows)
    return Merged(parts=parts, rows=expected, hash_sum=hash_sum)


def _stitch(spark: SparkSession, job: JobPlan, target: str, work: Sequence[tuple]) -> None:
    """The pieces of each output file (its slices' files, `part-<task>-...` by task: the slice's index in
    `work`), stitched in key order in the executors (`layout.parquet.stitch`: row groups copied byte for byte)."""
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
