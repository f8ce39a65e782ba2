"""Merging sorted runs without a shuffle: key-range slices found in the runs' page indexes.

When every input of a group is already sorted by the group's keys (lakesort's own runs), shuffling its rows
to sort them again is wasted work. The job (`jobs/compaction/merge.py`) cuts the group into slices by key
range, each read by one Spark task from every run with the slice's range pushed down to the reader and sorted
within the task. This module holds the parts that need no Spark:

1. `key_pages`, per input file (in the driver, or in executors for many files): the first key's column
   index and offset index of every row group (one coalesced read beside the footer), checked to be sorted
   (BoundaryOrder ASCENDING in every row group, row groups in key order) and reduced to a page table: each
   non-null page's first row, rows and bounds as order keys (`ColumnType.order_key`: ints for integer-like
   types, in microseconds for timestamps, bytes for strings), the row groups holding null keys, and each row
   group's bytes. No data page is read.
2. `plan_slices`, in the driver: the group's key range cut into as many slices as it gets tasks, at page
   bounds weighted by rows (quantiles of the pages' upper bounds); for each slice and file the pages that may
   hold its keys, by binary search over the file's page bounds (both are non-decreasing in a sorted file), as
   row ranges per row group: what a reader that skips pages by their column index reads (`bytes_read`).
   Rows whose first key is null go to a slice of their own.

Every row lands in exactly one slice: a non-null key k lies in one (lo, hi], and the page holding it has
min <= k <= max, so it overlaps that slice; null keys are in the null slice alone.

What qualifies (`mergeable_keys`): a first key ascending and of an integer-like, string or binary type (order
keys compare as Spark compares the values: no floats, whose NaN and -0.0 Parquet's bounds do not order as
Spark does). The later keys are sorted within each slice by Spark, any type, direction and nulls.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from layout.compaction.plan import SortKeyModel
from layout.io import resolve
from layout.parquet import ParquetFile, PhysicalType
from layout.parquet.format import BoundaryOrder, chunk_metadata

__all__ = ["KeyPages", "Slice", "SliceRead", "bytes_read", "key_pages", "mergeable_keys", "plan_slices"]

@dataclass(frozen=True, slots=True)
class KeyPages:
    """One input file's page table of its first sort key (`key_pages`), or why it cannot be merged."""

    path: str
    rows: int
    # Each non-null page: (row group, first row in it, rows, lowest order key,
    # highest order key), in file order.
    pages: tuple[tuple[int, int, int, Any, Any], ...] = ()
    null_groups: tuple[int, ...] = ()  # row groups holding rows whose first key is null
    group_rows: tuple[int, ...] = ()
    group_bytes: tuple[int, ...] = ()  # compressed bytes of each row group's columns
    unsorted: str | None = None  # why the file is no sorted run by the keys (None: it is)


@dataclass(frozen=True, slots=True)
class SliceRead:
    """Rows [start, stop) of a row group of an input file (by index into the group's files)."""

    file: int
    row_group: int
    start: int
    stop: int


@dataclass(frozen=True, slots=True)
class Slice:
    """A key range of a group: first keys in (lo, hi] (None: unbounded), or the null keys; what to read."""

    lo: Any
    hi: Any
    nulls: bool
    reads: tuple[SliceRead, ...]
    rows: int  # the rows of the pages read (an upper bound of the slice's rows)


def mergeable_keys(keys: Sequence[SortKeyModel], arrow_types: Sequence[pa.DataType]) -> str | None:
    """Why rows sorted by `keys` (of these Arrow types) cannot be merged here (None: they can): the first key
    slices the runs, so it is ascending, of an integer-like, string or binary type (order keys compare as
    Spark compares the values; timestamps in microseconds, as Iceberg and the job write them); the later keys
    are Spark's to sort within each slice, any type and direction."""
    key, t = keys[0], arrow_types[0]
    if key.direction != "asc":
        return f"sort key {key.column} is descending"
    if pa.types.is_timestamp(t) and t.unit != "us":
        return f"sort key {key.column} is {t}: merged on timestamps in microseconds only"
    if not (_int_like(t) or pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t)):
        return f"sort key {key.column} is {t}: merged only on integer-like, string and binary keys"
    return None


def _int_like(t: pa.DataType) -> bool:
    return bool(pa.types.is_signed_integer(t) or pa.types.is_date32(t) or pa.types.is_timestamp(t)
                or pa.types.is_time(t) or pa.types.is_boolean(t))


def key_pages(path: str, size: int | None, keys: Sequence[str]) -> KeyPages:
    """The page table of `path`'s first key (see the module docstring); `unsorted` says why it is none."""
    filesystem, inner = resolve(path)
    pf = ParquetFile.open(inner, filesystem, size=size)
    first = keys[0]
    group_rows = tuple(rg.num_rows for rg in pf.row_groups)
    group_bytes = tuple(sum(chunk_metadata(c).total_compressed_size for c in rg.columns)
                        for rg in pf.row_groups)

    def refused(why: str) -> KeyPages:
        return KeyPages(path=path, rows=pf.num_rows, group_rows=group_rows, group_bytes=group_bytes,
                        unsorted=why)

    for key in keys:
        if not pf.has_column(key):
            return refused(f"it has no column {key}")
    column = pf.column(first)
    if column.type.physical_type in (PhysicalType.FLOAT, PhysicalType.DOUBLE):
        return refused(f"{first} is a float")
    if column.type.kind == "int96" or (column.type.kind == "timestamp" and column.type.unit != "us"):
        # Slices are bounded by Spark literals of timestamps in microseconds (`jobs/compaction/merge.bound`).
        return refused(f"{first} holds timestamps as {column.type.logical_name}, not INT64 microseconds")
    pf.load_page_indexes([first])
    pages: list[tuple[int, int, int, Any, Any]] = []
    nulls: list[int] = []
    for rg, rows in enumerate(group_rows):
        if not rows:
            continue
        index, offsets = pf.raw_column_index(rg, first), pf.offset_index(rg, first)
        if index is None or offsets is None:
            return refused(f"row group {rg} of {first} has no column index or offset index")
        count = len(index.null_pages)
        if count - sum(index.null_pages) > 1 and index.boundary_order != BoundaryOrder.ASCENDING:
            # An order newer than this spec is a plain int, without a name: AttributeError (left as it was).
            order = index.boundary_order.name  # type: ignore[attr-defined]
            return refused(f"row group {rg} of {first} is {order}, not ASCENDING")
        starts = [loc.first_row_index for loc in offsets.page_locations] + [rows]
        counts = index.null_counts
        stats = pf.statistics(rg, first)
        has_nulls = (any(counts) if counts is not None else stats is None or stats.null_count is None
                     or stats.null_count > 0)
        if has_nulls:
            nulls.append(rg)
        for i in range(count):
            if index.null_pages[i]:
                continue
            lo, hi = column.type.order_key(index.min_values[i]), column.type.order_key(index.max_values[i])
            if pages and (lo < pages[-1][3] or hi < pages[-1][4]):
                return refused(f"the bounds of {first} decrease at page {i} of row group {rg}")
            pages.append((rg, starts[i], starts[i + 1] - starts[i], lo, hi))
    return KeyPages(path=path, rows=pf.num_rows, pages=tuple(pages), null_groups=tuple(nulls),
                    group_rows=group_rows, group_bytes=group_bytes)


def plan_slices(files: Sequence[KeyPages], count: int) -> list[Slice]:
    """The group's key range cut into at most `count` slices of about equal rows (fewer where pages share
    bounds), plus one for null keys when a file holds them, each with the row ranges to read."""
    bounds = sorted((p[4], p[2]) for f in files for p in f.pages)
    total = sum(rows for _, rows in bounds)
    cuts: list[Any] = []
    seen = 0
    for hi, rows in bounds:
        seen += rows
        if len(cuts) + 1 < count and seen * count >= total * (len(cuts) + 1) and (not cuts or hi > cuts[-1]):
            cuts.append(hi)
    if cuts and cuts[-1] == bounds[-1][0]:
        cuts.pop()  # the last slice would be empty
    edges = [None, *cuts, None]
    # Each file's page bounds, once for all slices: both non-decreasing (`key_pages` checked it).
    searched = [([p[3] for p in f.pages], [p[4] for p in f.pages]) for f in files]
    slices = [_slice(files, searched, lo, hi) for lo, hi in itertools.pairwise(edges)]
    slices = [s for s in slices if s.reads]
    if any(f.null_groups for f in files):
        reads = tuple(SliceRead(i, rg, 0, f.group_rows[rg]) for i, f in enumerate(files)
                      for rg in f.null_groups)
        slices.append(Slice(lo=None, hi=None, nulls=True, reads=reads,
                            rows=sum(r.stop - r.start for r in reads)))
    return slices


def _slice(files: Sequence[KeyPages], searched: Sequence[tuple[list[Any], list[Any]]],
           lo: Any, hi: Any) -> Slice:
    """The pages of each file that may hold a first key in (lo, hi], as row ranges per row group (`searched`:
    each file's page minima and maxima)."""
    reads: list[SliceRead] = []
    for i, (f, (lows, highs)) in enumerate(zip(files, searched, strict=True)):
        begin = 0 if lo is None else bisect.bisect_right(highs, lo)  # first page whose max > lo
        end = len(f.pages) if hi is None else bisect.bisect_right(lows, hi)  # pages whose min <= hi
        by_group: dict[int, list[int]] = {}
        for rg, start, rows, _, _ in f.pages[begin:end]:
            span = by_group.setdefault(rg, [start, start + rows])
            span[0], span[1] = min(span[0], start), max(span[1], start + rows)
        reads += [SliceRead(i, rg, a, b) for rg, (a, b) in sorted(by_group.items())]
    return Slice(lo=lo, hi=hi, nulls=False, reads=tuple(reads), rows=sum(r.stop - r.start for r in reads))


def bytes_read(files: Sequence[KeyPages], slices: Sequence[Slice]) -> int:
    """About the compressed bytes the slices' reads take: each read's share of its row group's bytes by rows
    (a reader skipping pages by their column index reads pages, not row groups)."""
    return sum(
        files[r.file].group_bytes[r.row_group]
        * (r.stop - r.start)
        // max(1, files[r.file].group_rows[r.row_group])
        for s in slices
        for r in s.reads
    )
