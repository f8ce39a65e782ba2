"""The one adapter that touches pyiceberg 0.12's private snapshot-producer API: it writes a `replace`
snapshot from a `Changes` value and a `TableState`, nothing else (validation happened before).

- Added data files are written with an explicit data sequence number (the plan's snapshot's), as Java's
  `RewriteFiles` with `dataSequenceNumber` writes them; pyiceberg 0.12 would let them inherit the new
  snapshot's number. Readers (Java's `InheritableMetadata`, pyiceberg's `_inherit_from_manifest`) inherit a
  sequence number only where the entry has none; the file sequence number is left to inherit (it is the
  snapshot that wrote the file). The manifest's min_sequence_number records the explicit number.
- A manifest listing a removed data or delete file is rewritten as Java filters one: its other live entries
  EXISTING, the removed files DELETED entries of this snapshot (in the same manifest).
- Carried position deletes: a delete manifest of ADDED entries (their sequence number the new snapshot's).
- The summary is Java's for `replace` (`_replace_summary`), then lakesort's own properties.
- pyiceberg's own retries are off (`one_shot`): the commit retries itself, at once, on a freshly read state.
- Every attempt of a part commits under one snapshot id and reuses the manifests an earlier attempt (or the
  warm-up pass, `prepare_manifests`) wrote for the same content (`ManifestCache`), as Java's SnapshotProducer
  keeps its id and its written manifests across retries: manifests are immutable, so what remains between
  reading the state and the catalog's compare-and-swap is the manifest list and the table metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus
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
from pyiceberg.table.update.snapshot import _SnapshotProducer

from layout.catalog import RUN_ID
from layout.compaction.commit.delete_manifests import DeleteManifestWriter
from layout.compaction.integrity.staged import CommitRefused

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyiceberg.manifest import DataFile, ManifestFile
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.table import Table, Transaction

    from layout.compaction.commit.changes import Changes
    from layout.compaction.commit.state import TableState

__all__ = ["OPERATION", "ManifestCache", "ReplaceProducer", "commit_replace", "one_shot", "prepare_manifests",
           "replace_summary"]

# The operation of lakesort's commits. Older lakesort wrote `overwrite` (tests set it back to build one).
OPERATION = Operation.REPLACE


def one_shot(table: Table) -> Table:
    """The table with pyiceberg's own commit retries off (in memory only)."""
    properties = {**table.metadata.properties, "commit.retry.num-retries": "0"}
    return IcebergTable(identifier=table._identifier,
                        metadata=table.metadata.model_copy(update={"properties": properties}),
                        metadata_location=table.metadata_location, io=table.io, catalog=table.catalog)


@dataclass
class ManifestCache:
    """The snapshot id of a part's attempts and the manifests they wrote, by what each holds."""

    snapshot_id: int | None = None
    manifests: dict[tuple[object, ...], ManifestFile] = field(default_factory=dict)


def commit_replace(state: TableState, changes: Changes, properties: dict[str, str], *,
                   cache: ManifestCache | None = None) -> int:
    """Commit `changes` as one `replace` snapshot on `state` (the catalog's compare-and-swap refuses it with
    CommitFailedException when the table moved on); returns the new snapshot's id."""
    with one_shot(state.table).transaction() as tx:
        producer = ReplaceProducer(tx, state, changes, properties, cache=cache)
        producer.commit()
    return producer.snapshot_id


def prepare_manifests(state: TableState, changes: Changes, properties: dict[str, str],
                      cache: ManifestCache) -> None:
    """Write the manifests a commit of `changes` on `state` needs into `cache`, committing nothing: the slow
    part of an attempt, done before the attempt that races other writers."""
    ReplaceProducer(one_shot(state.table).transaction(), state, changes, properties, cache=cache)._manifests()


class ReplaceProducer(_SnapshotProducer["ReplaceProducer"]):
    def __init__(self, tx: Transaction, state: TableState, changes: Changes, properties: dict[str, str], *,
                 cache: ManifestCache | None = None) -> None:
        super().__init__(operation=OPERATION, transaction=tx, io=state.table.io,
                         snapshot_properties=properties)
        self._cache = cache if cache is not None else ManifestCache()
        if self._cache.snapshot_id is None:
            self._cache.snapshot_id = self._snapshot_id
        else:  # the part's id: the manifests written for it name it as the snapshot that added them
            self._snapshot_id = self._cache.snapshot_id
        self._state = state
        self._changes = changes
        self._table_name = ".".join(state.table.name())
        self._counts: dict[str, int] = {}
        for entry in changes.remove_data:
            self._deleted_data_files.add(entry.data_file)
        self._added_data_files.extend(changes.add_data)

    def _validate_concurrency(self) -> None:
        """Validation is `layout.compaction.commit.validate`, before this producer exists."""

    def _deleted_entries(self) -> list[ManifestEntry]:  # pyiceberg's abstract; `_manifests` is ours
        return []

    def _existing_manifests(self) -> list[ManifestFile]:
        return []

    def _manifests(self) -> list[ManifestFile]:
        state, changes = self._state, self._changes
        assert self._parent_snapshot_id == (state.snapshot.snapshot_id if state.snapshot else None), \
            "the producer is built on the state validated"
        removed = changes.removed_paths
        out: list[ManifestFile] = []
        replaced = 0
        cache = self._cache.manifests
        for read in state.manifests:
            gone = [e for e in read.entries if e.data_file.file_path in removed]
            if not gone:
                out.append(read.manifest)
                continue
            replaced += 1
            key: tuple[object, ...] = ("filtered", read.path, frozenset(e.data_file.file_path for e in gone))
            if key not in cache:
                kept = [e for e in read.entries if e.data_file.file_path not in removed]
                cache[key] = self._write(read.manifest.content, read.manifest.partition_spec_id, [
                    *(_entry(ManifestEntryStatus.EXISTING, entry.snapshot_id, entry) for entry in kept),
                    *(_entry(ManifestEntryStatus.DELETED, self._snapshot_id, entry) for entry in gone)])
            out.append(cache[key])
        created: list[ManifestFile] = []
        for spec_id, files in _by_spec(changes.add_data).items():
            key = ("data", spec_id, changes.data_sequence_number, frozenset(df.file_path for df in files))
            if key not in cache:
                cache[key] = self._write(ManifestContent.DATA, spec_id, [ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id,
                    sequence_number=changes.data_sequence_number, file_sequence_number=None, data_file=df)
                    for df in files])
            created.append(cache[key])
        for spec_id, files in _by_spec(changes.add_deletes).items():
            key = ("deletes", spec_id, frozenset(df.file_path for df in files))
            if key not in cache:
                cache[key] = self._write(ManifestContent.DELETES, spec_id, [ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id, sequence_number=None,
                    file_sequence_number=None, data_file=df) for df in files])
            created.append(cache[key])
        manifests = created + out
        made = sum(m.added_snapshot_id == self._snapshot_id for m in manifests)
        self._counts = {"manifests-created": made, "manifests-kept": len(manifests) - made,
                        "manifests-replaced": replaced}
        return manifests

    def _write(self, content: ManifestContent, spec_id: int, entries: list[ManifestEntry]) -> ManifestFile:
        with self._writer(content, self.spec(spec_id)) as writer:
            for entry in entries:
                writer.add_entry(entry)
        written: ManifestFile = writer.to_manifest_file()
        return written

    def _writer(self, content: ManifestContent, spec: PartitionSpec) -> Any:
        if content == ManifestContent.DELETES:
            return DeleteManifestWriter(spec, self.schema(), self.new_manifest_output(), self._snapshot_id,
                                        self._compression)
        return self.new_manifest_writer(spec)

    def _summary(self, snapshot_properties: dict[str, str] | None = None) -> Summary:
        metadata = self._transaction.table_metadata
        parent = (metadata.snapshot_by_id(self._parent_snapshot_id)
                  if self._parent_snapshot_id is not None else None)
        return replace_summary(
            metadata, added=self._changes.add_data + self._changes.add_deletes,
            removed=(*self._deleted_data_files, *(d.file for d in self._changes.remove_deletes)),
            counts=self._counts, properties=snapshot_properties or {},
            previous=parent.summary if parent is not None else None, table_name=self._table_name,
            operation=self._operation)


def _by_spec(files: Sequence[DataFile]) -> dict[int, list[DataFile]]:
    out: dict[int, list[DataFile]] = {}
    for df in files:
        out.setdefault(df.spec_id, []).append(df)
    return out


def _entry(status: ManifestEntryStatus, snapshot_id: int | None, entry: ManifestEntry) -> ManifestEntry:
    """`entry` with a new status (and the snapshot that gave it), its sequence numbers kept."""
    return ManifestEntry.from_args(status=status, snapshot_id=snapshot_id,
                                   sequence_number=entry.sequence_number,
                                   file_sequence_number=entry.file_sequence_number, data_file=entry.data_file)


def replace_summary(metadata: Any, *, added: Sequence[DataFile], removed: Sequence[DataFile],
                    counts: dict[str, int], properties: dict[str, str], previous: Summary | None,
                    table_name: str, operation: Operation = OPERATION) -> Summary:
    """The summary Java's `RewriteFiles` writes: files, records and bytes added and removed (delete files
    too), the changed partitions (per partition too, up to `write.summary.partition-limit`), the manifests
    created, kept and replaced, and the table's totals carried over from the parent; then lakesort's own
    properties.

    pyiceberg 0.12's `update_snapshot_summaries` refuses a `replace` ("Operation not implemented") though its
    arithmetic of the totals is the same for every operation: the totals are computed as for an overwrite, and
    the operation set after.
    """
    schema, specs = metadata.schema(), metadata.specs()
    limit = int(metadata.properties.get("write.summary.partition-limit", 0))
    collector = SnapshotSummaryCollector(partition_summary_limit=limit)
    for data_file in added:
        collector.add_file(data_file, schema, specs[data_file.spec_id])
    for data_file in removed:
        collector.remove_file(data_file, schema, specs[data_file.spec_id])
    figures = collector.build()
    # Java counts the partitions by path, the unpartitioned one ("") included;
    # pyiceberg skips unpartitioned files.
    changed = {specs[f.spec_id].partition_to_path(f.partition, schema) for f in (*added, *removed)}
    figures[CHANGED_PARTITION_COUNT_PROP] = str(len(changed))
    figures.update({key: str(n) for key, n in counts.items()})
    added_rows, removed_rows = int(figures.get(ADDED_RECORDS, 0)), int(figures.get(DELETED_RECORDS, 0))
    if added_rows > removed_rows:
        # Java's SnapshotProducer refuses this too: a rewrite never adds rows (a keyed merge may drop some).
        raise CommitRefused(f"{table_name}: run {properties.get(RUN_ID)} would add {added_rows} rows but "
                            f"remove {removed_rows}, and a rewrite never adds rows; nothing committed. A bug "
                            "in lakesort: report it with the run's run.json")
    totals = update_snapshot_summaries(Summary(operation=Operation.OVERWRITE, **figures, **properties),
                                       previous_summary=previous)
    return Summary(operation=operation, **totals.additional_properties)
