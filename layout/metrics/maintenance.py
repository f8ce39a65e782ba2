"""Maintenance runs as rows of `lakesort.maintenance_runs` (schema in `layout.metrics.store`): what each
run expired and deleted, and the storage under the table location before and after (live vs total)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from layout.metrics import store

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

__all__ = ["MaintenanceRecord", "MaintenanceTrigger", "read_maintenance", "record_maintenance"]


# What started a maintenance run: the nightly DAG or a person (`lakesort expire`); a backfill never maintains.
MaintenanceTrigger = Literal["nightly", "manual"]

@dataclass(frozen=True, slots=True)
class MaintenanceRecord:
    """One maintenance run of one table: the row of `lakesort.maintenance_runs`."""

    run_id: str
    table: str
    status: Literal["done", "dry-run", "failed"]
    trigger: MaintenanceTrigger
    started_at: dt.datetime
    duration_s: float | None  # None: read back from a row without one
    snapshot_id: int | None = None
    max_age_s: float = 0.0
    min_snapshots: int = 0
    orphan_grace_s: float = 0.0
    snapshots_before: int = 0
    snapshots_expired: int = 0
    snapshots_after: int = 0
    metadata_files: int = 0
    metadata_bytes: int = 0
    manifest_list_files: int = 0
    manifest_list_bytes: int = 0
    manifest_files: int = 0
    manifest_bytes: int = 0
    data_files: int = 0
    data_bytes: int = 0
    delete_files: int = 0
    delete_bytes: int = 0
    statistics_files: int = 0
    statistics_bytes: int = 0
    orphan_files: int = 0
    orphan_bytes: int = 0
    young_orphans: int = 0
    young_orphan_bytes: int = 0
    files_before: int = 0
    bytes_before: int = 0
    files_after: int = 0
    bytes_after: int = 0
    live_bytes: int = 0
    error: str | None = None

    @property
    def ended_at(self) -> dt.datetime:
        return self.started_at + dt.timedelta(seconds=self.duration_s or 0.0)

    @property
    def files_deleted(self) -> int:
        return sum(getattr(self, f"{kind}_files") for kind in store.MAINTENANCE_KINDS)

    @property
    def bytes_deleted(self) -> int:
        return sum(getattr(self, f"{kind}_bytes") for kind in store.MAINTENANCE_KINDS)


def record_maintenance(catalog: Catalog, run: MaintenanceRecord) -> None:
    store.upsert(catalog, store.MAINTENANCE_RUNS, store.MAINTENANCE_FIELDS, store.MAINTENANCE_KEY,
                 [dataclasses.asdict(run)])


def read_maintenance(catalog: Catalog, table: str | None = None) -> pa.Table:
    return store.read(catalog, store.MAINTENANCE_RUNS, store.MAINTENANCE_FIELDS, table)
