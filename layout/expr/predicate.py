"""Row predicates: a small immutable expression tree and its visitors.

The tree (modelled on pyiceberg's ``expressions``) is made of `AlwaysTrue`, `AlwaysFalse`, `And`,
`Or`, `Not` and leaf predicates over one column (a dotted path for nested struct fields) and
Python literals. `layout.expr.sql.parse_where` builds it from SQL text, `layout.expr.bind.bind` checks it
against a table's column kinds and coerces literals, `rewrite_not` pushes negations into the
leaves, and `layout.expr.bind.to_arrow_filter` evaluates it exactly on Arrow data. Statistics-based
evaluation (pruning) lives in `layout.read.pruning` as `PredicateVisitor` subclasses.

Semantics, which pruning must respect:

* SQL three-valued logic: a comparison with a null value is unknown, and a row is kept only
  when the predicate is true. ``a NOT IN (...)`` is unknown for a null ``a``.
* A NaN value compares as unknown too: no comparison, IN or NOT IN is true for a NaN row
  (unlike IEEE, where ``NaN <> 1`` is true). This keeps ``NOT (a < 1)`` equal to ``a >= 1``,
  and lets pruning ignore NaN, which Parquet min/max statistics leave out. Use ``isnan(a)``.
* `IsNaN` / `NotNaN` are two-valued like Spark's ``isnan``: a null is not NaN.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from layout.errors import UsageError
from layout.literals import LiteralValue, sql_literal

SUPPORTED = (
    "supported: AND, OR, NOT, parentheses, TRUE/FALSE, comparisons (= <> != < <= > >=) between one "
    "column and one literal, BETWEEN, IN (literals), IS [NOT] NULL, [NOT] LIKE 'pattern', "
    "startswith(column, prefix), isnan(column)"
)


# -- the tree -----------------------------------------------------------------------------


class Expr:
    """A boolean expression over the columns of one row."""

    __slots__ = ()

    def negate(self) -> Expr:
        """The expression that is true exactly when this one is false (under our NULL/NaN rules)."""
        raise NotImplementedError

    def __invert__(self) -> Expr:
        return Not(self)

    def __and__(self, other: Expr) -> Expr:
        return And(self, other)

    def __or__(self, other: Expr) -> Expr:
        return Or(self, other)


@dataclass(frozen=True, slots=True)
class AlwaysTrue(Expr):
    def negate(self) -> Expr:
        return AlwaysFalse()

    def __str__(self) -> str:
        return "TRUE"


@dataclass(frozen=True, slots=True)
class AlwaysFalse(Expr):
    def negate(self) -> Expr:
        return AlwaysTrue()

    def __str__(self) -> str:
        return "FALSE"


@dataclass(frozen=True, slots=True, init=False)
class And(Expr):
    """Both sides are true. ``And(a, b, c)`` nests; AlwaysTrue/AlwaysFalse operands fold away."""

    left: Expr
    right: Expr

    def __new__(cls, left: Expr, right: Expr, *rest: Expr) -> Expr:  # type: ignore[misc]
        if rest:
            return functools.reduce(And, rest, And(left, right))
        if isinstance(left, AlwaysFalse) or isinstance(right, AlwaysFalse):
            return AlwaysFalse()
        if isinstance(left, AlwaysTrue):
            return right
        if isinstance(right, AlwaysTrue):
            return left
        return _make(cls, left=left, right=right)

    def __init__(self, left: Expr, right: Expr, *rest: Expr) -> None:  # fields are set in __new__
        pass

    def __reduce__(self) -> tuple[Any, ...]:
        return (And, (self.left, self.right))

    def negate(self) -> Expr:
        return Or(self.left.negate(), self.right.negate())

    def __str__(self) -> str:
        return f"{_paren(self.left, And)} AND {_paren(self.right, And)}"


@dataclass(frozen=True, slots=True, init=False)
class Or(Expr):
    """Either side is true. ``Or(a, b, c)`` nests; AlwaysTrue/AlwaysFalse operands fold away."""

    left: Expr
    right: Expr

    def __new__(cls, left: Expr, right: Expr, *rest: Expr) -> Expr:  # type: ignore[misc]
        if rest:
            return functools.reduce(Or, rest, Or(left, right))
        if isinstance(left, AlwaysTrue) or isinstance(right, AlwaysTrue):
            return AlwaysTrue()
        if isinstance(left, AlwaysFalse):
            return right
        if isinstance(right, AlwaysFalse):
            return left
        return _make(cls, left=left, right=right)

    def __init__(self, left: Expr, right: Expr, *rest: Expr) -> None:
        pass

    def __reduce__(self) -> tuple[Any, ...]:
        return (Or, (self.left, self.right))

    def negate(self) -> Expr:
        return And(self.left.negate(), self.right.negate())

    def __str__(self) -> str:
        return f"{_paren(self.left, Or)} OR {_paren(self.right, Or)}"


@dataclass(frozen=True, slots=True, init=False)
class Not(Expr):
    """The child is false. ``Not(Not(x))`` is ``x``; use `rewrite_not` to remove the rest."""

    child: Expr

    def __new__(cls, child: Expr) -> Expr:  # type: ignore[misc]
        if isinstance(child, AlwaysTrue | AlwaysFalse | Not):
            return child.negate()
        return _make(cls, child=child)

    def __init__(self, child: Expr) -> None:
        pass

    def __reduce__(self) -> tuple[Any, ...]:
        return (Not, (self.child,))

    def negate(self) -> Expr:
        return self.child

    def __str__(self) -> str:
        return f"NOT ({self.child})"


def _make(cls: type[Expr], **fields: Any) -> Expr:
    obj = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(obj, name, value)
    return obj


def _paren(child: Expr, parent: type) -> str:
    return f"({child})" if isinstance(child, And | Or) and not isinstance(child, parent) else str(child)


@dataclass(frozen=True, slots=True)
class Predicate(Expr):
    """A leaf: a test of one column. `column` is the column name, dotted for nested fields."""

    column: str


@dataclass(frozen=True, slots=True)
class ComparisonPredicate(Predicate):
    literal: LiteralValue
    op: ClassVar[str] = "?"

    def __str__(self) -> str:
        return f"{self.column} {self.op} {sql_literal(self.literal)}"


@dataclass(frozen=True, slots=True)
class Eq(ComparisonPredicate):
    op: ClassVar[str] = "="

    def negate(self) -> Expr:
        return NotEq(self.column, self.literal)


@dataclass(frozen=True, slots=True)
class NotEq(ComparisonPredicate):
    op: ClassVar[str] = "<>"

    def negate(self) -> Expr:
        return Eq(self.column, self.literal)


@dataclass(frozen=True, slots=True)
class Lt(ComparisonPredicate):
    op: ClassVar[str] = "<"

    def negate(self) -> Expr:
        return GtEq(self.column, self.literal)


@dataclass(frozen=True, slots=True)
class LtEq(ComparisonPredicate):
    op: ClassVar[str] = "<="

    def negate(self) -> Expr:
        return Gt(self.column, self.literal)


@dataclass(frozen=True, slots=True)
class Gt(ComparisonPredicate):
    op: ClassVar[str] = ">"

    def negate(self) -> Expr:
        return LtEq(self.column, self.literal)


@dataclass(frozen=True, slots=True)
class GtEq(ComparisonPredicate):
    op: ClassVar[str] = ">="

    def negate(self) -> Expr:
        return Lt(self.column, self.literal)


@dataclass(frozen=True, slots=True)
class SetPredicate(Predicate):
    """`literals` may be given as any iterable; it is stored as a frozenset."""

    literals: frozenset[LiteralValue]
    op: ClassVar[str] = "?"

    def __post_init__(self) -> None:
        object.__setattr__(self, "literals", frozenset(self.literals))

    def __str__(self) -> str:
        try:
            items = sorted(self.literals)
        except TypeError:  # mixed types (unbound), or naive and aware datetimes
            items = sorted(self.literals, key=sql_literal)
        return f"{self.column} {self.op} ({', '.join(sql_literal(v) for v in items)})"


@dataclass(frozen=True, slots=True)
class In(SetPredicate):
    op: ClassVar[str] = "IN"

    def negate(self) -> Expr:
        return NotIn(self.column, self.literals)


@dataclass(frozen=True, slots=True)
class NotIn(SetPredicate):
    op: ClassVar[str] = "NOT IN"

    def negate(self) -> Expr:
        return In(self.column, self.literals)


@dataclass(frozen=True, slots=True)
class IsNull(Predicate):
    def negate(self) -> Expr:
        return NotNull(self.column)

    def __str__(self) -> str:
        return f"{self.column} IS NULL"


@dataclass(frozen=True, slots=True)
class NotNull(Predicate):
    def negate(self) -> Expr:
        return IsNull(self.column)

    def __str__(self) -> str:
        return f"{self.column} IS NOT NULL"


@dataclass(frozen=True, slots=True)
class IsNaN(Predicate):
    def negate(self) -> Expr:
        return NotNaN(self.column)

    def __str__(self) -> str:
        return f"isnan({self.column})"


@dataclass(frozen=True, slots=True)
class NotNaN(Predicate):
    def negate(self) -> Expr:
        return IsNaN(self.column)

    def __str__(self) -> str:
        return f"NOT isnan({self.column})"


@dataclass(frozen=True, slots=True)
class StartsWith(Predicate):
    """``column LIKE 'prefix%'`` (str prefix; bytes on a BINARY column once bound)."""

    prefix: str | bytes

    def negate(self) -> Expr:
        return NotStartsWith(self.column, self.prefix)

    def __str__(self) -> str:
        if isinstance(self.prefix, bytes):
            return f"startswith({self.column}, {sql_literal(self.prefix)})"
        return f"{self.column} LIKE {_like_literal(self.prefix)}"


@dataclass(frozen=True, slots=True)
class NotStartsWith(Predicate):
    prefix: str | bytes

    def negate(self) -> Expr:
        return StartsWith(self.column, self.prefix)

    def __str__(self) -> str:
        if isinstance(self.prefix, bytes):
            return f"NOT startswith({self.column}, {sql_literal(self.prefix)})"
        return f"{self.column} NOT LIKE {_like_literal(self.prefix)}"


@dataclass(frozen=True, slots=True)
class Like(Predicate):
    """A LIKE pattern that is not a plain prefix: pruning can only say "might match"."""

    pattern: str

    def negate(self) -> Expr:
        return NotLike(self.column, self.pattern)

    def __str__(self) -> str:
        return f"{self.column} LIKE {sql_literal(self.pattern)}"


@dataclass(frozen=True, slots=True)
class NotLike(Predicate):
    pattern: str

    def negate(self) -> Expr:
        return Like(self.column, self.pattern)

    def __str__(self) -> str:
        return f"{self.column} NOT LIKE {sql_literal(self.pattern)}"


def _like_literal(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return sql_literal(escaped + "%")



# -- visitors -------------------------------------------------------------------------------

T = TypeVar("T")


class ExprVisitor(ABC, Generic[T]):
    """A post-order fold over an expression: `visit` calls these with the children's results."""

    @abstractmethod
    def visit_true(self) -> T: ...

    @abstractmethod
    def visit_false(self) -> T: ...

    @abstractmethod
    def visit_not(self, child_result: T) -> T: ...

    @abstractmethod
    def visit_and(self, left_result: T, right_result: T) -> T: ...

    @abstractmethod
    def visit_or(self, left_result: T, right_result: T) -> T: ...

    @abstractmethod
    def visit_predicate(self, predicate: Predicate) -> T: ...


@functools.singledispatch
def visit(expr: Expr, visitor: ExprVisitor[T]) -> T:
    """Apply `visitor` to `expr` bottom-up and return the root's result."""
    raise UsageError(f"cannot visit {expr!r}: not a predicate expression")


@visit.register(AlwaysTrue)
def _(expr: AlwaysTrue, visitor: ExprVisitor[T]) -> T:
    return visitor.visit_true()


@visit.register(AlwaysFalse)
def _(expr: AlwaysFalse, visitor: ExprVisitor[T]) -> T:
    return visitor.visit_false()


@visit.register(Not)
def _(expr: Not, visitor: ExprVisitor[T]) -> T:
    return visitor.visit_not(visit(expr.child, visitor))


@visit.register(And)
def _(expr: And, visitor: ExprVisitor[T]) -> T:
    return visitor.visit_and(visit(expr.left, visitor), visit(expr.right, visitor))


@visit.register(Or)
def _(expr: Or, visitor: ExprVisitor[T]) -> T:
    return visitor.visit_or(visit(expr.left, visitor), visit(expr.right, visitor))


@visit.register(Predicate)
def _(expr: Predicate, visitor: ExprVisitor[T]) -> T:
    return visitor.visit_predicate(expr)


class PredicateVisitor(ExprVisitor[T]):
    """An `ExprVisitor` with one method per kind of leaf: the shape of the pruning visitors.

    Subclasses answer each leaf from its column and literal(s), e.g. a "might this row group
    match?" visitor compares them with the column's min/max statistics.
    """

    def visit_predicate(self, predicate: Predicate) -> T:
        handler = _LEAF_DISPATCH.get(type(predicate))
        if handler is None:
            raise UsageError(f"{type(self).__name__} cannot evaluate {predicate!r}")
        result: T = handler(self, predicate)
        return result

    @abstractmethod
    def visit_eq(self, column: str, literal: Any) -> T: ...
    @abstractmethod
    def visit_not_eq(self, column: str, literal: Any) -> T: ...
    @abstractmethod
    def visit_lt(self, column: str, literal: Any) -> T: ...
    @abstractmethod
    def visit_lt_eq(self, column: str, literal: Any) -> T: ...
    @abstractmethod
    def visit_gt(self, column: str, literal: Any) -> T: ...
    @abstractmethod
    def visit_gt_eq(self, column: str, literal: Any) -> T: ...
    @abstractmethod
    def visit_in(self, column: str, literals: frozenset[Any]) -> T: ...
    @abstractmethod
    def visit_not_in(self, column: str, literals: frozenset[Any]) -> T: ...
    @abstractmethod
    def visit_is_null(self, column: str) -> T: ...
    @abstractmethod
    def visit_not_null(self, column: str) -> T: ...
    @abstractmethod
    def visit_is_nan(self, column: str) -> T: ...
    @abstractmethod
    def visit_not_nan(self, column: str) -> T: ...
    @abstractmethod
    def visit_starts_with(self, column: str, prefix: str | bytes) -> T: ...
    @abstractmethod
    def visit_not_starts_with(self, column: str, prefix: str | bytes) -> T: ...
    @abstractmethod
    def visit_like(self, column: str, pattern: str) -> T: ...
    @abstractmethod
    def visit_not_like(self, column: str, pattern: str) -> T: ...


_LEAF_DISPATCH: dict[type, Callable[[Any, Any], Any]] = {
    Eq: lambda v, p: v.visit_eq(p.column, p.literal),
    NotEq: lambda v, p: v.visit_not_eq(p.column, p.literal),
    Lt: lambda v, p: v.visit_lt(p.column, p.literal),
    LtEq: lambda v, p: v.visit_lt_eq(p.column, p.literal),
    Gt: lambda v, p: v.visit_gt(p.column, p.literal),
    GtEq: lambda v, p: v.visit_gt_eq(p.column, p.literal),
    In: lambda v, p: v.visit_in(p.column, p.literals),
    NotIn: lambda v, p: v.visit_not_in(p.column, p.literals),
    IsNull: lambda v, p: v.visit_is_null(p.column),
    NotNull: lambda v, p: v.visit_not_null(p.column),
    IsNaN: lambda v, p: v.visit_is_nan(p.column),
    NotNaN: lambda v, p: v.visit_not_nan(p.column),
    StartsWith: lambda v, p: v.visit_starts_with(p.column, p.prefix),
    NotStartsWith: lambda v, p: v.visit_not_starts_with(p.column, p.prefix),
    Like: lambda v, p: v.visit_like(p.column, p.pattern),
    NotLike: lambda v, p: v.visit_not_like(p.column, p.pattern),
}


class RebuildVisitor(ExprVisitor[Expr]):
    """Rebuilds the tree (simplifying And/Or/Not); subclasses rewrite the leaves or the NOTs."""

    def visit_true(self) -> Expr:
        return AlwaysTrue()

    def visit_false(self) -> Expr:
        return AlwaysFalse()

    def visit_not(self, child_result: Expr) -> Expr:
        return Not(child_result)

    def visit_and(self, left_result: Expr, right_result: Expr) -> Expr:
        return And(left_result, right_result)

    def visit_or(self, left_result: Expr, right_result: Expr) -> Expr:
        return Or(left_result, right_result)

    def visit_predicate(self, predicate: Predicate) -> Expr:
        return predicate


class _RewriteNot(RebuildVisitor):
    def visit_not(self, child_result: Expr) -> Expr:
        return child_result.negate()


def rewrite_not(expr: Expr) -> Expr:
    """The same predicate without `Not` nodes: negations are pushed into the leaves (De Morgan)."""
    return visit(expr, _RewriteNot())


class _Columns(ExprVisitor[frozenset[str]]):
    def visit_true(self) -> frozenset[str]:
        return frozenset()

    visit_false = visit_true

    def visit_not(self, child_result: frozenset[str]) -> frozenset[str]:
        return child_result

    def visit_and(self, left_result: frozenset[str], right_result: frozenset[str]) -> frozenset[str]:
        return left_result | right_result

    visit_or = visit_and

    def visit_predicate(self, predicate: Predicate) -> frozenset[str]:
        return frozenset((predicate.column,))


def columns(expr: Expr) -> frozenset[str]:
    """The names of the columns the expression reads."""
    return visit(expr, _Columns())
