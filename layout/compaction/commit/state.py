"""The table state a commit attempt is built on: the current snapshot, its live data and delete files.

Manifests are immutable: `StateReader` reads each one once per commit and every later attempt reads only the
manifests that are new. Against a writer committing every few hundred milliseconds that is what keeps an
attempt shorter than the writer's cycle (pyiceberg reads every manifest again on each attempt).

What is kept of a manifest: a `DataRef` of each live data file (which deletes apply to it), its entries when
it lists an input (a commit rewrites such a manifest), and every live entry of a delete manifest (few, and
a commit may remove some of them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyiceberg.manifest import DataFileContent, ManifestContent

from layout.compaction.executor import partitions as partitioning
from layout.read.deletes import DataRef, DeleteFile, delete_file_of

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pyiceberg.manifest import DataFile, ManifestEntry, ManifestFile
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

__all__ = ["LiveDelete", "ManifestRead", "StateReader", "TableState"]


@dataclass(frozen=True, slots=True)
class LiveDelete:
    """A live delete file: the rule's view (`rule`) and pyiceberg's DataFile (what a manifest records)."""

    rule: DeleteFile
    file: DataFile

    @property
    def path(self) -> str:
        return self.rule.path


@dataclass(frozen=True, slots=True)
class ManifestRead:
    """What the commit needs of one manifest."""

    manifest: ManifestFile
    data: tuple[DataRef, ...] = ()  # live data files
    inputs: tuple[ManifestEntry, ...] = ()  # live entries of the rewrite's inputs (data manifests)
    entries: tuple[ManifestEntry, ...] = ()  # every live entry, kept for data manifests listing an input
    deletes: tuple[LiveDelete, ...] = ()  # live delete files (delete manifests)

    @property
    def path(self) -> str:
        return self.manifest.manifest_path


@dataclass(frozen=True, slots=True)
class TableState:
    """The table as one attempt sees it: the refreshed table, its current snapshot and its manifests."""

    table: Table
    snapshot: Snapshot | None
    manifests: tuple[ManifestRead, ...]

    @property
    def spec_id(self) -> int:
        return self.table.spec().spec_id

    def live_inputs(self) -> dict[str, ManifestEntry]:
        """The rewrite's inputs live in this state: path -> its manifest entry."""
        return {e.data_file.file_path: e for m in self.manifests for e in m.inputs}

    def data(self) -> list[DataRef]:
        return [ref for m in self.manifests for ref in m.data]

    def deletes(self) -> list[LiveDelete]:
        return [d for m in self.manifests for d in m.deletes]


@dataclass
class StateReader:
    """Reads table states for one commit, each manifest once (`inputs`: the rewrite's data file paths)."""

    inputs: frozenset[str]
    _read: dict[str, ManifestRead] = field(default_factory=dict)

    def read(self, table: Table) -> TableState:
        table = table.refresh()
        snapshot = table.current_snapshot()
        manifests = snapshot.manifests(table.io) if snapshot is not None else []
        return TableState(table, snapshot, tuple(self._manifest(table, m) for m in manifests))

    def _manifest(self, table: Table, manifest: ManifestFile) -> ManifestRead:
        found = self._read.get(manifest.manifest_path)
        if found is None:
            found = self._read[manifest.manifest_path] = _read_manifest(table, manifest, self.inputs)
        return found


def _read_manifest(table: Table, manifest: ManifestFile, inputs: frozenset[str]) -> ManifestRead:
    spec = table.specs()[manifest.partition_spec_id]
    schema = table.schema()
    entries = manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    if manifest.content == ManifestContent.DELETES:
        deletes = []
        for entry in entries:
            df = entry.data_file
            df.spec_id = spec.spec_id
            rule = delete_file_of(df, sequence_number=entry.sequence_number or 0,
                                  partition=partitioning.encode(df.partition, spec, schema), spec=spec)
            deletes.append(LiveDelete(rule, df))
        return ManifestRead(manifest, deletes=tuple(deletes), entries=tuple(entries))
    data = tuple(_data_ref(e, spec, schema) for e in entries if e.data_file.content == DataFileContent.DATA)
    mine = tuple(e for e in entries if e.data_file.file_path in inputs)
    return ManifestRead(manifest, data=data, inputs=mine, entries=tuple(entries) if mine else ())


def _data_ref(entry: ManifestEntry, spec: PartitionSpec, schema: Schema) -> DataRef:
    df = entry.data_file
    return DataRef(df.file_path, spec.spec_id, partitioning.encode(df.partition, spec, schema),
                   entry.sequence_number or 0)


def paths(files: Iterable[DataFile]) -> frozenset[str]:
    return frozenset(f.file_path for f in files)
