"""A column chunk's page structures, built once per file version.

`PageSearchIndex` (from the column index: the search structure over page bounds, see `layout.read.pages`)
and `ChunkPages` (from the offset index: each page's first row, running page counts and bytes) cost
O(pages) to build and never change for a file version. `ChunkStructures` builds them on demand; the
planner's subclass keeps them in the metadata cache, so a warm plan searches an ordered column index in
O(log pages) and maps pages to rows, and rows to fetched pages, without a pass over all of them.
"""

from __future__ import annotations

import bisect
import functools
from array import array
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from layout.errors import UsageError
from layout.parquet import ColumnType, ParquetFile, PhysicalType
from layout.parquet.format import chunk_metadata
from layout.read.pages import (
    LazyKeys,
    PageBounds,
    PageSearchIndex,
    build_search_index,
    values_size,
)
from layout.read.selection import RowSelection

__all__ = ["ChunkPages", "ChunkStructures", "chunk_pages", "chunk_search_index", "is_float"]

_T = TypeVar("_T")


def is_float(ct: ColumnType) -> bool:
    return ct.physical_type in (PhysicalType.FLOAT, PhysicalType.DOUBLE) or ct.kind == "float16"


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
    floats = is_float(ct)
    if floats:  # NaN bounds break the order: decode eagerly so the index can see and widen them
        mins, maxs = list(mins), list(maxs)
    bounds = PageBounds(
        ci.null_pages, mins, maxs, ci.null_counts,
        exact=ct.physical_type not in (PhysicalType.BYTE_ARRAY, PhysicalType.FIXED_LEN_BYTE_ARRAY),
        nan_possible=floats,
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
        if (n == 0 and num_rows) \
                or (n and (starts[0] != 0 or starts[-1] > num_rows or (np.diff(starts) < 0).any())):
            RowSelection.from_pages(list(first_rows), num_rows, ())  # raises, naming what is wrong
        ends = np.append(starts[1:], num_rows)
        filled = ends > starts  # pages that hold rows
        filled_counts = np.concatenate(([0], np.cumsum(filled)))
        byte_counts = np.concatenate(([0], np.cumsum(np.asarray(sizes, dtype=np.int64) * filled)))
        # Kept as arrays of Python ints: bisect and indexing then hand out plain ints, not numpy scalars.
        first, filled_before, bytes_before = (_int_array(a) for a in (starts, filled_counts, byte_counts))
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


def _int_array(values: np.ndarray) -> array[int]:
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
    md = chunk_metadata(pf.row_groups[rg].columns[column.index])
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

    def _get(self, item: Hashable, build: Callable[[], _T]) -> _T:
        try:
            memo: _T = self._memo[item]
            return memo
        except KeyError:
            pass
        value: _T = self._load(item, build)
        self._memo[item] = value
        return value

    def _load(self, item: Hashable, build: Callable[[], Any]) -> Any:
        return build()
