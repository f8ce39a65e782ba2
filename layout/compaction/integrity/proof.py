"""A metadata proof, by Iceberg field id, that a compaction's staged output holds its input's rows.

Why it exists: the job that wrote the output read the input through a reader (Spark, pyarrow) that
may resolve columns by *name*, skip a file, or read a renamed column as nulls, and the output's own
row count and fingerprint were computed by that same reader. This proof does not trust the reader.
It compares two things no reader produced: Iceberg's manifest statistics of the INPUT data files,
and the OUTPUT files' Parquet footers turned into Iceberg statistics exactly as pyiceberg does when
it builds the DataFiles the commit adds (`data_file_statistics_from_parquet_metadata`). Only
metadata is read: no data, no Spark.

Figures, per leaf field id (struct members, list elements, map keys and values included): rows;
value, null and NaN counts; lower and upper bounds. A figure unknown on either side (metrics mode
`none`/`counts`, a writer that did not record it, Parquet footers never carrying NaN counts) is not
proven and is reported as such, never guessed. Any difference refuses the commit (`ProofFailed`), as
does an output column whose Parquet field id is not the schema's for its path, or a footer from which
pyiceberg would commit a wrong bound.
"""

from __future__ import annotations

import logging
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
from pyiceberg import types as pt
from pyiceberg.conversions import from_bytes
from pyiceberg.io import pyarrow as pyio
from pyiceberg.io.pyarrow import (
    MetricModeTypes,
    match_metrics_mode,
    parquet_path_to_id_mapping,
    pyarrow_to_schema,
)
from pyiceberg.manifest import DataFileContent

from layout.errors import LakesortError

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import TableMetadata

log = logging.getLogger(__name__)

DEFAULT_TRUNCATE = 16  # Iceberg's default metrics mode is truncate(16), in Java and pyiceberg alike
_DEFAULT_MODE_KEY = "write.metadata.metrics.default"
_COLUMN_MODE_PREFIX = "write.metadata.metrics.column."

_MEANING = {
    "rows": "rows were lost or duplicated",
    "value count": "values were lost or added (rows, or list and map entries)",
    "more nulls": "values became nulls: a column resolved by name instead of field id reads as nulls "
                  "after a rename",
    "fewer nulls": "nulls became values: the column was read from another column's data",
    "NaN count": "NaN values were lost, added or rewritten",
    "lower bound": "the column's values changed (read from another column, or rewritten)",
    "upper bound": "the column's values changed (read from another column, or rewritten)",
    "field id": "readers resolve columns by field id and pyiceberg maps footer statistics by name: "
                "the output file's columns must carry the table schema's ids",
    "footer": "the output file's statistics cannot be read as Iceberg's",
    "input": "the input is not a plain data file",
    "merged rows": "the merged output has more rows than its input",
    "deleted rows": "the output must hold the input's rows (manifest record counts) less the rows deleted",
    "merged count": "a merged output row is an input row: it cannot have more of this than the input",
    "merged bound": "the merged output has values outside the input's range",
}


class ProofFailed(LakesortError):
    """The staged output's metadata does not match the input's: nothing was committed."""


@dataclass(frozen=True, slots=True)
class ColumnStats:
    """One leaf field id's figures over a set of files; None = unknown (or, for bounds, no value)."""

    field_id: int
    value_count: int | None
    null_count: int | None
    nan_count: int | None  # 0 for types without NaN
    lower: Any = None  # decoded with pyiceberg's from_bytes; never NaN
    upper: Any = None
    lower_truncated: bool = False  # a string/binary bound as long as the truncation length: maybe cut
    upper_truncated: bool = False


@dataclass(frozen=True, slots=True)
class Difference:
    """One figure that differs: `expected` is the inputs' value, `actual` the outputs'."""

    field_id: int | None
    column: str  # full dotted name ("point.x", "tags.element"); "" for the row count
    figure: str  # rows, value count, null count, NaN count, lower bound, upper bound, field id, ...
    expected: Any
    actual: Any
    meaning: str
    file: str = ""  # the one file at fault, when one is

    def describe(self) -> str:
        where = [f"column {self.column} (field id {self.field_id})"] if self.column else []
        where += [f"file {self.file}"] if self.file else []
        return (f"{', '.join(where)}{': ' if where else ''}{self.figure} is {self.actual!r} in the output, "
                f"{self.expected!r} in the input: {self.meaning}")


@dataclass(frozen=True, slots=True)
class GroupStats:
    rows: int
    files: int
    columns: Mapping[int, ColumnStats]
    issues: tuple[Difference, ...] = ()  # found while reading (bad field ids, unreadable footers)


@dataclass(frozen=True, slots=True)
class Comparison:
    differences: tuple[Difference, ...]
    unproven: tuple[str, ...]  # "point.x (3): NaN count, lower bound": not provable from metadata

    @property
    def ok(self) -> bool:
        return not self.differences


@dataclass(frozen=True, slots=True)
class _Leaf:
    field_id: int
    name: str
    type: pt.IcebergType
    repeated: bool  # under a list or map: its value count is not the row count
    has_default: bool  # v3 initial-default: files without the column read as the default, not null


@dataclass(frozen=True, slots=True)
class _File:
    """One file's statistics, in DataFile terms (field id -> count / serialized bound)."""

    record_count: int
    value_counts: Mapping[int, int] = field(default_factory=dict)
    null_counts: Mapping[int, int] = field(default_factory=dict)
    nan_counts: Mapping[int, int] = field(default_factory=dict)
    lower: Mapping[int, bytes] = field(default_factory=dict)
    upper: Mapping[int, bytes] = field(default_factory=dict)
    absent: frozenset[int] = frozenset()  # leaf ids known to be missing from the file: read as nulls
    unreadable: bool = False


def _leaves(schema: Schema) -> list[_Leaf]:
    out: list[_Leaf] = []

    def walk(field_id: int, kind: pt.IcebergType, repeated: bool, default: bool) -> None:
        if isinstance(kind, pt.StructType):
            for f in kind.fields:
                walk(f.field_id, f.field_type, repeated, default or f.initial_default is not None)
        elif isinstance(kind, pt.ListType):
            walk(kind.element_id, kind.element_type, True, default)
        elif isinstance(kind, pt.MapType):
            walk(kind.key_id, kind.key_type, True, default)
            walk(kind.value_id, kind.value_type, True, default)
        else:
            out.append(_Leaf(field_id, schema.find_column_name(field_id) or str(field_id), kind, repeated,
                             default))

    for f in schema.fields:
        walk(f.field_id, f.field_type, False, f.initial_default is not None)
    return out


def _mode(properties: Mapping[str, str], name: str) -> Any:

    return match_metrics_mode(properties.get(_COLUMN_MODE_PREFIX + name)
                              or properties.get(_DEFAULT_MODE_KEY, f"truncate({DEFAULT_TRUNCATE})"))


def _truncation(properties: Mapping[str, str], leaf: _Leaf, *, conservative: bool) -> int | None:
    """Length at which a string/binary bound may have been cut; None = never cut.

    Outputs: exactly the mode in force (pyiceberg computes their bounds from it). Inputs were written
    earlier, maybe by another writer or under other properties: any bound of 16 or more (Iceberg's
    default), or of the length in force, may be cut.
    """
    if not isinstance(leaf.type, pt.StringType | pt.BinaryType):
        return None

    mode = _mode(properties, leaf.name)
    length = mode.length if mode.type == MetricModeTypes.TRUNCATE else None
    if not conservative:
        return length
    return DEFAULT_TRUNCATE if length is None else min(length, DEFAULT_TRUNCATE)


def _is_float(leaf: _Leaf) -> bool:
    return isinstance(leaf.type, pt.FloatType | pt.DoubleType)


def _decode(kind: pt.IcebergType, raw: bytes | None) -> Any:
    """A bound's value; None when absent, NaN (never a bound), or not decodable as the column's type."""
    if raw is None:
        return None
    if len(raw) == 4 and isinstance(kind, pt.LongType | pt.DoubleType):  # written before a type promotion
        kind = pt.IntegerType() if isinstance(kind, pt.LongType) else pt.FloatType()
    try:
        value = from_bytes(kind, raw)  # type: ignore[arg-type]
    except (ValueError, TypeError, struct.error):
        return None
    return None if isinstance(value, float) and math.isnan(value) else value


def _aggregate(files: Sequence[_File], leaves: Sequence[_Leaf], properties: Mapping[str, str], *,
               conservative: bool, issues: Iterable[Difference] = ()) -> GroupStats:
    columns: dict[int, ColumnStats] = {}
    for leaf in leaves:
        fid = leaf.field_id
        counts: list[int | None] = [0, 0, 0]  # value, null, NaN
        lows: list[Any] = []
        highs: list[Any] = []
        low_known = high_known = True
        for f in files:
            if f.unreadable:
                counts = [None, None, None]
                low_known = high_known = False
                continue
            if f.record_count == 0:  # an empty file: writers record no statistics, none are needed
                figures: tuple[int | None, ...] = (0, 0, 0)
            elif fid in f.absent:  # read as nulls: no bounds, every row (never a repeated leaf) a null
                figures = (f.record_count, f.record_count, 0)
            else:
                nan = f.nan_counts.get(fid) if _is_float(leaf) else 0
                figures = (f.value_counts.get(fid), f.null_counts.get(fid), nan)
            counts = [None if c is None or x is None else c + x for c, x in zip(counts, figures, strict=True)]
            value, null, nan = figures
            # A file with no bound for the column is fine only when it provably holds no value.
            empty = f.record_count == 0 or (value is not None and null is not None
                                            and value == null + (nan or 0))
            for bounds, found in ((f.lower, lows), (f.upper, highs)):
                decoded = _decode(leaf.type, bounds.get(fid))
                if decoded is not None:
                    found.append(decoded)
                elif not empty:
                    if found is lows:
                        low_known = False
                    else:
                        high_known = False
        trunc = _truncation(properties, leaf, conservative=conservative)
        lower = min(lows) if lows and low_known else None
        upper = max(highs) if highs and high_known else None
        columns[fid] = ColumnStats(
            fid, counts[0], counts[1], counts[2], lower, upper,
            lower_truncated=trunc is not None and lower is not None and len(lower) >= trunc,
            upper_truncated=trunc is not None and upper is not None and len(upper) >= trunc,
        )
    rows = sum(f.record_count for f in files)
    return GroupStats(rows, len(files), MappingProxyType(columns), tuple(issues))


def input_stats(data_files: Iterable[DataFile], schema: Schema,
                properties: Mapping[str, str] | None = None) -> GroupStats:
    """The inputs' figures from their manifest entries (`plan_files()` tasks' `.file`, or entries)."""

    props = properties or {}
    leaves = _leaves(schema)

    files: list[_File] = []
    issues: list[Difference] = []
    for df in data_files:
        if df.content != DataFileContent.DATA:
            issues.append(Difference(None, "", "input", "data file", str(df.content), _MEANING["input"],
                                     df.file_path))
        sizes, values = df.column_sizes or {}, df.value_counts or {}
        nulls, nans = df.null_value_counts or {}, df.nan_value_counts or {}
        lower, upper = df.lower_bounds or {}, df.upper_bounds or {}
        newest = max((*sizes, *values), default=None)
        # A file that predates a column has no trace of its field id anywhere, while it has counts for
        # other columns, and no id above it (ids only grow, so a file holding a later-added column was
        # written when this one existed). A column in mode `none` leaves no trace in Java-written files
        # either: when that mode is in force, or under a list/map (value count != rows), or with a v3
        # initial-default (read as the default, not null), the figures stay unknown instead.
        absent = frozenset() if not values or newest is None else frozenset(
            leaf.field_id for leaf in leaves
            if newest < leaf.field_id and not leaf.repeated and not leaf.has_default
            and all(leaf.field_id not in d for d in (sizes, values, nulls, nans, lower, upper))
            and _mode(props, leaf.name).type != MetricModeTypes.NONE
        )
        files.append(_File(df.record_count, values, nulls, nans, lower, upper, absent))
    return _aggregate(files, leaves, props, conservative=True, issues=issues)


def _id_problems(path: str, metadata: Any, expected: Mapping[str, int]) -> list[Difference]:
    """Every Parquet column must carry the field id the table schema gives its path."""

    try:
        in_file = parquet_path_to_id_mapping(pyarrow_to_schema(metadata.schema.to_arrow_schema()))
    except (ValueError, TypeError, NotImplementedError) as exc:  # no field ids, or a type Iceberg lacks
        return [Difference(None, "", "field id", "field ids", str(exc), _MEANING["field id"], path)]
    problems = []
    for i in range(metadata.num_columns):
        column = metadata.schema.column(i).path
        if in_file.get(column) != expected.get(column):
            problems.append(Difference(in_file.get(column), column, "field id", expected.get(column),
                                       in_file.get(column), _MEANING["field id"], path))
    return problems


def nan_tainted(metadata: Any, mapping: Mapping[str, int]) -> set[int]:
    """Field ids of float/double columns with a NaN min or max in any row group's footer statistics.

    parquet-mr (Spark) writes NaN as a row group's max when it holds a NaN, hiding its real max, and
    pyiceberg's max() then keeps either NaN or only the later row groups' max: a finite bound that may
    miss values. No bound is sound; that one is not."""
    found = set()
    for r in range(metadata.num_row_groups):
        group = metadata.row_group(r)
        for c in range(metadata.num_columns):
            column, field_id = group.column(c), None
            stats = column.statistics
            if column.physical_type not in ("FLOAT", "DOUBLE") or stats is None or not stats.has_min_max:
                continue
            if math.isnan(stats.min) or math.isnan(stats.max):
                field_id = mapping.get(column.path_in_schema)
            if field_id is not None:
                found.add(field_id)
    return found


def footer_statistics(metadata: Any, schema: Schema, properties: dict[str, str]) -> dict[str, Any]:
    """A Parquet footer as the Iceberg statistics of a DataFile, serialized: pyiceberg's own computation,
    without the bounds of columns whose footer holds NaN bounds (`nan_tainted`). The commit builds its
    DataFiles with this, and the proof compares the same figures."""

    mapping = pyio.parquet_path_to_id_mapping(schema)
    plan = pyio.compute_statistics_plan(schema, properties)
    stats = pyio.data_file_statistics_from_parquet_metadata(
        parquet_metadata=metadata, stats_columns=plan, parquet_column_mapping=mapping,
    ).to_serialized_dict()
    for field_id in nan_tainted(metadata, mapping):
        stats["lower_bounds"].pop(field_id, None)
        stats["upper_bounds"].pop(field_id, None)
    # A column in metrics mode `none` gets no figure at all from Iceberg's Java writers and add_files, not
    # even its size (ParquetMetrics skips it); pyiceberg still records the size. Found comparing lakesort's
    # statistics with Iceberg's for the same files (tests/interop/test_iceberg_procedures.py).
    for field_id, collector in plan.items():
        if collector.mode.type == pyio.MetricModeTypes.NONE:
            stats["column_sizes"].pop(field_id, None)
    return stats


def output_stats(paths: Iterable[str], table_metadata: TableMetadata, io: FileIO) -> GroupStats:
    """The staged files' footers as Iceberg statistics, computed the way pyiceberg's commit does."""

    schema = table_metadata.schema()
    props = table_metadata.properties
    leaves = _leaves(schema)
    plan = pyio.compute_statistics_plan(schema, props)
    expected = pyio.parquet_path_to_id_mapping(schema)
    files: list[_File] = []
    issues: list[Difference] = []
    for path in paths:
        with io.new_input(path).open() as stream:
            metadata = pq.ParquetFile(stream).metadata
        problems = _id_problems(path, metadata, expected)
        if not problems:
            try:
                stats = footer_statistics(metadata, schema, props)
            except (ValueError, KeyError) as exc:  # e.g. INT96 timestamps, a mismatched physical type
                problems = [Difference(None, "", "footer", "Iceberg statistics", str(exc),
                                       _MEANING["footer"], path)]
        if problems:
            issues += problems
            files.append(_File(metadata.num_rows, unreadable=True))
            continue
        present = {expected[metadata.schema.column(i).path] for i in range(metadata.num_columns)}
        # The footer lists every column the file has: a top-level or struct leaf it lacks reads as
        # nulls. Under a list or map, or with a default, the count is unknown; none mode records nothing.
        absent = frozenset(
            leaf.field_id for leaf in leaves
            if leaf.field_id not in present and not leaf.repeated and not leaf.has_default
            and plan[leaf.field_id].mode.type != pyio.MetricModeTypes.NONE
        )
        files.append(_File(stats["record_count"], stats["value_counts"], stats["null_value_counts"],
                           stats["nan_value_counts"], stats["lower_bounds"], stats["upper_bounds"], absent))
    return _aggregate(files, leaves, props, conservative=False, issues=issues)


def _compare_bounds(leaf: _Leaf, i: ColumnStats, o: ColumnStats, merged: bool,
                    add: Any, unproven: list[str]) -> None:
    text = isinstance(leaf.type, pt.StringType | pt.BinaryType)
    if i.lower is None or o.lower is None:
        unproven.append("lower bound")
    elif merged:
        # The input's lower bound is always <= its true minimum, truncated or not; a cut output
        # bound is a prefix of the output's minimum, so compare it with the input's same prefix.
        floor = i.lower[: len(o.lower)] if text and o.lower_truncated else i.lower
        if o.lower < floor:
            add("lower bound", i.lower, o.lower, "merged bound")
    elif text and (i.lower_truncated or o.lower_truncated):
        n = min(len(i.lower), len(o.lower))  # cut lower bounds are prefixes of the true minimum
        if i.lower[:n] != o.lower[:n]:
            add("lower bound", i.lower, o.lower)
    elif i.lower != o.lower:  # by value: -0.0 == 0.0, Decimal("1.0") == Decimal("1.00")
        add("lower bound", i.lower, o.lower)

    if i.upper is None or o.upper is None or o.upper_truncated or (i.upper_truncated and not merged):
        unproven.append("upper bound")  # a cut upper bound is rounded up: not comparable
    elif merged:
        if o.upper > i.upper:  # an input upper bound, cut or not, is >= the input's maximum
            add("upper bound", i.upper, o.upper, "merged bound")
    elif i.upper != o.upper:
        add("upper bound", i.upper, o.upper)


def compare(inputs: GroupStats, outputs: GroupStats, schema: Schema, *, merged: bool = False,
            deleted: int | None = None) -> Comparison:
    """Every difference between the inputs' and the outputs' figures, and what could not be proven.

    `merged`: a keyed table's merge keeps one whole input row per key, so the output has at most the
    input's rows, at most its values, nulls and NaNs per column, and bounds within the input's.
    `deleted`: merge-on-read inputs, the rows their delete files deleted (counted by the job apart from the
    rows it wrote): the output holds exactly the input's rows less these (a keyed merge: at most), and, every
    output row being an input row, the per-column figures are checked as a merge's are. 0
    deleted: exact equality.
    """
    differences: list[Difference] = [*inputs.issues, *outputs.issues]
    unproven_lines: list[str] = []
    expected_rows = inputs.rows - (deleted or 0)
    if (outputs.rows > expected_rows) if merged else (outputs.rows != expected_rows):
        differences.append(Difference(None, "", "rows", expected_rows, outputs.rows,
                                      _MEANING["merged rows" if merged else "deleted rows" if deleted
                                               else "rows"]))
    merged = merged or bool(deleted)
    for leaf in _leaves(schema):
        i, o = inputs.columns.get(leaf.field_id), outputs.columns.get(leaf.field_id)
        if i is None or o is None:
            unproven_lines.append(f"{leaf.name} ({leaf.field_id}): all figures")
            continue
        unproven: list[str] = []

        def add(figure: str, expected: Any, actual: Any, meaning: str | None = None,
                leaf: _Leaf = leaf) -> None:
            differences.append(Difference(leaf.field_id, leaf.name, figure, expected, actual,
                                          _MEANING[meaning or figure]))

        for figure, a, b in (("value count", i.value_count, o.value_count),
                             ("null count", i.null_count, o.null_count),
                             ("NaN count", i.nan_count, o.nan_count)):
            if a is None or b is None:
                unproven.append(figure)
            elif merged and b > a:
                add(figure, a, b, "merged count")
            elif not merged and a != b:
                meaning = ("more nulls" if b > a else "fewer nulls") if figure == "null count" else None
                add(figure, a, b, meaning)
        _compare_bounds(leaf, i, o, merged, add, unproven)
        if unproven:
            unproven_lines.append(f"{leaf.name} ({leaf.field_id}): {', '.join(unproven)}")
    return Comparison(tuple(differences), tuple(unproven_lines))


def prove(inputs: GroupStats, outputs: GroupStats, schema: Schema, *, group: str,
          merged: bool = False, deleted: int | None = None) -> Comparison:
    """`compare`, raising `ProofFailed` (naming the group, every column and figure) on any difference."""
    result = compare(inputs, outputs, schema, merged=merged, deleted=deleted)
    if not result.ok:
        lines = "\n".join(f"  - {d.describe()}" for d in result.differences)
        raise ProofFailed(f"metadata proof failed for {group}; nothing committed:\n{lines}")
    if result.unproven:
        log.debug("metadata proof of %s passed; not provable from metadata: %s", group,
                 "; ".join(result.unproven))
    return result


def check_group(data_files: Iterable[DataFile], paths: Iterable[str], table_metadata: TableMetadata,
                io: FileIO, *, group: str, merged: bool = False, deleted: int | None = None) -> Comparison:
    """Prove one rewrite group: its input DataFiles against its staged Parquet files' footers (`deleted`: the
    rows its delete files deleted, for merge-on-read inputs)."""
    schema = table_metadata.schema()
    inputs = input_stats(data_files, schema, table_metadata.properties)
    return prove(inputs, output_stats(paths, table_metadata, io), schema, group=group, merged=merged,
                 deleted=deleted)
