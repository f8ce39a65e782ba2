"""Typed min/max for every physical and logical type, checked against pyarrow's statistics."""

from __future__ import annotations

import datetime as dt
import math
import struct
import uuid
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from layout.errors import UsageError
from layout.parquet import ColumnType, ParquetFile, PhysicalType
from layout.parquet import format as fmt
from layout.parquet.bloom import BloomFilter, insert_hash, xxh64
from layout.parquet.types import DatetimeNs, SortOrder, TimeNs

UTC = dt.UTC


def _write(tmp_path: Path, table: pa.Table, **kw) -> ParquetFile:
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, write_page_index=True, **kw)
    return ParquetFile.open(path)


CASES = {
    "i8": pa.array([-128, 5, 127], pa.int8()),
    "i16": pa.array([-32768, 0, 32767], pa.int16()),
    "i32": pa.array([-(2**31), 0, 2**31 - 1], pa.int32()),
    "i64": pa.array([-(2**63), 0, 2**63 - 1], pa.int64()),
    "u8": pa.array([0, 200, 255], pa.uint8()),
    "u16": pa.array([0, 40000, 65535], pa.uint16()),
    "u32": pa.array([0, 3_000_000_000, 2**32 - 1], pa.uint32()),
    "u64": pa.array([1, 2**63 + 5, 2**64 - 1], pa.uint64()),
    "f32": pa.array([-1.5, 0.25, 3.0], pa.float32()),
    "f64": pa.array([-1e300, 0.0, 2.5], pa.float64()),
    "f16": pa.array([-2.25, 0.5, 1.5], pa.float16()),
    "dec128": pa.array([Decimal("-4.56"), Decimal("1.23"), None], pa.decimal128(5, 2)),
    "dec_big": pa.array([Decimal("-" + "1" * 30 + ".5"), Decimal("9" * 30 + ".5")], pa.decimal128(38, 1)),
    "dec256": pa.array(
        [Decimal("-12345678901234567890123456789012345678901234.5"), Decimal("0.1")], pa.decimal256(60, 1)
    ),
    "date": pa.array([dt.date(1, 1, 1), dt.date(2024, 2, 29), dt.date(9999, 12, 31)], pa.date32()),
    "t32ms": pa.array([0, 86_399_999], pa.time32("ms")),
    "t64us": pa.array([1, 86_399_999_999], pa.time64("us")),
    "ts_ms": pa.array([-5, 1_700_000_000_123], pa.timestamp("ms")),
    "ts_us_utc": pa.array([0, 1_700_000_000_123_456], pa.timestamp("us", tz="UTC")),
    "ts_s": pa.array([1, 1_700_000_000], pa.timestamp("s")),
    "str": pa.array(["", "abc", "zz\u00e9"]),
    "bin": pa.array([b"\x00\xff", b"\x7f", b""]),
    "fsb": pa.array([b"ab", b"\xff\x00"], pa.binary(2)),
    "bool": pa.array([True, False]),
}


def _table(cases: dict[str, pa.Array]) -> pa.Table:
    n = max(len(a) for a in cases.values())
    cols = {
        k: pa.concat_arrays([a, pa.nulls(n - len(a), a.type)]) if len(a) < n else a for k, a in cases.items()
    }
    return pa.table(cols)


def test_statistics_match_pyarrow(tmp_path: Path) -> None:
    pf = _write(tmp_path, _table(CASES))
    md = pq.ParquetFile(pf.path).metadata
    for j, col in enumerate(pf.columns):
        s = md.row_group(0).column(j).statistics
        ours = pf.statistics(0, j)
        assert s.has_min_max, col.name
        for mine, theirs in ((ours.min, s.min), (ours.max, s.max)):
            if col.name == "f16":  # pyarrow reports the raw bytes
                assert col.type.plain_bytes(mine) == theirs and isinstance(mine, float)
            else:
                assert type(mine) is type(theirs) or isinstance(theirs, dt.datetime), (col.name, mine, theirs)
                assert mine == theirs, (col.name, mine, theirs)
        assert ours.null_count == s.null_count
        assert ours.min_exact and ours.max_exact  # pyarrow does not truncate statistics by default


def test_column_index_typed(tmp_path: Path) -> None:
    pf = _write(tmp_path, _table(CASES))
    for col in pf.columns:
        ci = pf.column_index(0, col.index)
        assert ci is not None, col.name
        st = pf.statistics(0, col.index)
        lows = [v for v in ci.min_values if v is not None]
        highs = [v for v in ci.max_values if v is not None]
        keys_lo = [col.type.value_key(v) for v in lows]
        keys_hi = [col.type.value_key(v) for v in highs]
        assert min(keys_lo) == col.type.value_key(st.min)
        assert max(keys_hi) == col.type.value_key(st.max)


def test_kinds_and_sort_orders(tmp_path: Path) -> None:
    pf = _write(tmp_path, _table(CASES))
    t = {c.name: c.type for c in pf.columns}
    assert t["u64"].sort_order is SortOrder.UNSIGNED and t["u8"].sort_order is SortOrder.UNSIGNED
    assert t["i8"].sort_order is SortOrder.SIGNED and t["dec256"].sort_order is SortOrder.SIGNED
    assert t["str"].sort_order is SortOrder.UNSIGNED and t["fsb"].sort_order is SortOrder.UNSIGNED
    assert t["f16"].kind == "float16" and t["f16"].sort_order is SortOrder.SIGNED
    assert t["ts_us_utc"].utc and not t["ts_ms"].utc
    assert str(t["ts_us_utc"]) == "INT64 TIMESTAMP(us, UTC)"


def test_unsigned_order_keys() -> None:
    ct = ColumnType.from_schema(
        fmt.SchemaElement(type=PhysicalType.INT64, name="u", converted_type=fmt.ConvertedType.UINT_64)
    )
    big, small = (2**64 - 1).to_bytes(8, "little"), (1).to_bytes(8, "little")
    assert ct.decode(big) == 2**64 - 1
    assert ct.order_key(small) < ct.order_key(big)
    s32 = ColumnType.from_schema(fmt.SchemaElement(type=PhysicalType.INT32, name="s"))
    assert s32.decode(b"\xff\xff\xff\xff") == -1
    legacy = ColumnType.from_schema(
        fmt.SchemaElement(type=PhysicalType.INT32, name="u8", converted_type=fmt.ConvertedType.UINT_8)
    )
    assert legacy.sort_order is SortOrder.UNSIGNED and legacy.decode(b"\xc8\x00\x00\x00") == 200
    b = ColumnType.from_schema(fmt.SchemaElement(type=PhysicalType.BYTE_ARRAY, name="b"))
    assert b.order_key(b"\x7f") < b.order_key(b"\x80")  # unsigned lexicographic


def test_nan_and_infinities(tmp_path: Path) -> None:
    ct = ColumnType.from_schema(fmt.SchemaElement(type=PhysicalType.DOUBLE, name="d"))
    nan = ct.decode(struct.pack("<d", math.nan))
    assert math.isnan(nan)
    assert (
        ct.to_json(nan) == "NaN"
        and ct.to_json(math.inf) == "Infinity"
        and ct.to_json(-math.inf) == "-Infinity"
    )
    pf = _write(tmp_path, pa.table({"x": pa.array([math.nan, 1.0, 2.0])}))
    st = pf.statistics(0, "x")
    assert st.min == 1.0 and st.max == 2.0  # Arrow writes non-NaN bounds


def test_int96(tmp_path: Path) -> None:
    ts = pa.array([dt.datetime(2020, 1, 2, 3, 4, 5, 6), dt.datetime(1900, 1, 1)], pa.timestamp("us"))
    pf = _write(tmp_path, pa.table({"t": ts}), use_deprecated_int96_timestamps=True)
    col = pf.column("t")
    assert col.type.physical_type is PhysicalType.INT96 and col.type.sort_order is SortOrder.UNKNOWN
    raw = col.type.plain_bytes(dt.datetime(2020, 1, 2, 3, 4, 5, 6))
    assert len(raw) == 12 and col.type.decode(raw) == dt.datetime(2020, 1, 2, 3, 4, 5, 6)
    nanos, day = int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little")
    assert day == 2440588 + (dt.date(2020, 1, 2) - dt.date(1970, 1, 1)).days
    assert nanos == ((3 * 60 + 4) * 60 + 5) * 10**9 + 6000
    older = col.type.plain_bytes(dt.datetime(1900, 1, 1))
    assert col.type.order_key(older) < col.type.order_key(raw)
    # INT96 statistics: unknown order unless the file declares INT96_TIMESTAMP_ORDER
    st = pf.statistics(0, "t")
    assert st is None or st.min is None
    ordered = ColumnType.from_schema(
        fmt.SchemaElement(type=PhysicalType.INT96, name="t"), fmt.ColumnOrder(int96_timestamp_order=fmt.EMPTY)
    )
    assert ordered.sort_order is SortOrder.SIGNED


def test_nanosecond_precision_is_kept(tmp_path: Path) -> None:
    v = 1_600_000_000_123_456_789
    pf = _write(
        tmp_path,
        pa.table(
            {
                "ts": pa.array([v], pa.timestamp("ns")),
                "tz": pa.array([v], pa.timestamp("ns", tz="UTC")),
                "t": pa.array([86_399_999_999_999], pa.time64("ns")),
            }
        ),
    )
    ts = pf.statistics(0, "ts").min
    assert isinstance(ts, DatetimeNs) and ts.nanosecond == 789 and ts.tzinfo is None
    ct = pf.column("ts").type
    assert ct.to_json(ts) == "2020-09-13T12:26:40.123456789"
    assert int.from_bytes(ct.plain_bytes(ts), "little", signed=True) == v
    tz = pf.statistics(0, "tz").max
    assert tz.tzinfo is not None and pf.column("tz").type.to_json(tz) == "2020-09-13T12:26:40.123456789+00:00"
    t = pf.statistics(0, "t").max
    assert isinstance(t, TimeNs) and pf.column("t").type.to_json(t) == "23:59:59.999999999"


def test_out_of_range_values_do_not_crash() -> None:
    d = ColumnType.from_schema(
        fmt.SchemaElement(type=PhysicalType.INT32, name="d", converted_type=fmt.ConvertedType.DATE)
    )
    assert d.decode((2**31 - 1).to_bytes(4, "little", signed=True)) == 2**31 - 1
    ts = ColumnType.from_schema(
        fmt.SchemaElement(
            type=PhysicalType.INT64, name="t", converted_type=fmt.ConvertedType.TIMESTAMP_MICROS
        )
    )
    assert ts.decode((2**63 - 1).to_bytes(8, "little", signed=True)) == 2**63 - 1
    assert ts.decode((0).to_bytes(8, "little")) == dt.datetime(1970, 1, 1, tzinfo=UTC)
    assert ts.to_json(ts.decode((2**63 - 1).to_bytes(8, "little"))) == 2**63 - 1


def test_decimal_backings(tmp_path: Path) -> None:
    vals = [Decimal("-12.34"), Decimal("56.78")]
    pf = _write(
        tmp_path,
        pa.table(
            {
                "d32": pa.array(vals, pa.decimal128(4, 2)),
                "d64": pa.array(vals, pa.decimal128(12, 2)),
                "dflba": pa.array(vals, pa.decimal128(30, 2)),
            }
        ),
        store_decimal_as_integer=True,
    )
    phys = {c.name: c.type.physical_type for c in pf.columns}
    assert phys == {
        "d32": PhysicalType.INT32,
        "d64": PhysicalType.INT64,
        "dflba": PhysicalType.FIXED_LEN_BYTE_ARRAY,
    }
    md = pq.ParquetFile(pf.path).metadata
    for j, c in enumerate(pf.columns):
        st, s = pf.statistics(0, j), md.row_group(0).column(j).statistics
        assert (st.min, st.max) == (s.min, s.max) == tuple(vals)
        assert c.type.to_json(st.min) == "-12.34"
        assert c.type.order_key(c.type.plain_bytes(st.min)) == -1234
    ba = ColumnType.from_schema(
        fmt.SchemaElement(
            type=PhysicalType.BYTE_ARRAY,
            name="b",
            converted_type=fmt.ConvertedType.DECIMAL,
            scale=3,
            precision=10,
        )
    )
    assert ba.decode(b"\xff\x85") == ba.decode(b"\x85") == Decimal("-0.123")
    assert ba.plain_bytes(Decimal("-0.123")) == b"\x85"  # minimal two's complement
    assert ba.plain_bytes(Decimal("0.128")) == b"\x00\x80"


def test_uuid_and_strings() -> None:
    u = ColumnType.from_schema(
        fmt.SchemaElement(
            type=PhysicalType.FIXED_LEN_BYTE_ARRAY,
            type_length=16,
            name="u",
            logical_type=fmt.LogicalType(uuid=fmt.EMPTY),
        )
    )
    val = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert u.decode(val.bytes) == val and u.to_json(val) == str(val) and u.plain_bytes(str(val)) == val.bytes
    s = ColumnType.from_schema(
        fmt.SchemaElement(
            type=PhysicalType.BYTE_ARRAY, name="s", logical_type=fmt.LogicalType(string=fmt.EMPTY)
        )
    )
    truncated = "h\u00e9llo".encode()[:2]  # cut inside the two-byte é
    assert s.decode(truncated) == "h\ufffd" and s.order_key(truncated) == truncated
    b = ColumnType.from_schema(fmt.SchemaElement(type=PhysicalType.BYTE_ARRAY, name="b"))
    assert b.to_json(b"\x00\xab") == "00ab"


def test_to_json_forms() -> None:
    d = ColumnType.from_schema(
        fmt.SchemaElement(type=PhysicalType.INT32, name="d", converted_type=fmt.ConvertedType.DATE)
    )
    assert d.to_json(dt.date(2024, 1, 2)) == "2024-01-02" and d.to_json(None) is None
    dec = ColumnType.from_schema(
        fmt.SchemaElement(
            type=PhysicalType.INT64, name="x", converted_type=fmt.ConvertedType.DECIMAL, scale=0, precision=18
        )
    )
    assert dec.to_json(dec.decode((10**5).to_bytes(8, "little"))) == "100000"


def test_plain_bytes_errors_name_the_column() -> None:
    i8 = ColumnType.from_schema(
        fmt.SchemaElement(
            type=PhysicalType.INT32, name="small", logical_type=fmt.LogicalType(integer=fmt.IntType(8, True))
        )
    )
    assert i8.plain_bytes(-5) == (-5).to_bytes(4, "little", signed=True)
    for bad in (300, "x", 1.5, None):
        with pytest.raises(UsageError, match="small"):
            i8.plain_bytes(bad)
    dec = ColumnType.from_schema(
        fmt.SchemaElement(
            type=PhysicalType.INT32,
            name="price",
            converted_type=fmt.ConvertedType.DECIMAL,
            scale=2,
            precision=4,
        )
    )
    with pytest.raises(UsageError, match="price"):
        dec.plain_bytes(Decimal("1.234"))
    with pytest.raises(UsageError, match="price"):
        dec.plain_bytes(Decimal("100.00"))


def test_bloom_filter_roundtrip(tmp_path: Path) -> None:
    ct = ColumnType.from_schema(
        fmt.SchemaElement(
            type=PhysicalType.BYTE_ARRAY, name="s", logical_type=fmt.LogicalType(string=fmt.EMPTY)
        )
    )
    bits = bytearray(1024)
    for v in ("apple", "banana"):
        insert_hash(bits, xxh64(ct.plain_bytes(v)))
    bf = BloomFilter(bytes(bits), ct)
    assert bf.might_contain("apple") and bf.might_contain("banana")
    assert sum(bf.might_contain(f"other{i}") for i in range(1000)) < 50


def test_bloom_filter_from_pyarrow(tmp_path: Path) -> None:
    # The locked pyarrow (26) writes split-block bloom filters; "n" gets none, to see the negative too.
    table = pa.table(
        {
            "s": [f"k{i}" for i in range(2000)],
            "i": list(range(2000)),
            "d": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i) for i in range(2000)]),
            "n": list(range(2000)),
        }
    )
    pq.write_table(table, tmp_path / "b.parquet", bloom_filter_options={"s": True, "i": True, "d": True})
    # pyarrow's own footer reader is the oracle of which chunks carry a bloom filter.
    theirs = pq.ParquetFile(tmp_path / "b.parquet").metadata.row_group(0)
    written = {theirs.column(c).path_in_schema: theirs.column(c).bloom_filter_offset is not None
               for c in range(theirs.num_columns)}
    assert written == {"s": True, "i": True, "d": True, "n": False}, "pyarrow no longer writes bloom filters"
    pf = ParquetFile.open(tmp_path / "b.parquet")
    assert {name: pf.has_bloom_filter(0, name) for name in written} == written
    bf = pf.bloom_filter(0, "s")
    assert all(bf.might_contain(f"k{i}") for i in range(2000))
    assert sum(bf.might_contain(f"absent{i}") for i in range(2000)) < 100
    assert all(pf.bloom_filter(0, "i").might_contain(i) for i in range(0, 2000, 7))
    assert pf.bloom_filter(0, "d").might_contain(dt.date(2020, 1, 1))
    assert pf.bloom_filter(0, "n") is None
