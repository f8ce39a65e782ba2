"""RowSelection: readable examples, and every operation checked against a brute-force bitmap."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from layout.errors import UsageError
from layout.read.selection import RowSelection

# -- examples ---------------------------------------------------------------------------------


def test_should_normalize_ranges_by_sorting_merging_and_dropping_empty_ones():
    selection = RowSelection.from_ranges([(10, 20), (0, 5), (5, 7), (15, 25), (30, 30)])
    assert selection.ranges == ((0, 7), (10, 25))
    assert selection.row_count == 22


def test_should_build_all_and_none():
    assert RowSelection.all(5).ranges == ((0, 5),)
    assert RowSelection.all(0) == RowSelection.none()
    assert not RowSelection.none()
    assert RowSelection.none().is_empty
    assert RowSelection.all(3)


def test_should_read_a_mask():
    assert RowSelection.from_mask([True, True, False, True]).ranges == ((0, 2), (3, 4))
    assert RowSelection.from_mask(np.zeros(4, dtype=bool)).is_empty
    assert RowSelection.from_mask([]).is_empty


def test_should_intersect_and_union():
    a = RowSelection.from_ranges([(0, 10), (20, 30)])
    b = RowSelection.from_ranges([(5, 25)])
    assert a.intersection(b).ranges == ((5, 10), (20, 25))
    assert (a | b).ranges == ((0, 30),)
    assert a.complement(40).ranges == ((10, 20), (30, 40))


def test_should_refine_with_and_then_like_arrow_rs():
    # self:  rows 10..20 selected; other picks the 1st, 2nd and 10th of those.
    first = RowSelection.from_ranges([(10, 20)])
    assert first.and_then(RowSelection.from_ranges([(0, 2), (9, 10)])).ranges == ((10, 12), (19, 20))
    # A refinement spanning a gap between two selected ranges.
    split = RowSelection.from_ranges([(0, 3), (10, 13)])
    assert split.and_then(RowSelection.from_ranges([(2, 4)])).ranges == ((2, 3), (10, 11))


def test_should_find_the_pages_to_fetch():
    # Pages of 10 rows: [0,10) [10,20) [20,30) [30,35).
    pages = [0, 10, 20, 30]
    selection = RowSelection.from_ranges([(12, 14), (18, 21), (34, 35)])
    assert selection.scan_ranges(pages, 35) == [1, 2, 3]
    assert RowSelection.none().scan_ranges(pages, 35) == []
    assert RowSelection.from_pages(pages, 35, [1, 3]).ranges == ((10, 20), (30, 35))


def test_should_limit_and_offset():
    selection = RowSelection.from_ranges([(0, 3), (10, 13)])
    assert selection.limit(4).ranges == ((0, 3), (10, 11))
    assert selection.offset(4).ranges == ((11, 13),)
    assert selection.limit(0).is_empty
    assert selection.offset(100).is_empty


def test_should_reject_bad_input():
    with pytest.raises(UsageError, match="from_ranges"):
        RowSelection(((5, 10), (0, 3)))
    with pytest.raises(UsageError, match=r"\[5, 3\)"):
        RowSelection.from_ranges([(5, 3)])
    with pytest.raises(UsageError, match="has 5 rows"):
        RowSelection.from_ranges([(0, 10)]).to_mask(5)
    with pytest.raises(UsageError, match="only 3 rows"):
        RowSelection.all(3).and_then(RowSelection.all(4))
    with pytest.raises(UsageError, match="row 0"):
        RowSelection.all(3).scan_ranges([1, 2], 3)
    with pytest.raises(UsageError, match="out of range"):
        RowSelection.from_pages([0, 2], 3, [2])


def test_should_print_readably():
    assert str(RowSelection.from_ranges([(0, 2), (5, 6)])) == "RowSelection(3 rows: [0, 2) [5, 6))"
    assert 5 in RowSelection.from_ranges([(5, 6)]) and 6 not in RowSelection.from_ranges([(5, 6)])


# -- properties against bitmaps --------------------------------------------------------------

MAX_ROWS = 80


def runs_mask(draw, num_rows: int) -> np.ndarray:
    """A boolean mask made of runs, so that long ranges and ranges at both edges are common."""
    mask = np.zeros(num_rows, dtype=bool)
    position = 0
    value = draw(st.booleans())
    while position < num_rows:
        length = draw(st.integers(1, max(1, num_rows // 3)))
        mask[position : position + length] = value
        position += length
        value = not value
    return mask


@st.composite
def masks(draw, num_rows: int | None = None) -> np.ndarray:
    if num_rows is None:
        num_rows = draw(st.integers(0, MAX_ROWS))
    if draw(st.booleans()):
        return runs_mask(draw, num_rows)
    return np.array(draw(st.lists(st.booleans(), min_size=num_rows, max_size=num_rows)), dtype=bool)


@st.composite
def two_masks(draw) -> tuple[np.ndarray, np.ndarray]:
    num_rows = draw(st.integers(0, MAX_ROWS))
    return draw(masks(num_rows)), draw(masks(num_rows))


@st.composite
def page_layouts(draw) -> tuple[int, list[int]]:
    num_rows = draw(st.integers(0, MAX_ROWS))
    if num_rows == 0:
        return 0, draw(st.sampled_from([[], [0]]))
    starts = sorted(draw(st.lists(st.integers(1, num_rows), max_size=10)))  # repeats: empty pages
    return num_rows, [0, *starts]


def page_rows(page_starts: list[int], num_rows: int, page: int) -> range:
    end = page_starts[page + 1] if page + 1 < len(page_starts) else num_rows
    return range(page_starts[page], end)


def check_invariants(selection: RowSelection) -> None:
    previous_end = -1
    for start, end in selection.ranges:
        assert (
            0 <= start < end and start > previous_end
        )  # sorted, non-empty, neither overlapping nor touching
        previous_end = end


@given(masks())
def test_mask_round_trip(mask):
    selection = RowSelection.from_mask(mask)
    check_invariants(selection)
    assert np.array_equal(selection.to_mask(len(mask)), mask)
    assert selection.row_count == int(mask.sum())
    assert bool(selection) == bool(mask.any()) == (not selection.is_empty)
    assert all((row in selection) == bool(mask[row]) for row in range(len(mask)))


@given(st.integers(0, MAX_ROWS), st.lists(st.tuples(st.integers(0, MAX_ROWS), st.integers(0, 20))))
def test_from_ranges_matches_bitmap(num_rows, raw):
    ranges = [(start, min(start + length, num_rows)) for start, length in raw if start <= num_rows]
    expected = np.zeros(num_rows, dtype=bool)
    for start, end in ranges:
        expected[start:end] = True
    selection = RowSelection.from_ranges(ranges)
    check_invariants(selection)
    assert np.array_equal(selection.to_mask(num_rows), expected)
    assert selection == RowSelection.from_mask(expected)


@given(two_masks())
def test_intersection_union_complement_match_bitmaps(pair):
    a, b = pair
    left, right = RowSelection.from_mask(a), RowSelection.from_mask(b)
    for result, expected in (
        (left.intersection(right), a & b),
        (left.union(right), a | b),
        (left & right, a & b),
        (left | right, a | b),
        (left.complement(len(a)), ~a),
    ):
        check_invariants(result)
        assert np.array_equal(result.to_mask(len(a)), expected)
        assert result == RowSelection.from_mask(expected)  # equal rows <=> equal values


@given(st.data())
def test_and_then_matches_bitmap(data):
    outer = data.draw(masks())
    inner = data.draw(masks(int(outer.sum())))
    expected = outer.copy()
    expected[np.flatnonzero(outer)] = inner
    result = RowSelection.from_mask(outer).and_then(RowSelection.from_mask(inner))
    check_invariants(result)
    assert np.array_equal(result.to_mask(len(outer)), expected)


@given(masks(), st.integers(0, MAX_ROWS + 5))
def test_limit_and_offset_match_bitmap(mask, n):
    selected = np.flatnonzero(mask)
    limited, skipped = np.zeros_like(mask), np.zeros_like(mask)
    limited[selected[:n]] = True
    skipped[selected[n:]] = True
    selection = RowSelection.from_mask(mask)
    assert np.array_equal(selection.limit(n).to_mask(len(mask)), limited)
    assert np.array_equal(selection.offset(n).to_mask(len(mask)), skipped)
    assert selection.limit(n).union(selection.offset(n)) == selection


@given(st.data())
def test_scan_ranges_and_from_pages_match_bitmap(data):
    num_rows, page_starts = data.draw(page_layouts())
    mask = data.draw(masks(num_rows))
    selection = RowSelection.from_mask(mask)
    expected = [
        page
        for page in range(len(page_starts))
        if any(mask[row] for row in page_rows(page_starts, num_rows, page))
    ]
    pages = selection.scan_ranges(page_starts, num_rows)
    assert pages == expected
    # The fetched pages cover every selected row, and nothing else than those pages.
    covered = RowSelection.from_pages(page_starts, num_rows, pages)
    assert covered.intersection(selection) == selection
    page_mask = np.zeros(num_rows, dtype=bool)
    for page in pages:
        page_mask[list(page_rows(page_starts, num_rows, page))] = True
    assert np.array_equal(covered.to_mask(num_rows), page_mask)


def test_scan_ranges_skips_empty_pages():
    # Page 1 holds no rows (same first_row_index as page 2).
    assert RowSelection.all(10).scan_ranges([0, 5, 5], 10) == [0, 2]
    assert RowSelection.from_pages([0, 5, 5], 10, [1]).is_empty
