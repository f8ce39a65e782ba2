"""Page search on column indexes: binary search on ordered indexes agrees with a linear scan."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from layout.pages import Interval, PageBounds, UnorderedSearch, page_search


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
