"""SQL text to predicates: `parse_where` reads a WHERE condition, or a whole SELECT, with sqlglot."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation
from typing import TypeGuard

import sqlglot
from sqlglot import exp

from layout.errors import UsageError
from layout.expr.predicate import (
    SUPPORTED,
    AlwaysFalse,
    AlwaysTrue,
    And,
    ComparisonPredicate,
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
    Or,
    Predicate,
    StartsWith,
)
from layout.literals import LiteralValue, sql_literal

_COMPARISONS: dict[type, type[ComparisonPredicate]] = {
    exp.EQ: Eq, exp.NEQ: NotEq, exp.LT: Lt, exp.LTE: LtEq, exp.GT: Gt, exp.GTE: GtEq,
}
_FLIPPED: dict[type[ComparisonPredicate], type[ComparisonPredicate]] = {
    Eq: Eq, NotEq: NotEq, Lt: Gt, LtEq: GtEq, Gt: Lt, GtEq: LtEq,
}
_TIMESTAMP_TYPES = ("timestamp", "timestamptz", "timestampntz", "timestampltz", "datetime")


def parse_where(sql: str, *, dialect: str | None = "spark") -> Expr:
    """Parse a condition, or a whole ``SELECT ... WHERE ...`` (its WHERE), into an `Expr`.

    Table names and aliases of the SELECT are stripped from qualified columns (``l.l_tax`` ->
    ``l_tax``). Anything else than `SUPPORTED` raises `UsageError` naming the construct.
    """
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except sqlglot.errors.SqlglotError as error:
        raise UsageError(f"cannot parse the predicate {sql!r} as "
                         f"{dialect or 'generic'} SQL: {error}") from None
    if len(statements) != 1:
        raise UsageError(f"expected one condition or one SELECT, got {len(statements)} statements in {sql!r}")
    node = statements[0]
    qualifiers: frozenset[str] = frozenset()
    if isinstance(node, exp.Query):
        if not isinstance(node, exp.Select):
            raise UsageError("only a single SELECT ... WHERE is supported, "
                             f"not {type(node).__name__}: {sql!r}")
        where = node.args.get("where")
        if where is None:
            return AlwaysTrue()
        qualifiers = frozenset(n for t in node.find_all(exp.Table) for n in (t.name, t.alias_or_name))
        node = where.this
    return _Parser(sql, dialect, qualifiers).expr(node)


class _Parser:
    def __init__(self, sql: str, dialect: str | None, qualifiers: frozenset[str]) -> None:
        self.sql, self.dialect, self.qualifiers = sql, dialect, qualifiers

    def fail(self, what: str, node: exp.Expr) -> UsageError:
        return UsageError(f"unsupported {what} `{node.sql(dialect=self.dialect)}` in "
                          f"{self.sql!r}; {SUPPORTED}")

    def expr(self, node: exp.Expr) -> Expr:
        if isinstance(node, exp.Paren):
            return self.expr(node.this)
        if isinstance(node, exp.And):
            return And(self.expr(node.this), self.expr(node.expression))
        if isinstance(node, exp.Or):
            return Or(self.expr(node.this), self.expr(node.expression))
        if isinstance(node, exp.Not):
            child = self.expr(node.this)
            return child.negate() if isinstance(child, Predicate) else Not(child)
        if isinstance(node, exp.Boolean):
            return AlwaysTrue() if node.this else AlwaysFalse()
        if type(node) in _COMPARISONS:
            return self.comparison(node)
        if isinstance(node, exp.Between):
            column = self.column(node.this)
            return And(GtEq(column, self.literal(node.args["low"])),
                       LtEq(column, self.literal(node.args["high"])))
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                raise self.fail("subquery", node)
            return In(self.column(node.this), frozenset(self.literal(e) for e in node.expressions))
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise self.fail("IS test (only IS NULL / IS NOT NULL)", node)
            return IsNull(self.column(node.this))
        if isinstance(node, exp.Escape | exp.Like):
            return self.like(node)
        if isinstance(node, exp.StartsWith):
            prefix = self.literal(node.expression)
            if not isinstance(prefix, str | bytes):
                raise self.fail("startswith() with a prefix that is not a string or X'..' bytes", node)
            return StartsWith(self.column(node.this), prefix)
        if isinstance(node, exp.IsNan):
            return IsNaN(self.column(node.this))
        if isinstance(node, exp.Column | exp.Dot):
            return Eq(self.column(node), True)  # a bare boolean column
        if isinstance(node, exp.Subquery | exp.Exists | exp.Query):
            raise self.fail("subquery", node)
        if isinstance(node, exp.Func):
            raise self.fail(f"function {type(node).__name__.upper()}", node)
        raise self.fail(f"construct {type(node).__name__}", node)

    def comparison(self, node: exp.Expr) -> Expr:
        op = _COMPARISONS[type(node)]
        left, right = node.this.unnest(), node.expression.unnest()
        left_is_column, right_is_column = _is_column(left), _is_column(right)
        if left_is_column and right_is_column:
            raise self.fail("column-vs-column comparison", node)
        if left_is_column:
            return op(self.column(left), self.literal(right))
        if right_is_column:
            return _FLIPPED[op](self.column(right), self.literal(left))
        if left.find(exp.Column) is None and right.find(exp.Column) is None:
            raise self.fail("comparison without a column", node)
        side = left if left.find(exp.Column) is not None else right
        raise self.non_literal(side, node)

    def non_literal(self, side: exp.Expr, node: exp.Expr) -> UsageError:
        if side.find(exp.Subquery, exp.Query) is not None:
            return self.fail("subquery", node)
        if isinstance(side, exp.Func):
            where = "on a column" if side.find(exp.Column) is not None else "where a literal is expected"
            return self.fail(f"function {type(side).__name__.upper()} {where}", node)
        if side.find(exp.Column) is not None:
            return self.fail("expression over columns", node)
        return self.fail("literal", node)

    def column(self, node: exp.Expr) -> str:
        node = node.unnest()
        if not _is_column(node):
            raise self.non_literal(node, node) if not isinstance(node, exp.Literal) else self.fail(
                "literal where a column is expected", node)
        parts = [part.name for part in node.parts]
        if len(parts) > 1 and parts[0] in self.qualifiers:
            parts = parts[1:]
        return ".".join(parts)

    def literal(self, node: exp.Expr) -> LiteralValue:
        node = node.unnest()
        if isinstance(node, exp.Literal):
            text: str = node.this
            if node.is_string:
                return text
            return float(text) if "e" in text.lower() else Decimal(text) if "." in text else int(text)
        if isinstance(node, exp.Neg):
            value = self.literal(node.this)
            if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
                raise self.fail("negated non-number", node)
            return -value
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Null):
            raise UsageError(f"comparison with NULL is never true in {self.sql!r}: "
                             "use IS NULL or IS NOT NULL")
        if isinstance(node, exp.HexString):
            return int(node.this, 16) if node.args.get("is_integer") else bytes.fromhex(node.this)
        if isinstance(node, exp.Cast):  # TryCast is a Cast
            return self.cast(node)
        raise self.non_literal(node, node)

    def cast(self, node: exp.Cast) -> LiteralValue:
        value, to = self.literal(node.this), node.to
        try:
            if to.is_type("date") and isinstance(value, str):
                return dt.date.fromisoformat(value.strip())
            if to.is_type(*_TIMESTAMP_TYPES) and isinstance(value, str):
                return dt.datetime.fromisoformat(value.strip())
            if to.is_type("time") and isinstance(value, str):
                return dt.time.fromisoformat(value.strip())
            if to.is_type("decimal") and not isinstance(value, bool | bytes):
                return Decimal(str(value).strip())
            if to.is_type("double", "float") and not isinstance(value, bool | bytes):
                # A date or time here raises TypeError, not the UsageError below (left as it was: reported).
                return float(value)  # type: ignore[arg-type]
            if to.is_type(*exp.DataType.INTEGER_TYPES) and not isinstance(value, bool | bytes):
                number = Decimal(str(value).strip())
                if number == number.to_integral_value():
                    return int(number)
            if to.is_type(*exp.DataType.TEXT_TYPES) and isinstance(value, str):
                return value
            if to.is_type("boolean") and isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
        except (ValueError, InvalidOperation) as error:
            raise UsageError(
                f"cannot read the literal {sql_literal(value)} as {to.sql(dialect=self.dialect)} in "
                f"{self.sql!r}: {error}"
            ) from None
        raise self.fail(f"cast of {sql_literal(value)} to {to.sql(dialect=self.dialect)}", node)

    def like(self, node: exp.Expr) -> Expr:
        escape = "\\"
        if isinstance(node, exp.Escape):
            escape = self.literal(node.expression)  # type: ignore[assignment]
            node = node.this
            if not isinstance(node, exp.Like) or escape != "\\":
                raise self.fail("LIKE ... ESCAPE (only the default escape character \\)", node)
        column, pattern = self.column(node.this), self.literal(node.expression)
        if not isinstance(pattern, str):
            raise self.fail("LIKE with a non-string pattern", node)
        text, wildcards = _unescape_like(pattern)
        if not wildcards:
            result: Expr = Eq(column, text)
        elif wildcards == [len(text) - 1] and text.endswith("%"):
            result = StartsWith(column, text[:-1])
        else:
            result = Like(column, pattern)
        return result.negate() if node.args.get("negate") else result


def _unescape_like(pattern: str) -> tuple[str, list[int]]:
    """The pattern with escapes removed, and the positions of its unescaped % and _ wildcards."""
    out: list[str] = []
    wildcards: list[int] = []
    chars = iter(pattern)
    for char in chars:
        if char == "\\":
            out.append(next(chars, "\\"))
            continue
        if char in "%_":
            wildcards.append(len(out))
        out.append(char)
    return "".join(out), wildcards


def _is_column(node: exp.Expr) -> TypeGuard[exp.Column | exp.Dot]:
    return isinstance(node, exp.Column) and not isinstance(node.this, exp.Star) or (
        isinstance(node, exp.Dot) and all(isinstance(p, exp.Identifier) for p in node.parts)
    )
