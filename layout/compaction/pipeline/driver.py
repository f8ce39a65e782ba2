"""`lakesort compact`: plan the rewrite, run the Spark job, verify, commit; the whole run in one process.

The steps are `layout.compaction.pipeline.steps`' (the DAGs run the same steps as separate tasks), prepared by
the DAGs' own prepare step (`runs.prepare_table`), for `lakesort compact` and `--dry-run` alike; the Spark
job is submitted as `layout.compaction.pipeline.submit` describes. The whole run holds the table's lease.

With the `lineage` extra and an OpenLineage transport configured, a run with Spark work emits START before
Spark, COMPLETE once the commit is in (rows and bytes read and written), FAIL with the error
(`layout.lineage`); a dry run or a run with nothing to do emits nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layout.catalog import load_table
from layout.compaction.pipeline import steps
from layout.compaction.pipeline.commit import CommitAttempt
from layout.compaction.pipeline.config import RunConfig
from layout.compaction.pipeline.runs import PlannedTable, TableRequest, prepare_table
from layout.compaction.pipeline.submit import submit, with_lineage_parent
from layout.compaction.plan import RewritePlan
from layout.compaction.planning.dates import DateRange
from layout.errors import LakesortError
from layout.lineage import Counts, RunLineage
from layout.manifest import StagedManifest
from layout.metrics.runs import Trigger
from layout.settings import settings
from layout.spec import TableSpec
from layout.upkeep.lease import LeaseOwner, mark_committing, release_lease
from layout.verify import expectations

__all__ = ["CompactResult", "FailedAfterCommit", "compact"]

# `verify(manifest)` replaces the layout rules and GX (tests); it may raise to refuse the commit.
Verifier = Callable[[StagedManifest], Any]


class FailedAfterCommit(LakesortError):
    """The rewrite was committed, then a later step (measuring) failed: exit 1, never 2, whatever the cause,
    because the table did change. The message says what was committed and what failed."""


@dataclass(frozen=True, slots=True)
class CompactResult:
    """What `compact` did: the prepare step's result (status, summary, a dry run's plan) and, of a run that
    committed, the figures."""

    planned: PlannedTable
    plan: RewritePlan | None  # None: a date range that covers no partition (nothing was planned)
    snapshot_id: int | None = None
    files_before: int = 0
    files_after: int = 0
    files_removed: int = 0
    files_added: int = 0
    rows: int = 0
    seconds: float = 0.0
    delete_files_removed: int = 0  # merge-on-read: delete files that applied to the rewritten files alone
    delete_files_carried: int = 0  # position deletes committed during the job, carried onto the new files
    attempts: tuple[CommitAttempt, ...] = ()  # the commit's attempts, every part's
    parts: int = 1  # the commit's parts: planned, and committed (the same when it went through)
    parts_committed: int = 1

    @property
    def nothing_to_do(self) -> bool:
        return self.planned.status == "nothing-to-do"

    @property
    def dry_run(self) -> bool:
        return self.planned.status == "dry-run"


def compact(
    table_id: str, *, spec: TableSpec | None = None, partitions: Sequence[str] | None = None,
    dates: DateRange | None = None, force: bool = False, dry_run: bool = False, master: str | None = None,
    spark_conf: Mapping[str, str] | None = None, work_dir: Path | None = None, verify: Verifier | None = None,
    measure: bool = False, trigger: Trigger = "manual", config: RunConfig | None = None,
) -> CompactResult:
    """Plan, rewrite on Spark, verify and commit one table (`layout.compaction.pipeline.steps`'s steps in one
    process); with `measure`, also measure the probes before and after. Nothing to do finishes fast and says
    so; `dry_run` plans only, as the DAGs' dry run does (recorded, no lease, no Spark).

    `spec` is the table's (None: the registry's, looked up once here, at the start); the run carries it.
    `config` instead of `spec`: the registry's resolution as the caller made it, with each key's source (what
    `lakesort compact` passes, so that its run's record says where each setting came from).
    The plan is made by `runs.prepare_table`, the DAGs' prepare step, which also maps `dates` to partitions.
    `verify(manifest)` replaces the layout rules and GX (tests); it may raise to refuse the commit.
    The whole run holds the table's lease (`layout.upkeep.lease`),
    the one the DAGs and `lakesort cleanup` take:
    another run on the table makes it fail with `TableBusy` before any work.
    """
    started = time.perf_counter()
    if config is not None and spec is not None:
        raise LakesortError(f"{table_id}: give the run a spec or a resolved configuration, not both")
    if config is None and spec is not None:
        config = RunConfig.of(spec)
    request = TableRequest(table=config.spec.table if config is not None else table_id, trigger=trigger,
                           config=config,
                           partitions=tuple(partitions) if partitions is not None else None, dates=dates,
                           force=force, dry_run=dry_run)
    owner = LeaseOwner.cli()
    planned = prepare_table(request, owner=owner, work_dir=work_dir)  # takes the lease unless a dry run
    if planned.status != "planned":  # a dry run or nothing to do: recorded, lease released
        prepared = planned.prepared() if planned.work_dir is not None else None
        before = prepared.files_before if prepared is not None else 0
        return CompactResult(planned, prepared.plan() if prepared is not None else None, None, before, before,
                             seconds=time.perf_counter() - started)
    try:
        return _compact(planned, master=master, spark_conf=spark_conf, verify=verify, measure=measure,
                        started=started)
    finally:
        release_lease(planned.table, owner)


def _compact(planned: PlannedTable, *, master: str | None, spark_conf: Mapping[str, str] | None,
             verify: Verifier | None, measure: bool, started: float) -> CompactResult:
    prepared = planned.prepared()
    table = prepared.table
    plan = prepared.plan()
    master = master or settings().spark_master
    if verify is None:  # GX takes seconds to import: meanwhile this process only waits for spark-submit
        threading.Thread(target=expectations.preload, name="preload-gx", daemon=True).start()
    lineage = RunLineage(table=table, catalog=prepared.catalog, run_id=prepared.run_id)
    read = Counts(rows=plan.input_rows, bytes=prepared.input_bytes,
                  files=sum(len(g.inputs) for g in plan.groups))
    lineage.start(read=read)
    spark_conf = with_lineage_parent(spark_conf, lineage.parent)  # with openlineage-spark: the job's parent
    try:
        try:
            for job in prepared.jobs:
                submit(Path(prepared.plan_path), Path(job.manifest_path), master=master,
                       name=f"lakesort-compact-{table}", conf=spark_conf, work_dir=Path(prepared.work_dir),
                       groups=job.group_ids)
        except BaseException as exc:
            steps.abandon(prepared, f"spark: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            raise
        steps.verify(prepared, verifier=verify)
        # Killed from here on, the command's lease outlives it a while:
        # the catalog may still complete the commit.
        mark_committing(table, planned.owner)
        result = steps.commit(prepared)
    except BaseException as exc:
        lineage.fail(exc)
        raise
    after = load_table(table, prepared.catalog)
    files_after, _ = steps.live_totals(after)
    lineage.complete(read=read.model_copy(update={"bytes": result.bytes_removed or read.bytes}),
                     written=Counts(rows=result.rows, bytes=result.bytes_added, files=result.files_added),
                     schema=after.schema())
    if measure:
        try:
            steps.measure(prepared, result.snapshot_id)
        except Exception as exc:
            raise FailedAfterCommit(
                f"{table}: committed snapshot {result.snapshot_id} ({result.files_removed} files -> "
                f"{result.files_added} files, {result.rows} rows); then measuring failed: {exc}. The table "
                f"is compacted; measure it again with `lakesort measure {table}`") from exc
    return CompactResult(planned, plan, result.snapshot_id, prepared.files_before, files_after,
                         result.files_removed, result.files_added, result.rows, time.perf_counter() - started,
                         result.delete_files_removed, result.delete_files_carried, result.attempts,
                         result.parts, result.parts_committed)
