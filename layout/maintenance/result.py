"""What one maintenance run did: a frozen value (the CLI prints it, the DAG passes it as XCom, the metrics
store records it in `lakesort.maintenance_runs`)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from layout.durations import format_duration_short
from layout.maintenance.delete import DELETED_KINDS, DeletedKind
from layout.models import Frozen
from layout.sizes import format_size
from layout.spec import Retention

__all__ = ["Deleted", "MaintenanceResult"]


class Deleted(Frozen):
    """Files of one kind deleted (a dry run: that a real run would delete now) and their bytes."""

    kind: DeletedKind
    files: int = 0
    bytes: int = 0


class MaintenanceResult(Frozen):
    table: str
    run_id: str
    status: Literal["done", "dry-run"]
    started_at: dt.datetime
    seconds: float
    retention: Retention
    location: str  # the table location whose files were listed
    snapshot_id: int | None  # the current snapshot (expiry never changes it)
    snapshots_before: int
    snapshots_expired: tuple[int, ...]
    snapshots_after: int
    deleted: tuple[Deleted, ...]  # one per kind, in `delete.DELETED_KINDS` order
    kept_referenced: int  # files under the location the retained table references
    young_orphans: int  # unreferenced files no snapshot ever listed, younger than the grace period
    young_orphan_bytes: int
    kept_late: int  # would have gone, but a commit that landed meanwhile references them
    kept_aliased: int = 0  # would have gone, but a retained reference has the same file name (another path)
    files_before: int  # under the table location
    bytes_before: int
    files_after: int
    bytes_after: int
    live_bytes: int  # the data and delete files the current snapshot reads

    @property
    def dry_run(self) -> bool:
        return self.status == "dry-run"

    @property
    def files_deleted(self) -> int:
        return sum(d.files for d in self.deleted)

    @property
    def bytes_deleted(self) -> int:
        return sum(d.bytes for d in self.deleted)

    def of(self, kind: DeletedKind) -> Deleted:
        return next((d for d in self.deleted if d.kind == kind), Deleted(kind=kind))

    def summary(self) -> str:
        verb = ("would expire", "would delete") if self.dry_run else ("expired", "deleted")
        kinds = ", ".join(f"{d.files} {d.kind}" for d in self.deleted if d.files) or "nothing"
        r = self.retention
        return (f"{self.table}: {verb[0]} {len(self.snapshots_expired)} of {self.snapshots_before} "
                f"snapshot(s) (max_age {format_duration_short(r.max_age)}, min_snapshots {r.min_snapshots}); "
                f"{verb[1]} {self.files_deleted} file(s), {format_size(self.bytes_deleted)} ({kinds}); kept "
                f"{self.kept_referenced} referenced and {self.young_orphans} orphan(s) younger than "
                f"{format_duration_short(r.orphan_grace)}; under {self.location}: "
                f"{format_size(self.bytes_before)} -> {format_size(self.bytes_after)}, live data "
                f"{format_size(self.live_bytes)} ({self.seconds:.1f}s)")

    @staticmethod
    def tally(done: dict[DeletedKind, tuple[int, int]]) -> tuple[Deleted, ...]:
        return tuple(Deleted(kind=kind, files=done.get(kind, (0, 0))[0], bytes=done.get(kind, (0, 0))[1])
                     for kind in DELETED_KINDS)
