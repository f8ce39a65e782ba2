"""Row selections: which rows of one row group a reader still has to read.

A `RowSelection` is a small immutable value: a sorted tuple of half-open row ranges
``[start, end)`` that neither overlap nor touch (adjacent ranges are coalesced), so two
selections of the same rows are always equal. Pruning produces one selection per column
predicate from the page index; they are combined with `intersection` (AND) and `union` (OR),
and `scan_ranges` turns the result back into the pages each column has to fetch.

Every combining operation is a linear merge over the ranges (O(a + b)), never a bitmap:
a row group of millions of rows pruned to a handful of ranges stays a handful of tuples.
`to_mask` / `from_mask` convert to and from numpy boolean arrays at the edges.

Modelled on arrow-rs ``parquet::arrow::arrow_reader::RowSelection`` (ranges instead of
select/skip runs; `and_then` has the same meaning).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from layout.errors import UsageError

Range = tuple[int, int]

__all__ = ["Range", "RowSelection"]


@dataclass(frozen=True, slots=True)
class RowSelection:
    """Selected rows of a row group, as coalesced half-open ranges ``[start, end)``.

    Build one with `all`, `none`, `from_ranges`, `from_mask` or `from_pages`; the plain
    constructor only accepts ranges that are already normalized (it checks them).
    """

    ranges: tuple[Range, ...] = ()

    def __post_init__(self) -> None:
        previous_end = -1
        for item in self.ranges:
            start, end = item
            if start < 0 or end <= start or start <= previous_end:
                raise UsageError(
                    f"RowSelection ranges must be sorted, non-empty, non-negative and neither overlap "
                    f"nor touch; got {list(self.ranges)!r} (use RowSelection.from_ranges to normalize)"
                )
            previous_end = end

    # -- constructors ---------------------------------------------------------------------

    @classmethod
    def all(cls, num_rows: int) -> RowSelection:
        """Every row of a row group of `num_rows` rows."""
        _check_num_rows(num_rows)
        return cls(((0, num_rows),)) if num_rows else cls()

    @classmethod
    def none(cls) -> RowSelection:
        """No row at all."""
        return cls()

    @classmethod
    def from_ranges(cls, ranges: Iterable[Sequence[int]]) -> RowSelection:
        """Normalize any ranges: sort them, merge overlapping and adjacent ones, drop empty ones."""
        cleaned: list[Range] = []
        for item in ranges:
            start, end = int(item[0]), int(item[1])
            if start < 0 or end < start:
                raise UsageError(f"invalid row range [{start}, {end}): need 0 <= start <= end")
            if end > start:
                cleaned.append((start, end))
        cleaned.sort()
        return cls(_coalesce(cleaned))

    @classmethod
    def from_mask(cls, mask: Sequence[bool] | np.ndarray) -> RowSelection:
        """The rows whose entry in the boolean `mask` is true (row i is ``mask[i]``)."""
        flags = np.asarray(mask, dtype=bool).ravel()
        if flags.size == 0:
            return cls()
        padded = np.concatenate(([False], flags, [False])).astype(np.int8)
        edges = np.flatnonzero(np.diff(padded))
        starts, ends = edges[0::2], edges[1::2]
        return cls(tuple(zip(starts.tolist(), ends.tolist(), strict=True)))

    @classmethod
    def from_pages(
        cls, page_first_rows: Sequence[int], num_rows: int, page_indices: Iterable[int]
    ) -> RowSelection:
        """The rows covered by the pages `page_indices` of a column chunk.

        `page_first_rows` is the offset index's ``first_row_index`` per page; page i spans
        ``[page_first_rows[i], page_first_rows[i + 1])`` and the last page ends at `num_rows`.
        """
        _check_pages(page_first_rows, num_rows)
        count = len(page_first_rows)
        spans: list[Range] = []
        for index in sorted(set(page_indices)):
            if not 0 <= index < count:
                raise UsageError(f"page index {index} out of range: the column chunk has {count} pages")
            end = page_first_rows[index + 1] if index + 1 < count else num_rows
            if end > page_first_rows[index]:
                spans.append((int(page_first_rows[index]), int(end)))
        return cls(_coalesce(spans))

    # -- queries --------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        """How many rows are selected."""
        return sum(end - start for start, end in self.ranges)

    @property
    def is_empty(self) -> bool:
        """True when no row is selected."""
        return not self.ranges

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __contains__(self, row: object) -> bool:
        if not isinstance(row, int):
            return False
        position = bisect.bisect_right(self.ranges, (row, float("inf"))) - 1
        return position >= 0 and self.ranges[position][0] <= row < self.ranges[position][1]

    def __str__(self) -> str:
        if not self.ranges:
            return "RowSelection(none)"
        shown = " ".join(f"[{start}, {end})" for start, end in self.ranges[:8])
        more = f" ... ({len(self.ranges)} ranges)" if len(self.ranges) > 8 else ""
        return f"RowSelection({self.row_count} rows: {shown}{more})"

    def to_mask(self, num_rows: int) -> np.ndarray:
        """A numpy boolean array of length `num_rows`, true at the selected rows."""
        self._check_within(num_rows)
        mask = np.zeros(num_rows, dtype=bool)
        for start, end in self.ranges:
            mask[start:end] = True
        return mask

    # -- set algebra (linear merges) -------------------------------------------------------

    def intersection(self, other: RowSelection) -> RowSelection:
        """Rows selected by both (AND of two predicates on the same row group)."""
        left, right = self.ranges, other.ranges
        out: list[Range] = []
        i = j = 0
        while i < len(left) and j < len(right):
            start = max(left[i][0], right[j][0])
            end = min(left[i][1], right[j][1])
            if start < end:
                out.append((start, end))
            if left[i][1] < right[j][1]:
                i += 1
            else:
                j += 1
        # Pieces of two coalesced inputs can touch (e.g. [0,5)&[0,3) and [0,5)&[3,5)).
        return RowSelection(_coalesce(out))

    def union(self, other: RowSelection) -> RowSelection:
        """Rows selected by either (OR of two predicates on the same row group)."""
        left, right = self.ranges, other.ranges
        merged: list[Range] = []
        i = j = 0
        while i < len(left) or j < len(right):
            if j >= len(right) or (i < len(left) and left[i] <= right[j]):
                merged.append(left[i])
                i += 1
            else:
                merged.append(right[j])
                j += 1
        return RowSelection(_coalesce(merged))

    __and__ = intersection
    __or__ = union

    def complement(self, num_rows: int) -> RowSelection:
        """The rows of ``[0, num_rows)`` this selection does not select."""
        self._check_within(num_rows)
        out: list[Range] = []
        cursor = 0
        for start, end in self.ranges:
            if start > cursor:
                out.append((cursor, start))
            cursor = end
        if cursor < num_rows:
            out.append((cursor, num_rows))
        return RowSelection(tuple(out))

    def and_then(self, other: RowSelection) -> RowSelection:
        """Refine this selection by `other`, whose row numbers count only the rows selected here.

        Row k of `other` is the k-th row this selection selects: for ``self = [10, 20)`` and
        ``other = [0, 2)`` the result is ``[10, 12)``. `other` must lie within `row_count`.
        """
        if other.ranges and other.ranges[-1][1] > self.row_count:
            raise UsageError(
                f"and_then: the refining selection reaches row {other.ranges[-1][1]} "
                f"but this selection has only {self.row_count} rows"
            )
        out: list[Range] = []
        i = 0
        base = 0  # selected rows before self.ranges[i]
        for start, end in other.ranges:
            while start < end:
                range_start, range_end = self.ranges[i]
                length = range_end - range_start
                if start >= base + length:
                    base += length
                    i += 1
                    continue
                piece_end = min(end, base + length)
                out.append((range_start + start - base, range_start + piece_end - base))
                start = piece_end
        return RowSelection(_coalesce(out))

    def limit(self, n: int) -> RowSelection:
        """Only the first `n` selected rows."""
        if n < 0:
            raise UsageError(f"limit must be >= 0, got {n}")
        out: list[Range] = []
        remaining = n
        for start, end in self.ranges:
            if remaining <= 0:
                break
            take = min(end - start, remaining)
            out.append((start, start + take))
            remaining -= take
        return RowSelection(tuple(out))

    def offset(self, n: int) -> RowSelection:
        """All selected rows but the first `n`."""
        if n < 0:
            raise UsageError(f"offset must be >= 0, got {n}")
        out: list[Range] = []
        to_skip = n
        for start, end in self.ranges:
            if to_skip >= end - start:
                to_skip -= end - start
                continue
            out.append((start + to_skip, end))
            to_skip = 0
        return RowSelection(tuple(out))

    # -- pages ------------------------------------------------------------------------------

    def scan_ranges(self, page_starts: Sequence[int], num_rows: int) -> list[int]:
        """Indices of the pages that hold at least one selected row, ascending.

        `page_starts` is the offset index's ``first_row_index`` per page of one column chunk;
        page i spans ``[page_starts[i], page_starts[i + 1])`` and the last page ends at
        `num_rows`. A reader fetches exactly these pages for this column.
        """
        _check_pages(page_starts, num_rows)
        self._check_within(num_rows)
        pages: list[int] = []
        count = len(page_starts)
        page = 0
        for start, end in self.ranges:
            # Skip the pages that end at or before this range starts.
            while page + 1 < count and page_starts[page + 1] <= start:
                page += 1
            while page < count and page_starts[page] < end:
                page_end = page_starts[page + 1] if page + 1 < count else num_rows
                if page_end > max(start, page_starts[page]) and (not pages or pages[-1] != page):
                    pages.append(page)
                if page_end > end:
                    break  # this page also holds rows after the range: keep it for the next range
                page += 1
        return pages

    def _check_within(self, num_rows: int) -> None:
        _check_num_rows(num_rows)
        if self.ranges and self.ranges[-1][1] > num_rows:
            raise UsageError(
                f"the selection reaches row {self.ranges[-1][1]} but the row group has {num_rows} rows"
            )


def _coalesce(sorted_ranges: Iterable[Range]) -> tuple[Range, ...]:
    """Merge overlapping and adjacent ranges of a list sorted by start."""
    out: list[Range] = []
    for start, end in sorted_ranges:
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return tuple(out)


def _check_num_rows(num_rows: Any) -> None:
    if not isinstance(num_rows, int | np.integer) or num_rows < 0:
        raise UsageError(f"num_rows must be a non-negative integer, got {num_rows!r}")


def _check_pages(page_starts: Sequence[int], num_rows: int) -> None:
    _check_num_rows(num_rows)
    if len(page_starts) == 0:
        if num_rows:
            raise UsageError(f"no pages given for a column chunk of {num_rows} rows")
        return
    if page_starts[0] != 0:
        raise UsageError(f"the first page must start at row 0, got first_row_index {page_starts[0]}")
    for index in range(1, len(page_starts)):
        if page_starts[index] < page_starts[index - 1]:
            raise UsageError(
                f"page first_row_index values must not decrease: page {index} starts at "
                f"{page_starts[index]} after page {index - 1} at {page_starts[index - 1]}"
            )
    if page_starts[-1] > num_rows:
        raise UsageError(f"page starting at row {page_starts[-1]} lies past the end of {num_rows} rows")
