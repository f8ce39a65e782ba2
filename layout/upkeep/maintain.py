"""Table maintenance as lakesort runs it (`lakesort expire`, the nightly DAG's `maintain` task): the spec's
retention, under the table's lease, recorded in `lakesort.maintenance_runs`.

What a run expires and deletes is `layout.maintenance`'s; this module adds what every lakesort run has:
the table is loaded first with the spec the caller resolved (a missing table fails before any work), the
table's lease is held throughout (a dry run takes none but refuses like a real run while another run holds
it), and the outcome, or the failure, is recorded for the report.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time

from layout.catalog import load_catalog, load_table
from layout.errors import UsageError
from layout.maintenance import MaintenanceResult, maintain
from layout.metrics.maintenance import MaintenanceRecord, MaintenanceTrigger, record_maintenance
from layout.spec import TableSpec
from layout.upkeep.lease import LeaseOwner, TableBusy, refuse_if_held, table_lease

__all__ = ["MaintenanceTrigger", "maintain_table", "record_of"]

log = logging.getLogger(__name__)

# What started a maintenance run: the nightly DAG, or someone (`lakesort expire`). Not a compaction's
# `layout.metrics.runs.Trigger`: there is no backfill of maintenance.


def maintain_table(table: str, *, owner: LeaseOwner, spec: TableSpec, dry_run: bool = False,
                   trigger: MaintenanceTrigger = "manual",
                   now: dt.datetime | None = None) -> MaintenanceResult:
    """Expire `table`'s snapshots by its `spec`'s retention (the caller resolved it: the command, or the DAG's
    first task) and delete what nothing retained references, under the table's lease taken as `owner`
    (TableBusy, nothing done, when another run holds it). The run id is the owner's: a retried DAG task
    replaces its row in lakesort.maintenance_runs."""
    if spec.table != table:
        raise UsageError(f"the spec {spec.source} is for table {spec.table}, not {table}")
    iceberg = load_table(spec.table, spec.catalog)  # InputError when the table does not exist
    if dry_run:
        refuse_if_held(table, owner, why="maintenance waits for it (a dry run too: "
                                         "its files would be counted)")
        lease: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    else:
        lease = table_lease(table, owner)
    started, clock = now or dt.datetime.now(dt.UTC), time.perf_counter()
    try:
        result = maintain(iceberg, spec.retention, lease=lease, run_id=owner.run_id, dry_run=dry_run, now=now)
    except TableBusy:
        raise  # nothing was done: nothing to record
    except Exception as exc:
        log.error("%s: maintenance failed: %s", table, exc)
        _record(spec, MaintenanceRecord(
            run_id=owner.run_id, table=table, status="failed", trigger=trigger, started_at=started,
            duration_s=time.perf_counter() - clock, max_age_s=spec.retention.max_age.total_seconds(),
            min_snapshots=spec.retention.min_snapshots,
            orphan_grace_s=spec.retention.orphan_grace.total_seconds(), error=str(exc)[:4000]))
        raise
    _record(spec, record_of(result, trigger))
    return result


def record_of(result: MaintenanceResult, trigger: MaintenanceTrigger) -> MaintenanceRecord:
    """The row of `lakesort.maintenance_runs` for `result`."""
    r = result.retention
    per_kind = {f"{d.kind.replace('-', '_')}_{unit}": getattr(d, unit)
                for d in result.deleted for unit in ("files", "bytes")}
    return MaintenanceRecord(
        run_id=result.run_id, table=result.table, status=result.status, trigger=trigger,
        started_at=result.started_at, duration_s=result.seconds, snapshot_id=result.snapshot_id,
        max_age_s=r.max_age.total_seconds(), min_snapshots=r.min_snapshots,
        orphan_grace_s=r.orphan_grace.total_seconds(), snapshots_before=result.snapshots_before,
        snapshots_expired=len(result.snapshots_expired), snapshots_after=result.snapshots_after,
        young_orphans=result.young_orphans, young_orphan_bytes=result.young_orphan_bytes,
        files_before=result.files_before, bytes_before=result.bytes_before, files_after=result.files_after,
        bytes_after=result.bytes_after, live_bytes=result.live_bytes, **per_kind)


def _record(spec: TableSpec, row: MaintenanceRecord) -> None:
    try:
        record_maintenance(load_catalog(spec.catalog), row)
    except Exception as exc:  # noqa: BLE001 - a metrics hiccup must never fail (or undo) maintenance
        log.warning("could not record maintenance run %s of %s in the metrics tables: %s", row.run_id,
                    row.table, exc)
