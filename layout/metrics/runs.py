"""Compaction runs as rows of `lakesort.compaction_runs` (schema in `layout.metrics.store`): what each run
rewrote, how long it took, its verification and findings, and the error of a failed one."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal

from layout.metrics import store

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

__all__ = ["RunRecord", "read_runs", "record_run"]


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


def read_runs(catalog: Catalog, table: str | None = None) -> pa.Table:
    return store.read(catalog, store.COMPACTION_RUNS, store.RUNS_FIELDS, table)
