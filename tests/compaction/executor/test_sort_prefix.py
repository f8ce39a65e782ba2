"""The multi-key sort prefix (`layout.compaction.executor.sort_prefix`) against brute-force oracles.

- Pure: for random keys (ranges up to the whole long, either direction, nulls first or last), rows sorted by
  Python's own comparison of the keys get prefixes that never decrease; an exact prefix tells rows with
  different keys apart.
- Spark: the SQL text evaluated by Spark equals the Python arithmetic row by row, for every type with an
  ordinal (int, long, boolean, date, timestamp, timestamp without zone, decimal), and rows in Spark's own
  sort order get non-decreasing prefixes.
"""
from __future__ import annotations

import datetime as dt
import functools
import itertools
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg import types as I

from layout.compaction.executor.sort_prefix import PREFIX_BITS, ordinal_sql, plan_prefix

LONG = st.integers(-(1 << 63), (1 << 63) - 1)


def _sort_key(values, keys):
    """Python's comparison of rows by the keys, direction and null placement per key (the oracle)."""

    def compare(a, b):
        for (direction, nulls), x, y in zip(keys, a, b, strict=True):
            if x == y:
                continue
            if x is None or y is None:
                first = (x is None) == (nulls == "first")
                return -1 if first else 1
            less = x < y if direction == "asc" else x > y
            return -1 if less else 1
        return 0

    return sorted(values, key=functools.cmp_to_key(compare))


@st.composite
def _case(draw):
    n = draw(st.integers(2, 3))
    keys, columns = [], []
    for _ in range(n):
        lo = draw(LONG)
        hi = draw(st.integers(lo, min(lo + draw(st.sampled_from([1, 10, 1 << 20, 1 << 40, 1 << 64])),
                                      (1 << 63) - 1)))
        keys.append((draw(st.sampled_from(["asc", "desc"])), draw(st.sampled_from(["first", "last"]))))
        columns.append(st.one_of(st.none(), st.integers(lo, hi)))
    rows = draw(st.lists(st.tuples(*columns), min_size=1, max_size=40))
    return keys, rows


def _plan(keys, rows, widen=0):
    described = []
    for i, (direction, nulls) in enumerate(keys):
        seen = [r[i] for r in rows if r[i] is not None]
        low = max(min(seen) - widen, -(1 << 63)) if seen else None
        high = min(max(seen) + widen, (1 << 63) - 1) if seen else None
        described.append((f"k{i}", direction, nulls, low, high))
    return plan_prefix(described)


@settings(max_examples=300, deadline=None)
@given(_case(), st.sampled_from([0, 0, 1, 1000]))
def test_prefix_never_decreases_along_the_sort_order(case, widen):
    """Also when the planned range is wider than the data (`widen`). (Narrower it must not be: the job takes
    the range from the same rows, and a value outside would be clamped onto its neighbour's position.)"""
    keys, rows = case
    plan = _plan(keys, rows, widen)
    if plan is None:  # only when the first key's range leaves at most one bit for the second
        seen = [r[0] for r in rows if r[0] is not None]
        low, high = max(min(seen) - widen, -(1 << 63)), min(max(seen) + widen, (1 << 63) - 1)
        assert (high - low + 1).bit_length() >= PREFIX_BITS - 1
        return
    assert len(plan.keys) >= 2
    assert sum(k.bits for k in plan.keys) <= PREFIX_BITS
    prefixes = [plan.encode(r) for r in _sort_key(rows, keys)]
    assert all(0 <= p < (1 << PREFIX_BITS) for p in prefixes)
    assert prefixes == sorted(prefixes), "a row later in the sort order got a smaller prefix"
    if plan.exact and widen == 0:
        by_prefix = {}
        for r in rows:
            by_prefix.setdefault(plan.encode(r), set()).add(r)
        assert all(len(same) == 1 for same in by_prefix.values()), (
            "an exact prefix must tell different keys apart")


def test_plans_say_what_they_hold():
    date_like = ("o", "asc", "first", 8000, 10600)  # 2,600 days
    order_key = ("o", "asc", "first", 1, 6_000_000)
    plan = plan_prefix([date_like, order_key])
    assert plan.exact and [k.bits for k in plan.keys] == [12, 23] and [k.shift for k in plan.keys] == [0, 0]
    wide = plan_prefix([date_like, ("o", "desc", "last", -(1 << 63), (1 << 63) - 1), order_key])
    assert not wide.exact and len(wide.keys) == 2 and wide.keys[1].shift > 0  # stops at the shifted key
    # a string second key: no gain
    assert plan_prefix([date_like, (None, "asc", "first", None, None)]) is None
    assert plan_prefix([date_like]) is None  # one key: Spark's own prefix
    partly = plan_prefix([date_like, order_key, (None, "asc", "first", None, None)])
    assert len(partly.keys) == 2 and not partly.exact  # the sort still compares the third key on ties
    # all null: one position
    assert plan_prefix([("o", "asc", "last", None, None), order_key]).keys[0].bits == 1
    # One bit left after a 62-bit key, and a range across zero: the prefix stops there (it used to loop).
    across = plan_prefix([("o", "asc", "first", 0, (1 << 61) - 1), ("o", "asc", "first", -5, 5), order_key])
    assert across is None or (len(across.keys) == 1 and not across.exact)


TYPES = {
    "i": (I.IntegerType(), "int", [None, -(1 << 31), -1, 0, 7, (1 << 31) - 1]),
    "l": (I.LongType(), "bigint", [None, -(1 << 63), -5, 0, 3, (1 << 63) - 1]),
    "b": (I.BooleanType(), "boolean", [None, False, True]),
    "d": (I.DateType(), "date",
          [None, dt.date(1, 1, 1), dt.date(1969, 12, 31), dt.date(1970, 1, 1), dt.date(9999, 12, 31)]),
    "t": (I.TimestamptzType(), "timestamp", [None, dt.datetime(1900, 1, 1, tzinfo=dt.UTC),
                                               dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC),
                                               dt.datetime(2262, 4, 11, 23, 47, 16, 854775, tzinfo=dt.UTC)]),
    "n": (I.TimestampType(), "timestamp_ntz", [None, dt.datetime(1800, 5, 1), dt.datetime(1970, 1, 1),
                                                 dt.datetime(2100, 1, 1, 12, 0, 0, 999999)]),
    "m": (I.DecimalType(10, 2), "decimal(10,2)", [None, Decimal("-99999999.99"), Decimal("-0.01"),
                                                  Decimal("0.00"), Decimal("12.34"), Decimal("99999999.99")]),
}


@pytest.mark.parametrize("names,directions", [
    ("il", [("asc", "first"), ("asc", "first")]),
    ("dl", [("asc", "last"), ("desc", "first")]),
    ("bmt", [("desc", "last"), ("asc", "first"), ("desc", "first")]),
    ("nid", [("asc", "first"), ("desc", "last"), ("asc", "last")]),
    ("ml", [("desc", "first"), ("asc", "last")]),
])
def test_spark_evaluates_the_prefix_as_python_does_and_in_its_sort_order(spark, names, directions):
    from pyspark.sql import functions as F

    schema = ", ".join(f"{n} {TYPES[n][1]}" for n in names)
    rows = list(itertools.product(*[TYPES[n][2] for n in names]))
    df = spark.createDataFrame(rows, schema)
    ordinals = [ordinal_sql(n, TYPES[n][0]) for n in names]
    assert all(ordinals)
    ranges = df.select(*[f(F.expr(o)) for o in ordinals for f in (F.min, F.max)]).first()
    plan = plan_prefix([(o, d, nl, ranges[2 * i], ranges[2 * i + 1])
                        for i, (o, (d, nl)) in enumerate(zip(ordinals, directions, strict=True))])
    assert plan is not None
    order = []
    for n, (d, nl) in zip(names, directions, strict=True):
        c = F.col(n)
        order.append({("asc", "first"): c.asc_nulls_first(), ("asc", "last"): c.asc_nulls_last(),
                      ("desc", "first"): c.desc_nulls_first(), ("desc",
                                                                "last"): c.desc_nulls_last()}[(d, nl)])
    got = (df.select(F.expr(plan.sql()).alias("p"), *[F.expr(o).alias(f"o{i}")
                                                      for i, o in enumerate(ordinals)],
                     *names).orderBy(*order).collect())
    for r in got:
        assert r.p == plan.encode([r[f"o{i}"] for i in range(len(names))]), r
    prefixes = [r.p for r in got]
    assert prefixes == sorted(prefixes), "Spark's sort order and the prefix disagree"
    # The ordinals themselves keep each type's order: sorting the values by ordinal is sorting the values.
    for i, n in enumerate(names):
        pairs = sorted({(r[f"o{i}"], r[n]) for r in got if r[n] is not None})
        assert [v for _, v in pairs] == sorted(v for _, v in pairs)


def test_the_job_s_figures_give_each_key_its_range():
    """`key_ordinals` from the table's schema (top-level columns only),
    `sort_prefix` from the first pass's rows."""
    from pyiceberg.schema import Schema

    from layout.compaction.executor.sort_prefix import key_ordinals, sort_prefix
    from layout.compaction.plan import SortKeyModel

    schema = Schema(I.NestedField(1, "a", I.LongType()), I.NestedField(2, "s", I.StringType()),
                    I.NestedField(3, "d", I.DateType()))
    assert key_ordinals(schema, ["d", "s", "a", "__lakesort_z"]) == (
        "CAST(unix_date(`d`) AS BIGINT)", None, "CAST(`a` AS BIGINT)", None)
    figures = [{"__low0": 5, "__high0": 10, "__low1": None, "__high1": None},
               {"__low0": 1, "__high0": 7, "__low1": -3, "__high1": 4}]
    x, y = SortKeyModel(column="x"), SortKeyModel(column="y", direction="desc", nulls="last")
    plan = sort_prefix([x, y], ["x", "y"], figures)
    assert [(k.low, k.high) for k in plan.keys] == [(1, 10), (-3, 4)] and plan.exact
    assert [(k.direction, k.nulls) for k in plan.keys] == [("asc", "first"), ("desc", "last")]
    assert sort_prefix([x, x], ["x", None], figures) is None


@pytest.mark.parametrize("name", sorted(TYPES))
def test_a_manifest_bound_s_ordinal_is_the_one_spark_computes(spark, name):
    """`bound_ordinal` of a value serialized as Iceberg's single-value bound (pyiceberg's `to_bytes` then
    `from_bytes`, as the planner reads manifests) equals the ordinal Spark computes from `ordinal_sql` over
    the same value in a row: the job plans its prefix ranges from the former and sorts by the latter."""
    from pyiceberg.conversions import from_bytes, to_bytes
    from pyiceberg.utils.datetime import date_to_days, datetime_to_micros

    from layout.compaction.executor.sort_prefix import bound_ordinal

    iceberg_type, spark_type, values = TYPES[name]
    values = [v for v in values if v is not None]
    rows = spark.createDataFrame([(v,) for v in values], f"{name} {spark_type}")
    computed = [r[0] for r in rows.selectExpr(ordinal_sql(name, iceberg_type)).collect()]

    def internal(v):  # the value as Iceberg stores it (what pyiceberg's writers put in the manifest)
        if isinstance(v, dt.datetime):
            return datetime_to_micros(v)
        if isinstance(v, dt.date):
            return date_to_days(v)
        return v

    from_manifest = [bound_ordinal(iceberg_type,
                                   from_bytes(iceberg_type, to_bytes(iceberg_type, internal(v))))
                     for v in values]
    assert from_manifest == computed
    assert bound_ordinal(I.StringType(), "x") is None and bound_ordinal(I.DoubleType(), 1.5) is None
    assert bound_ordinal(I.DecimalType(30, 2), Decimal("1.00")) is None  # past 18 digits: no ordinal
