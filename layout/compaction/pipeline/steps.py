"""The steps of one table's compaction run, as the Airflow DAGs and `lakesort compact` call them.

    prepare  -> plan the rewrite, check the inputs' footers, write the plan and split the groups into
                Spark jobs (each a `spark-submit` of jobs/compact.py for some groups)
    (Spark)  -> each job stages its groups' files, reads them back, and writes a manifest with the input's
                and the output's rows and fingerprints (computed by the executors)
    verify   -> compare those, re-read a sample outside Spark, the metadata proof, layout rules and GX;
                mark the output verified (the manifest's digest)
    commit   -> the verified files unchanged (digest, sizes): one atomic Iceberg `replace` snapshot
                (as RewriteFiles); record the run
    measure  -> every probe on the snapshot before and the one after, same probes; record the rows

Every step takes the `PreparedRun` (a value, saved as JSON in the run's work directory, so each
Airflow task can reload it from its path) and is safe to retry. A failing step leaves the table as
it was, removes the run's staged files and records the run as failed with the error.

The run carries the table's spec as `prepare` was given it (`config.RunConfig`): no step looks the table
up in the registry. Verify and commit re-read the spec's file and refuse a run whose spec has changed since
its plan (`config.SpecChanged`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Literal

import pyarrow.parquet as pq
from pydantic import Field
from pyiceberg.io import load_file_io
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from layout import storage
from layout.catalog import load_catalog, load_table
from layout.compaction.executor.inputs import native_reason
from layout.compaction.executor.memory import value_bytes
from layout.compaction.integrity.staged import CommitRefused, check_staged, prove_staged, staged_columns
from layout.compaction.pipeline.commit import CommitAttempt, CommitResult, commit_rewrite, committed_run
from layout.compaction.pipeline.config import RunConfig, SpecChanged, check_unchanged
from layout.compaction.plan import RewriteGroup, RewritePlan
from layout.compaction.planning.planner import plan_rewrite
from layout.errors import LakesortError, ParquetError
from layout.io import live_data_files
from layout.manifest import StagedManifest
from layout.metrics.measure import measure as measure_snapshot
from layout.metrics.measure import probes_for
from layout.metrics.runs import RunOutcome, RunRecord, Trigger, record_run
from layout.models import Frozen
from layout.settings import settings
from layout.spec import TableSpec, resolve_sort_keys
from layout.upkeep.cleanup import delete_staged
from layout.verify.expectations import gx_verifier
from layout.verify.rules import Finding, VerificationFailed, verify_staged
from layout.verify.sources import open_staged

__all__ = ["MeasureOutcome", "PreparedRun", "SparkJob", "VerifyOutcome", "abandon", "check_inputs", "commit",
           "keep_partitions", "live_totals", "measure", "prepare", "record", "run_record",
           "staged_manifest", "verify"]

log = logging.getLogger(__name__)

# One Spark job compacts groups up to this many input bytes: one JVM start for a small table, several
# jobs (each retried on its own) for a large one.
MAX_JOB_BYTES = 16 << 30
VERIFIED = "verified.json"
LOGGED_DECISIONS = 20  # partitions whose decision the prepare step logs (a table may have thousands)
# A stand-in for the layout rules and GX (tests): it may raise to refuse the commit.
Verifier = Callable[[StagedManifest], Sequence[Finding] | None]


class NotVerified(LakesortError):
    """The commit step found no verification of exactly this staged output."""


class VerifyOutcome(Frozen):
    """What the verify step found, saved beside the run; the commit checks `manifest` against the output."""

    run_id: str
    manifest: str  # sha256 of the staged manifest that was verified
    status: Literal["passed"]
    findings: tuple[Finding, ...]  # warnings and information (errors refuse the run)


class MeasureOutcome(Frozen):
    """The owners' probes on the snapshots before and after a run (rows in lakesort.pruning_metrics)."""

    probes: int
    bytes_selected_before: int | None = None  # the owners' probes, summed
    bytes_selected_after: int | None = None
    # probe -> (bytes selected before, after)
    by_probe: dict[str, tuple[int, int]] = Field(default_factory=dict)


class SparkJob(Frozen):
    job_id: int
    group_ids: tuple[int, ...]
    input_bytes: int
    manifest_path: str


class PreparedRun(Frozen):
    table: str
    catalog: str | None
    config: RunConfig  # the table's spec, resolved once at the start of the run
    run_id: str
    trigger: Trigger
    dry_run: bool
    started_at: float  # epoch seconds
    work_dir: str
    plan_path: str
    snapshot_before: int | None
    files_before: int
    bytes_before: int
    partitions: tuple[str, ...]  # partitions to rewrite
    partitions_checked: int
    input_bytes: int
    jobs: tuple[SparkJob, ...]

    @property
    def nothing_to_do(self) -> bool:
        return not self.jobs

    @property
    def spec(self) -> TableSpec:
        return self.config.spec

    @property
    def path(self) -> Path:
        return Path(self.work_dir) / "run.json"

    @classmethod
    def load(cls, path: str | Path) -> PreparedRun:
        path = Path(path)
        return cls.model_validate_json((path / "run.json" if path.is_dir() else path).read_text())

    def plan(self) -> RewritePlan:
        return RewritePlan.from_json(Path(self.plan_path).read_text())

    def summary(self) -> str:
        if self.nothing_to_do:
            return f"{self.table}: nothing to do ({self.partitions_checked} partition(s) checked)"
        groups = sum(len(j.group_ids) for j in self.jobs)
        verb = "would rewrite" if self.dry_run else "rewriting"
        return (f"{self.table}: {verb} {len(self.partitions)} of {self.partitions_checked} partition(s) "
                f"({', '.join(self.partitions[:6])}{', ...' if len(self.partitions) > 6 else ''}): {groups} "
                f"group(s), {self.input_bytes} input bytes, "
                f"in {len(self.jobs)} Spark job(s); run {self.run_id}")


def prune_work_dirs(table_dir: Path, *, keep_days: float | None = None, now: float | None = None) -> int:
    """Remove a table's run directories (plans, manifests, the layout zip) older than `keep_days`
    ($LAKESORT_WORK_KEEP_DAYS, default 14): a nightly run leaves one a night. Returns how many went."""
    days = keep_days if keep_days is not None else settings().work_keep_days
    cutoff = (now if now is not None else time.time()) - days * 86_400
    removed = 0
    for run in table_dir.glob("*/run.json"):
        if run.stat().st_mtime < cutoff:
            shutil.rmtree(run.parent, ignore_errors=True)
            removed += 1
    if removed:
        log.info("removed %d run director(ies) older than %g days under %s", removed, days, table_dir)
    return removed


def prepare(
    config: RunConfig, *, partitions: Sequence[str] | None = None, force: bool = False,
    trigger: Trigger = "manual", dry_run: bool = False, work_dir: Path | None = None,
    max_job_bytes: int = MAX_JOB_BYTES,
) -> PreparedRun:
    """Plan the run with `config`'s spec, which the run then carries; unless it is a dry run or there is
    nothing to do, check the inputs and write the plan."""
    started = time.time()
    table = load_table(config.spec.table, config.spec.catalog)
    # Resolved once, here, where the table is first loaded: its write properties where the spec is silent.
    config = config.resolved(table)
    spec = config.spec
    snapshot = table.current_snapshot()
    files_before, bytes_before = live_totals(table)
    plan = plan_rewrite(table, spec, partitions=partitions, force=force)
    if work_dir is None:
        prune_work_dirs(settings().work_dir / spec.table)
    work = Path(work_dir or settings().work_dir / spec.table / plan.run_id)
    work.mkdir(parents=True, exist_ok=True)
    plan_path = work / "plan.json"
    plan_path.write_text(plan.to_json())
    prepared = PreparedRun(
        table=spec.table, catalog=spec.catalog, config=config, run_id=plan.run_id, trigger=trigger,
        dry_run=dry_run, started_at=started, work_dir=str(work), plan_path=str(plan_path),
        snapshot_before=snapshot.snapshot_id if snapshot else None, files_before=files_before,
        bytes_before=bytes_before, partitions=tuple(sorted({g.partition for g in plan.groups})),
        partitions_checked=len(plan.partitions), input_bytes=plan.input_bytes,
        jobs=_jobs(plan, work, max_job_bytes),
    )
    prepared.path.write_text(prepared.model_dump_json(indent=1))
    if plan.groups and not dry_run:
        with _failure_recorded(prepared, "prepare"):  # so the report shows the table's failure
            plan = check_inputs(plan)  # a corrupt input fails here, named, before any Spark work
        plan_path.write_text(plan.to_json())
    log.info("%s", prepared.summary())
    for decision in plan.partitions[:LOGGED_DECISIONS]:
        log.info("  %s: %s (%s)", decision.partition or "<unpartitioned>", decision.action,
                 "; ".join(decision.reasons) or "-")
    if len(plan.partitions) > LOGGED_DECISIONS:
        log.info("  ... and %d more partition(s): `lakesort plan-rewrite %s` lists each with its reasons "
                 "(and the plan is in %s)", len(plan.partitions) - LOGGED_DECISIONS, spec.table, plan_path)
    return prepared


def _jobs(plan: RewritePlan, work: Path, max_job_bytes: int) -> tuple[SparkJob, ...]:
    """Groups packed in plan order into jobs of at most `max_job_bytes` input (a bigger group: alone)."""
    batches: list[list[RewriteGroup]] = []
    size = 0
    for group in plan.groups:
        if not batches or size + group.bytes > max_job_bytes:
            batches.append([])
            size = 0
        batches[-1].append(group)
        size += group.bytes
    return tuple(
        SparkJob(job_id=i, group_ids=tuple(g.group_id for g in batch),
                 input_bytes=sum(g.bytes for g in batch), manifest_path=str(work / f"manifest-{i}.json"))
        for i, batch in enumerate(batches)
    )


def keep_partitions(prepared: PreparedRun, partitions: Sequence[str]) -> PreparedRun:
    """The run trimmed to `partitions` (the nightly's budget admitted only these), saved over the run before
    any Spark job is made: its plan's groups of the other partitions dropped, and its jobs with them (each job
    keeps its groups of these, one left with none goes), so that the jobs, the verify and the commit see only
    the kept groups. Atomic: the trimmed plan is written to a file of its own, then the run's `run.json` is
    replaced in one rename by the run pointing at it; a crash leaves the whole run or the trimmed one, never
    jobs naming groups their plan lacks. Raises LakesortError for a partition the run does not rewrite."""
    keep = set(partitions)
    plan = prepared.plan()
    unknown = keep - {g.partition for g in plan.groups}
    if unknown:
        raise LakesortError(f"{prepared.table} run {prepared.run_id}: partition(s) "
                            f"{', '.join(sorted(unknown))} are not in its plan; nothing trimmed")
    groups = tuple(g for g in plan.groups if g.partition in keep)
    size = {g.group_id: g.bytes for g in groups}
    jobs = tuple(j.model_copy(update={"group_ids": ids, "input_bytes": sum(size[i] for i in ids)})
                 for j in prepared.jobs if (ids := tuple(i for i in j.group_ids if i in size)))
    trimmed = plan.model_copy(update={"groups": groups})
    plan_path = _write_beside(Path(prepared.plan_path), trimmed.to_json(), prefix="plan-trimmed-")
    run = prepared.model_copy(update={"plan_path": str(plan_path), "partitions": tuple(sorted(keep)),
                                      "input_bytes": trimmed.input_bytes, "jobs": jobs})
    os.replace(_write_beside(run.path, run.model_dump_json(indent=1), prefix="run-"), run.path)
    return run


def _write_beside(like: Path, text: str, *, prefix: str) -> Path:
    """`text` in a new file of `like`'s directory, with `like`'s permissions (a temporary file's are the
    owner's only; the Spark driver, or another host's task, may read the run's files as another user)."""
    with tempfile.NamedTemporaryFile(
        "w", dir=like.parent, prefix=prefix, suffix=".json", delete=False
    ) as out:
        out.write(text)
    os.chmod(out.name, stat.S_IMODE(like.stat().st_mode))
    return Path(out.name)


def staged_manifest(prepared: PreparedRun) -> StagedManifest:
    """The jobs' manifests as one; a job that did not finish is an error naming it."""
    parts = []
    for job in prepared.jobs:
        path = Path(job.manifest_path)
        if not path.exists():
            raise CommitRefused(f"{prepared.table} run {prepared.run_id}: Spark job {job.job_id} (groups "
                                f"{list(job.group_ids)}) wrote no manifest at {path}: it failed or never "
                                "ran; nothing committed, rerun the compaction")
        parts.append(StagedManifest.from_json(path.read_text()))
    first = parts[0]
    return first.model_copy(update={"groups": tuple(g for p in parts for g in p.groups),
                                    "seconds": sum(p.seconds for p in parts)})


def check_inputs(plan: RewritePlan) -> RewritePlan:
    """Open every input file's footer before any Spark work: a corrupt or missing file fails here, named,
    instead of deep inside an executor (about a millisecond per file). Files are opened through the
    table's FileIO with their paths exactly as the manifests record them, as the executors will.

    Returns the plan with each file the job may read with Spark's own reader marked `spark_native`
    (`layout.compaction.executor.inputs.native_reason`, from the same footer) and its `value_bytes` estimated
    (`layout.compaction.executor.memory`: how much of the input a write task sorts in memory)."""
    # The plan carries no secrets: an object store's credentials come from the table's load
    # (`layout.storage`).
    io = load_file_io({**plan.io_properties, **storage.properties_for(plan.table_location)},
                      plan.metadata_location)
    schema = Schema.model_validate_json(plan.table_schema_json)
    native: set[str] = set()
    values: dict[str, int] = {}
    for group in plan.groups:
        for f in group.inputs:
            try:
                with io.new_input(f.path).open() as stream:
                    metadata = pq.read_metadata(stream)
            except FileNotFoundError as exc:
                raise ParquetError(f.path, "input file not found", hint="the table references a file that is "
                                   "gone; restore it or remove it from the table") from exc
            except Exception as exc:
                raise ParquetError(f.path, f"cannot read the Parquet footer ({exc})",
                                   hint="the file is corrupt or not Parquet; nothing was rewritten") from exc
            if metadata.num_rows != f.rows:
                raise ParquetError(f.path, f"the footer holds {metadata.num_rows} rows, "
                                           f"the table's manifest {f.rows}",
                                   hint="the file changed after it was committed; nothing was rewritten")
            if f.spec_id == plan.partition_spec_id and native_reason(
                    f.path, metadata.schema.to_arrow_schema(), schema) is None:
                native.add(f.path)
            values[f.path] = value_bytes(metadata)
    log.info("%s: %d of %d input file(s) read by Spark's own reader, the rest through pyiceberg", plan.table,
             len(native), sum(len(g.inputs) for g in plan.groups))
    groups = [g.model_copy(update={"inputs": tuple(f.model_copy(update={"spark_native": f.path in native,
                                                                          "value_bytes": values[f.path]})
                                                   for f in g.inputs)}) for g in plan.groups]
    return plan.model_copy(update={"groups": tuple(groups)})


def verify(prepared: PreparedRun, *, verifier: Verifier | None = None) -> VerifyOutcome:
    """Check the staged output (rows, fingerprints, then the layout rules and GX of the run's spec, or
    `verifier`) and mark it verified; on failure remove the staged files and record the findings. A spec
    changed since the plan refuses the run first (`SpecChanged`, naming the file)."""
    done = _already_verified(prepared)
    if done is not None:
        return done
    with _failure_recorded(prepared, "verify", remove_staged=True):
        check_unchanged(prepared.config, table=prepared.table, run_id=prepared.run_id)
        manifest = staged_manifest(prepared)
        plan = prepared.plan()
        check_staged(manifest, staged_columns(plan))
        table = load_table(prepared.table, prepared.catalog)
        prove_staged(table, plan, manifest)
        findings = (verifier(manifest) if verifier is not None
                    else _verify_layout(table, manifest, prepared.spec))
        findings = [*_job_findings(manifest), *(findings or ())]
        outcome = VerifyOutcome(run_id=prepared.run_id, manifest=_digest(manifest), status="passed",
                                findings=tuple(findings))
        (Path(prepared.work_dir) / VERIFIED).write_text(outcome.model_dump_json())
        log.info("%s run %s: staged output verified (%d group(s), %d warning(s))", prepared.table,
                 prepared.run_id, len(manifest.groups), len(outcome.findings))
        return outcome


def _already_verified(prepared: PreparedRun) -> VerifyOutcome | None:
    """The verification a committed run passed, when this step is retried after the commit went through (its
    inputs are gone from the table then, and its staged files are the table's): nothing to check again."""
    marker = Path(prepared.work_dir) / VERIFIED
    if not marker.exists():
        return None
    done = committed_run(load_table(prepared.table, prepared.catalog), prepared.run_id)
    if done is None:
        return None
    log.info("%s run %s is already committed as snapshot %s: verified before, nothing to do", prepared.table,
             prepared.run_id, done.snapshot_id)
    return VerifyOutcome.model_validate_json(marker.read_text())


def _job_findings(manifest: StagedManifest) -> list[Finding]:
    """What the job noticed in its input and worked around (`StagedManifest.warnings`),
    as warnings of the run."""
    findings = []
    for warning in manifest.warnings:
        finding = Finding(
            rule=warning.rule, severity="warning", path=None, row_group=None, column=warning.column,
            observed=warning.message, intended="every value within its file's lower and upper "
                                               "bounds in the manifests",
            diagnosis=f"{warning.message}. Readers that prune files by these bounds can skip rows of the "
                      "files not rewritten; the files this run wrote carry bounds from their own footers. "
                      "Find the writer of the table's other files and rewrite them (e.g. "
                      "a lakesort run over their partitions).")
        log.warning("%s: %s", finding.rule, finding.diagnosis)
        findings.append(finding)
    return findings


def _verify_layout(table: Table, manifest: StagedManifest, spec: TableSpec) -> list[Finding]:
    """The layout rules (`layout.verify`) and the GX suites (Data Docs in $LAKESORT_REPORT_DIR/gx); both run
    before either refuses, so the Data Docs always show this run. Returns the findings (warnings)."""
    keys = resolve_sort_keys(spec, table)
    # The rules and the GX facts read the same footers and page indexes: opened once, for both.
    opened = open_staged(manifest)
    report = verify_staged(manifest, spec, keys, opened=opened)
    for finding in report.by_severity("warning"):
        log.warning("%s: %s", finding.rule, finding.diagnosis)
    failures: list[Exception] = [] if report.ok else [VerificationFailed(report)]
    try:
        gx_verifier(spec, keys, docs_dir=settings().report_dir / "gx")(manifest, opened=opened)
    except LakesortError as exc:
        failures.append(exc)
    if failures:
        raise failures[0]
    return list(report.findings)


def commit(prepared: PreparedRun) -> CommitResult:
    """Commit the verified staged output atomically and record the run; returns the CommitResult.

    The `verify` step must have passed for exactly this output (its digest); the commit does not repeat its
    checks, it confirms the files are unchanged (sizes) and swaps them in one Iceberg `replace` snapshot. A
    spec changed since the plan refuses the run (`SpecChanged`, naming the file; the staged files are
    removed), unless this is a retry of a commit that went through.
    """
    commit_log: list[CommitAttempt] = []  # filled as the commit goes: a failed run records its parts too
    with _failure_recorded(prepared, "commit", attempts=commit_log):
        table = load_table(prepared.table, prepared.catalog)
        if committed_run(table, prepared.run_id) is None:  # else a retry: commit_rewrite returns what it did
            _refuse_changed_spec(prepared, table)
        manifest = staged_manifest(prepared)
        marker = Path(prepared.work_dir) / VERIFIED
        verified = VerifyOutcome.model_validate_json(marker.read_text()) if marker.exists() else None
        if verified is None or verified.manifest != _digest(manifest):
            raise NotVerified(f"{prepared.table} run {prepared.run_id}: the staged output was not verified "
                              "(run the verify step first); nothing committed")
        parts = prepared.spec.commit
        try:
            result = commit_rewrite(table, prepared.plan(), manifest, max_part_bytes=parts.max_part_bytes,
                                    max_part_groups=parts.max_part_groups, on_attempt=commit_log.append)
        finally:
            _record_attempts(prepared, commit_log)
        files_after, bytes_after = live_totals(table.refresh())
        record(prepared, RunOutcome(
            status="committed", snapshot_after=result.snapshot_id, files_after=files_after,
            bytes_after=bytes_after, files_removed=result.files_removed, files_added=result.files_added,
            bytes_rewritten=result.bytes_removed, rows_rewritten=result.rows, verification="passed",
            findings=_findings_json(verified.findings), parts=result.parts,
            parts_committed=result.parts_committed, commit_attempts=len(result.attempts),
            delete_files_carried=result.delete_files_carried))
        return result


COMMIT_LOG = "commit.json"  # the commit's attempts and parts, beside run.json


def _record_attempts(prepared: PreparedRun, attempts: Sequence[CommitAttempt]) -> None:
    """Every commit attempt (its part, outcome, reason and time), in the run's directory: a refused or
    interrupted commit's attempts too."""
    path = Path(prepared.work_dir) / COMMIT_LOG
    path.write_text(json.dumps({"run_id": prepared.run_id, "attempts": [asdict(a) for a in attempts]},
                               indent=1))


def _refuse_changed_spec(prepared: PreparedRun, table: Table) -> None:
    """`check_unchanged` before the commit; a run refused for its spec never commits:
    its staged files go now."""
    try:
        check_unchanged(prepared.config, table=prepared.table, run_id=prepared.run_id)
    except SpecChanged:
        delete_staged(table, prepared.run_id)
        raise


def measure(prepared: PreparedRun, snapshot_after: int | None = None) -> MeasureOutcome:
    """Every probe of the run's spec on the snapshot before the run and the one after,
    with the same probes."""
    spec = prepared.spec
    table = load_table(prepared.table, prepared.catalog)
    if snapshot_after is None:
        current = table.current_snapshot()
        snapshot_after = current.snapshot_id if current else None
    if prepared.snapshot_before is None or snapshot_after is None:
        return MeasureOutcome(probes=0)
    probes = probes_for(spec, table, prepared.snapshot_before)
    before = measure_snapshot(prepared.table, snapshot_id=prepared.snapshot_before, run_id=prepared.run_id,
                              phase="before", spec=spec, probes=probes)
    after = measure_snapshot(prepared.table, snapshot_id=snapshot_after, run_id=prepared.run_id,
                             phase="after", spec=spec, probes=probes)
    return MeasureOutcome(
        probes=len(probes),
        bytes_selected_before=sum(m.bytes_selected for m in before if m.probe_kind == "owner"),
        bytes_selected_after=sum(m.bytes_selected for m in after if m.probe_kind == "owner"),
        by_probe={b.probe: (b.bytes_selected, a.bytes_selected) for b, a in zip(before, after, strict=True)})


def abandon(prepared: PreparedRun, reason: str) -> int:
    """A step failed outside our code (the Spark job): remove the staged files, record the failure. A run that
    has committed (a step retried after the commit went through) keeps its files and its record."""
    table = load_table(prepared.table, prepared.catalog)
    done = committed_run(table, prepared.run_id)
    if done is not None:
        log.warning("%s run %s: %s; the run is already committed as snapshot %s: nothing removed",
                    prepared.table, prepared.run_id, reason, done.snapshot_id)
        return 0
    removed = delete_staged(table, prepared.run_id)
    record(prepared, RunOutcome(status="failed", error=reason))
    log.warning("%s run %s abandoned (%s): table unchanged, %d staged file(s) removed", prepared.table,
                prepared.run_id, reason, removed)
    return removed


def record(prepared: PreparedRun, outcome: RunOutcome) -> None:
    """The run's row in `lakesort.compaction_runs` (replaced by a later step of the same run): the run, and
    how it ended; an outcome without figures after leaves the table's as they were before."""
    row = run_record(prepared, outcome)
    try:
        record_run(load_catalog(prepared.catalog), row)
    except Exception as exc:  # noqa: BLE001 - a metrics hiccup must never fail (or undo) a compaction
        log.warning("could not record run %s in the metrics tables: %s", prepared.run_id, exc)


def run_record(prepared: PreparedRun, outcome: RunOutcome) -> RunRecord:
    """`record`'s row, unwritten (the nightly's budget records its deferred runs together)."""
    return RunRecord(
        **outcome.model_dump(exclude={"files_after", "bytes_after"}),
        run_id=prepared.run_id, table=prepared.table, trigger=prepared.trigger,
        started_at=dt.datetime.fromtimestamp(prepared.started_at, dt.UTC),
        duration_s=time.time() - prepared.started_at, snapshot_before=prepared.snapshot_before,
        partitions_rewritten=len(prepared.partitions), groups=sum(len(j.group_ids) for j in prepared.jobs),
        files_before=prepared.files_before, bytes_before=prepared.bytes_before,
        files_after=prepared.files_before if outcome.files_after is None else outcome.files_after,
        bytes_after=prepared.bytes_before if outcome.bytes_after is None else outcome.bytes_after,
        spec_hash=prepared.config.spec_hash, config_sources=prepared.config.sources_json(),
    )


@contextmanager
def _failure_recorded(prepared: PreparedRun, step: str, *, remove_staged: bool = False,
                      attempts: Sequence[CommitAttempt] = ()) -> Iterator[None]:
    """On an exception in a step: record the run as failed (with findings, if any, and the commit's
    `attempts` so far: the parts a failed commit left committed) and re-raise; with `remove_staged`, first
    delete the run's staged files (the commit step does that itself)."""
    try:
        yield
    except BaseException as error:
        if remove_staged:
            delete_staged(load_table(prepared.table, prepared.catalog), prepared.run_id)
        if isinstance(error, Exception):
            report = getattr(error, "report", None)
            findings = _findings_json(report.findings) if report is not None else "[]"
            log.error("%s run %s: %s failed: %s", prepared.table, prepared.run_id, step, error)
            # A spec changed since the plan refuses the run before anything was verified.
            checked = step == "verify" and not isinstance(error, SpecChanged)
            committed = {a.part for a in attempts if a.outcome == "committed"}
            record(prepared, RunOutcome(status="failed", error=f"{step}: {error}"[:4000], findings=findings,
                                        verification="failed" if checked else "skipped",
                                        parts_committed=len(committed) if attempts else None,
                                        commit_attempts=len(attempts) or None))
        raise


def _findings_json(findings: Sequence[Finding]) -> str:
    return json.dumps([f.to_json() for f in findings])


def _digest(manifest: StagedManifest) -> str:
    return hashlib.sha256(manifest.to_json().encode()).hexdigest()


def live_totals(table: Table) -> tuple[int, int]:
    """(files, bytes) of the table's current snapshot."""
    if table.current_snapshot() is None:
        return 0, 0
    files = live_data_files(table)
    return len(files), sum(f.file_size_in_bytes for f in files)
