"""Merge-on-read inputs: the delete files of the plan applied to the input's rows in Spark,
by Iceberg's rules.

Every input row carries its file (FILE, an index over the plan's inputs: `file_index`) and its position in
that file (POS: Spark's `_metadata.row_index`, or the running count of pyiceberg's reader). The delete files
are read by the executors (`layout.compaction.executor.deletes`), never collected:

- position deletes: (data file path, position) pairs, joined to the planned inputs by path, kept where
  the rule holds (`layout.delete_rule.applies` on columns: the delete's partition is the data file's; the
  data file's sequence number at most the delete's) and the position is one of the file's rows; distinct
  pairs (FILE, POS) leave the rows by an anti-join;
- equality deletes, per set of equality columns: an anti-join of the rows with the delete rows on every
  equality column compared null-safe (NULL equals NULL, as Iceberg compares), where the data file's sequence
  number is below the delete's and the partition rule holds (the same rule; a condition on both sides, so a
  delete of an unpartitioned spec needs no row per partition).

The rows deleted are counted apart from the rows kept: position deletes from the delete files alone (the
distinct valid pairs: they name rows, whatever the data holds), equality deletes by a semi-join; the job
requires rows read = rows kept + rows deleted, per group, and verify proves the staged output against the
manifests' record counts minus these (`layout.compaction.integrity.proof`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import functions as F
from pyspark.sql import types as T

from layout.compaction.executor.partitions import GROUP
from layout.delete_rule import applies
from layout.errors import InputError

from .columns import DEL, DPATH, FILE, POS
from .frames import literal_frame
from .spark_versions import arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

    from layout.compaction.executor.inputs import InputSource
    from layout.compaction.plan import DeleteInput, RewriteGroup

    from .job_plan import JobPlan

__all__ = ["Applied", "apply_deletes", "file_index"]

log = logging.getLogger("lakesort.compact")

# The planned inputs' and the delete files' attributes, as columns of the small frames joined to the rows.
FPATH, FSEQ, FSPEC, FPART, FROWS = ("__lakesort_fpath", "__lakesort_fseq", "__lakesort_fspec",
                                    "__lakesort_fpart", "__lakesort_frows")
DSEQ, DSPEC, DPART, DGLOBAL = "__lakesort_dseq", "__lakesort_dspec", "__lakesort_dpart", "__lakesort_dglobal"
# Position pairs up to this many are broadcast to the anti-join
# (about 40 bytes each in Spark's hash relation).
BROADCAST_PAIRS = 2_000_000


def file_index(groups: Sequence[RewriteGroup]) -> dict[str, int]:
    """Each planned input's FILE: its index over the groups' inputs in plan order
    (an input is in one group)."""
    return {f.path: i for i, f in enumerate(f for g in groups for f in g.inputs)}


@dataclass(frozen=True, slots=True)
class Applied:
    """The rows with every applicable delete applied,
    and per group the rows deleted by position and by equality."""

    rows: DataFrame
    by_position: dict[int, int]
    by_equality: dict[int, int]
    cached: tuple[DataFrame, ...]

    def deleted(self, group_id: int) -> int:
        return self.by_position.get(group_id, 0) + self.by_equality.get(group_id, 0)


def apply_deletes(spark: SparkSession, job: JobPlan, groups: Sequence[RewriteGroup],
                  rows: DataFrame) -> Applied:
    """`rows` (the input as read: FILE and POS on each) without the rows the groups' delete files delete."""
    # The executors' readers bring pyiceberg's table module (0.4 s to import): only when deletes apply.
    from layout.compaction.executor.inputs import InputSource

    plan = job.plan
    deletes = _unique_deletes(groups)
    index = file_index(groups)
    files = literal_frame(spark, [(index[f.path], f.path, f.sequence_number, f.spec_id, f.partition_key,
                                   f.rows, g.group_id) for g in groups for f in g.inputs],
                          [FILE, FPATH, FSEQ, FSPEC, FPART, FROWS, GROUP])
    attrs = literal_frame(spark, [(i, d.sequence_number, d.spec_id, d.partition_key, int(d.unpartitioned))
                                  for i, d in enumerate(deletes)], [DEL, DSEQ, DSPEC, DPART, DGLOBAL])
    source = InputSource(metadata_location=plan.metadata_location, io_properties=dict(plan.io_properties),
                         schema=job.schema)
    cached: list[DataFrame] = []
    by_position: dict[int, int] = {}
    by_equality: dict[int, int] = {}
    positional = [(i, d) for i, d in enumerate(deletes) if d.kind == "position"]
    if positional:
        pairs = _position_pairs(spark, source, positional, files, attrs).persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(pairs)
        counted = {r[GROUP]: r["n"] for r in pairs.groupBy(GROUP).agg(F.count(F.lit(1)).alias("n")).collect()}
        by_position.update(counted)
        pairs = pairs.select(FILE, POS)
        if sum(counted.values()) <= BROADCAST_PAIRS:
            pairs = F.broadcast(pairs)
        rows = rows.join(pairs, [FILE, POS], "left_anti")
    equality = [(i, d) for i, d in enumerate(deletes) if d.kind == "equality"]
    if equality:
        # The data file's sequence number and partition beside each row, for the rule's condition.
        rows = rows.join(F.broadcast(files.select(FILE, FSEQ, FSPEC, FPART)), FILE)
        if positional:  # what the position deletes left, read once per equality set below
            rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(rows)
        for columns in sorted({d.equality_columns for _, d in equality}):
            chosen = [(i, d) for i, d in equality if d.equality_columns == columns]
            keys = _equality_rows(spark, job, source, chosen, columns).join(F.broadcast(attrs), DEL)
            condition = _equality_condition(rows, keys, columns)
            for r in (
                rows.join(keys, condition, "left_semi")
                .groupBy(GROUP)
                .agg(F.count(F.lit(1)).alias("n"))
                .collect()
            ):
                by_equality[r[GROUP]] = by_equality.get(r[GROUP], 0) + r["n"]
            rows = rows.join(keys, condition, "left_anti")
        rows = rows.drop(FSEQ, FSPEC, FPART)
    log.info("applying %d position and %d equality delete file(s): "
             "%d rows deleted by position, %d by equality",
             len(positional), len(equality), sum(by_position.values()), sum(by_equality.values()))
    return Applied(rows, by_position, by_equality, tuple(cached))


def _unique_deletes(groups: Sequence[RewriteGroup]) -> list[DeleteInput]:
    """The groups' delete files, each once (a global delete applies to inputs of many groups)."""
    seen: dict[str, DeleteInput] = {}
    for g in groups:
        for d in g.deletes:
            seen.setdefault(d.path, d)
    return list(seen.values())


def _listing(spark: SparkSession, chosen: Sequence[tuple[int, DeleteInput]]) -> DataFrame:
    """The delete files as a frame of one row each, spread over tasks balanced by bytes."""
    tasks = max(1, min(len(chosen), spark.sparkContext.defaultParallelism * 4))
    ordered = sorted(chosen, key=lambda x: -x[1].size)
    rows = [(i, d.path, d.spec_id, d.partition_key, d.rows, d.size) for i, d in ordered]
    schema = T.StructType([T.StructField("del", T.IntegerType()), T.StructField("path", T.StringType()),
                           T.StructField("spec_id", T.IntegerType()),
                           T.StructField("partition", T.StringType()),
                           T.StructField("record_count", T.LongType()), T.StructField("size", T.LongType())])
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, tasks), schema)


def _position_pairs(spark: SparkSession, source: InputSource, chosen: Sequence[tuple[int, DeleteInput]],
                    files: DataFrame, attrs: DataFrame) -> DataFrame:
    """Distinct (FILE, POS, GROUP) the position deletes delete: the rule checked,
    positions within the file."""
    # Executor code of pyiceberg's readers: imported with them, only when deletes apply (`apply_deletes`).
    from layout.compaction.executor.deletes import position_batches

    out = T.StructType([T.StructField(DEL, T.IntegerType(), False), T.StructField(DPATH, T.StringType()),
                        T.StructField(POS, T.LongType())])

    target = arrow_schema(out)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return position_batches(source, batches, target)

    raw = _listing(spark, chosen).mapInArrow(read, out)
    rule = applies("position", data_sequence=F.col(FSEQ), delete_sequence=F.col(DSEQ),
                   same_partition=(F.col(FSPEC) == F.col(DSPEC)) & (F.col(FPART) == F.col(DPART)),
                   delete_global=F.col(DGLOBAL) == 1)
    within = (F.col(POS) >= 0) & (F.col(POS) < F.col(FROWS))
    return (raw.join(F.broadcast(files), F.col(DPATH) == F.col(FPATH)).join(F.broadcast(attrs), DEL)
            .where(rule & within).select(FILE, POS, GROUP).distinct())


def _equality_rows(spark: SparkSession, job: JobPlan, source: InputSource,
                   chosen: Sequence[tuple[int, DeleteInput]], columns: tuple[str, ...]) -> DataFrame:
    """The equality delete files' rows: DEL and each equality column as `__lakesort_eq<i>`,
    typed as the rows'."""
    # Executor code of pyiceberg's readers: imported with them, only when deletes apply (`apply_deletes`).
    from layout.compaction.executor.deletes import equality_batches

    fields = [T.StructField(DEL, T.IntegerType(), False)]
    for i, column in enumerate(columns):
        fields.append(T.StructField(f"__lakesort_eq{i}", _spark_type(job.spark_schema, column), True))
    out = T.StructType(fields)
    target = arrow_schema(out)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return equality_batches(source, batches, columns, target)

    return _listing(spark, chosen).mapInArrow(read, out)


def _spark_type(schema: T.StructType, dotted: str) -> T.DataType:
    kind: T.DataType = schema
    for name in dotted.split("."):
        if not isinstance(kind, T.StructType) or name not in kind.fieldNames():
            raise InputError(f"equality delete column {dotted} is not in the table's "
                             "schema as the job reads it")
        kind = kind[name].dataType
    return kind


def _equality_condition(rows: DataFrame, keys: DataFrame, columns: tuple[str, ...]) -> Column:
    """Every equality column equal null-safe, the data file older than the delete, and the partition rule."""
    condition = None
    for i, column in enumerate(columns):
        first, *rest = column.split(".")
        value = rows[first]
        for name in rest:
            value = value.getField(name)
        same = value.eqNullSafe(keys[f"__lakesort_eq{i}"])
        condition = same if condition is None else condition & same
    if condition is None:  # Iceberg's writers never write one; a hand-made file could
        raise InputError("an equality delete file names no equality columns (equality_ids is empty): it "
                         "cannot be applied; remove it with Iceberg's rewrite_data_files or expire it")
    rule: Column = applies("equality", data_sequence=rows[FSEQ], delete_sequence=keys[DSEQ],
                           same_partition=(rows[FSPEC] == keys[DSPEC]) & (rows[FPART] == keys[DPART]),
                           delete_global=keys[DGLOBAL] == 1)
    return condition & rule
