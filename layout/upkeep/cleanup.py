"""Cleanup of lakesort's staging area: delete only staged files nothing can need any more.

A file under `<table location>/data/lakesort-staging/` is deleted only when all three hold:

(a) no snapshot of the table references it. `table.metadata.snapshots` is every snapshot the table
    retains (the history, every branch and tag); a data or delete file is referenced by a snapshot when
    it is a live entry (ADDED or EXISTING) of one of the snapshot's manifests. A DELETED entry is not a
    reference: it records that the file left the table in that snapshot; the snapshots that still read
    it list it as live, and once those are expired nothing reads it. Manifests are immutable and shared
    between snapshots, so each is read once (`layout.maintenance.referenced`, which table maintenance
    uses for the whole table location).
(b) it is older than the grace period by mtime ($LAKESORT_CLEANUP_GRACE_HOURS, default 24 h).
(c) no run can still be writing or committing it: cleanup holds the table's lease (`layout.upkeep.lease`)
    while it works, and every run that stages files (the DAGs, `lakesort compact`) holds the lease from
    planning to commit. The grace period is the second guard, for a writer that does not.

The staged files are listed first and the table's snapshots read after, and read again just before
deleting: a commit that lands meanwhile (only a writer without the lease can) protects its files.
Paths are compared after normalisation (`file:///w/x` and `/w/x` are one file: `layout.io.resolve`).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyarrow import fs as pafs

from layout import storage
from layout.catalog import STAGING
from layout.errors import UsageError
from layout.io import resolve
from layout.maintenance.delete import aware as _aware
from layout.maintenance.referenced import References
from layout.settings import settings
from layout.upkeep.lease import LeaseOwner, refuse_if_held, table_lease

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CleanupResult:
    table: str
    dry_run: bool
    grace_hours: float
    deleted: tuple[str, ...]  # the files deleted (a dry run: the files a real run would delete now)
    bytes_deleted: int
    kept_referenced: int  # staged files some retained snapshot references
    kept_fresh: int  # unreferenced, but younger than the grace period (or without an mtime)
    dirs_removed: int
    snapshots: int
    manifests: int
    seconds: float

    @property
    def removed(self) -> int:
        return len(self.deleted)


def grace_period(hours: float | None = None) -> float:
    """The grace period in hours: `hours`, else $LAKESORT_CLEANUP_GRACE_HOURS, else 24."""
    if hours is None:
        hours = settings().cleanup_grace_hours
    if not hours >= 0:
        raise UsageError(f"the cleanup grace period must be >= 0 hours, got {hours}")
    return hours


def table_id(table: Table) -> str:
    """`namespace.name`: the key of the table's lease (as in the table specs)."""
    return ".".join(table.name())


def cleanup(table: Table, *, grace_hours: float | None = None, dry_run: bool = False,
            owner: LeaseOwner | None = None) -> CleanupResult:
    """Delete the staged files of `table` that no snapshot references, older than the grace period,
    under the table's lease (taken as `owner`, default a new cleanup owner; TableBusy if another run
    holds it). A dry run deletes nothing and takes no lease, but refuses like a real run when another
    run holds the lease (its staged files would be kept)."""
    ident = table_id(table)
    grace = grace_period(grace_hours)
    owner = owner or LeaseOwner.cleanup()
    if dry_run:
        refuse_if_held(ident, owner, why="its staged files are not orphans")
        return _cleanup(table, ident, grace, dry_run=True)
    with table_lease(ident, owner):
        return _cleanup(table, ident, grace, dry_run=False)


def _cleanup(table: Table, ident: str, grace: float, *, dry_run: bool) -> CleanupResult:

    started = time.perf_counter()
    filesystem, root = resolve(staging_root(table))
    if filesystem.get_file_info(root).type == pafs.FileType.NotFound:
        log.info("cleanup of %s: no staging directory %s, nothing to do", ident, root)
        return CleanupResult(ident, dry_run, grace, (), 0, 0, 0, 0, len(table.metadata.snapshots), 0,
                             time.perf_counter() - started)
    # 1. What is there (before reading the snapshots: a file committed after this listing is not in it).
    listing = filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
    files = [i for i in listing if i.type == pafs.FileType.File]
    dirs = [i for i in listing if i.type == pafs.FileType.Directory]
    listed = time.perf_counter()

    # 2. What every retained snapshot references (the table as of now: we hold the lease).
    table = table.refresh()
    refs = References.of_table(table.io)
    refs.add_snapshots(table.metadata.snapshots)
    read = time.perf_counter()

    # 3. Sort the files.
    now = dt.datetime.now(dt.UTC)
    cutoff = now - dt.timedelta(hours=grace)
    doomed, kept_referenced, kept_fresh = [], 0, 0
    for info in files:
        if info.path in refs.paths:
            kept_referenced += 1
        elif info.mtime is None or _aware(info.mtime) > cutoff:
            kept_fresh += 1
        else:
            doomed.append(info)
    # A commit since step 2 (only a writer without the lease can make one) protects its files too.
    table = table.refresh()
    if refs.add_snapshots(table.metadata.snapshots):
        late = [i for i in doomed if i.path in refs.paths]
        if late:
            log.warning("cleanup of %s: %d file(s) were committed while cleanup ran (a writer without the "
                        "table's lease?): kept", ident, len(late))
        kept_referenced += len(late)
        doomed = [i for i in doomed if i.path not in refs.paths]

    # 4. Delete.
    deleted, size = [], 0
    # In batches (`layout.storage.delete_many`: on S3 1,000 files a request); a file already gone is skipped.
    refused = {} if dry_run else storage.delete_many(filesystem, [info.path for info in doomed])
    for info in doomed:
        if info.path in refused:
            log.warning("cleanup of %s: could not delete %s: %s", ident, info.path, refused[info.path])
            continue
        log.info("cleanup of %s: %s %s (%d bytes, unreferenced, modified %s)", ident,
                 "would delete" if dry_run else "deleted", info.path, info.size or 0,
                 _aware(info.mtime).isoformat(timespec="seconds"))
        deleted.append(info.path)
        size += info.size or 0
    if refused:  # the rest is deleted; the storage's error for the first file it refused
        raise next(iter(refused.values()))
    dirs_removed = 0 if dry_run else _prune_empty_dirs(filesystem, root, dirs, cutoff)
    result = CleanupResult(ident, dry_run, grace, tuple(deleted), size, kept_referenced, kept_fresh,
                           dirs_removed, len(table.metadata.snapshots), len(refs.manifests),
                           time.perf_counter() - started)
    log.info(
        "cleanup of %s%s: %d staged file(s) listed; %s %d unreferenced file(s) older than %gh (%d bytes); "
        "kept %d referenced by one of %d snapshot(s) and %d younger than %gh; %d empty director%s removed; "
        "listing %.2fs, %d manifest(s) read in %.2fs, total %.2fs",
        ident, " (dry run)" if dry_run else "", len(files), "would delete" if dry_run else "deleted",
        len(deleted), grace, size, kept_referenced, result.snapshots, kept_fresh, grace, dirs_removed,
        "y" if dirs_removed == 1 else "ies", listed - started, result.manifests, read - listed,
        result.seconds)
    return result


def _prune_empty_dirs(filesystem: pafs.FileSystem, root: str, dirs: list[pafs.FileInfo], cutoff: dt.datetime
                      ) -> int:
    """Remove directories under the staging root left empty, deepest first; a directory modified inside
    the grace period stays (a writer may just have made it)."""

    removed = 0
    for info in sorted(dirs, key=lambda i: len(i.path), reverse=True):
        if info.mtime is not None and _aware(info.mtime) > cutoff:
            continue
        try:
            if not filesystem.get_file_info(pafs.FileSelector(info.path)):
                filesystem.delete_dir(info.path)
                removed += 1
        except (FileNotFoundError, OSError) as exc:
            log.debug("cleanup: kept directory %s (%s)", info.path, exc)
    return removed


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
        _prune_empty_staged_dirs(filesystem, path)
        return 0
    # Listed first, then the snapshots read: a file committed after the listing is in them.
    table = table.refresh()
    refs = References.of_table(table.io)
    refs.add_snapshots(table.metadata.snapshots)
    kept = {resolve(p)[1] for p in keep}
    referenced = sum(1 for info in files if info.path in refs)
    doomed = [info.path for info in files if info.path not in refs and info.path not in kept]
    refused = storage.delete_many(filesystem, doomed)  # in batches: on S3 1,000 files a request
    if refused:
        raise next(iter(refused.values()))
    removed = len(doomed)
    if referenced:
        log.warning("%s: kept %d staged file(s) of %s that a snapshot of the table references (committed)",
                    ".".join(table.name()), referenced, f"run {run_id}" if run_id else "every run")
    _prune_empty_staged_dirs(filesystem, path)
    return removed


def _prune_empty_staged_dirs(filesystem: pafs.FileSystem, path: str) -> None:

    dirs = sorted((i.path for i in filesystem.get_file_info(pafs.FileSelector(path, recursive=True))
                   if i.type == pafs.FileType.Directory), key=len, reverse=True)
    for d in [*dirs, path]:
        if not filesystem.get_file_info(pafs.FileSelector(d)):
            filesystem.delete_dir(d)
