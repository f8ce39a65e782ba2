"""A sort prefix over several keys: one non-negative long per row whose order agrees with the sort order.

Spark's sort compares an 8-byte prefix of the *first* sort key and, on a tie, the whole rows. A table
sorted by a low-cardinality key and then another (TPC-H lineitem by `l_shipdate`, `l_orderkey`: 2,526 dates
for 6M rows) ties on almost every comparison, and each tie reads both rows from memory. The job writes one
file per task, so a task sorts a whole file: at TPC-H SF1 into three files, sorting by this prefix and then
the keys took 19 s against 25 s for the keys alone (one run each, 2 cores); when the prefix holds every key
exactly, the sort by the prefix alone (Spark's radix sort) took 17 s.

The prefix packs, key after key, each value's position in the job's input: its ordinal (an integer of the
same order: days, microseconds, the unscaled decimal), minus the smallest ordinal the first pass saw, with one
position for null (first or last as the key says), reversed for a descending key. A key whose positions do
not fit in the bits left is shifted right until they do: the prefix then still never decreases along the
sort order, but it stops there (the keys after a shifted key are not in it), and the sort compares the keys
on its ties. The range must hold every value: the job takes it from its input files' manifest bounds
(`bound_ordinal`; Iceberg never truncates bounds of these types) and the write observes each key's smallest
and largest ordinal, writing everything again should one fall outside; or, without bounds, from the same
rows in a first pass, against which the write pass is checked (its rows, and the fingerprint the read-back
must match). A value outside it would be clamped onto the range's end and could sort out of order within
its ties (the verification's page-order checks see only what crosses pages).

This module is pure: Spark SQL text for the job (`ordinal_sql`, `PrefixPlan.sql`) and the same arithmetic in
Python (`PrefixPlan.encode`), the property tests' oracle. Keys of other types (strings, binary, floats)
end the prefix.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from pyiceberg import types as I

from layout.compaction.integrity.fingerprint import quote_identifier
from layout.models import Frozen

if TYPE_CHECKING:
    from pyiceberg.schema import Schema

    from layout.compaction.plan import SortKeyModel

PREFIX_BITS = 63  # the prefix stays a non-negative long: Spark compares long prefixes as signed

Direction = Literal["asc", "desc"]
Nulls = Literal["first", "last"]


def ordinal_sql(column: str, field_type: I.IcebergType) -> str | None:
    """Spark SQL text of a BIGINT with the column's sort order (equal values, equal ordinals; null stays
    null), or None when the type has none that lakesort builds (strings, binary, floats, nested types).
    Timestamps without zone go through the session's time zone, which the job sets to UTC (a bijection)."""
    c = quote_identifier(column)
    if isinstance(field_type, (I.IntegerType, I.LongType, I.BooleanType)):
        return f"CAST({c} AS BIGINT)"
    if isinstance(field_type, I.DateType):
        return f"CAST(unix_date({c}) AS BIGINT)"
    if isinstance(field_type, I.TimestamptzType):
        return f"unix_micros({c})"
    if isinstance(field_type, I.TimestampType):
        return f"unix_micros(CAST({c} AS TIMESTAMP))"
    if isinstance(field_type, I.DecimalType) and field_type.precision <= 18:
        # The unscaled value: times an exact decimal power of ten (precision at most 18 + 18 + 2), then a cast
        # that drops only zeros. It fits a long: below 10**18.
        return f"CAST({c} * {10 ** field_type.scale}BD AS BIGINT)"
    return None


def bound_ordinal(field_type: I.IcebergType, value: Any) -> int | None:
    """The ordinal (as `ordinal_sql` computes it in Spark) of a manifest bound, given as pyiceberg's
    `conversions.from_bytes` decodes it for `field_type`; None for types without an ordinal. Iceberg's bounds
    of these types are never truncated: a file's lower and upper bound hold every value in it."""
    if value is None:
        return None
    if isinstance(field_type, (I.IntegerType, I.LongType, I.DateType, I.TimestampType, I.TimestamptzType)):
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(field_type, I.BooleanType):
        return int(value) if isinstance(value, bool) else None
    if isinstance(field_type, I.DecimalType) and field_type.precision <= 18 and isinstance(value, Decimal):
        unscaled = value.scaleb(field_type.scale)
        return int(unscaled) if unscaled == unscaled.to_integral_value() else None
    return None


class PrefixKey(Frozen):
    """One key's part of the prefix: positions of its ordinals from `low` to `high` (the first pass's),
    shifted right by `shift`, in `bits` bits."""

    ordinal: str
    direction: Direction
    nulls: Nulls
    low: int
    high: int
    shift: int
    bits: int

    @property
    def span(self) -> int:
        """Non-null positions: 0 .. span - 1."""
        return (self.high >> self.shift) - (self.low >> self.shift) + 1

    def position(self, ordinal: int | None) -> int:
        if ordinal is None:
            return 0 if self.nulls == "first" else self.span
        clamped = min(max(ordinal, self.low), self.high)
        p = (clamped >> self.shift) - (self.low >> self.shift)
        if self.direction == "desc":
            p = self.span - 1 - p
        return p + 1 if self.nulls == "first" else p

    def sql(self) -> str:
        o = self.ordinal
        clamped = f"least(greatest({o}, {_long(self.low)}), {_long(self.high)})"
        p = f"(shiftright({clamped}, {self.shift}) - {_long(self.low >> self.shift)})"
        if self.direction == "desc":
            p = f"({_long(self.span - 1)} - {p})"
        null, step = (0, " + 1L") if self.nulls == "first" else (self.span, "")
        return f"(CASE WHEN {o} IS NULL THEN {_long(null)} ELSE {p}{step} END)"


class PrefixPlan(Frozen):
    """The prefix of the first `len(keys)` sort keys. `exact`: every sort key is in it unshifted, so sorting
    by the prefix alone is the sort order (rows with equal prefixes have equal keys)."""

    keys: tuple[PrefixKey, ...]
    exact: bool

    @property
    def first_key_shift(self) -> int:
        """Bits below the first key's in the prefix: a value of the first key starts where they are zero."""
        return sum(key.bits for key in self.keys[1:])

    def encode(self, ordinals: Sequence[int | None]) -> int:
        """The prefix of a row given its keys' ordinals (the first len(self.keys) of them)."""
        prefix = 0
        for key, ordinal in zip(self.keys, ordinals, strict=False):
            prefix = (prefix << key.bits) | key.position(ordinal)
        return prefix

    def sql(self) -> str:
        text = "0L"
        for key in self.keys:
            text = f"(shiftleft({text}, {key.bits}) + {key.sql()})"
        return text


def key_ordinals(schema: Schema, names: Sequence[str]) -> tuple[str | None, ...]:
    """Per sort key (a top-level column of the table's `schema`), `ordinal_sql`; None for the others (the
    curve index: a single long key needs no prefix of its own)."""
    top = {f.name: f for f in schema.fields}
    return tuple(ordinal_sql(name, top[name].field_type) if name in top else None for name in names)


def sort_prefix(keys: Sequence[SortKeyModel], ordinals: Sequence[str | None],
                figures: Sequence[Mapping[str, Any]]) -> PrefixPlan | None:
    """The prefix over the sort keys with these ordinals, their ranges the smallest `__low<i>` and largest
    `__high<i>` over the first pass's figures (rows of the job's summary; null where no value)."""
    described = []
    for i, (key, ordinal) in enumerate(zip(keys, ordinals, strict=True)):
        lows = [r[f"__low{i}"] for r in figures if ordinal is not None and r[f"__low{i}"] is not None]
        highs = [r[f"__high{i}"] for r in figures if ordinal is not None and r[f"__high{i}"] is not None]
        described.append((ordinal, key.direction, key.nulls, min(lows, default=None),
                          max(highs, default=None)))
    return plan_prefix(described)


def plan_prefix(
    keys: Sequence[tuple[str | None, Direction, Nulls, int | None, int | None]],
) -> PrefixPlan | None:
    """The prefix for sort keys given as (ordinal SQL or None, direction, nulls, low, high), low/high the
    smallest and largest ordinal in the input (None: no non-null value). None when the prefix would hold no
    more than Spark's own prefix of the first key (fewer than two keys in it)."""
    parts: list[PrefixKey] = []
    used = 0
    exact = True
    for ordinal, direction, nulls, low, high in keys:
        if ordinal is None or used >= PREFIX_BITS:
            exact = False
            break
        low, high = (0, 0) if low is None or high is None else (low, high)
        shift = 0
        while _bits((high >> shift) - (low >> shift) + 2) > PREFIX_BITS - used and shift <= 64:
            shift += 1
        if shift > 64:  # one bit left and a range across zero: shifted all the way it is still -1 and 0
            exact = False
            break
        bits = _bits((high >> shift) - (low >> shift) + 2)
        parts.append(PrefixKey(ordinal=ordinal, direction=direction, nulls=nulls, low=low, high=high,
                               shift=shift, bits=bits))
        used += bits
        if shift:
            exact = False
            break
    if len(parts) < 2:
        return None
    return PrefixPlan(keys=tuple(parts), exact=exact and len(parts) == len(keys))


def _bits(positions: int) -> int:
    """Bits that hold the numbers 0 .. positions - 1."""
    return max(1, (positions - 1).bit_length())


def _long(value: int) -> str:
    """A BIGINT literal (the smallest long has no positive literal to negate)."""
    return f"({value + 1}L - 1L)" if value == -(1 << 63) else f"{value}L"
