"""Where measurements live: Iceberg tables in the table's own catalog, readable by any engine.

`lakesort.pruning_metrics` holds one row per (run, table, probe, phase); `lakesort.clustering_metrics`
one per (run, table, phase, sort key, partition); `lakesort.compaction_runs` and
`lakesort.maintenance_runs` one row per (run, table). Appends are idempotent: a rerun for the same key
first deletes the rows it replaces, in the same transaction, so a retried Airflow task never duplicates
a measurement (clustering rows are replaced per (run, table, phase): a measurement's rows as a whole).

Schemas only grow or relax: a new column is appended to the fields below, nullable, and a required
column may become nullable. Writing to a table created before first updates its schema (an Iceberg
schema update: old data files read a new column as null); reading a table that lacks a column
(nothing written since) fills it with nulls, so old tables stay readable by the same code.

Schemas (all figures are counts or bytes as longs unless said):

pruning_metrics: run_id, phase (before | after | on-demand), table, snapshot_id, measured_at
(timestamptz), probe, probe_kind (owner | standard), predicate (SQL), columns (comma-separated, empty
= all), files_total, files_selected, row_groups_total (nullable), row_groups_selected, pages_total
(nullable), pages_selected, pages_ideal, rows_total, rows_selected, rows_matching, bytes_total,
bytes_selected, bytes_ideal, efficiency (double: bytes_ideal / bytes_selected, 1.0 perfect), plan_cold_ms,
plan_warm_ms (double), ideal_method (nullable: "exact" or "sampled k of n row groups (s.e. of
efficiency e)", see `layout.metrics.measure`; null in rows written before it existed). The two
nullable totals are null when planning did not open every file of the table (only footers count row
groups and pages; see `layout.read.plan`); they were required in tables written before. Added later
(nullable; null in rows written before them):
- the layout-independent ideal (`layout.metrics.clustered`): pages_clustered, bytes_clustered (what a
  reader would fetch from a table perfectly clustered for the probe: the matching rows packed into the
  fewest pages of the counted columns, at the table's measured bytes per row and rows per page of each
  column; the matching rows are rows_matching, or DataFusion's exact engine_rows_matching when
  rows_matching is a sample's estimate and the check read every selected file), efficiency_clustered
  (double: bytes_clustered / bytes_selected, at most 1.0). `efficiency`
  stays the page-level figure: 1 - efficiency is the share of the selected bytes wasted within selected
  pages (pages without a matching row).
- the engine check (`layout.metrics.engine`): engine_status ("checked", "checked k of n files", "off", or
  "not confirmed: <reason>"), engine_files (files DataFusion read), engine_bytes (its bytes_scanned),
  engine_rows (rows its scan kept after row-group and page pruning), engine_rows_matching (rows its
  filter passed), engine_model_bytes and engine_model_rows (lakesort's bytes and rows selected over the
  same files: bytes_selected and rows_selected when it read every selected file), engine_ms (double).
- the delete files of a merge-on-read table (`layout.read.plan`): delete_files_selected and
  delete_bytes_selected (the distinct position and equality delete files a reader opens and merges for the
  data files the probe selects, and their file sizes), delete_files_total and delete_bytes_total (for a
  scan of the whole snapshot); 0 for a table without deletes. Rows stay the data files' rows, deleted
  ones included.

clustering_metrics (`layout.metrics.clustering`): run_id, phase, table, snapshot_id, measured_at, sort_key,
partition_path ("" unpartitioned), files, files_unbounded (no bounds: overlap every file), constant_files
(one key value), average_overlaps, average_depth (doubles), max_depth, depth_histogram (JSON object:
depth bucket -> files, buckets 1..16 then powers of two), rows, bytes (of the partition's files). The
whole table's figures over partitions: average_depth and average_overlaps weighted by files, the largest
max_depth, the histograms summed.

compaction_runs: run_id, table, status (committed | nothing-to-do | failed | dry-run | deferred), trigger
(nightly | backfill | manual), started_at (timestamptz), duration_s (double), snapshot_before,
snapshot_after, partitions_rewritten, groups, files_before, files_after, files_removed, files_added,
bytes_before, bytes_after, bytes_rewritten, rows_rewritten, verification (passed | failed | skipped),
findings (JSON list of layout.verify.rules findings), error. Added later (nullable; null in rows written
before them): spec_hash (of the configuration the run carried), config_sources (JSON object: spec key ->
{kind, origin}, where each key a source set came from: `layout.registry.resolution`), reason (why a run
did not rewrite: a nightly's budget decision for a deferred run, `layout.compaction.planning.budget`).

maintenance_runs (`layout.metrics.maintenance`): run_id, table, status (done | dry-run | failed),
trigger (nightly | manual), started_at (timestamptz), duration_s (double), snapshot_id (the current
snapshot), max_age_s, orphan_grace_s (doubles), min_snapshots, snapshots_before, snapshots_expired,
snapshots_after, then files and bytes deleted per kind (`<kind>_files`, `<kind>_bytes` for metadata,
manifest_list, manifest, data, delete, statistics and orphan: a dry run's are what a real run would have
deleted), young_orphans, young_orphan_bytes (kept: younger than the grace period), files_before,
bytes_before, files_after, bytes_after (everything under the table location), live_bytes (the files the
current snapshot reads), error.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.expressions import AlwaysTrue, And, EqualTo, Or, Reference
from pyiceberg.expressions.literals import literal
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestamptzType

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

NAMESPACE = "lakesort"
PRUNING_METRICS = f"{NAMESPACE}.pruning_metrics"
COMPACTION_RUNS = f"{NAMESPACE}.compaction_runs"

_LONG, _DOUBLE, _STRING, _TS = "long", "double", "string", "timestamptz"

# (name, type, required): the order is the table's column order.
METRICS_FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("run_id", _STRING, True), ("phase", _STRING, True), ("table", _STRING, True),
    ("snapshot_id", _LONG, False), ("measured_at", _TS, True), ("probe", _STRING, True),
    ("probe_kind", _STRING, True), ("predicate", _STRING, True), ("columns", _STRING, True),
    ("files_total", _LONG, True), ("files_selected", _LONG, True),
    ("row_groups_total", _LONG, False), ("row_groups_selected", _LONG, True),  # totals: None, see above
    ("pages_total", _LONG, False), ("pages_selected", _LONG, True), ("pages_ideal", _LONG, True),
    ("rows_total", _LONG, True), ("rows_selected", _LONG, True), ("rows_matching", _LONG, True),
    ("bytes_total", _LONG, True), ("bytes_selected", _LONG, True), ("bytes_ideal", _LONG, True),
    ("efficiency", _DOUBLE, True), ("plan_cold_ms", _DOUBLE, True), ("plan_warm_ms", _DOUBLE, True),
    # Added later: nullable, appended (see the module docstring).
    ("ideal_method", _STRING, False),
    ("pages_clustered", _LONG, False), ("bytes_clustered", _LONG, False),
    ("efficiency_clustered", _DOUBLE, False),
    ("engine_status", _STRING, False), ("engine_files", _LONG, False), ("engine_bytes", _LONG, False),
    ("engine_rows", _LONG, False), ("engine_rows_matching", _LONG, False),
    ("engine_model_bytes", _LONG, False),
    ("engine_model_rows", _LONG, False), ("engine_ms", _DOUBLE, False),
    ("delete_files_total", _LONG, False), ("delete_files_selected", _LONG, False),
    ("delete_bytes_total", _LONG, False), ("delete_bytes_selected", _LONG, False),
)
METRICS_KEY = ("run_id", "table", "probe", "phase")

RUNS_FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("run_id", _STRING, True), ("table", _STRING, True), ("status", _STRING, True),
    ("trigger", _STRING, True), ("started_at", _TS, True), ("duration_s", _DOUBLE, True),
    ("snapshot_before", _LONG, False), ("snapshot_after", _LONG, False),
    ("partitions_rewritten", _LONG, True), ("groups", _LONG, True),
    ("files_before", _LONG, True), ("files_after", _LONG, True),
    ("files_removed", _LONG, True), ("files_added", _LONG, True),
    ("bytes_before", _LONG, True), ("bytes_after", _LONG, True),
    ("bytes_rewritten", _LONG, True), ("rows_rewritten", _LONG, True),
    ("verification", _STRING, True), ("findings", _STRING, True), ("error", _STRING, False),
    # Added later: nullable, appended (see the module docstring).
    ("spec_hash", _STRING, False), ("config_sources", _STRING, False), ("reason", _STRING, False),
    ("parts", _LONG, False), ("parts_committed", _LONG, False), ("commit_attempts", _LONG, False),
    ("delete_files_carried", _LONG, False),
)
RUNS_KEY = ("run_id", "table")

MAINTENANCE_RUNS = f"{NAMESPACE}.maintenance_runs"
MAINTENANCE_KINDS = ("metadata", "manifest_list", "manifest", "data", "delete", "statistics", "orphan")
MAINTENANCE_FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("run_id", _STRING, True), ("table", _STRING, True), ("status", _STRING, True),
    ("trigger", _STRING, True), ("started_at", _TS, True), ("duration_s", _DOUBLE, True),
    ("snapshot_id", _LONG, False), ("max_age_s", _DOUBLE, True), ("min_snapshots", _LONG, True),
    ("orphan_grace_s", _DOUBLE, True), ("snapshots_before", _LONG, True),
    ("snapshots_expired", _LONG, True), ("snapshots_after", _LONG, True),
    *((f"{kind}_{unit}", _LONG, True) for kind in MAINTENANCE_KINDS for unit in ("files", "bytes")),
    ("young_orphans", _LONG, True), ("young_orphan_bytes", _LONG, True),
    ("files_before", _LONG, True), ("bytes_before", _LONG, True),
    ("files_after", _LONG, True), ("bytes_after", _LONG, True), ("live_bytes", _LONG, True),
    ("error", _STRING, False),
)
MAINTENANCE_KEY = ("run_id", "table")

CLUSTERING_METRICS = f"{NAMESPACE}.clustering_metrics"
CLUSTERING_FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("run_id", _STRING, True), ("phase", _STRING, True), ("table", _STRING, True),
    ("snapshot_id", _LONG, False), ("measured_at", _TS, True), ("sort_key", _STRING, True),
    ("partition_path", _STRING, True), ("files", _LONG, True), ("files_unbounded", _LONG, True),
    ("constant_files", _LONG, True), ("average_overlaps", _DOUBLE, True), ("average_depth", _DOUBLE, True),
    ("max_depth", _LONG, True), ("depth_histogram", _STRING, True), ("rows", _LONG, True),
    ("bytes", _LONG, True),
)
# A measurement's rows are replaced as a whole: its partitions may differ from a previous attempt's.
CLUSTERING_KEY = ("run_id", "table", "phase")


def arrow_schema(fields: Sequence[tuple[str, str, bool]]) -> pa.Schema:
    types = {_LONG: pa.int64(), _DOUBLE: pa.float64(), _STRING: pa.string(),
             _TS: pa.timestamp("us", tz="UTC")}
    return pa.schema([pa.field(name, types[kind], nullable=not required) for name, kind, required in fields])


_ICEBERG_TYPES = {_LONG: LongType(), _DOUBLE: DoubleType(), _STRING: StringType(), _TS: TimestamptzType()}


def _iceberg_schema(fields: Sequence[tuple[str, str, bool]]) -> Any:
    return Schema(*(NestedField(i, name, _ICEBERG_TYPES[kind], required=required)
                    for i, (name, kind, required) in enumerate(fields, start=1)))


def _missing(table: Table, fields: Sequence[tuple[str, str, bool]]) -> list[tuple[str, str, bool]]:
    names = {f.name for f in table.schema().fields}
    return [f for f in fields if f[0] not in names]


def _relaxed(table: Table, fields: Sequence[tuple[str, str, bool]]) -> list[str]:
    """Columns `fields` makes nullable that `table` still requires."""
    required = {f.name for f in table.schema().fields if f.required}
    return [name for name, _, req in fields if not req and name in required]


def _evolve(catalog: Catalog, identifier: str, table: Table,
            fields: Sequence[tuple[str, str, bool]]) -> Table:
    """Bring a table created by an older lakesort to `fields`: append the nullable columns it lacks, make
    nullable the columns it requires and `fields` does not."""

    for _ in range(3):  # another task may evolve it at the same time: reload and look again
        missing, relaxed = _missing(table, fields), _relaxed(table, fields)
        if not missing and not relaxed:
            return table
        required = [name for name, _, req in missing if req]
        if required:  # a required column cannot be added to rows already written
            raise ValueError(f"{identifier} lacks the required column(s) {', '.join(required)}; new metrics "
                             "columns must be nullable")
        try:
            with table.update_schema() as update:
                for name, kind, _ in missing:
                    update.add_column(name, _ICEBERG_TYPES[kind])
                for name in relaxed:
                    update.make_column_optional(name)
            log.info("%s: added column(s) [%s], made nullable [%s]", identifier,
                     ", ".join(name for name, _, _ in missing), ", ".join(relaxed))
        except (CommitFailedException, ValueError) as error:  # ValueError: added by the other task meanwhile
            log.info("%s: schema update raced (%s); reloading", identifier, error)
        table = catalog.load_table(identifier)
    return table


def ensure_table(catalog: Catalog, identifier: str, fields: Sequence[tuple[str, str, bool]]) -> Table:
    """The metrics table, created (with its namespace) on first use, new nullable columns added."""

    try:
        return _evolve(catalog, identifier, catalog.load_table(identifier), fields)
    except NoSuchTableError:
        pass
    try:
        catalog.create_namespace(NAMESPACE)
    except NamespaceAlreadyExistsError:
        pass
    try:
        table = catalog.create_table(identifier, schema=_iceberg_schema(fields))
        log.info("created %s", identifier)
        return table
    except TableAlreadyExistsError:  # another task created it meanwhile
        return catalog.load_table(identifier)


def equal_to(column: str, value: Any) -> EqualTo:
    """`EqualTo(column, value)`, spelled by its fields: the pydantic plugin types pyiceberg's predicates by
    them, not by the (term, literal) of LiteralPredicate's own __init__ (which takes these keywords too)."""
    return EqualTo(term=Reference(column), value=literal(value))


def upsert(catalog: Catalog, identifier: str, fields: Sequence[tuple[str, str, bool]],
           key: Sequence[str], rows: Sequence[dict[str, Any]]) -> int:
    """Replace the rows with the same key values, then append, in one snapshot; returns rows written."""

    if not rows:
        return 0
    table = ensure_table(catalog, identifier, fields)
    data = pa.Table.from_pylist(list(rows), schema=arrow_schema(fields))
    conditions = []
    for row in {tuple(r[k] for k in key): r for r in rows}.values():
        leaves = [equal_to(k, row[k]) for k in key]
        conditions.append(leaves[0] if len(leaves) == 1 else And(*leaves))
    where = conditions[0] if len(conditions) == 1 else Or(*conditions)
    # `overwrite` deletes what matches `where` and appends, as one commit: a retry replaces, never doubles.
    with warnings.catch_warnings():  # "Delete operation did not match any records": the usual first write
        warnings.filterwarnings("ignore", "Delete operation did not match", UserWarning)
        table.overwrite(data, overwrite_filter=where)
    written: int = data.num_rows
    return written


def read(catalog: Catalog, identifier: str, fields: Sequence[tuple[str, str, bool]],
         table: str | None = None) -> pa.Table:
    """All rows (or one table's), empty with the schema when nothing was recorded yet."""

    try:
        t = catalog.load_table(identifier)
    except NoSuchTableError:
        return arrow_schema(fields).empty_table()
    where = equal_to("table", table) if table is not None else AlwaysTrue()
    data = t.scan(row_filter=where).to_arrow()
    expected = arrow_schema(fields)
    for name, _, _ in _missing(t, fields):  # a table from before a column was added: nulls
        data = data.append_column(expected.field(name), pa.nulls(data.num_rows, expected.field(name).type))
    return data
