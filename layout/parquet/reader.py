"""ParquetFile: the footer on open; column index, offset index and bloom filter per chunk on demand.

Opening reads the footer in one opening of the file with at most two reads (the last 64 KiB
speculatively, then the rest of the footer if it is longer), with no size request when the caller
passes the size, and decodes only the footer. The page index and bloom filter of a column chunk are read
(only that chunk's byte range) and decoded on first request, then memoized, so planning one column of a
wide file never touches the others. `prefetch` / `load_page_indexes` read those of many chunks ahead in
one coalesced read (`layout.parquet.ranges`), still decoded on first request: on an object store a
plan then costs two GETs per file for its metadata rather than one per chunk."""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from layout.errors import ParquetError, UsageError
from layout.parquet import format as fmt
from layout.parquet.bloom import BloomFilter, check_header
from layout.parquet.format import BoundaryOrder, FieldRepetitionType, PhysicalType
from layout.parquet.ranges import DEFAULT_GAP, coalesce, read_ranges
from layout.parquet.thrift import ThriftError, decode_struct
from layout.parquet.types import ColumnType, SortOrder

FOOTER_READ_SIZE = 64 * 1024
MAGIC = b"PAR1"
MAGIC_ENCRYPTED = b"PARE"
_MAX_UNSIZED_READ = 16 * 1024 * 1024  # page index / bloom filter without a recorded length


def decode_file_metadata(data: bytes, path: str = "<bytes>") -> fmt.FileMetaData:
    """Decode a serialized FileMetaData (the footer without length and magic)."""
    return _decode(fmt.FileMetaData, data, path, "footer (FileMetaData)")


def decode_column_index(data: bytes, path: str = "<bytes>") -> fmt.ColumnIndex:
    return _decode(fmt.ColumnIndex, data, path, "column index")


def decode_offset_index(data: bytes, path: str = "<bytes>") -> fmt.OffsetIndex:
    return _decode(fmt.OffsetIndex, data, path, "offset index")


def _decode(cls: type, data: bytes, path: str, what: str) -> Any:
    try:
        return decode_struct(cls, data)[0]
    except ThriftError as e:
        raise ParquetError(path, f"corrupt {what}: {e}") from None


class Column(NamedTuple):
    index: int
    path: tuple[str, ...]
    name: str  # dotted path
    type: ColumnType
    max_definition_level: int
    max_repetition_level: int


class TypedStatistics(NamedTuple):
    """Row-group statistics of a chunk; min/max None when absent or unusable (unknown order, NaN, ...)."""

    min: Any
    max: Any
    null_count: int | None
    distinct_count: int | None
    min_exact: bool
    max_exact: bool
    nan_count: int | None = None


class TypedColumnIndex(NamedTuple):
    """A ColumnIndex with typed bounds. min_values[i] / max_values[i] are None for null pages, and also
    when the bound is unusable (a NaN bound, bytes of the wrong size, or a column whose sort order is
    UNKNOWN): None always means "no usable bound"; check null_pages for whether the page is all-null."""

    boundary_order: BoundaryOrder
    null_pages: list[bool]
    min_values: list[Any]
    max_values: list[Any]
    null_counts: list[int] | None
    raw: fmt.ColumnIndex


# --- writer versions (which statistics to trust), as Arrow C++ decides ---------------------------------

_VERSION_RE = re.compile(r"^\s*(.*?)\s+version\s+(\d+)(?:\.(\d+))?(?:\.(\d+))?", re.IGNORECASE)


class WriterVersion(NamedTuple):
    application: str
    version: tuple[int, int, int]

    @classmethod
    def parse(cls, created_by: str | None) -> WriterVersion:
        if not created_by:
            return cls("unknown", (0, 0, 0))
        m = _VERSION_RE.match(created_by)
        if not m:
            return cls(created_by.strip().lower(), (0, 0, 0))
        return cls(m.group(1).lower(), tuple(int(g or 0) for g in m.group(2, 3, 4)))  # type: ignore[arg-type]

    def older_than(self, application: str, version: tuple[int, int, int]) -> bool:
        return self.application == application and self.version < version

    def has_correct_statistics(self, physical: PhysicalType, raw_min: bytes | None, raw_max: bytes | None,
                               sort_order: SortOrder) -> bool:
        """Arrow C++'s ApplicationVersion::HasCorrectStatistics."""
        if self.older_than("parquet-cpp", (1, 3, 0)) or self.older_than("parquet-mr", (1, 10, 0)):
            same = raw_min is not None and raw_max is not None and raw_min == raw_max
            if sort_order != SortOrder.SIGNED and not same:
                return False
            if physical not in (PhysicalType.FIXED_LEN_BYTE_ARRAY, PhysicalType.BYTE_ARRAY):
                return True
        if self.application == "unknown":
            return True
        if sort_order == SortOrder.UNKNOWN:
            return False
        return not self.older_than("parquet-mr", (1, 8, 0))  # PARQUET-251


# --- byte sources --------------------------------------------------------------------------------------


class _LocalSource:
    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    @contextlib.contextmanager
    def reader(self) -> Iterator[tuple[Callable[[int, int], bytes], int]]:
        """`(read(offset, length), size)`. A local read opens the file for itself: an open() costs
        microseconds here, and no descriptor outlives a read."""
        yield self.read_at, os.stat(self.path).st_size

    def read_at(self, offset: int, length: int) -> bytes:
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        try:
            out = os.pread(fd, length, offset)
            while len(out) < length:  # pread may return short reads on some filesystems
                more = os.pread(fd, length - len(out), offset + len(out))
                if not more:
                    break
                out += more
            return out
        finally:
            os.close(fd)


class _FsSource:
    """A file of a pyarrow filesystem. Each batch of reads opens it once: pyarrow's S3 and GCS files cost
    a HEAD request on opening (pyarrow's Python API takes no FileInfo that would carry the size) and
    none per read, so the size comes from that open too, never from a `get_file_info` of its own."""

    __slots__ = ("fs", "path")

    def __init__(self, path: str, fs: Any) -> None:
        self.path, self.fs = path, fs

    @contextlib.contextmanager
    def reader(self) -> Iterator[tuple[Callable[[int, int], bytes], int]]:
        with self.fs.open_input_file(self.path) as f:
            def read(offset: int, length: int) -> bytes:
                data = f.read_at(length, offset)  # pyarrow's order: (nbytes, offset); bytes or a Buffer
                return data if isinstance(data, bytes) else data.to_pybytes()

            yield read, f.size()


def _column_names(schema: list[fmt.SchemaElement], path: str) -> list[tuple[tuple[str, ...], int, int, int]]:
    """(path, max def level, max rep level, schema index) of every leaf, in schema order (iterative)."""
    if not schema:
        raise ParquetError(path, "corrupt footer: the schema is empty")
    leaves = []
    root_children = schema[0].num_children or 0
    if root_children < 0:
        raise ParquetError(path, f"corrupt schema: root has {root_children} children")
    # stack of [remaining children, path, def level, rep level]
    stack: list[list[Any]] = [[root_children, (), 0, 0]]
    i = 1
    while stack:
        top = stack[-1]
        if top[0] == 0:
            stack.pop()
            continue
        top[0] -= 1
        if i >= len(schema):
            raise ParquetError(path, f"corrupt schema: the schema tree declares more than {len(schema)} elements")
        el = schema[i]
        rep = el.repetition_type
        d = top[2] + (rep != FieldRepetitionType.REQUIRED and rep is not None)
        r = top[3] + (rep == FieldRepetitionType.REPEATED)
        node_path = top[1] + (el.name or "",)
        nc = el.num_children
        if nc is not None and nc < 0:
            raise ParquetError(path, f"corrupt schema: element {el.name!r} has {nc} children")
        if nc or (nc == 0 and el.type is None):
            if len(stack) > 1000:
                raise ParquetError(path, "corrupt schema: nested more than 1000 levels deep")
            stack.append([nc, node_path, d, r])
        else:
            leaves.append((node_path, d, r, i))
        i += 1
    if i != len(schema):
        raise ParquetError(path, f"corrupt schema: {len(schema) - i} schema elements are not in the tree")
    return leaves


class ParquetFile:
    """Metadata of one Parquet file. Use `ParquetFile.open(path, filesystem=None)`."""

    def __init__(self, path: str, source: Any, size: int, metadata: fmt.FileMetaData) -> None:
        self.path = path
        self.size = size
        self.metadata = metadata
        self._source = source
        self._lock = threading.Lock()
        self.bytes_read = 0  # metadata bytes read so far (footer, page indexes, bloom filters): a size estimate
        self._column_index: dict[tuple[int, int], TypedColumnIndex | None] = {}
        self._raw_column_index: dict[tuple[int, int], fmt.ColumnIndex | None] = {}
        self._offset_index: dict[tuple[int, int], fmt.OffsetIndex | None] = {}
        self._bloom: dict[tuple[int, int], BloomFilter | None] = {}
        # Bytes read ahead by `prefetch`, not decoded yet: (what, rg, col) -> bytes, taken on first use.
        self._fetched: dict[tuple[str, int, int], bytes] = {}
        self.writer_version = WriterVersion.parse(metadata.created_by)
        self.columns = self._build_columns()
        self._by_name = {}
        for c in self.columns:
            self._by_name.setdefault(c.name, c)
        self.row_groups: list[fmt.RowGroup] = metadata.row_groups or []
        for i, rg in enumerate(self.row_groups):
            n = len(rg.columns or ())
            if n != len(self.columns):
                raise ParquetError(path, f"corrupt footer: row group {i} has {n} column chunks, the schema "
                                         f"has {len(self.columns)} leaf columns")
            for j, cc in enumerate(rg.columns):
                if cc.meta_data is None and cc.crypto_metadata is None and cc.encrypted_column_metadata is None:
                    raise ParquetError(path, f"corrupt footer: column chunk {self.columns[j].name!r} of row "
                                             f"group {i} has no metadata")

    # --- opening -------------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], filesystem: Any = None, *, size: int | None = None) -> ParquetFile:
        """Read and decode the footer of `path` (on `filesystem`, a pyarrow filesystem; None: local).

        `size` is the file's length when the caller knows it (an Iceberg manifest's `file_size_in_bytes`,
        a directory listing): the footer is then read without asking the filesystem for it. Without it,
        the size comes from the file opened for that read (no request of its own either way).
        """
        p = os.fspath(path)
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            raise UsageError(f"{p}: the file size must be a non-negative integer of bytes, got {size!r}")
        source = _LocalSource(p) if filesystem is None else _FsSource(p, filesystem)
        try:
            with source.reader() as (read, actual):
                size = actual if size is None else size
                tail_len = min(size, FOOTER_READ_SIZE)
                tail = cls._checked(read, p, size - tail_len, tail_len) if size >= 12 else b""
        except FileNotFoundError:
            raise ParquetError(p, "file not found") from None
        except OSError as e:
            raise ParquetError(p, f"cannot read file: {e}") from None
        if size < 12:
            raise ParquetError(p, f"not a Parquet file: {size} bytes is too small (a Parquet file has at least "
                                  f"12 bytes: magic, footer length, magic)")
        magic = tail[-4:]
        if magic == MAGIC_ENCRYPTED:
            raise ParquetError(p, "the file is encrypted (encrypted footer, magic PARE)",
                               hint="lakesort does not read encrypted Parquet files")
        if magic != MAGIC:
            raise ParquetError(p, f"not a Parquet file: the file does not end with the magic bytes PAR1 "
                                  f"(found {magic!r})")
        if tail_len == size and tail[:4] not in (MAGIC, MAGIC_ENCRYPTED):
            raise ParquetError(p, f"not a Parquet file: the file does not start with PAR1 (found {tail[:4]!r})")
        footer_len = int.from_bytes(tail[-8:-4], "little")
        if footer_len + 12 > size:
            raise ParquetError(p, f"corrupt or truncated file: footer length {footer_len} does not fit in a "
                                  f"file of {size} bytes")
        if footer_len + 8 <= tail_len:
            footer = tail[tail_len - 8 - footer_len:tail_len - 8]
        else:  # a footer longer than the speculative read: one more read for the rest
            start = size - 8 - footer_len
            head = cls._read(source, p, start, footer_len + 8 - tail_len)
            footer = head + tail[:-8]
        metadata = decode_file_metadata(footer, p)
        # A plaintext footer with encryption_algorithm set: metadata readable, encrypted chunks refused.
        pf = cls(p, source, size, metadata)
        pf.bytes_read = footer_len + 8
        return pf

    @staticmethod
    def _checked(read: Callable[[int, int], bytes], path: str, offset: int, length: int) -> bytes:
        data = read(offset, length)
        if len(data) != length:
            raise ParquetError(path, f"truncated file: wanted {length} bytes at offset {offset}, got {len(data)}")
        return data

    @classmethod
    def _read(cls, source: Any, path: str, offset: int, length: int) -> bytes:
        return cls._read_ranges(source, path, [(offset, length)])[0]

    @classmethod
    def _read_ranges(cls, source: Any, path: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Each range's bytes, in one opening of the file and as few reads as `DEFAULT_GAP` allows."""
        try:
            with source.reader() as (read, _):
                return read_ranges(lambda o, n: cls._checked(read, path, o, n), ranges, DEFAULT_GAP)
        except FileNotFoundError:
            raise ParquetError(path, "file not found") from None
        except OSError as e:
            where = f"{ranges[0][1]} bytes at offset {ranges[0][0]}" if len(ranges) == 1 else f"{len(ranges)} ranges"
            raise ParquetError(path, f"cannot read {where}: {e}") from None

    def read_at(self, offset: int, length: int) -> bytes:
        """Read exactly `length` bytes at `offset` (bounds-checked against the file size)."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ParquetError(self.path, f"read of {length} bytes at offset {offset} is outside the file "
                                          f"({self.size} bytes)")
        return self._read(self._source, self.path, offset, length)

    # --- schema --------------------------------------------------------------------------------------

    def _build_columns(self) -> tuple[Column, ...]:
        md = self.metadata
        leaves = _column_names(md.schema or [], self.path)
        orders = md.column_orders
        if orders is not None and len(orders) != len(leaves):
            orders = None  # a mismatched list cannot be attributed: treat as absent (Arrow does the same)
        out = []
        for j, (path, d, r, si) in enumerate(leaves):
            el = md.schema[si]
            name = ".".join(path)
            if el.type is None:
                raise ParquetError(self.path, f"corrupt schema: leaf column {name!r} has no physical type")
            if not isinstance(el.type, PhysicalType):
                raise ParquetError(self.path, f"corrupt schema: invalid physical type {el.type} for column "
                                              f"{name!r}")
            if el.type == PhysicalType.FIXED_LEN_BYTE_ARRAY and (el.type_length is None or el.type_length < 0):
                raise ParquetError(self.path, f"corrupt schema: FIXED_LEN_BYTE_ARRAY column {name!r} has no "
                                              f"valid type_length")
            ct = ColumnType.from_schema(el, orders[j] if orders is not None else None, name)
            out.append(Column(j, path, name, ct, d, r))
        return tuple(out)

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
        return self._statistics(rg, col, _usable)

    def statistics_keys(self, rg: int, col: int | str) -> TypedStatistics | None:
        """Like `statistics`, but min/max are order keys (`ColumnType.order_key`), as pruning compares them."""
        return self._statistics(rg, col, _usable_key)

    def _statistics(self, rg: int, col: int | str, convert: Any) -> TypedStatistics | None:
        trusted = self._trusted_statistics(rg, col)
        if trusted is None:
            return None
        ct, s, raw_min, raw_max = trusted
        lo = hi = None
        if raw_min is not None and raw_max is not None:
            lo, hi = convert(ct, raw_min), convert(ct, raw_max)
        return TypedStatistics(lo, hi, s.null_count, s.distinct_count, *_exactness(ct, s, lo, hi), s.nan_count)

    def _trusted_statistics(self, rg: int, col: int | str) -> tuple[ColumnType, Any, Any, Any] | None:
        """(type, Statistics, raw min, raw max) with min/max None unless they are sound bounds."""
        column, cc = self._chunk(rg, col)
        md = cc.meta_data
        if md is None or md.statistics is None:
            return None
        s = md.statistics
        ct = column.type
        order = ct.sort_order
        if ct.column_order is not None:
            raw_min, raw_max = s.min_value, s.max_value
            if (raw_min is None or raw_max is None) and order == SortOrder.SIGNED and ct.kind != "decimal" \
                    and ct.physical_type not in (PhysicalType.BYTE_ARRAY, PhysicalType.FIXED_LEN_BYTE_ARRAY):
                raw_min, raw_max = s.min, s.max  # deprecated fields are signed-order: sound for signed types
            ok = order != SortOrder.UNKNOWN
        else:
            # No column_orders: only the deprecated signed-order min/max exist. They are bounds only for
            # SIGNED types (strings/binary/unsigned ints were compared signed by old writers), and only
            # from writers Arrow C++ trusts (PARQUET-251 and friends).
            raw_min, raw_max = s.min, s.max
            ok = order == SortOrder.SIGNED and self.writer_version.has_correct_statistics(
                ct.physical_type, raw_min, raw_max, order)
        return (ct, s, raw_min, raw_max) if ok else (ct, s, None, None)

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
        return self._read(self._source, self.path, offset, length)

    def _check_region(self, column: Column, rg: int, what: str, offset: int, length: int | None) -> None:
        end = self.size
        if offset < 0 or offset >= end or (length is not None and (length <= 0 or offset + length > end)):
            raise ParquetError(self.path, f"corrupt footer: the {what} of column {column.name!r} in row group "
                                          f"{rg} (offset {offset}, length {length}) lies outside the file "
                                          f"({end} bytes)")

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
                if offset is None or length is None or offset < 0 or length <= 0 or offset + length > self.size:
                    continue
                wanted.append((where, offset, length))
        if not wanted:
            return 0
        wanted = list({w[0]: w for w in wanted}.values())  # a chunk named twice is read once
        ranges = [(offset, length) for _, offset, length in wanted]
        data = self._read_ranges(self._source, self.path, ranges)
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

    def _page_index(self, rg: int, col: int | str, memo: dict, what: str, cls: type, check: Any = None) -> Any:
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
        result = None if raw is None else self._typed_column_index(raw, column)
        with self._lock:
            self._column_index[key] = result
        return result

    def _decode_page_index(self, cls: type, data: bytes, column: Column, rg: int, what: str) -> Any:
        try:
            return decode_struct(cls, data)[0]
        except ThriftError as e:
            raise ParquetError(self.path, f"corrupt {what} of column {column.name!r} in row group {rg}: {e}") \
                from None

    def _check_column_index(self, raw: fmt.ColumnIndex, column: Column, rg: int) -> None:
        n = len(raw.null_pages)
        if len(raw.min_values) != n or len(raw.max_values) != n or (
                raw.null_counts is not None and len(raw.null_counts) != n):
            raise ParquetError(self.path, f"corrupt column index of column {column.name!r} in row group {rg}: "
                                          f"lists of different lengths ({n} null_pages, {len(raw.min_values)} "
                                          f"min_values, {len(raw.max_values)} max_values)")

    def _typed_column_index(self, raw: fmt.ColumnIndex, column: Column) -> TypedColumnIndex:
        n = len(raw.null_pages)
        ct = column.type
        if ct.sort_order == SortOrder.UNKNOWN:
            mins: list[Any] = [None] * n
            maxs: list[Any] = [None] * n
        else:
            mins = [None if null else _usable(ct, v) for null, v in zip(raw.null_pages, raw.min_values)]
            maxs = [None if null else _usable(ct, v) for null, v in zip(raw.null_pages, raw.max_values)]
        bo = raw.boundary_order
        if not isinstance(bo, BoundaryOrder):
            bo = BoundaryOrder.UNORDERED  # an order newer than this reader: no ordering assumed (sound)
        return TypedColumnIndex(bo, raw.null_pages, mins, maxs, raw.null_counts, raw)

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
                raise ParquetError(self.path, f"corrupt {where}: its {header.num_bytes} bytes run past the end "
                                              f"of the file")
            bitset = self._read(self._source, self.path, offset + pos, header.num_bytes)
        else:
            if need > len(data):
                raise ParquetError(self.path, f"corrupt {where}: header says {header.num_bytes} bytes, the "
                                              f"footer's bloom_filter_length {length} leaves {len(data) - pos}")
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


def _exactness(ct: ColumnType, s: Any, lo: Any, hi: Any) -> tuple[bool, bool]:
    """Whether min/max are the true extremes: the writer says so, else only fixed-width values are."""
    fixed = ct.physical_type != PhysicalType.BYTE_ARRAY
    min_exact = lo is not None and (bool(s.is_min_value_exact) if s.is_min_value_exact is not None else fixed)
    max_exact = hi is not None and (bool(s.is_max_value_exact) if s.is_max_value_exact is not None else fixed)
    return min_exact, max_exact


def _usable_key(ct: ColumnType, raw: bytes) -> Any:
    """Order key of a bound, or None when it cannot serve as one (wrong size, NaN)."""
    try:
        v = ct.order_key(raw)
    except (ValueError, ArithmeticError):
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _usable(ct: ColumnType, raw: bytes) -> Any:
    """Typed bound, or None when it cannot serve as a bound (wrong size, NaN)."""
    try:
        v = ct.decode(raw)
    except (ValueError, ArithmeticError):
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v
