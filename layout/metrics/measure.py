"""Pruning effectiveness: for each probe query, what a page-index-aware reader reads, and the ideals.

A probe is measured on one snapshot with `layout.read.plan` (files, row groups, pages, rows and bytes,
total and selected; planning time with a cold and then a warm metadata cache). Two ideals stand next to
what it reads:

- the page-level ideal (`layout.metrics.ideal`): what a reader would fetch if it knew exactly which
  rows match, the pages of the current layout holding at least one matching row, found by reading only
  the predicate columns of the selected row groups. `efficiency` = ideal bytes / selected bytes; its
  complement is the share of the selected bytes wasted within selected pages;
- the layout-independent ideal (`layout.metrics.clustered`): what a reader would fetch from a table
  perfectly clustered for the probe, the matching rows packed into the fewest pages of each counted
  column at the table's measured bytes per row and rows per page. `efficiency_clustered` =
  bytes_clustered / bytes_selected, at most 1.0: how far the layout is from the best possible.

Each probe is also run by DataFusion over the files the plan selects (`layout.metrics.engine`), and
each measurement records the clustering health of every sort key per partition
(`layout.metrics.clustering`, from manifest bounds only). Probes are the owners' and a standard set per
sort key (`layout.metrics.probes`). A compaction run measures the snapshot before its commit and the one
after with the same probes; `lakesort measure` any snapshot. Measurements go to
`lakesort.pruning_metrics` and `lakesort.clustering_metrics` (see `layout.metrics.store`).

Measuring is bounded: it grows with the data a probe selects, capped, never with the table.

- The standard probes' values come from at most `SAMPLE_ROW_GROUPS` row groups (`layout.metrics.probes`).
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
- The layout-independent ideal takes each column's rows, pages and bytes from the same row groups the
  page-level ideal evaluates (footers and offset indexes), and the matching rows from it, or, when that
  is a sample's estimate and the engine check filtered every selected file, DataFusion's exact count:
  no more reads.
- The engine check reads what the plan selects, up to `LAKESORT_ENGINE_CHECK_MAX_BYTES` a probe (a
  seeded sample of the selected files beyond); `LAKESORT_ENGINE_CHECK=false` turns it off.
- Clustering health reads the snapshot's manifests once per measurement (what planning reads anyway).
- Metadata is read once per measurement: its probes share one metadata cache (manifests, footers, page
  indexes) and one set of opened files (`layout.metrics.ideal.OpenFiles`, for the ideals and the engine
  check), and the files' sizes come from the manifests. So a probe's cold plan (`plan_cold_ms`) is its
  first plan in the measurement: cold for what no earlier probe of the measurement read (the first
  probe's is a plan from storage alone). On S3 (TPC-H scale 0.01, 332 files, 12 probes, engine check
  off) this took `lakesort measure` from 5,808 requests and 62 s to 1,966 and 33 s.

On a merge-on-read table a probe also costs the delete files a reader must open and merge for the data
files it selects (`delete_files_selected`, `delete_bytes_selected`: each delete file once, however many
selected files it applies to), next to the snapshot's (`delete_*_total`): a compaction that applies the
deletes brings them to 0. Rows, the ideals and DataFusion's check count the data files' rows as written:
the rows a reader reads before it drops the deleted ones.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from pyiceberg.catalog import Catalog

from layout import storage
from layout.catalog import load_catalog
from layout.io import resolve
from layout.metrics import store
from layout.metrics.clustered import clustered_read
from layout.metrics.clustering import ClusteringRecord, measure_clustering, record_clustering
from layout.metrics.engine import TOLERANCE, EngineCheck, check_probe, difference
from layout.metrics.ideal import IDEAL_ROW_GROUPS, OpenFiles, ideal
from layout.metrics.probes import Probe, ProbeKind, probes_for

# The run records (defined in layout.metrics.runs), also asked for here: one module for what a run records.
from layout.metrics.runs import RunRecord, read_runs, record_run
from layout.read.cache import MetadataCache
from layout.read.iceberg import snapshot_files
from layout.read.plan import plan
from layout.settings import settings
from layout.spec import TableSpec, resolve_sort_keys

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["IDEAL_ROW_GROUPS", "Measurement", "Phase", "Probe", "RunRecord", "SnapshotMeasurement", "measure",
           "measure_probe", "measure_snapshot", "probes_for", "read_metrics", "read_runs",
           "record_measurements", "record_run"]

log = logging.getLogger(__name__)

Phase = Literal["before", "after", "on-demand"]


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
    # Columns added later: None in rows recorded before they existed.
    # "exact", or "sampled k of n row groups (s.e. of efficiency e)"
    ideal_method: str | None = None
    pages_clustered: int | None = None  # the layout-independent ideal (`layout.metrics.clustered`)
    bytes_clustered: int | None = None
    efficiency_clustered: float | None = None
    engine_status: str | None = None  # DataFusion's check (`layout.metrics.engine`)
    engine_files: int | None = None
    engine_bytes: int | None = None
    engine_rows: int | None = None
    engine_rows_matching: int | None = None
    engine_model_bytes: int | None = None
    engine_model_rows: int | None = None
    engine_ms: float | None = None
    # Delete files a reader opens and merges for the files the plan selects, distinct, and their bytes; the
    # totals for the whole snapshot (`layout.read.plan`). 0 on a table without deletes.
    delete_files_total: int | None = None
    delete_files_selected: int | None = None
    delete_bytes_total: int | None = None
    delete_bytes_selected: int | None = None

    def to_row(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def wasted_in_pages(self) -> float:
        """The share of the selected bytes in selected pages that hold no matching row (1 - efficiency)."""
        return max(0.0, 1.0 - self.efficiency)

    @property
    def engine_checked(self) -> bool:
        return self.engine_status is not None and self.engine_status.startswith("checked")

    @property
    def engine_difference(self) -> float | None:
        """The larger relative difference, DataFusion's bytes and rows against lakesort's over the same
        files; None when DataFusion did not run."""
        if not self.engine_checked:
            return None
        found = [d for d in (difference(self.engine_bytes, self.engine_model_bytes),
                             difference(self.engine_rows, self.engine_model_rows)) if d is not None]
        return max(found, default=None)

    @property
    def engine_differs(self) -> bool:
        """DataFusion and lakesort's model differ by more than `layout.metrics.engine.TOLERANCE`."""
        found = self.engine_difference
        return found is not None and found > TOLERANCE


@dataclass(frozen=True, slots=True)
class SnapshotMeasurement:
    """Everything one measurement of a snapshot records: a row per probe, a row per sort key and partition."""

    snapshot_id: int | None
    probes: tuple[Measurement, ...]
    clustering: tuple[ClusteringRecord, ...]


def measure_probe(source: str, probe: Probe, *, snapshot_id: int | None = None, run_id: str,
                  phase: Phase, ideal_row_groups: int | None = IDEAL_ROW_GROUPS, engine: bool = False,
                  table: Any = None, measured_at: dt.datetime | None = None,
                  cache: MetadataCache | None = None, files: OpenFiles | None = None) -> Measurement:
    """Plan `probe` cold and warm on the snapshot, count the pages the matching rows need (exactly up to
    `ideal_row_groups` selected row groups, estimated from a sample of that many beyond; None: always
    exactly) and what a perfectly clustered table would read; with `engine`, run it with DataFusion too
    (`table`: the Iceberg table, whose schema tells renamed columns apart).

    `cache` and `files`: the measurement's metadata cache and opened files, shared by its probes (see
    `measure_snapshot`); by default this probe's own, so its first plan is cold."""

    cache = MetadataCache() if cache is None else cache
    files = OpenFiles(cache) if files is None else files
    cold = plan(source, probe.where, probe.columns, cache=cache, snapshot_id=snapshot_id)
    warm = plan(source, probe.where, probe.columns, cache=cache, snapshot_id=snapshot_id)
    best = ideal(warm, row_groups=ideal_row_groups, files=files)
    c = warm.counts
    check = (check_probe(warm, table=table, max_bytes=settings().engine_check_max_bytes, files=files)
             if engine else EngineCheck("off"))
    matching = best.rows
    if best.method != "exact" and check.status == "checked" and check.rows_matching is not None:
        # DataFusion filtered every selected row: an exact count where the sample only estimates (a point
        # lookup's sample often hits no match at all, which would make the clustered ideal 0).
        matching = check.rows_matching
    clustered = clustered_read(matching, c.rows_total, best.rates)
    return Measurement(
        run_id=run_id, phase=phase, table=source, snapshot_id=snapshot_id,
        measured_at=measured_at or dt.datetime.now(dt.UTC), probe=probe.name, probe_kind=probe.kind,
        predicate=probe.where, columns=",".join(probe.columns or ()), files_total=c.files_total,
        files_selected=c.files_selected, row_groups_total=c.row_groups_total,
        row_groups_selected=c.row_groups_selected, pages_total=c.pages_total, pages_selected=c.pages_selected,
        pages_ideal=best.pages, rows_total=c.rows_total, rows_selected=c.rows_selected,
        rows_matching=best.rows, bytes_total=c.bytes_total, bytes_selected=c.bytes_selected,
        bytes_ideal=best.bytes, efficiency=best.bytes / c.bytes_selected if c.bytes_selected else 1.0,
        plan_cold_ms=cold.plan_ms, plan_warm_ms=warm.plan_ms, ideal_method=best.method,
        pages_clustered=clustered.pages, bytes_clustered=clustered.bytes,
        efficiency_clustered=min(1.0, clustered.bytes / c.bytes_selected) if c.bytes_selected else 1.0,
        engine_status=check.status, engine_files=check.files, engine_bytes=check.bytes,
        engine_rows=check.rows, engine_rows_matching=check.rows_matching,
        engine_model_bytes=check.model_bytes, engine_model_rows=check.model_rows, engine_ms=check.ms,
        delete_files_total=c.delete_files_total, delete_files_selected=c.delete_files_selected,
        delete_bytes_total=c.delete_bytes_total, delete_bytes_selected=c.delete_bytes_selected,
    )


def measure_snapshot(
    table_id: str, *, spec: TableSpec, snapshot_id: int | None = None, run_id: str | None = None,
    phase: Phase = "on-demand", probes: Sequence[Probe] | None = None, record: bool = True,
    ideal_row_groups: int | None = IDEAL_ROW_GROUPS, engine: bool | None = None,
) -> SnapshotMeasurement:
    """Measure every probe of a table on a snapshot (default: the current one), and the clustering health of
    its sort keys; record the rows. `engine`: run the DataFusion check (default: $LAKESORT_ENGINE_CHECK).
    `spec` is the table's, as the caller resolved it (a compaction run carries it): never looked up here.

    An on-demand measurement's run id is `measure-<snapshot id>`: measuring a snapshot twice replaces
    its rows instead of adding more.
    """
    catalog = load_catalog(spec.catalog)
    table = catalog.load_table(spec.table)
    storage.configure(table.location(), table.io.properties)
    if snapshot_id is None:
        current = table.current_snapshot()
        if current is None:
            log.info("%s: no snapshot yet, nothing to measure", spec.table)
            return SnapshotMeasurement(None, (), ())
        snapshot_id = current.snapshot_id
    run_id = run_id or f"measure-{snapshot_id}"
    engine = settings().engine_check if engine is None else engine
    probes = list(probes) if probes is not None else probes_for(spec, table, snapshot_id)
    started = time.perf_counter()
    measured_at = dt.datetime.now(dt.UTC)
    # One metadata cache and one set of opened files for every probe of the measurement: each manifest,
    # footer and page index is read from storage once, not once per probe (on an object store each read is
    # a request). The files' sizes come from the manifests, so no file is asked for its size.
    cache = MetadataCache()
    sizes = {resolve(f.path)[1]: f.size for f in snapshot_files(table, None, cache, snapshot_id)}
    files = OpenFiles(cache, sizes)
    out = tuple(measure_probe(spec.table, p, snapshot_id=snapshot_id, run_id=run_id, phase=phase,
                              ideal_row_groups=ideal_row_groups, engine=engine, table=table, cache=cache,
                              files=files) for p in probes)
    for m in out:
        if m.delete_files_total:
            log.info("%s %s %s: %s of %s delete file(s) to merge (%s bytes)", spec.table, phase, m.probe,
                     m.delete_files_selected, m.delete_files_total, m.delete_bytes_selected)
        log.info("%s %s %s: %s of %s bytes selected, ideal %s in pages (%.2f, %s), %s clustered (%.2f), "
                 "DataFusion %s (%s), plan %.0f/%.0f ms", spec.table, phase, m.probe, m.bytes_selected,
                 m.bytes_total, m.bytes_ideal, m.efficiency, m.ideal_method, m.bytes_clustered,
                 m.efficiency_clustered, m.engine_bytes, m.engine_status, m.plan_cold_ms, m.plan_warm_ms)
    keys = [k.column for k in resolve_sort_keys(spec, table)]
    clustering = tuple(measure_clustering(table, keys, snapshot_id=snapshot_id, run_id=run_id, phase=phase,
                                          measured_at=measured_at))
    log.info(
        "%s: measured %d probes and the clustering of %d sort key(s) in %d partition(s) on snapshot %s in "
        "%.1fs",
        spec.table,
        len(out),
        len(keys),
        len({r.partition_path for r in clustering}),
        snapshot_id,
        time.perf_counter() - started,
    )
    if record:
        record_measurements(catalog, out)
        record_clustering(catalog, clustering)
    return SnapshotMeasurement(snapshot_id, out, clustering)


def measure(
    table_id: str, *, spec: TableSpec, snapshot_id: int | None = None, run_id: str | None = None,
    phase: Phase = "on-demand", probes: Sequence[Probe] | None = None, record: bool = True,
    ideal_row_groups: int | None = IDEAL_ROW_GROUPS, engine: bool | None = None,
) -> list[Measurement]:
    """`measure_snapshot`'s probe rows (the clustering rows are recorded all the same)."""
    return list(measure_snapshot(table_id, snapshot_id=snapshot_id, run_id=run_id, phase=phase, spec=spec,
                                 probes=probes, record=record, ideal_row_groups=ideal_row_groups,
                                 engine=engine).probes)


def record_measurements(catalog: Catalog, measurements: Sequence[Measurement]) -> int:
    return store.upsert(catalog, store.PRUNING_METRICS, store.METRICS_FIELDS, store.METRICS_KEY,
                        [m.to_row() for m in measurements])


def read_metrics(catalog: Catalog, table: str | None = None) -> pa.Table:
    return store.read(catalog, store.PRUNING_METRICS, store.METRICS_FIELDS, table)
