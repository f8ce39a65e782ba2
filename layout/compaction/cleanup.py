"""Cleanup of lakesort's staging area: delete only staged files nothing can need any more.

A file under `<table location>/data/lakesort-staging/` is deleted only when all three hold:

(a) no snapshot of the table references it. `table.metadata.snapshots` is every snapshot the table
    retains (the history, every branch and tag); a data or delete file is referenced by a snapshot when
    it is a live entry (ADDED or EXISTING) of one of the snapshot's manifests. A DELETED entry is not a
    reference: it records that the file left the table in that snapshot; the snapshots that still read
    it list it as live, and once those are expired nothing reads it. Manifests are immutable and shared
    between snapshots, so each is read once.
(b) it is older than the grace period by mtime ($LAKESORT_CLEANUP_GRACE_HOURS, default 24 h).
(c) no run can still be writing or committing it: cleanup holds the table's lease (`layout.compaction.lease`)
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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyarrow import fs as pafs
from pyiceberg.manifest import ManifestEntryStatus

from layout.compaction.commit import staging_root
from layout.compaction.lease import LeaseOwner, TableBusy, lease_path, lease_ttl, read_lease, table_lease
from layout.errors import UsageError
from layout.io import resolve
from layout.settings import settings

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
        _refuse_if_held(ident, owner)
        return _cleanup(table, ident, grace, dry_run=True)
    with table_lease(ident, owner):
        return _cleanup(table, ident, grace, dry_run=False)


def _refuse_if_held(ident: str, owner: LeaseOwner) -> None:
    """What taking the lease would do, without taking it: TableBusy if another live run holds it."""
    held, path = read_lease(ident), lease_path(ident)
    if held is None or held.same_run(owner) or dt.datetime.now(dt.UTC) - held.acquired_at > lease_ttl():
        return
    raise TableBusy(f"{ident}: {held.describe()} is working on this table since "
                    f"{held.acquired_at.isoformat()} ({held.where()}; lease {path}): its staged files are "
                    f"not orphans; wait for it to finish, or, if that run is dead, remove {path}",
                    table=ident, path=path, holder=held)


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
    refs = _References(table)
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
    for info in doomed:
        if not dry_run:
            try:
                filesystem.delete_file(info.path)
            except FileNotFoundError:
                continue
        log.info("cleanup of %s: %s %s (%d bytes, unreferenced, modified %s)", ident,
                 "would delete" if dry_run else "deleted", info.path, info.size or 0,
                 _aware(info.mtime).isoformat(timespec="seconds"))
        deleted.append(info.path)
        size += info.size or 0
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


class _References:
    """Normalised paths of the live entries of the snapshots' manifests, each manifest read once."""

    def __init__(self, table: Table) -> None:
        self.io = table.io
        self.manifests: set[str] = set()
        self.snapshot_ids: set[int] = set()
        self.paths: set[str] = set()
        self._dirs: dict[str, str] = {}

    def add_snapshots(self, snapshots: Iterable) -> int:
        """Add the snapshots not seen yet; how many there were."""

        new = [s for s in snapshots if s.snapshot_id not in self.snapshot_ids]
        for snapshot in new:
            for manifest in snapshot.manifests(self.io):
                if manifest.manifest_path in self.manifests:
                    continue
                # Every entry, then only the live ones: a DELETED entry is no reference (module docstring).
                for entry in manifest.fetch_manifest_entry(self.io, discard_deleted=False):
                    if entry.status != ManifestEntryStatus.DELETED:
                        self.paths.add(self._normalise(entry.data_file.file_path))
                self.manifests.add(manifest.manifest_path)
            self.snapshot_ids.add(snapshot.snapshot_id)
        return len(new)

    def _normalise(self, location: str) -> str:
        """`layout.io.resolve`'s path, resolving each directory of a URI once: resolving an object-store
        URI builds a filesystem (and may ask the store for the bucket's region), so not once per entry."""
        directory, _, name = location.rpartition("/")
        if "://" not in location or not name or "%" in name or not directory.partition("://")[2] \
                or directory.endswith("/"):
            return resolve(location)[1]  # a local path (cheap), or a name URI-decoding would change
        if directory not in self._dirs:
            self._dirs[directory] = resolve(directory)[1].rstrip("/")
        return f"{self._dirs[directory]}/{name}"


def _aware(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _prune_empty_dirs(filesystem, root: str, dirs: list, cutoff: dt.datetime) -> int:
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
