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
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import random
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from layout.catalog import load_catalog
from layout.expr.predicate import sql_literal
from layout.io import resolve
from layout.metrics import store
from layout.parquet import ParquetFile
from layout.read.cache import MetadataCache
from layout.read.iceberg import snapshot_files
from layout.read.plan import needed_columns, plan, selected_pages
from layout.read.plan_values import Plan
from layout.read.scan import match_selections
from layout.registry import find_spec
from layout.spec import TableSpec, resolve_sort_keys

log = logging.getLogger(__name__)

Phase = Literal["before", "after", "on-demand"]
ProbeKind = Literal["owner", "standard"]

# Ranges of about these fractions of the rows, plus one point lookup, per sort key.
STANDARD_SELECTIVITIES: tuple[tuple[str, float], ...] = (("0_1pct", 0.001), ("1pct", 0.01), ("10pct", 0.1))
SAMPLE_FILES = 32  # standard probes sample the key from at most this many data files
SAMPLE_ROWS = 200_000


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
    row_groups_total: int
    row_groups_selected: int
    pages_total: int
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

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


def owner_probes(spec: TableSpec) -> list[Probe]:
    return [Probe(p.name, p.where, tuple(p.columns) if p.columns else None, "owner") for p in spec.probes]


def standard_probes(table: Table, columns: Sequence[str], snapshot_id: int | None = None) -> list[Probe]:
    """A point lookup and 0.1% / 1% / 10% ranges per column, values sampled from the data (seeded)."""
    probes = []
    name = ".".join(table.name())
    for column in columns:
        values = _sample(table, column, snapshot_id, random.Random(zlib.crc32(f"{name}:{column}".encode())))
        if not values or _probe_literal(values[0]) is None:
            log.info("%s: no standard probes on %s (no values, or a type without SQL literals)", name, column)
            continue
        rng = random.Random(zlib.crc32(f"{name}:{column}:probes".encode()))
        safe = column.replace(".", "_")
        point = values[rng.randrange(len(values))]
        probes.append(Probe(f"std_{safe}_point", f"{column} = {_probe_literal(point)}", None, "standard"))
        for label, fraction in STANDARD_SELECTIVITIES:
            width = max(1, round(fraction * len(values)))
            start = rng.randrange(max(1, len(values) - width))
            lo, hi = values[start], values[min(start + width, len(values) - 1)]
            probes.append(Probe(f"std_{safe}_{label}", f"{column} BETWEEN {_probe_literal(lo)} AND {_probe_literal(hi)}",
                                None, "standard"))
    return probes


def _sample(table: Table, column: str, snapshot_id: int | None, rng: random.Random) -> list[Any]:
    """Sorted non-null values of `column` from a seeded sample of the snapshot's files."""


    files = sorted(snapshot_files(table, None, None, snapshot_id), key=lambda f: f.path)
    chosen = rng.sample(files, min(SAMPLE_FILES, len(files)))

    chunks = []
    for f in chosen:
        filesystem, path = resolve(f.path)
        chunks.append(pq.read_table(path, columns=[column], filesystem=filesystem).column(0))
    if not chunks:
        return []
    values = pc.drop_null(pa.chunked_array([c for chunk in chunks for c in chunk.chunks], type=chunks[0].type))
    if len(values) > SAMPLE_ROWS:
        values = values.take(sorted(rng.sample(range(len(values)), SAMPLE_ROWS)))
    return values.take(pc.sort_indices(values)).to_pylist()


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
                  phase: Phase) -> Measurement:
    """Plan `probe` cold and warm on the snapshot, then count the pages the matching rows need."""

    cache = MetadataCache()
    cold = plan(source, probe.where, probe.columns, cache=cache, snapshot_id=snapshot_id)
    warm = plan(source, probe.where, probe.columns, cache=cache, snapshot_id=snapshot_id)
    pages_ideal, bytes_ideal, rows_matching = ideal(warm)
    c = warm.counts
    return Measurement(
        run_id=run_id, phase=phase, table=source, snapshot_id=snapshot_id,
        measured_at=dt.datetime.now(dt.UTC), probe=probe.name, probe_kind=probe.kind, predicate=probe.where,
        columns=",".join(probe.columns or ()), files_total=c.files_total, files_selected=c.files_selected,
        row_groups_total=c.row_groups_total, row_groups_selected=c.row_groups_selected,
        pages_total=c.pages_total, pages_selected=c.pages_selected, pages_ideal=pages_ideal,
        rows_total=c.rows_total, rows_selected=c.rows_selected, rows_matching=rows_matching,
        bytes_total=c.bytes_total, bytes_selected=c.bytes_selected, bytes_ideal=bytes_ideal,
        efficiency=bytes_ideal / c.bytes_selected if c.bytes_selected else 1.0,
        plan_cold_ms=cold.plan_ms, plan_warm_ms=warm.plan_ms,
    )


def ideal(planned: Plan) -> tuple[int, int, int]:
    """(pages, bytes, rows) of the ideal read of a plan: the pages of its columns that hold a matching row."""

    pages_ideal = bytes_ideal = rows_matching = 0
    for file, groups in match_selections(planned):
        pf = None
        for rg, matched in groups:
            if not matched:
                continue
            pf = pf or ParquetFile.open(file.path, filesystem=file.filesystem)
            index = {c.name: c.index for c in pf.columns}
            rows_matching += matched.row_count
            for name in needed_columns(planned, pf):
                pages, nbytes = selected_pages(pf, rg.index, index[name], matched)
                pages_ideal += pages
                bytes_ideal += nbytes
    return pages_ideal, bytes_ideal, rows_matching


def probes_for(spec: TableSpec, table: Table, snapshot_id: int | None = None) -> list[Probe]:
    """The owners' probes, then the standard set for each sort key."""

    keys = [k.column for k in resolve_sort_keys(spec, table)]
    return owner_probes(spec) + standard_probes(table, keys, snapshot_id)


def measure(
    table_id: str, *, snapshot_id: int | None = None, run_id: str | None = None, phase: Phase = "on-demand",
    spec: TableSpec | None = None, probes: Sequence[Probe] | None = None, record: bool = True,
) -> list[Measurement]:
    """Measure every probe of a table on a snapshot (default: the current one) and record the rows.

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
    out = [measure_probe(spec.table, p, snapshot_id=snapshot_id, run_id=run_id, phase=phase) for p in probes]
    for m in out:
        log.info("%s %s %s: %s of %s bytes selected, ideal %s (efficiency %.2f), plan %.0f/%.0f ms",
                 spec.table, phase, m.probe, m.bytes_selected, m.bytes_total, m.bytes_ideal, m.efficiency,
                 m.plan_cold_ms, m.plan_warm_ms)
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
