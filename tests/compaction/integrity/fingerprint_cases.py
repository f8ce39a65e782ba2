"""The tables and random tables the fingerprint tests hash, with pyarrow (test_fingerprint.py, against the
per-value reference) and with Spark (test_fingerprint_spark.py, row by row): every supported type with its
extremes and edge values, nested structs, lists and maps with nulls at every level, and what Spark reads each
column as.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

UTC = dt.UTC


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------

BIG = 10**37 + 123456789  # unscaled: 38 digits


def dec(unscaled: int, scale: int) -> Decimal:
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
        "dec10": col([Decimal(x) for x in ["-12345678.90", "99999999.99", "0.00", "-0.01", "1.00", "0.01",
                                           "-99999999.99", "42.42", "7.00"]], pa.decimal128(10, 2), 2),
        "dec18": col([Decimal(x) for x in ["999999999999999999", "-999999999999999999", "0", "-1", "1",
                                           "-128", "128", "-129", "255"]], pa.decimal128(18, 0), 3),
        "dec19": col([Decimal(x) for x in ["9999999999999999999", "-9999999999999999999", "0", "-1", "1",
                                           "-128", "128", "-129", "255"]], pa.decimal128(19, 0), 4),
        "dec38": col([dec(v, 6) for v in [BIG, -BIG, 0, -128, 127, 128, -129, 10**38 - 1, -(10**38) + 1]],
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
    decs = pa.struct([("d9", pa.decimal128(9, 2)), ("d18", pa.decimal128(18, 4)),
                      ("d38", pa.decimal128(38, 10))])
    times = pa.struct([("tz", pa.timestamp("us", tz="UTC")), ("ntz", pa.timestamp("us")), ("d", pa.date32()),
                       ("t", pa.time64("us"))])
    utc = TS.replace(tzinfo=UTC)
    cols = {
        "id": pa.array(range(8), i32),
        "st": pa.array([{"i": 1, "s": "a"}, None, {"i": None, "s": "b"}, {"i": 2, "s": None},
                        {"i": None, "s": None}, {"i": -(2**31), "s": "日本"}, {"i": 0, "s": ""}, None], st),
        "deep": pa.array([{"a": {"x": 1, "y": ["p", None, "q"]}, "b": 1.5}, None, {"a": None, "b": -0.0},
                          {"a": {"x": None, "y": None}, "b": NAN},
                          {"a": {"x": 2**63 - 1, "y": []}, "b": None},
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
                         [("n", [NAN, INF, -INF])], [("x", [0.0]), ("y", [2.5, 3.5])], None,
                         [("z", [None])]], pa.map_(s, pa.list_(f64))),
        "sdec": pa.array([{"d9": dec(-999999999, 2), "d18": dec(10**18 - 1, 4), "d38": dec(BIG, 10)}, None,
                          {"d9": None, "d18": None, "d38": None}, {"d9": dec(1, 2), "d18": dec(-1, 4),
                                                                "d38": dec(-BIG, 10)},
                          {"d9": dec(0, 2), "d18": dec(-(10**18) + 1, 4), "d38": dec(10**38 - 1, 10)},
                          {"d9": dec(128, 2), "d18": dec(-129, 4), "d38": dec(-128, 10)},
                          {"d9": None, "d18": dec(255, 4), "d38": None}, None], decs),
        "times": pa.array([{"tz": utc, "ntz": TS, "d": dt.date(2024, 2, 29),
                            "t": dt.time(12, 34, 56, 789012)}, None,
                           {"tz": None, "ntz": None, "d": None, "t": None},
                           {"tz": dt.datetime(1970, 1, 1, tzinfo=UTC),
                            "ntz": dt.datetime(1969, 12, 31, 23, 59), "d": dt.date(1970, 1, 1),
                            "t": dt.time(0, 0)},
                           {"tz": dt.datetime(9999, 12, 31, 23, 59, 59, 999999, UTC), "ntz": None,
                            "d": dt.date(1900, 1, 1), "t": dt.time(23, 59, 59, 999999)},
                           {"tz": None, "ntz": dt.datetime(1900, 1, 1), "d": None, "t": dt.time(0, 0, 0, 1)},
                           None, {"tz": utc, "ntz": TS, "d": dt.date(2000, 1, 1), "t": None}], times),
        "lts": pa.array([[utc, None], None, [], [dt.datetime(1970, 1, 1, tzinfo=UTC)], [None], [utc] * 3,
                         None, [dt.datetime(1900, 1, 1, tzinfo=UTC)]],
                        pa.list_(pa.timestamp("us", tz="UTC"))),
        "lf": pa.array([[NAN, -0.0, 0.0], None, [], [INF, -INF, None], [1.5], [3.4e38, 1e-40], None, [-0.0]],
                       pa.list_(f32)),
        "ld": pa.array([[NAN, -0.0], [0.0], None, [None, -INF], [], [1.7e308, 5e-324], None, [-0.0, NAN]],
                       pa.list_(f64)),
        "lmisc": pa.array([{"b": [True, None, False], "d": [dt.date(2024, 1, 1), None], "bin": b"\x00\xff",
                            "i8": [-128, 127]}, None,
                           {"b": [], "d": None, "bin": None, "i8": [None]},
                           {"b": None, "d": [], "bin": b"", "i8": []},
                           {"b": [False], "d": [dt.date(1970, 1, 2)], "bin": b"abc", "i8": None}, None,
                           {"b": None, "d": None, "bin": None, "i8": None},
                           {"b": [True] * 5, "d": [dt.date(2000, 2, 29)], "bin": bytes(range(40)),
                            "i8": [0]}],
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


def write_parquet(table: pa.Table, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path



# ---------------------------------------------------------------------------------------------
# Random nested tables (hypothesis): against the reference and against Spark
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
        base = st.integers(-(10**t.precision) + 1, 10**t.precision - 1).map(lambda u: dec(u, t.scale))
    return st.none() | base if nullable else base


@st.composite
def nested_tables(draw, max_rows: int = 10) -> pa.Table:
    types = draw(st.lists(_nested_types(), min_size=1, max_size=3))
    n = draw(st.integers(0, max_rows))
    cols = {"id": pa.array(range(n), pa.int32())}
    for i, t in enumerate(types):
        cols[f"c{i}"] = pa.array(draw(st.lists(_values(t), min_size=n, max_size=n)), t)
    return pa.table(cols)
