"""Compaction runs as rows of `lakesort.compaction_runs` (schema in `layout.metrics.store`): what each run
rewrote, how long it took, its verification and findings, and the error of a failed one.

The row is a `Frozen` model: its Literal fields are checked when a step records a run and when the report
reads the rows back. `Trigger`, `RunStatus` and `Verification` are defined here, once: the compaction's
steps, the DAGs' payloads and the report use these.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from layout.metrics import store
from layout.models import Frozen

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

__all__ = ["RunOutcome", "RunRecord", "RunStatus", "Trigger", "Verification", "read_runs", "record_run",
           "record_runs"]

# What started a compaction run: the nightly DAG, the backfill DAG, or someone (`lakesort compact`).
Trigger = Literal["nightly", "backfill", "manual"]
# deferred: planned, then left for a later night by the nightly's budget (`reason` says why).
RunStatus = Literal["committed", "nothing-to-do", "failed", "dry-run", "deferred"]
Verification = Literal["passed", "failed", "skipped"]


class RunRecord(Frozen):
    """One compaction run: the row of `lakesort.compaction_runs` (fields in the store's column order)."""

    run_id: str
    table: str
    status: RunStatus
    trigger: Trigger
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
    verification: Verification = "skipped"
    findings: str = "[]"  # JSON list of layout.verify findings
    error: str | None = None
    # The configuration the run carried: its hash, and where each key a source set came from (JSON object:
    # key -> {"kind", "origin"}, `layout.registry.resolution.KeySource`); None: not known (older rows, a spec
    # given in code).
    spec_hash: str | None = None
    config_sources: str | None = None
    reason: str | None = None  # why the run did not rewrite (a deferred run: the budget's decision)
    # The commit's parts, attempts and carried deletes (`RunOutcome`); None: no commit tried, or an older row.
    parts: int | None = None
    parts_committed: int | None = None
    commit_attempts: int | None = None
    delete_files_carried: int | None = None

    @property
    def ended_at(self) -> dt.datetime:
        return self.started_at + dt.timedelta(seconds=self.duration_s or 0.0)


class RunOutcome(Frozen):
    """How a run ended, as the step that ends it knows it: the fields of its `RunRecord` that are not the
    run's own (`layout.compaction.pipeline.steps.record` adds those: id, table, trigger, times, the table
    before)."""

    status: RunStatus
    snapshot_after: int | None = None
    files_after: int | None = None  # None: the table as it was before the run
    bytes_after: int | None = None
    files_removed: int = 0
    files_added: int = 0
    bytes_rewritten: int = 0
    rows_rewritten: int = 0
    verification: Verification = "skipped"
    findings: str = "[]"
    error: str | None = None
    reason: str | None = None
    # The commit (`layout.compaction.pipeline.commit`): parts planned and committed (a failed run may have
    # committed some), attempts over all parts, position deletes committed during the job carried onto the
    # new files. None: no commit was tried.
    parts: int | None = None
    parts_committed: int | None = None
    commit_attempts: int | None = None
    delete_files_carried: int | None = None


def record_run(catalog: Catalog, run: RunRecord) -> None:
    record_runs(catalog, [run])


def record_runs(catalog: Catalog, runs: Sequence[RunRecord]) -> None:
    """Several runs' rows in one snapshot (a nightly's deferred runs)."""
    store.upsert(catalog, store.COMPACTION_RUNS, store.RUNS_FIELDS, store.RUNS_KEY,
                 [r.model_dump() for r in runs])


def read_runs(catalog: Catalog, table: str | None = None) -> pa.Table:
    return store.read(catalog, store.COMPACTION_RUNS, store.RUNS_FIELDS, table)
