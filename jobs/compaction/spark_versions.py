"""What the job does differently on the Sparks it runs on (3.5, 4.0, 4.1, 4.2: the cluster's own, whose
pyspark is the one `spark-submit` puts on the job's PYTHONPATH): the pyspark APIs newer than 3.5, with what
stands in for them before.

- `to_arrow_schema`'s time zone: a `timezone` argument in 4.2, `timestamp_utc=True` (the default) in 4.0 and
  4.1, always UTC in 3.5; the job runs in UTC, so each one's default but 4.2's gives the schema it needs.
- `DataFrame.toArrow` (4.0): before it, the same Arrow batches Spark sends for `toPandas`
  (`_collect_as_arrow`).
- `pyspark.sql.functions.arrow_udf` (4.1): before it, `mapInArrow` (3.3) computes the column over whole
  batches. A `pandas_udf` would convert the key columns to pandas and back, which is not exact (a nullable
  long becomes a float64, a timestamp nanoseconds), and the curve index must be the one `lakesort advise`
  predicts from the same values. The batches carry every column through Python, so the older Sparks pay a
  round trip of the rows for a curve layout (only where a curve is computed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

try:
    from pyspark.sql.functions import arrow_udf
except ImportError:  # Spark 3.5, 4.0
    arrow_udf = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame

__all__ = ["arrow_schema", "to_arrow", "with_arrow_column"]

ArrowFunction = Callable[..., pa.Array]  # the key columns' arrays of one batch -> the new column's array


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """The Arrow schema of Spark's batches of `schema` in a session in UTC (timestamps as UTC instants)."""
    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # before 4.2: UTC is the default
        return to_arrow_schema(schema)


def to_arrow(df: DataFrame) -> pa.Table:
    """The rows of `df` collected to the driver as an Arrow table (`DataFrame.toArrow` where Spark has it)."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    # Before 4.0 (no toArrow): the classic DataFrame's own method (DataFrame.__getattr__ types it a Column).
    batches = df._collect_as_arrow()  # type: ignore[operator]
    schema = arrow_schema(df.schema)
    # Spark's batches may differ from `schema` in nothing but field nullability; rebuilt on the batches' own.
    return pa.Table.from_batches(batches) if batches else schema.empty_table()


def with_arrow_column(df: DataFrame, name: str, function: ArrowFunction, columns: Sequence[str],
                      return_type: T.DataType, *, use_udf: bool | None = None) -> DataFrame:
    """`df` with a column `name`: `function` over the Arrow arrays of `columns`, batch by batch, in the
    executors (an Arrow UDF where Spark has one; `use_udf=False` forces the `mapInArrow` of older Sparks)."""
    if use_udf is None:
        use_udf = arrow_udf is not None
    if use_udf:
        # pyspark's overloads all name a functionType; without one Spark infers it from the function's hints,
        # else a scalar Arrow UDF.
        udf = arrow_udf(function, return_type)  # type: ignore[call-overload]
        return df.withColumn(name, udf(*[F.col(c) for c in columns]))
    schema = T.StructType([*df.schema.fields, T.StructField(name, return_type, True)])
    wanted = list(columns)

    def add(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            values = function(*[batch.column(batch.schema.get_field_index(c)) for c in wanted])
            yield pa.RecordBatch.from_arrays([*batch.columns, values], names=[*batch.schema.names, name])

    return df.mapInArrow(add, schema)
