"""The page-level ideal of a plan: the pages of its columns that hold a matching row, counted exactly up to
a budget of selected row groups and estimated from a seeded sample of them beyond (see the docstring of
`layout.metrics.measure` for the sampling and its standard error).

The same row groups also give what the layout-independent ideal needs (`layout.metrics.clustered`):
each counted column's rows, pages and compressed bytes, summed over the row groups evaluated (`rates`):
footers and offset indexes only, the ones this module reads anyway.
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from layout.errors import UsageError
from layout.metrics.clustered import ColumnRate, merge_rates
from layout.parquet import ParquetFile
from layout.parquet.format import chunk_metadata
from layout.read.cache import FileKey, MetadataCache, filesystem_id
from layout.read.chunks import ChunkStructures
from layout.read.plan import needed_columns
from layout.read.plan_values import FilePlan, Plan, RowGroupPlan
from layout.read.scan import match_selections
from layout.read.selection import RowSelection

__all__ = ["IDEAL_ROW_GROUPS", "FileCounter", "Ideal", "OpenFiles", "estimate", "ideal"]

# The ideal reads the predicate columns of every selected row group and the offset indexes of the
# counted columns where a row matches: exact up to this many row groups, a sample of this many beyond.
# 32 bounds the work to 32 row groups' predicate columns and page indexes (on TPC-H SF1, 70k-row row
# groups, ~0.3 s a probe) while the efficiency's standard error stays below 0.5 / sqrt(32) ~ 0.09 in
# the worst case (half the row groups matching throughout, half not at all) and is a few thousandths
# when matches scatter over the row groups, which is what makes a plan select this many.
IDEAL_ROW_GROUPS = 32


class OpenFiles:
    """The Parquet files one measurement opened, by filesystem and path: each file's footer is read once per
    measurement, and the page indexes its probes asked for stay with it (`ParquetFile` memoizes them), so the
    ideals and the engine check of later probes ask storage for nothing already read (on an object store
    each open costs requests). A measurement reads one snapshot, whose files Iceberg never rewrites in
    place: nothing held here goes stale while it lasts. Bounded by the files the measurement's probes select.

    With the planner's metadata `cache` and the files' `sizes` (path as planned -> bytes, from the manifests)
    a file the plans opened is taken from the cache, footer and page indexes read already; any other is
    opened with its size (no size request)."""

    def __init__(self, cache: MetadataCache | None = None, sizes: Mapping[str, int] | None = None) -> None:
        self._files: dict[tuple[int, str], ParquetFile] = {}
        self._cache, self._sizes = cache, sizes or {}

    def open(self, file: FilePlan) -> ParquetFile:
        key = (id(file.filesystem), file.path)
        pf = self._files.get(key)
        if pf is None:
            pf = self._files[key] = self._planned(file) or ParquetFile.open(
                file.path, filesystem=file.filesystem, size=self._sizes.get(file.path))
        return pf

    def _planned(self, file: FilePlan) -> ParquetFile | None:
        size = self._sizes.get(file.path)
        if self._cache is None or size is None or file.filesystem is None:
            return None
        facts = self._cache.get(filesystem_id(file.filesystem), FileKey(file.path, size), "parquet")
        pf = getattr(facts, "pf", None)
        return pf if isinstance(pf, ParquetFile) else None

    def __len__(self) -> int:
        return len(self._files)


@dataclass(frozen=True, slots=True)
class Ideal:
    """The ideal read of a plan: pages and bytes holding a matching row, the matching rows, and how they
    were obtained ("exact", or "sampled k of n row groups (s.e. of efficiency e)"); `rates`: the counted
    columns' rows, pages and bytes over the row groups evaluated (what `layout.metrics.clustered` scales)."""

    pages: int
    bytes: int
    rows: int
    method: str
    rates: tuple[ColumnRate, ...] = field(default=(), compare=False)


def ideal(planned: Plan, *, row_groups: int | None = IDEAL_ROW_GROUPS,
          files: OpenFiles | None = None) -> Ideal:
    """The ideal read of a plan: the pages of its columns that hold a matching row (exact up to
    `row_groups` selected row groups, a seeded sample of that many beyond; None: always exact).
    `files`: the measurement's opened files (default: opened for this call alone)."""

    if row_groups is not None and row_groups < 1:
        raise UsageError(f"the ideal's row-group budget must be at least 1 (None: exact), got {row_groups}")
    units = sorted(((f, rg) for f in planned.files for rg in f.row_groups),
                   key=lambda u: (u[0].path, u[1].index))
    if row_groups is None or len(units) <= row_groups:
        pages, nbytes, rows, rates = _exact(planned, files)
        return Ideal(pages, nbytes, rows, "exact", rates)
    rng = random.Random(zlib.crc32(f"{planned.source}|{planned.predicate}|{planned.columns}".encode()))
    step = len(units) / row_groups
    start = rng.random() * step
    return estimate(planned, [units[int(start + i * step)] for i in range(row_groups)],
                    len(units), files=files)


def _exact(planned: Plan, files: OpenFiles | None) -> tuple[int, int, int, tuple[ColumnRate, ...]]:
    """(pages, bytes, rows, rates) of every selected row group: the predicate columns read whole."""
    units, rates = _units(planned, planned, selected=False, files=files)
    return sum(u[0] for u in units), sum(u[1] for u in units), sum(u[2] for u in units), rates


def estimate(planned: Plan, sample: Sequence[tuple[FilePlan, RowGroupPlan]], n: int, *,
             files: OpenFiles | None = None) -> Ideal:
    """Ratio estimates of the ideal from `sample`, row groups of the plan's `n` selected ones: per
    figure, the plan's selected total times the sample's ideal over its selected (all row groups: exact)."""

    by_file: dict[str, list[RowGroupPlan]] = {}
    file_plans: dict[str, FilePlan] = {}
    for f, rg in sample:
        by_file.setdefault(f.path, []).append(rg)
        file_plans[f.path] = f
    sub = replace(planned,
                  files=tuple(replace(file_plans[p], row_groups=tuple(g)) for p, g in by_file.items()))
    units, rates = _units(planned, sub, selected=True, files=files)
    c = planned.counts
    sums = [sum(u[i] for u in units) for i in range(6)]

    def scaled(ideal_sum: int, selected_sum: int, total: int) -> int:
        return round(total * ideal_sum / selected_sum) if selected_sum else 0

    pages = scaled(sums[0], sums[3], c.pages_selected)
    nbytes = scaled(sums[1], sums[4], c.bytes_selected)
    rows = scaled(sums[2], sums[5], c.rows_selected)
    k = len(units)
    if k == n:
        return Ideal(pages, nbytes, rows, "exact", rates)
    if not sums[2]:  # nothing to spread: say what a miss allows instead of a standard error of 0
        return Ideal(pages, nbytes, rows, f"sampled {k} of {n} row groups, none matching "
                                          f"(efficiency likely below {3 / k:.3f})", rates)
    efficiency = sums[1] / sums[4] if sums[4] else 1.0
    spread = sum((u[1] - efficiency * u[4]) ** 2 for u in units) / (k - 1) if k > 1 else 0.0
    mean = sums[4] / k if k else 0.0
    error = math.sqrt((1 - k / n) / k * spread) / mean if mean else 0.0
    return Ideal(pages, nbytes, rows,
                 f"sampled {k} of {n} row groups (s.e. of efficiency {error:.3f})", rates)


def _units(planned: Plan, sub: Plan, *, selected: bool, files: OpenFiles | None = None
           ) -> tuple[list[tuple[int, int, int, int, int, int]], tuple[ColumnRate, ...]]:
    """Per row group of `sub` (a part of `planned`): ideal pages, bytes and matching rows, then (with
    `selected`; zeros without, and row groups without a match left out) the selected pages, bytes, rows;
    and the counted columns' rates over every row group of `sub`."""
    units, rates = [], []
    for file, groups in match_selections(sub):
        counter = FileCounter(planned, file, files)
        for rg, matched in groups:
            rates.extend(counter.rates(rg.index))
            if not matched and not selected:
                continue
            pages, nbytes = counter.fetched(rg.index, matched) if matched else (0, 0)
            chosen = counter.planned(rg) if selected else (0, 0)
            units.append((pages, nbytes, matched.row_count, *chosen,
                          rg.selection.row_count if selected else 0))
    return units, merge_rates(rates)


class FileCounter:
    """Pages and bytes of one file's counted chunks (the plan's predicate and projected columns) for a
    selection of one of its row groups, by `layout.read.plan`'s rules: a chunk without an offset index
    (or of a repeated column) is one page, read whole; else the pages holding a selected row, and the
    dictionary page. Page structures are built once per chunk."""

    def __init__(self, planned: Plan, file: FilePlan, files: OpenFiles | None = None) -> None:
        self.pf = (files.open(file) if files is not None
                   else ParquetFile.open(file.path, filesystem=file.filesystem))
        self.chunks = ChunkStructures(self.pf)
        index = {c.name: c.index for c in self.pf.columns}
        self.columns = [index[name] for name in needed_columns(planned, self.pf)]
        # The offset indexes of the counted columns in the plan's row groups, in one read ahead rather than
        # a request per chunk (what is already read stays as it is).
        self.pf.prefetch(offset_index=[(rg.index, col) for rg in file.row_groups for col in self.columns])

    def fetched(self, rg: int, selection: RowSelection) -> tuple[int, int]:
        structures = [self.chunks.pages(rg, col) for col in self.columns]
        coarse = _coarsen(selection, [s.first_rows for s in structures if s is not None])
        pages = nbytes = 0
        for col, chunk in zip(self.columns, structures, strict=True):
            if chunk is None:
                p, b = 1, chunk_metadata(self.pf.row_groups[rg].columns[col]).total_compressed_size
            else:
                p, b = chunk.fetched(coarse)
            pages, nbytes = pages + p, nbytes + b
        return pages, nbytes

    def planned(self, rg: RowGroupPlan) -> tuple[int, int]:
        """What planning counted for the row group's selection: a whole row group as the chunks' totals."""
        if rg.selection.row_count != rg.num_rows:
            return self.fetched(rg.index, rg.selection)
        pages = nbytes = 0
        for _, p, b in self._chunks(rg.index):
            pages, nbytes = pages + p, nbytes + b
        return pages, nbytes

    def rates(self, rg: int) -> list[ColumnRate]:
        """Each counted column's chunk in the row group: its rows, pages and compressed bytes."""
        rows = self.pf.row_groups[rg].num_rows
        return [ColumnRate(self.pf.columns[col].name, rows, p, b) for col, p, b in self._chunks(rg)]

    def _chunks(self, rg: int) -> list[tuple[int, int, int]]:
        """(column, pages, bytes) of the counted chunks: pages from the offset index, one without it."""
        out = []
        for col in self.columns:
            oi = self.pf.offset_index(rg, col)
            pages = len(oi.page_locations) if oi is not None and oi.page_locations else 1
            chunk = self.pf.row_groups[rg].columns[col]
            out.append((col, pages, chunk_metadata(chunk).total_compressed_size))
        return out


def _coarsen(selection: RowSelection, first_rows: Sequence[Sequence[int]]) -> RowSelection:
    """`selection` with neighbouring ranges merged when no page of any of the chunks starts between
    them: each chunk's pages holding a selected row stay the same (the rows added lie in a page that
    already holds one), and counting them costs O(pages) rather than O(ranges) (a scattered match has
    a range per matching row)."""
    if len(selection.ranges) < 2:
        return selection
    ranges = np.asarray(selection.ranges, dtype=np.int64)
    starts = np.unique(np.concatenate([np.asarray(f, dtype=np.int64) for f in first_rows]
                                      or [np.zeros(0, np.int64)]))
    first_page = np.searchsorted(starts, ranges[:, 0], side="right")  # page "cells" between page starts
    last_page = np.searchsorted(starts, ranges[:, 1] - 1, side="right")
    opens = np.ones(len(ranges), dtype=bool)
    opens[1:] = first_page[1:] != last_page[:-1]
    heads = np.flatnonzero(opens)
    tails = np.append(heads[1:] - 1, len(ranges) - 1)
    return RowSelection(tuple(zip(ranges[heads, 0].tolist(), ranges[tails, 1].tolist(), strict=True)))
