"""Sort keys that sort by an Iceberg transform of their column (`bucket[8](id)`, `day(ts)`): each transform's
values as a column of its own beside the row's, which the job sorts, samples and slots by as it does by a
plain column (`JobPlan.keys` names them), dropped before the write.

The values are Iceberg's own (`layout.transforms`): a Spark SQL expression where Spark computes them exactly
(truncate of integers and strings, year/month/day/hour of dates and instants), else pyiceberg's transform over
Arrow batches in the executors (bucket: Iceberg's murmur3, which Spark's hash() is not; truncate of decimals;
wall-clock timestamps). Rows with equal values keep the next key's order: the sort goes on to the next key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from layout import transforms
from layout.compaction.plan import SortKeyModel

from .columns import KEY
from .spark_versions import with_arrow_column

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.types import IcebergType
    from pyspark.sql import DataFrame


@dataclass(frozen=True, slots=True)
class KeyColumns:
    """Per transformed sort key, its column's name, its transform and its source column; `on` adds them."""

    schema: Schema
    spark: T.StructType  # the table's columns as Spark reads them (a truncated value keeps its column's type)
    columns: tuple[tuple[str, str, str], ...]  # (name, transform, source column)

    @classmethod
    def of(cls, schema: Schema, spark: T.StructType,
           keys: tuple[SortKeyModel, ...]) -> tuple[KeyColumns, tuple[SortKeyModel, ...]]:
        """The transformed keys' columns, and the keys the job sorts by: a transformed key replaced by its
        column (direction and nulls kept: a transform's value is null exactly when the column's is)."""
        columns, job_keys = [], []
        for i, key in enumerate(keys):
            if key.transform == transforms.IDENTITY:
                job_keys.append(key)
                continue
            name = f"{KEY}{i}"
            columns.append((name, key.transform, key.column))
            job_keys.append(SortKeyModel(column=name, direction=key.direction, nulls=key.nulls))
        return cls(schema=schema, spark=spark, columns=tuple(columns)), tuple(job_keys)

    @property
    def names(self) -> list[str]:
        return [name for name, _, _ in self.columns]

    def on(self, df: DataFrame) -> DataFrame:
        """`df` with each transformed key's column."""
        for name, transform, column in self.columns:
            source = self.schema.find_field(column).field_type
            sql = transforms.spark_sql(transform, f"`{column}`", source)
            if sql is not None:
                df = df.withColumn(name, F.expr(sql))
            else:
                # An int (bucket, year ... hour), or the column's own type (truncate).
                result = self.spark[column].dataType if transform.startswith("truncate") else T.IntegerType()
                df = with_arrow_column(df, name, _arrow_function(transform, source), [column], result)
        return df


def _arrow_function(transform: str, source: IcebergType) -> Callable[[pa.Array], pa.Array]:
    # pyarrow is imported at run time: Spark reads the Arrow UDF's kind from these hints.
    def apply(values: pa.Array) -> pa.Array:
        return transforms.arrow_values(transform, source, values)

    return apply
