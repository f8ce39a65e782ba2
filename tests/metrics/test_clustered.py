"""The layout-independent ideal (`layout.metrics.clustered`) against a brute force over every placement.

The brute force shares no code with lakesort: a table of N rows, each column cut into pages of exactly r
rows of b bytes each (N a multiple of every r, as the model's uniform pages are), every way of choosing
which m of the N rows match, and the bytes of the pages those rows touch, summed over the columns; its
minimum must be the model's, and packing the rows from the first row must reach it (the model's
"fewest pages of every column at once"). Averages that are not whole rows per page are checked against
the formula written out with exact fractions.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from layout.metrics.clustered import ColumnRate, clustered_read, merge_rates


def touched_bytes(rows: set[int] | range, columns: list[tuple[int, int]]) -> int:
    """Bytes of the pages holding `rows`, for columns of (rows per page, bytes per page)."""
    return sum(len({r // per_page for r in rows}) * page_bytes for per_page, page_bytes in columns)


@settings(max_examples=150, deadline=None)
@given(columns=st.lists(st.tuples(st.sampled_from([1, 2, 3, 4, 6]), st.integers(1, 500)),
                        min_size=1, max_size=3),
       repeat=st.integers(1, 2), data=st.data())
def test_packed_rows_touch_the_fewest_bytes_of_any_placement(columns, repeat, data):
    lcm = math.lcm(*(r for r, _ in columns))
    total = lcm * repeat
    if total > 12:  # every placement of m of N rows: keep N small enough to enumerate
        total = lcm
    matching = data.draw(st.integers(0, total))
    # The measured rates of such a table: whole pages of r rows and b bytes, as many as the table holds.
    rates = [ColumnRate(f"c{i}", total, total // r, total // r * b) for i, (r, b) in enumerate(columns)]
    got = clustered_read(matching, total, rates)
    best = min(touched_bytes(set(rows), columns) for rows in itertools.combinations(range(total), matching))
    assert got.bytes == best, (columns, total, matching)
    assert got.bytes == touched_bytes(range(matching), columns), "packing from the first row reaches it"
    assert got.pages == sum(-(-matching // r) for r, _ in columns)


@settings(max_examples=200, deadline=None)
@given(rates=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 300), st.integers(0, 10**8)),
                      max_size=4),
       total=st.integers(0, 50_000), fraction=st.floats(0, 1))
def test_any_rates_follow_the_formula_with_exact_fractions(rates, total, fraction):
    """rows per page R / P, bytes per page B / P: pages = min(ceil(m P / R), ceil(N P / R)) and bytes =
    min(pages B / P, N B / R) per column (columns without rows or pages left out), rounded half up."""
    matching = round(fraction * total)
    columns = [ColumnRate(f"c{i}", r, p, b) for i, (r, p, b) in enumerate(rates)]
    got = clustered_read(matching, total, columns)
    pages, nbytes = 0, Fraction(0)
    if matching > 0 and total > 0:
        for c in columns:
            if c.rows <= 0 or c.pages <= 0:
                continue
            count = min(math.ceil(Fraction(matching * c.pages, c.rows)),
                        math.ceil(Fraction(total * c.pages, c.rows)))
            pages += count
            nbytes += min(Fraction(count * c.bytes, c.pages), Fraction(total * c.bytes, c.rows))
    assert got.pages == pages and got.bytes == math.floor(nbytes + Fraction(1, 2))
    # never more than the whole columns, nothing when nothing matches, and more matching never reads less
    assert got.bytes <= sum(math.ceil(Fraction(total * c.bytes, c.rows)) for c in columns
                            if c.rows and c.pages)
    assert (got.bytes == 0) or matching > 0
    if matching < total:
        assert clustered_read(matching + 1, total, columns).bytes >= got.bytes


def test_merge_rates_sums_chunks_per_column():
    merged = merge_rates([ColumnRate("b", 10, 1, 100), ColumnRate("a", 5, 2, 50),
                          ColumnRate("b", 30, 3, 300)])
    assert merged == (ColumnRate("a", 5, 2, 50), ColumnRate("b", 40, 4, 400))
    assert clustered_read(5, 0, merged).bytes == 0 and clustered_read(0, 40, merged).pages == 0
