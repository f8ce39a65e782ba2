"""The input's fingerprint, observed in the write's pass over every column (`InputFingerprint`), and the
row hash's two halves as columns (`with_halves`) for the read-back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import Observation
from pyspark.sql import functions as F

from layout.compaction.executor.partitions import GROUP
from layout.compaction.integrity.fingerprint import (
    exact_hash_sum,
    hash_halves,
    spark_hash_halves,
    spark_row_hash_expr,
)
from layout.errors import InputError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger("lakesort.compact")


class InputFingerprint:
    """The input's fingerprint, observed in the pass that reads every column for the write: the rows and the
    sum of `xxhash64(columns..., group id)`, in the stage that reads the input (before the shuffle, so a
    shuffle that lost or changed a row differs from it).

    Observed metrics are accumulators of a shuffle's map stage: a stage that Spark re-runs (a lost
    executor's shuffle files) adds its rows again. Only adding is possible, so rows that differ from the
    first pass's count mean a re-run, and the fingerprint is then computed again in a pass of its own."""

    def __init__(self, df: DataFrame, columns: Sequence[str], watched: Sequence[str] = (), *,
                 salt: str = f"`{GROUP}`") -> None:
        self.df = df
        # `salt`: SQL of each row's group id (an int)
        self.halves = spark_hash_halves(list(columns), salt=salt)
        self.watched = list(watched)  # SQL of longs whose smallest and largest values are observed too
        self.observation = Observation("lakesort input fingerprint")
        self.got: dict[str, Any] = {}
        # The hash is taken inside the observed aggregate, not as columns of the rows: columns added for it
        # would have to be projected away again before the shuffle, a copy of every row (2 s of a 27 s write
        # at TPC-H SF1, one run; the aggregate's two halves cost less than that copy).
        self.observed = df.observe(self.observation, *self._sums())

    def _sums(self) -> tuple[Column, ...]:
        high, low = self.halves
        return (F.count(F.lit(1)).alias("rows"), F.sum(F.expr(high)).alias("high"),
                F.sum(F.expr(low)).alias("low"),
                *[agg(F.expr(sql)).alias(f"__{name}{i}") for i, sql in enumerate(self.watched)
                  for name, agg in (("min", F.min), ("max", F.max))])

    def result(self, rows: int, diagnose: Callable[[], None] | None = None) -> tuple[int, int]:
        """(rows, hash sum) after the write ran; `rows`: what the first pass counted, or the manifests record.
        `diagnose`, when the rows still differ in a pass of its own, raises the error that names the file."""
        got = self.observation.get
        if got.get("rows") != rows:
            log.warning("the write's observed fingerprint counts %s rows, against %d: a stage ran twice, or "
                        "a file reads differently; fingerprinting the "
                        "input in a pass of its own", got.get("rows"), rows)
            summed = self.df.agg(*self._sums()).first()
            assert summed is not None  # an aggregate without groups has its one row
            got = summed.asDict()
            if got["rows"] != rows:
                if diagnose is not None:
                    diagnose()
                raise InputError(f"Spark read {got['rows']} input rows in one pass and {rows} in another: "
                                 "the input files changed during the run or a reader is "
                                 "broken; nothing is committed")
        self.got = got
        return int(got["rows"]), exact_hash_sum(got["high"], got["low"])

    def ranges(self) -> list[tuple[int | None, int | None]]:
        """Each watched expression's smallest and largest value over the input (None: no non-null value)."""
        return [(self.got.get(f"__min{i}"), self.got.get(f"__max{i}")) for i in range(len(self.watched))]


def with_halves(df: DataFrame, columns: Sequence[str], salt: str) -> DataFrame:
    """`df` with the row hash's halves (`spark_hash_halves`, salted with column `salt`) as columns __high and
    __low. The hash is computed once per row, in a compiled projection: in an aggregate each half would
    hash every column again."""
    high, low = hash_halves("`__hash`")
    return (df.withColumn("__hash", F.expr(spark_row_hash_expr(list(columns), salt=f"`{salt}`")))
            .withColumn("__high", F.expr(high)).withColumn("__low", F.expr(low)))
