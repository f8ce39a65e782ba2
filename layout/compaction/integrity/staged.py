"""Checks of a compaction's staged output before anything commits: nothing is lost.

`check_staged` (the verify step) compares, per group, the input's rows and fingerprint (computed by Spark
executors as they read the input) with what Spark read back from the staged files in storage after the write,
file by file, and re-reads a seeded sample of the files (or all, or none: $LAKESORT_RECHECK) outside Spark
with pyarrow to confirm Spark's figures with a second reader. `prove_staged` proves the output against
Iceberg's manifest statistics of the input, by field id, from metadata only
(`layout.compaction.integrity.proof`). `confirm_unchanged` is what the commit repeats: every verified file is
still there with its size. Nothing here reads all the data in one Python process.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from typing import TYPE_CHECKING

from pyiceberg.manifest import ManifestContent
from pyiceberg.schema import Schema

from layout.compaction.integrity.fingerprint import Fingerprint, fingerprint_files
from layout.compaction.integrity.proof import ProofFailed, check_group
from layout.compaction.plan import RewritePlan
from layout.errors import LakesortError
from layout.io import resolve
from layout.manifest import StagedFile, StagedManifest
from layout.settings import Recheck, settings

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile, ManifestEntry, ManifestFile
    from pyiceberg.table import Table

log = logging.getLogger(__name__)


class CommitRefused(LakesortError):
    """The staged output does not match its input, or the inputs changed: nothing was committed."""


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
                raise CommitRefused(f"group {group.group_id} ({group.partition}): staged file {f.path} "
                                    f"{what}; nothing committed, rerun the compaction")


def check_staged(manifest: StagedManifest, columns: list[str], *, recheck: Recheck | None = None,
                 sample_bytes: int | None = None) -> None:
    """Each group's staged files hold its input's rows: sizes as written, the rows Spark read back from every
    file equal to the footer's rows and, summed, to the group's input rows, and the fingerprints Spark read
    back, summed over all groups, to the input's (each row's hash salted with its group id, so a row in the
    wrong group shows; keyed tables: no duplicate or null key). Then `recheck` files ($LAKESORT_RECHECK: a
    seeded sample up to $LAKESORT_RECHECK_SAMPLE_BYTES, all, or none) are re-read with pyarrow and must give
    Spark's figures."""

    confirm_unchanged(manifest)
    for group in manifest.groups:
        where = f"group {group.group_id} ({group.partition})"
        unchecked = [f.path for f in group.outputs
                     if f.read_back_rows is None or f.read_back_hash_sum is None]
        if unchecked:
            raise CommitRefused(f"{where}: the job did not read back {unchecked[0]} (a manifest from an "
                                "older job?); nothing committed, rerun the compaction")
        for f in group.outputs:
            if f.read_back_rows != f.rows:
                raise CommitRefused(f"{where}: {f.path} reads back {f.read_back_rows} rows, its footer says "
                                    f"{f.rows}; nothing committed")
        if group.deleted_rows is not None:
            left = group.input_rows - group.deleted_rows
            keyed = group.duplicate_keys is not None
            if (group.expected_rows > left) if keyed else (group.expected_rows != left):
                raise CommitRefused(f"{where}: {group.input_rows} rows read less {group.deleted_rows} "
                                    f"deleted leave {left}, but the job meant to write "
                                    f"{group.expected_rows}; nothing committed")
        rows = sum(f.read_back_rows or 0 for f in group.outputs)
        if rows != group.expected_rows:
            raise CommitRefused(f"{where}: staged files hold {rows} rows, the input {group.expected_rows}; "
                                "nothing committed")
        if group.duplicate_keys or group.null_keys:
            raise CommitRefused(f"{where}: the staged files hold {group.duplicate_keys} duplicate and "
                                f"{group.null_keys} null key(s); nothing committed")
    hash_sum = sum(int(f.read_back_hash_sum or 0) for g in manifest.groups for f in g.outputs)
    if str(hash_sum) != manifest.expected_hash_sum:
        raise CommitRefused(f"content fingerprint of the staged files of {len(manifest.groups)} group(s) "
                            f"({hash_sum}) differs from the input's ({manifest.expected_hash_sum}): a row "
                            "was lost, changed, duplicated or written to another group's "
                            "files; nothing committed")
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
                                f"{got.hash_sum}), Spark read back {f.read_back_rows} "
                                f"({f.read_back_hash_sum}); nothing committed")
    return len(files)


def prove_staged(table: Table, plan: RewritePlan, manifest: StagedManifest) -> None:
    """The metadata proof (`layout.compaction.integrity.proof`) of every group: Iceberg's manifest statistics
    of its inputs against its staged files' footers, by field id. Reads metadata only; trusts neither Spark
    nor pyarrow's reading of the data. Raises `ProofFailed`
    (a `CommitRefused`) naming the group and column."""

    started = time.perf_counter()
    table = table.refresh()
    inputs = {p for g in manifest.groups for p in g.inputs}
    live = live_inputs(table, inputs)
    gone = sorted(inputs - live.keys())
    if gone:
        raise CommitRefused(f"{len(gone)} input file(s) are no longer in {plan.table}, e.g. {gone[0]}; "
                            "nothing committed, the next run retries")
    unproven: Counter[str] = Counter()
    for g in manifest.groups:
        try:
            result = check_group([live[p] for p in g.inputs], [f.path for f in g.outputs], table.metadata,
                                 table.io, group=f"{plan.table} group {g.group_id} "
                                                 f"({g.partition or 'unpartitioned'})",
                                 merged=plan.keys is not None, deleted=g.deleted_rows)
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


def live_inputs(table: Table, inputs: set[str]) -> dict[str, DataFile]:
    """The live DataFiles of the current snapshot among `inputs`, from the manifests (no scan planning)."""
    return ManifestScans(inputs, set()).live(table)


class ManifestScans:
    """What each manifest holds of a rewrite's inputs, read once per commit (manifests never change): the
    input check and every commit attempt share the reads."""

    def __init__(self, inputs: set[str], planned_manifests: set[str]) -> None:
        self._inputs = inputs  # data file paths, as the manifests record them
        self._seen: dict[str, tuple[list[ManifestEntry], list[ManifestEntry]]] = {}
        self._planned = planned_manifests  # the manifests of the snapshot planned against
        self._delete_entries: dict[str, list[ManifestEntry]] = {}  # delete manifest -> its live entries
        # Delete files the commit removes with the inputs
        # (`layout.compaction.commit.changes`), set per attempt.
        self.removed: set[str] = set()

    def is_new(self, manifest: ManifestFile) -> bool:
        return manifest.manifest_path not in self._planned

    def scan(self, manifest: ManifestFile, io: FileIO) -> tuple[list[ManifestEntry], list[ManifestEntry]]:
        """(entries of inputs, other live entries) of a data manifest; of a delete manifest, (entries of the
        delete files removed, other live entries), or ([], []) when it holds none of them."""

        key = manifest.manifest_path
        if manifest.content == ManifestContent.DELETES:
            if not self.removed:
                return [], []
            if key not in self._delete_entries:
                self._delete_entries[key] = manifest.fetch_manifest_entry(io, discard_deleted=True)
            entries = self._delete_entries[key]
            removed = [e for e in entries if e.data_file.file_path in self.removed]
            others = [e for e in entries if e.data_file.file_path not in self.removed] if removed else []
            return removed, others
        if key not in self._seen:
            found: list[ManifestEntry] = []
            kept: list[ManifestEntry] = []
            if manifest.content == ManifestContent.DATA:
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                    (found if entry.data_file.file_path in self._inputs else kept).append(entry)
            self._seen[key] = (found, kept if found else [])
        return self._seen[key]

    def live(self, table: Table) -> dict[str, DataFile]:
        """The inputs live in the table's current snapshot: path -> DataFile."""
        snapshot = table.current_snapshot()
        manifests = snapshot.manifests(table.io) if snapshot is not None else []
        return {e.data_file.file_path: e.data_file for m in manifests for e in self.scan(m, table.io)[0]}
