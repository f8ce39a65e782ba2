"""Typed bounds of a column chunk: its footer statistics and its column index, as values readers compare.

Which raw min/max bytes are sound bounds depends on the column's sort order, on whether the footer
carries column_orders, and on the writer (`WriterVersion`, as Arrow C++ decides); a bound that is
present but unusable (unknown order, NaN, bytes of the wrong size) becomes None, never a wrong value."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from layout.parquet import format as fmt
from layout.parquet.format import BoundaryOrder, PhysicalType
from layout.parquet.types import ColumnType, SortOrder

__all__ = [
    "TypedColumnIndex", "TypedStatistics", "WriterVersion", "chunk_statistics", "typed_column_index",
    "usable", "usable_key",
]


class TypedStatistics(NamedTuple):
    """Row-group statistics of a chunk; min/max None when absent or unusable (unknown order, NaN, ...)."""

    min: Any
    max: Any
    null_count: int | None
    distinct_count: int | None
    min_exact: bool
    max_exact: bool
    nan_count: int | None = None


class TypedColumnIndex(NamedTuple):
    """A ColumnIndex with typed bounds. min_values[i] / max_values[i] are None for null pages, and also
    when the bound is unusable (a NaN bound, bytes of the wrong size, or a column whose sort order is
    UNKNOWN): None always means "no usable bound"; check null_pages for whether the page is all-null."""

    boundary_order: BoundaryOrder
    null_pages: list[bool]
    min_values: list[Any]
    max_values: list[Any]
    null_counts: list[int] | None
    raw: fmt.ColumnIndex


# --- writer versions (which statistics to trust), as Arrow C++ decides ---------------------------------

_VERSION_RE = re.compile(r"^\s*(.*?)\s+version\s+(\d+)(?:\.(\d+))?(?:\.(\d+))?", re.IGNORECASE)


class WriterVersion(NamedTuple):
    application: str
    version: tuple[int, int, int]

    @classmethod
    def parse(cls, created_by: str | None) -> WriterVersion:
        if not created_by:
            return cls("unknown", (0, 0, 0))
        m = _VERSION_RE.match(created_by)
        if not m:
            return cls(created_by.strip().lower(), (0, 0, 0))
        return cls(m.group(1).lower(), tuple(int(g or 0) for g in m.group(2, 3, 4)))  # type: ignore[arg-type]

    def older_than(self, application: str, version: tuple[int, int, int]) -> bool:
        return self.application == application and self.version < version

    def has_correct_statistics(self, physical: PhysicalType, raw_min: bytes | None, raw_max: bytes | None,
                               sort_order: SortOrder) -> bool:
        """Arrow C++'s ApplicationVersion::HasCorrectStatistics."""
        if self.older_than("parquet-cpp", (1, 3, 0)) or self.older_than("parquet-mr", (1, 10, 0)):
            same = raw_min is not None and raw_max is not None and raw_min == raw_max
            if sort_order != SortOrder.SIGNED and not same:
                return False
            if physical not in (PhysicalType.FIXED_LEN_BYTE_ARRAY, PhysicalType.BYTE_ARRAY):
                return True
        if self.application == "unknown":
            return True
        if sort_order == SortOrder.UNKNOWN:
            return False
        return not self.older_than("parquet-mr", (1, 8, 0))  # PARQUET-251


# --- footer statistics ---------------------------------------------------------------------------------


def chunk_statistics(ct: ColumnType, md: fmt.ColumnMetaData | None, writer: WriterVersion,
                     convert: Callable[[ColumnType, bytes], Any]) -> TypedStatistics | None:
    """A chunk's footer statistics with min/max converted by `convert` (`usable`: typed values,
    `usable_key`: order keys); None without statistics."""
    trusted = _trusted_statistics(ct, md, writer)
    if trusted is None:
        return None
    s, raw_min, raw_max = trusted
    lo = hi = None
    if raw_min is not None and raw_max is not None:
        lo, hi = convert(ct, raw_min), convert(ct, raw_max)
    return TypedStatistics(lo, hi, s.null_count, s.distinct_count, *_exactness(ct, s, lo, hi), s.nan_count)


def _trusted_statistics(ct: ColumnType, md: fmt.ColumnMetaData | None,
                        writer: WriterVersion) -> tuple[Any, Any, Any] | None:
    """(Statistics, raw min, raw max) with min/max None unless they are sound bounds."""
    if md is None or md.statistics is None:
        return None
    s = md.statistics
    order = ct.sort_order
    if ct.column_order is not None:
        raw_min, raw_max = s.min_value, s.max_value
        if (raw_min is None or raw_max is None) and order == SortOrder.SIGNED and ct.kind != "decimal" \
                and ct.physical_type not in (PhysicalType.BYTE_ARRAY, PhysicalType.FIXED_LEN_BYTE_ARRAY):
            raw_min, raw_max = s.min, s.max  # deprecated fields are signed-order: sound for signed types
        ok = order != SortOrder.UNKNOWN
    else:
        # No column_orders: only the deprecated signed-order min/max exist. They are bounds only for
        # SIGNED types (strings/binary/unsigned ints were compared signed by old writers), and only
        # from writers Arrow C++ trusts (PARQUET-251 and friends).
        raw_min, raw_max = s.min, s.max
        ok = order == SortOrder.SIGNED and writer.has_correct_statistics(
            ct.physical_type, raw_min, raw_max, order)
    return (s, raw_min, raw_max) if ok else (s, None, None)


def _exactness(ct: ColumnType, s: Any, lo: Any, hi: Any) -> tuple[bool, bool]:
    """Whether min/max are the true extremes: the writer says so, else only fixed-width values are."""
    fixed = ct.physical_type != PhysicalType.BYTE_ARRAY
    min_exact = lo is not None and (bool(s.is_min_value_exact) if s.is_min_value_exact is not None else fixed)
    max_exact = hi is not None and (bool(s.is_max_value_exact) if s.is_max_value_exact is not None else fixed)
    return min_exact, max_exact


# --- column index --------------------------------------------------------------------------------------


def typed_column_index(raw: fmt.ColumnIndex, ct: ColumnType) -> TypedColumnIndex:
    n = len(raw.null_pages)
    if ct.sort_order == SortOrder.UNKNOWN:
        mins: list[Any] = [None] * n
        maxs: list[Any] = [None] * n
    else:
        mins = [None if null else usable(ct, v) for null, v in zip(raw.null_pages, raw.min_values)]
        maxs = [None if null else usable(ct, v) for null, v in zip(raw.null_pages, raw.max_values)]
    bo = raw.boundary_order
    if not isinstance(bo, BoundaryOrder):
        bo = BoundaryOrder.UNORDERED  # an order newer than this reader: no ordering assumed (sound)
    return TypedColumnIndex(bo, raw.null_pages, mins, maxs, raw.null_counts, raw)


# --- one bound -----------------------------------------------------------------------------------------


def usable_key(ct: ColumnType, raw: bytes) -> Any:
    """Order key of a bound, or None when it cannot serve as one (wrong size, NaN)."""
    try:
        v = ct.order_key(raw)
    except (ValueError, ArithmeticError):
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def usable(ct: ColumnType, raw: bytes) -> Any:
    """Typed bound, or None when it cannot serve as a bound (wrong size, NaN)."""
    try:
        v = ct.decode(raw)
    except (ValueError, ArithmeticError):
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v
