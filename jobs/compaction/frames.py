"""Small Spark building blocks of the job: literal frames written as one SQL VALUES clause, literal arrays,
and the sort order as Spark expressions (`ordered`, and `before`: a row's key strictly before a bound's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from layout.literals import sql_literal

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from layout.compaction.plan import SortKeyModel

LiteralValue = int | float | str  # a value of a literal frame


def literal_frame(spark: SparkSession, rows: Sequence[Sequence[LiteralValue]],
                  names: Sequence[str]) -> DataFrame:
    """A small DataFrame of literal rows (ints, floats, strings), written as one SQL VALUES clause: Spark
    plans it as a local relation (a broadcast without a job). Built with createDataFrame from a Python list
    it costs a Spark job of Python workers (about 2 s at start); as Column literals, a Py4J call per value
    (3.3 s for 252 files); a literal map lookup per row scans the map (3x slower than the read itself)."""
    if not rows:
        raise ValueError("a literal frame needs at least one row (its column types come from the values)")
    values = ", ".join("(" + ", ".join(_sql_value(v) for v in row) + ")" for row in rows)
    return spark.sql(f"SELECT * FROM VALUES {values} AS t({', '.join(f'`{n}`' for n in names)})")


def _sql_value(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"literal frames hold ints, floats and strings, not {value!r}")
    if isinstance(value, float):
        return repr(value) + "D"  # a DOUBLE literal (unsuffixed, Spark reads a DECIMAL)
    return sql_literal(value)


def sql_array(values: Sequence[int]) -> Column:
    """A literal array column from one SQL text (as Column literals, a Py4J call per value)."""
    return F.expr(f"array({', '.join(str(int(v)) for v in values)})")


def ordered(key: SortKeyModel) -> Column:
    """The key's column in its sort order: direction and null placement."""
    col = F.col(key.column)
    if key.direction == "desc":
        return col.desc_nulls_first() if key.nulls == "first" else col.desc_nulls_last()
    return col.asc_nulls_first() if key.nulls == "first" else col.asc_nulls_last()


def before(row_values: Sequence[Column], bound: Column, keys: Sequence[SortKeyModel]) -> Column:
    """Spark expression: the row's sort key comes strictly before `bound`'s (a struct k0..kn) in the sort
    order, direction and null placement per key (Spark's own comparison: NaN largest, -0.0 == 0.0, as
    its sort orders them)."""
    result = F.lit(False)
    for i in reversed(range(len(keys))):
        key = keys[i]
        r, b = row_values[i], bound[f"k{i}"]
        if key.nulls == "first":
            null_before = r.isNull() & b.isNotNull()
        else:
            null_before = r.isNotNull() & b.isNull()
        strictly = null_before | F.coalesce(r > b if key.direction == "desc" else r < b, F.lit(False))
        result = strictly | (r.eqNullSafe(b) & result)
    return result


def key_struct(keys: Sequence[SortKeyModel]) -> Column:
    """A row's sort key as the sample holds it: a struct of the key columns named k0..kn."""
    return F.struct(*[F.col(key.column).alias(f"k{i}") for i, key in enumerate(keys)])
