"""Sort-key transforms computed as Iceberg computes them (issue #54): lakesort's Arrow path (`arrow_values`,
pyiceberg's Rust core) against pyiceberg's scalar transforms and the Iceberg spec's own hash values, and the
job's Spark SQL expressions (`spark_sql`) against pyiceberg over values with negatives, nulls, dates before
1970, boundaries and unicode: one Spark query for all of them, in a session time zone that is not UTC."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg import types as I
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.transforms import BucketTransform, parse_transform

from layout.transforms import arrow_values, keeps_order, parse, spark_sql

UTC = dt.UTC
INT_MAX = 2**31 - 1
DATES = st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(9999, 12, 31))
INSTANTS = st.datetimes(min_value=dt.datetime(1000, 1, 1), max_value=dt.datetime(3000, 1, 1),
                        timezones=st.just(UTC))
WALL = st.datetimes(min_value=dt.datetime(1000, 1, 1), max_value=dt.datetime(3000, 1, 1))
CASES = [  # (Iceberg type, values, transforms)
    (I.IntegerType(), st.integers(-(2**31) + 100, 2**31 - 100), ["bucket[8]", "truncate[10]", "truncate[1]"]),
    (I.LongType(), st.integers(-(2**63) + 100, 2**63 - 100), ["bucket[16]", "truncate[7]"]),
    (I.StringType(), st.text(max_size=12), ["bucket[8]", "truncate[3]"]),
    (I.BinaryType(), st.binary(max_size=12), ["bucket[8]", "truncate[3]"]),
    (I.DateType(), DATES, ["bucket[8]", "year", "month", "day"]),
    (I.TimestamptzType(), INSTANTS, ["bucket[8]", "year", "month", "day", "hour"]),
    (I.TimestampType(), WALL, ["bucket[8]", "year", "month", "day", "hour"]),
    (I.DecimalType(12, 2), st.decimals(min_value=Decimal("-9999999999.99"),
                                       max_value=Decimal("9999999999.99"), places=2),
     ["bucket[8]", "truncate[50]"]),
]


@pytest.mark.parametrize(("source", "values", "names"), CASES, ids=[str(c[0]) for c in CASES])
def test_arrow_values_are_pyicebergs_scalar_transforms(source, values, names):
    @settings(max_examples=30, deadline=None)
    @given(st.lists(st.one_of(st.none(), values), min_size=1, max_size=20))
    def check(batch):
        array = pa.array(batch, schema_to_pyarrow(source))
        for name in names:
            scalar = parse_transform(name).transform(source)
            got = arrow_values(name, source, array).to_pylist()
            want = [None if v is None else scalar(_iceberg_value(source, v)) for v in batch]
            if name.startswith("truncate") and isinstance(source, (I.DecimalType,)):
                got = [None if g is None else g.scaleb(0) for g in got]
            assert got == want, (name, batch)

    check()


def _iceberg_value(source, value):
    """pyiceberg's scalar transforms take Iceberg's internal values: days, microseconds."""
    if isinstance(source, I.DateType):
        return (value - dt.date(1970, 1, 1)).days
    if isinstance(source, I.TimestamptzType):
        return (value - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)
    if isinstance(source, I.TimestampType):
        return (value - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    return value


def test_bucket_hashes_are_the_iceberg_specs():
    """The spec's appendix values of murmur3_x86_32 (seed 0) over Iceberg's single-value forms: Spark's
    hash() (seed 42, 4-byte ints) gives others."""
    full = "bucket[2147483647]"  # (hash & Integer.MAX_VALUE) % MAX is the masked hash itself
    cases = [(I.IntegerType(), pa.array([34], pa.int32()), 2017239379),
             (I.LongType(), pa.array([34], pa.int64()), 2017239379),
             (I.DateType(), pa.array([dt.date(2017, 11, 16)]), -653330422),
             (I.StringType(), pa.array(["iceberg"]), 1210000089),
             (I.BinaryType(), pa.array([b"\x00\x01\x02\x03"]), -188683207),
             (I.DecimalType(4, 2), pa.array([Decimal("14.20")], pa.decimal128(4, 2)), -500754589)]
    for source, array, spec_hash in cases:
        assert arrow_values(full, source, array).to_pylist() == [(spec_hash & INT_MAX) % INT_MAX], source
    assert BucketTransform(8).transform(I.LongType())(34) == (2017239379 & INT_MAX) % 8


def test_parse_names_what_lakesort_sorts_by():
    assert [parse(t) for t in ("identity", "Bucket(8)", "truncate[ 3 ]", "days", "HOUR")] == [
        "identity", "bucket[8]", "truncate[3]", "day", "hour"]
    for bad in ("void", "bucket[0]", "zorder", "bucket"):
        with pytest.raises(ValueError, match="transform"):
            parse(bad)
    assert keeps_order("day") and keeps_order("truncate[3]") and not keeps_order("bucket[8]")


# Spark computes these exactly; the rest go through `arrow_values` (None from spark_sql).
SPARK_CASES = [(I.IntegerType(), "truncate[10]"), (I.LongType(), "truncate[7]"),
               (I.StringType(), "truncate[3]"), (I.BinaryType(), "truncate[2]"), (I.DateType(), "year"),
               (I.DateType(), "month"),
               (I.DateType(), "day"), (I.TimestamptzType(), "year"), (I.TimestamptzType(), "month"),
               (I.TimestamptzType(), "day"), (I.TimestamptzType(), "hour")]


def _values(source, rng: random.Random) -> list:
    edge = {
        "int": [0, -1, 1, -10, 10, -11, 9, -(2**31) + 20, 2**31 - 20],
        "long": [0, -1, 6, -7, -8, 2**62, -(2**62)],
        "string": ["", "a", "ab", "abc", "abcd", "é😀x", "😀😀😀😀", "ſtraße", "日本語テキスト"],
        "binary": [b"", b"\x00", b"\xff\xfe\xfd", b"abc"],
        "date": [dt.date(1970, 1, 1), dt.date(1969, 12, 31), dt.date(1969, 1, 1), dt.date(1968, 12, 31),
                 dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(2000, 2, 29)],
        "timestamptz": [dt.datetime(1970, 1, 1, tzinfo=UTC), dt.datetime(1969, 12, 31, 23, 59, 59, 999999,
                                                                         tzinfo=UTC),
                        dt.datetime(1969, 12, 31, 23, tzinfo=UTC), dt.datetime(1900, 3, 1, 0, 30, tzinfo=UTC),
                        dt.datetime(2024, 3, 10, 7, 0, tzinfo=UTC)],
    }[str(source).split("(")[0]]
    draw = {
        "int": lambda: rng.randint(-(2**31) + 20, 2**31 - 20),
        "long": lambda: rng.randint(-(2**62), 2**62),
        "string": lambda: "".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0xA0, 0x2FFF),
                                                  rng.randint(0x1F300, 0x1F64F)]))
                                  for _ in range(rng.randint(0, 6))),
        "binary": lambda: bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 5))),
        "date": lambda: dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-700_000, 700_000)),
        "timestamptz": lambda: dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(
            microseconds=rng.randint(-(2**55), 2**55)),
    }[str(source).split("(")[0]]
    return [*edge, None, *(draw() for _ in range(150))]


def test_spark_sql_is_icebergs_transform(spark):
    """Every Spark expression of the job over edge and random values in one query, in a session time zone
    with daylight saving (an instant's day is UTC's, as Iceberg's is), against pyiceberg."""
    rng = random.Random(54)
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        for source, name in SPARK_CASES:
            values = _values(source, rng)
            arrow = pa.table({"v": pa.array(values, schema_to_pyarrow(source))})
            sql = spark_sql(name, "`v`", source)
            assert sql is not None, (source, name)
            frame = spark.createDataFrame([(v,) for v in values], _spark_schema(source))
            got = [r[0] for r in frame.selectExpr(sql).collect()]
            want = arrow_values(name, source, arrow["v"]).to_pylist()
            wrong = [(v, g, w) for v, g, w in zip(values, got, want) if g != w]
            assert not wrong, (source, name, wrong[:5])
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert spark_sql("bucket[8]", "`v`", I.LongType()) is None  # Spark's hash() is not Iceberg's
    assert spark_sql("day", "`v`", I.TimestampType()) is None  # wall-clock: not via the session's zone


def _spark_schema(source):
    from pyspark.sql import types as T

    spark_type = {"int": T.IntegerType(), "long": T.LongType(), "string": T.StringType(),
                  "binary": T.BinaryType(), "date": T.DateType(),
                  "timestamptz": T.TimestampType()}[str(source).split("(")[0]]
    return T.StructType([T.StructField("v", spark_type, True)])
