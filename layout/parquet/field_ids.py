"""Field ids in a Parquet footer's schema: give list elements and map keys/values the ids Spark leaves out.

Spark writes `parquet.field.id` metadata as field ids only for struct fields: the element of a list and
the key and value of a map get none. Iceberg's Java reader then sees a file with ids and drops what has
none (list elements read as null), and pyiceberg reads such a file only through the table's name mapping.
So after the job writes a table with lists or maps, each file's footer gets the missing ids.

Only the footer's `schema` field changes, spliced in as bytes: every other byte of the file, and of the
footer (row groups, page index offsets, key-value metadata, fields this decoder does not know), is kept
as written. The splice is refused unless re-encoding the decoded schema reproduces the original bytes
exactly, so an element this decoder cannot represent is never silently altered.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from layout.io import resolve
from layout.parquet import format as fmt
from layout.parquet import thrift

MAGIC = b"PAR1"


class FieldIdError(ValueError):
    """The footer cannot be patched safely (named with the file by the caller)."""


def _schema_span(footer: bytes) -> tuple[int, int]:
    """Byte range of FileMetaData field 2 (`schema`, a list) within the footer, header excluded."""
    pos, last = 0, 0
    while True:
        header = footer[pos]
        pos += 1
        if header == thrift.T_STOP:
            raise FieldIdError("footer has no schema")
        wire, delta = header & 0x0F, header >> 4
        if delta:
            fid = last + delta
        else:
            raw, pos = thrift._read_varint(footer, pos)
            fid = (raw >> 1) ^ -(raw & 1)
        last = fid
        start = pos
        end = thrift._skip(footer, pos, wire, 0)
        if fid == 2:
            if wire != thrift.T_LIST:
                raise FieldIdError("footer schema is not a list")
            return start, end
        pos = end


def _decode_schema(data: bytes) -> list[fmt.SchemaElement]:
    header = data[0]
    size, pos = header >> 4, 1
    if size == 15:
        size, pos = thrift._read_varint(data, pos)
    out = []
    for _ in range(size):
        element, pos = thrift.decode_struct(fmt.SchemaElement, data, pos)
        out.append(element)
    if pos != len(data):
        raise FieldIdError("schema list has trailing bytes")
    return out


def _encode_schema(elements: list[fmt.SchemaElement]) -> bytes:
    spec = next(s for fid, _n, s, _r in fmt.THRIFT_FIELDS[fmt.FileMetaData] if fid == 2)
    out = bytearray()
    thrift._enc_value(spec, elements, out)
    return bytes(out)


def with_field_ids(footer: bytes, ids: Mapping[tuple[str, ...], int]) -> bytes:
    """The footer with `field_id` set on the schema nodes named by path (root excluded), e.g.
    `("tags", "list", "element")`. Existing ids are kept; returns the footer unchanged when nothing is new."""
    start, end = _schema_span(footer)
    original = footer[start:end]
    elements = _decode_schema(original)
    if _encode_schema(elements) != original:
        raise FieldIdError("the footer's schema does not re-encode to the same bytes")
    paths = _paths(elements)
    changed = False
    for i, path in enumerate(paths):
        if i and elements[i].field_id is None and path in ids:
            elements[i] = elements[i]._replace(field_id=ids[path])
            changed = True
    if not changed:
        return footer
    return footer[:start] + _encode_schema(elements) + footer[end:]


def _paths(elements: list[fmt.SchemaElement]) -> list[tuple[str, ...]]:
    """Each element's path of names from the root (depth-first, as the footer lists them)."""
    paths: list[tuple[str, ...]] = []
    stack: list[list[Any]] = []  # [path, children left]
    for element in elements:
        while stack and stack[-1][1] == 0:
            stack.pop()
        parent = stack[-1][0] if stack else None
        path = () if parent is None else (*parent, element.name or "")
        if stack:
            stack[-1][1] -= 1
        paths.append(path)
        if element.num_children:
            stack.append([path, element.num_children])
    return paths


def patch_file_bytes(data: bytes, ids: Mapping[tuple[str, ...], int]) -> bytes | None:
    """A whole file with its footer patched, or None when it already has every id."""
    if len(data) < 12 or data[:4] != MAGIC or data[-4:] != MAGIC:
        raise FieldIdError("not a Parquet file")
    length = struct.unpack("<I", data[-8:-4])[0]
    footer_start = len(data) - 8 - length
    footer = data[footer_start:-8]
    patched = with_field_ids(footer, ids)
    if patched is footer or patched == footer:
        return None
    return data[:footer_start] + patched + struct.pack("<I", len(patched)) + MAGIC


def patch_path(location: str, ids: Mapping[tuple[str, ...], int]) -> bool:
    """Patch one file in place (rewritten whole: object stores cannot append); True when it changed."""

    filesystem, path = resolve(location)
    with filesystem.open_input_file(path) as f:
        data = f.read()
    try:
        patched = patch_file_bytes(data, ids)
    except (FieldIdError, thrift.ThriftError) as exc:
        raise FieldIdError(f"{location}: cannot add field ids to the footer: {exc}") from exc
    if patched is None:
        return False
    with filesystem.open_output_stream(path) as out:
        out.write(patched)
    return True
