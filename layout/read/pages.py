"""Page search on a column index: which pages of a column chunk might hold matching values.

One strategy per BoundaryOrder, each with the same operations (as parquet-java's `BoundaryOrder`):
`between` (every comparison is an interval), `not_eq`, `is_null`, `not_null`. On an ASCENDING or
DESCENDING index the pages of an interval are found by binary search, O(log n) comparisons; on an
UNORDERED one by a linear scan. Bounds are order keys (see `ColumnType.order_key`), so comparisons are
exact in the column's sort order. Results are sorted lists of page indexes; they are always a superset of
the pages that hold a matching value (sound), never a subset. `between_pages` and `not_null_pages` give
the same pages as a read-only sequence: on an ordered index a slice of the non-null pages, a `range` when
those are contiguous, so that even `x > v` matching most pages costs O(log n), not O(matching pages).

What a search needs beyond the bounds (the non-null pages in order, the strategy after checking for NaN
bounds) is an O(pages) pass over the column index. `build_search_index` does it once into an immutable
`PageSearchIndex`, which the planner keeps in the metadata cache with the file version; `search()` then
makes a strategy over it in O(1), so a warm search costs O(log pages) on an ordered index, not O(pages).
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Callable, Sequence
from dataclasses import InitVar, dataclass, field, replace
from typing import Any

UNBOUNDED = None  # an open end of an interval


@dataclass(frozen=True, slots=True)
class Interval:
    """Values v with lo <(=) v <(=) hi; `None` ends are open."""

    lo: Any = UNBOUNDED
    lo_inclusive: bool = True
    hi: Any = UNBOUNDED
    hi_inclusive: bool = True

    @classmethod
    def point(cls, value: Any) -> Interval:
        return cls(value, True, value, True)

    def above_hi(self, key: Any) -> bool:
        """Is `key` past the interval's upper end? An unknown (None) key never is."""
        return (self.hi is not None and key is not None
                and (key > self.hi or (key == self.hi and not self.hi_inclusive)))

    def below_lo(self, key: Any) -> bool:
        """Is `key` before the interval's lower end? An unknown (None) key never is."""
        return (self.lo is not None and key is not None
                and (key < self.lo or (key == self.lo and not self.lo_inclusive)))


@dataclass(frozen=True, slots=True)
class PageBounds:
    """A column chunk's column index in the order-key domain.

    `mins`/`maxs` hold order keys for non-null pages (None for null pages). `exact` says that min == max
    really means every non-null value equals it (False when values may be truncated, e.g. binary).
    `nan_possible` is True for float columns, whose NaNs the statistics leave out.
    """

    null_pages: Sequence[bool]
    mins: Sequence[Any]
    maxs: Sequence[Any]
    null_counts: Sequence[int] | None
    exact: bool = False
    nan_possible: bool = False

    @property
    def num_pages(self) -> int:
        return len(self.null_pages)

    def fresh(self) -> PageBounds:
        """These bounds for one search: lazily decoded keys get a memo of their own (O(1)), so a shared
        (cached) `PageBounds` never grows with the keys its searches decode."""
        mins, maxs = self.mins, self.maxs
        if not isinstance(mins, LazyKeys) and not isinstance(maxs, LazyKeys):
            return self
        return replace(self, mins=mins.view() if isinstance(mins, LazyKeys) else mins,
                       maxs=maxs.view() if isinstance(maxs, LazyKeys) else maxs)


class LazyKeys(Sequence[Any]):
    """Order keys of column-index bounds, decoded on access by `decode` (None for null pages); a binary
    search touches only log n of them. Decoded keys are memoized per object: share the raw bounds across
    searches through `view()`, which starts an empty memo over the same raw values in O(1)."""

    __slots__ = ("_decode", "_memo", "_null", "_raw")

    def __init__(self, decode: Callable[[Any], Any], raw: Sequence[Any], null_pages: Sequence[bool]) -> None:
        self._decode, self._raw, self._null = decode, raw, null_pages
        self._memo: dict[int, Any] = {}

    def view(self) -> LazyKeys:
        return LazyKeys(self._decode, self._raw, self._null)

    def __len__(self) -> int:
        return len(self._raw)

    def __getitem__(self, i: int) -> Any:  # type: ignore[override]
        try:
            return self._memo[i]
        except KeyError:
            pass
        key = None if self._null[i] else self._decode(self._raw[i])
        self._memo[i] = key
        return key


@dataclass(slots=True)
class PageSearch:
    """Base of the three strategies; `comparisons` counts the bound comparisons made (for tests).

    `pages`: the non-null pages in ascending order when already known (a `PageSearchIndex` passes them);
    without it they are listed from `bounds.null_pages`, O(n).
    """

    bounds: PageBounds
    comparisons: int = 0
    pages: InitVar[Sequence[int] | None] = None
    # Non-null pages only: binary search must not land on a null page, which has no bounds.
    _pages: Sequence[int] = field(init=False)

    def __post_init__(self, pages: Sequence[int] | None) -> None:
        self._pages = non_null_pages(self.bounds.null_pages) if pages is None else pages

    def between(self, interval: Interval) -> list[int]:
        return list(self.between_pages(interval))

    def between_pages(self, interval: Interval) -> Sequence[int]:
        """The pages of `between`, as a read-only sequence: on an ordered index a slice of the non-null
        pages, a `range` (O(1), whatever the number of pages) when they are contiguous."""
        raise NotImplementedError

    def not_eq(self, value: Any) -> list[int]:
        """Pages holding a non-null value other than `value`: all non-null pages but the constant ones."""
        b = self.bounds
        if not b.exact or b.nan_possible:  # truncated bounds or hidden NaNs: min == max proves nothing
            return list(self._pages)
        out = []
        for i in self._pages:
            self.comparisons += 2
            if not (b.mins[i] == value and b.maxs[i] == value):
                out.append(i)
        return out

    def where(self, keep: Callable[[Any, Any], bool]) -> list[int]:
        """Non-null pages for which `keep(min, max)` holds: a linear scan, for predicates without order."""
        b = self.bounds
        self.comparisons += len(self._pages)
        return [i for i in self._pages if keep(b.mins[i], b.maxs[i])]

    def is_null(self) -> list[int]:
        b = self.bounds
        if b.null_counts is None:  # unknown: only pages that are all null are sure to hold nulls
            return list(range(b.num_pages))
        return [i for i, (n, null) in enumerate(zip(b.null_counts, b.null_pages)) if n > 0 or null]

    def not_null(self) -> list[int]:
        return list(self._pages)

    def not_null_pages(self) -> Sequence[int]:
        """The pages of `not_null`, read-only (a `range` when contiguous: O(1))."""
        return self._pages

    def _overlaps(self, i: int, interval: Interval) -> bool:
        self.comparisons += 2
        b = self.bounds
        return not (interval.above_hi(b.mins[i]) or interval.below_lo(b.maxs[i]))


class UnorderedSearch(PageSearch):
    def between_pages(self, interval: Interval) -> list[int]:
        return [i for i in self._pages if self._overlaps(i, interval)]


class AscendingSearch(PageSearch):
    """Non-null pages ordered by min and by max: the matching pages are one contiguous run."""

    def between_pages(self, interval: Interval) -> Sequence[int]:
        pages, b = self._pages, self.bounds
        # First page whose max reaches the interval, then first page whose min is past it.
        start = self._first(lambda i: not interval.below_lo(b.maxs[pages[i]]))
        end = self._first(lambda i: interval.above_hi(b.mins[pages[i]]), lo=start)
        return pages[start:end]

    def _first(self, pred: Callable[[int], bool], lo: int = 0) -> int:
        """Smallest index in [lo, len) where the monotone predicate holds (len when none)."""
        hi = len(self._pages)
        while lo < hi:
            mid = (lo + hi) // 2
            self.comparisons += 1
            if pred(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo


class DescendingSearch(AscendingSearch):
    """Non-null pages ordered by min and by max, from the largest down."""

    def between_pages(self, interval: Interval) -> Sequence[int]:
        pages, b = self._pages, self.bounds
        # First page whose min is no longer above the interval, then first whose max is below it.
        start = self._first(lambda i: not interval.above_hi(b.mins[pages[i]]))
        end = self._first(lambda i: interval.below_lo(b.maxs[pages[i]]), lo=start)
        return pages[start:end]


_STRATEGIES = {"ASCENDING": AscendingSearch, "DESCENDING": DescendingSearch, "UNORDERED": UnorderedSearch}


@dataclass(frozen=True, slots=True)
class PageSearchIndex:
    """A column chunk's search structure: its bounds, the strategy to search them with, the non-null pages.

    Immutable and shared by every search (the planner keeps it in the metadata cache per file version):
    `search()` makes the strategy over it in O(1), with its own comparison counter and key memo. `nbytes`
    estimates the memory it keeps alive, for the cache's byte budget.
    """

    order: str  # the strategy's BoundaryOrder name, after the NaN check
    bounds: PageBounds
    pages: Sequence[int]  # non-null pages, ascending: a range when contiguous, else an array
    nbytes: int = field(default=0, compare=False)

    @property
    def num_pages(self) -> int:
        return self.bounds.num_pages

    def search(self) -> PageSearch:
        return _STRATEGIES[self.order](self.bounds.fresh(), pages=self.pages)


def build_search_index(boundary_order: str, bounds: PageBounds) -> PageSearchIndex:
    """The search structure for a column index's BoundaryOrder name (`ASCENDING`, `DESCENDING`,
    `UNORDERED`): O(pages), once per column chunk and file version."""
    if bounds.nan_possible and _has_nan_bound(bounds):
        # A writer that let NaN into min/max broke the order: fall back to a linear scan, widened.
        bounds = _widen_nan(bounds)
        boundary_order = "UNORDERED"
    _STRATEGIES[boundary_order]  # an unknown name fails here, not at the first search
    pages = non_null_pages(bounds.null_pages)
    return PageSearchIndex(boundary_order, bounds, pages, bounds_size(bounds) + values_size(pages))


def page_search(boundary_order: str, bounds: PageBounds) -> PageSearch:
    """The strategy for a column index's BoundaryOrder name (`ASCENDING`, `DESCENDING`, `UNORDERED`)."""
    return build_search_index(boundary_order, bounds).search()


def non_null_pages(null_pages: Sequence[bool]) -> Sequence[int]:
    """Indexes of the pages that are not all null, ascending: a `range` when they are contiguous (none
    null, or nulls first or last: no memory, and O(1) slices), else an array."""
    if not any(null_pages):
        return range(len(null_pages))
    pages = array("q", [i for i, null in enumerate(null_pages) if not null])
    if not pages or pages[-1] - pages[0] + 1 == len(pages):
        return range(pages[0], pages[-1] + 1) if pages else range(0)
    return pages


def bounds_size(bounds: PageBounds) -> int:
    """Bytes a `PageBounds` keeps alive, estimated in C-speed passes (no Python loop per page).

    Null flags are bools, shared objects: only their list counts. Null counts count 32 bytes per
    non-zero count (an int object; small ones are shared, so this over-counts). Lazily decoded keys
    count their raw values, not the keys a search decodes into its own memo, which lives and dies with
    that search (see `PageBounds.fresh`); decoded keys count `sys.getsizeof` each (None included, over).
    """
    seen: set[int] = set()
    total = _once(bounds.null_pages, seen, sys.getsizeof)
    counts = bounds.null_counts
    if counts is not None:
        total += _once(counts, seen, lambda c: sys.getsizeof(c) + _INT_SIZE * (len(c) - _zeros(c)))
    for keys in (bounds.mins, bounds.maxs):
        if isinstance(keys, LazyKeys):
            total += sys.getsizeof(keys) + sys.getsizeof(keys._memo) + _once(keys._raw, seen, values_size)
            total += _once(keys._null, seen, sys.getsizeof)
        else:
            total += _once(keys, seen, values_size)
    return total


_INT_SIZE = sys.getsizeof(2**40)
_BYTES_HEADER = sys.getsizeof(b"")


def values_size(values: Any) -> int:
    """Bytes of a container and its elements: compact containers as they are, a list of bytes objects
    from their lengths, anything else from `sys.getsizeof` of every element (shared ones too: over)."""
    if isinstance(values, range | array | bytes | str):
        return sys.getsizeof(values)
    total = sys.getsizeof(values)
    if isinstance(values, list | tuple) and set(map(type, values)) <= {bytes}:
        return total + sum(map(len, values)) + _BYTES_HEADER * len(values)
    return total + sum(map(sys.getsizeof, values))


def _zeros(values: Any) -> int:
    return values.count(0) if isinstance(values, list | tuple) else 0


def _once(value: Any, seen: set[int], size: Callable[[Any], int]) -> int:
    if value is None or id(value) in seen:
        return 0
    seen.add(id(value))
    return size(value)


def _has_nan_bound(b: PageBounds) -> bool:
    return any(isinstance(v, float) and math.isnan(v) for v in (*b.mins, *b.maxs))


def _widen_nan(b: PageBounds) -> PageBounds:
    def fix(values: Sequence[Any], replacement: float) -> list[Any]:
        return [replacement if isinstance(v, float) and math.isnan(v) else v for v in values]

    return PageBounds(b.null_pages, fix(b.mins, -math.inf), fix(b.maxs, math.inf), b.null_counts,
                      b.exact, b.nan_possible)
