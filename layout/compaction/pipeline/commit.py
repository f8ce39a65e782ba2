"""The verified atomic commit of a compaction's staged output: the orchestration.

The verify step checked the staged output (`layout.compaction.integrity.staged`). The commit checks that
the verified files are unchanged (`confirm_unchanged`: the manifest's digest, by the caller, and every file's
size), then commits the run's groups in parts (`parts_of`: a bound on bytes and groups per snapshot, as
Iceberg's `partial-progress.*`), each part one Iceberg `replace` snapshot built as an explicit pipeline
(`layout.compaction.commit`, after Java's `SnapshotProducer.apply` and `BaseRewriteFiles`):

    read the state (`state`) -> validate (`validate`) -> carry concurrent position deletes (`carry`)
    -> the changes (`changes`) -> write the manifests and commit (`producer`)

The outputs carry the data sequence number of the snapshot the plan read, so an equality delete committed
while the job ran applies to them. When another writer commits first (CommitFailedException), the attempt is
retried at once on the new state with the same staged files, re-validated and re-carried, up to
`MAX_COMMIT_ATTEMPTS` attempts or `COMMIT_TIMEOUT_S`; every attempt is recorded (`CommitAttempt`).

A failure before a part commits leaves the parts already committed and deletes the rest of the staged files
(`layout.upkeep.cleanup.delete_staged` keeps every file a snapshot references). A retried step finds the parts
already committed by run id and part number and commits only the rest.

The snapshot's operation is `replace`, as Iceberg's own compaction commits, with the summary Java writes:
readers of a table's changes skip a `replace` (Spark's streaming source, pyiceberg's
`incremental_append_scan`). Older lakesort committed `overwrite`; lakesort finds its own snapshots by
`lakesort.run-id`, never by their operation.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pyarrow.parquet as pq
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

from layout.compaction.commit.carry import Carrier
from layout.compaction.commit.changes import Changes, changes_of
from layout.compaction.commit.producer import OPERATION, ManifestCache, commit_replace, prepare_manifests
from layout.compaction.commit.state import StateReader, TableState
from layout.compaction.commit.summary import RunSummary, run_snapshots
from layout.compaction.commit.validate import Validated, validate
from layout.compaction.executor import partitions as partitioning
from layout.compaction.integrity.proof import footer_statistics
from layout.compaction.integrity.staged import CommitRefused, confirm_unchanged
from layout.compaction.plan import RewritePlan
from layout.manifest import StagedManifest
from layout.read.deletes import DataRef
from layout.spec.sorting import written_sort_order_id
from layout.upkeep.cleanup import delete_staged

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyiceberg.table import Table

    from layout.manifest import StagedFile, StagedGroup

__all__ = ["COMMIT_TIMEOUT_S", "DEFAULT_MAX_PART_BYTES", "MAX_COMMIT_ATTEMPTS", "OPERATION", "CommitAttempt",
           "CommitResult", "commit_rewrite", "committed_run", "output_data_files", "parts_of"]

log = logging.getLogger(__name__)

# Against a writer that commits every few hundred milliseconds, what wins is a short path from reading the
# table to the catalog's compare-and-swap: attempts follow each other at once (a back-off only lets the other
# writer in again), each on freshly read state, until this deadline or this many attempts.
COMMIT_TIMEOUT_S = 300
MAX_COMMIT_ATTEMPTS = 50
# A part: at most this many bytes of input (a single larger group is a part of its own).
DEFAULT_MAX_PART_BYTES = 10 * 1024**3


@dataclass(frozen=True, slots=True)
class CommitAttempt:
    part: int
    number: int  # within its part, from 1
    outcome: Literal["committed", "conflict", "refused"]
    reason: str
    seconds: float

    def line(self) -> str:
        said = f": {self.reason}" if self.reason else ""
        return f"part {self.part} attempt {self.number}: {self.outcome} ({self.seconds:.2f}s){said}"


@dataclass(frozen=True, slots=True)
class CommitResult:
    run_id: str
    snapshot_id: int | None  # the last part's snapshot; None when there was nothing to commit
    files_removed: int
    files_added: int
    rows: int
    bytes_removed: int
    bytes_added: int
    seconds: float
    delete_files_removed: int = 0  # merge-on-read: delete files that applied to the inputs alone
    delete_files_carried: int = 0  # position deletes committed during the job, carried onto the outputs
    attempts: tuple[CommitAttempt, ...] = ()
    parts: int = 1  # planned
    parts_committed: int = 1
    snapshot_ids: tuple[int, ...] = ()  # one per part committed


def parts_of(groups: Sequence[StagedGroup], sizes: dict[int, int], *, max_bytes: int | None,
             max_groups: int | None) -> list[tuple[StagedGroup, ...]]:
    """The groups in commit order, cut into parts of at most `max_bytes` input bytes and `max_groups` groups
    (`sizes`: group id -> its input bytes); deterministic, so a retried step finds the same parts."""
    parts: list[tuple[StagedGroup, ...]] = []
    current: list[StagedGroup] = []
    size = 0
    for group in sorted(groups, key=lambda g: g.group_id):
        n = sizes.get(group.group_id, 0)
        if current and ((max_bytes is not None and size + n > max_bytes)
                        or (max_groups is not None and len(current) >= max_groups)):
            parts.append(tuple(current))
            current, size = [], 0
        current.append(group)
        size += n
    if current:
        parts.append(tuple(current))
    return parts


def commit_rewrite(table: Table, plan: RewritePlan, manifest: StagedManifest, *,
                   max_part_bytes: int | None = DEFAULT_MAX_PART_BYTES, max_part_groups: int | None = None,
                   on_attempt: Callable[[CommitAttempt], None] | None = None) -> CommitResult:
    """Commit the verified staged output in parts; on any failure, clean up what no snapshot took and raise.
    `on_attempt` hears of every commit attempt as it ends (a refused commit's too: the run's record).

    The caller made sure the verify step passed on exactly this manifest (its digest: `steps.commit`), so only
    `confirm_unchanged` runs here: the files are still the ones verified.
    """
    started = time.perf_counter()
    done = committed_run(table.refresh(), plan.run_id)
    if done is not None:  # a retried step after the commit went through: its files are the table's now
        log.info("run %s is already committed as snapshot %s: nothing to do", plan.run_id, done.snapshot_id)
        return done
    try:
        if manifest.run_id != plan.run_id:
            raise CommitRefused(f"manifest is for run {manifest.run_id}, the plan for {plan.run_id}")
        confirm_unchanged(manifest)
        return _commit(table, plan, manifest, started, max_part_bytes=max_part_bytes,
                       max_part_groups=max_part_groups, on_attempt=on_attempt)
    except CommitStateUnknownException:
        # The catalog may have taken the commit: deleting the staged files could delete live data.
        log.error("commit of run %s: state unknown; staged files kept. Check the table's history, then run "
                  "`lakesort cleanup %s`, which removes only unreferenced staged files",
                  plan.run_id, plan.table)
        raise
    except BaseException:
        removed = delete_staged(table, plan.run_id)
        log.warning("commit of run %s abandoned (parts committed before stay): removed %d staged "
                    "file(s) no snapshot references", plan.run_id, removed)
        raise


def _plan_sequence(table: Table, plan: RewritePlan) -> int:
    """The data sequence number of the snapshot the plan read (older plans did not record it: their
    snapshot's, while it is retained)."""
    if plan.sequence_number is not None:
        return plan.sequence_number
    snapshot = table.snapshot_by_id(plan.snapshot_id) if plan.snapshot_id is not None else None
    if snapshot is None:
        raise CommitRefused(f"{plan.table}: the snapshot {plan.snapshot_id} this run's plan read has "
                            "expired and the plan (written by an older lakesort) does not record its "
                            "sequence number; nothing committed, the next run plans again")
    return snapshot.sequence_number or 0


def _commit(table: Table, plan: RewritePlan, manifest: StagedManifest, started: float, *,
            max_part_bytes: int | None, max_part_groups: int | None,
            on_attempt: Callable[[CommitAttempt], None] | None) -> CommitResult:
    if not any(g.inputs or g.outputs for g in manifest.groups):
        return CommitResult(plan.run_id, None, 0, 0, 0, 0, 0, time.perf_counter() - started, parts=0,
                            parts_committed=0)
    table = table.refresh()
    sequence = _plan_sequence(table, plan)
    sizes = {g.group_id: g.bytes for g in plan.groups}
    parts = parts_of(manifest.groups, sizes, max_bytes=max_part_bytes, max_groups=max_part_groups)
    committed = run_snapshots(table, plan.run_id)
    results: list[_Part] = []
    attempts = _Attempts(on_attempt)
    for number, groups in enumerate(parts, 1):
        if number in committed:
            snap, summary = committed[number]
            log.info("run %s part %d/%d is already committed as snapshot %s", plan.run_id, number, len(parts),
                     snap.snapshot_id)
            results.append(_Part(snap.snapshot_id, summary, 0))
            continue
        part = _commit_part(table, plan, manifest.model_copy(update={"groups": groups}), sequence,
                            part=number, parts=len(parts), attempts=attempts)
        results.append(part)
    last = results[-1]
    result = CommitResult(
        plan.run_id, last.snapshot_id, sum(p.summary.input_files for p in results),
        sum(p.summary.output_files for p in results), sum(p.summary.rows for p in results),
        sum(p.summary.input_bytes for p in results), sum(p.summary.output_bytes for p in results),
        time.perf_counter() - started, sum(p.deletes_removed for p in results),
        sum(p.summary.carried_delete_files for p in results), tuple(attempts), len(parts), len(results),
        tuple(p.snapshot_id for p in results))
    log.info("committed run %s in %d part(s) (%d attempt(s)), last snapshot %s: %d files -> %d files, "
             "%d rows; %d delete file(s) removed, %d carried", plan.run_id, len(parts), len(attempts),
             result.snapshot_id, result.files_removed, result.files_added, result.rows,
             result.delete_files_removed, result.delete_files_carried)
    return result


class _Attempts(list[CommitAttempt]):
    """The attempts of a commit, each told to the listener as it ends."""

    def __init__(self, listener: Callable[[CommitAttempt], None] | None) -> None:
        super().__init__()
        self._listener = listener

    def append(self, attempt: CommitAttempt) -> None:
        super().append(attempt)
        if self._listener is not None:
            self._listener(attempt)


@dataclass(frozen=True, slots=True)
class _Part:
    snapshot_id: int
    summary: RunSummary
    deletes_removed: int


def _commit_part(table: Table, plan: RewritePlan, manifest: StagedManifest, sequence: int, *, part: int,
                 parts: int, attempts: _Attempts) -> _Part:
    """One part: one `replace` snapshot, retried at once on the new state while other writers commit."""
    inputs = frozenset(p for g in manifest.groups for p in g.inputs)
    outputs = [f for g in manifest.groups for f in g.outputs]
    ids = {g.group_id for g in manifest.groups}
    part_plan = plan.model_copy(update={"groups": tuple(g for g in plan.groups if g.group_id in ids)})
    new_files = output_data_files(table, plan, outputs)
    spec, schema = table.specs()[plan.partition_spec_id], table.schema()
    output_refs = [DataRef(df.file_path, plan.partition_spec_id,
                           partitioning.encode(df.partition, spec, schema), sequence) for df in new_files]
    reader = StateReader(inputs)
    carrier: Carrier | None = None
    cache = ManifestCache()  # one snapshot id and its written manifests for every attempt of the part
    rows = sum(g.expected_rows for g in manifest.groups)

    def build(number: int) -> tuple[TableState, Validated, Changes, RunSummary]:
        nonlocal carrier
        state = reader.read(table)
        checked = validate(state, table=plan.table, inputs=inputs, spec_id=plan.partition_spec_id,
                           plan_sequence=sequence)
        if checked.to_carry and carrier is None:  # memoizes per delete file across attempts
            carrier = Carrier(table, part_plan, manifest)
        carried = (carrier.carry([d.file for d in checked.to_carry])
                   if checked.to_carry and carrier is not None else None)
        changes = changes_of(state, checked.inputs, outputs=new_files, outputs_partition=output_refs,
                             carried=carried.files if carried else (), data_sequence_number=sequence)
        summary = RunSummary(
            run_id=plan.run_id, spec_hash=plan.spec_hash, rows=rows, input_files=len(inputs),
            output_files=len(outputs),
            input_bytes=sum(e.data_file.file_size_in_bytes for e in checked.inputs),
            output_bytes=sum(f.size for f in outputs), base_snapshot_id=plan.snapshot_id, part=part,
            parts=parts, carried_delete_files=len(carried.sources) if carried else 0,
            carried_delete_rows=carried.rows if carried else 0, attempts=number,
            data_sequence_number=sequence)
        return state, checked, changes, summary

    # The first attempt's slow part happens before it, outside the race with other writers: the deletes
    # committed so far are carried and the manifests written. The attempt then reads, carries and writes only
    # what is new since, so its window from reading the table to the catalog's compare-and-swap is short.
    began = time.perf_counter()
    try:
        state, _, changes, summary = build(1)
        prepare_manifests(state, changes, summary.properties(), cache)
    except CommitRefused as exc:
        attempts.append(CommitAttempt(part, 1, "refused", str(exc), time.perf_counter() - began))
        log.warning("commit of run %s part %d/%d refused: %s", plan.run_id, part, parts, exc)
        raise
    log.info("commit of run %s part %d/%d prepared in %.2fs (deletes carried, manifests written)",
             plan.run_id, part, parts, time.perf_counter() - began)
    if state.snapshot is not None and (state.snapshot.sequence_number or 0) > sequence:
        _follow_writer(table, state.snapshot.snapshot_id, plan.run_id)
    deadline = time.monotonic() + COMMIT_TIMEOUT_S
    number = 0
    while True:
        number += 1
        began = time.perf_counter()
        try:
            state, checked, changes, summary = build(number)
            snapshot_id = commit_replace(state, changes, summary.properties(), cache=cache)
        except CommitFailedException as exc:
            attempts.append(CommitAttempt(part, number, "conflict", f"another writer committed first ({exc})",
                                          time.perf_counter() - began))
            log.warning("commit of run %s part %d/%d attempt %d: the table moved on (%s); retrying at "
                        "once on the new state", plan.run_id, part, parts, number, exc)
            if number >= MAX_COMMIT_ATTEMPTS or time.monotonic() > deadline:
                raise CommitRefused(f"{plan.table}: {number} commit attempts of part {part}/{parts} in "
                                    f"{time.monotonic() - deadline + COMMIT_TIMEOUT_S:.0f}s lost the race to "
                                    f"other writers ({exc}); nothing more committed, the next run "
                                    "retries") from exc
            continue
        except CommitRefused as exc:
            attempts.append(CommitAttempt(part, number, "refused", str(exc), time.perf_counter() - began))
            log.warning("commit of run %s part %d/%d attempt %d refused: %s", plan.run_id, part, parts,
                        number, exc)
            raise
        attempts.append(CommitAttempt(part, number, "committed", _why(checked), time.perf_counter() - began))
        log.info("run %s part %d/%d committed as snapshot %s on attempt %d (%.2fs): %d files -> %d files%s",
                 plan.run_id, part, parts, snapshot_id, number, time.perf_counter() - began, len(inputs),
                 len(outputs),
                 f"; {len(changes.remove_deletes)} delete file(s) removed" if changes.remove_deletes else "")
        return _Part(snapshot_id, summary, len(changes.remove_deletes))


# Following a live writer: how long the commit waits for its next commit, and how often it looks.
FOLLOW_S, FOLLOW_EVERY_S = 2.5, 0.05


def _follow_writer(table: Table, seen: int, run_id: str) -> None:
    """Wait until the table's current snapshot is no longer `seen` (at most FOLLOW_S), when other writers
    committed while the job ran. A writer that commits on a cycle (a streaming or CDC sink every few seconds)
    has just committed then, so the attempt that follows has the most time before its next commit; attempting
    at a random moment of its cycle loses the race about as often as the attempt's window (a tenth to a
    quarter of a second: reading the table, the manifest list and the catalog's compare-and-swap) fills the
    cycle. A lost race costs only a retry, on the new state, with the manifests already written."""
    began = time.monotonic()
    while time.monotonic() - began < FOLLOW_S:
        time.sleep(FOLLOW_EVERY_S)
        current = table.refresh().current_snapshot()
        if current is not None and current.snapshot_id != seen:
            log.info("commit of run %s: other writers commit to the table; attempting right after their "
                     "commit (waited %.2fs)", run_id, time.monotonic() - began)
            return
    log.info("commit of run %s: no other commit within %.1fs; attempting", run_id, FOLLOW_S)


def _why(checked: Validated) -> str:
    said = []
    if checked.concurrent_equality:
        said.append(f"{len(checked.concurrent_equality)} equality delete file(s) committed during the job "
                    "apply on to the outputs")
    if checked.to_carry:
        said.append(f"{len(checked.to_carry)} position delete file(s) committed during the job carried")
    return "; ".join(said)


def committed_run(table: Table, run_id: str) -> CommitResult | None:
    """What this run committed, from its snapshots' summaries, when every part has committed (an Airflow retry
    of a step whose commit went through before its worker died); None when some part has not (or its
    snapshots have expired: `delete_staged` still keeps every file a snapshot references)."""
    found = run_snapshots(table, run_id)
    if not found:
        return None
    parts = max(s.parts for _, s in found.values())
    if len(found) < parts:
        return None
    ordered = [found[n] for n in sorted(found)]
    summaries = [s for _, s in ordered]
    return CommitResult(
        run_id, ordered[-1][0].snapshot_id, sum(s.input_files for s in summaries),
        sum(s.output_files for s in summaries), sum(s.rows for s in summaries),
        sum(s.input_bytes for s in summaries), sum(s.output_bytes for s in summaries), 0.0,
        delete_files_carried=sum(s.carried_delete_files for s in summaries), parts=parts,
        parts_committed=parts,
        snapshot_ids=tuple(snap.snapshot_id for snap, _ in ordered))


def output_data_files(table: Table, plan: RewritePlan, outputs: Sequence[StagedFile]) -> list[DataFile]:
    """DataFiles of the staged outputs: statistics from their footers as pyiceberg computes them, partition
    values from the job (the plan's spec), never inferred from footer min/max."""
    schema, spec = table.schema(), table.specs()[plan.partition_spec_id]
    # The table's sort order id only when the rows follow that order (a linear sort by its keys, the spec's or
    # the table's own): a data file's sort_order_id promises readers the order.
    order_id = written_sort_order_id(table, plan.strategy, plan.sort_keys)
    files = []
    for f in outputs:
        input_file = table.io.new_input(f.path)
        with input_file.open() as stream:
            metadata = pq.read_metadata(stream)
        # The statistics the proof checked (NaN-tainted float bounds left out, never committed wrong).
        serialized = footer_statistics(metadata, schema, table.metadata.properties)
        data_file = DataFile.from_args(
            content=DataFileContent.DATA, file_path=f.path, file_format=FileFormat.PARQUET,
            partition=partitioning.decode(f.partition_key, spec, schema), file_size_in_bytes=len(input_file),
            sort_order_id=order_id, equality_ids=None, key_metadata=None, **serialized,
        )
        data_file.spec_id = spec.spec_id
        files.append(data_file)
    return files
