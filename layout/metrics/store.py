"""Where measurements live: two Iceberg tables in the table's own catalog, readable by any engine.

`lakesort.pruning_metrics` holds one row per (run, table, probe, phase); `lakesort.compaction_runs`
one row per (run, table). Appends are idempotent: a rerun for the same key first deletes the rows it
replaces, in the same transaction, so a retried Airflow task never duplicates a measurement.

Schemas (all figures are counts or bytes as longs unless said):

pruning_metrics: run_id, phase (before | after | on-demand), table, snapshot_id, measured_at
(timestamptz), probe, probe_kind (owner | standard), predicate (SQL), columns (comma-separated, empty
= all), files_total, files_selected, row_groups_total, row_groups_selected, pages_total,
pages_selected, pages_ideal, rows_total, rows_selected, rows_matching, bytes_total, bytes_selected,
bytes_ideal, efficiency (double: bytes_ideal / bytes_selected, 1.0 perfect), plan_cold_ms,
plan_warm_ms (double).

compaction_runs: run_id, table, status (committed | nothing-to-do | failed | dry-run), trigger
(nightly | backfill | manual), started_at (timestamptz), duration_s (double), snapshot_before,
snapshot_after, partitions_rewritten, groups, files_before, files_after, files_removed, files_added,
bytes_before, bytes_after, bytes_rewritten, rows_rewritten, verification (passed | failed | skipped),
findings (JSON list of layout.verify.rules findings), error.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.expressions import AlwaysTrue, And, EqualTo, Or
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
    ("row_groups_total", _LONG, True), ("row_groups_selected", _LONG, True),
    ("pages_total", _LONG, True), ("pages_selected", _LONG, True), ("pages_ideal", _LONG, True),
    ("rows_total", _LONG, True), ("rows_selected", _LONG, True), ("rows_matching", _LONG, True),
    ("bytes_total", _LONG, True), ("bytes_selected", _LONG, True), ("bytes_ideal", _LONG, True),
    ("efficiency", _DOUBLE, True), ("plan_cold_ms", _DOUBLE, True), ("plan_warm_ms", _DOUBLE, True),
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
)
RUNS_KEY = ("run_id", "table")


def arrow_schema(fields: Sequence[tuple[str, str, bool]]) -> pa.Schema:

    types = {_LONG: pa.int64(), _DOUBLE: pa.float64(), _STRING: pa.string(), _TS: pa.timestamp("us", tz="UTC")}
    return pa.schema([pa.field(name, types[kind], nullable=not required) for name, kind, required in fields])


def _iceberg_schema(fields: Sequence[tuple[str, str, bool]]) -> Any:

    types = {_LONG: LongType(), _DOUBLE: DoubleType(), _STRING: StringType(), _TS: TimestamptzType()}
    return Schema(*(NestedField(i, name, types[kind], required=required)
                    for i, (name, kind, required) in enumerate(fields, start=1)))


def ensure_table(catalog: Catalog, identifier: str, fields: Sequence[tuple[str, str, bool]]) -> Table:
    """The metrics table, created (with its namespace) on first use."""

    try:
        return catalog.load_table(identifier)
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


def upsert(catalog: Catalog, identifier: str, fields: Sequence[tuple[str, str, bool]],
           key: Sequence[str], rows: Sequence[dict[str, Any]]) -> int:
    """Replace the rows with the same key values, then append, in one snapshot; returns rows written."""

    if not rows:
        return 0
    table = ensure_table(catalog, identifier, fields)
    data = pa.Table.from_pylist(list(rows), schema=arrow_schema(fields))
    conditions = []
    for row in {tuple(r[k] for k in key): r for r in rows}.values():
        leaves = [EqualTo(k, row[k]) for k in key]
        conditions.append(leaves[0] if len(leaves) == 1 else And(*leaves))
    where = conditions[0] if len(conditions) == 1 else Or(*conditions)
    # `overwrite` deletes what matches `where` and appends, as one commit: a retry replaces, never doubles.
    with warnings.catch_warnings():  # "Delete operation did not match any records": the usual first write
        warnings.filterwarnings("ignore", "Delete operation did not match", UserWarning)
        table.overwrite(data, overwrite_filter=where)
    return data.num_rows


def read(catalog: Catalog, identifier: str, fields: Sequence[tuple[str, str, bool]],
         table: str | None = None) -> pa.Table:
    """All rows (or one table's), empty with the schema when nothing was recorded yet."""

    try:
        t = catalog.load_table(identifier)
    except NoSuchTableError:
        return arrow_schema(fields).empty_table()
    where = EqualTo("table", table) if table is not None else AlwaysTrue()
    return t.scan(row_filter=where).to_arrow()
