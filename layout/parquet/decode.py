"""The footer's structures from their Thrift bytes: FileMetaData, ColumnIndex, OffsetIndex.

The format layer under `layout.parquet.reader`: these take bytes already read and name the file in
their errors; which bytes to read, and when, is the reader's business."""

from __future__ import annotations

from typing import TypeVar

from layout.errors import ParquetError
from layout.parquet import format as fmt
from layout.parquet.thrift import ThriftError, decode_struct

__all__ = ["decode_column_index", "decode_file_metadata", "decode_offset_index"]

_S = TypeVar("_S")


def decode_file_metadata(data: bytes, path: str = "<bytes>") -> fmt.FileMetaData:
    """Decode a serialized FileMetaData (the footer without length and magic)."""
    return _decode(fmt.FileMetaData, data, path, "footer (FileMetaData)")


def decode_column_index(data: bytes, path: str = "<bytes>") -> fmt.ColumnIndex:
    return _decode(fmt.ColumnIndex, data, path, "column index")


def decode_offset_index(data: bytes, path: str = "<bytes>") -> fmt.OffsetIndex:
    return _decode(fmt.OffsetIndex, data, path, "offset index")


def _decode(cls: type[_S], data: bytes, path: str, what: str) -> _S:
    try:
        return decode_struct(cls, data)[0]
    except ThriftError as e:
        raise ParquetError(path, f"corrupt {what}: {e}") from None
