"""Manifests of delete files, as pyiceberg 0.12 cannot write them: the commit removes delete files that apply
to no live data file once its inputs go, and adds position deletes carried onto its outputs
(`layout.compaction.commit`: which delete files those are, by Iceberg's rules in `layout.read.deletes`)."""

from __future__ import annotations

from typing import cast

from pyiceberg.avro.file import AvroOutputFile
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    ManifestContent,
    ManifestEntry,
    ManifestWriterV2,
)
from pyiceberg.schema import Schema
from pyiceberg.types import IcebergType, IntegerType, ListType, NestedField, StructType


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
