"""The verified atomic commit of a compaction's staged output.

The verify step checked the staged output (`layout.compaction.integrity.staged`). The commit checks only that
the verified files are unchanged (`confirm_unchanged`: the manifest's digest, by the caller, and every file's
size) and that every input file is still live; one Iceberg snapshot removes exactly the input files and adds
the staged ones, and the delete files that applied to the inputs alone. Any failure before that leaves the
table as it was and deletes the staged files (`layout.upkeep.cleanup.delete_staged`). pyiceberg's optimistic
commit fails cleanly when another writer committed in between, and the commit retries at once on the new state
while every input is still live.

The snapshot's operation is `replace`, as Iceberg's own compaction (Java's `RewriteFiles`) commits, with the
summary Java writes: readers of a table's changes skip a `replace` (Spark's streaming source, pyiceberg's
`incremental_append_scan`), where an `overwrite` stops Spark's streaming source ("Cannot process overwrite
snapshot"). Older lakesort committed `overwrite`; lakesort finds its own snapshots by `lakesort.run-id`, never
by their operation, so tables holding such commits plan, verify and clean up the same.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, ValidationException
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
)
from pyiceberg.table import Table as IcebergTable
from pyiceberg.table.snapshots import (
    ADDED_RECORDS,
    CHANGED_PARTITION_COUNT_PROP,
    DELETED_RECORDS,
    Operation,
    SnapshotSummaryCollector,
    Summary,
    update_snapshot_summaries,
)
from pyiceberg.table.update.snapshot import _OverwriteFiles

from layout.catalog import RUN_ID, SPEC_HASH
from layout.compaction.executor import partitions as partitioning
from layout.compaction.integrity.proof import footer_statistics
from layout.compaction.integrity.staged import CommitRefused, ManifestScans, confirm_unchanged
from layout.compaction.pipeline.delete_files import DeleteManifestWriter, DeleteState
from layout.compaction.plan import RewritePlan
from layout.manifest import StagedManifest
from layout.spec.sorting import written_sort_order_id
from layout.upkeep.cleanup import delete_staged

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyiceberg.manifest import ManifestFile
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.table import Table, Transaction
    from pyiceberg.table.snapshots import Snapshot

    from layout.manifest import StagedFile

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CommitResult:
    run_id: str
    snapshot_id: int | None  # None when there was nothing to commit
    files_removed: int
    files_added: int
    rows: int
    bytes_removed: int
    bytes_added: int
    seconds: float
    delete_files_removed: int = 0  # merge-on-read: delete files that applied only to the inputs


def commit_rewrite(table: Table, plan: RewritePlan, manifest: StagedManifest) -> CommitResult:
    """Commit the verified staged output; on any failure, clean up and raise.

    The caller made sure the verify step passed on exactly this manifest (its digest: `steps.commit`), so
    only `confirm_unchanged` runs here: the files are still the ones verified.
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
        return _commit(table, plan, manifest, started)
    except CommitStateUnknownException:
        # The catalog may have taken the commit: deleting the staged files could delete live data.
        log.error("commit of run %s: state unknown; staged files kept. Check the table's history, then run "
                  "`lakesort cleanup %s`, which removes only "
                  "unreferenced staged files", plan.run_id, plan.table)
        raise
    except BaseException:
        removed = delete_staged(table, plan.run_id)
        log.warning("commit of run %s abandoned: the table is unchanged; removed %d staged file(s)",
                    plan.run_id, removed)
        raise


# Against a writer that commits every few hundred milliseconds, what wins is a short path from reading
# the table to the catalog's compare-and-swap: attempts follow each other at once (a back-off only lets
# the other writer in again), each on freshly read state, until this deadline.
COMMIT_TIMEOUT_S = 300


def _commit(table: Table, plan: RewritePlan, manifest: StagedManifest, started: float) -> CommitResult:
    """One atomic snapshot that swaps the inputs for the outputs, retried while other writers commit.

    Validation is Iceberg's rewrite semantics (`_RewriteFiles`): every input must still be live and no new
    delete file may apply to it. Rows other writers appended meanwhile, even to the same partitions, do
    not conflict: the next plan picks them up. Delete files that applied to the inputs alone leave with them
    (`delete_files.DeleteState`).
    """

    inputs = {p for g in manifest.groups for p in g.inputs}
    outputs = [f for g in manifest.groups for f in g.outputs]
    if not inputs and not outputs:
        return CommitResult(plan.run_id, None, 0, 0, 0, 0, 0, time.perf_counter() - started)
    rows = sum(g.expected_rows for g in manifest.groups)
    added_bytes = sum(f.size for f in outputs)
    table = table.refresh()
    planned = table.snapshot_by_id(plan.snapshot_id) if plan.snapshot_id is not None else None
    planned_manifests = {m.manifest_path for m in planned.manifests(table.io)} if planned else set()
    scans = ManifestScans(inputs, planned_manifests)
    deletes = DeleteState(inputs, {d.path for g in plan.groups for d in g.deletes}, planned_manifests)
    live = scans.live(table)
    gone = sorted(inputs - live.keys())
    if gone:
        raise CommitRefused(f"{len(gone)} input file(s) are no longer in {plan.table} (a concurrent commit "
                            f"rewrote or removed them), e.g. {gone[0]}; "
                            "nothing committed, the next run retries")
    new_files = output_data_files(table, plan, outputs)
    removed_bytes = sum(live[p].file_size_in_bytes for p in inputs)
    props = {
        RUN_ID: plan.run_id, SPEC_HASH: plan.spec_hash, "lakesort.rows": str(rows),
        "lakesort.input-files": str(len(inputs)), "lakesort.output-files": str(len(outputs)),
        "lakesort.input-bytes": str(removed_bytes), "lakesort.output-bytes": str(added_bytes),
        "lakesort.base-snapshot-id": str(plan.snapshot_id),
    }
    deadline = time.monotonic() + COMMIT_TIMEOUT_S
    attempt = 0
    while True:
        attempt += 1
        if attempt > 1:
            table = table.refresh()
        if table.spec().spec_id != plan.partition_spec_id:
            raise CommitRefused(f"{plan.table}: the partition spec changed since planning (now "
                                f"{table.spec().spec_id}, planned {plan.partition_spec_id}); nothing "
                                "committed, the next run rewrites into the new spec")
        try:
            # The one step that changes the table: atomic in the catalog. Each attempt is built on the state
            # just read; the inputs' DataFiles (equal by path) are the ones read once above.
            with (
                _one_shot(table).transaction() as tx,
                _RewriteFiles.start(tx, table, props, scans, deletes) as rewrite,
            ):
                for path in sorted(inputs):
                    rewrite.delete_data_file(live[path])
                for df in new_files:
                    rewrite.append_data_file(df)
            # The attribute of start's RewriteFiles (its type, local to start, is not in start's signature).
            removed_deletes = len(rewrite._removed_deletes)  # type: ignore[attr-defined]
            break
        except ValidationException as exc:
            # An input was removed or got deletes since planning
            # (the producer checks it against the new state).
            raise CommitRefused(f"{plan.table} changed while committing ({exc}); nothing committed, the next "
                                "run retries") from exc
        except CommitFailedException as exc:
            if time.monotonic() > deadline:
                raise CommitRefused(f"{plan.table}: {attempt} commit attempts in {COMMIT_TIMEOUT_S}s lost "
                                    f"the race to other writers ({exc}); "
                                    "nothing committed, the next run retries") from exc
            (log.warning if attempt % 10 == 1 else log.debug)(
                "commit of run %s: the table moved on (attempt %d): %s; retrying at once on the new state",
                plan.run_id, attempt, exc)
    try:
        snapshot = _snapshot_of_run(table.refresh(), plan.run_id)
    except Exception:  # noqa: BLE001 - committed already: never let a refresh failure trigger cleanup
        snapshot = None
    result = CommitResult(plan.run_id, snapshot.snapshot_id if snapshot else None, len(inputs), len(outputs),
                          rows, removed_bytes, added_bytes, time.perf_counter() - started, removed_deletes)
    log.info("committed run %s as snapshot %s: %d files -> %d files, %d rows%s", plan.run_id,
             result.snapshot_id, len(inputs), len(outputs), rows,
             f"; {removed_deletes} delete file(s) that applied to them alone removed" if removed_deletes
             else "")
    return result


def _run_snapshot(table: Table, run_id: str) -> Snapshot | None:
    """The snapshot this run committed (others may have committed after it), or None."""
    for snap in reversed(table.snapshots()):
        if snap.summary is not None and snap.summary.additional_properties.get(RUN_ID) == run_id:
            return snap
    return None


def _snapshot_of_run(table: Table, run_id: str) -> Snapshot | None:
    return _run_snapshot(table, run_id) or table.current_snapshot()


def committed_run(table: Table, run_id: str) -> CommitResult | None:
    """What this run committed, from its snapshot's summary, when it has committed (an Airflow retry of a step
    whose commit went through before its worker died); None when it has not (or its snapshot has expired:
    `delete_staged` still keeps every file a snapshot references)."""
    snap = _run_snapshot(table, run_id)
    if snap is None:
        return None
    assert snap.summary is not None  # found by its summary
    props = snap.summary.additional_properties
    files_in, files_out, rows, bytes_in, bytes_out = (
        int(props.get(f"lakesort.{key}", 0)) for key in ("input-files", "output-files", "rows", "input-bytes",
                                                         "output-bytes"))
    return CommitResult(run_id, snap.snapshot_id, files_in, files_out, rows, bytes_in, bytes_out, 0.0)


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


def _one_shot(table: Table) -> Table:
    """The table with pyiceberg's own commit retries off (in memory only): `_commit` retries itself, at once
    and on freshly read state, where pyiceberg would back off up to seconds and revalidate each time."""

    properties = {**table.metadata.properties, "commit.retry.num-retries": "0"}
    return IcebergTable(identifier=table._identifier,
                        metadata=table.metadata.model_copy(update={"properties": properties}),
                        metadata_location=table.metadata_location, io=table.io, catalog=table.catalog)


class _RewriteFiles:
    """pyiceberg 0.12's overwrite producer, committed, validated and retried as Iceberg's RewriteFiles is.

    - Operation and summary: `replace`, with Java's summary (`_replace_summary`).

    - Validation: pyiceberg validates an overwrite at the table's isolation level, `serializable` by
      default, so any data file another writer added since the base snapshot fails it, and under a
      streaming ingest every compaction was thrown away. A rewrite changes no rows, so (as Java's
      `RewriteFiles`) it needs only its inputs still live (`_validate_required_deletes`, against the state
      the attempt is built on) and no delete file added since planning.
    - Speed of a retry: pyiceberg reads every manifest of the table again on each attempt, so against an
      ingest committing a manifest every few hundred milliseconds an attempt grows slower than the other
      writer's cycle and never wins. Manifests are immutable: what each holds of the inputs is read once
      per commit (`ManifestScans`) and later attempts read only the manifests that are new.
    """

    @staticmethod
    def start(tx: Transaction, table: Table, props: dict[str, str], scans: ManifestScans, deletes: DeleteState
              ) -> _OverwriteFiles:

        class RewriteFiles(_OverwriteFiles):
            _manifest_counts: dict[str, int]
            # The delete files this attempt removes (`_existing_manifests`).
            _removed_deletes: tuple[DataFile, ...] | list[DataFile] = ()
            _head: list[ManifestFile] | None = None

            def _validate_concurrency(self) -> None:
                """Never reached: pyiceberg's own retries are off (`_one_shot`);
                each attempt is built anew."""

            def _head_manifests(self) -> list[ManifestFile]:
                if self._head is None:  # once per attempt: both manifest passes below ask
                    metadata = self._transaction.table_metadata
                    snapshot = metadata.snapshot_by_name(name=self._target_branch)
                    manifests = snapshot.manifests(io=self._io) if snapshot else []
                    # Refuses a delete committed since planning that applies to an input
                    # (ValidationException).
                    deletes.update(manifests, self._io, metadata)
                    scans.removed = set(deletes.dangling())
                    self._head = manifests
                return self._head

            def _existing_manifests(self) -> list[ManifestFile]:
                out = []
                replaced = 0
                removed: list[DataFile] = []
                for manifest in self._head_manifests():
                    deleted, kept = scans.scan(manifest, self._io)
                    if not deleted:
                        out.append(manifest)
                        continue
                    replaced += 1
                    spec = self.spec(manifest.partition_spec_id)
                    if manifest.content == ManifestContent.DELETES:
                        # As Java filters a manifest: the removed delete files stay in it, as DELETED entries
                        # of this snapshot (pyiceberg's own deleted entries go to data manifests only).
                        removed += [e.data_file for e in deleted]
                        with self._delete_manifest_writer(spec) as writer:
                            for entry in kept:
                                writer.add_entry(_entry(ManifestEntryStatus.EXISTING,
                                                        entry.snapshot_id, entry))
                            for entry in deleted:
                                writer.add_entry(_entry(ManifestEntryStatus.DELETED,
                                                        self._snapshot_id, entry))
                        out.append(writer.to_manifest_file())
                    elif kept:
                        with self.new_manifest_writer(spec) as writer:
                            for entry in kept:
                                writer.add_entry(_entry(ManifestEntryStatus.EXISTING,
                                                        entry.snapshot_id, entry))
                        out.append(writer.to_manifest_file())
                self._manifest_counts = {"manifests-replaced": replaced}
                self._removed_deletes = removed
                return out

            def _delete_manifest_writer(self, spec: PartitionSpec) -> DeleteManifestWriter:
                return DeleteManifestWriter(spec, self.schema(), self.new_manifest_output(),
                                            self._snapshot_id, self._compression)

            def _process_manifests(self, manifests: list[ManifestFile]) -> list[ManifestFile]:
                created = sum(m.added_snapshot_id == self._snapshot_id for m in manifests)
                self._manifest_counts.update({"manifests-created": created,
                                              "manifests-kept": len(manifests) - created})
                return manifests

            def _summary(self, snapshot_properties: dict[str, str] | None = None) -> Summary:
                return _replace_summary(self, snapshot_properties or {}, ".".join(table.name()))

            def _deleted_entries(self) -> list[ManifestEntry]:
                entries = [
                    _entry(ManifestEntryStatus.DELETED, self._snapshot_id, e)
                    for manifest in self._head_manifests() if manifest.content == ManifestContent.DATA
                    for e in scans.scan(manifest, self._io)[0]
                ]
                self._validate_required_deletes(entries)
                return entries

        return RewriteFiles(operation=OPERATION, transaction=tx, io=table.io, snapshot_properties=props)


def _entry(status: ManifestEntryStatus, snapshot_id: int | None, entry: ManifestEntry) -> ManifestEntry:
    """`entry` with a new status (and the snapshot that gave it), its sequence numbers kept."""
    return ManifestEntry.from_args(status=status, snapshot_id=snapshot_id,
                                   sequence_number=entry.sequence_number,
                                   file_sequence_number=entry.file_sequence_number, data_file=entry.data_file)


# The operation of lakesort's commits. Older lakesort wrote `overwrite`
# (tests set it back to build such a history).
OPERATION = Operation.REPLACE


def _replace_summary(producer: _OverwriteFiles, snapshot_properties: dict[str, str],
                     table_name: str) -> Summary:
    """The summary Java's `RewriteFiles` writes: files, records and bytes added and removed, the changed
    partitions (per partition too, up to `write.summary.partition-limit`), the manifests created, kept and
    replaced, and the table's totals carried over from the parent; then lakesort's own properties.

    pyiceberg 0.12's `update_snapshot_summaries` refuses a `replace` ("Operation not implemented") though its
    arithmetic of the totals is the same for every operation: the totals are computed as for an overwrite, and
    the operation set after.
    """

    metadata = producer._transaction.table_metadata
    schema, specs = metadata.schema(), metadata.specs()
    limit = int(metadata.properties.get("write.summary.partition-limit", 0))
    collector = SnapshotSummaryCollector(partition_summary_limit=limit)
    # Each file under its own spec (pyiceberg puts added files under the current one: the same here, as the
    # commit refuses a spec changed since planning, but a wrong partition path if it ever were not).
    for data_file in producer._added_data_files:
        collector.add_file(data_file, schema, specs[data_file.spec_id])
    removed_deletes = getattr(producer, "_removed_deletes", [])
    for data_file in (*producer._deleted_data_files, *removed_deletes):
        collector.remove_file(data_file, schema, specs[data_file.spec_id])
    figures = collector.build()
    # Java counts the partitions by path, the unpartitioned one ("") included;
    # pyiceberg skips unpartitioned files.
    changed = {specs[f.spec_id].partition_to_path(f.partition, schema)
               for f in (*producer._added_data_files, *producer._deleted_data_files, *removed_deletes)}
    figures[CHANGED_PARTITION_COUNT_PROP] = str(len(changed))
    figures.update({key: str(n) for key, n in getattr(producer, "_manifest_counts", {}).items()})
    added, removed = int(figures.get(ADDED_RECORDS, 0)), int(figures.get(DELETED_RECORDS, 0))
    if added > removed:
        # Java's SnapshotProducer refuses this too: a rewrite never adds rows (a keyed merge may drop some).
        raise CommitRefused(f"{table_name}: run {snapshot_properties.get(RUN_ID)} would add {added} rows but "
                            f"remove {removed}, and a rewrite never adds rows; nothing committed. A bug in "
                            "lakesort: report it with the run's run.json")
    parent = (metadata.snapshot_by_id(producer._parent_snapshot_id)
              if producer._parent_snapshot_id is not None else None)
    totals = update_snapshot_summaries(Summary(operation=Operation.OVERWRITE, **figures,
                                               **snapshot_properties),
                                       previous_summary=parent.summary if parent is not None else None)
    return Summary(operation=producer._operation, **totals.additional_properties)


