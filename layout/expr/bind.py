"""Predicates against a schema: `bind` checks columns and coerces literals,
`to_arrow_filter` evaluates exactly."""

from __future__ import annotations

import datetime as dt
import difflib
import enum
import math
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.compute as pc

from layout.errors import UsageError
from layout.expr.predicate import (
    ComparisonPredicate,
    Expr,
    IsNaN,
    Like,
    NotLike,
    NotNaN,
    NotStartsWith,
    Predicate,
    PredicateVisitor,
    RebuildVisitor,
    SetPredicate,
    StartsWith,
    rewrite_not,
    visit,
)
from layout.literals import sql_literal


class Kind(enum.Enum):
    """The logical type of a column, as far as predicates care."""

    BOOLEAN = "boolean"
    INTEGER = "integer"
    FLOAT = "float"
    DECIMAL = "decimal"
    STRING = "string"
    BINARY = "binary"
    DATE = "date"
    TIME = "time"
    TIMESTAMP = "timestamp"
    TIMESTAMP_TZ = "timestamp_tz"


def kind_of(arrow_type: pa.DataType) -> Kind | None:
    """The `Kind` of an Arrow type, or None for types predicates cannot test (lists, maps...)."""
    checks: tuple[tuple[Callable[[pa.DataType], bool], Kind], ...] = (
        (pa.types.is_boolean, Kind.BOOLEAN),
        (pa.types.is_integer, Kind.INTEGER),
        (pa.types.is_floating, Kind.FLOAT),
        (pa.types.is_decimal, Kind.DECIMAL),
        (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t),
         Kind.STRING),
        (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
         or pa.types.is_binary_view(t), Kind.BINARY),
        (pa.types.is_date, Kind.DATE),
        (pa.types.is_time, Kind.TIME),
    )
    if pa.types.is_dictionary(arrow_type):
        return kind_of(arrow_type.value_type)
    if pa.types.is_timestamp(arrow_type):
        return Kind.TIMESTAMP_TZ if arrow_type.tz else Kind.TIMESTAMP
    return next((kind for check, kind in checks if check(arrow_type)), None)


def schema_kinds(schema: pa.Schema) -> dict[str, Kind]:
    """Column name -> `Kind` for an Arrow schema; struct fields appear as dotted paths."""
    kinds: dict[str, Kind] = {}

    def add(prefix: str, field: pa.Field) -> None:
        name = f"{prefix}{field.name}"
        if pa.types.is_struct(field.type):
            for index in range(field.type.num_fields):
                add(f"{name}.", field.type.field(index))
        elif (kind := kind_of(field.type)) is not None:
            kinds[name] = kind

    for field in schema:
        add("", field)
    return kinds


CASE_SENSITIVE = True


def bind(expr: Expr, schema: Mapping[str, Kind], *, case_sensitive: bool = CASE_SENSITIVE) -> Expr:
    """Check `expr` against `schema` (column name -> `Kind`) and coerce its literals to the kinds.

    Column names become the schema's spelling. Unknown columns and literals that do not fit the
    column's kind raise `UsageError` naming the column (and close matches, or the kind and literal).
    """
    return visit(expr, _Binder(schema, case_sensitive))


class _Binder(RebuildVisitor):
    def __init__(self, schema: Mapping[str, Kind], case_sensitive: bool) -> None:
        self.schema, self.case_sensitive = schema, case_sensitive

    def resolve(self, column: str) -> tuple[str, Kind]:
        if column in self.schema:
            return column, self.schema[column]
        folded = [name for name in self.schema if name.lower() == column.lower()]
        if not self.case_sensitive and len(folded) == 1:
            return folded[0], self.schema[folded[0]]
        close = folded or difflib.get_close_matches(column, list(self.schema), n=3, cutoff=0.6)
        hint = (f"did you mean {', '.join(close)}?" if close
                else f"the columns are {', '.join(list(self.schema)[:30])}")
        raise UsageError(f"unknown column `{column}` in the predicate; {hint}")

    def visit_predicate(self, predicate: Predicate) -> Expr:
        name, kind = self.resolve(predicate.column)
        if isinstance(predicate, ComparisonPredicate):
            return type(predicate)(name, _coerce(name, kind, predicate.literal))
        if isinstance(predicate, SetPredicate):
            return type(predicate)(name, frozenset(_coerce(name, kind, v) for v in predicate.literals))
        if isinstance(predicate, IsNaN | NotNaN) and kind is not Kind.FLOAT:
            raise UsageError(f"isnan() needs a FLOAT column, but `{name}` is {kind.name}")
        if isinstance(predicate, StartsWith | NotStartsWith):
            if kind not in (Kind.STRING, Kind.BINARY):
                raise UsageError(f"LIKE needs a STRING or BINARY column, but `{name}` is {kind.name}")
            return type(predicate)(name, _coerce(name, kind, predicate.prefix))
        if isinstance(predicate, Like | NotLike) and kind is not Kind.STRING:
            raise UsageError(f"LIKE with wildcards inside needs a STRING column, but `{name}` is {kind.name}")
        return _replace_column(predicate, name)


def _replace_column(predicate: Predicate, name: str) -> Predicate:
    if isinstance(predicate, Like | NotLike):
        return type(predicate)(name, predicate.pattern)
    return type(predicate)(name)


def _coerce(column: str, kind: Kind, value: Any) -> Any:
    """`value` as a literal of `kind`, when that is lossless and obvious; else UsageError."""
    try:
        result = _COERCIONS[kind](value)
    except (ValueError, TypeError, InvalidOperation, OverflowError) as error:
        reason = f": {error}" if str(error) else ""
        raise UsageError(
            f"column `{column}` is {kind.name} but the literal {sql_literal(value)} "
            f"({type(value).__name__}) does not fit it{reason}"
        ) from None
    if isinstance(result, float) and math.isnan(result):
        raise UsageError(f"a NaN literal never compares true (column `{column}`): use isnan({column})")
    return result


def _fail(message: str = "") -> NoReturn:
    raise TypeError(message)


def _to_bool(value: Any) -> bool:
    return value if isinstance(value, bool) else _fail()


def _to_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return _fail()
    if isinstance(value, float | Decimal) and value != int(value):
        return _fail("not a whole number")
    return int(value)


def _to_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return _fail()
    if isinstance(value, int) and float(value) != value:
        return _fail("not exactly representable as a double")
    return float(value)


def _to_decimal(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return _fail()
    return (value if isinstance(value, Decimal) else Decimal(value) if isinstance(value, int)
            else Decimal(repr(value)))


def _to_str(value: Any) -> str:
    return value if isinstance(value, str) else _fail()


def _to_bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else value.encode() if isinstance(value, str) else _fail()


def _to_date(value: Any) -> dt.date:
    if isinstance(value, str):
        return dt.date.fromisoformat(value.strip())
    return value if isinstance(value, dt.date) and not isinstance(value, dt.datetime) else _fail()


def _to_time(value: Any) -> dt.time:
    if isinstance(value, str):
        return dt.time.fromisoformat(value.strip())
    return value if isinstance(value, dt.time) else _fail()


def _to_datetime(value: Any) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value.strip())
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    return value if isinstance(value, dt.datetime) else _fail()


def _to_timestamp(value: Any) -> dt.datetime:
    result = _to_datetime(value)
    return result if result.tzinfo is None else _fail("a timestamp with a time zone on a column without one")


def _to_timestamp_tz(value: Any) -> dt.datetime:
    result = _to_datetime(value)  # no zone given: UTC, as Iceberg reads timestamptz literals
    return result.replace(tzinfo=dt.UTC) if result.tzinfo is None else result


_COERCIONS: dict[Kind, Callable[[Any], Any]] = {
    Kind.BOOLEAN: _to_bool, Kind.INTEGER: _to_int, Kind.FLOAT: _to_float, Kind.DECIMAL: _to_decimal,
    Kind.STRING: _to_str, Kind.BINARY: _to_bytes, Kind.DATE: _to_date, Kind.TIME: _to_time,
    Kind.TIMESTAMP: _to_timestamp, Kind.TIMESTAMP_TZ: _to_timestamp_tz,
}


# -- exact evaluation with Arrow --------------------------------------------------------------


def to_arrow_filter(expr: Expr) -> pc.Expression:
    """A pyarrow compute expression that is true exactly for the rows matching `expr`.

    Follows the module's NULL and NaN rules (a filter keeps only rows where it is true). Bind
    the expression first so that its literals have the column's types.
    """
    return visit(rewrite_not(expr), _ArrowFilter())


def _field(column: str) -> pc.Expression:
    return pc.field(*column.split("."))


def _isin(field: pc.Expression, literals: frozenset[Any]) -> pc.Expression:
    """Membership; decimals and floats compare one by one with `=`: `is_in` casts the column to the
    literals' type and fails when a literal is finer than the column (1.005 on DECIMAL(10, 2) simply never
    matches), and it tells -0.0 from 0.0, which `=` (like Spark and DuckDB) does not."""
    if any(isinstance(v, Decimal | float) for v in literals):
        out = None
        for v in sorted(literals, key=str):
            term = field == pc.scalar(v)
            out = term if out is None else out | term
        return out
    return field.isin(pa.array(list(literals)))


def _has_float(values: Iterable[Any]) -> bool:
    return any(isinstance(v, float) for v in values)


class _ArrowFilter(PredicateVisitor[pc.Expression]):
    def visit_true(self) -> pc.Expression:
        return pc.scalar(True)

    def visit_false(self) -> pc.Expression:
        return pc.scalar(False)

    def visit_not(self, child_result: pc.Expression) -> pc.Expression:  # unreachable after rewrite_not
        return ~child_result

    def visit_and(self, left_result: pc.Expression, right_result: pc.Expression) -> pc.Expression:
        return left_result & right_result  # and_kleene

    def visit_or(self, left_result: pc.Expression, right_result: pc.Expression) -> pc.Expression:
        return left_result | right_result  # or_kleene

    def _not_nan(self, column: str, literals: Iterable[Any], result: pc.Expression) -> pc.Expression:
        # NaN compares as unknown; Arrow's != and NOT is_in would call it true.
        return result & ~pc.is_nan(_field(column)) if _has_float(literals) else result

    def visit_eq(self, column: str, literal: Any) -> pc.Expression:
        return _field(column) == literal

    def visit_not_eq(self, column: str, literal: Any) -> pc.Expression:
        return self._not_nan(column, (literal,), _field(column) != literal)

    def visit_lt(self, column: str, literal: Any) -> pc.Expression:
        return _field(column) < literal

    def visit_lt_eq(self, column: str, literal: Any) -> pc.Expression:
        return _field(column) <= literal

    def visit_gt(self, column: str, literal: Any) -> pc.Expression:
        return _field(column) > literal

    def visit_gt_eq(self, column: str, literal: Any) -> pc.Expression:
        return _field(column) >= literal

    def visit_in(self, column: str, literals: frozenset[Any]) -> pc.Expression:
        if not literals:
            return pc.scalar(False)
        return _isin(_field(column), literals)

    def visit_not_in(self, column: str, literals: frozenset[Any]) -> pc.Expression:
        field = _field(column)
        if not literals:
            return pc.scalar(True)
        return self._not_nan(column, literals, ~_isin(field, literals) & field.is_valid())

    def visit_is_null(self, column: str) -> pc.Expression:
        return _field(column).is_null()

    def visit_not_null(self, column: str) -> pc.Expression:
        return _field(column).is_valid()

    def visit_is_nan(self, column: str) -> pc.Expression:
        return pc.is_nan(_field(column)) & _field(column).is_valid()

    def visit_not_nan(self, column: str) -> pc.Expression:
        return ~pc.is_nan(_field(column)) | _field(column).is_null()

    def visit_starts_with(self, column: str, prefix: str | bytes) -> pc.Expression:
        return pc.starts_with(_field(column), pattern=prefix)

    def visit_not_starts_with(self, column: str, prefix: str | bytes) -> pc.Expression:
        return ~pc.starts_with(_field(column), pattern=prefix)

    def visit_like(self, column: str, pattern: str) -> pc.Expression:
        return pc.match_like(_field(column), pattern=pattern)

    def visit_not_like(self, column: str, pattern: str) -> pc.Expression:
        return ~pc.match_like(_field(column), pattern=pattern)
