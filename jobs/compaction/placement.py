"""Each row's slot, a piece of an output file (`layout.compaction.executor.slots`): its partition's first slot
plus the number of that partition's boundaries at or below its key, by a binary search compiled into the plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from pyspark.sql import functions as F
from pyspark.sql import types as T

from layout.compaction.executor.partitions import GROUP, PART
from layout.compaction.executor.slots import edges_on_values, quantile_picks
from layout.literals import sql_literal

from .columns import PREFIX, SLOT
from .frames import before, literal_frame, sql_array
from .sample import boundaries

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from layout.compaction.executor.slots import SlotPlan
    from layout.compaction.executor.sort_prefix import PrefixPlan
    from layout.compaction.plan import SortKeyModel

Counts = Mapping[tuple[int, str], int]  # slots per (group, partition directory)


def with_slots(spark: SparkSession, df: DataFrame, summary: DataFrame | None, counts: Counts,
               keys: Sequence[SortKeyModel], prefix: PrefixPlan | None = None, *, placed: bool = False,
               drawn: DataFrame | None = None, pieces: int = 1) -> DataFrame:
    """`df` with SLOT: the global index of the slot each row goes to (`layout.compaction.executor.slots`): its
    (group, partition)'s first slot plus the number of that partition's boundaries at or below the row's key,
    so equal keys share a slot and the slots of a partition hold disjoint, ordered key ranges. With a sort
    prefix (column PREFIX) the boundaries and the comparisons are the prefix's:
    it never decreases along the sort order and equal keys have equal prefixes, so the same holds (TPC-H SF1
    into 6 slots: the map stage took 14.3 s comparing keys, 9.1 s comparing prefixes; one run each). `placed`:
    `df` has each row's `__start` (and `__bounds`) already. `drawn`: the sampled rows (`sample_keys`), whose
    prefixes give a single partition's boundaries in one Spark job; there, the edges between its files (every
    `pieces`-th boundary) start a value of the first key where that moves them little (`edges_on_values`)."""
    starts = _starts(counts)
    if not starts:  # no rows were read: nothing to place
        return df.withColumn(SLOT, F.lit(0))
    several = any(n > 1 for n in counts.values())
    if placed:
        pass  # the file's listing brought its partition's first slot and boundaries (`slot_frame`) already
    elif len(starts) == 1 and (prefix is not None or not several):
        # One (group, partition), as a flat table or a single partition: its first slot is 0 and its
        # boundaries one literal array, with no join per row (a broadcast join on (group, partition) costs
        # about 0.3 s per join at TPC-H SF1, one run).
        df = df.withColumn("__start", F.lit(0))
        if several:
            if drawn is not None:
                assert prefix is not None  # several slots of one partition here: it has a prefix (above)
                # The drawn rows' prefixes sorted here (longs: Python's order is Spark's), as `boundaries`
                # picks them: one Spark job instead of a sort and an aggregation
                # (about 1.5 s of a cold job, one run).
                sampled = sorted(r[0] for r in drawn.select(F.expr(prefix.sql())).collect())
                bounds = edges_on_values(quantile_picks(sampled, next(iter(counts.values()))), sampled,
                                         pieces, prefix.first_key_shift)
            else:
                assert summary is not None  # several slots: the run has a summary (or drew one)
                (row,) = boundaries(spark, summary, counts, keys, prefix).collect()
                bounds = row["__bounds"]
            df = df.withColumn("__bounds", F.expr(f"CAST(array({', '.join(f'{int(b)}L' for b in bounds)}) "
                                                  "AS ARRAY<BIGINT>)"))
    else:
        df = df.join(F.broadcast(slot_frame(spark, summary, counts, keys, prefix)), [GROUP, PART], "left")
    if several:
        values = [F.col(key.column) for key in keys]

        def at_or_after(bound: Column) -> Column:
            return F.col(PREFIX) >= bound if prefix is not None else ~before(values, bound, keys)

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
            df = df.withColumn(
                "__past",
                past + F.when((past + step <= F.size("__bounds")) & at_or_after(probe), step).otherwise(0),
            )
            step >>= 1
        bucket = F.col("__past")
        df = df.withColumn("__start", F.col("__start") + bucket).drop("__bounds", "__past")
    return df.withColumnRenamed("__start", SLOT)


def nan_first_key(job_keys: Sequence[SortKeyModel], schema: T.StructType, curve: bool) -> SortKeyModel | None:
    """The first sort key when it is a float or double column of a linear order: its NaN rows get a slot of
    their own (`layout.compaction.executor.slots`); None otherwise (a curve's index is a long)."""
    if curve or not job_keys or job_keys[0].column not in schema.fieldNames():
        return None
    key = job_keys[0]
    return key if isinstance(schema[key.column].dataType, (T.FloatType, T.DoubleType)) else None


def nan_side(key: SortKeyModel) -> Column:
    """The rows of a NaN slot: NaN in `key`, and its nulls where they sort beside NaN (Spark's sort puts NaN
    above every number: ascending nulls last, NaN then nulls end the order; descending nulls first, they start
    it), so that the slot holds a contiguous run of the order."""
    side = F.isnan(F.col(key.column))
    if (key.direction == "asc") == (key.nulls == "last"):
        side = side | F.col(key.column).isNull()
    return side


def nan_rows(df: DataFrame, key: SortKeyModel) -> dict[tuple[int, str], int]:
    """Per (group, partition) whose `key` holds a NaN: the rows of its NaN slot (`nan_side`). One aggregation
    over the key column (a float key has no sort prefix and the manifests count no NaN)."""
    rows = (df.where(nan_side(key)).groupBy(GROUP, PART)
            .agg(F.sum(F.isnan(F.col(key.column)).cast("long")).alias("nan"), F.count(F.lit(1)).alias("side"))
            .where(F.col("nan") > 0).collect())
    return {(r[GROUP], r[PART]): int(r["side"]) for r in rows}


def with_nan_slots(df: DataFrame, slots: SlotPlan, key: SortKeyModel | None) -> DataFrame:
    """`df` placed among the regular slots (`with_slots` with `SlotPlan.regular_counts`), each row moved to
    its slot in `slots`, and the rows of `nan_side` to their partition's NaN slot: a piece of its own, so the
    file starts a row group where they begin (parquet-mr drops the column index of a chunk holding NaN)."""
    remap = slots.nan_remap()
    if remap is None or key is None:
        return df
    regular, nan = remap
    index = F.col(SLOT) + 1
    return df.withColumn(SLOT, F.when(nan_side(key), F.element_at(sql_array(nan), index))
                         .otherwise(F.element_at(sql_array(regular), index)))


def _starts(counts: Counts) -> dict[tuple[int, str], int]:
    """Each (group, partition)'s first slot: the slots of all partitions in their sorted order."""
    starts, offset = {}, 0
    for pair in sorted(counts):
        starts[pair], offset = offset, offset + counts[pair]
    return starts


def slot_frame(spark: SparkSession, summary: DataFrame | None, counts: Counts, keys: Sequence[SortKeyModel],
               prefix: PrefixPlan | None = None) -> DataFrame:
    """(GROUP, PART, __start[, __bounds]): each (group, partition)'s first slot and, where a partition has
    several, its boundaries (`boundaries`), one small frame so that one join per row brings both."""
    info = literal_frame(spark, [(g, p, s) for (g, p), s in sorted(_starts(counts).items())],
                          [GROUP, PART, "__start"])
    if any(n > 1 for n in counts.values()):
        assert summary is not None  # several slots: the run has a summary (or drew one)
        info = info.join(boundaries(spark, summary, counts, keys, prefix), [GROUP, PART], "left")
    return info


def slot_values(slots: SlotPlan, field: Literal["group_id", "part"]) -> str:
    """SQL of each row's group id or partition directory (`field` of its slot), from its SLOT: a literal when
    every slot has the same. The shuffle then carries the slot (an int) instead of the group and partition
    (an int and a 16-character string): with the sort prefix computed again after it, the shuffle carried
    17% fewer bytes and the write took 7.1 s against 8.4 s (TPC-H SF1 into 6 slots, warm, one run)."""
    values = [getattr(s, field) for s in slots.slots] or [0 if field == "group_id" else ""]  # no rows
    if len(set(values)) == 1:
        return sql_literal(values[0])
    return f"element_at(array({', '.join(sql_literal(v) for v in values)}), `{SLOT}` + 1)"
