"""SQL's three-valued truth of a lakesort predicate on one row, in plain Python: the oracle of the predicate
tests (tests/expr/test_predicate.py) and of the plan's soundness tests (tests/read/test_plan_soundness.py),
itself checked against DuckDB (tests/expr/test_sql_oracle.py).

Nothing here calls lakesort: the predicate classes are only the tree's shape. Truth values are True, False
and None (unknown), combined with Kleene's AND / OR / NOT. The rules, SQL's and the ones lakesort adds
(`layout.expr.predicate`):

- A comparison with NULL is unknown, and so is one with NaN: lakesort compares NaN as unknown (SQL leaves
  NaN to the engine; DuckDB orders it above every number and equal to itself). isnan is two-valued: a
  NULL is not NaN.
- `x IN (a, b)` is `x = a OR x = b`, `x NOT IN (a, b)` is `x <> a AND x <> b`; so an empty list is FALSE
  for IN and TRUE for NOT IN, whatever x is, NULL and NaN included (SQL's `x IN (subquery)` over an empty
  result; DuckDB's `NULL IN ()`, an extension, says NULL instead).
- LIKE: `%` any run of characters, `_` one character, a backslash escapes the next character.
- A literal takes the type of the value it is compared with: a float compared with a DECIMAL is the decimal
  its shortest repr spells (1.005 stays 1.005, never rounded to the column's scale), an int compared with a
  float the float, an ISO string compared with a date or timestamp the date or timestamp.
- `column` may name a struct's field (`n.x`): NULL when the struct is.

NaN literals are not part of the language (`bind` refuses them: "use isnan"), and the generators never draw
them.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal
from typing import Any

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

_COMPARE = {
    Eq: lambda a, b: a == b, NotEq: lambda a, b: a != b, Lt: lambda a, b: a < b,
    LtEq: lambda a, b: a <= b, Gt: lambda a, b: a > b, GtEq: lambda a, b: a >= b,
}


def value_of(row: dict[str, Any], column: str) -> Any:
    """The row's value of `column`, following dotted struct fields (None past a NULL struct)."""
    if column in row:
        return row[column]
    value: Any = row
    for part in column.split("."):
        value = None if value is None else value[part]
    return value


def unknown(value: Any) -> bool:
    """NULL, and NaN: no comparison with either is true or false."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def literal_for(value: Any, literal: Any) -> Any:
    """`literal` as the type of the (known) value it is compared with."""
    if isinstance(value, Decimal) and not isinstance(literal, Decimal):
        return Decimal(repr(literal)) if isinstance(literal, float) else Decimal(literal)
    if isinstance(value, float) and not isinstance(literal, bool):
        return float(literal)
    if isinstance(literal, str) and isinstance(value, dt.datetime):
        return dt.datetime.fromisoformat(literal)
    if isinstance(literal, str) and isinstance(value, dt.date):
        return dt.date.fromisoformat(literal)
    return literal


def kleene_and(left: bool | None, right: bool | None) -> bool | None:
    if left is False or right is False:
        return False
    return True if left is True and right is True else None


def kleene_or(left: bool | None, right: bool | None) -> bool | None:
    if left is True or right is True:
        return True
    return False if left is False and right is False else None


def like_regex(pattern: str) -> re.Pattern[str]:
    """SQL LIKE: `%` any run of characters, `_` one character, a backslash escapes the next one."""
    out, chars = [], iter(pattern)
    for char in chars:
        if char == "\\":
            out.append(re.escape(next(chars, "\\")))
        elif char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    return re.compile("".join(out), re.DOTALL)


def evaluate(expr: Expr, row: dict[str, Any]) -> bool | None:
    """The three-valued truth of the (bound or unbound) predicate on one row."""
    if isinstance(expr, AlwaysTrue | AlwaysFalse):
        return isinstance(expr, AlwaysTrue)
    if isinstance(expr, And):
        return kleene_and(evaluate(expr.left, row), evaluate(expr.right, row))
    if isinstance(expr, Or):
        return kleene_or(evaluate(expr.left, row), evaluate(expr.right, row))
    if isinstance(expr, Not):
        inner = evaluate(expr.child, row)
        return None if inner is None else not inner
    value = value_of(row, expr.column)
    if isinstance(expr, IsNull | NotNull):
        return (value is None) == isinstance(expr, IsNull)
    if isinstance(expr, IsNaN | NotNaN):  # two-valued: a NULL is not NaN
        return (isinstance(value, float) and math.isnan(value)) == isinstance(expr, IsNaN)
    if isinstance(expr, In | NotIn):
        # an OR of `=` / an AND of `<>`: the empty list is FALSE / TRUE, even for a NULL or a NaN
        result: bool | None = isinstance(expr, NotIn)
        for literal in expr.literals:
            equal = None if unknown(value) else value == literal_for(value, literal)
            if isinstance(expr, In):
                result = kleene_or(result, equal)
            else:
                result = kleene_and(result, None if equal is None else not equal)
        return result
    if unknown(value):  # the remaining leaves are unknown on a NULL (and a NaN)
        return None
    if isinstance(expr, StartsWith | NotStartsWith):
        return value.startswith(expr.prefix) == isinstance(expr, StartsWith)
    if isinstance(expr, Like | NotLike):
        return (like_regex(expr.pattern).fullmatch(value) is not None) == isinstance(expr, Like)
    return _COMPARE[type(expr)](value, literal_for(value, expr.literal))


def matches(rows: list[dict[str, Any]], expr: Expr) -> list[int]:
    """Row numbers (within `rows`) where the predicate is true."""
    return [number for number, row in enumerate(rows) if evaluate(expr, row) is True]
