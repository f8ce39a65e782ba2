"""Iceberg's sort-order transforms as lakesort sorts by them: their names, which ones keep a column's order,
and their values, exactly as Iceberg computes them.

A sort key may sort by a transform of its column (`SortKey.transform`): ``identity``, ``bucket[N]``,
``truncate[W]``, ``year``, ``month``, ``day``, ``hour``, spelled as Iceberg prints them (and as a table's sort
order holds them). ``void`` and any transform lakesort does not know are refused (`parse`): sorting by
something else than what the table declares would stamp its files with an order they do not follow.

Two implementations of the values, both Iceberg's definitions:

- `spark_sql`: a Spark SQL expression, where Spark's own functions compute Iceberg's value exactly (truncate
  of integers, strings and binary; year/month/day of dates; year/month/day/hour of instants, from their
  microseconds since the epoch, never from the session's time zone);
- `arrow_values`: pyiceberg's own transform over an Arrow array (its Rust core: murmur3_x86_32 with seed 0
  over Iceberg's single-value binary form for ``bucket``; Spark's ``hash()`` is another hash, seed 42 and
  other encodings), for the rest, in the executors, and for verify.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
from pyiceberg import types as I
from pyiceberg.transforms import parse_transform
from pyiceberg.types import IcebergType

__all__ = ["IDENTITY", "KNOWN", "arrow_values", "keeps_order", "parse", "spark_sql", "unsupported"]

IDENTITY = "identity"
KNOWN = "identity, bucket[N], truncate[W], year, month, day, hour"
_PLAIN = ("identity", "year", "month", "day", "hour")
_SIZED = re.compile(r"(bucket|truncate)\s*[\[(]\s*(\d+)\s*[\])]")
_MICROS_PER = {"day": 86_400_000_000, "hour": 3_600_000_000}


def without_identity(dumped: Any) -> Any:
    """A sort key's dump without its transform when it is identity: specs and plans dump as they did before
    sort keys had transforms, so their hashes and files stay the same."""
    if isinstance(dumped, dict) and dumped.get("transform") == IDENTITY:
        dumped.pop("transform")
    return dumped


def parse(text: str) -> str:
    """The transform as Iceberg prints it (``bucket[8]``; ``bucket(8)`` and any case read too); a ValueError
    naming it, and the transforms lakesort sorts by, otherwise."""
    name = str(text).strip().lower()
    name = {"years": "year", "months": "month", "days": "day", "hours": "hour"}.get(name, name)
    if name in _PLAIN:
        return name
    sized = _SIZED.fullmatch(name)
    if sized is not None:
        if int(sized.group(2)) < 1:
            raise ValueError(f"transform {text!r}: {sized.group(1)} takes a width of 1 or more")
        return f"{sized.group(1)}[{int(sized.group(2))}]"
    raise ValueError(f"unknown transform {text!r}: lakesort sorts by {KNOWN}")


def _width(transform: str) -> int:
    return int(transform[transform.index("[") + 1:-1])


def keeps_order(transform: str) -> bool:
    """Whether the transform never reverses two values' order (every one but bucket): rows sorted by it and
    then by the column itself are sorted by the column."""
    return not transform.startswith("bucket")


def unsupported(transform: str, source: IcebergType) -> str | None:
    """Why the transform does not apply to a column of type `source` (as Iceberg says), or None."""
    if not parse_transform(transform).can_transform(source):
        return f"Iceberg's {transform} transform does not apply to a {source} column"
    return None


def spark_sql(transform: str, column: str, source: IcebergType) -> str | None:
    """Spark SQL computing the transform of `column` (SQL text: a quoted name) as Iceberg does, or None where
    Spark has no exact expression for it (bucket; truncate of decimals; wall-clock timestamps, whose Spark
    functions would go through the session's time zone): `arrow_values` then."""
    if transform == IDENTITY:
        return column
    if transform.startswith("truncate"):
        width = _width(transform)
        if isinstance(source, (I.IntegerType, I.LongType)):
            # Iceberg: v - (((v % W) + W) % W), which is pmod: down to the multiple of W at or below v.
            return f"({column} - pmod({column}, {width}))"
        if isinstance(source, (I.StringType, I.BinaryType)):
            return f"substring({column}, 1, {width})"  # code points of a string, bytes of a binary
        return None
    if transform.startswith("bucket"):
        return None
    if isinstance(source, I.DateType):
        days = f"unix_date({column})"
        date = column
    elif isinstance(source, I.TimestamptzType):
        micros = f"unix_micros({column})"
        if transform == "hour":
            return _floor_div(micros, _MICROS_PER["hour"])
        days = _floor_div(micros, _MICROS_PER["day"])
        date = f"date_from_unix_date({days})"
    else:
        return None
    return {"day": days, "month": f"((year({date}) - 1970) * 12 + month({date}) - 1)",
            "year": f"(year({date}) - 1970)"}.get(transform)


def _floor_div(value: str, by: int) -> str:
    """Integer division rounding down (before 1970 too), in integer arithmetic."""
    return f"CAST(({value} - pmod({value}, {by}L)) div {by}L AS INT)"


def arrow_values(transform: str, source: IcebergType, values: pa.Array) -> pa.Array:
    """The transform of `values` (an Arrow array of a `source` column), as pyiceberg computes it: bucket
    numbers and year/month/day/hour ordinals as int32, truncated values in the column's own type."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow  # heavy: only where values are computed

    if transform == IDENTITY:
        return values
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    wanted = schema_to_pyarrow(source)
    # pyiceberg's Rust core truncates 32-bit offset strings and binaries only
    wanted = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}.get(wanted, wanted)
    if values.type != wanted:
        values = _as_type(values, wanted)
    out: Any = parse_transform(transform).pyarrow_transform(source)(values)
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks()
    if transform.startswith("truncate"):
        return out.cast(values.type) if out.type != values.type else out
    if pa.types.is_date(out.type):  # pyiceberg's day of a timestamp: a date, i.e. days since 1970-01-01
        out = out.cast(pa.int32())
    return out.cast(pa.int32())


def _as_type(values: pa.Array, wanted: pa.DataType) -> pa.Array:
    """`values` as pyiceberg's type for the column: Spark hands instants in its session's zone and large
    strings or binaries in some versions; the values themselves do not change."""
    if pa.types.is_timestamp(values.type) and pa.types.is_timestamp(wanted):
        return values.cast(pa.timestamp(values.type.unit, wanted.tz)).cast(wanted)
    return values.cast(wanted)
