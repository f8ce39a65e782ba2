"""Page search on column indexes: binary search on ordered indexes agrees with a linear scan."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout.read.pages import Interval, PageBounds, UnorderedSearch, page_search


def paged(values, page_size, *, descending=False):
    """Split values (None = null) into pages and build the column index a writer would."""
    values = sorted(values, key=lambda v: (v is None, v), reverse=False)
    if descending:
        non_null = sorted((v for v in values if v is not None), reverse=True)
        values = non_null + [v for v in values if v is None]
    pages = [values[i : i + page_size] for i in range(0, len(values), page_size)]
    null_pages = [all(v is None for v in p) for p in pages]
    mins = [None if n else min(v for v in p if v is not None) for p, n in zip(pages, null_pages)]
    maxs = [None if n else max(v for v in p if v is not None) for p, n in zip(pages, null_pages)]
    counts = [sum(v is None for v in p) for p in pages]
    return pages, PageBounds(null_pages, mins, maxs, counts, exact=True)


def matching_pages(pages, interval):
    return [
        i
        for i, p in enumerate(pages)
        if any(v is not None and not interval.below_lo(v) and not interval.above_hi(v) for v in p)
    ]


intervals = st.builds(
    Interval,
    st.one_of(st.none(), st.integers(-50, 50)),
    st.booleans(),
    st.one_of(st.none(), st.integers(-50, 50)),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(-40, 40)), max_size=120),
    st.integers(1, 9),
    intervals,
    st.booleans(),
)
def test_binary_search_selects_what_a_linear_scan_does(values, page_size, interval, descending):
    pages, bounds = paged(values, page_size, descending=descending)
    order = "DESCENDING" if descending else "ASCENDING"
    binary = page_search(order, bounds).between(interval)
    linear = UnorderedSearch(bounds).between(interval)
    assert binary == linear
    # Sound: every page holding a matching value is selected.
    assert set(matching_pages(pages, interval)) <= set(binary)


def test_binary_search_touches_log_n_entries():
    n = 100_000
    bounds = PageBounds(
        [False] * n, list(range(0, 10 * n, 10)), list(range(9, 10 * n, 10)), [0] * n, exact=True
    )
    search = page_search("ASCENDING", bounds)
    assert search.between(Interval.point(123_456)) == [12_345]
    # Two binary searches over n pages: at most 2 * ceil(log2(n + 1)) comparisons.
    assert search.comparisons <= 2 * math.ceil(math.log2(n + 1))
    linear = UnorderedSearch(bounds)
    assert linear.between(Interval.point(123_456)) == [12_345]
    assert linear.comparisons >= n


class _Counted:
    """A bound that counts every comparison made with it (`<`, `<=`, `>`, `>=`, `==`) in a counter the test
    owns: an upper bound on the search's work that does not rest on `PageSearch.comparisons`."""

    calls = 0
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    @staticmethod
    def _value(other):
        return other.v if isinstance(other, _Counted) else other

    def __lt__(self, other):
        _Counted.calls += 1
        return self.v < self._value(other)

    def __le__(self, other):
        _Counted.calls += 1
        return self.v <= self._value(other)

    def __gt__(self, other):
        _Counted.calls += 1
        return self.v > self._value(other)

    def __ge__(self, other):
        _Counted.calls += 1
        return self.v >= self._value(other)

    def __eq__(self, other):
        _Counted.calls += 1
        return self.v == self._value(other)

    __hash__ = None


@pytest.mark.parametrize("descending", [False, True])
def test_binary_search_comparisons_counted_outside_the_code(descending):
    """Every probe of a binary search tests one bound against one end of the interval: at most two comparisons
    (`<` or `>`, then `==` for the end's inclusiveness). Two searches per lookup: at most 4 * ceil(log2(n +
    1)) comparisons, counted by the bounds themselves; a linear scan over the same bounds makes at least n."""
    n = 100_000
    mins, maxs = list(range(0, 10 * n, 10)), list(range(9, 10 * n, 10))
    if descending:
        mins, maxs = mins[::-1], maxs[::-1]
    bounds = PageBounds(
        [False] * n, [_Counted(v) for v in mins], [_Counted(v) for v in maxs], [0] * n, exact=True
    )
    order = "DESCENDING" if descending else "ASCENDING"
    bound = 4 * math.ceil(math.log2(n + 1))
    search = page_search(order, bounds)  # built once (an O(n) pass over the index); searched many times
    rng = random.Random(14)
    lookups = [
        Interval.point(123_456),
        Interval(None, True, 5, False),
        Interval(10 * n - 3, True, None, True),
        Interval(-5, True, -1, True),
        Interval(10 * n, False, None, True),
    ]
    lookups += [
        Interval(lo, rng.random() < 0.5, lo + rng.randrange(0, 500), rng.random() < 0.5)
        for lo in (rng.randrange(-20, 10 * n + 20) for _ in range(40))
    ]
    for interval in lookups:
        # Page i holds [10 i, 10 i + 9] (ascending): only pages near lo // 10 .. hi // 10 can match.
        first = 0 if interval.lo is None else max(0, interval.lo // 10 - 1)
        last = n - 1 if interval.hi is None else min(n - 1, interval.hi // 10 + 1)
        pages = [
            i
            for i in range(first, last + 1)
            if not (interval.above_hi(10 * i) or interval.below_lo(10 * i + 9))
        ]
        expected = sorted(n - 1 - i for i in pages) if descending else pages
        _Counted.calls = 0
        found = search.between(interval)
        assert found == expected, interval
        assert 0 < _Counted.calls <= bound, f"{interval}: {_Counted.calls} comparisons, bound {bound}"
    _Counted.calls = 0
    assert UnorderedSearch(bounds).between(Interval.point(123_456)) == (
        [n - 1 - 12_345] if descending else [12_345]
    )
    assert _Counted.calls >= n, "the control: the counter sees a linear scan's work"


def test_should_skip_pages_outside_a_range():
    _, bounds = paged(list(range(100)), 10)
    search = page_search("ASCENDING", bounds)
    assert search.between(Interval(25, True, 41, False)) == [2, 3, 4]
    assert search.between(Interval(None, True, 0, False)) == []  # x < 0
    assert search.between(Interval(99, False, None, True)) == []  # x > 99
    assert search.between(Interval(99, True, None, True)) == [9]  # x >= 99


def test_should_read_all_null_pages_for_is_null_only():
    _, bounds = paged([1, 2, None, None, None, None], 2)
    search = page_search("ASCENDING", bounds)
    assert bounds.null_pages == [False, True, True]
    assert search.is_null() == [1, 2]
    assert search.not_null() == [0]
    assert search.between(Interval.point(2)) == [0]


def test_not_eq_skips_constant_pages_only_when_bounds_are_exact():
    _, bounds = paged([5, 5, 5, 5, 6, 7], 3)
    assert page_search("ASCENDING", bounds).not_eq(5) == [1]
    inexact = PageBounds(bounds.null_pages, bounds.mins, bounds.maxs, bounds.null_counts, exact=False)
    assert page_search("ASCENDING", inexact).not_eq(5) == [0, 1]


def test_nan_in_bounds_falls_back_to_a_widened_linear_scan():
    nan = float("nan")
    bounds = PageBounds(
        [False] * 3, [0.0, nan, 5.0], [1.0, nan, 9.0], [0, 0, 0], exact=True, nan_possible=True
    )
    search = page_search("ASCENDING", bounds)
    assert isinstance(search, UnorderedSearch)
    assert search.between(Interval.point(3.0)) == [1]
    assert search.between(Interval.point(0.5)) == [0, 1]
