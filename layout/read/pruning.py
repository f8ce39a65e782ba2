"""Pruning: which files, row groups and pages might hold rows matching a predicate.

One small visitor per question, as pyiceberg's `visitors.py` does it:

- `StatsEvaluator`: given min/max/null counts of a set of rows (a file, a row group), can none of
  them match, might some, or must all? Three-valued: `Truth.NONE`, `Truth.SOME`, `Truth.ALL`.
- `BloomEvaluator`: can a row group's bloom filters rule out an `=` or `IN`?
- `PageSelector`: which rows of a row group might match, from the column indexes (binary search when
  ordered, see `layout.read.pages`) mapped to rows through the offset indexes: a `RowSelection`.

The page structures of a column chunk (`layout.read.chunks`) are built once per file version and kept
in the metadata cache by the planner, so a warm plan searches an ordered column index in O(log pages).

Expressions are NOT-free here (`rewrite_not` first): with SQL nulls, NOT of "no row matches" is not
"every row matches". All comparisons happen in the column's order-key domain (`ColumnType.order_key`
for bounds, `ColumnType.value_key` for literals), which is exact for every type. When unsure, keep:
missing statistics, an unknown sort order, a literal that does not fit the column all mean `SOME`.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from layout.errors import UsageError
from layout.expr.predicate import Expr, PredicateVisitor, visit
from layout.parquet import ColumnType, ParquetFile, PhysicalType
from layout.read.chunks import ChunkPages, ChunkStructures, is_float
from layout.read.pages import (
    Interval,
    PageSearch,
)
from layout.read.selection import RowSelection


class Truth(enum.IntEnum):
    """What statistics say about a set of rows. AND takes the least, OR the greatest."""

    NONE = 0  # no row can match: skip
    SOME = 1  # some rows might match: read and filter
    ALL = 2  # every row matches: read, no filter needed


ROWS_CANNOT_MATCH, ROWS_MIGHT_MATCH, ROWS_MUST_MATCH = Truth.NONE, Truth.SOME, Truth.ALL


@dataclass(frozen=True, slots=True)
class ColumnStats:
    """Bounds of one column over a set of rows, in the order-key domain; None bounds are unknown."""

    type: ColumnType
    num_rows: int
    lo: Any = None
    hi: Any = None
    lo_exact: bool = False
    hi_exact: bool = False
    null_count: int | None = None
    nan_count: int | None = None

    @property
    def all_null(self) -> bool:
        return self.null_count is not None and self.null_count == self.num_rows

    @property
    def no_nulls(self) -> bool:
        return self.null_count == 0

    @property
    def no_nans(self) -> bool:
        return not is_float(self.type) or self.nan_count == 0

    @property
    def exact_constant(self) -> bool:
        """Every non-null (non-NaN) value equals `lo`."""
        return self.lo is not None and self.lo_exact and self.hi_exact and self.lo == self.hi

    def merge(self, other: ColumnStats) -> ColumnStats:
        """Bounds over the union of both row sets (a file from its row groups)."""
        def pick(a: Any, b: Any, fn: Callable[[Any, Any], Any]) -> Any:
            return None if a is None or b is None else fn(a, b)

        lo = pick(self.lo, other.lo, min)
        hi = pick(self.hi, other.hi, max)
        return ColumnStats(
            self.type, self.num_rows + other.num_rows, lo, hi,
            lo is not None and self.lo_exact and other.lo_exact,
            hi is not None and self.hi_exact and other.hi_exact,
            pick(self.null_count, other.null_count, int.__add__),
            pick(self.nan_count, other.nan_count, int.__add__),
        )


def literal_key(ct: ColumnType, value: Any) -> Any:
    """The order key of a literal for this column (memoized: planning asks once per file)."""
    try:
        return _literal_key(ct, value)
    except TypeError:  # an unhashable literal: compute without the memo
        return _literal_key.__wrapped__(ct, value)


@functools.lru_cache(maxsize=4096)
def _literal_key(ct: ColumnType, value: Any) -> Any:
    """The order key of a literal for this column, or None when it has none (keep, to be sound).

    A literal between two representable values (1.005 on DECIMAL(p, 2), a microsecond on a millisecond
    timestamp) gets an exact fractional key, so `<` and `>` still compare right against integer keys.
    """
    if isinstance(value, float) and math.isnan(value):
        return None
    try:
        return ct.value_key(value)
    except (UsageError, ValueError, TypeError, ArithmeticError, OverflowError):
        pass
    try:
        if ct.kind == "decimal" and isinstance(value, (Decimal, int)) and ct.scale is not None:
            return Fraction(value) * 10**ct.scale
        per_second = {"ms": 1_000, "us": 1_000_000}.get(ct.unit or "")
        if per_second and ct.kind == "timestamp" and isinstance(value, dt.datetime):
            epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC if value.tzinfo else None)
            delta = value - epoch
            micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
            return Fraction(micros * per_second, 1_000_000)
        if per_second and ct.kind == "time" and isinstance(value, dt.time):
            micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
            return Fraction(micros * per_second, 1_000_000)
    except (ValueError, TypeError, ArithmeticError, OverflowError):
        pass
    return None


def prefix_interval(ct: ColumnType, prefix: str | bytes) -> Interval | None:
    """Byte strings starting with `prefix`: [prefix, prefix with its last byte incremented)."""
    if ct.physical_type not in (PhysicalType.BYTE_ARRAY, PhysicalType.FIXED_LEN_BYTE_ARRAY):
        return None
    lo = prefix.encode() if isinstance(prefix, str) else bytes(prefix)
    stripped = lo.rstrip(b"\xff")
    hi = stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else None
    return Interval(lo, True, hi, False)


def _starts(key: Any, prefix: bytes) -> bool:
    return isinstance(key, bytes) and key.startswith(prefix)


# ---- rows of a file or row group: three-valued --------------------------------------------------------


class StatsEvaluator(PredicateVisitor[Truth]):
    """Might any row of a set match, must all? From `ColumnStats` per column (missing: unknown)."""

    def __init__(self, stats: Mapping[str, ColumnStats | None]) -> None:
        self.stats = stats

    def eval(self, expr: Expr) -> Truth:
        return visit(expr, self)

    def visit_true(self) -> Truth:
        return Truth.ALL

    def visit_false(self) -> Truth:
        return Truth.NONE

    def visit_not(self, child: Truth) -> Truth:
        raise UsageError("pruning needs NOT pushed into the leaves: call rewrite_not first")

    def visit_and(self, left: Truth, right: Truth) -> Truth:
        return min(left, right)

    def visit_or(self, left: Truth, right: Truth) -> Truth:
        return max(left, right)

    def _interval(self, column: str, interval: Interval | None) -> Truth:
        """Rows whose value lies in `interval` (nulls and NaNs never do)."""
        s = self.stats.get(column)
        if s is None or interval is None:
            return Truth.SOME
        if s.all_null:
            return Truth.NONE
        if s.lo is None or s.hi is None:
            return Truth.SOME
        if interval.above_hi(s.lo) or interval.below_lo(s.hi):
            return Truth.NONE
        if s.no_nulls and s.no_nans and not interval.below_lo(s.lo) and not interval.above_hi(s.hi):
            return Truth.ALL
        return Truth.SOME

    def _key(self, column: str, value: Any) -> Any:
        s = self.stats.get(column)
        return None if s is None else literal_key(s.type, value)

    def visit_eq(self, column: str, literal: Any) -> Truth:
        key = self._key(column, literal)
        result = self._interval(column, None if key is None else Interval.point(key))
        s = self.stats.get(column)
        # min == max proves every value equal only when neither bound was truncated.
        if result is Truth.ALL:
            assert s is not None  # ALL comes from the column's stats
            if not s.exact_constant:
                return Truth.SOME
        return result

    def visit_not_eq(self, column: str, literal: Any) -> Truth:
        s, key = self.stats.get(column), self._key(column, literal)
        if s is None or key is None:
            return Truth.SOME
        if s.all_null or (s.exact_constant and s.lo == key and s.no_nans):
            return Truth.NONE
        outside = self._interval(column, Interval.point(key)) is Truth.NONE
        return Truth.ALL if outside and s.no_nulls and s.no_nans else Truth.SOME

    def visit_lt(self, column: str, literal: Any) -> Truth:
        return self._cmp(column, literal, lambda k: Interval(None, True, k, False))

    def visit_lt_eq(self, column: str, literal: Any) -> Truth:
        return self._cmp(column, literal, lambda k: Interval(None, True, k, True))

    def visit_gt(self, column: str, literal: Any) -> Truth:
        return self._cmp(column, literal, lambda k: Interval(k, False, None, True))

    def visit_gt_eq(self, column: str, literal: Any) -> Truth:
        return self._cmp(column, literal, lambda k: Interval(k, True, None, True))

    def _cmp(self, column: str, literal: Any, make: Callable[[Any], Interval]) -> Truth:
        key = self._key(column, literal)
        return self._interval(column, None if key is None else make(key))

    def visit_in(self, column: str, literals: frozenset[Any]) -> Truth:
        results = [self.visit_eq(column, v) for v in literals]
        return max(results, default=Truth.NONE)

    def visit_not_in(self, column: str, literals: frozenset[Any]) -> Truth:
        if not literals:
            return Truth.ALL  # `x NOT IN ()` is true for every row, nulls included
        return min(self.visit_not_eq(column, v) for v in literals)

    def visit_is_null(self, column: str) -> Truth:
        s = self.stats.get(column)
        if s is None or s.null_count is None:
            return Truth.SOME
        return Truth.NONE if s.null_count == 0 else Truth.ALL if s.all_null else Truth.SOME

    def visit_not_null(self, column: str) -> Truth:
        s = self.stats.get(column)
        if s is None or s.null_count is None:
            return Truth.SOME
        return Truth.NONE if s.all_null else Truth.ALL if s.null_count == 0 else Truth.SOME

    def visit_is_nan(self, column: str) -> Truth:
        s = self.stats.get(column)
        if s is not None and (not is_float(s.type) or s.nan_count == 0 or s.all_null):
            return Truth.NONE
        return Truth.SOME

    def visit_not_nan(self, column: str) -> Truth:
        s = self.stats.get(column)
        return Truth.ALL if s is not None and (not is_float(s.type) or s.nan_count == 0) else Truth.SOME

    def visit_starts_with(self, column: str, prefix: str | bytes) -> Truth:
        s = self.stats.get(column)
        if s is None:
            return Truth.SOME
        result = self._interval(column, prefix_interval(s.type, prefix))
        p = prefix.encode() if isinstance(prefix, str) else prefix
        if result is Truth.ALL and not (_starts(s.lo, p) and _starts(s.hi, p)):
            return Truth.SOME  # inside [p, p+1) means starting with p, but stay strict about it
        return result

    def visit_not_starts_with(self, column: str, prefix: str | bytes) -> Truth:
        s = self.stats.get(column)
        if s is None or prefix_interval(s.type, prefix) is None:
            return Truth.SOME
        if s.all_null:
            return Truth.NONE
        p = prefix.encode() if isinstance(prefix, str) else prefix
        # Every value between two bounds that share a prefix shares it too (byte order), truncated or not.
        if _starts(s.lo, p) and _starts(s.hi, p):
            return Truth.NONE
        return Truth.SOME

    def visit_like(self, column: str, pattern: str) -> Truth:
        s = self.stats.get(column)
        if s is not None and s.all_null:
            return Truth.NONE
        prefix = _like_prefix(pattern)
        if prefix and self.visit_starts_with(column, prefix) is Truth.NONE:
            return Truth.NONE
        return Truth.SOME

    def visit_not_like(self, column: str, pattern: str) -> Truth:
        s = self.stats.get(column)
        return Truth.NONE if s is not None and s.all_null else Truth.SOME


def _like_prefix(pattern: str) -> str:
    """The literal text before the first wildcard of a LIKE pattern ('' when it starts with one)."""
    out = []
    escaped = False
    for ch in pattern:
        if escaped:
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in "%_":
            break
        else:
            out.append(ch)
    return "".join(out)


# ---- bloom filters: can `=` / `IN` be ruled out? ---------------------------------------------------


class BloomEvaluator(StatsEvaluator):
    """NONE where a bloom filter proves an `=` or `IN` value absent; SOME everywhere else."""

    def __init__(self, filters: Mapping[str, Any]) -> None:
        super().__init__({})
        self.filters = filters

    def _some(self, *_: Any, **__: Any) -> Truth:
        return Truth.SOME

    visit_not_eq = visit_lt = visit_lt_eq = visit_gt = visit_gt_eq = visit_not_in = _some
    visit_is_null = visit_not_null = visit_is_nan = visit_not_nan = _some
    visit_starts_with = visit_not_starts_with = visit_like = visit_not_like = _some

    def visit_true(self) -> Truth:
        return Truth.SOME

    def visit_eq(self, column: str, literal: Any) -> Truth:
        bloom = self.filters.get(column)
        if bloom is None:
            return Truth.SOME
        try:
            return Truth.SOME if bloom.might_contain(literal) else Truth.NONE
        except (UsageError, ValueError, TypeError, OverflowError):
            return Truth.SOME  # a literal the filter cannot hash: keep

    def visit_in(self, column: str, literals: frozenset[Any]) -> Truth:
        return max((self.visit_eq(column, v) for v in literals), default=Truth.NONE)


# ---- pages: which rows of one row group might match ----------------------------------------------


class PageSelector(PredicateVisitor[RowSelection]):
    """Rows of one row group that might match, from column indexes mapped through offset indexes.

    `chunks` supplies each chunk's page structures (the planner passes a cached `ChunkStructures`);
    without it they are built here, once per column for this selector.
    """

    def __init__(self, pf: ParquetFile, rg: int, num_rows: int,
                 chunks: ChunkStructures | None = None) -> None:
        self.pf, self.rg, self.num_rows = pf, rg, num_rows
        self.chunks = chunks if chunks is not None else ChunkStructures(pf)
        self._searches: dict[str, tuple[PageSearch, ChunkPages] | None] = {}
        self.comparisons = 0
        self.pages_searched = 0

    def select(self, expr: Expr) -> RowSelection:
        return visit(expr, self)

    def visit_true(self) -> RowSelection:
        return RowSelection.all(self.num_rows)

    def visit_false(self) -> RowSelection:
        return RowSelection.none()

    def visit_not(self, child: RowSelection) -> RowSelection:
        raise UsageError("pruning needs NOT pushed into the leaves: call rewrite_not first")

    def visit_and(self, left: RowSelection, right: RowSelection) -> RowSelection:
        return left.intersection(right)

    def visit_or(self, left: RowSelection, right: RowSelection) -> RowSelection:
        return left.union(right)

    def _search(self, column: str) -> tuple[PageSearch, ChunkPages] | None:
        """The page search and pages of a column's chunk, or None without a usable page index (O(1) when
        `chunks` has them already)."""
        if column not in self._searches:
            col = self.pf.column(column).index
            index = self.chunks.search_index(self.rg, col)
            pages = self.chunks.pages(self.rg, col) if index is not None else None
            self._searches[column] = None if index is None or pages is None else (index.search(), pages)
        return self._searches[column]

    def _pages(self, column: str,
               choose: Callable[[PageSearch, ColumnType], Sequence[int] | None]) -> RowSelection:
        found = self._search(column)
        if found is None:
            return RowSelection.all(self.num_rows)
        search, pages_of_chunk = found
        before = search.comparisons
        pages = choose(search, self.pf.column(column).type)
        self.comparisons += search.comparisons - before
        if pages is None:
            return RowSelection.all(self.num_rows)
        return pages_of_chunk.rows(pages)

    def _between(self, column: str, literal: Any, make: Callable[[Any], Interval]) -> RowSelection:
        def choose(search: PageSearch, ct: ColumnType) -> Sequence[int] | None:
            key = literal_key(ct, literal)
            return None if key is None else search.between_pages(make(key))
        return self._pages(column, choose)

    def visit_eq(self, column: str, literal: Any) -> RowSelection:
        return self._between(column, literal, Interval.point)

    def visit_lt(self, column: str, literal: Any) -> RowSelection:
        return self._between(column, literal, lambda k: Interval(None, True, k, False))

    def visit_lt_eq(self, column: str, literal: Any) -> RowSelection:
        return self._between(column, literal, lambda k: Interval(None, True, k, True))

    def visit_gt(self, column: str, literal: Any) -> RowSelection:
        return self._between(column, literal, lambda k: Interval(k, False, None, True))

    def visit_gt_eq(self, column: str, literal: Any) -> RowSelection:
        return self._between(column, literal, lambda k: Interval(k, True, None, True))

    def visit_not_eq(self, column: str, literal: Any) -> RowSelection:
        def choose(search: PageSearch, ct: ColumnType) -> list[int] | None:
            key = literal_key(ct, literal)
            return None if key is None else search.not_eq(key)
        return self._pages(column, choose)

    def visit_in(self, column: str, literals: frozenset[Any]) -> RowSelection:
        selection = RowSelection.none()
        for value in literals:
            selection = selection.union(self.visit_eq(column, value))
        return selection

    def visit_not_in(self, column: str, literals: frozenset[Any]) -> RowSelection:
        if not literals:
            return RowSelection.all(self.num_rows)  # true for every row, nulls included
        selection = self.visit_not_null(column)
        for value in literals:
            selection = selection.intersection(self.visit_not_eq(column, value))
        return selection

    def visit_is_null(self, column: str) -> RowSelection:
        return self._pages(column, lambda search, _: search.is_null())

    def visit_not_null(self, column: str) -> RowSelection:
        return self._pages(column, lambda search, _: search.not_null_pages())

    def visit_is_nan(self, column: str) -> RowSelection:
        return self.visit_not_null(column)  # a NaN is not null; page bounds leave NaNs out

    def visit_not_nan(self, column: str) -> RowSelection:
        return RowSelection.all(self.num_rows)

    def visit_starts_with(self, column: str, prefix: str | bytes) -> RowSelection:
        def choose(search: PageSearch, ct: ColumnType) -> Sequence[int] | None:
            interval = prefix_interval(ct, prefix)
            return None if interval is None else search.between_pages(interval)
        return self._pages(column, choose)

    def visit_not_starts_with(self, column: str, prefix: str | bytes) -> RowSelection:
        def choose(search: PageSearch, ct: ColumnType) -> list[int] | None:
            if prefix_interval(ct, prefix) is None:
                return None
            p = prefix.encode() if isinstance(prefix, str) else prefix
            return search.where(lambda lo, hi: not (_starts(lo, p) and _starts(hi, p)))
        return self._pages(column, choose)

    def visit_like(self, column: str, pattern: str) -> RowSelection:
        prefix = _like_prefix(pattern)
        return self.visit_starts_with(column, prefix) if prefix else self.visit_not_null(column)

    def visit_not_like(self, column: str, pattern: str) -> RowSelection:
        return self.visit_not_null(column)
