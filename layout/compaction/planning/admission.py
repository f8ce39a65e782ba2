"""Admission: refuse, from the table's metadata alone, what the compaction cannot do, before any Spark work.

`check_table(table, spec)` reads only the table's current Iceberg schema (and its sort order when the
spec has no sort keys) and raises one `UsageError` (exit status 2 in the CLI) that lists every problem,
one line each, naming the table, the column (dotted path for nested fields) or the spec key, the
Iceberg type where it matters, what is wrong and how to fix it. `table_problems` returns the lines.

What is refused, and why:

1. Types the job cannot write losslessly with Spark 4.2 and parquet-mr, anywhere in the schema
   (inside structs, lists and maps too). An allow-list: boolean, int, long, float, double,
   decimal(p, s), date, timestamp, timestamptz, string, binary, and structs, lists and maps of them.
   Everything else is refused: uuid and fixed[n] (Spark has no fixed-length binary type: it writes
   BINARY, and Iceberg requires FIXED_LEN_BYTE_ARRAY), time (Spark 4.2 refuses TIME:
   UNSUPPORTED_TIME_TYPE, checked), timestamp_ns/timestamptz_ns (Spark holds microseconds),
   unknown, geometry, geography, and any type a later pyiceberg adds (variant...).
2. Column names Spark cannot address. Checked on Spark 4.2 by running the job's `compact_groups` on
   tables with such names (tests/compaction/planning/test_admission.py keeps a Spark check of the same facts):
   - a `.` in a name, at any level: Spark reads `a.b` as field `b` of a struct `a`
     (UNRESOLVED_COLUMN), and lakesort names nested fields by dotted paths;
   - names equal but for case at one level (`a` and `A`, top level or inside a struct): Spark
     resolves names case-insensitively and fails (COLUMN_ALREADY_EXISTS);
   - a backtick in a top-level name: the job addresses top-level columns by name, and Spark cannot
     parse it (INVALID_ATTRIBUTE_NAME_SYNTAX); inside a struct it is written as is;
   - top-level names starting with `lakesort_` or `__lakesort` (any case): they collide with the
     job's helper columns (`lakesort_group`, `lakesort_part`, `lakesort_part_key`, `__lakesort_*`).
   Not refused: the characters Spark 2/3 refused in Parquet column names (`` ,;{}()\\n\\t=`` and
   space; Spark 3.3 dropped that check, SPARK-27442). Spark 4.2 with parquet-mr 1.17 writes and
   reads them back with their field ids, at the top level and inside structs.
   INVALID_COLUMN_NAME_AS_PATH concerns only partitionBy columns, and the job partitions only by
   its own helper columns.
3. The spec's column references: sort keys (the spec's, or the table's sort order through
   `layout.spec.resolve_sort_keys`) and merge keys must be top-level primitive columns; z-order keys
   and the merge sequence must be numbers, dates, timestamps or strings; bloom filter columns must
   be top-level primitive columns; verify columns, boundary orders, probe `where` columns and probe
   `columns` must name primitive columns, top-level or inside structs (as Parquet paths name them),
   and a probe's literals must fit its columns' types. Unknown names get a "did you mean"; a name an
   earlier schema of the table had is named as renamed (to the column its field id has now) or dropped.
   The compaction only warns about the probes (`check_table(probes="warn")`): it does not need them.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version as installed
from typing import TYPE_CHECKING, Any, Literal, cast

from layout.errors import ConfigError, UsageError
from layout.expr.bind import Kind, bind
from layout.expr.predicate import And, Expr, Not, Or, Predicate, columns
from layout.expr.sql import parse_where
from layout.spec import SortKey, resolve_sort_keys

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table
    from pyiceberg.types import FixedType, IcebergType

    from layout.spec import TableSpec

__all__ = ["RESERVED_PREFIXES", "check_table", "table_problems"]

log = logging.getLogger(__name__)

RESERVED_PREFIXES = ("lakesort_", "__lakesort")
"""Top-level column names starting with these (any case) collide with the compaction job's helper columns."""

_HELPERS = "lakesort_group, lakesort_part, lakesort_part_key, __lakesort_*"
_OUT_OF_REGISTRY = "keep the table out of the registry (remove its spec from dags/tables/) until lakesort can"

# Type names as Iceberg prints them (`str(type)`), for the allow-lists below; decimal(p, s) prints its
# precision and scale, so it is matched by class name.
_PRIMITIVES = {
    "BooleanType", "IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType", "DateType",
    "TimestampType", "TimestamptzType", "StringType", "BinaryType",
}
_NESTED = {"StructType", "ListType", "MapType"}
# The job's curves (zorder, hilbert) rank numbers, dates, timestamps and strings (layout.curves; the
# job's min/max z-order took only those); the merge orders versions by the sequence column.
_ORDERED = {
    "IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType", "DateType", "TimestampType",
    "TimestamptzType", "StringType",
}
_ORDERED_TEXT = "numbers (int, long, float, double, decimal), dates, timestamps or strings"


def _refusal(iceberg_type: IcebergType) -> tuple[str, str]:
    """(why the job cannot write `iceberg_type`, how to fix it) for a type outside the allow-list."""
    kind = type(iceberg_type).__name__
    evolve = "or evolve the schema: add a column of a supported type, backfill it, drop this one"
    later = "; lakesort cannot compact this table yet"
    if kind == "UUIDType":
        why = ("Spark cannot write Iceberg uuid (FIXED_LEN_BYTE_ARRAY(16)): it has no UUID or fixed-length "
               "binary type and would write BINARY, which Iceberg does not allow for uuid")
        return why + later, f"{_OUT_OF_REGISTRY}, {evolve} (e.g. string)"
    if kind == "FixedType":
        n = len(cast("FixedType", iceberg_type))  # FixedType.__len__: its length in bytes
        why = (f"Spark cannot write Iceberg fixed[{n}] (FIXED_LEN_BYTE_ARRAY({n})): it has no fixed-length "
               "binary type and would write BINARY, which Iceberg does not allow for fixed")
        return why + later, f"{_OUT_OF_REGISTRY}, {evolve} (e.g. binary)"
    if kind == "TimeType":
        why = ("Spark 4.2 cannot read or write Iceberg time (its TIME type is a preview, off by default: "
               "UNSUPPORTED_TIME_TYPE)")
        return why + later, f"{_OUT_OF_REGISTRY}, {evolve} (e.g. long microseconds since midnight)"
    if kind in ("TimestampNanoType", "TimestamptzNanoType"):
        why = (f"Spark timestamps hold microseconds: it would truncate {iceberg_type} values and write "
               "TIMESTAMP(MICROS), not the TIMESTAMP(NANOS) Iceberg requires")
        micros = "timestamptz" if kind == "TimestamptzNanoType" else "timestamp"
        return why + later, f"{_OUT_OF_REGISTRY}, {evolve} ({micros}, if microseconds suffice)"
    if kind == "UnknownType":
        why = "Iceberg's unknown type (v3, always null) has no Spark type the job could write it back as"
        return why + later, (f"{_OUT_OF_REGISTRY}, or drop the column, or give it a type "
                             "(ALTER COLUMN ... TYPE)")
    if kind in ("GeometryType", "GeographyType"):
        why = f"Spark 4.2 has no {iceberg_type} type the job could write as Iceberg requires"
        return why + later, f"{_OUT_OF_REGISTRY}, {evolve} (e.g. WKB as binary)"
    return f"lakesort does not know how to compact Iceberg {iceberg_type} losslessly with Spark", \
        f"{_OUT_OF_REGISTRY}, {evolve}"


# ---- the schema as lakesort sees it ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Column:
    path: str  # dotted, as pyiceberg names it: `s.a`, `l.element`, `m.key`, `m.value.x`
    type: IcebergType
    top_level: bool
    # the nearest list or map above it (its path), None when reached through structs only
    container: str | None
    struct: str | None  # the struct it is a field of (its path), None at the top level


def _walk(schema: Schema) -> Iterator[_Column]:
    """Every field of the schema, parents before children, with list elements and map keys/values."""

    # Any: the types are told apart by name (pyiceberg.types is not imported at run time).
    def visit(path: str, field_type: Any, top: bool, container: str | None, struct: str | None
              ) -> Iterator[_Column]:
        yield _Column(path, field_type, top, container, struct)
        kind = type(field_type).__name__
        if kind == "StructType":
            for child in field_type.fields:
                yield from visit(f"{path}.{child.name}", child.field_type, False, container, path)
        elif kind == "ListType":
            yield from visit(f"{path}.element", field_type.element_type, False, path, None)
        elif kind == "MapType":
            yield from visit(f"{path}.key", field_type.key_type, False, path, None)
            yield from visit(f"{path}.value", field_type.value_type, False, path, None)

    for field in schema.fields:
        yield from visit(field.name, field.field_type, True, None, None)


def _struct_levels(schema: Schema) -> Iterator[tuple[str | None, list[str]]]:
    """(the struct's path or None for the top level,
    its field names) for every level with user-given names."""

    def visit(path: str, field_type: Any) -> Iterator[tuple[str | None, list[str]]]:  # Any: as in `_walk`
        kind = type(field_type).__name__
        if kind == "StructType":
            yield path, [f.name for f in field_type.fields]
            for child in field_type.fields:
                yield from visit(f"{path}.{child.name}", child.field_type)
        elif kind == "ListType":
            yield from visit(f"{path}.element", field_type.element_type)
        elif kind == "MapType":
            yield from visit(f"{path}.key", field_type.key_type)
            yield from visit(f"{path}.value", field_type.value_type)

    yield None, [f.name for f in schema.fields]
    for field in schema.fields:
        yield from visit(field.name, field.field_type)


_NESTED_NAMES = {"StructType": "struct", "ListType": "list", "MapType": "map"}


def _describe(column: _Column) -> str:
    """`a struct`, `a list`, `a map`, or the primitive type as Iceberg prints it."""
    kind = _NESTED_NAMES.get(type(column.type).__name__)
    return f"a {kind}" if kind else str(column.type)


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


# ---- the checks --------------------------------------------------------------------------------------


class _Checker:
    def __init__(self, table: Table, spec: TableSpec) -> None:
        self.table, self.spec = table, spec
        self.name = spec.table
        self.schema = table.schema()
        self.columns = {c.path: c for c in _walk(self.schema)}
        self.refused = {p for p, c in self.columns.items()
                        if type(c.type).__name__ not in _PRIMITIVES | _NESTED}
        self.problems: list[str] = []
        self.probe_problems: list[str] = []  # the probes' (the compaction only warns about them)

    # -- output

    def column_problem(self, path: str, text: str) -> None:
        self.problems.append(f"{self.name}: column `{path}` {text}")

    def key_problem(self, key: str, text: str) -> None:
        source = "" if self.spec.source == "<spec>" else f"{self.spec.source}: "
        line = f"{self.name}: {source}{key}: {text}"
        (self.probe_problems if key.startswith("probes[") else self.problems).append(line)

    # -- 1. types

    def types(self) -> None:
        for path, column in self.columns.items():
            if path in self.refused:
                why, fix = _refusal(column.type)
                self.column_problem(path, f"has type {column.type}: {why}. Fix: {fix}")

    # -- 2. names

    def names(self) -> None:
        for struct, names in _struct_levels(self.schema):
            prefix = f"{struct}." if struct is not None else ""
            where = "at the top level" if struct is None else f"in struct `{struct}`"
            for name in names:
                path = prefix + name
                if "." in name:
                    self.column_problem(path, f"has a dot in its name `{name}`: Spark reads `{name}` as a "
                                              "field of a struct (UNRESOLVED_COLUMN) and lakesort names "
                                              "nested fields by dotted paths. Fix: rename it without the dot "
                                              "(ALTER TABLE ... RENAME COLUMN)")
                if struct is None and "`" in name:
                    self.column_problem(path, "has a backtick in its name: Spark cannot parse it as a column "
                                              "name (INVALID_ATTRIBUTE_NAME_SYNTAX) and the job addresses "
                                              "top-level columns by name. Fix: "
                                              "rename it without the backtick")
                if struct is None and name.lower().startswith(RESERVED_PREFIXES):
                    self.column_problem(path, "collides with the compaction job's helper columns "
                                              f"({_HELPERS}): names starting with `lakesort_` or "
                                              "`__lakesort` (any case) are reserved. Fix: rename the column "
                                              "(ALTER TABLE ... RENAME COLUMN)")
            by_fold: dict[str, list[str]] = {}
            for name in names:
                by_fold.setdefault(name.lower(), []).append(name)
            for same in by_fold.values():
                if len(same) > 1:
                    paths = [prefix + n for n in same]
                    self.problems.append(
                        f"{self.name}: columns {_quoted(paths)} differ only in case {where}: Spark resolves "
                        "column names case-insensitively and refuses them (COLUMN_ALREADY_EXISTS). Fix: "
                        "rename all but one of them (ALTER TABLE ... RENAME COLUMN)")

    # -- 3. spec references

    def reference(self, key: str, name: str, *, role: str, top_level: bool, allowed: set[str] | None = None,
                  allowed_text: str = "", origin: str = "") -> str | None:
        """Check one column reference; returns the column's path when usable, else records why not."""
        column = self.columns.get(name)
        if column is None:
            self.key_problem(key, f"`{name}` is not a column of "
                                  f"{self.name}{self.suggest(name, top_level)}{origin}")
            return None
        if name in self.refused:
            return None  # the type check reports the column itself
        kind = type(column.type).__name__
        if column.container is not None:
            container = _NESTED_NAMES[type(self.columns[column.container].type).__name__]
            self.key_problem(key, f"`{name}` is inside the {container} `{column.container}`: {role} must be "
                                  f"{self.scope(top_level)}{origin}")
            return None
        if top_level and not column.top_level:
            self.key_problem(key, f"`{name}` is a field of the struct `{column.struct}`: {role} must be "
                                  f"{self.scope(top_level)}{origin}")
            return None
        if kind in _NESTED:
            fields = [p for p, c in self.columns.items() if c.struct == name][:5]
            hint = (f" (its fields: {_quoted(fields)})" if kind == "StructType" and not top_level and fields
                    else "")
            self.key_problem(key, f"`{name}` is {_describe(column)}, not a primitive column: {role} must be "
                                  f"{self.scope(top_level)}{hint}{origin}")
            return None
        if allowed is not None and kind not in allowed:
            self.key_problem(key, f"`{name}` has type {column.type}: {role} must be {allowed_text}{origin}")
            return None
        return name

    def earlier(self, name: str) -> str | None:
        """What became of `name` when an earlier schema of the table had it (newest first): the column its
        field id has now (renamed), or that the field is gone
        (dropped). Iceberg tracks columns by field id."""
        for schema in sorted(self.table.schemas().values(), key=lambda s: -s.schema_id):
            try:
                field = schema.find_field(name)  # case-sensitive, dotted paths for nested fields
            except ValueError:
                continue
            now = self.schema.find_column_name(field.field_id)
            if now is not None:
                return (f": it was renamed to `{now}` (field id {field.field_id}; `{name}` in schema "
                        f"{schema.schema_id}). Fix: name it `{now}` in the spec")
            return (f": it was dropped from the table (field id {field.field_id}, last in schema "
                    f"{schema.schema_id}). Fix: remove it from the spec")
        return None

    @staticmethod
    def scope(top_level: bool) -> str:
        return ("primitive top-level columns" if top_level
                else "primitive columns, top-level or fields of structs (not inside lists or maps)")

    def suggest(self, name: str, top_level: bool) -> str:
        earlier = self.earlier(name)
        if earlier:
            return earlier
        candidates = [p for p, c in self.columns.items()
                      if (c.top_level if top_level else c.container is None)
                      and type(c.type).__name__ not in _NESTED]
        folded = [p for p in candidates if p.lower() == name.lower()]
        close = folded or difflib.get_close_matches(name, candidates, n=3)
        if close:
            return f"; did you mean {_quoted(close)}?" + (" (names are case-sensitive)" if folded else "")
        shown = candidates[:20]
        more = ", ..." if len(candidates) > len(shown) else ""
        return f"; its columns are {_quoted(shown)}{more}"

    def sort_keys(self) -> None:
        spec = self.spec
        curve = spec.sort.is_curve
        role = {"zorder": "z-order keys", "hilbert": "Hilbert keys"}.get(spec.sort.strategy, "sort keys")
        allowed = _ORDERED if curve else None
        text = f"{_ORDERED_TEXT} (the job's curves rank only those)"
        if spec.sort.keys:
            for index, key in enumerate(spec.sort.keys):
                self.reference(f"sort.keys[{index}].column", key.column, role=role, top_level=True,
                               allowed=allowed, allowed_text=text)
            return
        keys = self.table_sort_keys()
        for index, key in enumerate(keys):
            self.reference(f"sort.keys[{index}].column", key.column, role=role, top_level=True,
                           allowed=allowed, allowed_text=text,
                           origin=f" (from the sort order of {self.name}; set sort.keys in the spec to sort "
                                  "otherwise)")

    def table_sort_keys(self) -> Sequence[SortKey]:
        """The keys of the table's sort order, as `resolve_sort_keys` takes them;
        its refusals become lines."""

        try:
            return resolve_sort_keys(self.spec, self.table)
        except ConfigError as error:
            text = str(error).removeprefix(f"{self.spec.source}: ")
            key, _, detail = text.partition(": ")
            if key.startswith("sort.keys["):  # a column the order names but the schema lacks: checked below
                return self.raw_sort_order_keys()
            self.key_problem(key, detail)
            return ()

    def raw_sort_order_keys(self) -> Sequence[SortKey]:

        return [SortKey(column=self.schema.find_column_name(f.source_id) or f"<field id {f.source_id}>")
                for f in self.table.sort_order().fields]

    def writer(self) -> None:
        for name in self.spec.writer.bloom_filters:
            self.reference(f"writer.bloom_filters.{name}", name, role="bloom filter columns", top_level=True)

    def verify(self) -> None:
        verify = self.spec.verify
        if verify.column_index_columns != "all":
            for index, name in enumerate(verify.column_index_columns):
                self.reference(f"verify.column_index_columns[{index}]", name, role="column index columns",
                               top_level=False)
        written = set(self.spec.writer.bloom_filters)
        for index, name in enumerate(verify.bloom_filter_columns or ()):
            if name not in written:  # the others are checked as writer.bloom_filters keys
                self.reference(f"verify.bloom_filter_columns[{index}]", name, role="bloom filter columns",
                               top_level=True)
        for name in verify.boundary_order or {}:
            self.reference(f"verify.boundary_order.{name}", name, role="boundary order columns",
                           top_level=False)

    def keys(self) -> None:
        keys = self.spec.keys
        if keys is None:
            return
        for index, name in enumerate(keys.columns):
            self.reference(f"keys.columns[{index}]", name, role="merge key columns", top_level=True)
        self.reference("keys.sequence", keys.sequence, role="the sequence column", top_level=True,
                       allowed=_ORDERED, allowed_text=f"orderable: {_ORDERED_TEXT}")

    def probes(self) -> None:

        for index, probe in enumerate(self.spec.probes):
            key = f"probes[{index}].where"
            try:
                expr = parse_where(probe.where)
            except UsageError as error:
                self.key_problem(key, " ".join(str(error).split()))
                continue
            usable = {name: self.reference(key, name, role="probe columns", top_level=False)
                      for name in sorted(columns(expr))}
            if all(usable.values()):
                self.literals(key, expr)
            for position, name in enumerate(probe.columns or ()):
                self.reference(f"probes[{index}].columns[{position}]", name, role="probe columns",
                               top_level=False)

    def literals(self, key: str, expr: Expr) -> None:
        """Each comparison of the probe bound on its own, so that every literal that does not fit is named."""

        kinds = {path: kind for path, c in self.columns.items() if (kind := _kind(c.type)) is not None}
        for leaf in _leaves(expr):
            try:
                bind(leaf, kinds)
            except UsageError as error:
                self.key_problem(key, str(error))

    def run(self) -> list[str]:
        self.types()
        self.names()
        self.sort_keys()
        self.writer()
        self.verify()
        self.keys()
        self.probes()
        return list(dict.fromkeys([*self.problems, *self.probe_problems]))


def _kind(iceberg_type: IcebergType) -> Kind | None:
    """The predicate `Kind` of a column as readers see it (pyiceberg's Arrow types)."""

    return {
        "BooleanType": Kind.BOOLEAN,
        "IntegerType": Kind.INTEGER,
        "LongType": Kind.INTEGER,
        "FloatType": Kind.FLOAT,
        "DoubleType": Kind.FLOAT,
        "DecimalType": Kind.DECIMAL,
        "StringType": Kind.STRING,
        "BinaryType": Kind.BINARY,
        "DateType": Kind.DATE,
        "TimestampType": Kind.TIMESTAMP,
        "TimestamptzType": Kind.TIMESTAMP_TZ,
    }.get(type(iceberg_type).__name__)


def _leaves(expr: Expr) -> list[Predicate]:
    """The predicates (leaves) of an expression tree."""

    if isinstance(expr, Predicate):
        return [expr]
    if isinstance(expr, And | Or):
        return [*_leaves(expr.left), *_leaves(expr.right)]
    if isinstance(expr, Not):
        return _leaves(expr.child)
    return []


# ---- API ---------------------------------------------------------------------------------------------


def table_problems(table: Table, spec: TableSpec) -> list[str]:
    """Every problem `check_table` would raise, one message line each (empty: the table is admitted)."""
    return _Checker(table, spec).run()


def check_table(table: Table, spec: TableSpec, *, probes: Literal["refuse", "warn"] = "refuse") -> None:
    """Refuse the table before any work when its schema or the spec's column references cannot work.

    Raises `UsageError` whose message has one line per problem (see the module doc for what is checked).
    `probes="warn"` (the compaction): a probe's problem (a column renamed since the probe was written) is
    logged, not refused; the rewrite does not need the probes, and measuring reports the probe.
    """
    refuse_format_version(table, spec.table)
    checker = _Checker(table, spec)
    checker.run()
    problems = list(dict.fromkeys(checker.problems))
    probe_problems = list(dict.fromkeys(checker.probe_problems))
    if probes == "warn":
        for line in probe_problems:
            log.warning("%s (the rewrite goes on; measuring cannot use this probe until it is fixed)", line)
    else:
        problems += probe_problems
    if problems:
        raise UsageError("\n".join(problems))


# The newest table format version lakesort commits to. pyiceberg 0.12 writes neither a v3 table's metadata
# ("Writing V3 is not yet supported", apache/iceberg-python#1551) nor its manifests (`write_manifest` raises
# for 3), so a v3 table (deletion vectors in Puffin files, row lineage) could be planned and compacted but
# never committed: it is refused before Spark starts instead.
MAX_FORMAT_VERSION = 2


def refuse_format_version(table: Table, name: str) -> None:
    """A `UsageError` (exit 2) for a table whose format version lakesort cannot commit to."""
    version = table.metadata.format_version
    if version > MAX_FORMAT_VERSION:
        raise UsageError(
            f"{name}: the table has format version {version}; lakesort commits through pyiceberg "
            f"{installed('pyiceberg')}, which writes the metadata and manifests of format versions 1 and 2 "
            "only (apache/iceberg-python#1551), so a rewrite could never commit. Nothing was done. Compact "
            f"v{version} tables with Iceberg's own rewrite_data_files, or keep the tables lakesort maintains "
            "at 'format-version'='2'"
        )
