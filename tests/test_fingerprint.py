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

from layout.errors import InputError, UsageError
from layout.fingerprint import (
    Fingerprint,
    fingerprint_files,
    fingerprint_table,
    row_hashes,
    spark_fingerprint_expr,
    spark_row_hash_expr,
)

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


def reference_row_hashes(table: pa.Table, columns: list[str] | None = None) -> list[int]:
    columns = columns or table.column_names
    cols = [(table.column(c).to_pylist(), table.schema.field(c).type) for c in columns]
    out = []
    for r in range(table.num_rows):
        h = 42
        for values, dtype in cols:
            b = _reference_value_bytes(values[r], dtype)
            if b is not None:
                h = xxhash.xxh64_intdigest(b, h & 0xFFFFFFFFFFFFFFFF)
        h &= 0xFFFFFFFFFFFFFFFF
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
    if found is None:
        pytest.skip("tpchgen-cli is not installed (dev dependency group)")
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
    t = pa.table({"ok": [1], "tags": pa.array([["a"]])})
    with pytest.raises(UsageError, match="'tags'.*list"):
        fingerprint_table(t)
    assert fingerprint_table(t, ["ok"]).rows == 1
    with pytest.raises(UsageError, match="'missing'"):
        fingerprint_table(t, ["missing"])
    with pytest.raises(UsageError, match="'st'"):
        fingerprint_table(pa.table({"st": pa.array([{"x": 1}])}))
    with pytest.raises(UsageError, match="38 digits"):
        fingerprint_table(pa.table({"d": pa.array([Decimal(1)], pa.decimal256(40, 0))}))


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
