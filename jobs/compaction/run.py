"""The job's parts in order, in one Spark application (`compact_groups`), the session conf they need, and the
staged-output manifest (`write_manifest`) that verify and commit read.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pyspark import StorageLevel
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from layout.compaction.executor.figures import (
    ManifestRangeMiss,
    check_native_rows,
    check_ranges,
    file_counts,
    manifest_figures,
)
from layout.compaction.executor.partitions import GROUP, PART, PART_KEY
from layout.compaction.executor.slots import task_keys
from layout.compaction.integrity.fingerprint import SPARK_CONF as FINGERPRINT_CONF
from layout.errors import InputError
from layout.manifest import JobWarning, StagedGroup, StagedManifest

from .columns import CURVE, FILE, POS, PREFIX, RANK, SLOT, SOURCE
from .deletes import Applied, apply_deletes
from .fingerprints import InputFingerprint
from .frames import ordered, sql_array
from .job_plan import JobPlan
from .merge import plan_merges, write_merges
from .placement import nan_first_key, nan_rows, slot_frame, slot_values, with_nan_slots, with_slots
from .read import Inputs, read_inputs
from .readback import Checked, key_problems, list_outputs, read_back
from .sample import as_summary, sample_keys, summarize
from .schema import as_declared
from .storage import drop_sidecars, with_storage
from .write import (
    CurveIndex,
    curve_index,
    finish_files,
    hadoop_fs,
    place_flat_files,
    plan_write,
    staging_dir,
    write_dir,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from layout.compaction.executor.figures import Parts
    from layout.compaction.executor.slots import SlotPlan
    from layout.compaction.executor.sort_prefix import PrefixPlan
    from layout.compaction.plan import RewriteGroup, RewritePlan

log = logging.getLogger("lakesort.compact")


SESSION_CONF = {
    # Iceberg requires INT64 microseconds for timestamps; Spark's default for TimestampType is INT96.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # The write keeps the rows in the order each task sorted them (by the sort key alone: a task holds at most
    # one slot, so one file, of each group and partition: `layout.compaction.executor.slots`). By default
    # Spark plans a partitioned write under a sort by the partition columns, which replaces the task's own
    # sort (the key order then survives only while the sort does not spill). Without the planned write, and
    # with a writer per partition directory kept open, each row goes to its directory's writer as it comes.
    # Past this many writers Spark's concurrent writer sorts the rest of the task's rows by directory alone,
    # and the key order would be lost (the files would fail verification's order checks): the job raises it to
    # one more than the most slots a task holds.
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "2",
    # Let adaptive execution coalesce the shuffle partitions of a cached plan (the per-file summary): by
    # default it keeps spark.sql.shuffle.partitions of them, 400 tasks of nothing at TPC-H SF1 (4 s).
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
    # What the fingerprint's xxhash64 needs (hashing maps: their entries keep their order from read to
    # write, so the hash Spark refuses on maps by default is deterministic here).
    **FINGERPRINT_CONF,
}


LOGGED_GROUPS = 20  # groups logged one line each (the manifest holds them all)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt at the write (`compact_groups` makes one, or two when the manifests' bounds miss a value):
    where its figures (rows per partition, the sort prefix's key ranges) come from, and Spark's save mode of
    its write, which says what becomes of files already in the write's directory."""

    # "manifests": from the input files' manifest entries where they can give them (Spark reads every file
    # natively, no merge rule: `_first_pass`), else from a pass over the input; "first-pass":
    # from a pass over the input always.
    figures: Literal["manifests", "first-pass"]
    mode: Literal["errorifexists", "overwrite"]


# The first attempt writes into a directory of its own: a file already there is an error.
FIRST = Attempt(figures="manifests", mode="errorifexists")
# After the manifests' bounds missed a value (ManifestRangeMiss, raised once the write ran): figures from a
# pass over the input, and the first attempt's files, staged already, written over.
AGAIN = Attempt(figures="first-pass", mode="overwrite")


@dataclass(frozen=True, slots=True)
class Staged:
    """What the job staged: per group its files and figures, the input's fingerprint over all groups, and what
    it noticed in the input and worked around."""

    groups: tuple[StagedGroup, ...]
    hash_sum: int
    warnings: tuple[JobWarning, ...] = ()


def compact_groups(spark: SparkSession, plan: RewritePlan, groups: Sequence[RewriteGroup], *,
                   timings: dict[str, float] | None = None) -> Staged:
    """All groups in one Spark job, in parallel in every stage, each row sorted once:

    1. one pass over the planned files' sort and partition columns (`read_inputs`; Parquet reads only those):
       per (group, partition, natively read file) the rows and a Bernoulli sample of the sort key; keyed
       tables first keep one row per key (a window partitioned by the keys: parallel); natively read
       files' row counts are checked. When Spark reads every file natively (no merge rule; a curve too)
       there is no such pass: rows and the sort prefix's key ranges come from the manifests
       (`layout.compaction.executor.figures`), the write checks both, and only partitions cut into several
       slots draw a sample (`sample_keys`: the drawn rows alone are tagged); a value outside the bounds writes
       it all again (`AGAIN`);
    2. how many files each (group, partition) gets (its share of the group's planned output files), their
       slots and write tasks (`plan_write`), and where a partition has several slots, their boundaries:
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
    seconds. The plan's schema is decoded here, once (`JobPlan`).
    """
    if not groups:
        return Staged((), 0)
    plan = with_storage(spark, plan)  # an object store's settings and credentials, from the catalog
    job = JobPlan.of(plan)
    timings = timings if timings is not None else {}
    try:
        return _compact(spark, job, groups, timings, attempt=FIRST)
    except ManifestRangeMiss as miss:
        log.warning("%s; writing again with ranges from a pass over the input", miss)
        timings["written again: manifest bounds missed values"] = timings.pop(
            "fingerprint, shuffle, sort, write", 0.0
        )
        staged = _compact(spark, job, groups, timings, attempt=AGAIN)
        warning = JobWarning(rule="manifest_bounds", column=miss.column,
                             message=f"{miss}; the job wrote its files again with key ranges "
                                     "from a pass over the input")
        return dataclasses.replace(staged, warnings=(warning,))


def _compact(spark: SparkSession, job: JobPlan, groups: Sequence[RewriteGroup], timings: dict[str, float], *,
             attempt: Attempt) -> Staged:
    """The parts in order (`compact_groups`), each timed by the clock: the groups of sorted runs merged
    (`merge`), the others sorted."""
    clock = _Clock(timings, spark, "read, sample")
    for key, value in SESSION_CONF.items():
        spark.conf.set(key, value)
    target = write_dir(job.plan)
    merges = plan_merges(spark, job, groups)
    if merges is not None:
        clock.lap("merge: page indexes", "read, sample")
    sorting = [g for g in groups if merges is None or g.group_id not in merges.ids]
    tally = Tally()
    hash_sum = 0
    if sorting:
        inputs = read_inputs(spark, job, sorting)
        first = _first_pass(spark, job, sorting, inputs, attempt=attempt)
        clock.lap("read, sample", "file boundaries")
        placed = _place(spark, job, sorting, inputs, first)
        clock.lap("file boundaries", "fingerprint, shuffle, sort, write")
        _write(spark, job, placed, target, attempt=attempt)
        hash_sum += _input_hash_sum(job, inputs, first, placed)
        clock.lap("fingerprint, shuffle, sort, write", "stitch, field ids")
        finish_files(spark, job, target, placed.slots)
        clock.lap("stitch, field ids", "merge: read, merge, write" if merges else "read back")
        tally = Tally(parts=dict(first.parts), read=dict(first.read), expected=dict(first.expected),
                      deleted=dict(first.deleted))
    elif merges is not None:
        clock.lap("read, sample", "merge: read, merge, write")
    if merges is not None:
        # After the sort's write: that write may overwrite `target` as a whole (its save mode), this one
        # writes below it (`merge.MERGED_DIR`).
        merged = write_merges(spark, job, merges, target)
        hash_sum += merged.hash_sum
        tally.parts.update(merged.parts)
        tally.read.update(merged.rows)
        tally.expected.update(merged.rows)
        clock.lap("merge: read, merge, write", "read back")
    checked = read_back(spark, job, target)
    problems = key_problems(spark, job, target)
    drop_sidecars(target)  # what executors of other JVMs wrote beside the files (`storage.without_sidecars`)
    clock.lap("read back")
    staged = _staged_groups(job, groups, tally, target, checked, problems, clock.total())
    log.info("%d group(s), %d rows in %.1fs (%s)", len(groups), sum(tally.read.values()), clock.total(),
             ", ".join(f"{k} {v:.1f}s" for k, v in clock.laps.items()))
    return Staged(tuple(staged), hash_sum)


@dataclass(frozen=True, slots=True)
class Tally:
    """Per (group, partition directory) its partition key and rows, and per group the rows read, expected
    in the output and deleted: from the sort's first pass and the merge."""

    parts: dict[tuple[int, str], tuple[str, int]] = dataclasses.field(default_factory=dict)
    read: dict[int, int] = dataclasses.field(default_factory=dict)
    expected: dict[int, int] = dataclasses.field(default_factory=dict)
    deleted: dict[int, int] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FirstPass:
    """What the job knows before it places a row: the rows to write (merged, with a curve's index), per
    (group, partition) its partition key and rows, the per-file figures and summary they came from (summary
    None: the manifests'), rows read and expected per group,
    and the frames persisted until the write is done."""

    rows: DataFrame
    parts: Parts
    # per (group, partition, file): rows, `__low<i>` and `__high<i>` (`sort_prefix`)
    figures: list[dict[str, Any]]
    summary: DataFrame | None
    # rows and key ranges from the manifests (no pass over the input), checked by the write
    from_manifests: bool
    read: dict[int, int]
    expected: dict[int, int]
    cached: tuple[DataFrame, ...]
    deleted: dict[int, int] = dataclasses.field(default_factory=dict)  # merge-on-read: rows deleted per group
    curve: CurveIndex | None = None  # a curve layout's index, put on rows read again (`_place`)


def _first_pass(spark: SparkSession, job: JobPlan, groups: Sequence[RewriteGroup], inputs: Inputs, *,
                attempt: Attempt) -> FirstPass:
    """Part 1 of `compact_groups`: keyed tables merged, a curve's index, and per (group, partition, file) the
    rows and key ranges: from a pass over the sort and partition columns, or from the manifests."""
    plan, keys, ordinals = job.plan, job.keys, job.ordinals
    df, native, scan = inputs.rows, inputs.native, inputs.scan
    cached: list[DataFrame] = []  # unpersisted after the write
    if plan.keys is not None or plan.has_deletes or len(native) < sum(len(g.inputs) for g in groups):
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(df)
    read = None
    deleted: dict[int, int] = {}
    if plan.has_deletes:  # rows as read, per group and natively read file; then the deletes applied
        read = _counted(df, native)
        applied = apply_deletes(spark, job, groups, df)
        df = applied.rows.drop(FILE, POS).persist(StorageLevel.MEMORY_AND_DISK)
        cached += [df, *applied.cached]
        deleted = {g.group_id: applied.deleted(g.group_id) for g in groups}
        _check_deleted(df, read, applied)
    # rows as read, before the merge: per group, and per natively read file
    if plan.keys is not None and read is None:
        read = _counted(df, native)
    if plan.keys is not None:
        order = F.col(plan.keys.sequence)
        order = order.desc_nulls_last() if plan.keys.merge == "deduplicate" else order.asc_nulls_last()
        # Keys are unique per current-spec partition: a partition column is a function of the row.
        window = Window.partitionBy(GROUP, PART, *plan.keys.columns).orderBy(order)
        df = df.withColumn(RANK, F.row_number().over(window)).where(F.col(RANK) == 1)
        df = df.drop(RANK).persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(df)
    if job.transformed:  # the transformed keys' values, which the sample, the slots and the sort take
        df = job.key_columns.on(df)
    curve = None
    if job.curve:
        rows = sum(f.rows for g in groups for f in g.inputs)
        curve = curve_index(df, CURVE, plan.strategy, [k.column for k in plan.sort_keys], rows)
        df = curve.on(df)
    # A curve's rows per partition come from the manifests as a linear order's do (it has no key ranges to
    # take): by month at TPC-H SF1 the pass that counted them took 5.5 s of a 35 s job, one run.
    # Manifests bound columns, not their transforms: a transformed key's figures come from a pass.
    known = (manifest_figures(groups, ordinals)
             if attempt.figures == "manifests" and scan is not None and plan.keys is None
             and not plan.has_deletes and not job.transformed else None)
    if known is not None:  # no first pass: rows and key ranges from the manifests, checked by the write
        parts, figures = known
        summary = None
    else:
        summary = summarize(spark, df, groups, keys, ordinals).cache()  # small: a row per partition and file
        cached.append(summary)
        ranges = [(f"__low{i}", f"__high{i}") for i, o in enumerate(ordinals) if o is not None]
        figures = [r.asDict() for r in summary.select(GROUP, PART, SOURCE, PART_KEY, "rows",
                                                      *[c for pair in ranges for c in pair]).collect()]
        parts = {}
        for r in figures:
            pair = (r[GROUP], r[PART])
            parts[pair] = (r[PART_KEY], parts.get(pair, ("", 0))[1] + r["rows"])
        if plan.keys is None and not plan.has_deletes:
            check_native_rows(native, [(r[SOURCE], r["rows"]) for r in figures])
    expected: dict[int, int] = {}
    for (gid, _), (_, rows) in parts.items():
        expected[gid] = expected.get(gid, 0) + rows
    return FirstPass(rows=df, parts=parts, figures=figures, summary=summary, from_manifests=known is not None,
                     read=read if read is not None else dict(expected), expected=expected,
                     cached=tuple(cached), deleted=deleted, curve=curve)


def _counted(df: DataFrame, native: Mapping[str, tuple[str, int]]) -> dict[int, int]:
    """Rows as read per group; each natively read file's count checked against its manifest's."""
    counted = df.groupBy(GROUP, SOURCE).agg(F.count(F.lit(1)).alias("rows")).collect()
    check_native_rows(native, [(r[SOURCE], r["rows"]) for r in counted])
    read: dict[int, int] = {}
    for r in counted:
        read[r[GROUP]] = read.get(r[GROUP], 0) + r["rows"]
    return read


def _check_deleted(kept: DataFrame, read: Mapping[int, int], applied: Applied) -> None:
    """Per group, rows read = rows kept + rows deleted, each counted on its own (`deletes`): else nothing is
    written, naming the group."""
    rows = {r[GROUP]: r["n"] for r in kept.groupBy(GROUP).agg(F.count(F.lit(1)).alias("n")).collect()}
    for gid, n in sorted(read.items()):
        if rows.get(gid, 0) + applied.deleted(gid) != n:
            raise InputError(f"group {gid}: read {n} rows, kept {rows.get(gid, 0)} after the deletes, and "
                             f"counted {applied.by_position.get(gid, 0)} deleted by position and "
                             f"{applied.by_equality.get(gid, 0)} by equality: the deletes were not applied "
                             "consistently; nothing was written")


@dataclass(frozen=True, slots=True)
class Placement:
    """Part 2 of `compact_groups`: the rows with their slots and the input's fingerprint observed on them,
    the slots, whether the files are written flat, the sort order within a task, the sort prefix (None: the
    keys themselves) and the prefix keys whose ranges the write observes (the manifests' ranges checked)."""

    fingerprint: InputFingerprint
    slots: SlotPlan
    flat: bool
    order: tuple[Column, ...]
    prefix: PrefixPlan | None
    watched: tuple[str, ...]  # SQL of the observed ordinals (`PrefixKey.ordinal`)


def _place(spark: SparkSession, job: JobPlan, groups: Sequence[RewriteGroup], inputs: Inputs,
           first: FirstPass) -> Placement:
    """Part 2 of `compact_groups`: each (group, partition)'s files, their slots and write tasks, the slots'
    boundaries, and every row's slot; only the table's columns and the slot go on to the shuffle."""
    df, columns, scan, keys = first.rows, job.columns, inputs.scan, job.keys
    files_of = file_counts(groups, first.parts)
    # A float/double first key holding NaN: its NaN rows get a slot of their own, where a partition has other
    # rows too (parquet-mr drops the column index of a chunk holding NaN: only theirs then lose it).
    nan_key = nan_first_key(keys, job.spark_schema, job.curve)
    nans = {pair: side for pair, side in (nan_rows(df, nan_key) if nan_key is not None else {}).items()
            if pair in first.parts and side < first.parts[pair][1]}
    slots, prefix, flat = plan_write(spark, job, groups, first.parts, files_of, first.figures, nan_rows=nans,
                                     nan_first=nan_key is not None and nan_key.direction == "desc")
    counts = slots.regular_counts()  # the slots rows are placed in by key ranges (`with_nan_slots` the rest)
    order = [ordered(key) for key in keys]
    summary, drawn = first.summary, None
    if summary is None and any(n > 1 for n in counts.values()):
        assert scan is not None  # no summary, no first pass: only for files read natively (`_first_pass`)
        drawn = sample_keys(spark, scan, groups, keys, curve=first.curve)
        summary = as_summary(drawn, keys)
    placed = first.from_manifests and scan is not None and scan.single is None and bool(counts)
    if placed:
        assert scan is not None  # as `placed` says
        # Files of several partitions: the join that tags each row with its file's group and partition
        # brings its partition's first slot and boundaries too (one broadcast join per row instead of two).
        info = slot_frame(spark, summary, counts, keys, prefix)
        df = scan.tagged(scan.rows, info).select(*columns, GROUP, PART, PART_KEY, SOURCE,
                                                 *[c for c in info.columns if c not in (GROUP, PART)])
        if first.curve is not None:
            df = first.curve.on(df)
    if prefix is not None:
        df = df.withColumn(PREFIX, F.expr(prefix.sql()))
    pieces = slots.pieces_per_file(*next(iter(counts))) if len(counts) == 1 else 1
    df = with_nan_slots(with_slots(spark, df, summary, counts, keys, prefix, placed=placed, drawn=drawn,
                                   pieces=pieces), slots, nan_key)
    if prefix is not None:
        # Computed again after the shuffle from the key columns (a few integer operations per row) rather than
        # carried through it: see `slot_values`.
        order = [F.expr(prefix.sql())] if prefix.exact else [F.expr(prefix.sql()), *order]
        log.info("sorting by a prefix of %d key(s) in %d bits%s", len(prefix.keys),
                 sum(k.bits for k in prefix.keys),
                 " (exact: the prefix alone)" if prefix.exact else ", then the keys")
    # Only the table's columns and the slot (and a curve's index, the transformed keys' values) cross the
    # shuffle: the row's group and partition are the slot's (`slot_values`), its task key is computed from
    # the slot by the partitioning.
    df = df.select(*columns, SLOT, *([CURVE] if job.curve else []), *job.key_columns.names)
    watched = tuple(k.ordinal for k in prefix.keys) if first.from_manifests and prefix is not None else ()
    fingerprint = InputFingerprint(df, columns, watched, salt=slot_values(slots, "group_id"))
    return Placement(fingerprint=fingerprint, slots=slots, flat=flat, order=tuple(order), prefix=prefix,
                     watched=watched)


def _write(spark: SparkSession, job: JobPlan, placed: Placement, target: str, *, attempt: Attempt) -> None:
    """Part 3 of `compact_groups`: one shuffle sends each slot to its task, which sorts its rows and writes
    them, a file per slot, in the staging directory `target` (with the attempt's save mode)."""
    plan, slots, order = job.plan, placed.slots, placed.order
    # A task holds slots of distinct (group, partition)s: sorted by the key (its prefix, where the key types
    # allow it), written as sorted by a writer per slot's directory (SESSION_CONF), a file per slot.
    spark.conf.set("spark.sql.maxConcurrentOutputFileWriters", str(max(2, slots.most_per_task + 1)))
    keys_of = task_keys(max(1, slots.tasks))
    task_key = F.element_at(sql_array([keys_of[s.task] for s in slots.slots] or [0]), F.col(SLOT) + 1)
    shuffled = placed.fingerprint.observed.repartition(max(1, slots.tasks), task_key)
    # Iceberg readers resolve columns by field id: parquet-mr writes each struct field's
    # `parquet.field.id` metadata as its field id (spark.sql.parquet.fieldId.write.enabled, on by default).
    declared = [as_declared(f).alias(f.name, metadata=f.metadata) for f in job.spark_schema.fields]
    pairs = sorted(slots.slot_counts())
    if len(pairs) == 1 or placed.flat:
        # The columns as declared, projected after the shuffle and before the sort: one copy of each row
        # there (Spark copies the rows to drop the slot before a sort anyway), where a projection after the
        # sort copied each row a second time (TPC-H SF1 by month: see the bench README).
        curve = ([CURVE] if job.curve else []) + job.key_columns.names
        written = shuffled.select(*declared, *curve).sortWithinPartitions(*order).drop(*curve)
    if len(pairs) == 1:
        # One (group, partition): its directory is written as a plain directory, without a writer looking up
        # each row's partition directory.
        (gid, part), = pairs
        written.write.mode(attempt.mode).options(**plan.writer_options).parquet(f"{target}/{GROUP}={gid}/{PART}={part}")
    elif placed.flat:
        if attempt.mode == "overwrite":  # as Spark's overwrite of `target` would: the files placed there go
            fs, path = hadoop_fs(spark, target)
            fs.delete(path(target), True)
        # Into a directory of its own below `target` (no file is there: the tasks' files are moved out of it).
        written.write.mode("errorifexists").options(**plan.writer_options).parquet(f"{target}/_flat")
        place_flat_files(spark, f"{target}/_flat", target, slots)
    else:
        # Each row's directory comes from its slot, which the sort keeps: the writer copies each row to drop
        # the directory columns in any case.
        written = shuffled.sortWithinPartitions(*order).select(
            *declared, F.expr(slot_values(slots, "group_id")).alias(GROUP),
            F.expr(slot_values(slots, "part")).alias(PART))
        written.write.mode(attempt.mode).options(**plan.writer_options).partitionBy(GROUP, PART) \
            .parquet(target)


def _input_hash_sum(job: JobPlan, inputs: Inputs, first: FirstPass, placed: Placement) -> int:
    """The input's fingerprint that the write observed (or a pass of its own computed), once the write ran;
    the persisted frames released, and the manifests' key ranges checked against what the write saw."""

    def diagnose() -> None:  # without a first pass, a count per file names the file that reads short
        check_native_rows(inputs.native,
                          [(r[0], r[1]) for r in inputs.rows.groupBy(SOURCE).count().collect()])

    rows = sum(first.expected.values())
    _, hash_sum = placed.fingerprint.result(rows, diagnose if first.from_manifests else None)
    for frame in first.cached:
        frame.unpersist()
    if placed.watched:
        assert placed.prefix is not None  # the ranges watched are the prefix's keys'
        check_ranges(placed.prefix, placed.fingerprint.ranges(), [key.column for key in job.keys])
    return hash_sum


def _staged_groups(job: JobPlan, groups: Sequence[RewriteGroup], first: Tally, target: str, checked: Checked,
                   problems: Mapping[int, tuple[int, int]], seconds: float) -> list[StagedGroup]:
    """Per group, its staged files with the figures read back, as the manifest records them."""
    keyed = job.plan.keys is not None
    # Indexed once: a table of thousands of partitions has as many groups, and a scan of every partition and
    # every file per group grew with their square.
    parts_of: dict[int, list[tuple[str, str]]] = {}
    for (gid, part), (key, _) in sorted(first.parts.items()):
        parts_of.setdefault(gid, []).append((part, key))
    checked_in: dict[tuple[int, str], dict[str, tuple[int, int]]] = {}
    for (gid, part, name), got in checked.items():
        checked_in.setdefault((gid, part), {})[name] = got
    staged = []
    for g in groups:
        outputs = []
        for part, key in parts_of.get(g.group_id, []):
            outputs += list_outputs(f"{target}/{GROUP}={g.group_id}/{PART}={part}", key,
                                    checked_in.get((g.group_id, part), {}))
        staged.append(StagedGroup(
            group_id=g.group_id, partition=g.partition, inputs=tuple(f.path for f in g.inputs),
            input_rows=int(first.read.get(g.group_id, 0)),
            expected_rows=int(first.expected.get(g.group_id, 0)),
            deleted_rows=first.deleted.get(g.group_id) if g.deletes else None, outputs=tuple(outputs),
            seconds=seconds, duplicate_keys=problems.get(g.group_id, (0, 0))[0] if keyed else None,
            null_keys=problems.get(g.group_id, (0, 0))[1] if keyed else None,
        ))
        if len(staged) <= LOGGED_GROUPS:
            log.info("group %d (%s): %d rows from %d files -> %d rows in %d files", g.group_id, g.partition,
                     first.read.get(g.group_id, 0), len(g.inputs), first.expected.get(g.group_id, 0),
                     len(outputs))
    if len(staged) > LOGGED_GROUPS:
        log.info("... and %d more group(s): the manifest holds each group's files and figures",
                 len(staged) - LOGGED_GROUPS)
    return staged


class _Clock:
    """Times the job's parts; each part's Spark jobs run in the job group `lakesort: <part>` (the Spark UI
    shows it; tests find a part's stages by it)."""

    def __init__(self, laps: dict[str, float], spark: SparkSession, first: str) -> None:
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


def write_manifest(spark: SparkSession, plan: RewritePlan, staged: Staged, target: str, seconds: float, *,
                   timings: Mapping[str, float] | None = None) -> None:
    """The staged-output manifest (`layout.manifest.StagedManifest`) at `target`,
    which verify and commit read."""
    conf = {k: v for k, v in spark.sparkContext.getConf().getAll()
            if k.startswith(("spark.sql.", "spark.master", "spark.executor", "spark.driver"))}
    manifest = StagedManifest(
        run_id=plan.run_id, table=plan.table, staging_dir=staging_dir(plan), groups=tuple(staged.groups),
        expected_hash_sum=str(staged.hash_sum),
        # A running context's master, which pyspark types Optional.
        spark_version=spark.version, spark_master=spark.sparkContext.master,  # type: ignore[arg-type]
        spark_conf=conf,
        writer_options=plan.writer_options, seconds=seconds, timings=dict(timings or {}),
        warnings=staged.warnings,
    )
    Path(target).write_text(manifest.to_json())
    log.info("wrote manifest %s: %d group(s) in %.1fs", target, len(staged.groups), seconds)
