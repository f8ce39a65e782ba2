"""Thrift compact protocol decoding: hand-built bytes, forward compatibility, and hostile input."""

from __future__ import annotations

import io
import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout.errors import ParquetError
from layout.parquet import (
    BoundaryOrder,
    PhysicalType,
    decode_column_index,
    decode_file_metadata,
    decode_offset_index,
)
from layout.parquet import format as fmt
from layout.parquet.thrift import ThriftError, decode_struct, encode_struct


def uvarint(v: int) -> bytes:
    out = bytearray()
    while v > 127:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def zz(v: int) -> bytes:
    return uvarint((v << 1) ^ (v >> 63))


def fh(delta: int, t: int) -> bytes:  # short field header
    return bytes([(delta << 4) | t])


def page_location(offset: int, size: int, first: int) -> bytes:
    return fh(1, 6) + zz(offset) + fh(1, 5) + zz(size) + fh(1, 6) + zz(first) + b"\x00"


def test_page_locations_and_negative_zigzag() -> None:
    body = page_location(4, 100, 0) + page_location(2**40, -7, 300)
    data = fh(1, 9) + bytes([(2 << 4) | 12]) + body + b"\x00"
    oi = decode_offset_index(data)
    assert oi.page_locations == [fmt.PageLocation(4, 100, 0), fmt.PageLocation(2**40, -7, 300)]
    assert oi.unencoded_byte_array_data_bytes is None


def test_long_list_form_and_numpy_path() -> None:
    n = 1000
    body = b"".join(page_location(i * 1000 + 5, 200 + i, i * 3) for i in range(n))
    data = fh(1, 9) + bytes([0xF0 | 12]) + uvarint(n) + body
    data += fh(1, 9) + bytes([0xF0 | 6]) + uvarint(n) + b"".join(zz(-i * 1000) for i in range(n)) + b"\x00"
    oi = decode_offset_index(data)
    assert len(oi.page_locations) == n
    assert oi.page_locations[999] == (999 * 1000 + 5, 200 + 999, 999 * 3)
    assert oi.unencoded_byte_array_data_bytes == [-i * 1000 for i in range(n)]


def test_page_location_fields_out_of_order_and_unknown_fields() -> None:
    # field 3, then an unknown field 9 (a nested struct with a list), then field 1, then 2 via long header
    loc = (
        fh(3, 6)
        + zz(7)
        + fh(6, 12)
        + fh(1, 8)
        + uvarint(3)
        + b"abc"
        + fh(1, 9)
        + bytes([0x25])
        + zz(1)
        + zz(2)
        + b"\x00"
        + bytes([0x06])
        + zz(1)
        + zz(11)  # long form header: type i64, field id 1
        + bytes([0x05])
        + zz(2)
        + zz(5)
        + b"\x00"
    )
    data = fh(1, 9) + bytes([0xF0 | 12]) + uvarint(30) + loc * 30 + b"\x00"
    oi = decode_offset_index(data)
    assert oi.page_locations == [fmt.PageLocation(11, 5, 7)] * 30


def test_column_index_with_bools_binaries_and_unknown_fields() -> None:
    data = (
        fh(1, 9)
        + bytes([(3 << 4) | 1])
        + b"\x01\x02\x01"  # null_pages [T, F, T]
        + fh(1, 9)
        + bytes([(3 << 4) | 8])
        + b"\x00"
        + b"\x01a"
        + b"\x00"  # min_values
        + fh(1, 9)
        + bytes([(3 << 4) | 8])
        + b"\x00"
        + b"\x02zz"
        + b"\x00"
        + fh(1, 5)
        + zz(1)  # boundary_order ASCENDING
        + fh(1, 9)
        + bytes([(3 << 4) | 6])
        + zz(-3)
        + zz(0)
        + zz(300)  # null_counts
        + fh(10, 7)
        + struct.pack("<d", 1.5)  # unknown field 15: double
        + fh(1, 11)
        + uvarint(1)
        + bytes([0x58])
        + zz(1)
        + b"\x01x"  # unknown 16: map<i32,binary>
        + fh(1, 1)  # unknown 17: bool true
        + b"\x00"
    )
    ci = decode_column_index(data)
    assert ci.null_pages == [True, False, True]
    assert ci.min_values == [b"", b"a", b""] and ci.max_values == [b"", b"zz", b""]
    assert ci.boundary_order is BoundaryOrder.ASCENDING and str(ci.boundary_order) == "ASCENDING"
    assert ci.null_counts == [-3, 0, 300]


def test_fixed_width_binary_fast_path_and_empty_values() -> None:
    vals = [i.to_bytes(8, "little") for i in range(100)]
    lst = bytes([0xF0 | 8]) + uvarint(100) + b"".join(b"\x08" + v for v in vals)
    empty = bytes([0xF0 | 8]) + uvarint(100) + b"\x00" * 100
    bools = bytes([0xF0 | 2]) + uvarint(100) + b"\x02" * 100
    data = fh(1, 9) + bools + fh(1, 9) + lst + fh(1, 9) + empty + fh(1, 5) + zz(0) + b"\x00"
    ci = decode_column_index(data)
    assert ci.min_values == vals and ci.max_values == [b""] * 100 and ci.null_pages == [False] * 100


def test_encoder_roundtrip_of_a_real_footer() -> None:
    buf = io.BytesIO()
    pq.write_table(pa.table({"a": [1, 2, None], "b": ["x", "y", "z"]}), buf, write_page_index=True)
    data = buf.getvalue()
    n = struct.unpack("<I", data[-8:-4])[0]
    md = decode_file_metadata(data[-8 - n : -8])
    assert md.schema[1].type is PhysicalType.INT64
    assert decode_file_metadata(encode_struct(md)) == md


def test_missing_required_field() -> None:
    with pytest.raises(ParquetError, match="PageLocation.first_row_index"):
        decode_offset_index(
            fh(1, 9) + bytes([0x1C]) + fh(1, 6) + zz(1) + fh(1, 5) + zz(1) + b"\x00" + b"\x00"
        )


@pytest.mark.parametrize(
    "data, fragment",
    [
        (b"", "truncated"),
        (fh(1, 9), "truncated"),
        (fh(1, 9) + bytes([0xFC]) + uvarint(10**12), "exceeds the remaining"),
        (fh(2, 8) + uvarint(1000) + b"abc", "binary length"),
        (fh(2, 0x0D), "invalid Thrift compact type"),
        (fh(1, 5) + b"\xff" * 11, "varint longer"),
        (b"\x10", "invalid field header"),
    ],
)
def test_malformed(data: bytes, fragment: str) -> None:
    with pytest.raises(ParquetError) as err:
        decode_column_index(data, "some/file.parquet")
    assert "some/file.parquet" in str(err.value) and fragment in str(err.value)


def test_deep_nesting_is_limited() -> None:
    # unknown field 9 of OffsetIndex: struct in struct in ... 10_000 levels
    data = fh(9, 12) + (fh(1, 12) * 10_000) + b"\x00" * 10_001 + b"\x00"
    with pytest.raises(ThriftError, match="nested deeper"):
        decode_struct(fmt.OffsetIndex, data)


def _real_footer() -> bytes:
    buf = io.BytesIO()
    pq.write_table(
        pa.table({"a": list(range(50)), "s": [f"v{i}" for i in range(50)]}),
        buf,
        write_page_index=True,
        data_page_size=64,
    )
    data = buf.getvalue()
    n = struct.unpack("<I", data[-8:-4])[0]
    return data[-8 - n : -8]


FOOTER = _real_footer()


def _decodes_or_parquet_error(data: bytes) -> None:
    for decode in (decode_file_metadata, decode_column_index, decode_offset_index):
        try:
            decode(data, "x.parquet")
        except ParquetError as e:
            assert "x.parquet" in str(e)


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600))
def test_random_bytes(data: bytes) -> None:
    _decodes_or_parquet_error(data)


@settings(deadline=None, max_examples=200)
@given(st.integers(min_value=0, max_value=len(FOOTER) - 1))
def test_truncated_real_footer(cut: int) -> None:
    with pytest.raises(ParquetError):
        decode_file_metadata(FOOTER[:cut], "x.parquet")


@settings(deadline=None, max_examples=200)
@given(st.integers(min_value=0, max_value=len(FOOTER) - 1), st.integers(min_value=0, max_value=255))
def test_corrupted_real_footer(pos: int, byte: int) -> None:
    _decodes_or_parquet_error(FOOTER[:pos] + bytes([byte]) + FOOTER[pos + 1 :])
