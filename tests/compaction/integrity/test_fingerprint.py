"""The content fingerprint without Spark: the vectorised xxh64 lanes against the `xxhash` package, and our
pyarrow reimplementation of Spark's xxhash64 (`row_hashes`, `fingerprint_table`, `fingerprint_files`) against
a slow per-value reference, on every type, nested types, random nested tables and TPC-H lineitem. That Spark
agrees row by row is test_fingerprint_spark.py's.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
from decimal import Context, Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from fingerprint_cases import (
    DATA_COLUMNS,
    NESTED_COLUMNS,
    TS,
    UTC,
    all_types_table,
    dec,
    nested_table,
    nested_tables,
    write_parquet,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout.compaction.integrity.fingerprint import (
    Fingerprint,
    fingerprint_files,
    fingerprint_table,
    row_hashes,
    spark_fingerprint_expr,
    spark_row_hash_expr,
)
from layout.errors import InputError, UsageError

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
        ({"x": pa.array([dec(12345678901234567890123, 3)], pa.decimal128(38, 3))}, 1409737168217643118),
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
    ns = pa.Array.from_buffers(pa.timestamp("ns"), 1,
                               [pa.py_buffer(b"\x00"), pa.py_buffer(struct.pack("<q", 7))])
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
        ({"x": pa.array([{"d": dec(123, 2), "e": [dt.date(2024, 1, 1), None]}],
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
    assert (hash_int(ints, seeds).tolist()
            == [xxhash.xxh64_intdigest(struct.pack("<I", i), s) for i, _, s in pairs])
    assert (hash_long(longs, seeds).tolist()
            == [xxhash.xxh64_intdigest(struct.pack("<Q", v), s) for _, v, s in pairs])
    assert hash_bytes([b"", b"abc"], seeds[:2]).tolist() == [xxhash.xxh64_intdigest(b, s)
                                                           for b, s in zip([b"", b"abc"], seeds[:2].tolist())]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.none(), st.binary(max_size=80), st.binary(min_size=1000, max_size=1100)),
                max_size=60),
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
    table = pa.table({"l": pa.array(values, pa.list_(pa.int64())),
                      "s": pa.array(strs, pa.list_(pa.string()))})
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
    assert (row_hashes(pa.table({"u": raw.cast(pa.uuid())})).tolist()
            == row_hashes(pa.table({"u": raw})).tolist())


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
                               pa.array([v if i != 5 else v + 1
                                         for i, v in enumerate(table["i32"].to_pylist())],
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
    files = [write_parquet(a, tmp_path / "a.parquet"), write_parquet(b, tmp_path / "b.parquet")]
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
    one = write_parquet(pa.table({"x": pa.array([1], pa.int32())}), tmp_path / "one.parquet")
    two = write_parquet(pa.table({"x": pa.array([1], pa.int64())}), tmp_path / "two.parquet")
    with pytest.raises(InputError, match="two.parquet.*'x'"):
        fingerprint_files([one, two])
    with pytest.raises(UsageError, match="'y'"):
        fingerprint_files([one], columns=["y"])


def test_tpch_lineitem_matches_the_reference(lineitem_dir):
    table = pq.read_table(lineitem_dir).slice(0, 2_000)
    assert row_hashes(table).tolist() == reference_row_hashes(table)
