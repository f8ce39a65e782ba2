"""What the Spark job does to its staged files outside Spark's writer: the Iceberg field ids parquet-mr
leaves out, and the names it gives them.

parquet-mr writes a struct field's `parquet.field.id` as its Parquet field id, but not the ids of list
elements and map keys/values. `nested_field_ids` gives those by the Parquet path Spark writes
(`x.list.element`, `x.key_value.key`, `x.key_value.value`), and `patch_staged_file` splices them into a
written footer (`layout.parquet.field_ids`), in the executors.
"""

from __future__ import annotations

from pyarrow.fs import FileType, LocalFileSystem
from pyiceberg import types as it
from pyiceberg.schema import Schema

from layout.io import resolve
from layout.parquet.field_ids import patch_path

__all__ = ["nested_field_ids", "patch_staged_file"]


def nested_field_ids(schema_json: str) -> dict[tuple[str, ...], int]:
    """Iceberg ids of list elements and map keys/values (of the schema as JSON) by their Parquet path."""

    ids: dict[tuple[str, ...], int] = {}

    def visit(t: it.IcebergType, path: tuple[str, ...]) -> None:
        if isinstance(t, it.StructType):
            for f in t.fields:
                visit(f.field_type, (*path, f.name))
        elif isinstance(t, it.ListType):
            ids[(*path, "list", "element")] = t.element_id
            visit(t.element_type, (*path, "list", "element"))
        elif isinstance(t, it.MapType):
            ids[(*path, "key_value", "key")] = t.key_id
            ids[(*path, "key_value", "value")] = t.value_id
            visit(t.key_type, (*path, "key_value", "key"))
            visit(t.value_type, (*path, "key_value", "value"))

    visit(Schema.model_validate_json(schema_json).as_struct(), ())
    return ids


def patch_staged_file(path: str, ids: dict[tuple[str, ...], int]) -> bool:
    """`patch_path`, then drop the checksum Hadoop's local file system keeps beside the file (`.<name>.crc`):
    it describes the bytes before the splice, and Spark's read-back of the file would refuse it."""
    changed = patch_path(path, ids)
    filesystem, local = resolve(path)
    if changed and isinstance(filesystem, LocalFileSystem):
        directory, name = local.rsplit("/", 1)
        crc = f"{directory}/.{name}.crc"
        if filesystem.get_file_info(crc).type != FileType.NotFound:
            filesystem.delete_file(crc)
    return changed
