"""`layout.parquet.stitch`: row groups of several files behind one footer, every offset re-based.

The oracle is not the stitcher's own view: pyarrow reads the stitched file and must see the pieces'
rows in order, and for every row group and column our reader's page index and bloom filter of the
stitched file must equal the piece's, with every page location pointing at the same page bytes.
Spark-written pieces (parquet-mr, as the compaction job writes them) are covered in tests/jobs/test_write.py.
"""

from __future__ import annotations

import io
import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout.parquet import ParquetFile
from layout.parquet.stitch import StitchError, stitch


class _Bytes:
    """A piece held in memory, read as pyarrow's NativeFile would be."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def size(self) -> int:
        return len(self.data)

    def read_at(self, nbytes: int, offset: int) -> bytes:
        return self.data[offset:offset + nbytes]


def _piece(table: pa.Table, row_group_rows: int, page_rows: int, bloom: bool) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_rows, max_rows_per_page=page_rows,
                   write_page_index=True, compression="zstd",
                   bloom_filter_options={"k": True} if bloom else None)
    return sink.getvalue()


def _table(start: int, rows: int) -> pa.Table:
    k = pa.array(range(start, start + rows), pa.int64())
    return pa.table({"k": k, "s": pa.array([f"v{i % 37}" if i % 11 else None
                                            for i in range(start, start + rows)],
                                           pa.string()),
                     "d": pa.array([i / 7 for i in range(start, start + rows)], pa.float64()),
                     "l": pa.array([[i, i + 1] if i % 3 else [] for i in range(start, start + rows)],
                                   pa.list_(pa.int64()))})


def _stitched(pieces: list[bytes]) -> bytes:
    out = io.BytesIO()
    result = stitch([(f"piece{i}", _Bytes(p)) for i, p in enumerate(pieces)], out)
    data = out.getvalue()
    assert result.size == len(data)
    return data


def _open(data: bytes, tmp_path, name: str) -> ParquetFile:
    path = tmp_path / name
    path.write_bytes(data)
    return ParquetFile.open(path)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 900), min_size=1, max_size=4).filter(any),
       row_group_rows=st.integers(50, 700), page_rows=st.integers(20, 300), bloom=st.booleans())
def test_stitched_file_reads_as_the_pieces_in_order(tmp_path, sizes, row_group_rows, page_rows, bloom):
    tables, start = [], 0
    for n in sizes:
        tables.append(_table(start, n))
        start += n
    pieces = [_piece(t, row_group_rows, page_rows, bloom) for t in tables]
    data = _stitched(pieces)
    assert pq.read_table(pa.BufferReader(data)).equals(pa.concat_tables(tables))

    stitched = _open(data, tmp_path, "stitched.parquet")
    # empty: left out
    opened = [(_open(p, tmp_path, f"p{i}.parquet"), p) for i, p in enumerate(pieces) if sizes[i]]
    row_groups = [(pf, raw, rg) for pf, raw in opened for rg in range(pf.num_row_groups)]
    assert stitched.num_row_groups == len(row_groups)
    assert stitched.num_rows == sum(sizes)
    for new_rg, (pf, raw, rg) in enumerate(row_groups):
        for col in ("k", "s", "d", "l.list.element"):
            assert stitched.column_index(new_rg, col) == pf.column_index(rg, col)
            assert stitched.statistics(new_rg, col) == pf.statistics(rg, col)
            old, new = pf.offset_index(rg, col), stitched.offset_index(new_rg, col)
            assert len(old.page_locations) == len(new.page_locations)
            for a, b in zip(old.page_locations, new.page_locations, strict=True):
                assert (a.compressed_page_size, a.first_row_index) == (b.compressed_page_size,
                                                                       b.first_row_index)
                assert (data[b.offset:b.offset + b.compressed_page_size]
                        == raw[a.offset:a.offset + a.compressed_page_size])
            if bloom and col == "k":
                assert stitched.bloom_filter(new_rg, col).bitset == pf.bloom_filter(rg, col).bitset
                assert stitched.bloom_filter(new_rg, col).might_contain(int(pq.read_table(
                    pa.BufferReader(raw)).column("k")[pf_row_offset(pf, rg)].as_py()))


def pf_row_offset(pf: ParquetFile, rg: int) -> int:
    return sum(pf.metadata.row_groups[i].num_rows for i in range(rg))


def test_footer_patch_is_applied(tmp_path):
    pieces = [_piece(_table(0, 10), 100, 100, False), _piece(_table(10, 10), 100, 100, False)]
    seen = []

    def patch(footer: bytes) -> bytes:
        seen.append(footer)
        return footer

    out = io.BytesIO()
    stitch([("a", _Bytes(pieces[0])), ("b", _Bytes(pieces[1]))], out, footer_patch=patch)
    data = out.getvalue()
    assert len(seen) == 1 and data[-8 - len(seen[0]):-8] == seen[0]


def test_refuses_pieces_of_different_schemas():
    a = _piece(_table(0, 10), 100, 100, False)
    b = _piece(_table(10, 10).drop_columns(["d"]), 100, 100, False)
    with pytest.raises(StitchError, match="b: its footer's schema differs"):
        stitch([("a", _Bytes(a)), ("b", _Bytes(b))], io.BytesIO())


def test_refuses_what_is_not_parquet():
    with pytest.raises(StitchError, match="junk: not a Parquet file"):
        stitch([("junk", _Bytes(b"PAR1 not really"))], io.BytesIO())


def test_refuses_a_footer_that_does_not_encode_again():
    piece = _piece(_table(0, 10), 100, 100, False)
    length = struct.unpack("<I", piece[-8:-4])[0]
    footer = piece[-8 - length:-8]
    # An unknown field (id 99, i32) appended before the footer's stop byte: decoded, it would be dropped.
    extra = footer[:-1] + bytes([0x05]) + bytes([0xC6, 0x01]) + bytes([0x02]) + b"\x00"
    broken = piece[:-8 - length] + extra + struct.pack("<I", len(extra)) + b"PAR1"
    with pytest.raises(StitchError, match="does not encode again"):
        stitch([("odd", _Bytes(broken))], io.BytesIO())


def test_refuses_only_empty_pieces():
    empty = _piece(_table(0, 0), 100, 100, False)
    with pytest.raises(StitchError, match="no piece holds a row"):
        stitch([("e", _Bytes(empty))], io.BytesIO())
