"""`lakesort compact`: plan the rewrite, run the Spark job, verify, commit; the whole run in one process.

The steps are `layout.compaction.pipeline.steps`' (the DAGs run the same steps as separate tasks); the Spark job
is submitted as `layout.compaction.pipeline.submit` describes. The whole run holds the table's lease.
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
from layout.compaction.pipeline.steps import Trigger
from layout.compaction.pipeline.submit import submit
from layout.compaction.plan import RewritePlan
from layout.errors import LakesortError
from layout.manifest import StagedManifest
from layout.registry import find_spec
from layout.settings import settings
from layout.spec import TableSpec
from layout.upkeep.lease import LeaseOwner, table_lease
from layout.verify import expectations

__all__ = ["CompactResult", "FailedAfterCommit", "compact"]

# `verify(manifest)` replaces the layout rules and GX (tests); it may raise to refuse the commit.
Verifier = Callable[[StagedManifest], Any]


class FailedAfterCommit(LakesortError):
    """The rewrite was committed, then a later step (measuring) failed: exit 1, never 2, whatever the cause,
    because the table did change. The message says what was committed and what failed."""


@dataclass(frozen=True, slots=True)
class CompactResult:
    plan: RewritePlan
    snapshot_id: int | None
    files_before: int
    files_after: int
    files_removed: int
    files_added: int
    rows: int
    seconds: float

    @property
    def nothing_to_do(self) -> bool:
        return not self.plan.groups


def compact(
    table_id: str, *, spec: TableSpec | None = None, partitions: Sequence[str] | None = None,
    force: bool = False, master: str | None = None, spark_conf: Mapping[str, str] | None = None,
    work_dir: Path | None = None, verify: Verifier | None = None, measure: bool = False,
    trigger: Trigger = "manual",
) -> CompactResult:
    """Plan, rewrite on Spark, verify and commit one table (`layout.compaction.pipeline.steps`'s steps in one process);
    with `measure`, also measure the probes before and after. Nothing to do finishes fast and says so.

    `verify(manifest)` replaces the layout rules and GX (tests); it may raise to refuse the commit.
    The whole run holds the table's lease (`layout.upkeep.lease`), the one the DAGs and `lakesort cleanup` take:
    another run on the table makes it fail with `TableBusy` before any work.
    """
    spec = spec or find_spec(table_id)
    with table_lease(spec.table, LeaseOwner.cli()):
        return _compact(spec, partitions=partitions, force=force, master=master, spark_conf=spark_conf,
                        work_dir=work_dir, verify=verify, measure=measure, trigger=trigger)


def _compact(spec: TableSpec, *, partitions: Sequence[str] | None, force: bool, master: str | None,
             spark_conf: Mapping[str, str] | None, work_dir: Path | None, verify: Verifier | None,
             measure: bool, trigger: Trigger) -> CompactResult:
    started = time.perf_counter()
    prepared = steps.prepare(spec.table, spec=spec, partitions=partitions, force=force, trigger=trigger,
                             work_dir=work_dir)
    plan = prepared.plan()
    if prepared.nothing_to_do:
        steps.record(prepared, "nothing-to-do")
        return CompactResult(plan, None, prepared.files_before, prepared.files_before, 0, 0, 0,
                             time.perf_counter() - started)
    master = master or settings().spark_master
    if verify is None:  # GX takes seconds to import: meanwhile this process only waits for spark-submit
        threading.Thread(target=expectations.preload, name="preload-gx", daemon=True).start()
    try:
        for job in prepared.jobs:
            submit(Path(prepared.plan_path), Path(job.manifest_path), master=master,
                   name=f"lakesort-compact-{spec.table}", conf=spark_conf, work_dir=Path(prepared.work_dir),
                   groups=job.group_ids)
    except BaseException as exc:
        steps.abandon(prepared, f"spark: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        raise
    steps.verify(prepared, spec=spec, verifier=verify)
    result = steps.commit(prepared)
    if measure:
        try:
            steps.measure(prepared, result.snapshot_id, spec=spec)
        except Exception as exc:
            raise FailedAfterCommit(
                f"{spec.table}: committed snapshot {result.snapshot_id} ({result.files_removed} files -> "
                f"{result.files_added} files, {result.rows} rows); then measuring failed: {exc}. The table is "
                f"compacted; measure it again with `lakesort measure {spec.table}`") from exc
    files_after, _ = steps.live_totals(load_table(spec.table, spec.catalog))
    return CompactResult(plan, result.snapshot_id, prepared.files_before, files_after, result.files_removed,
                         result.files_added, result.rows, time.perf_counter() - started)
