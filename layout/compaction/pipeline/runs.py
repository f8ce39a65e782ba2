"""One table's compaction as a sequence of separate tasks (the Airflow DAGs), each step a function of the
value the step before returned.

    TableRequest --prepare_table--> PlannedTable --(Spark)--> verify_table --> VerifiedRun
                 --commit_table--> CommittedRun --measure_table--> MeasuredRun
    TableRequest --maintain_table--> MaintenanceResult   (nightly, after every table's compaction)

The values are `Frozen` models because they travel between processes and hosts as XCom: a task returns
`model.model_dump(mode="json")` and the next reads it with `Model.model_validate(payload)`, so a payload
of another version or a typo fails where it is read, naming the field. Each carries what the later
steps need (the run's work directory, the lease owner); the run itself is the `PreparedRun` saved there.

The table's spec is resolved once, by the DAG's first task (`nightly_requests`, `backfill_request`), and
travels in the `TableRequest` (`config.RunConfig`) to `prepare_table`, which puts it in the `PreparedRun`,
and to `maintain_table`: no later task looks the table up in the registry again.

The table lease (`layout.upkeep.lease`) spans the steps: `prepare_table` takes it (unless dry run)
and every step releases it when it fails or, the last one, when it is done, so a failed task never
leaves a table locked; whatever still slips through, the DAG run's last task sweeps
(`dag_run.close`). `lakesort compact` runs the same steps in one process (`driver.compact`).

How a task ends on a step's error is decided here too (`verdict`: fail at once, skip, or retry), and a
commit's OpenLineage datasets (`lineage`); the DAGs only raise Airflow's exceptions and wrap the datasets.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from pydantic import model_validator

from layout.compaction.pipeline import steps
from layout.compaction.pipeline.config import RunConfig, SpecChanged
from layout.compaction.pipeline.spark_home import SparkUnsupported, check_supported
from layout.compaction.pipeline.steps import MeasureOutcome, PreparedRun, SparkJob
from layout.compaction.pipeline.submit import operator_kwargs
from layout.compaction.plan import PartitionDecision
from layout.compaction.planning.dates import DateRange, date_range, partitions_for_dates
from layout.errors import LakesortError
from layout.lineage import Counts, datasets
from layout.maintenance import MaintenanceResult
from layout.metrics.measure import measure as measure_snapshot
from layout.metrics.runs import RunOutcome, Trigger
from layout.models import Frozen
from layout.registry import find_resolution, find_spec, nightly_resolutions
from layout.upkeep.lease import LeaseOwner, TableBusy, acquire_lease, release_lease
from layout.upkeep.maintain import maintain_table as _maintain

__all__ = ["CommittedRun", "MeasuredRun", "PlanView", "PlannedTable", "SparkJobsFailed", "SpecChanged",
           "TableMeasurement", "TableRequest", "VerifiedRun", "asset_uri", "backfill_request", "commit_table",
           "lineage", "maintain_table", "measure_current", "measure_table", "nightly_requests",
           "prepare_table", "spark_jobs", "to_compact", "verdict", "verify_table"]

log = logging.getLogger(__name__)

Status = Literal["planned", "dry-run", "nothing-to-do"]
Step = Literal["prepare", "verify", "commit", "maintain"]  # the DAG tasks whose errors `verdict` judges
Verdict = Literal["fail", "skip"]


class SparkJobsFailed(LakesortError):
    """Spark jobs of a run failed (after their retries): the run was abandoned, the table is unchanged."""


class TableRequest(Frozen):
    """What to do to one table: every changed partition, or the `partitions`, or those of `dates`; with the
    table's spec as the run's start resolved it (None: `prepare_table` looks it up)."""

    table: str
    trigger: Trigger
    config: RunConfig | None = None
    partitions: tuple[str, ...] | None = None
    dates: DateRange | None = None
    force: bool = False
    dry_run: bool = False

    @model_validator(mode="after")
    def _one_selection(self) -> TableRequest:
        if self.partitions and self.dates:
            raise ValueError(f"{self.table}: give either partitions or a date range ({self.dates}), not both")
        if self.config is not None and self.config.spec.table != self.table:
            raise ValueError(f"the spec {self.config.source} is for table "
                             f"{self.config.spec.table}, not {self.table}")
        return self

    def describe(self) -> str:
        what = (f"partitions {', '.join(self.partitions)}" if self.partitions else
                f"the partitions of {self.dates}" if self.dates else "every partition")
        return f"{self.table}: {what}{', forced' if self.force else ''}{', dry run' if self.dry_run else ''}"


class GroupView(Frozen):
    group_id: int
    partition: str
    input_files: int
    bytes: int
    rows: int
    output_files: int


class PlanView(Frozen):
    """The plan as a dry run shows it (task log and XCom): the decision per partition and the groups."""

    table: str
    run_id: str
    summary: str
    plan_path: str
    forced: bool
    input_bytes: int
    partitions: tuple[PartitionDecision, ...]
    groups: tuple[GroupView, ...]
    spark_jobs: tuple[SparkJob, ...]

    @classmethod
    def of(cls, prepared: PreparedRun) -> PlanView:
        plan = prepared.plan()
        return cls(table=prepared.table, run_id=prepared.run_id, summary=prepared.summary(),
                   plan_path=prepared.plan_path, forced=plan.forced, input_bytes=plan.input_bytes,
                   partitions=plan.partitions, spark_jobs=prepared.jobs,
                   groups=tuple(GroupView(group_id=g.group_id, partition=g.partition,
                                          input_files=len(g.inputs), bytes=g.bytes, rows=g.rows,
                                          output_files=g.output_files)
                                for g in plan.groups))


class PlannedTable(Frozen):
    """`prepare_table`'s result. Only status "planned" goes on (Spark, then verify); the others are done."""

    table: str
    owner: LeaseOwner
    status: Status
    run_id: str | None = None  # None: a date range that covers no partition (nothing was planned)
    work_dir: str | None = None
    summary: str
    partitions: tuple[str, ...] = ()
    jobs: tuple[SparkJob, ...] = ()
    plan: PlanView | None = None  # dry runs only

    def prepared(self) -> PreparedRun:
        if self.work_dir is None:
            raise LakesortError(f"{self.table}: {self.status}, no run was prepared; nothing to load")
        return PreparedRun.load(self.work_dir)


class VerifiedRun(Frozen):
    table: str
    owner: LeaseOwner
    run_id: str
    work_dir: str
    verification: Literal["passed"]
    warnings: int


class CommittedRun(Frozen):
    """A committed run; also the "table compacted" asset event (`asset_uri`, `event_extra`)."""

    table: str
    owner: LeaseOwner
    catalog: str | None
    run_id: str
    work_dir: str
    trigger: Trigger
    snapshot_id: int
    partitions: tuple[str, ...]
    files_removed: int
    files_added: int
    rows: int
    bytes_removed: int = 0  # the input files' bytes (0: a payload from before these were carried)
    bytes_added: int = 0  # the bytes written (the lineage's output statistics)
    # The rows the input files held as planned, before a merge-on-read's deletes or a merge rule dropped any
    # (the lineage's input statistics, as `lakesort compact` reports them); None:
    # a payload from before this was carried.
    rows_read: int | None = None

    def asset_uri(self) -> str:
        return asset_uri(self.table, catalog=self.catalog)

    def event_extra(self) -> dict[str, Any]:
        return self.model_dump(mode="json", include={"table", "run_id", "trigger", "snapshot_id",
                                                     "partitions", "files_removed", "files_added", "rows"})

    def lineage(self) -> tuple[list[Any], list[Any]]:
        """The table as OpenLineage's input and output datasets (`layout.lineage.datasets`, needs the
        `lineage` extra): read, the rows as planned (a payload without them: the rows written), bytes and
        files removed; written, the rows, bytes and files added."""
        read = Counts(rows=self.rows if self.rows_read is None else self.rows_read,
                      bytes=self.bytes_removed or None, files=self.files_removed)
        written = Counts(rows=self.rows, bytes=self.bytes_added or None, files=self.files_added)
        return datasets(table=self.table, catalog=self.catalog, read=read, written=written)


class MeasuredRun(Frozen):
    table: str
    run_id: str
    measured: MeasureOutcome


class TableMeasurement(Frozen):
    """The probes on a table's current snapshot (`lakesort_report`)."""

    table: str
    snapshot_id: int | None
    probes: int
    bytes_selected: int  # by the owners' probes


def lineage(payload: Mapping[str, Any] | None) -> tuple[list[Any], list[Any]]:
    """The DAGs' commit task's lineage: the input and output datasets of its result, a `CommittedRun` payload;
    none without one (the commit failed)."""
    return CommittedRun.model_validate(payload).lineage() if payload else ([], [])


# The errors of a step that a retry of its DAG task cannot help: the task fails at once, without retries.
_FINAL: dict[str, tuple[type[BaseException], ...]] = {
    "prepare": (SparkUnsupported,),  # a Spark the job does not run on
    "verify": (SparkJobsFailed, SpecChanged),  # the run was abandoned; the spec was edited during the run
    "commit": (SpecChanged,),
}


def verdict(step: Step, exc: BaseException, *, trigger: Trigger | None = None) -> tuple[Verdict, str] | None:
    """How the DAG task of `step` ends on `exc`: ("fail", why) at once, without retries, when a retry cannot
    help (`_FINAL`); ("skip", why) when another run holds the table (`lease.TableBusy`) for the nightly's
    `prepare` (`trigger`) and for `maintain` (tomorrow night catches up), but ("fail", why) for another
    trigger's `prepare` (trigger it again later); None: the error as it is (the task's retries)."""
    if isinstance(exc, _FINAL.get(step, ())):
        return "fail", str(exc)
    if isinstance(exc, TableBusy) and step in ("prepare", "maintain"):
        if step == "maintain" or trigger == "nightly":  # the other run carries on
            return "skip", f"{exc}: skipped"
        return "fail", f"{exc}: trigger again when it has finished"
    return None


def asset_uri(table: str, *, catalog: str | None) -> str:
    """The Airflow asset of a table: what downstream DAGs schedule on."""
    return f"iceberg://{catalog or 'default'}/{table}"


def nightly_requests() -> list[TableRequest]:
    """The nightly DAG's first task: a request for every table a source configures
    (`registry.nightly_resolutions`:
    a YAML spec, `lakesort.*` properties, a namespace default, its own sort order), with its spec, resolved
    once for all of them; a table with no sort key anywhere is skipped, with a log line. A table whose spec
    does not load gets none: its own `prepare` and `maintain` then fail with the spec's error, and the other
    tables go on."""
    resolved = nightly_resolutions()
    return [TableRequest(table=name, trigger="nightly",
                         config=RunConfig.of_resolution(r) if r is not None and r.spec is not None else None)
            for name, r in resolved.items()]


def backfill_request(params: Mapping[str, Any]) -> TableRequest:
    """The backfill DAG's params checked together (Airflow's JSON schema checks each on its own): a
    registered table (ConfigError listing the registered ones), partitions or a date range (`date_range`).
    The request carries the table's spec: this first task is the run's one lookup."""
    table = str(params.get("table") or "")
    # ConfigError: "no spec for table ... (specs exist for: ...)"
    config = RunConfig.of_resolution(find_resolution(table))
    partitions = tuple(params.get("partitions") or ()) or None
    request = TableRequest(table=table, trigger="backfill", config=config, partitions=partitions,
                           dates=date_range(params.get("from"), params.get("to"), partitions=partitions),
                           force=bool(params.get("force")), dry_run=bool(params.get("dry_run")))
    log.info("backfill of %s", request.describe())
    return request


def prepare_table(request: TableRequest, *, owner: LeaseOwner, work_dir: Path | None = None,
                  spark_submit: str | None = None) -> PlannedTable:
    """Refuse a Spark the job does not run on (`spark_home.check_supported`: SparkUnsupported, exit 2, before
    anything else; `spark_submit` is the one the run's Spark jobs will run, None: `lakesort compact`'s), take
    the table's lease (unless a dry run, which only reads and may run beside a compaction), map
    dates to partitions, plan with the request's spec (none: the registry's, looked up here, the run's
    start). A dry run and a run with nothing to do are recorded and end here, lease released. Raises
    `lease.TableBusy` (nothing done) when another run holds the table; on any other error the lease is
    released and the error (a corrupt input: naming the file) raised again. `work_dir`: the run's files
    there, not in a directory of their own under $LAKESORT_WORK_DIR (`steps.prepare`).
    """
    table = request.table
    if not request.dry_run:  # a dry run starts no Spark
        check_supported(spark_submit)
        acquire_lease(table, owner)
    try:
        config = request.config or RunConfig.of_resolution(find_resolution(table))
        spec = config.spec
        partitions = request.partitions
        if request.dates is not None:
            partitions = tuple(partitions_for_dates(spec, dates=request.dates))
            log.info("%s: %s covers %s", table, request.dates, ", ".join(partitions) or "no partition")
            if not partitions:
                summary = f"{table}: nothing to do (no partition holds rows of {request.dates})"
                log.info("%s", summary)
                release_lease(table, owner)
                return PlannedTable(table=table, owner=owner, status="nothing-to-do", summary=summary)
        prepared = steps.prepare(config, partitions=partitions, force=request.force, trigger=request.trigger,
                                 dry_run=request.dry_run, work_dir=work_dir)
        planned = PlannedTable(table=table, owner=owner, status="planned", run_id=prepared.run_id,
                               work_dir=prepared.work_dir, summary=prepared.summary(),
                               partitions=prepared.partitions, jobs=prepared.jobs)
        if prepared.dry_run:
            steps.record(prepared, RunOutcome(status="dry-run"))
            view = PlanView.of(prepared)
            log.info("dry run, nothing changes: %s", prepared.summary())
            for g in view.groups:
                log.info("  group %d (%s): %d file(s), %d bytes, %d rows -> %d file(s)", g.group_id,
                         g.partition, g.input_files, g.bytes, g.rows, g.output_files)
            log.info("  plan: %s", prepared.plan_path)
            release_lease(table, owner)
            return planned.model_copy(update={"status": "dry-run", "jobs": (), "plan": view})
        if prepared.nothing_to_do:
            # prepare logged "<table>: nothing to do (N partition(s) checked)"
            steps.record(prepared, RunOutcome(status="nothing-to-do"))
            release_lease(table, owner)
            return planned.model_copy(update={"status": "nothing-to-do"})
        return planned
    except BaseException as exc:
        log.error("%s: prepare failed: %s", table, exc)  # a corrupt input: the error names the file
        release_lease(table, owner)
        raise


@contextmanager
def _lease_released_on_failure(run: PlannedTable | VerifiedRun) -> Iterator[None]:
    """A step that fails releases the run's lease (a failed task must never leave the table locked)."""
    try:
        yield
    except BaseException:
        release_lease(run.table, run.owner)
        raise


def to_compact(results: Iterable[PlannedTable]) -> list[PlannedTable]:
    """The runs with Spark work (status "planned"); the others' summaries go to the log."""
    runs = []
    for result in results:
        if result.status == "planned":
            runs.append(result)
        else:
            log.info("%s", result.summary)
    log.info("%d table(s) to compact: %s", len(runs), ", ".join(r.table for r in runs) or "none")
    return runs


def spark_jobs(runs: Iterable[PlannedTable]) -> list[dict[str, Any]]:
    """SparkSubmitOperator's arguments for every Spark job of every planned run (`submit.operator_kwargs`)."""
    runs = list(runs)
    out = [kwargs for run in runs for kwargs in operator_kwargs(run.prepared())]
    log.info("%d Spark job(s) for %d table(s)", len(out), len(runs))
    return out


def verify_table(run: PlannedTable) -> VerifiedRun:
    """Abandon the run if one of its Spark jobs failed (SparkJobsFailed: staged files removed, failure
    recorded), else verify the staged output; either failure releases the lease."""
    prepared = run.prepared()
    with _lease_released_on_failure(run):
        failed = [j.job_id for j in prepared.jobs if not Path(j.manifest_path).exists()]
        if failed:
            steps.abandon(prepared, f"spark: job(s) {', '.join(map(str, failed))} failed (no manifest)")
            raise SparkJobsFailed(
                f"{run.table} run {prepared.run_id}: Spark job(s) {failed} failed: run abandoned, staged "
                "files removed, table unchanged (see the `compact` task logs)")
        outcome = steps.verify(prepared)
    return VerifiedRun(table=run.table, owner=run.owner, run_id=prepared.run_id, work_dir=prepared.work_dir,
                       verification=outcome.status, warnings=len(outcome.findings))


def commit_table(run: VerifiedRun) -> CommittedRun:
    """Commit the verified output (one atomic Iceberg `replace` snapshot); a failure releases the lease."""
    prepared = PreparedRun.load(run.work_dir)
    with _lease_released_on_failure(run):
        result = steps.commit(prepared)
    # A run that reaches its commit has staged output, and a replace of it always makes a snapshot.
    assert result.snapshot_id is not None, f"run {prepared.run_id} committed no snapshot"
    committed = CommittedRun(
        table=run.table, owner=run.owner, catalog=prepared.catalog, run_id=prepared.run_id,
        work_dir=run.work_dir, trigger=prepared.trigger, snapshot_id=result.snapshot_id,
        partitions=prepared.partitions, files_removed=result.files_removed, files_added=result.files_added,
        rows=result.rows, bytes_removed=result.bytes_removed, bytes_added=result.bytes_added,
        rows_read=prepared.plan().input_rows)
    log.info("%s: committed snapshot %s: %d file(s) -> %d file(s), %d rows, %d partition(s); asset %s",
             run.table, result.snapshot_id, result.files_removed, result.files_added, result.rows,
             len(prepared.partitions), committed.asset_uri())
    return committed


def measure_table(run: CommittedRun) -> MeasuredRun:
    """The probes on the snapshot before and after the commit (rows in lakesort.pruning_metrics); the run's
    last step, so it releases the lease whatever happens."""
    try:
        measured = steps.measure(PreparedRun.load(run.work_dir), run.snapshot_id)
    finally:
        release_lease(run.table, run.owner)
    before, after = measured.bytes_selected_before, measured.bytes_selected_after
    if before and after is not None:
        log.info("%s: the owners' probes select %d bytes before and %d after (%.0f%% "
                 "less), %d probe(s) measured",
                 run.table, before, after, 100 * (1 - after / before), measured.probes)
    return MeasuredRun(table=run.table, run_id=run.run_id, measured=measured)


def measure_current(table: str) -> TableMeasurement:
    """The probes on the table's current snapshot, recorded with phase `on-demand` (the report DAG's one task
    per table: its spec is looked up here)."""
    rows = measure_snapshot(table, spec=find_spec(table))
    snapshot = rows[0].snapshot_id if rows else None
    selected = sum(m.bytes_selected for m in rows if m.probe_kind == "owner")
    log.info("%s: %d probe(s) measured on snapshot %s; the owners' probes select %d bytes", table, len(rows),
             snapshot, selected)
    return TableMeasurement(table=table, snapshot_id=snapshot, probes=len(rows), bytes_selected=selected)


def maintain_table(request: TableRequest, *, owner: LeaseOwner) -> MaintenanceResult:
    """Expire the table's snapshots by its spec's retention and delete the files nothing retained references
    (`layout.upkeep.maintain`), under the table's lease taken as `owner`: TableBusy (nothing done) when
    another run holds it. A lease this run still holds (a compaction task that failed before releasing it)
    is taken over: every task of the run that could work on the table has finished by then. The spec is the
    request's (a request without one: the spec did not load at the start, and `find_spec` raises why)."""
    spec = request.config.spec if request.config is not None else find_spec(request.table)
    return _maintain(request.table, owner=owner, spec=spec, dry_run=request.dry_run,
                     trigger="nightly" if request.trigger == "nightly" else "manual")
