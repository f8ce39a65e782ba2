"""The layout-independent ideal: what a reader would fetch from a table perfectly clustered for a probe.

The page-level ideal (`layout.metrics.ideal`) counts the pages of the current layout that hold a
matching row, so an unsorted table whose every page holds a match looks "100% efficient". This one
asks what the best possible layout would read instead: the matching rows packed together, into the
fewest pages, of every counted column (the probe's predicate and projected columns), each page as big
as the table's pages of that column are now. Per column c, from its chunks measured (`ColumnRate`:
rows R, pages P, compressed bytes B over the row groups the ideal evaluates):

    rows per page r = R / P, bytes per page b = B / P
    pages(c) = min(ceil(m / r), ceil(N / r))       m matching rows, N rows in the table
    bytes(c) = min(pages(c) * b, N * B / R)        the whole column at most

summed over the columns, rounded to whole bytes. With every page of a column holding r rows (N a
multiple of r), ceil(m / r) pages is the least any placement of m rows can touch, and packing the
rows from the first page reaches it in every column at once (`tests/metrics/test_clustered.py` checks both by
brute force over every placement). Dictionary pages are in B, spread over the rows like the data.

Page size stays a property of the table: a table of tiny files has tiny pages, which the perfectly
clustered table inherits. What this ideal takes out is the row order: efficiency_clustered =
bytes_clustered / bytes_selected (at most 1.0) is how close the current order comes to the best one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["Clustered", "ColumnRate", "clustered_read", "merge_rates"]


@dataclass(frozen=True, slots=True)
class ColumnRate:
    """One column's chunks, summed over the row groups measured: rows, pages and compressed bytes."""

    column: str
    rows: int
    pages: int
    bytes: int


@dataclass(frozen=True, slots=True)
class Clustered:
    """Pages and bytes a perfectly clustered table would fetch."""

    pages: int
    bytes: int


def clustered_read(matching: int, total_rows: int, rates: Sequence[ColumnRate]) -> Clustered:
    """The pages and bytes of `matching` rows packed into the fewest pages of each column (module
    docstring); columns without rows or pages measured are left out, nothing matching reads nothing."""
    if matching <= 0 or total_rows <= 0:
        return Clustered(0, 0)
    matching = min(matching, total_rows)
    pages, nbytes = 0, Fraction(0)
    for rate in rates:
        if rate.rows <= 0 or rate.pages <= 0:
            continue
        need = -(-matching * rate.pages // rate.rows)  # ceil(m / r), r = rows / pages, in integers
        whole = -(-total_rows * rate.pages // rate.rows)
        count = min(need, whole)
        pages += count
        nbytes += min(Fraction(count * rate.bytes, rate.pages), Fraction(total_rows * rate.bytes, rate.rows))
    return Clustered(pages, int(nbytes + Fraction(1, 2)))  # half up: the same bytes on every platform


def merge_rates(rates: Iterable[ColumnRate]) -> tuple[ColumnRate, ...]:
    """Rates of the same column summed (chunks of several row groups), by column name."""
    sums: dict[str, list[int]] = {}
    for rate in rates:
        total = sums.setdefault(rate.column, [0, 0, 0])
        total[0] += rate.rows
        total[1] += rate.pages
        total[2] += rate.bytes
    return tuple(ColumnRate(column, *sums[column]) for column in sorted(sums))
