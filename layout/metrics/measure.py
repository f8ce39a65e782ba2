"""Pruning effectiveness: for each probe query, what a page-index-aware reader reads, and the ideal.

A probe is measured on one snapshot with `layout.read.plan` (files, row groups, pages, rows and bytes,
total and selected; planning time with a cold and then a warm metadata cache). The ideal is what a
reader would fetch if it knew exactly which rows match: the pages holding at least one matching row,
found by reading only the predicate columns of the selected row groups. Pruning efficiency is ideal
bytes over selected bytes: 1.0 means the metadata let the reader skip everything it could.

Probes are the owners' (`probes:` in the table spec) plus a standard set per sort key, sampled from
the data with a seed derived from the table and column, so the same data gives the same probes: a
point lookup and ranges of about 0.1%, 1% and 10% of the rows. A compaction run measures the snapshot
before its commit and the one after with the same probes; `lakesort measure` any snapshot.
Measurements go to `lakesort.pruning_metrics` (see `layout.metrics.store`).

Measuring is bounded: it grows with the data a probe selects, capped, never with the table.

- The standard probes' values come from at most `SAMPLE_ROW_GROUPS` row groups (one column each):
  files drawn with probability proportional to their rows, a row group drawn in each, and the same
  number of rows taken from each, so every row of the snapshot is about equally likely to be drawn.
- The ideal is exact (`ideal_method` "exact") while the plan selects at most `IDEAL_ROW_GROUPS` row
  groups. Beyond that, a systematic sample of that many of them is evaluated: the selected row groups
  in file-path and row-group order (so the sample spreads over partitions and files), every (n/k)-th
  from a start seeded by the probe and source, the same row groups for the same snapshot and probe.
  The figures are ratio estimates: the sample's ideal pages, bytes and matching rows over its selected
  pages, bytes and rows, times the plan's selected totals (which planning counted exactly). So the
  estimated efficiency is the sample's, an estimate never exceeds the selection, and evaluating every
  row group gives the exact figures. `ideal_method` then reads "sampled k of n row groups (s.e. of
  efficiency e)": e is the ratio estimator's standard error, sqrt((1 - k/n) / k * s^2) / mean selected
  bytes, s^2 the variance of the sampled row groups' (ideal bytes - efficiency * selected bytes)
  (the simple-random-sampling formula; a systematic sample over a sorted order is usually closer).
  When matches spread over the row groups (an unsorted table, which is what selects many) e is a few
  thousandths. When a few row groups hold all matches (a point lookup on an unsorted table) a sample
  that hits one scales it up (e is then large), and one that hits none estimates 0: `ideal_method`
  then reads "sampled k of n row groups, none matching (efficiency likely below 3/k)", the rule of
  three (95%) on the share of row groups with a match, which bounds the efficiency when row groups
  are of similar size.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import random
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from decimal import Decimal
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from layout.catalog import load_catalog
from layout.errors import UsageError
from layout.expr.predicate import sql_literal
from layout.io import resolve
from layout.metrics import store
from layout.parquet import ParquetFile
from layout.read.cache import MetadataCache
from layout.read.chunks import ChunkStructures
from layout.read.iceberg import snapshot_files
from layout.read.plan import needed_columns, plan
from layout.read.plan_values import FilePlan, Plan, RowGroupPlan
from layout.read.scan import match_selections
from layout.read.selection import RowSelection
from layout.registry import find_spec
from layout.spec import TableSpec, resolve_sort_keys

log = logging.getLogger(__name__)

Phase = Literal["before", "after", "on-demand"]
ProbeKind = Literal["owner", "standard"]

# Ranges of about these fractions of the rows, plus one point lookup, per sort key.
STANDARD_SELECTIVITIES: tuple[tuple[str, float], ...] = (("0_1pct", 0.001), ("1pct", 0.01), ("10pct", 0.1))
# Standard probes draw the key from SAMPLE_ROW_GROUPS row groups (a bounded read: one column of 32 row
# groups, whatever the table's size), SAMPLE_ROWS values in all (the 0.1% range then spans ~200 of them).
SAMPLE_ROW_GROUPS = 32
SAMPLE_ROWS = 200_000
# The ideal reads the predicate columns of every selected row group and the offset indexes of the
# counted columns where a row matches: exact up to this many row groups, a sample of this many beyond.
# 32 bounds the work to 32 row groups' predicate columns and page indexes (on TPC-H SF1, 70k-row row
# groups, ~0.3 s a probe) while the efficiency's standard error stays below 0.5 / sqrt(32) ~ 0.09 in
# the worst case (half the row groups matching throughout, half not at all) and is a few thousandths
# when matches scatter over the row groups, which is what makes a plan select this many.
IDEAL_ROW_GROUPS = 32


@dataclass(frozen=True, slots=True)
class Probe:
    name: str
    where: str  # SQL
    columns: tuple[str, ...] | None = None  # projection; None: every column
    kind: ProbeKind = "owner"


@dataclass(frozen=True, slots=True)
class Measurement:
    """One probe on one snapshot: the row of `lakesort.pruning_metrics`."""

    run_id: str
    phase: Phase
    table: str
    snapshot_id: int | None
    measured_at: dt.datetime
    probe: str
    probe_kind: ProbeKind
    predicate: str
    columns: str
    files_total: int
    files_selected: int
    row_groups_total: int | None  # None: planning did not open every file (`layout.read.plan`)
    row_groups_selected: int
    pages_total: int | None  # as row_groups_total
    pages_selected: int
    pages_ideal: int
    rows_total: int
    rows_selected: int
    rows_matching: int
    bytes_total: int
    bytes_selected: int
    bytes_ideal: int
    efficiency: float
    plan_cold_ms: float
    plan_warm_ms: float
    # "exact", or "sampled k of n row groups (s.e. of efficiency e)"; None in rows recorded before it existed
    ideal_method: str | None = None

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


def owner_probes(spec: TableSpec) -> list[Probe]:
    return [Probe(p.name, p.where, tuple(p.columns) if p.columns else None, "owner") for p in spec.probes]


def standard_probes(table: Table, columns: Sequence[str], snapshot_id: int | None = None) -> list[Probe]:
    """A point lookup and 0.1% / 1% / 10% ranges per column, values sampled from the data (seeded)."""
    probes = []
    name = ".".join(table.name())
    for column in columns:
        # An Arrow array: only the few values a probe uses become Python values.
        values = _sample(table, column, snapshot_id, random.Random(zlib.crc32(f"{name}:{column}".encode())))
        n = len(values)
        if not n or _probe_literal(values[0].as_py()) is None:
            log.info("%s: no standard probes on %s (no values, or a type without SQL literals)", name, column)
            continue
        rng = random.Random(zlib.crc32(f"{name}:{column}:probes".encode()))
        safe = column.replace(".", "_")
        point = values[rng.randrange(n)].as_py()
        probes.append(Probe(f"std_{safe}_point", f"{column} = {_probe_literal(point)}", None, "standard"))
        for label, fraction in STANDARD_SELECTIVITIES:
            width = max(1, round(fraction * n))
            start = rng.randrange(max(1, n - width))
            lo, hi = values[start].as_py(), values[min(start + width, n - 1)].as_py()
            probes.append(Probe(f"std_{safe}_{label}", f"{column} BETWEEN {_probe_literal(lo)} AND {_probe_literal(hi)}",
                                None, "standard"))
    return probes


def _sample(table: Table, column: str, snapshot_id: int | None, rng: random.Random) -> pa.Array:
    """Sorted non-null values of `column` from a seeded sample of the snapshot's row groups.

    Two stages, each row about equally likely: files drawn with probability proportional to their rows
    (with replacement), a row group drawn uniformly in each draw's file, and the same number of rows
    taken from each drawn row group. Reads `SAMPLE_ROW_GROUPS` row groups of one column at most.
    """
    files = [f for f in sorted(snapshot_files(table, None, None, snapshot_id), key=lambda f: f.path)
             if f.record_count > 0]
    if not files:
        return pa.array([])
    draws = Counter(rng.choices(range(len(files)), weights=[f.record_count for f in files], k=SAMPLE_ROW_GROUPS))
    per_draw = SAMPLE_ROWS // SAMPLE_ROW_GROUPS
    picks: Counter[tuple[int, int]] = Counter()
    handles: dict[int, pq.ParquetFile] = {}
    for i in sorted(draws):
        filesystem, path = resolve(files[i].path)
        handles[i] = pq.ParquetFile(path, filesystem=filesystem)
        n_groups = handles[i].metadata.num_row_groups
        for _ in range(draws[i]):
            if n_groups:
                picks[i, rng.randrange(n_groups)] += 1
    chunks = []
    rows = np.random.default_rng(rng.getrandbits(64))  # positions in bulk: random.sample is slow at this size
    for (i, rg), times in sorted(picks.items()):
        values = pc.drop_null(handles[i].read_row_group(rg, columns=[column]).column(0))
        want = per_draw * times
        if len(values) > want:
            values = values.take(pa.array(np.sort(rows.choice(len(values), want, replace=False))))
        chunks.extend(values.chunks)
    for handle in handles.values():
        handle.close()
    if not chunks:
        return pa.array([])
    values = pa.chunked_array(chunks, type=chunks[0].type).combine_chunks()
    return values.take(pc.sort_indices(values))


def _probe_literal(value: Any) -> str | None:
    """`value` as SQL text for a standard probe (None: a type we make no standard probes for)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dt.date | int | Decimal | float | str):  # datetime is a date
        return sql_literal(value)
    return None


def measure_probe(source: str, probe: Probe, *, snapshot_id: int | None = None, run_id: str,
                  phase: Phase, ideal_row_groups: int | None = IDEAL_ROW_GROUPS) -> Measurement:
    """Plan `probe` cold and warm on the snapshot, then count the pages the matching rows need (exactly
    up to `ideal_row_groups` selected row groups, estimated from a sample of that many beyond; None:
    always exactly)."""

    cache = MetadataCache()
    cold = plan(source, probe.where, probe.columns, cache=cache, snapshot_id=snapshot_id)
    warm = plan(source, probe.where, probe.columns, cache=cache, snapshot_id=snapshot_id)
    best = ideal(warm, row_groups=ideal_row_groups)
    c = warm.counts
    return Measurement(
        run_id=run_id, phase=phase, table=source, snapshot_id=snapshot_id,
        measured_at=dt.datetime.now(dt.UTC), probe=probe.name, probe_kind=probe.kind, predicate=probe.where,
        columns=",".join(probe.columns or ()), files_total=c.files_total, files_selected=c.files_selected,
        row_groups_total=c.row_groups_total, row_groups_selected=c.row_groups_selected,
        pages_total=c.pages_total, pages_selected=c.pages_selected, pages_ideal=best.pages,
        rows_total=c.rows_total, rows_selected=c.rows_selected, rows_matching=best.rows,
        bytes_total=c.bytes_total, bytes_selected=c.bytes_selected, bytes_ideal=best.bytes,
        efficiency=best.bytes / c.bytes_selected if c.bytes_selected else 1.0,
        plan_cold_ms=cold.plan_ms, plan_warm_ms=warm.plan_ms, ideal_method=best.method,
    )


@dataclass(frozen=True, slots=True)
class Ideal:
    """The ideal read of a plan: pages and bytes holding a matching row, the matching rows, and how they
    were obtained ("exact", or "sampled k of n row groups (s.e. of efficiency e)")."""

    pages: int
    bytes: int
    rows: int
    method: str


def ideal(planned: Plan, *, row_groups: int | None = IDEAL_ROW_GROUPS) -> Ideal:
    """The ideal read of a plan: the pages of its columns that hold a matching row (see the module
    docstring: exact up to `row_groups` selected row groups, a seeded sample of that many beyond)."""

    if row_groups is not None and row_groups < 1:
        raise UsageError(f"the ideal's row-group budget must be at least 1 (None: exact), got {row_groups}")
    units = sorted(((f, rg) for f in planned.files for rg in f.row_groups), key=lambda u: (u[0].path, u[1].index))
    if row_groups is None or len(units) <= row_groups:
        pages, nbytes, rows = _exact(planned)
        return Ideal(pages, nbytes, rows, "exact")
    rng = random.Random(zlib.crc32(f"{planned.source}|{planned.predicate}|{planned.columns}".encode()))
    step = len(units) / row_groups
    start = rng.random() * step
    return estimate(planned, [units[int(start + i * step)] for i in range(row_groups)], len(units))


def _exact(planned: Plan) -> tuple[int, int, int]:
    """(pages, bytes, rows) of every selected row group with a match: the predicate columns read whole."""
    units = _units(planned, planned, selected=False)
    return sum(u[0] for u in units), sum(u[1] for u in units), sum(u[2] for u in units)


def estimate(planned: Plan, sample: Sequence[tuple[FilePlan, RowGroupPlan]], n: int) -> Ideal:
    """Ratio estimates of the ideal from `sample`, row groups of the plan's `n` selected ones: per
    figure, the plan's selected total times the sample's ideal over its selected (all row groups: exact)."""

    by_file: dict[str, list[RowGroupPlan]] = {}
    files: dict[str, FilePlan] = {}
    for f, rg in sample:
        by_file.setdefault(f.path, []).append(rg)
        files[f.path] = f
    sub = replace(planned, files=tuple(replace(files[p], row_groups=tuple(g)) for p, g in by_file.items()))
    units = _units(planned, sub, selected=True)
    c = planned.counts
    sums = [sum(u[i] for u in units) for i in range(6)]

    def scaled(ideal_sum: int, selected_sum: int, total: int) -> int:
        return round(total * ideal_sum / selected_sum) if selected_sum else 0

    pages = scaled(sums[0], sums[3], c.pages_selected)
    nbytes = scaled(sums[1], sums[4], c.bytes_selected)
    rows = scaled(sums[2], sums[5], c.rows_selected)
    k = len(units)
    if k == n:
        return Ideal(pages, nbytes, rows, "exact")
    if not sums[2]:  # nothing to spread: say what a miss allows instead of a standard error of 0
        return Ideal(pages, nbytes, rows, f"sampled {k} of {n} row groups, none matching "
                                          f"(efficiency likely below {3 / k:.3f})")
    efficiency = sums[1] / sums[4] if sums[4] else 1.0
    spread = sum((u[1] - efficiency * u[4]) ** 2 for u in units) / (k - 1) if k > 1 else 0.0
    mean = sums[4] / k if k else 0.0
    error = math.sqrt((1 - k / n) / k * spread) / mean if mean else 0.0
    return Ideal(pages, nbytes, rows, f"sampled {k} of {n} row groups (s.e. of efficiency {error:.3f})")


def _units(planned: Plan, sub: Plan, *, selected: bool) -> list[tuple[int, int, int, int, int, int]]:
    """Per row group of `sub` (a part of `planned`): ideal pages, bytes and matching rows, then (with
    `selected`; zeros without, and row groups without a match left out) the selected pages, bytes, rows."""
    units = []
    for file, groups in match_selections(sub):
        counter = None
        for rg, matched in groups:
            if not matched and not selected:
                continue
            counter = counter or _FileCounter(planned, file)
            pages, nbytes = counter.fetched(rg.index, matched) if matched else (0, 0)
            chosen = counter.planned(rg) if selected else (0, 0)
            units.append((pages, nbytes, matched.row_count, *chosen, rg.selection.row_count if selected else 0))
    return units


class _FileCounter:
    """Pages and bytes of one file's counted chunks (the plan's predicate and projected columns) for a
    selection of one of its row groups, by `layout.read.plan`'s rules: a chunk without an offset index
    (or of a repeated column) is one page, read whole; else the pages holding a selected row, and the
    dictionary page. Page structures are built once per chunk."""

    def __init__(self, planned: Plan, file: FilePlan) -> None:
        self.pf = ParquetFile.open(file.path, filesystem=file.filesystem)
        self.chunks = ChunkStructures(self.pf)
        index = {c.name: c.index for c in self.pf.columns}
        self.columns = [index[name] for name in needed_columns(planned, self.pf)]

    def fetched(self, rg: int, selection: RowSelection) -> tuple[int, int]:
        structures = [self.chunks.pages(rg, col) for col in self.columns]
        coarse = _coarsen(selection, [s.first_rows for s in structures if s is not None])
        pages = nbytes = 0
        for col, chunk in zip(self.columns, structures, strict=True):
            if chunk is None:
                p, b = 1, self.pf.row_groups[rg].columns[col].meta_data.total_compressed_size
            else:
                p, b = chunk.fetched(coarse)
            pages, nbytes = pages + p, nbytes + b
        return pages, nbytes

    def planned(self, rg: RowGroupPlan) -> tuple[int, int]:
        """What planning counted for the row group's selection: a whole row group as the chunks' totals."""
        if rg.selection.row_count != rg.num_rows:
            return self.fetched(rg.index, rg.selection)
        pages = nbytes = 0
        for col in self.columns:
            oi = self.pf.offset_index(rg.index, col)
            pages += len(oi.page_locations) if oi is not None and oi.page_locations else 1
            nbytes += self.pf.row_groups[rg.index].columns[col].meta_data.total_compressed_size
        return pages, nbytes


def _coarsen(selection: RowSelection, first_rows: Sequence[Sequence[int]]) -> RowSelection:
    """`selection` with neighbouring ranges merged when no page of any of the chunks starts between
    them: each chunk's pages holding a selected row stay the same (the rows added lie in a page that
    already holds one), and counting them costs O(pages) rather than O(ranges) (a scattered match has
    a range per matching row)."""
    if len(selection.ranges) < 2:
        return selection
    ranges = np.asarray(selection.ranges, dtype=np.int64)
    starts = np.unique(np.concatenate([np.asarray(f, dtype=np.int64) for f in first_rows] or [np.zeros(0, np.int64)]))
    first_page = np.searchsorted(starts, ranges[:, 0], side="right")  # page "cells" between page starts
    last_page = np.searchsorted(starts, ranges[:, 1] - 1, side="right")
    opens = np.ones(len(ranges), dtype=bool)
    opens[1:] = first_page[1:] != last_page[:-1]
    heads = np.flatnonzero(opens)
    tails = np.append(heads[1:] - 1, len(ranges) - 1)
    return RowSelection(tuple(zip(ranges[heads, 0].tolist(), ranges[tails, 1].tolist(), strict=True)))


def probes_for(spec: TableSpec, table: Table, snapshot_id: int | None = None) -> list[Probe]:
    """The owners' probes, then the standard set for each sort key."""

    keys = [k.column for k in resolve_sort_keys(spec, table)]
    return owner_probes(spec) + standard_probes(table, keys, snapshot_id)


def measure(
    table_id: str, *, snapshot_id: int | None = None, run_id: str | None = None, phase: Phase = "on-demand",
    spec: TableSpec | None = None, probes: Sequence[Probe] | None = None, record: bool = True,
    ideal_row_groups: int | None = IDEAL_ROW_GROUPS,
) -> list[Measurement]:
    """Measure every probe of a table on a snapshot (default: the current one) and record the rows;
    `ideal_row_groups` as `measure_probe`'s.

    An on-demand measurement's run id is `measure-<snapshot id>`: measuring a snapshot twice replaces
    its rows instead of adding more.
    """


    spec = spec or find_spec(table_id)
    catalog = load_catalog(spec.catalog)
    table = catalog.load_table(spec.table)
    if snapshot_id is None:
        current = table.current_snapshot()
        if current is None:
            log.info("%s: no snapshot yet, nothing to measure", spec.table)
            return []
        snapshot_id = current.snapshot_id
    run_id = run_id or f"measure-{snapshot_id}"
    probes = list(probes) if probes is not None else probes_for(spec, table, snapshot_id)
    started = time.perf_counter()
    out = [measure_probe(spec.table, p, snapshot_id=snapshot_id, run_id=run_id, phase=phase,
                         ideal_row_groups=ideal_row_groups) for p in probes]
    for m in out:
        log.info("%s %s %s: %s of %s bytes selected, ideal %s (efficiency %.2f, %s), plan %.0f/%.0f ms",
                 spec.table, phase, m.probe, m.bytes_selected, m.bytes_total, m.bytes_ideal, m.efficiency,
                 m.ideal_method, m.plan_cold_ms, m.plan_warm_ms)
    log.info("%s: measured %d probes on snapshot %s in %.1fs", spec.table, len(out), snapshot_id,
             time.perf_counter() - started)
    if record:
        record_measurements(catalog, out)
    return out


def record_measurements(catalog: Catalog, measurements: Sequence[Measurement]) -> int:
    return store.upsert(catalog, store.PRUNING_METRICS, store.METRICS_FIELDS, store.METRICS_KEY,
                        [m.to_row() for m in measurements])


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One compaction run: the row of `lakesort.compaction_runs`."""

    run_id: str
    table: str
    status: Literal["committed", "nothing-to-do", "failed", "dry-run"]
    trigger: Literal["nightly", "backfill", "manual"]
    started_at: dt.datetime
    duration_s: float | None  # None: read back from a row without one
    snapshot_before: int | None = None
    snapshot_after: int | None = None
    partitions_rewritten: int = 0
    groups: int = 0
    files_before: int = 0
    files_after: int = 0
    files_removed: int = 0
    files_added: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    bytes_rewritten: int = 0
    rows_rewritten: int = 0
    verification: Literal["passed", "failed", "skipped"] = "skipped"
    findings: str = "[]"  # JSON list of layout.verify.rules findings
    error: str | None = None

    @property
    def ended_at(self) -> dt.datetime:
        return self.started_at + dt.timedelta(seconds=self.duration_s or 0.0)


def record_run(catalog: Catalog, run: RunRecord) -> None:
    store.upsert(catalog, store.COMPACTION_RUNS, store.RUNS_FIELDS, store.RUNS_KEY, [asdict(run)])


def read_metrics(catalog: Catalog, table: str | None = None):
    return store.read(catalog, store.PRUNING_METRICS, store.METRICS_FIELDS, table)


def read_runs(catalog: Catalog, table: str | None = None):
    return store.read(catalog, store.COMPACTION_RUNS, store.RUNS_FIELDS, table)
