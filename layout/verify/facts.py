"""Facts about Parquet files, one row per file x row group x column: what verification checks and what
Great Expectations validates (`layout_facts`, described column by column in `FACTS_COLUMNS`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal

import pyarrow as pa

from layout.io import resolve
from layout.parquet import ParquetFile, PhysicalType
from layout.parquet.format import Encoding, PageType, chunk_metadata

DICTIONARY_ENCODINGS = frozenset({Encoding.PLAIN_DICTIONARY, Encoding.RLE_DICTIONARY})
DATA_PAGES = frozenset({PageType.DATA_PAGE, PageType.DATA_PAGE_V2})


@dataclass(frozen=True, slots=True)
class OpenedFile:
    """One opened file with its filesystem (pyarrow reads a column from it to explain a dropped index)."""

    pf: ParquetFile
    filesystem: Any
    partition: str
    run: str | None = None  # its sorted run within the partition; None: the partition's files are one run


def open_files(files: Iterable[Any], partitions: Mapping[str, str] | None,
               runs: Mapping[str, str] | None = None) -> list[OpenedFile]:
    """Each file (a path, a (filesystem, path) pair, or an `OpenedFile`, kept as it is) with its footer read:
    a caller that checks the same files twice (the layout rules, then the facts GX validates) opens them once,
    and the page indexes the first read are remembered for the second."""
    out = []
    for item in files:
        if isinstance(item, OpenedFile):
            out.append(item)
            continue
        filesystem, path = item if isinstance(item, tuple) else resolve(item)
        pf = ParquetFile.open(path, filesystem=filesystem)
        # Every rule reads the page indexes and bloom filters of every chunk: all of them in one coalesced
        # read (on an object store one request per file instead of a HEAD and a GET per chunk and structure).
        chunks = [(rg, column.index) for rg in range(pf.num_row_groups) for column in pf.columns]
        pf.prefetch(column_index=chunks, offset_index=chunks, bloom_filter=chunks)
        # Default partition: the directory (Hive-style partition directories, one per partition).
        partition = (partitions or {}).get(path, str(PurePosixPath(path).parent))
        out.append(OpenedFile(pf, filesystem, partition, (runs or {}).get(path)))
    return out


def row_group_bytes(pf: ParquetFile, rg: int) -> int:
    group = pf.row_groups[rg]
    if group.total_compressed_size is not None:
        return group.total_compressed_size
    return sum(c.meta_data.total_compressed_size or 0 for c in group.columns if c.meta_data is not None)


def rows_per_page(pf: ParquetFile, rg: int, name: str) -> list[int] | None:
    oi = pf.offset_index(rg, name)
    if oi is None or not oi.page_locations:
        return None
    starts = [p.first_row_index for p in oi.page_locations]
    return [b - a for a, b in zip(starts, [*starts[1:], pf.row_groups[rg].num_rows or 0])]


def all_dictionary(pf: ParquetFile, rg: int, name: str) -> bool:
    md = chunk_metadata(pf.row_groups[rg].columns[pf.column(name).index])
    if md.encoding_stats:
        data = [s.encoding for s in md.encoding_stats if s.page_type in DATA_PAGES and (s.count or 0) > 0]
        return bool(data) and all(e in DICTIONARY_ENCODINGS for e in data)
    # Without encoding stats: a chunk that never fell back to plain lists no PLAIN encoding.
    encodings = set(md.encodings or ())
    return bool(encodings & DICTIONARY_ENCODINGS) and Encoding.PLAIN not in encodings


def nan_values(pf: ParquetFile, rg: int, name: str) -> Literal["none", "some", "all"] | None:
    """Whether a float/double chunk holds NaN, from its footer statistics alone: "none", "some", "all" (every
    non-null value), or None when the footer does not say (no statistics). Other types: "none".

    A writer that counts NaNs (parquet-format's `nan_count`) says so outright. parquet-mr (Spark) counts none
    but folds values into min/max with Java's Double.compare, which orders NaN above every number: a chunk
    holding a NaN gets NaN as its max, and as its min too only when every value is NaN. Writers that leave NaN
    out of min/max and count none (pyarrow) read as "none": nothing in their footers says otherwise."""
    column = pf.column(name)
    if column.type.physical_type not in (PhysicalType.FLOAT, PhysicalType.DOUBLE):
        return "none"
    md = pf.row_groups[rg].columns[column.index].meta_data
    if md is None or md.statistics is None:
        return None
    s = md.statistics
    low, high = _float_bound(column.type, s.min_value, s.min), _float_bound(column.type, s.max_value, s.max)
    if s.nan_count:
        values = (md.num_values or 0) - (s.null_count or 0)
        return "all" if s.nan_count >= values else "some"
    if high is not None and math.isnan(high):
        return "all" if low is not None and math.isnan(low) else "some"
    if low is not None and math.isnan(low):
        return "some"
    if low is None and high is None:  # no bounds: all null, or a footer that does not say
        all_null = s.null_count is not None and s.null_count >= (md.num_values or 0)
        return "none" if all_null or s.nan_count == 0 else None
    return "none"


def _float_bound(ct: Any, value: bytes | None, deprecated: bytes | None) -> float | None:
    raw = value if value is not None else deprecated
    if raw is None:
        return None
    try:
        return float(ct.decode(raw))
    except (ValueError, ArithmeticError, TypeError):
        return None


# --- the facts table --------------------------------------------------------------------------------

FACTS_COLUMNS = {
    "path": ("string", "the file"),
    "partition": ("string", "partition label (or directory) the file belongs to"),
    "file_size": ("int64", "file size in bytes"),
    "row_group": ("int32", "row group ordinal in the file"),
    "num_rows": ("int64", "rows in the row group"),
    "row_group_bytes": ("int64", "compressed bytes of the row group (footer)"),
    "column": ("string", "leaf column, dotted path"),
    "physical_type": ("string", "Parquet physical type"),
    "compressed_bytes": ("int64", "compressed bytes of the column chunk"),
    "has_column_index": ("bool", "the chunk has a column index"),
    "has_offset_index": ("bool", "the chunk has an offset index"),
    "has_bloom_filter": ("bool", "the chunk has a bloom filter"),
    "has_nan": ("bool", ("a float/double chunk holds NaN, as its footer statistics say "
                         "(parquet-mr: a NaN max)")),
    "dictionary_only": ("bool", "every data page of the chunk is dictionary-encoded"),
    "boundary_order": ("string", "ASCENDING, DESCENDING, UNORDERED; null without a column index"),
    "pages": ("int32", "data pages (offset index); null without one"),
    "min_rows_per_page": ("int64", "fewest rows in a page; null without an offset index"),
    "max_rows_per_page": ("int64", "most rows in a page; null without an offset index"),
    "null_count": ("int64", "nulls in the chunk (footer statistics); null when unknown"),
    "min_value": ("string", "chunk minimum as text (footer statistics); null when absent"),
    "max_value": ("string", "chunk maximum as text (footer statistics); null when absent"),
}


def facts_schema() -> pa.Schema:

    return pa.schema([pa.field(name, pa.type_for_alias(kind), metadata={"description": doc})
                      for name, (kind, doc) in FACTS_COLUMNS.items()])


def layout_facts(files: Iterable[Any], *, partitions: Mapping[str, str] | None = None) -> pa.Table:
    """One row per file x row group x column (schema and meaning: `FACTS_COLUMNS`), for Great Expectations."""

    rows = [row for f in open_files(files, partitions) for row in _facts_rows(f)]
    return pa.Table.from_pylist(rows, schema=facts_schema())


def _facts_rows(f: OpenedFile) -> Iterable[dict[str, Any]]:
    pf = f.pf
    for rg in range(pf.num_row_groups):
        for column in pf.columns:
            md = chunk_metadata(pf.row_groups[rg].columns[column.index])
            ci = pf.column_index(rg, column.name)
            page_rows = rows_per_page(pf, rg, column.name)
            stats = pf.statistics(rg, column.name)
            yield {
                "path": pf.path, "partition": f.partition, "file_size": pf.size, "row_group": rg,
                "num_rows": pf.row_groups[rg].num_rows, "row_group_bytes": row_group_bytes(pf, rg),
                "column": column.name, "physical_type": str(column.type.physical_type),
                "compressed_bytes": md.total_compressed_size, "has_column_index": ci is not None,
                "has_offset_index": pf.has_offset_index(rg, column.name),
                "has_bloom_filter": pf.has_bloom_filter(rg, column.name),
                "has_nan": nan_values(pf, rg, column.name) in ("some", "all"),
                "dictionary_only": all_dictionary(pf, rg, column.name),
                "boundary_order": ci.boundary_order.name if ci is not None else None,
                "pages": len(page_rows) if page_rows else None,
                "min_rows_per_page": min(page_rows) if page_rows else None,
                "max_rows_per_page": max(page_rows) if page_rows else None,
                "null_count": stats.null_count if stats is not None else None,
                "min_value": _text(stats.min) if stats is not None else None,
                "max_value": _text(stats.max) if stats is not None else None,
            }


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.hex() if isinstance(value, bytes) else str(value)
