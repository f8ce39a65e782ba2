"""The tests' SQL oracle (tests/sql_oracle.py) against DuckDB: the same predicate, written as SQL, on the same
rows, gives the same three truth values (TRUE, FALSE, NULL), on documented cases and on random predicates
over random rows (NULLs, NaN, ±0.0, ±inf, empty IN lists, LIKE escapes, a struct's field).

Two things are written into the SQL rather than left to DuckDB, because lakesort decides them differently
from DuckDB: a DOUBLE compared (or looked up in an IN list) as NULL when it is NaN, since lakesort compares
NaN as unknown where DuckDB orders it above every number and equal to itself; and isnan of a NULL being
FALSE, not NULL. An empty IN list is written as a subquery over an empty table, whose meaning SQL defines
(FALSE for IN, TRUE for NOT IN, for a NULL too): DuckDB's own `NULL IN ()` says NULL.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sql_oracle import evaluate

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
    StartsWith,
)

SCHEMA = pa.schema([
    ("i", pa.int64()), ("f", pa.float64()), ("dec", pa.decimal128(10, 2)), ("s", pa.string()),
    ("bin", pa.binary()), ("b", pa.bool_()), ("d", pa.date32()), ("ts", pa.timestamp("us")),
    ("t", pa.time64("us")), ("n", pa.struct([("x", pa.int32())])),
])
FLOAT_COLUMNS = {"f"}
DECIMAL_COLUMNS = {"dec"}
_OPERATORS = {Eq: "=", NotEq: "<>", Lt: "<", LtEq: "<=", Gt: ">", GtEq: ">="}


# ---- the predicate as DuckDB SQL ------------------------------------------------------------------------


def column_sql(column: str) -> str:
    """The column as a comparison sees it: a NaN is NULL (lakesort compares NaN as unknown)."""
    quoted = ".".join(f'"{part}"' for part in column.split("."))
    return f"(CASE WHEN isnan({quoted}) THEN NULL ELSE {quoted} END)" if column in FLOAT_COLUMNS else quoted


def literal_sql(column: str, value: Any) -> str:
    """A SQL literal of `value`; a float compared with a DECIMAL column is the decimal its repr spells."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if column in DECIMAL_COLUMNS and isinstance(value, float | int | Decimal):
        return format(Decimal(repr(value)) if isinstance(value, float) else Decimal(value), "f")
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)"  # 'inf' and '-inf' too
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bytes):
        return f"from_hex('{value.hex()}')"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, dt.time):
        return f"TIME '{value.isoformat()}'"
    raise AssertionError(f"no SQL literal for {value!r}")


def to_sql(expr: Expr) -> str:
    if isinstance(expr, AlwaysTrue | AlwaysFalse):
        return "TRUE" if isinstance(expr, AlwaysTrue) else "FALSE"
    if isinstance(expr, And | Or):
        return f"({to_sql(expr.left)} {'AND' if isinstance(expr, And) else 'OR'} {to_sql(expr.right)})"
    if isinstance(expr, Not):
        return f"(NOT {to_sql(expr.child)})"
    column = expr.column
    raw = ".".join(f'"{part}"' for part in column.split("."))
    if isinstance(expr, IsNull | NotNull):
        return f"({raw} IS {'' if isinstance(expr, IsNull) else 'NOT '}NULL)"
    if isinstance(expr, IsNaN | NotNaN):
        nan = f"({raw} IS NOT NULL AND isnan({raw}))"  # two-valued: isnan(NULL) is FALSE
        return nan if isinstance(expr, IsNaN) else f"(NOT {nan})"
    op = "IN" if isinstance(expr, In) else "NOT IN"
    if isinstance(expr, In | NotIn) and not expr.literals:
        return f"({column_sql(column)} {op} (SELECT {raw} FROM empty))"  # SQL's meaning of an empty list
    if isinstance(expr, In | NotIn):
        listed = ", ".join(literal_sql(column, v) for v in sorted(expr.literals, key=repr))
        return f"({column_sql(column)} {op} ({listed}))"
    if isinstance(expr, StartsWith | NotStartsWith):
        test = f"starts_with({raw}, {literal_sql(column, expr.prefix)})"
        return test if isinstance(expr, StartsWith) else f"(NOT {test})"
    if isinstance(expr, Like | NotLike):
        op = "LIKE" if isinstance(expr, Like) else "NOT LIKE"
        return f"({raw} {op} {literal_sql(column, expr.pattern)} ESCAPE '\\')"
    return f"({column_sql(column)} {_OPERATORS[type(expr)]} {literal_sql(column, expr.literal)})"


def duckdb_truth(rows: list[dict[str, Any]], exprs: list[Expr]) -> list[list[bool | None]]:
    """Per predicate, its truth on each row, as DuckDB evaluates its SQL."""
    con = duckdb.connect()
    try:
        data = pa.Table.from_pylist(rows, SCHEMA).append_column("rid", pa.array(range(len(rows)), pa.int64()))
        con.register("data", data)
        con.execute("CREATE TABLE t AS SELECT * FROM data")
        con.execute("CREATE TABLE empty AS SELECT * FROM data LIMIT 0")
        select = ", ".join(f"{to_sql(e)} AS p{k}" for k, e in enumerate(exprs))
        got = con.execute(f"SELECT {select} FROM t ORDER BY rid").fetchall() if rows else []
    finally:
        con.close()
    return [[row[k] for row in got] for k in range(len(exprs))]


def oracle_truth(rows: list[dict[str, Any]], exprs: list[Expr]) -> list[list[bool | None]]:
    return [[evaluate(e, row) for row in rows] for e in exprs]


# ---- documented cases --------------------------------------------------------------------------------------

NULL_NAN_ROW = {"i": None, "f": math.nan, "dec": Decimal("1.00"), "s": "a%b", "bin": b"ab", "b": True,
                "d": dt.date(2020, 1, 1), "ts": dt.datetime(2020, 1, 1, 12), "t": dt.time(10, 30), "n": None}


@pytest.mark.parametrize(("expr", "truth"), [
    # NULL (i) and NaN (f) compare as unknown;
    # an empty IN list is FALSE and an empty NOT IN list TRUE for both
    (In("i", []), False), (NotIn("i", []), True), (Not(In("i", [])), True), (Not(NotIn("i", [])), False),
    (In("f", []), False), (NotIn("f", []), True), (In("n.x", []), False), (NotIn("n.x", []), True),
    (Eq("i", 1), None), (NotEq("i", 1), None), (Not(Eq("i", 1)), None), (IsNull("i"), True),
    (In("i", [1]), None), (NotIn("i", [1]), None), (Eq("n.x", 1), None), (IsNull("n.x"), True),
    (Or(Eq("i", 1), Eq("b", True)), True), (And(Eq("i", 1), Eq("b", False)), False),
    (And(Eq("i", 1), Eq("b", True)), None), (Not(And(Eq("i", 1), Eq("b", False))), True),
    (NotEq("f", 1), None), (Lt("f", math.inf), None), (NotIn("f", [1.0]), None), (In("f", [1.0]), None),
    (IsNaN("f"), True), (NotNaN("f"), False), (Not(IsNaN("f")), False), (IsNaN("i"), False),
    # a float literal on DECIMAL(10, 2) is exact: 1.005 is neither 1.00 nor 1.01
    (Gt("dec", 0.995), True), (GtEq("dec", 1.005), False), (Eq("dec", 1.0), True), (Lt("dec", 1.001), True),
    (In("dec", [1.005, 2]), False), (NotIn("dec", [1.005]), True), (Eq("dec", Decimal("1.000")), True),
    (Eq("d", "2020-01-01"), True), (Gt("d", "2019-12-31"), True), (Lt("b", True), False),
    (Like("s", "a\\%b"), True), (Like("s", "a\\%_"), True), (Like("s", "a_"), False),
    (NotLike("s", "_%"), False),
    (StartsWith("s", "a%"), True), (NotStartsWith("s", ""), False), (Gt("s", "a%"), True),
    (Lt("bin", b"\xff"), True), (Eq("ts", dt.datetime(2020, 1, 1, 12)), True), (Gt("t", dt.time(10)), True),
])
def test_oracle_follows_the_documented_semantics_as_duckdb_does(expr: Expr, truth: bool | None) -> None:
    assert evaluate(expr, NULL_NAN_ROW) is truth
    assert duckdb_truth([NULL_NAN_ROW], [expr]) == [[truth]], to_sql(expr)


def test_duckdb_s_own_empty_list_says_null_where_sql_says_true() -> None:
    """Why the empty lists above are subqueries: DuckDB accepts `IN ()` and calls it NULL on a NULL."""
    con = duckdb.connect()
    try:
        assert con.execute("SELECT NULL NOT IN (), NULL IN ()").fetchall() == [(None, None)]
        con.execute("CREATE TABLE empty (x BIGINT)")
        assert con.execute(
            "SELECT NULL NOT IN (SELECT x FROM empty), NULL IN (SELECT x FROM empty)"
        ).fetchall() == [(True, False)]
    finally:
        con.close()


# ---- random predicates on random rows ----------------------------------------------------------------------

POOLS: dict[str, list[Any]] = {
    "i": [-(2**63), -2, 0, 1, 3, 2**63 - 1],
    "f": [-1.5, -0.0, 0.0, 2.25, 1e308, math.inf, -math.inf, math.nan],
    "dec": [Decimal("-1.00"), Decimal("0.50"), Decimal("1.00"), Decimal("1.01"), Decimal("99999999.99")],
    "s": ["", "a", "ab", "abc", "a%b", "x_y", "it's", "b\\c", "é", "\uffff"],
    "bin": [b"", b"\x00", b"ab", b"\xffa"],
    "b": [True, False],
    "d": [dt.date(1970, 1, 1), dt.date(1998, 9, 2), dt.date(2000, 2, 29)],
    "ts": [dt.datetime(1998, 9, 1), dt.datetime(1998, 9, 1, 0, 0, 0, 1)],
    "t": [dt.time(0), dt.time(10, 30), dt.time(23, 59, 59, 999999)],
    "n.x": [-1, 0, 7],
}
# Literals besides the pools' values: ints and floats off a DECIMAL's scale, ints on a DOUBLE, ISO dates.
EXTRA_LITERALS: dict[str, list[Any]] = {
    "f": [0, 2, 1.0000001], "dec": [1, 1.005, 0.995, Decimal("1.005")], "d": ["1998-09-02", "1999-01-01"],
}
LIKE_PATTERNS = ["a%", "%b%", "_b%", "a_c", "%", "", "x\\_y", "a\\%b", "%\\\\%", "it's%"]


@st.composite
def rows(draw) -> list[dict[str, Any]]:
    def value(column: str) -> Any:
        return draw(st.one_of(st.none(), st.sampled_from(POOLS[column])))

    out = []
    for _ in range(draw(st.integers(0, 8))):
        row = {c: value(c) for c in SCHEMA.names if c != "n"}
        row["n"] = None if draw(st.booleans()) else {"x": value("n.x")}
        out.append(row)
    return out


def leaves(column: str) -> st.SearchStrategy[Expr]:
    literals = [v for v in POOLS[column] if not (isinstance(v, float) and math.isnan(v))]
    literal = st.sampled_from(literals + EXTRA_LITERALS.get(column, []))
    options = [st.builds(op, st.just(column), literal) for op in _OPERATORS]
    options += [st.builds(op, st.just(column), st.lists(literal, max_size=3)) for op in (In, NotIn)]
    options += [st.builds(IsNull, st.just(column)), st.builds(NotNull, st.just(column))]
    if column == "f":
        options += [st.builds(IsNaN, st.just(column)), st.builds(NotNaN, st.just(column))]
    if column == "s":
        options += [st.builds(op, st.just(column), literal) for op in (StartsWith, NotStartsWith)]
        options += [st.builds(op, st.just(column), st.sampled_from(LIKE_PATTERNS)) for op in (Like, NotLike)]
    return st.one_of(options)


TREES = st.recursive(
    st.one_of(st.one_of([leaves(column) for column in POOLS]), st.just(AlwaysTrue()), st.just(AlwaysFalse())),
    lambda children: st.one_of(st.builds(And, children, children), st.builds(Or, children, children),
                               st.builds(Not, children)),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows(), st.lists(TREES, min_size=1, max_size=4))
def test_oracle_agrees_with_duckdb_on_random_predicates(rows: list[dict[str, Any]],
                                                        exprs: list[Expr]) -> None:
    expected = duckdb_truth(rows, exprs)
    for expr, got, want in zip(exprs, oracle_truth(rows, exprs), expected, strict=True):
        assert got == want, f"{expr}  --  as SQL: {to_sql(expr)}"
