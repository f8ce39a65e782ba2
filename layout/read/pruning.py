"""Pruning: which files, row groups and pages might hold rows matching a predicate.

One small visitor per question, as pyiceberg's `visitors.py` does it:

- `StatsEvaluator`: given min/max/null counts of a set of rows (a file, a row group), can none of
  them match, might some, or must all? Three-valued: `Truth.NONE`, `Truth.SOME`, `Truth.ALL`.
- `BloomEvaluator`: can a row group's bloom filters rule out an `=` or `IN`?
- `PageSelector`: which rows of a row group might match, from the column indexes (binary search when
  ordered, see `layout.read.pages`) mapped to rows through the offset indexes: a `RowSelection`.

A column chunk's page structures (`PageSearchIndex` from its column index, `ChunkPages` from its offset
index) cost O(pages) to build and never change for a file version: `ChunkStructures` builds them on
demand, and the planner's subclass keeps them in the metadata cache, so a warm plan searches an ordered
column index in O(log pages) and maps pages to rows, and rows to fetched pages, without a pass over all.

Expressions are NOT-free here (`rewrite_not` first): with SQL nulls, NOT of "no row matches" is not
"every row matches". All comparisons happen in the column's order-key domain (`ColumnType.order_key`
for bounds, `ColumnType.value_key` for literals), which is exact for every type. When unsure, keep:
missing statistics, an unknown sort order, a literal that does not fit the column all mean `SOME`.
"""

from __future__ import annotations

import bisect
import datetime as dt
import enum
import functools
import math
from array import array
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from layout.errors import UsageError
from layout.expr.predicate import Expr, PredicateVisitor, visit
from layout.parquet import ColumnType, ParquetFile, PhysicalType
from layout.read.pages import (
    Interval,
    LazyKeys,
    PageBounds,
    PageSearch,
    PageSearchIndex,
    build_search_index,
    values_size,
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
        return not _is_float(self.type) or self.nan_count == 0

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
            lo is not None and self.lo_exact and other.lo_exact, hi is not None and self.hi_exact and other.hi_exact,
            pick(self.null_count, other.null_count, int.__add__), pick(self.nan_count, other.nan_count, int.__add__),
        )


def _is_float(ct: ColumnType) -> bool:
    return ct.physical_type in (PhysicalType.FLOAT, PhysicalType.DOUBLE) or ct.kind == "float16"


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
        if result is Truth.ALL and not s.exact_constant:
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
        if s is not None and (not _is_float(s.type) or s.nan_count == 0 or s.all_null):
            return Truth.NONE
        return Truth.SOME

    def visit_not_nan(self, column: str) -> Truth:
        s = self.stats.get(column)
        return Truth.ALL if s is not None and (not _is_float(s.type) or s.nan_count == 0) else Truth.SOME

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

    def _some(self, *_: Any) -> Truth:
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

    def __init__(self, pf: ParquetFile, rg: int, num_rows: int, chunks: ChunkStructures | None = None) -> None:
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
            self._searches[column] = None if pages is None else (index.search(), pages)
        return self._searches[column]

    def _pages(self, column: str, choose: Callable[[PageSearch, ColumnType], Sequence[int] | None]) -> RowSelection:
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


# ---- a column chunk's page structures: built once per file version ----------------------------------


def chunk_search_index(pf: ParquetFile, rg: int, col: int) -> PageSearchIndex | None:
    """A column chunk's search structure, or None without a usable column index. O(pages); order keys
    are decoded lazily (per search) so that a binary search stays O(log n)."""
    column = pf.column(col)
    if column.max_repetition_level > 0:
        return None  # pages of repeated columns split records: row mapping needs the levels; keep all
    ci = pf.raw_column_index(rg, column.index)
    oi = pf.offset_index(rg, column.index) if ci is not None else None
    if ci is None or oi is None or len(oi.page_locations) != len(ci.null_pages):
        return None
    ct = column.type
    if ct.sort_order.name == "UNKNOWN":
        return None
    decode = functools.partial(_order_key, ct)
    mins: Sequence[Any] = LazyKeys(decode, ci.min_values, ci.null_pages)
    maxs: Sequence[Any] = LazyKeys(decode, ci.max_values, ci.null_pages)
    is_float = _is_float(ct)
    if is_float:  # NaN bounds break the order: decode eagerly so the index can see and widen them
        mins, maxs = list(mins), list(maxs)
    bounds = PageBounds(
        ci.null_pages, mins, maxs, ci.null_counts,
        exact=ct.physical_type not in (PhysicalType.BYTE_ARRAY, PhysicalType.FIXED_LEN_BYTE_ARRAY),
        nan_possible=is_float,
    )
    order = ci.boundary_order.name if hasattr(ci.boundary_order, "name") else "UNORDERED"
    return build_search_index(order, bounds)


def _order_key(ct: ColumnType, raw: bytes) -> Any:
    try:
        return ct.order_key(raw)
    except (ValueError, ArithmeticError):
        return None


@dataclass(frozen=True, slots=True)
class ChunkPages:
    """A column chunk's pages from its offset index, for O(log pages) questions about rows and pages.

    `first_rows[i]` is page i's first row (checked once: from 0, never decreasing, within `num_rows`);
    `filled_before[i]` counts the pages among [0, i) that hold rows, `bytes_before[i]` sums their
    compressed sizes; `dictionary_bytes` is the dictionary page before the first data page. Immutable.
    """

    num_rows: int
    first_rows: Sequence[int]
    filled_before: Sequence[int]
    bytes_before: Sequence[int]
    dictionary_bytes: int
    nbytes: int = 0

    @classmethod
    def build(cls, num_rows: int, first_rows: Sequence[int], sizes: Sequence[int],
              dictionary_bytes: int = 0) -> ChunkPages:
        """From each page's first row and compressed size: O(pages), with the one check of the first rows
        (`RowSelection.from_pages`'s: UsageError when they do not start at 0, decrease, or pass the end)."""
        starts = np.asarray(first_rows, dtype=np.int64)
        n = len(starts)
        if len(sizes) != n:
            raise UsageError(f"{len(sizes)} page sizes for {n} pages")
        if (n == 0 and num_rows) or (n and (starts[0] != 0 or starts[-1] > num_rows or (np.diff(starts) < 0).any())):
            RowSelection.from_pages(list(first_rows), num_rows, ())  # raises, naming what is wrong
        ends = np.append(starts[1:], num_rows)
        filled = ends > starts  # pages that hold rows
        filled_before = np.concatenate(([0], np.cumsum(filled)))
        bytes_before = np.concatenate(([0], np.cumsum(np.asarray(sizes, dtype=np.int64) * filled)))
        # Kept as arrays of Python ints: bisect and indexing then hand out plain ints, not numpy scalars.
        first, filled_before, bytes_before = (_int_array(a) for a in (starts, filled_before, bytes_before))
        nbytes = sum(map(values_size, (first, filled_before, bytes_before)))
        return cls(num_rows, first, filled_before, bytes_before, dictionary_bytes, nbytes)

    @property
    def num_pages(self) -> int:
        return len(self.first_rows)

    def rows(self, pages: Sequence[int]) -> RowSelection:
        """The rows of these pages: `RowSelection.from_pages` without its O(pages) check. O(1) for a
        `range` of consecutive pages (pages tile the rows), O(len(pages)) for other ascending pages."""
        first, n, num_rows = self.first_rows, len(self.first_rows), self.num_rows
        if isinstance(pages, range) and pages.step == 1 and 0 <= pages.start and pages.stop <= n:
            if not pages:
                return RowSelection.none()
            start, end = first[pages.start], first[pages.stop] if pages.stop < n else num_rows
            return RowSelection(((start, end),)) if end > start else RowSelection.none()
        out: list[tuple[int, int]] = []
        previous = -1
        for i in pages:
            if not previous < i < n:  # unsorted, repeated or out of range: the checking path
                return RowSelection.from_pages(first, num_rows, pages)
            previous = i
            start, end = first[i], first[i + 1] if i + 1 < n else num_rows
            if end > start:
                if out and start <= out[-1][1]:
                    out[-1] = (out[-1][0], end)
                else:
                    out.append((start, end))
        return RowSelection(tuple(out))

    def fetched(self, selection: RowSelection) -> tuple[int, int]:
        """Pages a reader fetches for `selection` (those holding a selected row, as
        `RowSelection.scan_ranges`) and their bytes, dictionary page included: O(ranges * log pages)."""
        if selection.ranges and selection.ranges[-1][1] > self.num_rows:
            raise UsageError(f"the selection reaches row {selection.ranges[-1][1]} but the row group has "
                             f"{self.num_rows} rows")
        first, n = self.first_rows, len(self.first_rows)
        pages = nbytes = 0
        done = 0  # pages below this index are counted already (a page can hold rows of two ranges)
        for start, end in selection.ranges:
            # Pages [lo, hi) start before `end` and end after `start`: every one of them holding rows
            # holds a selected row. Page i ends where page i + 1 starts (the last at num_rows).
            lo = max(bisect.bisect_right(first, start) - 1, done)
            hi = bisect.bisect_left(first, end)
            if hi > lo:
                pages += self.filled_before[hi] - self.filled_before[lo]
                nbytes += self.bytes_before[hi] - self.bytes_before[lo]
                done = hi
            if hi >= n:
                break
        return pages, nbytes + self.dictionary_bytes


def _int_array(values: np.ndarray) -> array:
    out = array("q")
    out.frombytes(values.astype("=i8", copy=False).tobytes())
    return out


def chunk_pages(pf: ParquetFile, rg: int, col: int) -> ChunkPages | None:
    """A column chunk's pages, or None without an offset index (or for a repeated column, whose pages
    split records): then a reader fetches the whole chunk. O(pages), once per chunk and file version."""
    column = pf.column(col)
    oi = pf.offset_index(rg, column.index)
    if oi is None or not oi.page_locations or column.max_repetition_level > 0:
        return None
    md = pf.row_groups[rg].columns[column.index].meta_data
    locations = oi.page_locations
    dictionary = 0
    if md.dictionary_page_offset is not None and md.dictionary_page_offset < locations[0].offset:
        dictionary = locations[0].offset - md.dictionary_page_offset
    return ChunkPages.build(pf.row_groups[rg].num_rows, [p.first_row_index for p in locations],
                            [p.compressed_page_size for p in locations], dictionary)


class ChunkStructures:
    """Each column chunk's page structures for one file, built on first use and kept for this object's
    life. The planner's subclass (`layout.read.plan`) keeps them in the metadata cache instead, per file
    version, through `_load`."""

    def __init__(self, pf: ParquetFile) -> None:
        self.pf = pf
        self._memo: dict[Hashable, Any] = {}

    def search_index(self, rg: int, col: int) -> PageSearchIndex | None:
        return self._get(("page_search", rg, col), lambda: chunk_search_index(self.pf, rg, col))

    def pages(self, rg: int, col: int) -> ChunkPages | None:
        return self._get(("chunk_pages", rg, col), lambda: chunk_pages(self.pf, rg, col))

    def _get(self, item: Hashable, build: Callable[[], Any]) -> Any:
        try:
            return self._memo[item]
        except KeyError:
            pass
        value = self._memo[item] = self._load(item, build)
        return value

    def _load(self, item: Hashable, build: Callable[[], Any]) -> Any:
        return build()
