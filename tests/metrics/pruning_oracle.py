"""The brute-force oracle of the pruning metrics: no lakesort code (but the `ColumnRate` it returns).

What the ideal reader fetches (`BruteForce`): every row of every data file read by pyarrow, the predicate
evaluated in plain Python, and rows mapped to pages by walking each column chunk's page headers (decoded with
thriftpy2: pyarrow exposes no page locations). Also the probes' predicates in Python (`probe_oracle`), the
tolerance a sampled ideal states (`within_tolerance`), and the generated table the sampled ideal is checked
on (`generated_table`). Used by tests/metrics/test_metrics.py and tests/metrics/test_ideal.py.
"""

from __future__ import annotations

import bisect
import datetime as dt
import io
import itertools
import random
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import thriftpy2
from thriftpy2.protocol import TCompactProtocol

from layout.metrics.clustered import ColumnRate

# The page header fields the oracle needs (parquet.thrift's field ids; thriftpy2 skips the others).
_PAGE_HEADER_IDL = """
struct DataPageHeader { 1: optional i32 num_values }
struct DataPageHeaderV2 { 1: optional i32 num_values  2: optional i32 num_nulls  3: optional i32 num_rows }
struct PageHeader {
  1: optional i32 type
  2: optional i32 uncompressed_page_size
  3: optional i32 compressed_page_size
  5: optional DataPageHeader data_page_header
  8: optional DataPageHeaderV2 data_page_header_v2
}
"""
_THRIFT = thriftpy2.load_fp(io.StringIO(_PAGE_HEADER_IDL), module_name="pruning_oracle_page_header_thrift")
DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 2, 3


class _Cursor:
    """A thriftpy2 transport over bytes that tells how far it has read."""

    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = data, pos

    def read(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        assert len(out) == n, "a page header runs past the end of the file"
        self.pos += n
        return out


def walk_pages(data: bytes, chunk: pq.ColumnChunkMetaData) -> tuple[int, list[tuple[int, int]]]:
    """(dictionary page bytes, [(rows, bytes) per data page]) of one flat column chunk, from its page
    headers; a page's bytes include its header (as the offset index's `compressed_page_size`)."""
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    end = start + chunk.total_compressed_size
    cursor, dictionary, pages = _Cursor(data, start), 0, []
    while cursor.pos < end:
        at = cursor.pos
        header = _THRIFT.PageHeader()
        header.read(TCompactProtocol(cursor))
        size = cursor.pos - at + header.compressed_page_size
        if header.type == DICTIONARY_PAGE:
            assert not pages, "a dictionary page after a data page"
            dictionary += size
        elif header.type == DATA_PAGE:
            pages.append((header.data_page_header.num_values, size))  # flat column: values are rows
        elif header.type == DATA_PAGE_V2:
            pages.append((header.data_page_header_v2.num_rows, size))
        else:
            raise AssertionError(f"unexpected page type {header.type} at byte {at}")
        cursor.pos = at + size
    assert cursor.pos == end, "the pages do not add up to the chunk's total_compressed_size"
    return dictionary, pages


class BruteForce:
    """What the ideal reader fetches, found without lakesort: every row of every file read by pyarrow,
    the predicate evaluated in Python per row, rows mapped to pages by the chunks' page headers.

    Counting follows `layout.read.plan`'s documented rules: the pages of the predicate and projected columns
    (all columns when the projection is None), bytes as page sizes plus the dictionary page a reader also
    fetches; a chunk without an offset index (or of a repeated column) is one page, read whole.
    `page_rows`: the rows per page the files were written with, which the page headers must show.
    """

    def __init__(self, page_rows: int | None = None) -> None:
        self.page_rows = page_rows
        self._files: dict[str, tuple[bytes, pq.FileMetaData]] = {}
        self._values: dict[tuple[str, tuple[str, ...]], list[dict[str, Any]]] = {}
        self._pages: dict[tuple[str, int, int], tuple[int, list[tuple[int, int]]]] = {}

    def _file(self, path: str) -> tuple[bytes, pq.FileMetaData]:
        if path not in self._files:
            self._files[path] = (Path(path).read_bytes(), pq.ParquetFile(path).metadata)
        return self._files[path]

    def _rows(self, path: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
        if (path, columns) not in self._values:  # whole columns, every row group
            self._values[path, columns] = pq.ParquetFile(path).read(columns=list(columns)).to_pylist()
        return self._values[path, columns]

    def chunk(self, path: str, rg: int, col: int) -> tuple[int, list[tuple[int, int]]] | None:
        """(dictionary bytes, [(rows, bytes) per data page]); None: read whole (no offset index, repeated)."""
        data, meta = self._file(path)
        chunk = meta.row_group(rg).column(col)
        if not chunk.has_offset_index or meta.schema.column(col).max_repetition_level > 0:
            return None
        if (path, rg, col) not in self._pages:
            dictionary, pages = walk_pages(data, chunk)
            num_rows = meta.row_group(rg).num_rows
            rows = [n for n, _ in pages]
            assert sum(rows) == num_rows, (
                f"{path} rg {rg} col {col}: pages hold {sum(rows)} of {num_rows} rows")
            if self.page_rows is not None:
                by_construction = [min(self.page_rows, num_rows - k)
                                   for k in range(0, num_rows, self.page_rows)]
                assert rows == by_construction, f"{path} rg {rg} col {col}: pages of {rows} rows"
            self._pages[path, rg, col] = (dictionary, pages)
        return self._pages[path, rg, col]

    def _needed(self, meta: pq.FileMetaData, predicate_columns: Sequence[str],
                projection: Sequence[str] | None) -> list[int]:
        names = [meta.schema.column(i).path for i in range(meta.num_columns)]
        wanted = set(predicate_columns) | set(names if projection is None else projection)
        return [i for i, name in enumerate(names) if name in wanted]

    def ideal(self, paths: Sequence[str], predicate_columns: Sequence[str],
              match: Callable[[dict[str, Any]], bool | None],
              projection: Sequence[str] | None) -> tuple[int, int, int]:
        """(pages, bytes, rows): the pages holding a row where `match` is True, their bytes, the rows."""
        pages = nbytes = rows = 0
        for path in paths:
            _, meta = self._file(path)
            values = self._rows(path, tuple(sorted(set(predicate_columns))))
            needed = self._needed(meta, predicate_columns, projection)
            first = 0
            for rg in range(meta.num_row_groups):
                num_rows = meta.row_group(rg).num_rows
                hits = [r for r in range(num_rows) if match(values[first + r]) is True]
                first += num_rows
                if not hits:
                    continue
                rows += len(hits)
                for col in needed:
                    walked = self.chunk(path, rg, col)
                    if walked is None:
                        pages, nbytes = (pages + 1,
                                         nbytes + meta.row_group(rg).column(col).total_compressed_size)
                        continue
                    dictionary, data_pages = walked
                    ends = list(itertools.accumulate(n for n, _ in data_pages))
                    holding = {bisect.bisect_right(ends, r) for r in hits}  # pages with a matching row
                    pages += len(holding)
                    nbytes += dictionary + sum(data_pages[p][1] for p in holding)
            assert first == len(values) == meta.num_rows, path
        return pages, nbytes, rows

    def rates(self, units: Sequence[tuple[str, int]], predicate_columns: Sequence[str],
              projection: Sequence[str] | None) -> list[ColumnRate]:
        """Per counted column, over the (path, row group) units: rows, pages (a chunk without an offset
        index is one) and compressed bytes."""
        sums: dict[str, list[int]] = {}
        for path, rg in units:
            _, meta = self._file(path)
            for col in self._needed(meta, predicate_columns, projection):
                walked = self.chunk(path, rg, col)
                total = sums.setdefault(meta.schema.column(col).path, [0, 0, 0])
                total[0] += meta.row_group(rg).num_rows
                total[1] += 1 if walked is None else len(walked[1])
                total[2] += meta.row_group(rg).column(col).total_compressed_size
        return [ColumnRate(name, *figures) for name, figures in sorted(sums.items())]

    def totals(self, paths: Sequence[str], predicate_columns: Sequence[str],
               projection: Sequence[str] | None) -> tuple[int, int]:
        """(pages, bytes) of the counted columns over whole files."""
        pages = nbytes = 0
        for path in paths:
            _, meta = self._file(path)
            for rg in range(meta.num_row_groups):
                for col in self._needed(meta, predicate_columns, projection):
                    walked = self.chunk(path, rg, col)
                    pages += 1 if walked is None else len(walked[1])
                    nbytes += meta.row_group(rg).column(col).total_compressed_size
        return pages, nbytes


def _literal(text: str) -> Any:
    """A literal of the standard probes' SQL: DATE '...', an integer or a decimal."""
    if m := re.fullmatch(r"DATE '(\d{4}-\d{2}-\d{2})'", text):
        return dt.date.fromisoformat(m.group(1))
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d+", text):
        return Decimal(text)
    raise AssertionError(f"the oracle does not read the literal {text!r}")


def probe_oracle(where: str) -> tuple[list[str], Callable[[dict[str, Any]], bool | None]]:
    """The column and a Python predicate for `col = lit` and `col BETWEEN lo AND hi` (the probes here)."""
    if m := re.fullmatch(r"(\w+) = (.+)", where):
        column, value = m.group(1), _literal(m.group(2))
        return [column], lambda row: None if row[column] is None else row[column] == value
    if m := re.fullmatch(r"(\w+) BETWEEN (.+) AND (.+)", where):
        column, lo, hi = m.group(1), _literal(m.group(2)), _literal(m.group(3))
        return [column], lambda row: None if row[column] is None else lo <= row[column] <= hi
    raise AssertionError(f"the oracle does not read the probe {where!r}")


def snapshot_paths(table, snapshot_id: int) -> list[str]:
    """The data files of a snapshot, by pyiceberg (which applies no delete files here: there are none)."""
    tasks = list(table.scan(snapshot_id=snapshot_id).plan_files())
    assert all(not t.delete_files for t in tasks)
    return [t.file.file_path.removeprefix("file://") for t in tasks]


SAMPLED = re.compile(r"sampled (\d+) of (\d+) row groups(?: \(s\.e\. of efficiency (\d+\.\d{3})\)|, none "
                     r"matching \(efficiency likely below (\d+\.\d{3})\))")


def within_tolerance(estimated: float, exact: float, method: str) -> bool:
    """The tolerance stated for a sampled ideal: within 4 of its reported standard errors (plus their
    rounding) and 3/k for matches in row groups the k sampled ones missed (the rule of three: the
    matching row groups are then likely under 3/k of them); when no sampled row group matched, the
    estimate is 0 and the exact efficiency below the bound it reports, with the same slack."""
    m = SAMPLED.fullmatch(method)
    assert m, method
    k = int(m.group(1))
    if m.group(4) is not None:
        return estimated == 0 and exact <= float(m.group(4)) + 3 / k
    return abs(estimated - exact) <= 4 * (float(m.group(3)) + 0.0005) + 3 / k


def generated_table(directory: Path, *, sort: bool, seed: int = 7) -> Path:
    """One file of 400 row groups of 50 rows (pages of 10): keys uniform in [0, 10000), or sorted."""
    rng = random.Random(seed)
    keys = [rng.randrange(10_000) for _ in range(20_000)]
    data = pa.table({"k": pa.array(sorted(keys) if sort else keys, pa.int64()),
                     "v": pa.array(range(len(keys)), pa.int64())})
    pq.write_table(data, directory / "part-0.parquet", row_group_size=50, max_rows_per_page=10,
                   write_page_index=True)
    return directory

