"""The rows of `layout.metrics.store`'s two tables as typed values: what a report is made from.

    measurements, runs = read_rows(catalogs)                 # both tables from each catalog
    typed_rows(arrow_table, Measurement, "pruning metrics")  # or from a pyarrow table of the store's schema

Timestamps are in UTC. A table without a column the rows need is a UsageError naming the columns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from layout.errors import UsageError
from layout.metrics import store

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

__all__ = ["Measurement", "Run", "read_rows", "typed_rows", "utc"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """One row of `lakesort.pruning_metrics`: one probe planned on one snapshot (fields in column order)."""

    run_id: str
    phase: str  # before | after | on-demand
    table: str
    snapshot_id: int | None
    measured_at: datetime  # UTC
    probe: str
    probe_kind: str  # owner | standard
    predicate: str
    columns: str  # comma-separated; empty: all columns
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
    efficiency: float  # bytes_ideal / bytes_selected
    plan_cold_ms: float
    plan_warm_ms: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One row of `lakesort.compaction_runs` (fields in column order)."""

    run_id: str
    table: str
    status: str  # committed | nothing-to-do | failed | dry-run
    trigger: str
    started_at: datetime  # UTC
    duration_s: float | None
    snapshot_before: int | None
    snapshot_after: int | None
    partitions_rewritten: int
    groups: int
    files_before: int
    files_after: int
    files_removed: int
    files_added: int
    bytes_before: int
    bytes_after: int
    bytes_rewritten: int
    rows_rewritten: int
    verification: str  # passed | failed | skipped
    findings: str  # JSON list of layout.verify.rules findings
    error: str | None

    @property
    def ended_at(self) -> datetime:
        return self.started_at + timedelta(seconds=self.duration_s or 0.0)


_FIELDS = {Measurement: store.METRICS_FIELDS, Run: store.RUNS_FIELDS}
Row = TypeVar("Row", Measurement, Run)


def utc(value: Any) -> datetime | None:
    """`value` in UTC (naive datetimes are taken as UTC); None when it is not a datetime."""
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def typed_rows(table: pa.Table | None, kind: type[Row], what: str) -> list[Row]:
    """The rows of `table` as `kind`, timestamps in UTC; missing columns are a UsageError naming them."""
    if table is None:
        return []
    names = [field.name for field in dataclasses.fields(kind)]
    missing = [name for name in names if name not in table.column_names]
    if missing:
        raise UsageError(f"{what}: missing column(s) {', '.join(missing)}; expected the schema of "
                         "layout.metrics.store")
    stamps = [name for name, type_, _ in _FIELDS[kind] if type_ == "timestamptz"]
    rows = table.select(names).to_pylist()
    for row in rows:
        for name in stamps:
            row[name] = utc(row[name])
    return [kind(**row) for row in rows]


def read_rows(catalogs: Iterable[Catalog]) -> tuple[list[Measurement], list[Run]]:
    """Both metrics tables from each catalog (nothing from a catalog that recorded nothing yet)."""
    catalogs = list(catalogs)

    def read(identifier: str, kind: type[Row]) -> list[Row]:
        return [row for catalog in catalogs
                for row in typed_rows(store.read(catalog, identifier, _FIELDS[kind]), kind, identifier)]

    return read(store.PRUNING_METRICS, Measurement), read(store.COMPACTION_RUNS, Run)
