"""The rows of `layout.metrics.store`'s tables as typed values: what a report is made from.

    measurements, runs = read_rows(catalogs)                 # both run tables from each catalog
    maintenance = read_maintenance_rows(catalogs)            # lakesort.maintenance_runs from each catalog
    clustering = read_clustering_rows(catalogs)              # lakesort.clustering_metrics from each catalog
    typed_rows(arrow_table, Measurement, "pruning metrics")  # or from a pyarrow table of the store's schema

Timestamps are in UTC. A table without a column the rows need is a UsageError naming the columns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from layout.errors import UsageError
from layout.metrics import store

# The rows are the values the metrics module records: one definition of each table's columns.
from layout.metrics.clustering import ClusteringRecord as ClusteringRow
from layout.metrics.maintenance import MaintenanceRecord as MaintenanceRun
from layout.metrics.measure import Measurement
from layout.metrics.runs import RunRecord as Run

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

__all__ = ["ClusteringRow", "MaintenanceRun", "Measurement", "Run", "read_clustering_rows",
           "read_maintenance_rows", "read_rows", "typed_rows", "utc"]


_FIELDS = {Measurement: store.METRICS_FIELDS, Run: store.RUNS_FIELDS,
           MaintenanceRun: store.MAINTENANCE_FIELDS, ClusteringRow: store.CLUSTERING_FIELDS}
Row = TypeVar("Row", Measurement, Run, MaintenanceRun, ClusteringRow)


def utc(value: Any) -> datetime | None:
    """`value` in UTC (naive datetimes are taken as UTC); None when it is not a datetime."""
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def typed_rows(table: pa.Table | None, kind: type[Row], what: str) -> list[Row]:
    """The rows of `table` as `kind`, timestamps in UTC; missing columns are a UsageError naming them."""
    if table is None:
        return []
    names = _names(kind)
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


def _names(kind: type[Row]) -> list[str]:
    """The columns a row kind holds: a run record is a pydantic model, the other rows are dataclasses."""
    fields = getattr(kind, "model_fields", None)
    if fields is not None:
        return list(fields)
    return [field.name for field in dataclasses.fields(kind)]  # type: ignore[arg-type]  # a dataclass here


def read_rows(catalogs: Iterable[Catalog]) -> tuple[list[Measurement], list[Run]]:
    """Both metrics tables from each catalog (nothing from a catalog that recorded nothing yet)."""
    catalogs = list(catalogs)

    def read(identifier: str, kind: type[Row]) -> list[Row]:
        return [row for catalog in catalogs
                for row in typed_rows(store.read(catalog, identifier, _FIELDS[kind]), kind, identifier)]

    return read(store.PRUNING_METRICS, Measurement), read(store.COMPACTION_RUNS, Run)


def read_maintenance_rows(catalogs: Iterable[Catalog]) -> list[MaintenanceRun]:
    """`lakesort.maintenance_runs` from each catalog (nothing from a catalog that recorded none yet)."""
    return [row for catalog in catalogs for row in typed_rows(
        store.read(catalog, store.MAINTENANCE_RUNS, store.MAINTENANCE_FIELDS), MaintenanceRun,
        store.MAINTENANCE_RUNS)]


def read_clustering_rows(catalogs: Iterable[Catalog]) -> list[ClusteringRow]:
    """`lakesort.clustering_metrics` from each catalog (nothing from a catalog that recorded none yet)."""
    return [row for catalog in catalogs for row in typed_rows(
        store.read(catalog, store.CLUSTERING_METRICS, store.CLUSTERING_FIELDS), ClusteringRow,
        store.CLUSTERING_METRICS)]
