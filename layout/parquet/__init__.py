"""Parquet metadata for pruning: footer, column index, offset index and bloom filters of any file.

    pf = ParquetFile.open(path)            # reads and decodes the footer only
    pf.statistics(rg, "col")               # TypedStatistics | None
    pf.column_index(rg, "col")             # TypedColumnIndex | None, read on first request, memoized
    pf.offset_index(rg, "col")             # OffsetIndex | None
    pf.bloom_filter(rg, "col")             # BloomFilter | None

Errors about the file (corrupt, truncated, encrypted, not Parquet) are `layout.errors.ParquetError`.

May import: the ground floor (errors, io) only. It knows no predicates: `layout.expr` and `layout.read`
sit above it.
"""

from layout.parquet.bloom import BloomFilter
from layout.parquet.decode import decode_column_index, decode_file_metadata, decode_offset_index
from layout.parquet.format import (
    BoundaryOrder,
    ColumnIndex,
    ConvertedType,
    FileMetaData,
    OffsetIndex,
    PageLocation,
    PhysicalType,
)
from layout.parquet.reader import ParquetFile
from layout.parquet.schema import Column
from layout.parquet.statistics import TypedColumnIndex, TypedStatistics, WriterVersion
from layout.parquet.types import ColumnType, SortOrder

__all__ = [
    "BloomFilter", "BoundaryOrder", "Column", "ColumnIndex", "ColumnType", "ConvertedType", "FileMetaData",
    "OffsetIndex", "PageLocation", "ParquetFile", "PhysicalType", "SortOrder", "TypedColumnIndex",
    "TypedStatistics", "WriterVersion", "decode_column_index", "decode_file_metadata", "decode_offset_index",
]
