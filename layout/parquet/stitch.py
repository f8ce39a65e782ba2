"""Stitch Parquet files into one: their row groups copied byte for byte, in order, behind one footer.

The compaction job sorts and writes one output file in several Spark tasks (each a range of the file's
keys, so the tasks run in parallel and none has to hold a whole file), and the file is then the
concatenation of its pieces' row groups. A column chunk's pages hold no file offsets, so their bytes are
copied as they are; what points into the file is re-based by the byte distance the piece moved: each row
group's and column chunk's offsets in the footer, and every page location of the offset indexes (decoded,
shifted and encoded again). Column indexes and bloom filters hold no offsets and are copied.

Layout of the result, as parquet-mr writes a file: magic, the row groups' data, the column indexes, the
offset indexes, the bloom filters, the footer. Refused (`StitchError`) where copying could change what a
reader sees: a piece whose page indexes or bloom filters sit among its row groups' data, pieces with
different schemas or key-value metadata, encrypted footers, and a footer or offset index that does not
encode again to its own bytes (a field this decoder does not know would be dropped).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import BinaryIO, NamedTuple, Protocol, overload

from layout.parquet import format as fmt
from layout.parquet import thrift

__all__ = ["StitchError", "Stitched", "stitch"]

MAGIC = b"PAR1"
COPY_CHUNK = 8 << 20  # bytes per read while copying row group data: bounded memory for any file size
_BLOOM_HEADER_PROBE = 64  # a bloom filter header is about 15 bytes; read this much to decode it


class StitchError(ValueError):
    """The pieces cannot be stitched without changing what a reader sees (the message names the piece)."""


class RandomAccess(Protocol):
    """What a piece is read through: pyarrow's `NativeFile` from `open_input_file` has both."""

    def size(self) -> int: ...

    def read_at(self, nbytes: int, offset: int) -> bytes: ...


class Stitched(NamedTuple):
    rows: int
    row_groups: int
    size: int


class _Piece(NamedTuple):
    name: str
    source: RandomAccess
    meta: fmt.FileMetaData
    data_end: int  # end of the last column chunk: bytes [4, data_end) are the row groups' data


def stitch(pieces: Sequence[tuple[str, RandomAccess]], out: BinaryIO,
           footer_patch: Callable[[bytes], bytes] | None = None) -> Stitched:
    """Write to `out` one Parquet file holding the row groups of `pieces` (name, source) in this order.

    `footer_patch` may rewrite the encoded footer (e.g. `layout.parquet.field_ids.with_field_ids`).
    Pieces without rows are left out; at least one piece must have rows."""
    opened = [p for p in (_open(name, source) for name, source in pieces) if p.meta.num_rows]
    if not opened:
        raise StitchError(f"{', '.join(n for n, _ in pieces) or 'no pieces'}: no piece holds a row")
    first = opened[0]
    for p in opened[1:]:
        for field in ("schema", "key_value_metadata", "column_orders", "version"):
            if getattr(p.meta, field) != getattr(first.meta, field):
                raise StitchError(f"{p.name}: its footer's {field} differs from {first.name}'s; only files "
                                  "of one write can be stitched")
    out.write(MAGIC)
    position = len(MAGIC)
    shifts = []
    for p in opened:  # the row groups' data, copied as it is
        shifts.append(position - len(MAGIC))
        offset = len(MAGIC)
        while offset < p.data_end:
            chunk = p.source.read_at(min(COPY_CHUNK, p.data_end - offset), offset)
            if not chunk:
                raise StitchError(f"{p.name}: the file ends at byte {offset}, "
                                  "before its row groups' data does")
            out.write(chunk)
            offset += len(chunk)
        position += p.data_end - len(MAGIC)

    def append(data: bytes) -> int:
        nonlocal position
        out.write(data)
        at, position = position, position + len(data)
        return at

    # Per piece, row group and column: where its column index, offset index and bloom filter now are.
    column_index, offset_index, bloom = {}, {}, {}
    for i, p in enumerate(opened):
        for r, rg in enumerate(p.meta.row_groups):
            for c, cc in enumerate(rg.columns):
                if cc.column_index_offset is not None and cc.column_index_length:
                    column_index[i, r, c] = (append(_read(p, cc.column_index_offset, cc.column_index_length)),
                                             cc.column_index_length)
    for i, p in enumerate(opened):
        for r, rg in enumerate(p.meta.row_groups):
            for c, cc in enumerate(rg.columns):
                if cc.offset_index_offset is not None and cc.offset_index_length:
                    data = _shifted_offset_index(p, cc.offset_index_offset, cc.offset_index_length, shifts[i])
                    offset_index[i, r, c] = (append(data), len(data))
    for i, p in enumerate(opened):
        for r, rg in enumerate(p.meta.row_groups):
            for c, cc in enumerate(rg.columns):
                md = cc.meta_data
                if md is not None and md.bloom_filter_offset is not None:
                    data = _bloom_bytes(p, md.bloom_filter_offset, md.bloom_filter_length)
                    bloom[i, r, c] = (append(data), len(data))
    row_groups: list[fmt.RowGroup] = []
    for i, p in enumerate(opened):
        shift = shifts[i]
        for r, rg in enumerate(p.meta.row_groups):
            columns = []
            for c, cc in enumerate(rg.columns):
                md = cc.meta_data
                if md is not None:
                    at, length = bloom.get((i, r, c), (None, None))
                    md = md._replace(
                        data_page_offset=_plus(md.data_page_offset, shift),
                        dictionary_page_offset=_plus(md.dictionary_page_offset, shift),
                        index_page_offset=_plus(md.index_page_offset, shift),
                        bloom_filter_offset=at,
                        bloom_filter_length=length if md.bloom_filter_length is not None else None)
                ci, ci_len = column_index.get((i, r, c), (cc.column_index_offset, cc.column_index_length))
                oi, oi_len = offset_index.get((i, r, c), (cc.offset_index_offset, cc.offset_index_length))
                columns.append(cc._replace(file_offset=_plus(cc.file_offset, shift), meta_data=md,
                                           column_index_offset=ci, column_index_length=ci_len,
                                           offset_index_offset=oi, offset_index_length=oi_len))
            row_groups.append(rg._replace(columns=columns, file_offset=_plus(rg.file_offset, shift),
                                          ordinal=len(row_groups) if rg.ordinal is not None else None))
    meta = first.meta._replace(row_groups=row_groups, num_rows=sum(rg.num_rows or 0 for rg in row_groups))
    footer = thrift.encode_struct(meta)
    if footer_patch is not None:
        footer = footer_patch(footer)
    append(footer + struct.pack("<I", len(footer)) + MAGIC)
    return Stitched(rows=meta.num_rows, row_groups=len(row_groups), size=position)


@overload
def _plus(offset: int, shift: int) -> int: ...
@overload
def _plus(offset: int | None, shift: int) -> int | None: ...
def _plus(offset: int | None, shift: int) -> int | None:
    # Zero means "not set" to some writers (a dictionary page can never start at byte 0).
    return offset + shift if offset else offset


def _read(p: _Piece, offset: int, length: int) -> bytes:
    data = p.source.read_at(length, offset)
    if len(data) != length:
        raise StitchError(f"{p.name}: {length} bytes at {offset} run past the end of the file")
    return data


def _open(name: str, source: RandomAccess) -> _Piece:
    size = source.size()
    tail = source.read_at(8, size - 8) if size >= 12 else b""
    if len(tail) != 8 or tail[4:] != MAGIC or source.read_at(4, 0) != MAGIC:
        raise StitchError(f"{name}: not a Parquet file (no PAR1 magic at both ends)")
    length = struct.unpack("<I", tail[:4])[0]
    if length > size - 12:
        raise StitchError(f"{name}: footer length {length} does not fit the file of {size} bytes")
    footer = source.read_at(length, size - 8 - length)
    try:
        meta, _ = thrift.decode_struct(fmt.FileMetaData, footer)
    except thrift.ThriftError as exc:
        raise StitchError(f"{name}: cannot decode the footer: {exc}") from exc
    if thrift.encode_struct(meta) != footer:
        raise StitchError(f"{name}: the footer does not encode again to its own bytes (a field this decoder "
                          "does not know would be lost); the pieces are left as they are")
    if meta.encryption_algorithm is not None:
        raise StitchError(f"{name}: encrypted footers cannot be stitched")
    data_start, data_end, structures = size, len(MAGIC), []
    for rg in meta.row_groups or ():
        for cc in rg.columns or ():
            md = cc.meta_data
            if md is None or cc.file_path:
                raise StitchError(f"{name}: a column chunk without metadata or in "
                                  f"another file ({cc.file_path})")
            start = min(o for o in (md.dictionary_page_offset, md.data_page_offset) if o)
            data_start = min(data_start, start)
            data_end = max(data_end, start + (md.total_compressed_size or 0))
            structures += [o for o in (cc.column_index_offset, cc.offset_index_offset, md.bloom_filter_offset)
                           if o is not None]
    if meta.row_groups and data_start < len(MAGIC):
        raise StitchError(f"{name}: a column chunk starts at byte {data_start}, inside the magic")
    if any(o < data_end for o in structures):
        raise StitchError(f"{name}: a page index or bloom filter lies among the row groups' data (before "
                          f"byte {data_end}); only files laid out as parquet-mr writes them can be stitched")
    return _Piece(name, source, meta, data_end)


def _shifted_offset_index(p: _Piece, offset: int, length: int, shift: int) -> bytes:
    raw = _read(p, offset, length)
    try:
        index, _ = thrift.decode_struct(fmt.OffsetIndex, raw)
    except thrift.ThriftError as exc:
        raise StitchError(f"{p.name}: cannot decode an offset index: {exc}") from exc
    if thrift.encode_struct(index) != raw:
        raise StitchError(f"{p.name}: an offset index does not encode again to its own bytes")
    pages = [loc._replace(offset=loc.offset + shift) for loc in index.page_locations or ()]
    return thrift.encode_struct(index._replace(page_locations=pages))


def _bloom_bytes(p: _Piece, offset: int, length: int | None) -> bytes:
    """A bloom filter's header and bitset (at `offset`); its `length` from the metadata, or from its header
    when the writer did not record one."""
    if length:
        return _read(p, offset, length)
    probe = p.source.read_at(_BLOOM_HEADER_PROBE, offset)
    try:
        header, used = thrift.decode_struct(fmt.BloomFilterHeader, probe)
    except thrift.ThriftError as exc:
        raise StitchError(f"{p.name}: cannot decode a bloom filter header: {exc}") from exc
    return _read(p, offset, used + (header.num_bytes or 0))
