"""Page search on a column index: which pages of a column chunk might hold matching values.

One strategy per BoundaryOrder, each with the same operations (as parquet-java's `BoundaryOrder`):
`between` (every comparison is an interval), `not_eq`, `is_null`, `not_null`. On an ASCENDING or
DESCENDING index the pages of an interval are found by binary search, O(log n) comparisons; on an
UNORDERED one by a linear scan. Bounds are order keys (see `ColumnType.order_key`), so comparisons are
exact in the column's sort order. Results are sorted lists of page indexes; they are always a superset of
the pages that hold a matching value (sound), never a subset.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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
        return self.hi is not None and key is not None and (key > self.hi or (key == self.hi and not self.hi_inclusive))

    def below_lo(self, key: Any) -> bool:
        """Is `key` before the interval's lower end? An unknown (None) key never is."""
        return self.lo is not None and key is not None and (key < self.lo or (key == self.lo and not self.lo_inclusive))


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


@dataclass(slots=True)
class PageSearch:
    """Base of the three strategies; `comparisons` counts the bound comparisons made (for tests)."""

    bounds: PageBounds
    comparisons: int = 0
    # Non-null pages only: binary search must not land on a null page, which has no bounds.
    _pages: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self._pages = [i for i, null in enumerate(self.bounds.null_pages) if not null]

    def between(self, interval: Interval) -> list[int]:
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

    def _overlaps(self, i: int, interval: Interval) -> bool:
        self.comparisons += 2
        b = self.bounds
        return not (interval.above_hi(b.mins[i]) or interval.below_lo(b.maxs[i]))


class UnorderedSearch(PageSearch):
    def between(self, interval: Interval) -> list[int]:
        return [i for i in self._pages if self._overlaps(i, interval)]


class AscendingSearch(PageSearch):
    """Non-null pages ordered by min and by max: the matching pages are one contiguous run."""

    def between(self, interval: Interval) -> list[int]:
        pages, b = self._pages, self.bounds
        # First page whose max reaches the interval, then first page whose min is past it.
        start = self._first(lambda i: not interval.below_lo(b.maxs[pages[i]]))
        end = self._first(lambda i: interval.above_hi(b.mins[pages[i]]), lo=start)
        return pages[start:end]

    def _first(self, pred, lo: int = 0) -> int:
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

    def between(self, interval: Interval) -> list[int]:
        pages, b = self._pages, self.bounds
        # First page whose min is no longer above the interval, then first whose max is below it.
        start = self._first(lambda i: not interval.above_hi(b.mins[pages[i]]))
        end = self._first(lambda i: interval.below_lo(b.maxs[pages[i]]), lo=start)
        return pages[start:end]


_STRATEGIES = {"ASCENDING": AscendingSearch, "DESCENDING": DescendingSearch, "UNORDERED": UnorderedSearch}


def page_search(boundary_order: str, bounds: PageBounds) -> PageSearch:
    """The strategy for a column index's BoundaryOrder name (`ASCENDING`, `DESCENDING`, `UNORDERED`)."""
    if bounds.nan_possible and _has_nan_bound(bounds):
        # A writer that let NaN into min/max broke the order: fall back to a linear scan, widened.
        bounds = _widen_nan(bounds)
        boundary_order = "UNORDERED"
    return _STRATEGIES[boundary_order](bounds)


def _has_nan_bound(b: PageBounds) -> bool:
    return any(isinstance(v, float) and math.isnan(v) for v in (*b.mins, *b.maxs))


def _widen_nan(b: PageBounds) -> PageBounds:
    def fix(values: Sequence[Any], replacement: float) -> list[Any]:
        return [replacement if isinstance(v, float) and math.isnan(v) else v for v in values]

    return PageBounds(b.null_pages, fix(b.mins, -math.inf), fix(b.maxs, math.inf), b.null_counts,
                      b.exact, b.nan_possible)
