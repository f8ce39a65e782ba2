"""Checking the staged output, the verified atomic commit, and cleanup of staged files.

Nothing is lost. `check_staged` (the verify step) compares, per group, the input's rows and fingerprint
(computed by Spark executors as they read the input) with what Spark read back from the staged files in
storage after the write, file by file, and re-reads a seeded sample of the files (or all, or none:
$LAKESORT_RECHECK) outside Spark with pyarrow to confirm Spark's figures with a second reader;
`prove_staged` proves the output against Iceberg's manifest statistics of the input, by field id, from
metadata only. Nothing there reads all the data in one Python process. The commit then checks only that
the verified files are unchanged (`confirm_unchanged`: the manifest's digest, by the caller, and every
file's size) and that every input file is still live; one Iceberg overwrite snapshot removes exactly the
input files and adds the staged ones. Any failure before that leaves the table as it was and deletes the
staged files. pyiceberg's optimistic commit fails cleanly when another writer committed in between.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pyarrow.parquet as pq
from pyarrow import fs as pafs
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, ValidationException
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
)
from pyiceberg.schema import Schema
from pyiceberg.table import Table as IcebergTable
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _OverwriteFiles

from layout.catalog import RUN_ID, SPEC_HASH, STAGING
from layout.compaction import partitions as partitioning
from layout.compaction.fingerprint import Fingerprint, fingerprint_files
from layout.compaction.plan import RewritePlan
from layout.compaction.proof import ProofFailed, check_group, footer_statistics
from layout.errors import LakesortError
from layout.io import resolve
from layout.maintenance.referenced import References
from layout.manifest import StagedFile, StagedManifest
from layout.settings import settings

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

Recheck = Literal["none", "sample", "all"]


class CommitRefused(LakesortError):
    """The staged output does not match its input, or the inputs changed: nothing was committed."""


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


def commit_rewrite(
    table: Table, plan: RewritePlan, manifest: StagedManifest, *,
    verify: Callable[[StagedManifest], None] | None = None, verified: bool = False,
) -> CommitResult:
    """Check the staged output against the manifest and commit it; on any failure, clean up and raise.

    `verified`: the caller made sure the verify step passed on exactly this manifest (its digest), so only
    `confirm_unchanged` runs here; otherwise `check_staged` and `prove_staged` run first, then `verify`
    (layout verification), which may raise to refuse.
    """

    started = time.perf_counter()
    done = committed_run(table.refresh(), plan.run_id)
    if done is not None:  # a retried step after the commit went through: its files are the table's now
        log.info("run %s is already committed as snapshot %s: nothing to do", plan.run_id, done.snapshot_id)
        return done
    try:
        if manifest.run_id != plan.run_id:
            raise CommitRefused(f"manifest is for run {manifest.run_id}, the plan for {plan.run_id}")
        if verified:
            confirm_unchanged(manifest)
        else:
            check_staged(manifest, staged_columns(plan))
            prove_staged(table, plan, manifest)
            if verify is not None:
                verify(manifest)
        return _commit(table, plan, manifest, started)
    except CommitStateUnknownException:
        # The catalog may have taken the commit: deleting the staged files could delete live data.
        log.error("commit of run %s: state unknown; staged files kept. Check the table's history, then run "
                  "`lakesort cleanup %s`, which removes only unreferenced staged files", plan.run_id, plan.table)
        raise
    except BaseException:
        removed = delete_staged(table, plan.run_id)
        log.warning("commit of run %s abandoned: the table is unchanged; removed %d staged file(s)",
                    plan.run_id, removed)
        raise


def staged_columns(plan: RewritePlan) -> list[str]:
    """The columns the job fingerprinted, in order (the order is part of the hash)."""

    return [f.name for f in Schema.model_validate_json(plan.table_schema_json).fields]


def confirm_unchanged(manifest: StagedManifest) -> None:
    """Every staged file is where the manifest says, with its size: what verify checked is what commits."""

    for group in manifest.groups:
        for f in group.outputs:
            filesystem, path = resolve(f.path)
            size = filesystem.get_file_info(path).size
            if size != f.size:
                what = "is gone" if size is None else f"has {size} bytes, {f.size} when it was verified"
                raise CommitRefused(f"group {group.group_id} ({group.partition}): staged file {f.path} {what}; "
                                    "nothing committed, rerun the compaction")


def check_staged(manifest: StagedManifest, columns: list[str], *, recheck: Recheck | None = None,
                 sample_bytes: int | None = None) -> None:
    """Each group's staged files hold its input's rows: sizes as written, the rows Spark read back from every
    file equal to the footer's rows and, summed, to the group's input rows, and the fingerprints Spark read
    back, summed over all groups, to the input's (each row's hash salted with its group id, so a row in the
    wrong group shows; keyed tables: no duplicate or null key). Then `recheck` files ($LAKESORT_RECHECK: a seeded sample up to
    $LAKESORT_RECHECK_SAMPLE_BYTES, all, or none) are re-read with pyarrow and must give Spark's figures."""

    confirm_unchanged(manifest)
    for group in manifest.groups:
        where = f"group {group.group_id} ({group.partition})"
        unchecked = [f.path for f in group.outputs if f.read_back_rows is None or f.read_back_hash_sum is None]
        if unchecked:
            raise CommitRefused(f"{where}: the job did not read back {unchecked[0]} (a manifest from an older job?); "
                                "nothing committed, rerun the compaction")
        for f in group.outputs:
            if f.read_back_rows != f.rows:
                raise CommitRefused(f"{where}: {f.path} reads back {f.read_back_rows} rows, its footer says {f.rows}; "
                                    "nothing committed")
        rows = sum(f.read_back_rows or 0 for f in group.outputs)
        if rows != group.expected_rows:
            raise CommitRefused(f"{where}: staged files hold {rows} rows, the input {group.expected_rows}; "
                                "nothing committed")
        if group.duplicate_keys or group.null_keys:
            raise CommitRefused(f"{where}: the staged files hold {group.duplicate_keys} duplicate and "
                                f"{group.null_keys} null key(s); nothing committed")
    hash_sum = sum(int(f.read_back_hash_sum or 0) for g in manifest.groups for f in g.outputs)
    if str(hash_sum) != manifest.expected_hash_sum:
        raise CommitRefused(f"content fingerprint of the staged files of {len(manifest.groups)} group(s) ({hash_sum}) "
                            f"differs from the input's ({manifest.expected_hash_sum}): a row was lost, changed, "
                            "duplicated or written to another group's files; nothing committed")
    rechecked = _recheck(manifest, columns, recheck or settings().recheck,
                         sample_bytes if sample_bytes is not None else settings().recheck_sample_bytes)
    log.info("staged output checked: %d group(s), %d file(s): rows and fingerprints match (Spark read-back); "
             "%d file(s) re-read outside Spark", len(manifest.groups),
             sum(len(g.outputs) for g in manifest.groups), rechecked)


def _recheck(manifest: StagedManifest, columns: list[str], mode: Recheck, budget: int) -> int:
    """Re-read files with pyarrow (a reader other than Spark's); each must give Spark's read-back figures."""

    group_of = {f.path: g.group_id for g in manifest.groups for f in g.outputs}
    files: list[StagedFile] = [f for g in manifest.groups for f in g.outputs]
    if mode == "none":
        return 0
    if mode == "sample":
        random.Random(manifest.run_id).shuffle(files)
        chosen, total = [], 0
        for f in files:
            if total + f.size <= budget:
                chosen.append(f)
                total += f.size
        files = chosen
    for f in files:
        filesystem, path = resolve(f.path)
        got = fingerprint_files([path], filesystem=filesystem, columns=columns, salt=group_of[f.path])
        if got != Fingerprint(f.read_back_rows or 0, int(f.read_back_hash_sum or 0)):
            raise CommitRefused(f"{f.path}: re-read outside Spark it holds {got.rows} rows (fingerprint "
                                f"{got.hash_sum}), Spark read back {f.read_back_rows} ({f.read_back_hash_sum}); "
                                "nothing committed")
    return len(files)


# Against a writer that commits every few hundred milliseconds, what wins is a short path from reading
# the table to the catalog's compare-and-swap: attempts follow each other at once (a back-off only lets
# the other writer in again), each on freshly read state, until this deadline.
COMMIT_TIMEOUT_S = 300


def prove_staged(table: Table, plan: RewritePlan, manifest: StagedManifest) -> None:
    """The metadata proof (`layout.compaction.proof`) of every group: Iceberg's manifest statistics of its inputs
    against its staged files' footers, by field id. Reads metadata only; trusts neither Spark nor pyarrow's
    reading of the data. Raises `ProofFailed` (a `CommitRefused`) naming the group and column."""

    started = time.perf_counter()
    table = table.refresh()
    inputs = {p for g in manifest.groups for p in g.inputs}
    live = _live_inputs(table, inputs)
    gone = sorted(inputs - live.keys())
    if gone:
        raise CommitRefused(f"{len(gone)} input file(s) are no longer in {plan.table}, e.g. {gone[0]}; nothing "
                            "committed, the next run retries")
    unproven: Counter[str] = Counter()
    for g in manifest.groups:
        try:
            result = check_group([live[p] for p in g.inputs], [f.path for f in g.outputs], table.metadata,
                                 table.io, group=f"{plan.table} group {g.group_id} ({g.partition or 'unpartitioned'})",
                                 merged=plan.keys is not None)
        except ProofFailed as exc:
            raise CommitRefused(str(exc)) from exc
        for line in result.unproven:
            unproven[line] += 1
    log.info("metadata proof: %d group(s), %d input and %d output file(s) agree by field id, in %.2fs",
             len(manifest.groups), len(inputs), sum(len(g.outputs) for g in manifest.groups),
             time.perf_counter() - started)
    if unproven:  # e.g. truncated string upper bounds: the fingerprint covers them
        log.info("  not provable from metadata alone: %s",
                 "; ".join(f"{line} (in {n} group(s))" for line, n in sorted(unproven.items())))


def _commit(table: Table, plan: RewritePlan, manifest: StagedManifest, started: float) -> CommitResult:
    """One atomic snapshot that swaps the inputs for the outputs, retried while other writers commit.

    Validation is Iceberg's rewrite semantics (`_RewriteFiles`): every input must still be live and no new
    delete file may apply to it. Rows other writers appended meanwhile, even to the same partitions, do
    not conflict: the next plan picks them up.
    """

    inputs = {p for g in manifest.groups for p in g.inputs}
    outputs = [f for g in manifest.groups for f in g.outputs]
    if not inputs and not outputs:
        return CommitResult(plan.run_id, None, 0, 0, 0, 0, 0, time.perf_counter() - started)
    rows = sum(g.expected_rows for g in manifest.groups)
    added_bytes = sum(f.size for f in outputs)
    table = table.refresh()
    planned = table.snapshot_by_id(plan.snapshot_id) if plan.snapshot_id is not None else None
    scans = ManifestScans(inputs, {m.manifest_path for m in planned.manifests(table.io)} if planned else set())
    live = scans.live(table)
    gone = sorted(inputs - live.keys())
    if gone:
        raise CommitRefused(f"{len(gone)} input file(s) are no longer in {plan.table} (a concurrent commit "
                            f"rewrote or removed them), e.g. {gone[0]}; nothing committed, the next run retries")
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
            raise CommitRefused(f"{plan.table}: the partition spec changed since planning (now {table.spec().spec_id}, "
                                f"planned {plan.partition_spec_id}); nothing committed, the next run rewrites into the new spec")
        try:
            # The one step that changes the table: atomic in the catalog. Each attempt is built on the state
            # just read; the inputs' DataFiles (equal by path) are the ones read once above.
            with _one_shot(table).transaction() as tx, _RewriteFiles.start(tx, table, props, scans) as rewrite:
                for path in sorted(inputs):
                    rewrite.delete_data_file(live[path])
                for df in new_files:
                    rewrite.append_data_file(df)
            break
        except ValidationException as exc:
            # An input was removed or got deletes since planning (the producer checks it against the new state).
            raise CommitRefused(f"{plan.table} changed while committing ({exc}); nothing committed, the next run "
                                "retries") from exc
        except CommitFailedException as exc:
            if time.monotonic() > deadline:
                raise CommitRefused(f"{plan.table}: {attempt} commit attempts in {COMMIT_TIMEOUT_S}s lost the race to "
                                    f"other writers ({exc}); nothing committed, the next run retries") from exc
            (log.warning if attempt % 10 == 1 else log.debug)(
                "commit of run %s: the table moved on (attempt %d): %s; retrying at once on the new state",
                plan.run_id, attempt, exc)
    try:
        snapshot = _snapshot_of_run(table.refresh(), plan.run_id)
    except Exception:  # noqa: BLE001 - committed already: never let a refresh failure trigger cleanup
        snapshot = None
    result = CommitResult(plan.run_id, snapshot.snapshot_id if snapshot else None, len(inputs), len(outputs), rows,
                          removed_bytes, added_bytes, time.perf_counter() - started)
    log.info("committed run %s as snapshot %s: %d files -> %d files, %d rows", plan.run_id, result.snapshot_id,
             len(inputs), len(outputs), rows)
    return result


def _run_snapshot(table: Table, run_id: str):
    """The snapshot this run committed (others may have committed after it), or None."""
    for snap in reversed(table.snapshots()):
        if snap.summary is not None and snap.summary.additional_properties.get(RUN_ID) == run_id:
            return snap
    return None


def _snapshot_of_run(table: Table, run_id: str):
    return _run_snapshot(table, run_id) or table.current_snapshot()


def committed_run(table: Table, run_id: str) -> CommitResult | None:
    """What this run committed, from its snapshot's summary, when it has committed (an Airflow retry of a step
    whose commit went through before its worker died); None when it has not (or its snapshot has expired:
    `delete_staged` still keeps every file a snapshot references)."""
    snap = _run_snapshot(table, run_id)
    if snap is None:
        return None
    props = snap.summary.additional_properties
    files_in, files_out, rows, bytes_in, bytes_out = (
        int(props.get(f"lakesort.{key}", 0)) for key in ("input-files", "output-files", "rows", "input-bytes",
                                                         "output-bytes"))
    return CommitResult(run_id, snap.snapshot_id, files_in, files_out, rows, bytes_in, bytes_out, 0.0)


def _live_inputs(table: Table, inputs: set[str]) -> dict:
    """The live DataFiles of the current snapshot among `inputs`, from the manifests (no scan planning)."""
    return ManifestScans(inputs, set()).live(table)


def output_data_files(table: Table, plan: RewritePlan, outputs) -> list:
    """DataFiles of the staged outputs: statistics from their footers as pyiceberg computes them, partition
    values from the job (the plan's spec), never inferred from footer min/max."""


    schema, spec = table.schema(), table.specs()[plan.partition_spec_id]
    order_id = table.sort_order().order_id
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
            # The rows are sorted by the table's order when the spec takes its keys from it (the default).
            sort_order_id=order_id or None, equality_ids=None, key_metadata=None, **serialized,
        )
        data_file.spec_id = spec.spec_id
        files.append(data_file)
    return files


def _one_shot(table: Table) -> Table:
    """The table with pyiceberg's own commit retries off (in memory only): `_commit` retries itself, at once
    and on freshly read state, where pyiceberg would back off up to seconds and revalidate each time."""

    properties = {**table.metadata.properties, "commit.retry.num-retries": "0"}
    return IcebergTable(identifier=table._identifier, metadata=table.metadata.model_copy(update={"properties": properties}),
                        metadata_location=table.metadata_location, io=table.io, catalog=table.catalog)


class _RewriteFiles:
    """pyiceberg 0.12's overwrite, validated and retried as Iceberg's RewriteFiles is.

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
    def start(tx, table: Table, props: dict[str, str], scans: ManifestScans):

        class RewriteFiles(_OverwriteFiles):
            def _validate_concurrency(self) -> None:
                """Never reached: pyiceberg's own retries are off (`_one_shot`); each attempt is built anew."""

            def _head_manifests(self):
                snapshot = self._transaction.table_metadata.snapshot_by_name(name=self._target_branch)
                manifests = snapshot.manifests(io=self._io) if snapshot else []
                for manifest in manifests:
                    if manifest.content == ManifestContent.DELETES and scans.is_new(manifest):
                        raise ValidationException(
                            f"a delete file was committed since planning (manifest {manifest.manifest_path}); "
                            "it may apply to the inputs")
                return manifests

            def _existing_manifests(self):
                out = []
                for manifest in self._head_manifests():
                    deleted, kept = scans.scan(manifest, self._io)
                    if not deleted:
                        out.append(manifest)
                    elif kept:
                        with self.new_manifest_writer(self.spec(manifest.partition_spec_id)) as writer:
                            for entry in kept:
                                writer.add_entry(ManifestEntry.from_args(
                                    status=ManifestEntryStatus.EXISTING, snapshot_id=entry.snapshot_id,
                                    sequence_number=entry.sequence_number,
                                    file_sequence_number=entry.file_sequence_number, data_file=entry.data_file))
                        out.append(writer.to_manifest_file())
                return out

            def _deleted_entries(self):
                entries = [
                    ManifestEntry.from_args(status=ManifestEntryStatus.DELETED, snapshot_id=self._snapshot_id,
                                            sequence_number=e.sequence_number,
                                            file_sequence_number=e.file_sequence_number, data_file=e.data_file)
                    for manifest in self._head_manifests()
                    for e in scans.scan(manifest, self._io)[0]
                ]
                self._validate_required_deletes(entries)
                return entries

        return RewriteFiles(operation=Operation.OVERWRITE, transaction=tx, io=table.io, snapshot_properties=props)


class ManifestScans:
    """What each manifest holds of a rewrite's inputs, read once per commit (manifests never change): the
    input check and every commit attempt share the reads."""

    def __init__(self, inputs: set[str], planned_manifests: set[str]) -> None:
        self._inputs = inputs  # data file paths, as the manifests record them
        self._seen: dict[str, tuple[list, list]] = {}
        self._planned = planned_manifests  # the manifests of the snapshot planned against

    def is_new(self, manifest) -> bool:
        return manifest.manifest_path not in self._planned

    def scan(self, manifest, io) -> tuple[list, list]:
        """(entries of inputs, other live entries) of a data manifest; ([], []) for others."""

        key = manifest.manifest_path
        if key not in self._seen:
            found: list = []
            kept: list = []
            if manifest.content == ManifestContent.DATA:
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                    (found if entry.data_file.file_path in self._inputs else kept).append(entry)
            self._seen[key] = (found, kept if found else [])
        return self._seen[key]

    def live(self, table: Table) -> dict:
        """The inputs live in the table's current snapshot: path -> DataFile."""
        snapshot = table.current_snapshot()
        manifests = snapshot.manifests(table.io) if snapshot is not None else []
        return {e.data_file.file_path: e.data_file for m in manifests for e in self.scan(m, table.io)[0]}


def staging_root(table: Table) -> str:
    return f"{table.location().rstrip('/')}/data/{STAGING}"


def delete_staged(table: Table, run_id: str | None = None, *, keep: Sequence[str] = ()) -> int:
    """Delete staged files of one run (or of every run), except `keep` and every file a snapshot of the table
    references: a committed run's staged files are the table's files, and a failure path that runs after the
    commit went through (an Airflow retry of verify or commit) must not delete them."""

    root = staging_root(table) + (f"/{run_id}" if run_id else "")
    filesystem, path = resolve(root)
    if filesystem.get_file_info(path).type == pafs.FileType.NotFound:
        return 0
    files = [i for i in filesystem.get_file_info(pafs.FileSelector(path, recursive=True))
             if i.type == pafs.FileType.File]
    if not files:
        _prune_empty_dirs(filesystem, path)
        return 0
    # Listed first, then the snapshots read: a file committed after the listing is in them.
    table = table.refresh()
    refs = References.of_table(table.io)
    refs.add_snapshots(table.metadata.snapshots)
    kept = {resolve(p)[1] for p in keep}
    removed = referenced = 0
    for info in files:
        if info.path in refs:
            referenced += 1
        elif info.path not in kept:
            filesystem.delete_file(info.path)
            removed += 1
    if referenced:
        log.warning("%s: kept %d staged file(s) of %s that a snapshot of the table references (committed)",
                    ".".join(table.name()), referenced, f"run {run_id}" if run_id else "every run")
    _prune_empty_dirs(filesystem, path)
    return removed


def _prune_empty_dirs(filesystem, path: str) -> None:

    dirs = sorted((i.path for i in filesystem.get_file_info(pafs.FileSelector(path, recursive=True))
                   if i.type == pafs.FileType.Directory), key=len, reverse=True)
    for d in [*dirs, path]:
        if not filesystem.get_file_info(pafs.FileSelector(d)):
            filesystem.delete_dir(d)
