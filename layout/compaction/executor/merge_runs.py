"""Merging sorted runs without a shuffle: key-range slices found in the runs' page indexes, and each slice
merged from the pages that overlap it with the loser tree (`layout.read.merge`).

When every input of a group is already sorted by the group's keys (lakesort's own runs), sorting its rows
again is wasted work: the output is their merge. The job (`jobs/compaction/merge.py`) does it in three steps,
this module holding the parts that need no Spark:

1. `key_pages`, in an executor per input file: the first key's column index and offset index of every row
   group (one coalesced read beside the footer), checked to be sorted (BoundaryOrder ASCENDING in every row
   group, row groups in key order) and reduced to a page table: each non-null page's first row, rows and
   bounds as order keys (`ColumnType.order_key`: ints for integer-like types, bytes for strings), the row
   groups holding null keys, and each row group's bytes. No data page is read.
2. `plan_slices`, in the driver: the group's key range cut into as many slices as it gets output files,
   at page bounds weighted by rows (quantiles of the pages' upper bounds); for each slice and file the
   pages that may hold its keys, by binary search over the file's page bounds (both are non-decreasing in
   a sorted file), as row ranges per row group. Rows whose first key is null go to a slice of their own.
3. `merge_slice`, in an executor per slice: each file's row ranges read page by page (`layout.parquet.excerpt`:
   pyarrow alone reads whole column chunks), cut to the slice's keys (lo < key <= hi), and the files' streams merged by the loser tree, which checks each
   stream's order by all the keys as it goes (`InputError` when a file is not sorted: the job then sorts).

Every row lands in exactly one slice: a non-null key k lies in one (lo, hi], and the page holding it has
min <= k <= max, so it overlaps that slice and is read there; null keys are read, from every row group that
holds one, by the null slice alone.

What qualifies (`mergeable_keys`): every sort key ascending and of an integer-like or string/binary type
(the order keys above compare as pyarrow compares the values), no float keys (NaN), secondary keys without
nulls (the loser tree sorts nulls last, Spark's ascending order puts them first). The job checks the rest.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from layout.compaction.plan import SortKeyModel
from layout.errors import InputError, ParquetError
from layout.io import resolve
from layout.parquet import ParquetFile, PhysicalType
from layout.parquet.excerpt import read_rows
from layout.parquet.format import BoundaryOrder
from layout.read.merge import merge_sorted

__all__ = ["KeyPages", "Slice", "SliceRead", "key_pages", "merge_slice", "mergeable_keys", "plan_slices"]

BATCH_ROWS = 65_536  # rows per batch read from a file and merged
# Rows of a file read at once (a step's first and last pages are read again by the next and previous step: a
# page of ~20,000 rows in 2**19, 4% more decoding, for memory bounded whatever the row group size).
STEP_ROWS = 1 << 19


@dataclass(frozen=True, slots=True)
class KeyPages:
    """One input file's page table of its first sort key (`key_pages`), or why it cannot be merged."""

    path: str
    rows: int
    # Each non-null page: (row group, first row in it, rows, lowest order key, highest order key), in file order.
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
    """Why rows sorted by `keys` (of these Arrow types) cannot be merged here (None: they can)."""
    for key, t in zip(keys, arrow_types, strict=True):
        if key.direction != "asc":
            return f"sort key {key.column} is descending"
        if not (_int_like(t) or pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t)):
            return f"sort key {key.column} is {t}: merged only on integer-like, string and binary keys"
    return None


def _int_like(t: pa.DataType) -> bool:
    return (pa.types.is_signed_integer(t) or pa.types.is_date32(t) or pa.types.is_timestamp(t)
            or pa.types.is_time(t) or pa.types.is_boolean(t))


def key_pages(path: str, size: int | None, keys: Sequence[str]) -> KeyPages:
    """The page table of `path`'s first key (see the module docstring); `unsorted` says why it is none."""
    filesystem, inner = resolve(path)
    pf = ParquetFile.open(inner, filesystem, size=size)
    first, rest = keys[0], keys[1:]
    group_rows = tuple(rg.num_rows for rg in pf.row_groups)
    group_bytes = tuple(sum(c.meta_data.total_compressed_size for c in rg.columns) for rg in pf.row_groups)

    def refused(why: str) -> KeyPages:
        return KeyPages(path=path, rows=pf.num_rows, group_rows=group_rows, group_bytes=group_bytes, unsorted=why)

    for key in keys:
        if not pf.has_column(key):
            return refused(f"it has no column {key}")
    column = pf.column(first)
    if column.type.physical_type in (PhysicalType.FLOAT, PhysicalType.DOUBLE):
        return refused(f"{first} is a float")
    pf.load_page_indexes([first])
    pages: list[tuple[int, int, int, Any, Any]] = []
    nulls: list[int] = []
    for rg, rows in enumerate(group_rows):
        if not rows:
            continue
        for key in rest:  # the loser tree sorts nulls last; Spark's ascending order first
            stats = pf.statistics(rg, key)
            if stats is None or stats.null_count is None or stats.null_count:
                return refused(f"row group {rg} of {key} holds nulls or has no null count")
        index, offsets = pf.raw_column_index(rg, first), pf.offset_index(rg, first)
        if index is None or offsets is None:
            return refused(f"row group {rg} of {first} has no column index or offset index")
        count = len(index.null_pages)
        if count - sum(index.null_pages) > 1 and index.boundary_order != BoundaryOrder.ASCENDING:
            return refused(f"row group {rg} of {first} is {index.boundary_order.name}, not ASCENDING")
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
        reads = tuple(SliceRead(i, rg, 0, f.group_rows[rg]) for i, f in enumerate(files) for rg in f.null_groups)
        slices.append(Slice(lo=None, hi=None, nulls=True, reads=reads, rows=sum(r.stop - r.start for r in reads)))
    return slices


def _slice(files: Sequence[KeyPages], searched: Sequence[tuple[list[Any], list[Any]]], lo: Any, hi: Any) -> Slice:
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
    (pages are read, not row groups: `layout.parquet.excerpt`)."""
    return sum(files[r.file].group_bytes[r.row_group] * (r.stop - r.start) // max(1, files[r.file].group_rows[r.row_group])
               for s in slices for r in s.reads)


def merge_slice(piece: Slice, paths: Sequence[str], columns: Sequence[str], keys: Sequence[str],
                schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The slice's rows, merged from its files' streams by `keys`, as batches of `schema` (the columns' types
    as Spark takes them). InputError (from the loser tree) when a file is not sorted by the keys."""
    by_file: dict[int, list[SliceRead]] = {}
    for r in piece.reads:
        by_file.setdefault(r.file, []).append(r)
    order = sorted(by_file)
    streams = [_stream(paths[i], by_file[i], list(columns), keys[0], piece) for i in order]
    try:
        for batch in merge_sorted(streams, list(keys), batch_size=BATCH_ROWS):
            yield batch.cast(schema)
    except InputError as exc:  # "stream i is not sorted ...": name the file
        found = re.match(r"stream (\d+) ", str(exc))
        raise InputError(f"{paths[order[int(found[1])]] if found else 'a run'}: {exc}") from exc


def _stream(path: str, reads: Sequence[SliceRead], columns: list[str], first: str, piece: Slice
            ) -> Iterator[pa.RecordBatch]:
    """One file's rows of the slice, in file order: its row ranges read page by page (`layout.parquet.excerpt`)
    where every chunk has an offset index, else by whole row groups, and cut to the slice's first keys."""
    filesystem, inner = resolve(path)
    with filesystem.open_input_file(inner) as handle:
        pf = ParquetFile.open(inner, filesystem)
        leaves = [pf.column(c).index for c in columns]
        pf.load_page_indexes(leaves)
        whole = None
        for r in reads:
            # At most STEP_ROWS rows of a file decoded at once: the Python worker holds a step of each run.
            for start in range(r.start, r.stop, STEP_ROWS):
                stop = min(r.stop, start + STEP_ROWS)
                try:
                    rows = read_rows(pf, lambda offset, length: handle.read_at(length, offset), r.row_group, leaves,
                                     start, stop)
                except ParquetError:  # no offset index, or a nested column: the row group read whole, once
                    whole = whole or pq.ParquetFile(handle)
                    rows = whole.read_row_group(r.row_group, columns=columns, use_threads=False).slice(
                        r.start, r.stop - r.start)
                    stop = r.stop
                for batch in rows.select(columns).to_batches(max_chunksize=BATCH_ROWS):
                    kept = _within(batch, first, piece)
                    if kept.num_rows:
                        yield kept
                if stop == r.stop:
                    break


def _within(batch: pa.RecordBatch, first: str, piece: Slice) -> pa.RecordBatch:
    """The rows of `batch` whose first key lies in the slice."""
    values = batch.column(batch.schema.get_field_index(first))
    if piece.nulls:
        return batch.filter(pc.is_null(values))
    keys = _order_keys(values)
    mask = pc.is_valid(values)
    if piece.lo is not None:
        mask = pc.and_(mask, pc.greater(keys, _scalar(piece.lo, keys.type)))
    if piece.hi is not None:
        mask = pc.and_(mask, pc.less_equal(keys, _scalar(piece.hi, keys.type)))
    mask = pc.fill_null(mask, False)  # a null key compares as null: not in a slice of values
    if pc.all(mask).as_py():
        return batch
    return batch.filter(mask)


def _order_keys(values: pa.Array) -> pa.Array:
    """The values as `ColumnType.order_key` orders them: int64 for integer-like types, bytes for the others."""
    t = values.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return values.cast(pa.binary() if pa.types.is_string(t) else pa.large_binary())
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return values
    if pa.types.is_boolean(t):
        return values.cast(pa.int64())
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return values.view(pa.int32()).cast(pa.int64())
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return values.view(pa.int64())
    return values.cast(pa.int64())


def _scalar(value: Any, t: pa.DataType) -> pa.Scalar:
    if isinstance(value, (bool, int, np.integer)):
        return pa.scalar(int(value), pa.int64())
    return pa.scalar(bytes(value), t)
