"""The verified atomic commit, and cleanup of staged files.

Nothing is lost: before anything is committed, every staged file is re-read (outside Spark), its rows
recounted and the content fingerprint recomputed; only when both equal the input's (or, for keyed
tables, the merged input's) figures from the manifest, and every input file is still live in the
table, one Iceberg overwrite snapshot removes exactly the input files and adds the staged ones. Any
failure before that leaves the table as it was and deletes the staged files. pyiceberg's optimistic
commit fails cleanly when another writer committed in between.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from layout.errors import LakesortError
from layout.manifest import StagedManifest
from layout.rewrite import RUN_ID, SPEC_HASH, RewritePlan

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

STAGING = "lakesort-staging"


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
    verify: Callable[[StagedManifest], None] | None = None,
) -> CommitResult:
    """Check the staged output against the manifest and commit it; on any failure, clean up and raise.

    `verify` runs after the row and fingerprint checks and may raise to refuse (layout verification).
    """
    from pyiceberg.exceptions import CommitStateUnknownException

    started = time.perf_counter()
    try:
        if manifest.run_id != plan.run_id:
            raise CommitRefused(f"manifest is for run {manifest.run_id}, the plan for {plan.run_id}")
        check_staged(manifest, _columns(plan))
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


def _columns(plan: RewritePlan) -> list[str]:
    """The columns the job fingerprinted, in order (the order is part of the hash)."""
    from pyiceberg.schema import Schema

    return [f.name for f in Schema.model_validate_json(plan.table_schema_json).fields]


def check_staged(manifest: StagedManifest, columns: list[str]) -> None:
    """Recount rows and recompute the fingerprint of each group's staged files."""
    from layout.fingerprint import fingerprint_files
    from layout.io import resolve

    for group in manifest.groups:
        paths = [f.path for f in group.outputs]
        located = [resolve(p) for p in paths]
        missing = [p for p, (fs, path) in zip(paths, located) if fs.get_file_info(path).size is None]
        if missing:
            raise CommitRefused(f"group {group.group_id} ({group.partition}): staged file(s) missing: "
                                f"{', '.join(missing)}; nothing committed, rerun the compaction")
        got = fingerprint_files([path for _, path in located], filesystem=located[0][0] if located else None,
                                columns=columns)
        if got.rows != group.expected_rows:
            raise CommitRefused(
                f"group {group.group_id} ({group.partition}): staged files hold {got.rows} rows, the input "
                f"{group.expected_rows}; nothing committed")
        if str(got.hash_sum) != group.expected_hash_sum:
            raise CommitRefused(
                f"group {group.group_id} ({group.partition}): content fingerprint of the staged files "
                f"({got.hash_sum}) differs from the input's ({group.expected_hash_sum}); nothing committed")
    log.info("staged output checked: %d group(s), rows and fingerprints match", len(manifest.groups))


def _commit(table: Table, plan: RewritePlan, manifest: StagedManifest, started: float) -> CommitResult:
    from pyiceberg.io.pyarrow import parquet_files_to_data_files

    table = table.refresh()
    inputs = {p for g in manifest.groups for p in g.inputs}
    outputs = [f.path for g in manifest.groups for f in g.outputs]
    if not inputs and not outputs:
        return CommitResult(plan.run_id, None, 0, 0, 0, 0, 0, time.perf_counter() - started)
    live = {t.file.file_path: t.file for t in table.scan().plan_files()}
    gone = sorted(inputs - live.keys())
    if gone:
        raise CommitRefused(f"{len(gone)} input file(s) are no longer in {plan.table} (a concurrent commit "
                            f"rewrote or removed them), e.g. {gone[0]}; nothing committed, the next run retries")
    new_files = list(parquet_files_to_data_files(io=table.io, table_metadata=table.metadata, file_paths=iter(outputs)))
    order_id = table.sort_order().order_id
    if order_id:  # the rows are sorted by the table's order (the spec defaults to it)
        for df in new_files:
            df.sort_order_id = order_id
    rows = sum(g.expected_rows for g in manifest.groups)
    removed_bytes = sum(live[p].file_size_in_bytes for p in inputs)
    added_bytes = sum(f.size for g in manifest.groups for f in g.outputs)
    props = {
        RUN_ID: plan.run_id, SPEC_HASH: plan.spec_hash, "lakesort.rows": str(rows),
        "lakesort.input-files": str(len(inputs)), "lakesort.output-files": str(len(outputs)),
        "lakesort.input-bytes": str(removed_bytes), "lakesort.output-bytes": str(added_bytes),
        "lakesort.base-snapshot-id": str(plan.snapshot_id),
    }
    # The one step that changes the table: atomic in the catalog, refused if anyone committed since refresh.
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    try:
        with table.transaction() as tx, tx.update_snapshot(snapshot_properties=props).overwrite() as overwrite:
            for path in sorted(inputs):
                overwrite.delete_data_file(live[path])
            for df in new_files:
                overwrite.append_data_file(df)
    except (CommitFailedException, ValidationException) as exc:
        # Another writer committed first (pyiceberg validates before the catalog swap): nothing changed.
        raise CommitRefused(f"{plan.table} changed while committing ({exc}); nothing committed, the next run "
                            "retries") from exc
    try:
        snapshot = table.refresh().current_snapshot()
    except Exception:  # noqa: BLE001 - committed already: never let a refresh failure trigger cleanup
        snapshot = None
    result = CommitResult(plan.run_id, snapshot.snapshot_id if snapshot else None, len(inputs), len(outputs), rows,
                          removed_bytes, added_bytes, time.perf_counter() - started)
    log.info("committed run %s as snapshot %s: %d files -> %d files, %d rows", plan.run_id, result.snapshot_id,
             len(inputs), len(outputs), rows)
    return result


def staging_root(table: Table) -> str:
    return f"{table.location().rstrip('/')}/data/{STAGING}"


def delete_staged(table: Table, run_id: str | None = None, *, keep: Sequence[str] = ()) -> int:
    """Delete staged files of one run (or of every run), except files the table references (`keep`)."""
    from pyarrow import fs as pafs

    from layout.io import resolve

    root = staging_root(table) + (f"/{run_id}" if run_id else "")
    filesystem, path = resolve(root)
    if filesystem.get_file_info(path).type == pafs.FileType.NotFound:
        return 0
    referenced = {resolve(p)[1] for p in keep}
    removed = 0
    for info in filesystem.get_file_info(pafs.FileSelector(path, recursive=True)):
        if info.type == pafs.FileType.File and info.path not in referenced:
            filesystem.delete_file(info.path)
            removed += 1
    _prune_empty_dirs(filesystem, path)
    return removed


def _prune_empty_dirs(filesystem, path: str) -> None:
    from pyarrow import fs as pafs

    dirs = sorted((i.path for i in filesystem.get_file_info(pafs.FileSelector(path, recursive=True))
                   if i.type == pafs.FileType.Directory), key=len, reverse=True)
    for d in [*dirs, path]:
        if not filesystem.get_file_info(pafs.FileSelector(d)):
            filesystem.delete_dir(d)


def cleanup(table: Table) -> int:
    """Remove staged files orphaned by crashed runs: everything under the staging root not in the table."""
    live = [t.file.file_path for t in table.scan().plan_files()] if table.current_snapshot() else []
    removed = delete_staged(table, None, keep=live)
    log.info("cleanup of %s: removed %d orphaned staged file(s)", table.name(), removed)
    return removed
