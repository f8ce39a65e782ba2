"""Table specs: how one Iceberg table should be laid out, written and checked (`dags/tables/*.yaml`).

One YAML file per table; keys are snake_case, unknown keys are errors. Sizes take a whole number of
bytes or a string with a binary unit: ``512KiB``, ``128MiB``, ``1.5GiB``, ``1TiB`` (``MB`` and friends
are refused because they are ambiguous). Every field, with its default:

``table`` (required)
    Iceberg identifier ``namespace.name`` (the namespace may have several levels).
``catalog`` = None
    Catalog name in pyiceberg's configuration; None means pyiceberg's default catalog.
``owner`` (required)
    ``name`` and ``email`` of the owning team, for reports. The email is checked loosely (``x@y.z``).
``sort`` = linear, no keys
    ``strategy``: ``linear`` (default) or ``zorder``; ``keys``: list of ``{column, direction, nulls}``
    with ``direction`` ``asc`` (default) or ``desc`` and ``nulls`` ``first`` or ``last`` (default as
    Iceberg does: first for asc, last for desc). Without keys the Iceberg table's own sort order is
    used (see `resolve_sort_keys`). zorder needs at least 2 keys.
``target_file_size`` = 128MiB
    Size the rewrite aims for per output file.
``small_file_size`` = 0.75 x target_file_size
    Files below this count as small (Iceberg's own ``min-file-size-bytes`` default ratio).
``min_small_files`` = 2
    A partition with at least this many small files needs a rewrite. At least 2: one small file is
    just a partition's last file, and rewriting it alone would give a small file again, every night.
``max_group_size`` = 1GiB
    Most input bytes one rewrite group (one Spark task set) reads; at least ``target_file_size``.
``writer``: Parquet settings the Spark job passes to parquet-mr (see `WriterSpec.spark_options`)
    ``row_group_size`` = 128MiB, ``page_size`` = 1MiB, ``page_row_count_limit`` = 20000 rows,
    ``column_index_truncate_length`` = 64 bytes, ``statistics_truncate_length`` = None (parquet-mr
    does not truncate), ``compression`` = ``zstd`` (or ``snappy``, ``gzip``, ``lz4_raw``,
    ``uncompressed``), ``compression_level`` = None (zstd 1-22, gzip 1-9; other codecs have none),
    ``dictionary`` = true, ``bloom_filters`` = {} mapping column -> ``{ndv, fpp = 0.01}``.
``verify``: what the verify step checks in the staged files
    ``column_index_columns`` = ``all`` (or a list of columns that must carry a column index);
    ``boundary_order`` = None, i.e. derived by `intended_boundary_orders` (column -> ``ASCENDING``,
    ``DESCENDING`` or ``UNORDERED``); ``bloom_filter_columns`` = the writer's bloom filter columns;
    ``min_row_group_size`` = 0, ``max_row_group_size`` = 2 x writer.row_group_size (parquet-mr checks
    the buffered size only every so many rows, so row groups overshoot); ``min_file_size`` = 0 (a
    partition's last file is legitimately small, and a file cannot tell it is the last one),
    ``max_file_size`` = 2 x target_file_size. Row group sizes are the compressed bytes in the footer.
``probes`` = []
    The queries owners run, measured before and after each rewrite: ``{name, where, columns}`` with a
    unique identifier-like ``name``, ``where`` SQL text that `layout.expr.sql.parse_where` accepts, and
    ``columns`` = None (the columns the query reads; None means all).
``keys`` = None (upsert tables only)
    ``columns`` (non-empty), ``sequence`` (the column ordering versions of a row) and ``merge``:
    ``deduplicate`` (default: keep the highest sequence per key) or ``first-row``.

`TableSpec.spec_hash` fingerprints what changes the bytes written (sort, sizes that shape files,
writer, keys), so a planner can tell whether a partition was compacted under the same spec. Owner,
probes, catalog, table name, verification bounds and the planning thresholds (`small_file_size`,
`min_small_files`) do not enter it: changing them must not make every partition look stale.

Errors are `ConfigError` naming the file and the dotted key, one line per problem:
``dags/tables/x.yaml: sort.keys[0].direction: expected one of 'asc', 'desc', got 'up'``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import typing
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from layout.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = [
    "BloomFilter",
    "Owner",
    "Probe",
    "SortKey",
    "SortSpec",
    "TableSpec",
    "UpsertKeys",
    "VerifySpec",
    "WriterSpec",
    "intended_boundary_orders",
    "load_spec",
    "load_specs",
    "parse_size",
    "parse_spec",
    "resolve_sort_keys",
]

Strategy = Literal["linear", "zorder"]
Direction = Literal["asc", "desc"]
NullOrder = Literal["first", "last"]
Compression = Literal["zstd", "snappy", "gzip", "lz4_raw", "uncompressed"]
BoundaryOrder = Literal["ASCENDING", "DESCENDING", "UNORDERED"]
MergeMode = Literal["deduplicate", "first-row"]

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
_UNITS = {"b": 1, "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_TABLE = re.compile(r"[^.\s]+(\.[^.\s]+)+")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
# Bumped when the canonical form changes meaning, so old hashes cannot match by accident.
_HASH_VERSION = 1
_HASH_FIELDS = ("sort", "target_file_size", "max_group_size", "writer", "keys")
_SPARK_CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "lz4_raw": "lz4_raw", "uncompressed": "none"}
_LEVELS = {"zstd": (1, 22), "gzip": (1, 9)}
# Hadoop's GzipCodec reads `zlib.compress.level` with Configuration.getEnum, so it wants the enum
# constant's name of ZlibCompressor.CompressionLevel, not the number.
_ZLIB_LEVELS = {
    1: "BEST_SPEED", 2: "TWO", 3: "THREE", 4: "FOUR", 5: "FIVE",
    6: "SIX", 7: "SEVEN", 8: "EIGHT", 9: "BEST_COMPRESSION",
}


def parse_size(value: object) -> int:
    """Bytes from an int or a string with a binary unit (``128MiB``); ValueError says what is accepted."""
    if isinstance(value, bool):
        # ValueError, not TypeError: pydantic turns only ValueError into a validation error with a path.
        raise ValueError(f"expected a size like 128MiB or a number of bytes, got {value!r}")  # noqa: TRY004
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    match = _SIZE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"expected a size like 512KiB, 128MiB or 1GiB, or a number of bytes, got {value!r}")
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower() or "b")
    if factor is None:
        hint = ""
        if unit.lower() in ("kb", "mb", "gb", "tb", "k", "m", "g", "t"):
            # 1MB is 10^6 in SI but 2^20 to many tools: refuse rather than guess.
            binary = f"{unit[0].upper()}iB"
            hint = f"; sizes use binary units: write {number}{binary} (1 KiB = 1024 bytes)"
        raise ValueError(f"unknown size unit {unit!r} in {value!r}{hint}; units: B, KiB, MiB, GiB, TiB")
    try:
        total = Decimal(number) * factor
    except InvalidOperation:  # pragma: no cover - the regex admits only decimals
        raise ValueError(f"not a number in {value!r}") from None
    if total != total.to_integral_value():
        raise ValueError(f"{value!r} is not a whole number of bytes")
    return int(total)


def _column_list(value: object) -> object:
    # A single column written as a string is a common slip; reading it as one column is what was meant.
    return [value] if isinstance(value, str) else value


Size = Annotated[int, BeforeValidator(parse_size), Field(gt=0)]
SizeOrZero = Annotated[int, BeforeValidator(parse_size), Field(ge=0)]
Columns = Annotated[tuple[Annotated[str, Field(min_length=1)], ...], BeforeValidator(_column_list)]


def _columns_or_all(value: object) -> Literal["all"] | tuple[str, ...]:
    if value == "all":
        return "all"
    if isinstance(value, list | tuple) and all(isinstance(c, str) and c for c in value):
        return tuple(value)
    raise ValueError(f"expected 'all' or a list of column names, got {value!r}")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Owner(_Model):
    """Who owns the table: named in reports and alerts."""

    name: Annotated[str, Field(min_length=1)]
    email: str

    @field_validator("email")
    @classmethod
    def _email(cls, value: str) -> str:
        if not _EMAIL.fullmatch(value):
            raise ValueError(f"expected an email address like team@example.com, got {value!r}")
        return value


class SortKey(_Model):
    """One sort column; `nulls` defaults as Iceberg's: first for asc, last for desc."""

    column: Annotated[str, Field(min_length=1)]
    direction: Direction = "asc"
    nulls: NullOrder = "first"

    @model_validator(mode="before")
    @classmethod
    def _default_nulls(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("nulls") is None:
            data = {**data, "nulls": "last" if data.get("direction") == "desc" else "first"}
        return data


def _check_zorder(strategy: str, keys: Sequence[SortKey]) -> None:
    if strategy == "zorder" and 0 < len(keys) < 2:
        raise ValueError(
            f"zorder interleaves at least 2 columns, got {len(keys)} key ({keys[0].column}); "
            "add a key or use strategy: linear"
        )


class SortSpec(_Model):
    """How rewritten files are sorted; empty `keys` means the Iceberg table's own sort order."""

    strategy: Strategy = "linear"
    keys: tuple[SortKey, ...] = ()

    @model_validator(mode="after")
    def _valid(self) -> SortSpec:
        seen: set[str] = set()
        for key in self.keys:
            if key.column in seen:
                raise ValueError(f"column {key.column!r} appears twice in keys")
            seen.add(key.column)
        _check_zorder(self.strategy, self.keys)
        return self


class BloomFilter(_Model):
    """A split-block bloom filter sized for `ndv` distinct values at false-positive rate `fpp`."""

    ndv: Annotated[int, Field(gt=0)]
    fpp: Annotated[float, Field(gt=0, lt=1)] = 0.01


class WriterSpec(_Model):
    """Parquet writer settings; `spark_options` turns them into DataFrameWriter options."""

    row_group_size: Size = 128 * MiB
    page_size: Size = 1 * MiB
    page_row_count_limit: Annotated[int, Field(gt=0)] = 20_000
    column_index_truncate_length: Annotated[int, Field(gt=0)] = 64
    statistics_truncate_length: Annotated[int, Field(gt=0)] | None = None
    compression: Compression = "zstd"
    compression_level: int | None = None
    dictionary: bool = True
    bloom_filters: dict[Annotated[str, Field(min_length=1)], BloomFilter] = Field(default_factory=dict)

    @field_validator("compression_level")
    @classmethod
    def _level(cls, value: int | None, info: ValidationInfo) -> int | None:
        codec = info.data.get("compression")
        if value is None or codec is None:
            return value
        if codec not in _LEVELS:
            raise ValueError(
                f"compression {codec!r} has no level; remove compression_level or use zstd or gzip"
            )
        low, high = _LEVELS[codec]
        if not low <= value <= high:
            raise ValueError(f"{codec} levels are {low} to {high}, got {value}")
        return value

    def spark_options(self) -> dict[str, str]:
        """The `.option(name, value)` pairs for Spark's Parquet writer (parquet-mr 1.17).

        Every setting is passed, defaults included, so the written files do not depend on the
        cluster's Spark or Hadoop defaults. The gzip level name comes from parquet-mr/Hadoop sources
        (`zlib.compress.level`, an enum name); the other names are checked on Spark 4.2.
        """
        options = {
            "compression": _SPARK_CODECS[self.compression],
            "parquet.block.size": str(self.row_group_size),
            "parquet.page.size": str(self.page_size),
            "parquet.page.row.count.limit": str(self.page_row_count_limit),
            "parquet.columnindex.truncate.length": str(self.column_index_truncate_length),
            "parquet.enable.dictionary": "true" if self.dictionary else "false",
        }
        if self.statistics_truncate_length is not None:
            options["parquet.statistics.truncate.length"] = str(self.statistics_truncate_length)
        if self.compression_level is not None:
            if self.compression == "zstd":
                options["parquet.compression.codec.zstd.level"] = str(self.compression_level)
            else:
                options["zlib.compress.level"] = _ZLIB_LEVELS[self.compression_level]
        for column, bloom in sorted(self.bloom_filters.items()):
            options[f"parquet.bloom.filter.enabled#{column}"] = "true"
            options[f"parquet.bloom.filter.expected.ndv#{column}"] = str(bloom.ndv)
            options[f"parquet.bloom.filter.fpp#{column}"] = repr(bloom.fpp)
            # parquet-mr drops a chunk's bloom filter when all its data pages are dictionary-encoded
            # (ParquetFileWriter.writeColumnChunk): a bloom-filtered column is written without one.
            options[f"parquet.enable.dictionary#{column}"] = "false"
        return options


class VerifySpec(_Model):
    """What the staged files must show; None fields are derived by `TableSpec` (see the module doc)."""

    column_index_columns: Annotated[Literal["all"] | tuple[str, ...], PlainValidator(_columns_or_all)] = "all"
    boundary_order: dict[Annotated[str, Field(min_length=1)], BoundaryOrder] | None = None
    bloom_filter_columns: Columns | None = None
    min_row_group_size: SizeOrZero = 0
    max_row_group_size: Size | None = None
    min_file_size: SizeOrZero = 0
    max_file_size: Size | None = None


class Probe(_Model):
    """A query the owners run; `where` is parsed at load time so a typo fails the spec, not the run."""

    name: Annotated[str, Field(pattern=_IDENTIFIER.pattern)]
    where: Annotated[str, Field(min_length=1)]
    columns: Columns | None = None

    @field_validator("where")
    @classmethod
    def _parses(cls, value: str, info: ValidationInfo) -> str:
        from layout.expr.sql import parse_where

        try:
            parse_where(value)
        except UsageError as error:
            name = info.data.get("name", "?")
            # sqlglot underlines the culprit with terminal escapes over several lines; one plain line
            # reads better in a log and keeps one error per line.
            detail = " ".join(_ANSI.sub("", str(error)).split())
            raise ValueError(f"probe {name!r}: {detail}") from None
        return value


class UpsertKeys(_Model):
    """The row key of an upsert table and how rows with the same key merge."""

    columns: Annotated[Columns, Field(min_length=1)]
    sequence: Annotated[str, Field(min_length=1)]
    merge: MergeMode = "deduplicate"


class TableSpec(_Model):
    """The spec of one table; build with `load_spec` or `parse_spec` so errors name the file."""

    table: str
    catalog: str | None = None
    owner: Owner
    # Absent and empty mean the same (the table's own order), so both hash alike.
    sort: SortSpec = SortSpec()
    target_file_size: Size = 128 * MiB
    small_file_size: Size | None = None
    min_small_files: Annotated[int, Field(ge=2)] = 2
    max_group_size: Size = 1 * GiB
    writer: WriterSpec = WriterSpec()
    verify: VerifySpec = VerifySpec()
    probes: tuple[Probe, ...] = ()
    keys: UpsertKeys | None = None

    _source: str = PrivateAttr(default="<spec>")

    @field_validator("table")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not _TABLE.fullmatch(value):
            raise ValueError(f"expected an Iceberg identifier like namespace.name, got {value!r}")
        return value

    @field_validator("probes")
    @classmethod
    def _unique_probes(cls, probes: tuple[Probe, ...]) -> tuple[Probe, ...]:
        first: dict[str, int] = {}
        for index, probe in enumerate(probes):
            if probe.name in first:
                raise ValueError(
                    f"duplicate probe name {probe.name!r} (probes[{first[probe.name]}] and probes[{index}])"
                )
            first[probe.name] = index
        return probes

    @model_validator(mode="after")
    def _derive(self) -> TableSpec:
        target = self.target_file_size
        small = self.small_file_size if self.small_file_size is not None else target * 3 // 4
        if small > target:
            raise ValueError(f"small_file_size ({small}) must not exceed target_file_size ({target})")
        if self.max_group_size < target:
            raise ValueError(f"max_group_size ({self.max_group_size}) must be at least target_file_size ({target})")
        verify = self.verify
        writer_blooms = tuple(sorted(self.writer.bloom_filters))
        missing = sorted(set(verify.bloom_filter_columns or ()) - set(writer_blooms))
        if missing:
            raise ValueError(
                f"verify.bloom_filter_columns asks for {', '.join(missing)} but writer.bloom_filters "
                f"does not write them (writer: {', '.join(writer_blooms) or 'none'})"
            )
        derived = {
            "bloom_filter_columns": verify.bloom_filter_columns if verify.bloom_filter_columns is not None
            else writer_blooms,
            "max_row_group_size": verify.max_row_group_size or 2 * self.writer.row_group_size,
            "max_file_size": verify.max_file_size or 2 * target,
        }
        for low, high in (("min_row_group_size", "max_row_group_size"), ("min_file_size", "max_file_size")):
            if getattr(verify, low) > derived[high]:
                raise ValueError(f"verify.{low} ({getattr(verify, low)}) exceeds verify.{high} ({derived[high]})")
        # Frozen models: derived defaults are filled in once, here, so that everything downstream
        # (and the hash) sees one normalized value.
        object.__setattr__(self, "small_file_size", small)
        object.__setattr__(self, "verify", verify.model_copy(update=derived))
        return self

    @property
    def source(self) -> str:
        """The file the spec was read from, for messages."""
        return self._source

    @property
    def spec_hash(self) -> str:
        """16 hex digits of sha256 over the canonical JSON of what changes the bytes written."""
        layout = self.model_dump(mode="json", include=set(_HASH_FIELDS))
        canonical = json.dumps({"v": _HASH_VERSION, **layout}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# --- loading -------------------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys silently; a spec with one is almost surely a mistake."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def load_spec(path: str | Path) -> TableSpec:
    """Read and validate one spec file; any problem raises `ConfigError` naming the file and key."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{source}: cannot read the table spec: {error.strerror or error}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"{source}{where}: invalid YAML: {problem}") from None
    return parse_spec(data, source=source)


def parse_spec(data: object, *, source: str = "<spec>") -> TableSpec:
    """Validate an already-parsed YAML document; `source` names it in errors."""
    if data is None:
        raise ConfigError(f"{source}: the table spec is empty; it needs at least table and owner")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping of keys (table, owner, sort, ...), got {type(data).__name__}")
    try:
        spec = TableSpec.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_describe(error, source)) from None
    spec._source = source
    return spec


def load_specs(directory: str | Path) -> list[TableSpec]:
    """Every ``*.yaml``/``*.yml`` in `directory`, sorted by file name; one table per file."""
    root = Path(directory)
    if not root.is_dir():
        raise ConfigError(f"{root}: not a directory of table specs")
    files = sorted(p for p in root.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    specs: list[TableSpec] = []
    # Keyed with the catalog: the same identifier in two catalogs is two tables.
    by_table: dict[tuple[str | None, str], TableSpec] = {}
    for path in files:
        spec = load_spec(path)
        other = by_table.get((spec.catalog, spec.table))
        if other is not None:
            raise ConfigError(
                f"{spec.source}: table: {spec.table!r} is already specified in {other.source}; "
                "keep one spec per table"
            )
        by_table[(spec.catalog, spec.table)] = spec
        specs.append(spec)
    return specs


def _describe(error: ValidationError, source: str) -> str:
    lines = []
    for item in error.errors(include_url=False):
        loc = item["loc"]
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        lines.append(f"{source}: {path + ': ' if path else ''}{_message(item)}")
    return "\n".join(lines)


def _message(item: Any) -> str:
    kind, given = item["type"], item.get("input")
    if kind == "extra_forbidden":
        valid = _valid_keys(item["loc"][:-1])
        close = difflib.get_close_matches(str(item["loc"][-1]), valid, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown key{hint} (valid keys: {', '.join(valid)})"
    if kind == "literal_error":
        expected = item["ctx"]["expected"].replace(" or ", ", ")
        return f"expected one of {expected}, got {given!r}"
    if kind == "missing":
        return "required key is missing"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"expected a mapping of keys, got {given!r}"
    if kind == "too_short":
        return f"expected at least {item['ctx']['min_length']} item(s), got {given!r}"
    if kind == "value_error":
        return str(item["ctx"]["error"])
    return f"{item['msg'][0].lower()}{item['msg'][1:]}, got {given!r}"


def _valid_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed at `loc`: follow model fields; list indexes and mapping keys keep the element's model."""
    model: Any = TableSpec
    for part in loc:
        if model is not None and isinstance(part, str) and part in model.model_fields:
            model = _model_in(model.model_fields[part].annotation)
    return list(model.model_fields) if model is not None else []


def _model_in(annotation: Any) -> Any:
    """The model class inside an annotation (`X | None`, `tuple[X, ...]`, `dict[str, X]`, `Annotated`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for arg in typing.get_args(annotation) if (m := _model_in(arg)) is not None), None)


# --- sort keys and boundary orders ---------------------------------------------------------------


def resolve_sort_keys(spec: TableSpec, table: Table) -> tuple[SortKey, ...]:
    """The spec's sort keys, else the table's identity sort order; checked against the table schema."""
    from pyiceberg.table.sorting import NullOrder as IcebergNullOrder
    from pyiceberg.table.sorting import SortDirection
    from pyiceberg.transforms import IdentityTransform

    schema = table.schema()
    name = ".".join(table.name())
    strategy, keys = spec.sort.strategy, spec.sort.keys
    origin = "sort.keys"
    if not keys:
        order = table.sort_order()
        if order.is_unsorted:
            raise ConfigError(
                f"{spec.source}: sort: no sort keys: the spec has no sort.keys and the Iceberg table {name} "
                "has no sort order; add sort.keys to the spec (or a sort order to the table)"
            )
        converted = []
        for field in order.fields:
            column = schema.find_column_name(field.source_id) or f"<field id {field.source_id}>"
            if not isinstance(field.transform, IdentityTransform):
                raise ConfigError(
                    f"{spec.source}: sort: the sort order of {name} sorts by {field.transform}({column}); "
                    "lakesort sorts by plain column values only (identity transforms), so set sort.keys "
                    "in the spec"
                )
            converted.append(SortKey(
                column=column,
                direction="desc" if field.direction == SortDirection.DESC else "asc",
                nulls="last" if field.null_order == IcebergNullOrder.NULLS_LAST else "first",
            ))
        keys = tuple(converted)
        origin = f"the sort order of {name}"
        try:
            _check_zorder(strategy, keys)
        except ValueError as error:
            raise ConfigError(f"{spec.source}: sort: {error} (keys from {origin})") from None
    columns = schema.column_names
    for index, key in enumerate(keys):
        if key.column not in columns:
            close = difflib.get_close_matches(key.column, columns, n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ConfigError(
                f"{spec.source}: sort.keys[{index}].column: {key.column!r} is not a column of {name}{hint}"
                + ("" if origin == "sort.keys" else f" (from {origin})")
            )
    return keys


def intended_boundary_orders(spec: TableSpec, sort_keys: Sequence[SortKey]) -> dict[str, BoundaryOrder]:
    """Column -> the BoundaryOrder each rewritten file's column index should show.

    `verify.boundary_order` wins when given. Otherwise a linear sort orders pages only by its first
    key (later keys restart within each value of the first); z-order interleaves bits, so no single
    column's pages are ordered and nothing is asserted.
    """
    if spec.verify.boundary_order is not None:
        return dict(spec.verify.boundary_order)
    if spec.sort.strategy != "linear" or not sort_keys:
        return {}
    first = sort_keys[0]
    return {first.column: "DESCENDING" if first.direction == "desc" else "ASCENDING"}
