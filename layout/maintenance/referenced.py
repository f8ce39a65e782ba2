"""The files a table's snapshots and metadata reference: what must never be deleted.

A `References` collects normalised paths (`layout.io.resolve`'s form, as a listing of the storage
returns them), each with its kind:

- `metadata`: the table's metadata files, the current one and those its metadata log keeps;
- `manifest-list`: each added snapshot's manifest list; `manifest`: the manifests it lists;
- `data` and `delete`: the data and delete files of the manifests' live entries (ADDED or EXISTING). A
  DELETED entry is not a reference: it records that the file left the table in that snapshot; the
  snapshots that still read it list it as live, and once those are expired nothing reads it. With
  `removed=True` DELETED entries are collected too: the files any snapshot of that history ever
  committed (the known history, as opposed to orphans that no snapshot ever listed);
- `statistics`: the statistics and partition-statistics files the metadata lists.

Manifests are immutable and shared between snapshots (and between the reference sets of one
maintenance run: pass the same `Manifests`), so each is read once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pyiceberg.manifest import DataFileContent, ManifestEntryStatus

from layout.errors import LakesortError
from layout.io import resolve

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import ManifestFile
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

__all__ = ["KINDS", "Kind", "MaintenanceError", "Manifests", "Paths", "References", "metadata_version"]

log = logging.getLogger(__name__)

Kind = Literal["metadata", "manifest-list", "manifest", "data", "delete", "statistics"]
# Top-down: the order maintenance deletes in, so a run that stops half-way never leaves a metadata file,
# manifest list or manifest pointing at a file already gone (only unreferenced leaves remain).
KINDS: tuple[Kind, ...] = ("metadata", "manifest-list", "manifest", "data", "delete", "statistics")
# `00042-<uuid>.metadata.json` (also `.gz.metadata.json`, `.metadata.json.gz`): pyiceberg's and Java's names.
_METADATA_FILE = re.compile(r"(\d+)-[^/]*\.metadata\.json(\.gz)?")


class MaintenanceError(LakesortError):
    """Maintenance cannot tell safely what is referenced (or what is the table's): nothing was deleted."""


def metadata_version(path: str) -> int | None:
    """The version of a metadata file from its name (`00042-<uuid>.metadata.json` -> 42); None otherwise."""
    match = _METADATA_FILE.fullmatch(path.rpartition("/")[2])
    return int(match.group(1)) if match else None


class Paths:
    """Locations in `layout.io.resolve`'s normal form (`file:///w/x` and `/w/x` are one file)."""

    def __init__(self) -> None:
        self._dirs: dict[str, str] = {}

    def normalise(self, location: str) -> str:
        """Resolving an object-store URI builds a filesystem (and may ask the store for the bucket's
        region), so each directory is resolved once, not each entry."""
        directory, _, name = location.rpartition("/")
        if "://" not in location or not name or "%" in name or not directory.partition("://")[2] \
                or directory.endswith("/"):
            return resolve(location)[1]  # a local path (cheap), or a name URI-decoding would change
        if directory not in self._dirs:
            self._dirs[directory] = resolve(directory)[1].rstrip("/")
        return f"{self._dirs[directory]}/{name}"


@dataclass(frozen=True, slots=True)
class ManifestFacts:
    """What one manifest lists: its live entries (path, kind, bytes) and its DELETED ones (path, kind)."""

    live: tuple[tuple[str, Kind, int], ...]
    removed: tuple[tuple[str, Kind], ...]

    @property
    def live_bytes(self) -> int:
        return sum(size for _, _, size in self.live)


class Manifests:
    """The manifests of one table, each read once, however many snapshots and reference sets share it."""

    def __init__(self, io: FileIO, paths: Paths | None = None) -> None:
        self.io = io
        self.paths = paths or Paths()
        self._read: dict[str, ManifestFacts] = {}

    def __len__(self) -> int:
        return len(self._read)

    def of(self, manifest: ManifestFile) -> ManifestFacts:
        facts = self._read.get(manifest.manifest_path)
        if facts is None:
            live, removed = [], []
            try:
                # Every entry, then sorted by status: a DELETED entry is no reference (module docstring).
                entries = manifest.fetch_manifest_entry(self.io, discard_deleted=False)
            except Exception as exc:  # any failure to read means: the references are unknown
                raise MaintenanceError(f"cannot read the manifest {manifest.manifest_path} ({exc}): the "
                                       "files the table references are unknown, so nothing can be deleted "
                                       "safely; restore the manifest or repair the table") from exc
            for entry in entries:
                file = entry.data_file
                kind: Kind = "data" if file.content == DataFileContent.DATA else "delete"
                path = self.paths.normalise(file.file_path)
                if entry.status == ManifestEntryStatus.DELETED:
                    removed.append((path, kind))
                else:
                    live.append((path, kind, file.file_size_in_bytes))
            facts = ManifestFacts(tuple(live), tuple(removed))
            self._read[manifest.manifest_path] = facts
        return facts

    def of_snapshot(self, snapshot: Snapshot) -> list[tuple[ManifestFile, ManifestFacts]]:
        try:
            manifests = snapshot.manifests(self.io)
        except Exception as exc:  # as above: a snapshot whose files are unknown
            raise MaintenanceError(f"cannot read the manifest list {snapshot.manifest_list} of snapshot "
                                   f"{snapshot.snapshot_id} ({exc}): the files the table references are "
                                   "unknown, so nothing can be deleted safely; restore it or expire that "
                                   "snapshot first") from exc
        return [(manifest, self.of(manifest)) for manifest in manifests]


class References:
    """Normalised paths of the files some snapshots and metadata reference, each with its kind.

    `removed=True` adds the files of DELETED manifest entries too (the whole known history)."""

    def __init__(self, manifests: Manifests, *, removed: bool = False) -> None:
        self.manifests = manifests
        self.removed = removed
        self.paths: dict[str, Kind] = {}
        self.snapshot_ids: set[int] = set()
        self.metadata_files: set[str] = set()

    @classmethod
    def of_table(cls, io: FileIO, *, removed: bool = False) -> References:
        return cls(Manifests(io), removed=removed)

    def __contains__(self, path: str) -> bool:
        return path in self.paths

    def _add(self, location: str, kind: Kind) -> None:
        self.paths.setdefault(self.manifests.paths.normalise(location), kind)

    def add_snapshots(self, snapshots: Iterable[Snapshot]) -> int:
        """Add the snapshots not seen yet (manifest list, manifests, their entries); how many there were."""
        new = [s for s in snapshots if s.snapshot_id not in self.snapshot_ids]
        for snapshot in new:
            self._add(snapshot.manifest_list, "manifest-list")
            for manifest, facts in self.manifests.of_snapshot(snapshot):
                self._add(manifest.manifest_path, "manifest")
                for path, kind, _ in facts.live:
                    self.paths.setdefault(path, kind)
                if self.removed:
                    for path, kind in facts.removed:
                        self.paths.setdefault(path, kind)
            self.snapshot_ids.add(snapshot.snapshot_id)
        return len(new)

    def add_metadata(self, metadata: TableMetadata, location: str | None) -> int:
        """Add a version of the table: its metadata file (`location`; None for one not written, a dry
        run's), the metadata files its log keeps, its statistics files and its snapshots. Returns the
        number of snapshots not seen before."""
        for file in (location, *(entry.metadata_file for entry in metadata.metadata_log)):
            if file:
                self._add(file, "metadata")
                self.metadata_files.add(self.manifests.paths.normalise(file))
        for stats in (*metadata.statistics, *metadata.partition_statistics):
            self._add(stats.statistics_path, "statistics")
        return self.add_snapshots(metadata.snapshots)

    def live_bytes(self, snapshot: Snapshot | None) -> int:
        """Bytes of the data and delete files `snapshot` reads (0 for none)."""
        if snapshot is None:
            return 0
        return sum(facts.live_bytes for _, facts in self.manifests.of_snapshot(snapshot))
