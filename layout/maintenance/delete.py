"""Sorting the files under a table's location into kept and deleted, and deleting.

Every file listed under the location is, in this order:

1. **referenced** by the retained table (a retained snapshot's manifest list, manifests, live data and
   delete files; the current metadata file and those its metadata log keeps; statistics files the
   metadata lists): kept, whatever its age;
2. a file Iceberg needs by name (`version-hint.text`): kept;
3. **expired**: referenced by the table as it was before the expiry (any snapshot's entries, DELETED ones
   included: everything the history ever committed), or a metadata file older than every metadata file
   the log keeps (the versions beyond `write.metadata.previous-versions-max`): deleted at once;
4. an **orphan**, a file no snapshot of the history ever listed (a crashed writer's leftovers, a failed
   commit's metadata): deleted only once older than the grace period by modification time, because a
   writer that does not take lakesort's lease may have written files it has not committed yet. A file
   without a modification time is kept.

Paths are compared in `layout.io.resolve`'s normal form. As a last guard against a path the metadata
spells differently from the listing, a file about to be deleted whose *name* a retained reference has
(under another path) is kept with a warning (`Sorted.keep_aliases`): writers' file names are unique.

Files are deleted top-down (`referenced.KINDS`, then orphans): a run that stops half-way leaves only
unreferenced leaves, never a metadata file, manifest list or manifest pointing at a file already gone.
Directories are left alone (an empty one costs nothing, and a writer may be about to write into it).
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pyarrow import fs as pafs

from layout import storage
from layout.maintenance.referenced import KINDS, Kind, MaintenanceError, References, metadata_version

if TYPE_CHECKING:
    from pyarrow.fs import FileInfo, FileSystem

__all__ = ["DELETED_KINDS", "DeletedKind", "Sorted", "aware", "check_location", "delete", "list_files",
           "sort_files"]

log = logging.getLogger(__name__)

DeletedKind = Literal[Kind, "orphan"]
DELETED_KINDS: tuple[DeletedKind, ...] = (*KINDS, "orphan")
# Files Iceberg finds by name, not through the metadata (the Hadoop catalog's pointer to the current version).
PROTECTED_NAMES = frozenset({"version-hint.text"})


def aware(moment: dt.datetime) -> dt.datetime:
    """A listing's mtime in UTC (local filesystems give naive times in UTC)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def list_files(filesystem: FileSystem, root: str) -> list[FileInfo]:
    """Every file under `root` (recursive); none when `root` does not exist."""
    if filesystem.get_file_info(root).type == pafs.FileType.NotFound:
        return []
    return [i for i in filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
            if i.type == pafs.FileType.File]


@dataclass
class Sorted:
    """The files of a listing, sorted: what is deleted (by kind) and what is kept, and why."""

    doomed: dict[DeletedKind, list[FileInfo]] = field(default_factory=lambda: defaultdict(list))
    referenced: int = 0
    protected: int = 0
    young_orphans: list[FileInfo] = field(default_factory=list)
    late: int = 0  # doomed, then referenced by a commit that landed meanwhile: kept
    aliased: int = 0  # doomed, but a retained reference has the same file name: kept

    def files(self) -> list[tuple[DeletedKind, FileInfo]]:
        """The doomed files in deletion order (top-down, then orphans), by path within a kind."""
        return [(kind, info) for kind in DELETED_KINDS
                for info in sorted(self.doomed.get(kind, ()), key=lambda i: i.path)]

    def protect(self, retained: References) -> int:
        """Keep the doomed files `retained` now references (after it took in a newer commit); how many."""
        late = 0
        for kind, infos in list(self.doomed.items()):
            keep = [i for i in infos if i.path in retained]
            if keep:
                late += len(keep)
                self.doomed[kind] = [i for i in infos if i.path not in retained]
        self.late += late
        self.referenced += late
        return late

    def keep_aliases(self, retained: References) -> list[str]:
        """Keep the doomed files whose name a retained reference has under another path, and return them.

        File names under a table location are unique (writers put a UUID in each), so a retained
        reference with the same name is most likely this very file under another spelling of its path
        (a symlinked directory, another URI form): deleting it would break a snapshot. Kept, and said."""
        names = {path.rpartition("/")[2] for path in retained.paths}
        kept = []
        for kind, infos in list(self.doomed.items()):
            suspects = [i for i in infos if i.path.rpartition("/")[2] in names]
            if suspects:
                kept += [i.path for i in suspects]
                self.doomed[kind] = [i for i in infos if i.path.rpartition("/")[2] not in names]
        self.aliased += len(kept)
        return kept


def check_location(listing: Iterable[FileInfo], *, root: str, references: References) -> None:
    """Refuse (MaintenanceError) a location holding another table: a metadata file outside the directories
    of this table's own metadata files would mean every file of that other table looks like an orphan."""
    metadata_dirs = {f"{root}/metadata"} | {path.rpartition("/")[0] for path in references.metadata_files}
    for info in listing:
        if metadata_version(info.path) is not None and info.path.rpartition("/")[0] not in metadata_dirs:
            raise MaintenanceError(
                f"{info.path} looks like the metadata file of another table inside this table's location "
                f"{root}; a table location must not hold another table, so nothing was expired or deleted: "
                "move that table, or clean this one by hand")


def sort_files(listing: Iterable[FileInfo], *, retained: References, known: References,
               cutoff: dt.datetime) -> Sorted:
    """Sort `listing` (files under the table location) as the module docstring says: `retained`
    holds the references of the table after the expiry, `known` those of the table before it (DELETED
    entries included); orphans modified after `cutoff` are kept."""
    result = Sorted()
    kept_versions = [v for v in map(metadata_version, retained.metadata_files) if v is not None]
    oldest_kept = min(kept_versions) if kept_versions else None
    for info in listing:
        path = info.path
        name = path.rpartition("/")[2]
        version = metadata_version(path)
        if path in retained:
            result.referenced += 1
        elif name in PROTECTED_NAMES:
            result.protected += 1
        elif path in known:
            result.doomed[known.paths[path]].append(info)
        elif version is not None and oldest_kept is not None and version < oldest_kept:
            result.doomed["metadata"].append(info)  # left the metadata log at an earlier commit
        elif info.mtime is None or aware(info.mtime) > cutoff:
            result.young_orphans.append(info)
        else:
            result.doomed["orphan"].append(info)
    return result


# A storage that refuses this many deletions in a run is down or refusing on purpose: stop trying.
MAX_FAILED_DELETES = 20
# Files handed to the storage at once: S3's DeleteObjects limit.
BATCH = storage.DELETE_BATCH


def delete(filesystem: FileSystem, files: list[tuple[DeletedKind, FileInfo]], *, table: str,
           dry_run: bool) -> dict[DeletedKind, tuple[int, int]]:
    """Delete `files` in their order, a kind at a time in batches (`layout.storage.delete_many`: on S3 1,000
    files a request); (files, bytes) deleted per kind. A file already gone is skipped (someone else deleted
    it). A file the storage refuses to delete (after the client's own retries: an outage, a 503 SlowDown, a
    permission) is passed over and the rest of its kind still deleted; then the run stops before the next kind
    (top-down: the files left behind are never pointed at by a file deleted after them) and raises
    MaintenanceError naming the files it could not delete,
    what it deleted and what it left for a later run."""
    done: dict[DeletedKind, list[int]] = {kind: [0, 0] for kind in DELETED_KINDS}
    failed: list[tuple[DeletedKind, str, OSError]] = []
    verb = "would delete" if dry_run else "deleted"
    index = 0
    while index < len(files):
        kind = files[index][0]
        if failed and (kind != failed[-1][0] or len(failed) >= MAX_FAILED_DELETES):
            _refuse(table, failed, done, left=len(files) - index)
        def same_kind(f: tuple[DeletedKind, FileInfo], k: DeletedKind = kind) -> bool:
            return f[0] == k

        batch = [info for _, info in itertools.takewhile(same_kind, files[index:index + BATCH])]
        index += len(batch)
        refused = {} if dry_run else storage.delete_many(filesystem, [info.path for info in batch])
        for info in batch:
            if info.path in refused:
                log.warning("%s: could not delete %s %s: %s", table, kind, info.path, refused[info.path])
                failed.append((kind, info.path, refused[info.path]))
                continue
            # One line a file: at debug level for real runs (many a night), at info level for a dry run (the
            # list is what a dry run is for).
            log.log(logging.INFO if dry_run else logging.DEBUG, "%s: %s %s %s (%d bytes)", table, verb, kind,
                    info.path, info.size or 0)
            done[kind][0] += 1
            done[kind][1] += info.size or 0
    if failed:
        _refuse(table, failed, done, left=0)
    return {kind: (n, size) for kind, (n, size) in done.items()}


def _refuse(table: str, failed: list[tuple[DeletedKind, str, OSError]], done: dict[DeletedKind, list[int]], *,
            left: int) -> None:
    deleted = sum(n for n, _ in done.values())
    kind, path, exc = failed[0]
    shown = ("; ".join(p for _, p, _ in failed[:5])
             + (f"; and {len(failed) - 5} more" if len(failed) > 5 else ""))
    raise MaintenanceError(
        f"{table}: could not delete {len(failed)} unreferenced file(s) (the first, {kind} {path}: {exc}): "
        f"{shown}. {deleted} unreferenced file(s) were deleted, these and {left} more are left (deletion "
        "stops there, top-down, so no file left points at one already gone); the table and every retained "
        "snapshot read as before. Run maintenance again once the storage accepts deletions (a permission, an "
        "outage): what only the snapshots expired by this run referenced, and no retained manifest lists, "
        "counts as orphans then: deleted once older than the table's orphan grace") from exc
