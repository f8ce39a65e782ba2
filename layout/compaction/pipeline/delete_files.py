"""The delete files a rewrite's commit removes, and those that forbid it: merge-on-read tables.

A rewrite replaces its inputs by files written after every existing delete (their sequence number is the new
snapshot's), so no existing delete file applies to the outputs. A delete file that applied to inputs and
applies to no other live data file is dangling once the inputs go: the commit removes it in the same snapshot
(Iceberg's rules, `layout.read.deletes`, decide both). Java's `RewriteFiles` removes the delete files a
rewrite names the same way (`rewriteFiles(dataFiles, deleteFiles, ...)`).

Concurrent writers, checked on every commit attempt against the state it is built on:
- a delete file committed since planning that applies to an input: its rows were in the rows the job wrote,
  and the outputs' higher sequence number would put them beyond its reach, so the deleted rows would come
  back: the commit is refused (`ValidationException`), the next run plans with it;
- data files committed meanwhile join the live files a delete may still apply to (a writer may commit files
  with an older data sequence number, as Iceberg's own rewrite does), so a delete file they need is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, cast

from pyiceberg.avro.file import AvroOutputFile
from pyiceberg.exceptions import ValidationException
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestWriterV2,
)
from pyiceberg.schema import Schema
from pyiceberg.types import IcebergType, IntegerType, ListType, NestedField, StructType

from layout.compaction.executor import partitions as partitioning
from layout.read.deletes import DataRef, DeleteFile, DeleteIndex, delete_file_of

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile, ManifestFile
    from pyiceberg.table.metadata import TableMetadata


class DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg 0.12's v2 manifest writer, for a manifest of delete files:
    its writer knows data manifests only.

    pyiceberg also declares `equality_ids` (field 135) a list of longs where the spec says ints; it never
    wrote a delete file, so nothing showed. Iceberg's Java reader fails on the longs (ClassCastException
    reading the manifest), so this writer declares them as the spec does."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}

    def new_writer(self) -> AvroOutputFile[ManifestEntry]:
        return AvroOutputFile[ManifestEntry](
            output_file=self._output_file, file_schema=_int_equality_ids(self._with_partition(self.version)),
            record_schema=_int_equality_ids(self._with_partition(DEFAULT_READ_VERSION)),
            schema_name="manifest_entry", metadata=self._meta)


_EQUALITY_IDS = 135  # data_file.equality_ids: list<int> (element id 136) in Iceberg's spec


def _int_equality_ids(schema: Schema) -> Schema:
    def fixed(kind: IcebergType) -> IcebergType:
        if not isinstance(kind, StructType):
            return kind
        return StructType(*[
            NestedField(f.field_id, f.name,
                        ListType(element_id=136, element_type=IntegerType(), element_required=True)
                        if f.field_id == _EQUALITY_IDS else fixed(f.field_type),
                        required=f.required, doc=f.doc)
            for f in kind.fields])

    struct = cast(StructType, fixed(schema.as_struct()))  # a struct stays a struct
    return Schema(*struct.fields, schema_id=schema.schema_id)


class DeleteState:
    """The live data and delete files of the states a commit's attempts are built on, read once per manifest.

    `inputs`: the rewrite's data files; `applied`: the delete files the plan applied (those are no conflict
    even when a manifest rewritten since planning lists them); `planned`:
    the manifests of the snapshot planned against.
    """

    def __init__(self, inputs: Iterable[str], applied: Iterable[str], planned: Iterable[str]) -> None:
        self.inputs = set(inputs)
        self.applied = set(applied)
        self.planned = set(planned)
        self._read: set[str] = set()
        self._data: dict[str, DataRef] = {}
        self._deletes: dict[str, tuple[DeleteFile, DataFile]] = {}
        self._listed: dict[str, list[str]] = {}  # delete manifest -> the delete files it lists as live
        self._live_deletes: set[str] = set()

    def update(self, manifests: Sequence[ManifestFile], io: FileIO, metadata: TableMetadata) -> None:
        """Read what is new in `manifests` (the attempt's base snapshot); refuse a new delete that applies to
        an input. Nothing is read while the state holds no delete manifest."""
        if not any(m.content == ManifestContent.DELETES for m in manifests):
            self._live_deletes = set()
            return
        schema, specs = metadata.schema(), metadata.specs()
        live: set[str] = set()
        for manifest in manifests:
            if manifest.manifest_path in self._read:
                live.update(self._listed.get(manifest.manifest_path, ()))
                continue
            self._read.add(manifest.manifest_path)
            spec = specs[manifest.partition_spec_id]
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                df = entry.data_file
                key = partitioning.encode(df.partition, spec, schema)
                if df.content == DataFileContent.DATA:
                    self._data[df.file_path] = DataRef(df.file_path, spec.spec_id, key,
                                                       entry.sequence_number or 0)
                    continue
                df.spec_id = spec.spec_id
                found = delete_file_of(df, sequence_number=entry.sequence_number or 0,
                                       partition=key, spec=spec)
                self._listed.setdefault(manifest.manifest_path, []).append(df.file_path)
                self._deletes[df.file_path] = (found, df)
                live.add(df.file_path)
                if manifest.manifest_path not in self.planned and df.file_path not in self.applied:
                    self._refuse_if_it_applies(found)
        self._live_deletes = live

    def _refuse_if_it_applies(self, delete: DeleteFile) -> None:
        for path in sorted(self.inputs):
            ref = self._data.get(path)
            if ref is not None and delete.applies_to(ref):
                raise ValidationException(
                    f"delete file {delete.path} was committed since planning and applies to input {path}: "
                    "the rows it deletes were rewritten into files it cannot reach")

    def dangling(self) -> dict[str, DataFile]:
        """The live delete files that apply to no live data file once the inputs are gone:
        path -> DataFile."""
        if not self._live_deletes:
            return {}
        live = [self._deletes[p][0] for p in sorted(self._live_deletes)]
        remaining = [ref for path, ref in self._data.items() if path not in self.inputs]
        return {d.path: self._deletes[d.path][1] for d in DeleteIndex(live).dangling(remaining)}
