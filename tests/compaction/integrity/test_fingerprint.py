"""The content fingerprint: our pyarrow reimplementation of Spark's xxhash64 agrees with Spark, row by row."""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
import struct
import subprocess
import sys
from decimal import Context, Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout.compaction.integrity.fingerprint import (
    SPARK_CONF,
    Fingerprint,
    fingerprint_files,
    fingerprint_table,
    row_hashes,
    salted,
    spark_fingerprint_expr,
    spark_row_hash_expr,
)
from layout.errors import InputError, UsageError

UTC = dt.UTC


# ---------------------------------------------------------------------------------------------
# A slow, obviously-per-value reference: Spark's InterpretedHashFunction.hash with the `xxhash`
# package for XXH64 (hashInt/hashLong are XXH64 of the 4/8 little-endian bytes).
# ---------------------------------------------------------------------------------------------


def _java_to_byte_array(v: int) -> bytes:
    """BigInteger.toByteArray(): the shortest big-endian two's complement that round-trips."""
    n = 1
    while True:
        try:
            return v.to_bytes(n, "big", signed=True)
        except OverflowError:
            n += 1


def _reference_value_bytes(value, dtype: pa.DataType) -> bytes | None:
    if value is None or pa.types.is_null(dtype):
        return None
    if pa.types.is_boolean(dtype):
        return struct.pack("<i", 1 if value else 0)
    if dtype in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        return struct.pack("<i", value)
    if dtype in (pa.int64(), pa.uint32()):
        return struct.pack("<q", value)
    if dtype == pa.uint64():
        return _java_to_byte_array(value)
    if pa.types.is_date(dtype):
        return struct.pack("<i", (value - dt.date(1970, 1, 1)).days)
    if pa.types.is_time(dtype):  # Spark's TimeType: nanoseconds since midnight
        micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        return struct.pack("<q", micros * 1000)
    if pa.types.is_timestamp(dtype):
        epoch = dt.datetime(1970, 1, 1, tzinfo=UTC if value.tzinfo else None)
        return struct.pack("<q", (value - epoch) // dt.timedelta(microseconds=1))
    if pa.types.is_float32(dtype):
        if math.isnan(value):
            return struct.pack("<I", 0x7FC00000)
        return struct.pack("<f", 0.0 if value == 0 else value)
    if pa.types.is_float64(dtype):
        if math.isnan(value):
            return struct.pack("<Q", 0x7FF8000000000000)
        return struct.pack("<d", 0.0 if value == 0 else value)
    if pa.types.is_decimal(dtype):
        unscaled = int(value.scaleb(dtype.scale, context=Context(prec=100)))
        return struct.pack("<q", unscaled) if dtype.precision <= 18 else _java_to_byte_array(unscaled)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes):
        return value
    raise AssertionError(f"no reference for {dtype}")


def _reference_hash(value, dtype: pa.DataType, seed: int) -> int:
    """InterpretedHashFunction.hash: a null is the seed; structs, arrays and maps chain the seed."""
    if value is None:
        return seed
    if pa.types.is_dictionary(dtype):
        return _reference_hash(value, dtype.value_type, seed)
    if pa.types.is_struct(dtype):
        for field in dtype:
            seed = _reference_hash(value[field.name], field.type, seed)
        return seed
    if pa.types.is_map(dtype):  # to_pylist: a list of (key, value) pairs
        for k, v in value:
            seed = _reference_hash(v, dtype.item_type, _reference_hash(k, dtype.key_type, seed))
        return seed
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        for element in value:
            seed = _reference_hash(element, dtype.value_type, seed)
        return seed
    b = _reference_value_bytes(value, dtype)
    return seed if b is None else xxhash.xxh64_intdigest(b, seed)


def reference_row_hashes(table: pa.Table, columns: list[str] | None = None) -> list[int]:
    columns = columns or table.column_names
    cols = [(table.column(c).to_pylist(), table.schema.field(c).type) for c in columns]
    out = []
    for r in range(table.num_rows):
        h = 42
        for values, dtype in cols:
            h = _reference_hash(values[r], dtype, h)
        out.append(h - (1 << 64) if h >= 1 << 63 else h)
    return out


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------

BIG = 10**37 + 123456789  # unscaled: 38 digits


def _dec(unscaled: int, scale: int) -> Decimal:
    return Decimal(f"{unscaled}E-{scale}")  # exact (no rounding to the context's 28 digits)


def all_types_table() -> pa.Table:
    """Every supported type, extremes and edge values, and a null in every column (row `id` first)."""
    n = 9

    def col(values, dtype, null_at):
        values = list(values)[:n]
        values += [values[0]] * (n - len(values))
        values[null_at] = None
        return pa.array(values, dtype)

    f_special = [-0.0, 0.0, float("nan"), float("inf"), float("-inf"), 1.5, -2.25, 3.4e38, 1e-40]
    d_special = [-0.0, 0.0, float("nan"), float("inf"), float("-inf"), 1.5, -2.25, 1.7e308, 5e-324]
    cols = {
        "id": pa.array(range(n), pa.int32()),
        "b": col([True, False, True, False, True, False, True, False, True], pa.bool_(), 0),
        "i8": col([-128, 127, 0, -1, 5, 6, 7, 8, 9], pa.int8(), 1),
        "i16": col([-32768, 32767, 0, -1, 5, 6, 7, 8, 9], pa.int16(), 2),
        "i32": col([-(2**31), 2**31 - 1, 0, -1, 5, 6, 7, 8, 9], pa.int32(), 3),
        "i64": col([-(2**63), 2**63 - 1, 0, -1, 5, 6, 7, 8, 9], pa.int64(), 4),
        "u8": col([0, 255, 128, 1, 2, 3, 4, 5, 6], pa.uint8(), 5),
        "u16": col([0, 65535, 32768, 1, 2, 3, 4, 5, 6], pa.uint16(), 6),
        "u32": col([0, 2**32 - 1, 2**31, 1, 2, 3, 4, 5, 6], pa.uint32(), 7),
        "u64": col([0, 2**64 - 1, 2**63, 2**63 - 1, 127, 128, 255, 256, 1], pa.uint64(), 8),
        "f32": col([f_special[(i + 1) % n] for i in range(n)], pa.float32(), 0),
        "f64": col([d_special[(i + 1) % n] for i in range(n)], pa.float64(), 1),
        "dec10": col([Decimal(x) for x in ["-12345678.90", "99999999.99", "0.00", "-0.01", "1.00",
                                           "0.01", "-99999999.99", "42.42", "7.00"]], pa.decimal128(10, 2), 2),
        "dec18": col([Decimal(x) for x in ["999999999999999999", "-999999999999999999", "0", "-1", "1",
                                           "-128", "128", "-129", "255"]], pa.decimal128(18, 0), 3),
        "dec19": col([Decimal(x) for x in ["9999999999999999999", "-9999999999999999999", "0", "-1", "1",
                                           "-128", "128", "-129", "255"]], pa.decimal128(19, 0), 4),
        "dec38": col([_dec(v, 6) for v in [BIG, -BIG, 0, -128, 127, 128, -129, 10**38 - 1, -(10**38) + 1]],
                     pa.decimal128(38, 6), 5),
        "s": col(["", "é", "日本語", "x" * 31, "y" * 32, "z" * 33 + "ü", "plain", "a\x00b", "ß" * 40],
                 pa.string(), 6),
        "bin": col([b"", b"\x00", b"\xff\xfe", b"\x01" * 4, b"\x02" * 8, b"\x03" * 37, b"abc", b"\x80" * 3,
                    bytes(range(64))], pa.binary(), 7),
        "d": col([dt.date(1970, 1, 1), dt.date(1900, 1, 1), dt.date(2024, 2, 29), dt.date(9999, 12, 31),
                  dt.date(1969, 12, 31), dt.date(2000, 1, 1), dt.date(1583, 1, 1), dt.date(2038, 1, 19),
                  dt.date(1970, 1, 2)], pa.date32(), 8),
        "ts": col([dt.datetime(1970, 1, 1, tzinfo=UTC), dt.datetime(1969, 12, 31, 23, 59, 59, 999999, UTC),
                   dt.datetime(2024, 2, 29, 12, 30, 45, 123456, UTC), dt.datetime(1900, 1, 1, tzinfo=UTC),
                   dt.datetime(9999, 12, 31, 23, 59, 59, 999999, UTC), dt.datetime(2000, 1, 1, tzinfo=UTC),
                   dt.datetime(2038, 1, 19, 3, 14, 8, tzinfo=UTC), dt.datetime(1970, 1, 1, 0, 0, 0, 1, UTC),
                   dt.datetime(2001, 9, 9, 1, 46, 40, tzinfo=UTC)], pa.timestamp("us", tz="UTC"), 0),
        "ts_ntz": col([dt.datetime(1970, 1, 1), dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
                       dt.datetime(2024, 2, 29, 12, 30, 45, 123456), dt.datetime(1900, 1, 1),
                       dt.datetime(9999, 12, 31, 23, 59, 59, 999999), dt.datetime(2000, 1, 1),
                       dt.datetime(2038, 1, 19, 3, 14, 8), dt.datetime(1970, 1, 1, 0, 0, 0, 1),
                       dt.datetime(2001, 9, 9, 1, 46, 40)], pa.timestamp("us"), 1),
    }
    return pa.table(cols)


DATA_COLUMNS = [c for c in all_types_table().column_names if c != "id"]

# What Spark 4 reads each column as (checked, so the test knows which Spark hash path it exercised).
SPARK_TYPES = {
    "b": "boolean", "i8": "tinyint", "i16": "smallint", "i32": "int", "i64": "bigint",
    "u8": "smallint", "u16": "int", "u32": "bigint", "u64": "decimal(20,0)",
    "f32": "float", "f64": "double", "dec10": "decimal(10,2)", "dec18": "decimal(18,0)",
    "dec19": "decimal(19,0)", "dec38": "decimal(38,6)", "s": "string", "bin": "binary", "d": "date",
    "ts": "timestamp", "ts_ntz": "timestamp_ntz",
}


NAN, INF = float("nan"), float("inf")
TS = dt.datetime(2024, 2, 29, 12, 30, 45, 123456)


def nested_table() -> pa.Table:
    """Structs, lists and maps, nested, with nulls at every level (row `id` first): 8 rows."""
    i32, i64, f32, f64, s = pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string()
    st = pa.struct([("i", i32), ("s", s)])
    deep = pa.struct([("a", pa.struct([("x", i64), ("y", pa.list_(s))])), ("b", f64)])
    kv = pa.struct([("k", s), ("v", i64)])
    decs = pa.struct([("d9", pa.decimal128(9, 2)), ("d18", pa.decimal128(18, 4)), ("d38", pa.decimal128(38, 10))])
    times = pa.struct([("tz", pa.timestamp("us", tz="UTC")), ("ntz", pa.timestamp("us")), ("d", pa.date32()),
                       ("t", pa.time64("us"))])
    utc = TS.replace(tzinfo=UTC)
    cols = {
        "id": pa.array(range(8), i32),
        "st": pa.array([{"i": 1, "s": "a"}, None, {"i": None, "s": "b"}, {"i": 2, "s": None},
                        {"i": None, "s": None}, {"i": -(2**31), "s": "日本"}, {"i": 0, "s": ""}, None], st),
        "deep": pa.array([{"a": {"x": 1, "y": ["p", None, "q"]}, "b": 1.5}, None, {"a": None, "b": -0.0},
                          {"a": {"x": None, "y": None}, "b": NAN}, {"a": {"x": 2**63 - 1, "y": []}, "b": None},
                          {"a": {"x": -1, "y": [None]}, "b": INF}, None, {"a": None, "b": None}], deep),
        "li": pa.array([[1, 2, 3], None, [], [None], [None, 4, None], [-(2**31), 2**31 - 1], [5], None],
                       pa.list_(i32)),
        "ls": pa.array([["a", None, "bc"], [], None, [None, None], ["", "x" * 40], ["é"], None, ["z"] * 9],
                       pa.list_(s)),
        "lst": pa.array([[{"k": "a", "v": 1}, None, {"k": None, "v": 2}], None, [], [None],
                         [{"k": "b", "v": None}], [{"k": None, "v": None}, {"k": "c", "v": 3}], None,
                         [{"k": "d", "v": -4}] * 3], pa.list_(kv)),
        "lli": pa.array([[[1], [], None, [2, 3]], None, [], [None], [[None]], [[4, 5, 6], [7]], None, [[]]],
                        pa.list_(pa.list_(i32))),
        "m": pa.array([[("a", 1), ("b", None)], None, [], [("c", 3)], [("d", None), ("e", -5), ("f", 6)],
                       [("", 0)], None, [("g", 2**31 - 1)]], pa.map_(s, i32)),
        "mld": pa.array([[("k", [1.5, None, -0.0])], None, [], [("a", None), ("b", [])],
                         [("n", [NAN, INF, -INF])], [("x", [0.0]), ("y", [2.5, 3.5])], None, [("z", [None])]],
                        pa.map_(s, pa.list_(f64))),
        "sdec": pa.array([{"d9": _dec(-999999999, 2), "d18": _dec(10**18 - 1, 4), "d38": _dec(BIG, 10)}, None,
                          {"d9": None, "d18": None, "d38": None}, {"d9": _dec(1, 2), "d18": _dec(-1, 4),
                                                                 "d38": _dec(-BIG, 10)},
                          {"d9": _dec(0, 2), "d18": _dec(-(10**18) + 1, 4), "d38": _dec(10**38 - 1, 10)},
                          {"d9": _dec(128, 2), "d18": _dec(-129, 4), "d38": _dec(-128, 10)},
                          {"d9": None, "d18": _dec(255, 4), "d38": None}, None], decs),
        "times": pa.array([{"tz": utc, "ntz": TS, "d": dt.date(2024, 2, 29), "t": dt.time(12, 34, 56, 789012)},
                           None, {"tz": None, "ntz": None, "d": None, "t": None},
                           {"tz": dt.datetime(1970, 1, 1, tzinfo=UTC), "ntz": dt.datetime(1969, 12, 31, 23, 59),
                            "d": dt.date(1970, 1, 1), "t": dt.time(0, 0)},
                           {"tz": dt.datetime(9999, 12, 31, 23, 59, 59, 999999, UTC), "ntz": None,
                            "d": dt.date(1900, 1, 1), "t": dt.time(23, 59, 59, 999999)},
                           {"tz": None, "ntz": dt.datetime(1900, 1, 1), "d": None, "t": dt.time(0, 0, 0, 1)},
                           None, {"tz": utc, "ntz": TS, "d": dt.date(2000, 1, 1), "t": None}], times),
        "lts": pa.array([[utc, None], None, [], [dt.datetime(1970, 1, 1, tzinfo=UTC)], [None], [utc] * 3, None,
                         [dt.datetime(1900, 1, 1, tzinfo=UTC)]], pa.list_(pa.timestamp("us", tz="UTC"))),
        "lf": pa.array([[NAN, -0.0, 0.0], None, [], [INF, -INF, None], [1.5], [3.4e38, 1e-40], None, [-0.0]],
                       pa.list_(f32)),
        "ld": pa.array([[NAN, -0.0], [0.0], None, [None, -INF], [], [1.7e308, 5e-324], None, [-0.0, NAN]],
                       pa.list_(f64)),
        "lmisc": pa.array([{"b": [True, None, False], "d": [dt.date(2024, 1, 1), None], "bin": b"\x00\xff",
                            "i8": [-128, 127]}, None,
                           {"b": [], "d": None, "bin": None, "i8": [None]}, {"b": None, "d": [], "bin": b"", "i8": []},
                           {"b": [False], "d": [dt.date(1970, 1, 2)], "bin": b"abc", "i8": None}, None,
                           {"b": None, "d": None, "bin": None, "i8": None},
                           {"b": [True] * 5, "d": [dt.date(2000, 2, 29)], "bin": bytes(range(40)), "i8": [0]}],
                          pa.struct([("b", pa.list_(pa.bool_())), ("d", pa.list_(pa.date32())),
                                     ("bin", pa.binary()), ("i8", pa.list_(pa.int8()))])),
        "t": pa.array([dt.time(12, 34, 56, 789012), None, dt.time(0, 0), dt.time(23, 59, 59, 999999),
                       dt.time(0, 0, 1), None, dt.time(6, 0), dt.time(0, 0, 0, 1)], pa.time64("us")),
    }
    return pa.table(cols)


NESTED_COLUMNS = [c for c in nested_table().column_names if c != "id"]

# What Spark 4.2 reads each nested column as.
NESTED_SPARK_TYPES = {
    "st": "struct<i:int,s:string>", "deep": "struct<a:struct<x:bigint,y:array<string>>,b:double>",
    "li": "array<int>", "ls": "array<string>", "lst": "array<struct<k:string,v:bigint>>",
    "lli": "array<array<int>>", "m": "map<string,int>", "mld": "map<string,array<double>>",
    "sdec": "struct<d9:decimal(9,2),d18:decimal(18,4),d38:decimal(38,10)>",
    "times": "struct<tz:timestamp,ntz:timestamp_ntz,d:date,t:time(6)>", "lts": "array<timestamp>",
    "lf": "array<float>", "ld": "array<double>",
    "lmisc": "struct<b:array<boolean>,d:array<date>,bin:binary,i8:array<tinyint>>", "t": "time(6)",
}


def _write(table: pa.Table, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def _spark_fingerprint(df, columns: list[str]) -> Fingerprint:
    row = df.selectExpr("count(*) AS n", f"{spark_fingerprint_expr(columns)} AS s").collect()[0]
    return Fingerprint.from_spark(row["n"], row["s"])


def _tpchgen() -> str:
    exe = Path(sys.executable).with_name("tpchgen-cli")
    found = str(exe) if exe.is_file() else shutil.which("tpchgen-cli")
    assert found is not None, "tpchgen-cli is not installed: it is in uv.lock's dev group (`make setup`)"
    return found


@pytest.fixture(scope="module")
def lineitem_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tpch")
    subprocess.run([_tpchgen(), "parquet", "-s", "0.01", "--tables=lineitem", "-o", str(out)],
                   check=True, capture_output=True, timeout=300)
    return out


# ---------------------------------------------------------------------------------------------
# Without Spark
# ---------------------------------------------------------------------------------------------


def test_spark_expression_text():
    assert spark_fingerprint_expr(["a", "b"]) == "sum(cast(xxhash64(`a`, `b`) as decimal(38,0)))"
    assert spark_row_hash_expr(["we`ird", "x.y"]) == "xxhash64(`we``ird`, `x.y`)"
    with pytest.raises(UsageError):
        spark_fingerprint_expr([])


def test_row_hashes_match_the_per_value_reference():
    table = all_types_table()
    assert row_hashes(table, DATA_COLUMNS).tolist() == reference_row_hashes(table, DATA_COLUMNS)


def test_known_spark_values():
    # Printed by Spark 4.2.0: SELECT xxhash64(1), xxhash64(1L), xxhash64('Spark'), xxhash64(-0.0D),
    # xxhash64(1, 'a', CAST(NULL AS INT), 2.5D), xxhash64(CAST(12345678901234567890.123 AS DECIMAL(38,3)))
    cases = [
        ({"x": pa.array([1], pa.int32())}, -6698625589789238999),
        ({"x": pa.array([1], pa.int64())}, -7001672635703045582),
        ({"x": pa.array(["Spark"])}, -4294468057691064905),
        ({"x": pa.array([-0.0])}, -5252525462095825812),
        ({"a": pa.array([1], pa.int32()), "b": pa.array(["a"]), "c": pa.array([None], pa.int32()),
          "d": pa.array([2.5])}, -198860653963387819),
        ({"x": pa.array([_dec(12345678901234567890123, 3)], pa.decimal128(38, 3))}, 1409737168217643118),
    ]
    for columns, spark_value in cases:
        assert row_hashes(pa.table(columns)).tolist() == [spark_value], columns


def test_sliced_chunked_and_dictionary_inputs_hash_the_same():
    table = all_types_table()
    expected = row_hashes(table).tolist()
    chunked = pa.concat_tables([table.slice(0, 4), table.slice(4)])
    assert row_hashes(chunked).tolist() == expected
    assert row_hashes(table.slice(3, 4)).tolist() == expected[3:7]
    batch = table.to_batches()[0].slice(2, 5)
    assert row_hashes(batch).tolist() == expected[2:7]
    views = table.set_column(table.schema.get_field_index("s"), "s", table["s"].cast(pa.string_view()))
    views = views.set_column(views.schema.get_field_index("bin"), "bin", views["bin"].cast(pa.large_binary()))
    assert row_hashes(views).tolist() == expected
    encoded = table.set_column(table.schema.get_field_index("s"), "s", table["s"].dictionary_encode())
    assert row_hashes(encoded).tolist() == expected


def test_timestamp_units_are_converted_to_micros():
    us = pa.array([0, -1_000, 1_700_000_000_123_000, None], pa.timestamp("us", tz="UTC"))
    expected = row_hashes(pa.table({"t": us})).tolist()
    for unit in ("ms", "ns"):
        other = pa.table({"t": us.cast(pa.timestamp(unit, tz="UTC"))})
        assert row_hashes(other).tolist() == expected
    seconds = pa.array([0, 1_700_000_000, None], pa.timestamp("s"))
    assert row_hashes(pa.table({"t": seconds})).tolist() == row_hashes(
        pa.table({"t": seconds.cast(pa.timestamp("us"))})).tolist()
    with pytest.raises(UsageError, match="sub-microsecond"):
        row_hashes(pa.table({"t": pa.array([1_500], pa.timestamp("ns"))}))
    # A null's hidden value does not matter.
    ns = pa.Array.from_buffers(pa.timestamp("ns"), 1, [pa.py_buffer(b"\x00"), pa.py_buffer(struct.pack("<q", 7))])
    assert row_hashes(pa.table({"t": ns})).tolist() == [42]


def test_null_leaves_the_running_hash_unchanged():
    t = pa.table({"a": pa.array([None], pa.int32()), "b": pa.array(["x"]), "n": pa.nulls(1)})
    assert row_hashes(t).tolist() == row_hashes(t.select(["b"])).tolist()
    assert row_hashes(t.select(["a"])).tolist() == [42]


def test_unsupported_types_raise_usage_error_naming_the_column():
    day = dt.timedelta(days=1)
    t = pa.table({"ok": [1], "tags": pa.array([[day]], pa.list_(pa.duration("us")))})
    with pytest.raises(UsageError, match=r"'tags\.element'.*duration"):
        fingerprint_table(t)
    assert fingerprint_table(t, ["ok"]).rows == 1
    with pytest.raises(UsageError, match="'missing'"):
        fingerprint_table(t, ["missing"])
    with pytest.raises(UsageError, match=r"'st\.x'"):
        fingerprint_table(pa.table({"st": pa.array([{"x": day}], pa.struct([("x", pa.duration("us"))]))}))
    with pytest.raises(UsageError, match=r"'m\.value'"):
        fingerprint_table(pa.table({"m": pa.array([[("k", day)]], pa.map_(pa.string(), pa.duration("us")))}))
    with pytest.raises(UsageError, match="38 digits"):
        fingerprint_table(pa.table({"d": pa.array([Decimal(1)], pa.decimal256(40, 0))}))


def test_nested_row_hashes_match_the_per_value_reference():
    table = nested_table()
    assert row_hashes(table, NESTED_COLUMNS).tolist() == reference_row_hashes(table, NESTED_COLUMNS)
    for c in NESTED_COLUMNS:
        assert row_hashes(table, [c]).tolist() == reference_row_hashes(table, [c]), c


def test_known_spark_values_nested():
    # Printed by Spark 4.2.0 (session time zone UTC; the map with spark.sql.legacy.allowHashOnMapType=true):
    # SELECT xxhash64(named_struct('a', 1, 'b', 'x')), xxhash64(array('a', null, 'bc')),
    #   xxhash64(map('k', array(1.5D, null, -0.0D))), xxhash64(TIME'12:34:56.789012'),
    #   xxhash64(TIMESTAMP'2024-02-29 12:30:45.123456'), xxhash64(TIMESTAMP_NTZ'2024-02-29 12:30:45.123456'),
    #   xxhash64(named_struct('d', CAST(1.23 AS DECIMAL(38,10)), 'e', array(DATE'2024-01-01', null))),
    #   xxhash64(CAST(NULL AS STRUCT<a:INT>), array(), CAST(NULL AS ARRAY<INT>), 7),
    #   xxhash64(array(array(1), array(), CAST(NULL AS ARRAY<INT>), array(2, 3)))
    ts = pa.array([TS], pa.timestamp("us"))
    cases = [
        ({"x": pa.array([{"a": 1, "b": "x"}], pa.struct([("a", pa.int32()), ("b", pa.string())]))},
         8510603489595372987),
        ({"x": pa.array([["a", None, "bc"]])}, 714843003905237701),
        ({"x": pa.array([[("k", [1.5, None, -0.0])]], pa.map_(pa.string(), pa.list_(pa.float64())))},
         -7738132737886275062),
        ({"x": pa.array([dt.time(12, 34, 56, 789012)], pa.time64("us"))}, -8115057001718591065),
        ({"x": ts.cast(pa.timestamp("us", tz="UTC"))}, -6434539492420352036),
        ({"x": ts}, -6434539492420352036),
        ({"x": ts.cast(pa.timestamp("us", tz="America/New_York"))}, -6434539492420352036),  # zone: no part
        ({"x": pa.array([{"d": _dec(123, 2), "e": [dt.date(2024, 1, 1), None]}],
                        pa.struct([("d", pa.decimal128(38, 10)), ("e", pa.list_(pa.date32()))]))},
         -7319645732399455219),
        ({"a": pa.array([None], pa.struct([("a", pa.int32())])), "b": pa.array([[]], pa.list_(pa.int32())),
          "c": pa.array([None], pa.list_(pa.int32())), "d": pa.array([7], pa.int32())}, 2786828215451145335),
        ({"x": pa.array([[[1], [], None, [2, 3]]], pa.list_(pa.list_(pa.int32())))}, 8592097078962733837),
    ]
    for columns, spark_value in cases:
        assert row_hashes(pa.table(columns)).tolist() == [spark_value], columns


def test_xxh64_lanes_are_xxh64_of_the_little_endian_bytes():
    from layout.compaction.integrity.xxh64 import hash_bytes, hash_int, hash_long

    rng = np.random.default_rng(3)
    ints = rng.integers(0, 2**32, 200, dtype=np.uint64)
    longs = rng.integers(0, 2**64 - 1, 200, dtype=np.uint64, endpoint=True)
    seeds = rng.integers(0, 2**64 - 1, 200, dtype=np.uint64, endpoint=True)
    pairs = list(zip(ints.tolist(), longs.tolist(), seeds.tolist(), strict=True))
    assert hash_int(ints, seeds).tolist() == [xxhash.xxh64_intdigest(struct.pack("<I", i), s) for i, _, s in pairs]
    assert hash_long(longs, seeds).tolist() == [xxhash.xxh64_intdigest(struct.pack("<Q", v), s) for _, v, s in pairs]
    assert hash_bytes([b"", b"abc"], seeds[:2]).tolist() == [xxhash.xxh64_intdigest(b, s)
                                                           for b, s in zip([b"", b"abc"], seeds[:2].tolist())]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.none(), st.binary(max_size=80), st.binary(min_size=1000, max_size=1100)), max_size=60),
       st.integers(0, 5), st.randoms(use_true_random=False))
def test_byte_strings_hashed_by_length_are_xxh64_of_each(values, cut, rnd):
    """`hash_binary` (all values of one length at once) against the `xxhash` package, value by value: every
    length across the 32-byte stripes, the 8- and 4-byte words and the last bytes, past the vector limit
    (1024), nulls, and an array that starts at an offset."""
    from layout.compaction.integrity.xxh64 import hash_binary

    arr = pa.array(values, pa.large_binary()).slice(min(cut, len(values)))
    seeds = np.array([rnd.getrandbits(64) for _ in range(len(arr))], dtype=np.uint64)
    got = hash_binary(arr, seeds).tolist()
    for value, seed, hashed in zip(arr.to_pylist(), seeds.tolist(), got, strict=True):
        if value is not None:
            assert hashed == xxhash.xxh64_intdigest(value, seed), (len(value), seed)


def test_long_lists_among_short_ones_match_the_reference():
    rng = np.random.default_rng(5)
    lengths = [0, 3000, 5, 1, 2999, 0, 7]
    values = [rng.integers(-(2**63), 2**63 - 1, n).tolist() if n else None for n in lengths]
    values[1][17] = None
    strs = [[f"s{i}" if i % 5 else None for i in range(n)] for n in lengths]
    table = pa.table({"l": pa.array(values, pa.list_(pa.int64())), "s": pa.array(strs, pa.list_(pa.string()))})
    assert row_hashes(table).tolist() == reference_row_hashes(table)


def test_nested_slices_list_kinds_and_hidden_values():
    table = nested_table()
    expected = row_hashes(table).tolist()
    assert row_hashes(table.slice(3, 4)).tolist() == expected[3:7]
    assert row_hashes(pa.concat_tables([table.slice(0, 3), table.slice(3)])).tolist() == expected
    assert row_hashes(table.to_batches()[0].slice(1, 6)).tolist() == expected[1:7]
    # large_list, fixed_size_list and dictionary-encoded elements hash as the list<...> they hold.
    li = pa.array([[1, None], None, [3, 4]], pa.list_(pa.int32()))
    want = row_hashes(pa.table({"x": li})).tolist()
    assert row_hashes(pa.table({"x": li.cast(pa.large_list(pa.int32()))})).tolist() == want
    assert row_hashes(pa.table({"x": li.cast(pa.list_(pa.int32(), 2))})).tolist() == want
    ls = pa.array([["a", "b", "a"], None, []])
    encoded = pa.ListArray.from_arrays(ls.offsets, ls.values.dictionary_encode(), mask=ls.is_null())
    assert row_hashes(pa.table({"x": encoded})).tolist() == row_hashes(pa.table({"x": ls})).tolist()
    # A null list may span values, and a null struct may hold field values: they are not hashed.
    hidden = pa.ListArray.from_arrays(pa.array([0, 2, 3], pa.int32()), pa.array([1, 2, 3], pa.int32()),
                                      mask=pa.array([True, False]))
    three = row_hashes(pa.table({"x": pa.array([[3]], pa.list_(pa.int32()))})).tolist()
    assert row_hashes(pa.table({"x": hidden})).tolist() == [42, *three]
    sub_micro = pa.array([1_500], pa.timestamp("ns"))  # would be refused if it were hashed
    masked = pa.StructArray.from_arrays([sub_micro], names=["t"], mask=pa.array([True]))
    assert row_hashes(pa.table({"x": masked})).tolist() == [42]
    with pytest.raises(UsageError, match=r"'x\.t'.*sub-microsecond"):
        row_hashes(pa.table({"x": pa.StructArray.from_arrays([sub_micro], names=["t"])}))
    # Iceberg uuid: 16 bytes, as fixed_size_binary(16) or the arrow.uuid extension.
    raw = pa.array([bytes(range(16)), None], pa.binary(16))
    assert row_hashes(pa.table({"u": raw.cast(pa.uuid())})).tolist() == row_hashes(pa.table({"u": raw})).tolist()


# ---------------------------------------------------------------------------------------------
# Random nested tables (hypothesis): against the reference here, against Spark below
# ---------------------------------------------------------------------------------------------

_LEAF_TYPES = [
    pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string(),
    pa.binary(), pa.date32(), pa.timestamp("us", tz="UTC"), pa.timestamp("us"), pa.time64("us"),
    pa.decimal128(9, 2), pa.decimal128(18, 3), pa.decimal128(38, 10),
]
_KEY_TYPES = [pa.string(), pa.int32(), pa.int64(), pa.date32()]


def _nested_types() -> st.SearchStrategy[pa.DataType]:
    def extend(children):
        return st.one_of(
            children.map(pa.list_),
            st.lists(children, min_size=1, max_size=3).map(
                lambda ts: pa.struct([(f"f{i}", t) for i, t in enumerate(ts)])),
            st.tuples(st.sampled_from(_KEY_TYPES), children).map(lambda kv: pa.map_(*kv)),
        )

    return st.recursive(st.sampled_from(_LEAF_TYPES), extend, max_leaves=5)


def _values(t: pa.DataType, nullable: bool = True) -> st.SearchStrategy:
    if pa.types.is_struct(t):
        base = st.fixed_dictionaries({f.name: _values(f.type) for f in t})
    elif pa.types.is_map(t):
        base = st.lists(st.tuples(_values(t.key_type, nullable=False), _values(t.item_type)), max_size=3,
                        unique_by=lambda kv: kv[0])
    elif pa.types.is_list(t):
        base = st.lists(_values(t.value_type), max_size=4)
    elif pa.types.is_boolean(t):
        base = st.booleans()
    elif pa.types.is_integer(t):
        bits = t.bit_width - 1
        base = st.integers(-(2**bits), 2**bits - 1)
    elif pa.types.is_floating(t):
        base = st.floats(width=t.bit_width)
    elif pa.types.is_string(t):
        base = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
    elif pa.types.is_binary(t):
        base = st.binary(max_size=8)
    elif pa.types.is_date(t):
        base = st.dates(dt.date(1900, 1, 1), dt.date(2100, 12, 31))
    elif pa.types.is_timestamp(t):
        base = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2100, 12, 31),
                            timezones=st.just(UTC) if t.tz else st.none())
    elif pa.types.is_time(t):
        base = st.times()
    else:  # decimal
        base = st.integers(-(10**t.precision) + 1, 10**t.precision - 1).map(lambda u: _dec(u, t.scale))
    return st.none() | base if nullable else base


@st.composite
def nested_tables(draw, max_rows: int = 10) -> pa.Table:
    types = draw(st.lists(_nested_types(), min_size=1, max_size=3))
    n = draw(st.integers(0, max_rows))
    cols = {"id": pa.array(range(n), pa.int32())}
    for i, t in enumerate(types):
        cols[f"c{i}"] = pa.array(draw(st.lists(_values(t), min_size=n, max_size=n)), t)
    return pa.table(cols)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nested_tables())
def test_random_nested_tables_match_the_reference(table):
    columns = table.column_names[1:]
    expected = reference_row_hashes(table, columns)
    assert row_hashes(table, columns).tolist() == expected
    assert row_hashes(table.slice(1), columns).tolist() == expected[1:]


def test_order_independence_and_sensitivity():
    table = all_types_table()
    base = fingerprint_table(table, DATA_COLUMNS)
    assert base.rows == table.num_rows
    shuffled = table.take(np.random.default_rng(7).permutation(table.num_rows))
    assert fingerprint_table(shuffled, DATA_COLUMNS) == base
    changed = table.set_column(table.schema.get_field_index("i32"), "i32",
                               pa.array([v if i != 5 else v + 1 for i, v in enumerate(table["i32"].to_pylist())],
                                        pa.int32()))
    assert fingerprint_table(changed, DATA_COLUMNS) != base
    assert fingerprint_table(table.slice(1), DATA_COLUMNS) != base
    duplicated = pa.concat_tables([table, table.slice(4, 1)])
    assert fingerprint_table(duplicated, DATA_COLUMNS) != base
    # Moving a value to another column (same row) changes the hash: the column order is part of it.
    assert fingerprint_table(table, ["i8", "i16"]) != fingerprint_table(table, ["i16", "i8"])


def test_combine_equals_fingerprint_of_concatenation(tmp_path):
    table = all_types_table()
    a, b = table.slice(0, 5), table.slice(5)
    assert fingerprint_table(a) + fingerprint_table(b) == fingerprint_table(table)
    assert Fingerprint.zero() + fingerprint_table(table) == fingerprint_table(table)
    assert fingerprint_table(table.slice(0, 0)) == Fingerprint.zero()
    files = [_write(a, tmp_path / "a.parquet"), _write(b, tmp_path / "b.parquet")]
    assert fingerprint_files(files, batch_size=2) == fingerprint_table(table)
    assert fingerprint_files(str(files[0])) == fingerprint_table(a)


def test_exact_sum_does_not_overflow():
    t = pa.table({"x": pa.array([5] * 10_000, pa.int64())})
    h = row_hashes(t.slice(0, 1))[0]
    assert fingerprint_table(t).hash_sum == int(h) * 10_000


def test_json_round_trip():
    fp = Fingerprint(3, -(2**100) + 17)
    data = fp.to_json()
    assert Fingerprint.from_json(json.loads(json.dumps(data))) == fp
    assert Fingerprint.from_json(json.dumps(data)) == fp
    with pytest.raises(InputError):
        Fingerprint.from_json({"rows": 1})
    with pytest.raises(InputError):
        Fingerprint.from_json({"format": "other", "rows": 1, "hash_sum": "1"})
    assert Fingerprint.from_spark(0, None) == Fingerprint.zero()
    assert Fingerprint.from_spark(2, Decimal(-12)) == Fingerprint(2, -12)


def test_files_errors_name_the_file(tmp_path):
    with pytest.raises(InputError, match="nope.parquet"):
        fingerprint_files([tmp_path / "nope.parquet"])
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match="bad.parquet"):
        fingerprint_files([bad])
    one = _write(pa.table({"x": pa.array([1], pa.int32())}), tmp_path / "one.parquet")
    two = _write(pa.table({"x": pa.array([1], pa.int64())}), tmp_path / "two.parquet")
    with pytest.raises(InputError, match="two.parquet.*'x'"):
        fingerprint_files([one, two])
    with pytest.raises(UsageError, match="'y'"):
        fingerprint_files([one], columns=["y"])


def test_tpch_lineitem_matches_the_reference(lineitem_dir):
    table = pq.read_table(lineitem_dir).slice(0, 2_000)
    assert row_hashes(table).tolist() == reference_row_hashes(table)


# ---------------------------------------------------------------------------------------------
# Against Spark
# ---------------------------------------------------------------------------------------------


@pytest.mark.spark
def test_spark_agrees_row_by_row_on_every_type(spark, tmp_path):
    table = all_types_table()
    path = _write(table, tmp_path / "all" / "part-0.parquet")
    df = spark.read.parquet(str(path.parent))
    assert {f.name: f.dataType.simpleString() for f in df.schema.fields if f.name != "id"} == SPARK_TYPES

    # The whole row, and each column alone (so that a mismatch names its type), in one Spark query.
    exprs = [f"{spark_row_hash_expr(DATA_COLUMNS)} AS row"]
    exprs += [f"{spark_row_hash_expr([c])} AS `h_{c}`" for c in DATA_COLUMNS]
    rows = df.selectExpr("id", *exprs).orderBy("id").collect()
    assert [r["row"] for r in rows] == row_hashes(table, DATA_COLUMNS).tolist()
    for c in DATA_COLUMNS:
        assert [r[f"h_{c}"] for r in rows] == row_hashes(table, [c]).tolist(), c

    assert _spark_fingerprint(df, DATA_COLUMNS) == fingerprint_table(table, DATA_COLUMNS)
    assert _spark_fingerprint(df, DATA_COLUMNS) == fingerprint_files([path], columns=DATA_COLUMNS)

    # Salted with a group id (an INT column, as the compaction job salts each row with its group).
    for salt in (0, 7, -3, 2**31 - 1):
        salted_sql = spark_row_hash_expr(DATA_COLUMNS, salt=f"CAST({salt} AS INT)")
        got = [r["h"] for r in df.selectExpr("id", f"{salted_sql} AS h").orderBy("id").collect()]
        assert got == salted(row_hashes(table, DATA_COLUMNS), salt).tolist(), salt
        expected = Fingerprint(len(got), sum(got))
        assert fingerprint_table(table, DATA_COLUMNS, salt=salt) == expected
        assert fingerprint_files([path], columns=DATA_COLUMNS, salt=salt) == expected
    assert fingerprint_table(table, DATA_COLUMNS, salt=1) != fingerprint_table(table, DATA_COLUMNS, salt=2)


@pytest.fixture
def spark_job(spark):
    """The session with the settings the job needs for maps and times (`SPARK_CONF`), restored after."""
    before = {k: spark.conf.get(k, None) for k in SPARK_CONF}
    for k, v in SPARK_CONF.items():
        spark.conf.set(k, v)
    try:
        yield spark
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


@pytest.mark.spark
def test_spark_refuses_a_hash_over_maps_without_the_legacy_conf(spark):
    from pyspark.errors import AnalysisException

    key = "spark.sql.legacy.allowHashOnMapType"
    before = spark.conf.get(key)  # the shared session: a job run in process earlier sets it to true
    spark.conf.set(key, "false")
    try:
        for expr in ("xxhash64(map('a', 1))", "xxhash64(named_struct('s', array(map('a', 1))))"):
            with pytest.raises(AnalysisException, match=r"HASH_MAP_TYPE.*spark\.sql\.legacy\.allowHashOnMapType"):
                spark.sql(f"SELECT {expr}").collect()
    finally:
        spark.conf.set(key, before)


@pytest.mark.spark
def test_spark_agrees_row_by_row_on_nested_types(spark_job, tmp_path):
    spark = spark_job
    table = nested_table()
    path = _write(table, tmp_path / "nested" / "part-0.parquet")
    df = spark.read.parquet(str(path.parent))
    assert {f.name: f.dataType.simpleString() for f in df.schema.fields if f.name != "id"} == NESTED_SPARK_TYPES

    exprs = [f"{spark_row_hash_expr(NESTED_COLUMNS)} AS row", "xxhash64(map_entries(m)) AS entries"]
    exprs += [f"{spark_row_hash_expr([c])} AS `h_{c}`" for c in NESTED_COLUMNS]
    rows = df.selectExpr("id", *exprs).orderBy("id").collect()
    for c in NESTED_COLUMNS:
        assert [r[f"h_{c}"] for r in rows] == row_hashes(table, [c]).tolist(), c
    assert [r["row"] for r in rows] == row_hashes(table, NESTED_COLUMNS).tolist()
    assert [r["entries"] for r in rows] == row_hashes(table, ["m"]).tolist()  # a map hashes as its entries
    expected = _spark_fingerprint(df, NESTED_COLUMNS)
    assert expected == fingerprint_table(table, NESTED_COLUMNS) == fingerprint_files([path], columns=NESTED_COLUMNS)

    # What the commit step reads: the files Spark writes (its own list and map layout).
    out = tmp_path / "written"
    df.repartition(3).write.parquet(str(out))
    files = sorted(out.glob("*.parquet"))
    assert len(files) > 1
    assert fingerprint_files(files, columns=NESTED_COLUMNS) == expected


@pytest.mark.spark
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(table=nested_tables(max_rows=12))
def test_spark_agrees_row_by_row_on_random_nested_tables(spark_job, tmp_path_factory, table):
    columns = table.column_names[1:]
    path = _write(table, tmp_path_factory.mktemp("random") / "part-0.parquet")
    rows = (spark_job.read.parquet(str(path.parent))
            .selectExpr("id", f"{spark_row_hash_expr(columns)} AS h").orderBy("id").collect())
    assert [r["h"] for r in rows] == row_hashes(table, columns).tolist(), table.schema


@pytest.mark.spark
def test_files_spark_writes_fingerprint_as_spark_reads_them(spark, tmp_path):
    """The commit step re-reads what Spark wrote: INT96 and INT64 timestamps, int-backed decimals."""
    table = all_types_table()
    df = spark.read.parquet(str(_write(table, tmp_path / "src" / "part-0.parquet").parent))
    expected = _spark_fingerprint(df, DATA_COLUMNS)
    for ts_type in ("INT96", "TIMESTAMP_MICROS", "TIMESTAMP_MILLIS"):
        out = tmp_path / ts_type
        spark.conf.set("spark.sql.parquet.outputTimestampType", ts_type)
        try:
            df.repartition(3).write.parquet(str(out))
        finally:
            spark.conf.unset("spark.sql.parquet.outputTimestampType")
        files = sorted(out.glob("*.parquet"))
        written = spark.read.parquet(str(out))
        if ts_type == "TIMESTAMP_MILLIS":  # millis truncate the micros: compare with what Spark reads back
            expected_here = _spark_fingerprint(written, DATA_COLUMNS)
            assert expected_here != expected
        else:
            expected_here = expected
            assert _spark_fingerprint(written, DATA_COLUMNS) == expected
        assert fingerprint_files(files, columns=DATA_COLUMNS) == expected_here, ts_type
        assert fingerprint_files(files, columns=["id", *DATA_COLUMNS]) == _spark_fingerprint(
            written, ["id", *DATA_COLUMNS])


@pytest.mark.spark
def test_int96_sub_micro_nanos_truncate_as_spark_reads_them(spark, tmp_path):
    # pyarrow can write INT96 with nanoseconds Spark cannot hold; both sides read them as micros.
    ts = pa.array([1_700_000_000_123_456_789, -1_999, 1_001, None], pa.timestamp("ns"))
    path = tmp_path / "int96" / "part-0.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"t": ts}), path, use_deprecated_int96_timestamps=True)
    df = spark.read.parquet(str(path.parent))
    assert _spark_fingerprint(df, ["t"]) == fingerprint_files([path])


@pytest.mark.spark
def test_tpch_lineitem_spark_equals_fingerprint_files(spark, lineitem_dir):
    files = sorted(lineitem_dir.glob("*.parquet"))
    df = spark.read.parquet(str(lineitem_dir))
    columns = df.columns
    ours = fingerprint_files(files, columns=columns)
    assert ours.rows > 50_000
    assert _spark_fingerprint(df, columns) == ours
    assert fingerprint_files(files) == ours
