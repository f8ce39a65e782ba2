"""What the Spark job does to its staged files outside Spark's writer: the Iceberg field ids parquet-mr
leaves out, and the files written in pieces stitched into one.

parquet-mr writes a struct field's `parquet.field.id` as its Parquet field id, but not the ids of list
elements and map keys/values. `nested_field_ids` gives those by the Parquet path Spark writes
(`x.list.element`, `x.key_value.key`, `x.key_value.value`), and `patch_staged_file` splices them into a
written footer (`layout.parquet.field_ids`), in the executors. `finish_staged_file` does that for one
output file, first stitching it from its pieces when several tasks wrote it
(`layout.compaction.executor.slots`, `layout.parquet.stitch`).
"""

from __future__ import annotations

from pyarrow.fs import FileSystem, FileType, LocalFileSystem
from pyiceberg import types as it
from pyiceberg.schema import Schema

from layout.io import resolve
from layout.parquet.field_ids import patch_path, with_field_ids
from layout.parquet.stitch import stitch

__all__ = ["finish_staged_file", "nested_field_ids", "patch_staged_file"]

STITCHED = "stitched-"  # a stitched file's name: this, then its first piece's name (no Spark task writes it)


def nested_field_ids(schema: Schema) -> dict[tuple[str, ...], int]:
    """Iceberg ids of `schema`'s list elements and map keys/values by their Parquet path."""

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

    visit(schema.as_struct(), ())
    return ids


def patch_staged_file(path: str, ids: dict[tuple[str, ...], int]) -> bool:
    """`patch_path`, then drop the checksum Hadoop's local file system keeps beside the file (`.<name>.crc`):
    it describes the bytes before the splice, and Spark's read-back of the file would refuse it."""
    changed = patch_path(path, ids)
    if changed:
        _drop_checksum(*resolve(path))
    return changed


def finish_staged_file(pieces: list[str], ids: dict[tuple[str, ...], int]) -> int:
    """One output file: a single piece gets the field ids (`patch_staged_file`); several are stitched, in this
    order, into `stitched-<first piece's name>` beside them with the ids in its footer, and then deleted.
    Returns 1 when a footer got ids. A failure leaves the pieces (and perhaps a partial stitched file) in the
    staging directory: the read-back then counts rows twice, and nothing is committed."""
    if len(pieces) == 1:
        return int(patch_staged_file(pieces[0], ids))
    filesystem, _ = resolve(pieces[0])  # the pieces share a directory
    locals_ = [resolve(location)[1] for location in pieces]
    directory, name = locals_[0].rsplit("/", 1)
    target = f"{directory}/{STITCHED}{name}"
    sources = [(location, filesystem.open_input_file(local))
               for location, local in zip(pieces, locals_, strict=True)]
    try:
        with filesystem.open_output_stream(target) as out:
            stitch(sources, out, footer_patch=(lambda footer: with_field_ids(footer, ids)) if ids else None)
    finally:
        for _, source in sources:
            source.close()
    for local in locals_:
        filesystem.delete_file(local)
        _drop_checksum(filesystem, local)
    return int(bool(ids))


def _drop_checksum(filesystem: FileSystem, path: str) -> None:
    """The checksum Hadoop's local file system keeps beside a file (`.<name>.crc`) no longer describes it."""
    if isinstance(filesystem, LocalFileSystem):
        directory, name = path.rsplit("/", 1)
        crc = f"{directory}/.{name}.crc"
        if filesystem.get_file_info(crc).type != FileType.NotFound:
            filesystem.delete_file(crc)
