"""ParquetFile: the footer on open; column index, offset index and bloom filter per chunk on demand.

Opening reads the footer in one opening of the file with at most two reads (the last 64 KiB
speculatively, then the rest of the footer if it is longer), with no size request when the caller
passes the size, and decodes only the footer. The page index and bloom filter of a column chunk are read
(only that chunk's byte range) and decoded on first request, then memoized, so planning one column of a
wide file never touches the others. `prefetch` / `load_page_indexes` read those of many chunks ahead in
one coalesced read (`layout.parquet.ranges`), still decoded on first request: on an object store a
plan then costs two GETs per file for its metadata rather than one per chunk."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from layout.errors import ParquetError, UsageError
from layout.parquet import format as fmt
from layout.parquet.bloom import BloomFilter, check_header
from layout.parquet.decode import decode_file_metadata
from layout.parquet.ranges import DEFAULT_GAP, coalesce
from layout.parquet.schema import Column, build_columns
from layout.parquet.sources import FsSource, LocalSource, checked, read_many, read_one
from layout.parquet.statistics import (
    TypedColumnIndex,
    TypedStatistics,
    WriterVersion,
    chunk_statistics,
    typed_column_index,
    usable,
    usable_key,
)
from layout.parquet.thrift import ThriftError, decode_struct

_S = TypeVar("_S")  # a Thrift struct of layout.parquet.format

FOOTER_READ_SIZE = 64 * 1024
MAGIC = b"PAR1"
MAGIC_ENCRYPTED = b"PARE"
_MAX_UNSIZED_READ = 16 * 1024 * 1024  # page index / bloom filter without a recorded length


class ParquetFile:
    """Metadata of one Parquet file. Use `ParquetFile.open(path, filesystem=None)`."""

    def __init__(self, path: str, source: Any, size: int, metadata: fmt.FileMetaData) -> None:
        self.path = path
        self.size = size
        self.metadata = metadata
        self._source = source
        self._lock = threading.Lock()
        # metadata bytes read so far (footer, page indexes, bloom filters): a size estimate
        self.bytes_read = 0
        self._column_index: dict[tuple[int, int], TypedColumnIndex | None] = {}
        self._raw_column_index: dict[tuple[int, int], fmt.ColumnIndex | None] = {}
        self._offset_index: dict[tuple[int, int], fmt.OffsetIndex | None] = {}
        self._bloom: dict[tuple[int, int], BloomFilter | None] = {}
        # Bytes read ahead by `prefetch`, not decoded yet: (what, rg, col) -> bytes, taken on first use.
        self._fetched: dict[tuple[str, int, int], bytes] = {}
        self.writer_version = WriterVersion.parse(metadata.created_by)
        self.columns = build_columns(metadata, path)
        self._by_name: dict[str, Column] = {}
        for c in self.columns:
            self._by_name.setdefault(c.name, c)
        self.row_groups: list[fmt.RowGroup] = metadata.row_groups or []
        for i, rg in enumerate(self.row_groups):
            n = len(rg.columns or ())
            if n != len(self.columns):
                raise ParquetError(path, f"corrupt footer: row group {i} has {n} column chunks, the schema "
                                         f"has {len(self.columns)} leaf columns")
            for j, cc in enumerate(rg.columns):
                if cc.meta_data is None and cc.crypto_metadata is None \
                        and cc.encrypted_column_metadata is None:
                    raise ParquetError(path, f"corrupt footer: column chunk {self.columns[j].name!r} of row "
                                             f"group {i} has no metadata")

    # --- opening -------------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], filesystem: Any = None, *,
             size: int | None = None) -> ParquetFile:
        """Read and decode the footer of `path` (on `filesystem`, a pyarrow filesystem; None: local).

        `size` is the file's length when the caller knows it (an Iceberg manifest's `file_size_in_bytes`,
        a directory listing): the footer is then read without asking the filesystem for it. Without it,
        the size comes from the file opened for that read (no request of its own either way).
        """
        p = os.fspath(path)
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            raise UsageError(f"{p}: the file size must be a non-negative integer of bytes, got {size!r}")
        source = LocalSource(p) if filesystem is None else FsSource(p, filesystem)
        try:
            with source.reader() as (read, actual):
                size = actual if size is None else size
                tail_len = min(size, FOOTER_READ_SIZE)
                tail = checked(read, p, size - tail_len, tail_len) if size >= 12 else b""
        except FileNotFoundError:
            raise ParquetError(p, "file not found") from None
        except OSError as e:
            raise ParquetError(p, f"cannot read file: {e}") from None
        if size < 12:
            raise ParquetError(p, f"not a Parquet file: {size} bytes is too small (a Parquet file has at "
                                  "least 12 bytes: magic, footer length, magic)")
        magic = tail[-4:]
        if magic == MAGIC_ENCRYPTED:
            raise ParquetError(p, "the file is encrypted (encrypted footer, magic PARE)",
                               hint="lakesort does not read encrypted Parquet files")
        if magic != MAGIC:
            raise ParquetError(p, f"not a Parquet file: the file does not end with the magic bytes PAR1 "
                                  f"(found {magic!r})")
        if tail_len == size and tail[:4] not in (MAGIC, MAGIC_ENCRYPTED):
            raise ParquetError(p, "not a Parquet file: the file does not start with "
                                  f"PAR1 (found {tail[:4]!r})")
        footer_len = int.from_bytes(tail[-8:-4], "little")
        if footer_len + 12 > size:
            raise ParquetError(p, f"corrupt or truncated file: footer length {footer_len} does not fit in a "
                                  f"file of {size} bytes")
        if footer_len + 8 <= tail_len:
            footer = tail[tail_len - 8 - footer_len:tail_len - 8]
        else:  # a footer longer than the speculative read: one more read for the rest
            start = size - 8 - footer_len
            head = read_one(source, p, start, footer_len + 8 - tail_len)
            footer = head + tail[:-8]
        metadata = decode_file_metadata(footer, p)
        # A plaintext footer with encryption_algorithm set: metadata readable, encrypted chunks refused.
        pf = cls(p, source, size, metadata)
        pf.bytes_read = footer_len + 8
        return pf

    def read_at(self, offset: int, length: int) -> bytes:
        """Read exactly `length` bytes at `offset` (bounds-checked against the file size)."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ParquetError(self.path, f"read of {length} bytes at offset {offset} is outside the file "
                                          f"({self.size} bytes)")
        return read_one(self._source, self.path, offset, length)

    # --- schema --------------------------------------------------------------------------------------

    @property
    def num_rows(self) -> int:
        return self.metadata.num_rows or 0

    @property
    def created_by(self) -> str | None:
        return self.metadata.created_by

    @property
    def key_value_metadata(self) -> dict[str, str | None]:
        return {kv.key: kv.value for kv in self.metadata.key_value_metadata or ()}

    @property
    def num_row_groups(self) -> int:
        return len(self.row_groups)

    def has_column(self, name: str) -> bool:
        return name in self._by_name

    def column(self, name_or_index: int | str | tuple[str, ...]) -> Column:
        c = name_or_index
        if isinstance(c, int) and not isinstance(c, bool):
            if 0 <= c < len(self.columns):
                return self.columns[c]
        elif isinstance(c, (str, tuple)):
            key = ".".join(c) if isinstance(c, tuple) else c
            if key in self._by_name:
                return self._by_name[key]
        names = ", ".join(x.name for x in self.columns)
        raise UsageError(f"{self.path}: no column {c!r} (columns: {names})")

    def _chunk(self, rg: int, col: int | str) -> tuple[Column, fmt.ColumnChunk]:
        column = self.column(col)
        if not (isinstance(rg, int) and 0 <= rg < len(self.row_groups)):
            raise UsageError(f"{self.path}: no row group {rg!r} (the file has {len(self.row_groups)})")
        return column, self.row_groups[rg].columns[column.index]

    def _encrypted(self, column: Column, rg: int, cc: fmt.ColumnChunk, what: str) -> ParquetError:
        return ParquetError(self.path, f"the {what} of column {column.name!r} in row group {rg} is encrypted",
                            hint="lakesort does not read encrypted Parquet files")

    # --- statistics ----------------------------------------------------------------------------------

    def statistics(self, rg: int, col: int | str) -> TypedStatistics | None:
        """The chunk's footer statistics as typed values; min/max None where not usable as bounds."""
        return self._statistics(rg, col, usable)

    def statistics_keys(self, rg: int, col: int | str) -> TypedStatistics | None:
        """Like `statistics`, but min/max are order keys (`ColumnType.order_key`),
        as pruning compares them."""
        return self._statistics(rg, col, usable_key)

    def _statistics(self, rg: int, col: int | str, convert: Any) -> TypedStatistics | None:
        column, cc = self._chunk(rg, col)
        return chunk_statistics(column.type, cc.meta_data, self.writer_version, convert)

    # --- page index ----------------------------------------------------------------------------------

    def has_column_index(self, rg: int, col: int | str) -> bool:
        return self._chunk(rg, col)[1].column_index_offset is not None

    def has_offset_index(self, rg: int, col: int | str) -> bool:
        return self._chunk(rg, col)[1].offset_index_offset is not None

    def has_bloom_filter(self, rg: int, col: int | str) -> bool:
        md = self._chunk(rg, col)[1].meta_data
        return md is not None and md.bloom_filter_offset is not None

    def _region(self, column: Column, rg: int, what: str, offset: int, length: int | None) -> bytes:
        where = (what, rg, column.index)
        if where in self._fetched:  # read ahead by `prefetch` (and so already counted in bytes_read)
            with self._lock:
                data = self._fetched.pop(where, None)
            if data is not None:
                return data
        self._check_region(column, rg, what, offset, length)
        if length is None:
            length = min(self.size - offset, _MAX_UNSIZED_READ)
        self.bytes_read += length
        return read_one(self._source, self.path, offset, length)

    def _check_region(self, column: Column, rg: int, what: str, offset: int, length: int | None) -> None:
        end = self.size
        if offset < 0 or offset >= end or (length is not None and (length <= 0 or offset + length > end)):
            raise ParquetError(self.path, f"corrupt footer: the {what} of column {column.name!r} in row "
                                          f"group {rg} (offset {offset}, length {length}) lies outside the "
                                          f"file ({end} bytes)")

    # --- reading ahead: several chunks' structures in few requests -------------------------------------

    def load_page_indexes(self, columns: Iterable[int | str], row_groups: Iterable[int] | None = None) -> int:
        """Read the column and offset indexes of `columns` in `row_groups` (all by default) at once; the
        number of requests it took (0 when all were read before). See `prefetch`."""
        groups = range(len(self.row_groups)) if row_groups is None else list(row_groups)
        chunks = [(rg, self.column(c).index) for c in columns for rg in groups]
        return self.prefetch(column_index=chunks, offset_index=chunks)

    def prefetch(self, *, column_index: Iterable[tuple[int, int | str]] = (),
                 offset_index: Iterable[tuple[int, int | str]] = (),
                 bloom_filter: Iterable[tuple[int, int | str]] = ()) -> int:
        """Read ahead the column indexes, offset indexes and bloom filters of the given `(row group, column)`
        chunks in one opening of the file and as few requests as the gap of `layout.parquet.ranges`
        allows (writers put them side by side before the footer: usually one). Returns the requests.

        Only bytes are read here; each structure is decoded on first use, as without a prefetch, so its
        errors (corrupt, encrypted, outside the file) come from the accessor that asks for it. Chunks
        read before, without one, encrypted, with a location outside the file or without a recorded
        length (older writers: its end is unknown) are left to that accessor.
        """
        wanted: list[tuple[tuple[str, int, int], int, int]] = []
        kinds = (("column index", column_index, self._raw_column_index), ("offset index", offset_index,
                 self._offset_index), ("bloom filter", bloom_filter, self._bloom))
        for what, chunks, memo in kinds:
            for rg, col in chunks:
                column, cc = self._chunk(rg, col)
                where = (what, rg, column.index)
                if (rg, column.index) in memo or where in self._fetched or cc.crypto_metadata is not None:
                    continue
                offset, length = _location(what, cc)
                if offset is None or length is None or offset < 0 or length <= 0 \
                        or offset + length > self.size:
                    continue
                wanted.append((where, offset, length))
        if not wanted:
            return 0
        wanted = list({w[0]: w for w in wanted}.values())  # a chunk named twice is read once
        ranges = [(offset, length) for _, offset, length in wanted]
        data = read_many(self._source, self.path, ranges)
        with self._lock:
            for (where, _, length), d in zip(wanted, data, strict=True):
                self._fetched.setdefault(where, d)
                self.bytes_read += length
        return len(coalesce(ranges, DEFAULT_GAP))

    def offset_index(self, rg: int, col: int | str) -> fmt.OffsetIndex | None:
        return self._page_index(rg, col, self._offset_index, "offset index", fmt.OffsetIndex)

    def raw_column_index(self, rg: int, col: int | str) -> fmt.ColumnIndex | None:
        """The chunk's ColumnIndex as decoded (min/max still PLAIN bytes); pruning works on these."""
        return self._page_index(rg, col, self._raw_column_index, "column index", fmt.ColumnIndex,
                                check=self._check_column_index)

    def _page_index(self, rg: int, col: int | str, memo: dict[tuple[int, int], _S | None], what: str,
                    cls: type[_S], check: Callable[[_S, Column, int], None] | None = None) -> _S | None:
        """One chunk's offset or column index: its byte range read on first use, decoded, remembered."""
        column, cc = self._chunk(rg, col)
        key = (rg, column.index)
        try:
            return memo[key]
        except KeyError:
            pass
        result = None
        offset, length = _location(what, cc)
        if offset is not None:
            if cc.crypto_metadata is not None:
                raise self._encrypted(column, rg, cc, what)
            data = self._region(column, rg, what, offset, length)
            result = self._decode_page_index(cls, data, column, rg, what)
            if check is not None:
                check(result, column, rg)
        with self._lock:
            memo[key] = result
        return result

    def column_index(self, rg: int, col: int | str) -> TypedColumnIndex | None:
        """The chunk's ColumnIndex with every bound decoded to a typed value (for display and reports)."""
        column, _ = self._chunk(rg, col)
        key = (rg, column.index)
        try:
            return self._column_index[key]
        except KeyError:
            pass
        raw = self.raw_column_index(rg, col)
        result = None if raw is None else typed_column_index(raw, column.type)
        with self._lock:
            self._column_index[key] = result
        return result

    def _decode_page_index(self, cls: type[_S], data: bytes, column: Column, rg: int, what: str) -> _S:
        try:
            return decode_struct(cls, data)[0]
        except ThriftError as e:
            raise ParquetError(self.path,
                               f"corrupt {what} of column {column.name!r} in row group {rg}: {e}") \
                from None

    def _check_column_index(self, raw: fmt.ColumnIndex, column: Column, rg: int) -> None:
        n = len(raw.null_pages)
        if len(raw.min_values) != n or len(raw.max_values) != n or (
                raw.null_counts is not None and len(raw.null_counts) != n):
            raise ParquetError(self.path, f"corrupt column index of column {column.name!r} in row group "
                                          f"{rg}: lists of different lengths ({n} null_pages, "
                                          f"{len(raw.min_values)} min_values, "
                                          f"{len(raw.max_values)} max_values)")

    # --- bloom filter --------------------------------------------------------------------------------

    def bloom_filter(self, rg: int, col: int | str) -> BloomFilter | None:
        column, cc = self._chunk(rg, col)
        key = (rg, column.index)
        try:
            return self._bloom[key]
        except KeyError:
            pass
        md = cc.meta_data
        result = None
        if md is not None and md.bloom_filter_offset is not None:
            if cc.crypto_metadata is not None:
                raise self._encrypted(column, rg, cc, "bloom filter")
            result = self._read_bloom(column, rg, md.bloom_filter_offset, md.bloom_filter_length)
        with self._lock:
            self._bloom[key] = result
        return result

    def _read_bloom(self, column: Column, rg: int, offset: int, length: int | None) -> BloomFilter:
        where = f"bloom filter of column {column.name!r} in row group {rg}"
        # Without bloom_filter_length (written since format 2.10) read the header first, then the bitset.
        data = self._region(column, rg, "bloom filter", offset,
                            length if length is not None else min(64, self.size - offset))
        try:
            header, pos = decode_struct(fmt.BloomFilterHeader, data)
        except ThriftError as e:
            raise ParquetError(self.path, f"corrupt {where}: {e}") from None
        problem = check_header(header)
        if problem:
            raise ParquetError(self.path, f"{where}: {problem}")
        need = pos + header.num_bytes
        if length is None:
            if offset + need > self.size:
                raise ParquetError(self.path, f"corrupt {where}: its {header.num_bytes} bytes run past the "
                                              "end of the file")
            bitset = read_one(self._source, self.path, offset + pos, header.num_bytes)
        else:
            if need > len(data):
                raise ParquetError(self.path, f"corrupt {where}: header says {header.num_bytes} bytes, the "
                                              f"footer's bloom_filter_length {length} "
                                              f"leaves {len(data) - pos}")
            bitset = data[pos:need]
        return BloomFilter(bitset, column.type, header)

    def __repr__(self) -> str:
        return f"ParquetFile({self.path!r}, rows={self.num_rows}, row_groups={self.num_row_groups}, " \
               f"columns={len(self.columns)})"


def _location(what: str, cc: fmt.ColumnChunk) -> tuple[int | None, int | None]:
    """(offset, length) of a chunk's column index, offset index or bloom filter, as its footer says."""
    if what == "column index":
        return cc.column_index_offset, cc.column_index_length
    if what == "offset index":
        return cc.offset_index_offset, cc.offset_index_length
    md = cc.meta_data
    return (None, None) if md is None else (md.bloom_filter_offset, md.bloom_filter_length)
