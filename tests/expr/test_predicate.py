"""The predicate tree: SQL parsing, binding, rewrite_not, and exact evaluation against a row-by-row oracle
(tests/sql_oracle.py, checked against DuckDB in test_sql_oracle.py)."""

from __future__ import annotations

import datetime as dt
import math
import pickle
import re
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sql_oracle import evaluate

from layout.errors import UsageError
from layout.expr.bind import Kind, bind, schema_kinds, to_arrow_filter
from layout.expr.predicate import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Eq,
    Expr,
    Gt,
    GtEq,
    In,
    IsNaN,
    IsNull,
    Like,
    Lt,
    LtEq,
    Not,
    NotEq,
    NotIn,
    NotLike,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    PredicateVisitor,
    StartsWith,
    columns,
    rewrite_not,
    visit,
)
from layout.expr.sql import parse_where

# -- parsing ----------------------------------------------------------------------------------

PARSES = [
    ("l_quantity < 10", Lt("l_quantity", 10)),
    ("l_shipdate >= DATE '1995-01-01'", GtEq("l_shipdate", dt.date(1995, 1, 1))),
    ("l_shipdate >= CAST('1995-01-01' AS DATE)", GtEq("l_shipdate", dt.date(1995, 1, 1))),
    ("ts < TIMESTAMP '1998-09-01 10:30:00'", Lt("ts", dt.datetime(1998, 9, 1, 10, 30))),
    ("t = TIME '10:00:00'", Eq("t", dt.time(10))),
    ("price = 1.50", Eq("price", Decimal("1.50"))),
    ("x = 1e3", Eq("x", 1000.0)),
    ("x = -7", Eq("x", -7)),
    ("x <> 'it\\'s'", NotEq("x", "it's")),
    ("x != 3", NotEq("x", 3)),
    ("flag = TRUE", Eq("flag", True)),
    ("flag", Eq("flag", True)),
    ("b = X'ABCD'", Eq("b", b"\xab\xcd")),
    ("10 > x", Lt("x", 10)),
    ("10 <= x", GtEq("x", 10)),
    ("x BETWEEN 1 AND 5", And(GtEq("x", 1), LtEq("x", 5))),
    ("x IN (1, 2, -3)", In("x", {1, 2, -3})),
    ("x NOT IN ('a', 'b')", NotIn("x", {"a", "b"})),
    ("x IS NULL", IsNull("x")),
    ("x IS NOT NULL", NotNull("x")),
    ("s LIKE 'abc%'", StartsWith("s", "abc")),
    ("s NOT LIKE 'abc%'", NotStartsWith("s", "abc")),
    ("s LIKE 'a\\\\%b%'", StartsWith("s", "a%b")),
    ("s LIKE 'a_c%'", Like("s", "a_c%")),
    ("s NOT LIKE '%abc'", NotLike("s", "%abc")),
    ("s LIKE 'abc'", Eq("s", "abc")),
    ("startswith(b, X'FF')", StartsWith("b", b"\xff")),
    ("startswith(s, 'ab')", StartsWith("s", "ab")),
    ("isnan(f)", IsNaN("f")),
    ("NOT isnan(f)", NotNaN("f")),
    ("NOT x = 1", NotEq("x", 1)),
    ("NOT (x = 1 OR y = 2)", Not(Or(Eq("x", 1), Eq("y", 2)))),
    ("(a = 1 OR b = 2) AND c = 3", And(Or(Eq("a", 1), Eq("b", 2)), Eq("c", 3))),
    ("s.inner.leaf = 1", Eq("s.inner.leaf", 1)),
    ("a.b.c.d.e = 1", Eq("a.b.c.d.e", 1)),
    ("`odd name` = 1", Eq("odd name", 1)),
    ("TRUE", AlwaysTrue()),
    ("x = 1 AND FALSE", AlwaysFalse()),
    ("SELECT * FROM lineitem WHERE l_tax > 0.05", Gt("l_tax", Decimal("0.05"))),
    ("SELECT a FROM lineitem AS l WHERE l.l_tax > 0 AND lineitem.x = 1", And(Gt("l_tax", 0), Eq("x", 1))),
    ("SELECT * FROM lineitem", AlwaysTrue()),
]


@pytest.mark.parametrize(("sql", "expected"), PARSES, ids=[sql for sql, _ in PARSES])
def test_should_parse(sql, expected):
    parsed = parse_where(sql)
    assert parsed == expected
    assert type(parsed) is type(expected)


def test_should_parse_a_tpch_q6_where_and_keep_literal_types():
    parsed = parse_where(
        "SELECT sum(l_extendedprice * l_discount) FROM lineitem WHERE l_shipdate >= DATE '1994-01-01' "
        "AND l_shipdate < DATE '1995-01-01' AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"
    )
    assert columns(parsed) == {"l_shipdate", "l_discount", "l_quantity"}
    assert str(parsed) == (
        "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
        "AND l_discount >= 0.05 AND l_discount <= 0.07 AND l_quantity < 24"
    )


def test_should_parse_with_another_dialect():
    assert parse_where('"Quoted" = 1', dialect="postgres") == Eq("Quoted", 1)


REJECTS = [
    ("a = b", "column-vs-column comparison `a = b`"),
    ("upper(s) = 'X'", "function UPPER"),
    ("a + 1 = 2", "expression over columns"),
    ("a IN (SELECT x FROM t)", "subquery"),
    ("EXISTS (SELECT 1)", "subquery"),
    ("a = NULL", "use IS NULL"),
    ("1 = 1", "without a column"),
    ("a IS TRUE", "IS NULL / IS NOT NULL"),
    ("s ILIKE 'x%'", "ILike"),
    ("a = CAST('not a date' AS DATE)", "'not a date' as DATE"),
    ("a = 1; b = 2", "2 statements"),
    ("a = ", "cannot parse"),
    ("SELECT 1 UNION SELECT 2", "single SELECT"),
]


@pytest.mark.parametrize(("sql", "message"), REJECTS, ids=[sql for sql, _ in REJECTS])
def test_should_reject_unsupported_sql_naming_the_construct(sql, message):
    with pytest.raises(UsageError, match=re.escape(message)) as error:
        parse_where(sql)
    if "unsupported" in str(error.value):
        assert "supported: AND, OR, NOT" in str(error.value)


def test_constructors_simplify_like_pyiceberg():
    a, b, c = Eq("a", 1), Eq("b", 2), Eq("c", 3)
    assert And(a, AlwaysTrue()) == a
    assert And(AlwaysFalse(), a) == AlwaysFalse()
    assert Or(a, AlwaysTrue()) == AlwaysTrue()
    assert Or(AlwaysFalse(), a) == a
    assert And(a, b, c) == And(And(a, b), c)
    assert Not(Not(a)) == a
    assert Not(AlwaysTrue()) == AlwaysFalse()
    assert (a & b) == And(a, b) and (a | b) == Or(a, b) and ~a == Not(a)
    assert pickle.loads(pickle.dumps(Or(a, Not(And(b, c))))) == Or(a, Not(And(b, c)))
    with pytest.raises(AttributeError):
        a.column = "z"  # type: ignore[misc]


def test_rewrite_not_pushes_negation_into_leaves():
    expr = Not(And(Or(Lt("a", 1), In("b", {1, 2})), Not(IsNull("c"))))
    assert rewrite_not(expr) == Or(And(GtEq("a", 1), NotIn("b", {1, 2})), IsNull("c"))
    assert rewrite_not(Not(StartsWith("s", "x"))) == NotStartsWith("s", "x")
    assert rewrite_not(Not(Like("s", "%x"))) == NotLike("s", "%x")
    assert rewrite_not(Not(IsNaN("f"))) == NotNaN("f")
    assert rewrite_not(Not(LtEq("a", 1))) == Gt("a", 1)


def test_visitors_are_small_classes():
    class CountLeaves(PredicateVisitor[int]):
        def visit_true(self):
            return 0

        visit_false = visit_true

        def visit_not(self, child_result):
            return child_result

        def visit_and(self, left_result, right_result):
            return left_result + right_result

        visit_or = visit_and

        def leaf(self, *args):
            return 1

        visit_eq = visit_not_eq = visit_lt = visit_lt_eq = visit_gt = visit_gt_eq = leaf
        visit_in = visit_not_in = visit_is_null = visit_not_null = visit_is_nan = visit_not_nan = leaf
        visit_starts_with = visit_not_starts_with = visit_like = visit_not_like = leaf

    assert visit(parse_where("a = 1 AND (b IN (1) OR NOT c LIKE 'x%') AND isnan(f)"), CountLeaves()) == 4


# -- binding ----------------------------------------------------------------------------------

SCHEMA = {
    "flag": Kind.BOOLEAN,
    "qty": Kind.INTEGER,
    "price": Kind.FLOAT,
    "tax": Kind.DECIMAL,
    "name": Kind.STRING,
    "blob": Kind.BINARY,
    "day": Kind.DATE,
    "at": Kind.TIME,
    "ts": Kind.TIMESTAMP,
    "tstz": Kind.TIMESTAMP_TZ,
    "s.inner": Kind.INTEGER,
}

COERCIONS = [
    ("price < 10", Lt("price", 10.0), float),
    ("price < 1.5", Lt("price", 1.5), float),
    ("tax < 1", Lt("tax", Decimal(1)), Decimal),
    ("tax < 1e-1", Lt("tax", Decimal("0.1")), Decimal),
    ("qty = 5.0", Eq("qty", 5), int),
    ("day = '1998-09-01'", Eq("day", dt.date(1998, 9, 1)), dt.date),
    ("ts >= DATE '1998-09-01'", GtEq("ts", dt.datetime(1998, 9, 1)), dt.datetime),
    ("ts >= '1998-09-01 12:00:00'", GtEq("ts", dt.datetime(1998, 9, 1, 12)), dt.datetime),
    ("tstz >= DATE '1998-09-01'", GtEq("tstz", dt.datetime(1998, 9, 1, tzinfo=dt.UTC)), dt.datetime),
    ("at < '10:30'", Lt("at", dt.time(10, 30)), dt.time),
    ("blob LIKE 'ab%'", StartsWith("blob", b"ab"), bytes),
    ("S.INNER = 1", Eq("s.inner", 1), int),
]


@pytest.mark.parametrize(("sql", "expected", "literal_type"), COERCIONS, ids=[c[0] for c in COERCIONS])
def test_bind_should_coerce_lossless_literals(sql, expected, literal_type):
    bound = bind(parse_where(sql), SCHEMA, case_sensitive=False)
    assert bound == expected
    literal = getattr(bound, "literal", getattr(bound, "prefix", None))
    assert type(literal) is literal_type


def test_bind_coerces_every_member_of_a_set():
    bound = bind(parse_where("price IN (1, 2.5)"), SCHEMA)
    assert bound == In("price", {1.0, 2.5}) and all(type(v) is float for v in bound.literals)


MISMATCHES = [
    ("qty = 'x'", "column `qty` is INTEGER but the literal 'x' (str)"),
    ("qty < 1.5", "column `qty` is INTEGER but the literal 1.5 (Decimal)"),
    ("flag = 1", "column `flag` is BOOLEAN"),
    ("name = 1", "column `name` is STRING"),
    ("day = '1998-13-01'", "column `day` is DATE but the literal '1998-13-01'"),
    ("day = TIMESTAMP '1998-01-01 10:00:00'", "column `day` is DATE"),
    ("ts = TIMESTAMP '1998-01-01 10:00:00+02:00'", "time zone"),
    ("price = 9007199254740993", "not exactly representable"),
    ("isnan(qty)", "isnan() needs a FLOAT column, but `qty` is INTEGER"),
    ("qty LIKE 'a%'", "LIKE needs a STRING or BINARY column, but `qty` is INTEGER"),
    ("blob LIKE '%a%'", "`blob` is BINARY"),
    ("price = CAST('NaN' AS DOUBLE)", "use isnan(price)"),
]


@pytest.mark.parametrize(("sql", "message"), MISMATCHES, ids=[m[0] for m in MISMATCHES])
def test_bind_should_name_column_type_and_literal_on_mismatch(sql, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        bind(parse_where(sql), SCHEMA)


def test_bind_should_suggest_close_column_names():
    with pytest.raises(UsageError, match=r"unknown column `prise`.*did you mean price"):
        bind(parse_where("prise < 1"), SCHEMA)
    with pytest.raises(UsageError, match=r"unknown column `NAME`.*did you mean name"):
        bind(parse_where("NAME = 'x'"), SCHEMA)
    with pytest.raises(UsageError, match=r"unknown column `zzz`.*the columns are flag, qty"):
        bind(parse_where("zzz = 1"), SCHEMA)


def test_schema_kinds_flattens_structs():
    schema = pa.schema(
        [
            ("a", pa.int32()),
            ("s", pa.struct([("x", pa.large_string()), ("y", pa.list_(pa.int8()))])),
            ("t", pa.timestamp("ms", tz="UTC")),
            ("d", pa.dictionary(pa.int8(), pa.string())),
        ]
    )
    assert schema_kinds(schema) == {
        "a": Kind.INTEGER,
        "s.x": Kind.STRING,
        "t": Kind.TIMESTAMP_TZ,
        "d": Kind.STRING,
    }


# -- exact evaluation: to_arrow_filter against a row-by-row oracle ------------------------------

NAN = float("nan")
POOLS = {
    "i": (pa.int64(), [-2, 0, 1, 3, 7]),
    "f": (pa.float64(), [-1.5, 0.0, 2.25, 10.0, NAN]),
    "d": (pa.decimal128(6, 2), [Decimal("-1.00"), Decimal("0.50"), Decimal("2.25"), Decimal("9.99")]),
    "s": (pa.string(), ["", "a", "ab", "abc", "b%", "x_y", "it's", "ba"]),
    "bin": (pa.binary(), [b"", b"\x00", b"ab", b"\xffa"]),
    "flag": (pa.bool_(), [True, False]),
    "day": (pa.date32(), [dt.date(1995, 1, 1), dt.date(1998, 9, 2), dt.date(2000, 2, 29)]),
    "ts": (pa.timestamp("us"), [dt.datetime(1998, 9, 1), dt.datetime(1998, 9, 1, 0, 0, 1)]),
    "tz": (
        pa.timestamp("us", tz="UTC"),
        [dt.datetime(2020, 1, 1, tzinfo=dt.UTC), dt.datetime(2020, 6, 1, 12, tzinfo=dt.UTC)],
    ),
    "at": (pa.time64("us"), [dt.time(0), dt.time(10, 30), dt.time(23, 59, 59)]),
    "n.x": (pa.int32(), [1, 2, 3]),
}
LIKE_PATTERNS = ["a%", "%b%", "_b%", "a_c", "%", "x\\_y"]


@st.composite
def tables(draw) -> pa.Table:
    num_rows = draw(st.integers(0, 12))
    columns_: dict[str, pa.Array] = {}
    for name, (arrow_type, pool) in POOLS.items():
        if name == "n.x":
            continue
        values = draw(
            st.lists(st.one_of(st.none(), st.sampled_from(pool)), min_size=num_rows, max_size=num_rows)
        )
        columns_[name] = pa.array(values, arrow_type)
    inner = draw(
        st.lists(st.one_of(st.none(), st.sampled_from(POOLS["n.x"][1])), min_size=num_rows, max_size=num_rows)
    )
    struct_valid = draw(st.lists(st.booleans(), min_size=num_rows, max_size=num_rows))
    columns_["n"] = pa.array(
        [{"x": x} if ok else None for x, ok in zip(inner, struct_valid, strict=True)],
        pa.struct([("x", pa.int32())]),
    )
    return pa.table(columns_)


def leaves(column: str) -> st.SearchStrategy[Expr]:
    pool = [v for v in POOLS[column][1] if not (isinstance(v, float) and math.isnan(v))]
    literal = st.sampled_from(pool)
    options = (
        [st.builds(op, st.just(column), literal) for op in (Eq, NotEq, Lt, LtEq, Gt, GtEq)]
        # the empty list too: `IN ()` is FALSE and `NOT IN ()` TRUE on every row, NULLs and NaNs included
        + [st.builds(op, st.just(column), st.frozensets(literal, max_size=3)) for op in (In, NotIn)]
        + [st.builds(IsNull, st.just(column)), st.builds(NotNull, st.just(column))]
    )
    if column == "f":
        options += [st.builds(IsNaN, st.just(column)), st.builds(NotNaN, st.just(column))]
    if column in ("s", "bin"):
        options += [st.builds(op, st.just(column), literal) for op in (StartsWith, NotStartsWith)]
    if column == "s":
        options += [st.builds(op, st.just(column), st.sampled_from(LIKE_PATTERNS)) for op in (Like, NotLike)]
    return st.one_of(options)


LEAVES = st.one_of([leaves(column) for column in POOLS])
TREES = st.recursive(
    st.one_of(LEAVES, st.just(AlwaysTrue()), st.just(AlwaysFalse())),
    lambda children: st.one_of(
        st.builds(And, children, children), st.builds(Or, children, children), st.builds(Not, children)
    ),
    max_leaves=8,
)


def rows_kept(table: pa.Table, expr: Expr) -> list[int]:
    indexed = table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))
    return indexed.filter(to_arrow_filter(expr)).column("__row").to_pylist()


SLOW = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("column", list(POOLS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_each_leaf_on_arrow_equals_row_by_row_sql_semantics(column, data):
    table, leaf = data.draw(tables()), data.draw(leaves(column))
    for expr in (leaf, Not(leaf)):
        rows = table.to_pylist()
        expected = [index for index, row in enumerate(rows) if evaluate(expr, row) is True]
        assert rows_kept(table, expr) == expected
        assert rows_kept(table, bind(expr, schema_kinds(table.schema))) == expected


@SLOW
@given(tables(), TREES)
def test_to_arrow_filter_equals_row_by_row_sql_semantics(table, expr):
    rows = table.to_pylist()
    expected = [index for index, row in enumerate(rows) if evaluate(expr, row) is True]
    assert rows_kept(table, expr) == expected
    assert rows_kept(table, bind(expr, schema_kinds(table.schema))) == expected


@SLOW
@given(tables(), TREES)
def test_rewrite_not_is_exact_under_three_valued_logic(table, expr):
    rewritten = rewrite_not(expr)
    assert "NOT (" not in str(rewritten)
    assert columns(rewritten) <= columns(expr)
    for row in table.to_pylist():
        assert evaluate(rewritten, row) == evaluate(expr, row)


@SLOW
@given(tables(), TREES)
def test_printed_sql_parses_back_to_the_same_predicate(table, expr):
    reparsed = bind(parse_where(str(expr)), schema_kinds(table.schema))
    assert rows_kept(table, reparsed) == rows_kept(table, expr)
    rows = table.to_pylist()
    assert [evaluate(reparsed, row) for row in rows] == [evaluate(expr, row) for row in rows]
