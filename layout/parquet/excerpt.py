"""Reading a range of rows of a row group by its pages alone: each column's pages that hold the rows, found in
its offset index, cut out with its dictionary page and read as a one-column Parquet file of their own.

pyarrow reads whole column chunks: it has no page-level reads (Arrow C++'s reader takes no row selection from
Python). Merging sorted runs by key range (`layout.compaction.executor.merge_runs`) needs a few pages of a run
per slice, and a run's row group can be many times a slice's share of it (a 128 MiB row group beside a
slice's 32 MiB from each of four runs: reading whole row groups took 4-5x the bytes). A page holds no file
offsets, so its bytes can be moved: for each column the bytes of its dictionary page (if any) and of the
pages covering the rows, one contiguous range each, behind a footer that describes a file of that one column
and those rows. pyarrow then decodes them as it decodes any file, and the rows asked for are sliced out of
the first and last page.

Flat columns only (no repetition: a page's first row is then its first value, and a row is a value): nested
ones raise `ParquetError`, and the caller reads the row group whole.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from layout.errors import ParquetError
from layout.parquet import format as fmt
from layout.parquet import thrift
from layout.parquet.ranges import DEFAULT_GAP, read_ranges
from layout.parquet.reader import ParquetFile

__all__ = ["PageCut", "page_cuts", "read_rows"]

MAGIC = b"PAR1"


@dataclass(frozen=True, slots=True)
class PageCut:
    """What to read of one column chunk for rows [start, stop) of its row group: its dictionary page's bytes
    (offset, length; None without one), its pages' bytes, and the rows those pages hold."""

    column: int  # leaf index in the file's schema
    dictionary: tuple[int, int] | None
    pages: tuple[int, int]
    first_row: int
    rows: int


def page_cuts(pf: ParquetFile, rg: int, columns: Sequence[int], start: int, stop: int) -> list[PageCut]:
    """Per column (leaf index), the byte ranges holding rows [start, stop) of row group `rg`; needs each
    chunk's offset index (`ParquetFile.load_page_indexes`: one read for all of them)."""
    group = pf.row_groups[rg]
    cuts = []
    for col in columns:
        column = pf.columns[col]
        if column.max_repetition_level:
            raise ParquetError(pf.path, f"column {column.name} is nested: its pages cannot be cut by rows")
        index = pf.offset_index(rg, col)
        if index is None or not index.page_locations:
            raise ParquetError(pf.path, f"row group {rg} of column {column.name} has no offset index")
        locations = index.page_locations
        firsts = [loc.first_row_index for loc in locations]
        first = bisect.bisect_right(firsts, start) - 1
        last = bisect.bisect_left(firsts, stop) - 1  # the last page starting before `stop`
        end = firsts[last + 1] if last + 1 < len(firsts) else group.num_rows
        meta = fmt.chunk_metadata(group.columns[col])
        data_start = locations[0].offset
        # A chunk's dictionary page comes first; writers name it by dictionary_page_offset, or (some older
        # ones) leave that unset with data_page_offset at the dictionary page.
        offset = (meta.dictionary_page_offset
                  or (meta.data_page_offset if meta.data_page_offset < data_start else None))
        dictionary = (offset, data_start - offset) if offset is not None and 0 < offset < data_start else None
        span = locations[last].offset + locations[last].compressed_page_size - locations[first].offset
        cuts.append(PageCut(column=col, dictionary=dictionary, pages=(locations[first].offset, span),
                            first_row=firsts[first], rows=end - firsts[first]))
    return cuts


def read_rows(pf: ParquetFile, read: Callable[[int, int], bytes], rg: int, columns: Sequence[int], start: int,
              stop: int, gap: int = DEFAULT_GAP) -> pa.Table:
    """Rows [start, stop) of row group `rg`, the `columns` (leaf indexes) only, read page by page:
    `read(offset, length) -> bytes` reads the file (the ranges coalesced as `layout.parquet.ranges` does)."""
    cuts = page_cuts(pf, rg, columns, start, stop)
    ranges = [r for c in cuts for r in ((c.dictionary,) if c.dictionary else ()) + (c.pages,)]
    chunks = iter(read_ranges(read, ranges, gap))
    arrays, names = [], []
    for cut in cuts:
        dictionary = next(chunks) if cut.dictionary else b""
        data = _one_column_file(pf, rg, cut, dictionary, next(chunks))
        table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
        if table.num_rows != cut.rows:
            raise ParquetError(pf.path, f"pages of column {pf.columns[cut.column].name} in row group {rg} "
                                        f"hold {table.num_rows} rows, the offset index says {cut.rows}")
        arrays.append(table.column(0).slice(start - cut.first_row, stop - start))
        names.append(table.column_names[0])
    return pa.table(arrays, names=names)


def _one_column_file(pf: ParquetFile, rg: int, cut: PageCut, dictionary: bytes, pages: bytes) -> bytes:
    """A Parquet file of one column and one row group holding `dictionary` and `pages` (`cut`'s bytes)."""
    meta = fmt.chunk_metadata(pf.row_groups[rg].columns[cut.column])
    body = dictionary + pages
    start = len(MAGIC)
    chunk_meta = meta._replace(
        num_values=cut.rows, total_compressed_size=len(body), data_page_offset=start + len(dictionary),
        dictionary_page_offset=start if dictionary else None, index_page_offset=None, statistics=None,
        encoding_stats=None, bloom_filter_offset=None, bloom_filter_length=None, size_statistics=None,
        geospatial_statistics=None)
    group = fmt.RowGroup(columns=[fmt.ColumnChunk(file_offset=start, meta_data=chunk_meta)],
                         total_byte_size=len(body), num_rows=cut.rows, file_offset=start,
                         total_compressed_size=len(body))
    schema = pf.metadata.schema
    leaf = _leaf(schema, pf.columns[cut.column].path)
    orders = pf.metadata.column_orders
    footer = thrift.encode_struct(fmt.FileMetaData(
        version=pf.metadata.version, schema=[schema[0]._replace(num_children=1), leaf], num_rows=cut.rows,
        row_groups=[group], created_by=pf.metadata.created_by,
        column_orders=[orders[cut.column]] if orders else None))
    return MAGIC + body + footer + struct.pack("<I", len(footer)) + MAGIC


def _leaf(schema: Sequence[fmt.SchemaElement], path: Sequence[str]) -> fmt.SchemaElement:
    """The schema element of a top-level primitive column (a flat column's path is its name)."""
    i = 1
    while i < len(schema):
        element = schema[i]
        if not element.num_children and len(path) == 1 and element.name == path[0]:
            return element
        i += 1 + _subtree(schema, i) if element.num_children else 1
    raise ParquetError("<schema>", f"no top-level column {'.'.join(path)}")


def _subtree(schema: Sequence[fmt.SchemaElement], i: int) -> int:
    """How many elements follow element `i` in its subtree (depth first, as the footer lists them)."""
    count, pending = 0, schema[i].num_children or 0
    while pending:
        count += 1
        pending += (schema[i + count].num_children or 0) - 1
    return count
