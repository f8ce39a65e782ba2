"""The models of a table spec; each field's `description` is its documentation (and the JSON schema's).

Validation is pydantic's plus the validators below; `layout.spec.loading` turns its errors into one
line per problem naming the file and the dotted key. The `WithJsonSchema` and `json_schema_extra`
annotations only shape the published JSON schema (`layout.spec.schema`): they do not validate.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)

from layout import transforms
from layout.durations import format_duration_short
from layout.errors import UsageError
from layout.expr.sql import parse_where
from layout.models import Frozen, Strategy
from layout.sizes import GiB, MiB
from layout.spec.fields import (
    BoundaryOrder,
    Columns,
    Compression,
    Direction,
    Duration,
    MergeMode,
    NonEmpty,
    NullOrder,
    Size,
    SizeOrZero,
    _column_schema,
    _columns_or_all,
    _columns_schema,
    _no_default,
)
from layout.spec.writer import DEFAULT_DICTIONARY_PAGE_SIZE, BloomFilter, WriterSpec

__all__ = [
    "CURVES",
    "BloomFilter",
    "BoundaryOrder",
    "Columns",
    "Compression",
    "Direction",
    "MergeMode",
    "NullOrder",
    "Owner",
    "Probe",
    "Retention",
    "Size",
    "SizeOrZero",
    "SortKey",
    "SortSpec",
    "Strategy",
    "TableSpec",
    "UpsertKeys",
    "VerifySpec",
    "WriterSpec",
]

# Strategies that sort by a curve over the keys (`layout.curves`), not by the keys in order: no single key's
# pages are ordered, so BoundaryOrder is not asserted and sorted runs are not kept.
CURVES: tuple[Strategy, ...] = ("zorder", "hilbert")
# Most keys a Hilbert curve takes: each keeps at least 15 of the index's 63 bits.
MAX_HILBERT_KEYS = 4

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_TABLE = re.compile(r"[^.\s]+(\.[^.\s]+)+")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
# Bumped when the canonical form changes meaning, so old hashes cannot match by accident.
_HASH_VERSION = 1
_HASH_FIELDS = ("sort", "target_file_size", "max_group_size", "writer", "keys")
# --- models --------------------------------------------------------------------------------------


class Owner(Frozen):
    """Who owns the table: named in reports and alerts."""

    name: NonEmpty = Field(description="Name of the owning team, shown in reports.")
    email: str = Field(
        description="Email address of the owning team, for reports; checked loosely (x@y.z).",
        json_schema_extra={"pattern": rf"^{_EMAIL.pattern}$"},
    )

    @field_validator("email")
    @classmethod
    def _email(cls, value: str) -> str:
        if not _EMAIL.fullmatch(value):
            raise ValueError(f"expected an email address like team@example.com, got {value!r}")
        return value


class SortKey(Frozen):
    """One sort column, or an Iceberg transform of it; `nulls` defaults as Iceberg's: first for asc, last for
    desc."""

    # An identity transform is left out of the key's dump (`_dump`): specs, plans and spec hashes written
    # before transforms existed read and hash as they did.

    column: NonEmpty = Field(description="Column to sort by, a column name of the Iceberg table.")
    transform: str = Field(
        transforms.IDENTITY,
        description="Sort by this Iceberg transform of the column, computed as Iceberg computes it: "
        "identity (default: the values themselves), bucket[N] (Iceberg's murmur3 bucket of N), truncate[W] "
        "(integers down to a multiple of W, strings and binary to W characters or bytes, decimals on the "
        "unscaled value), year, month, day, hour (since 1970-01-01, of dates and timestamps). Rows with "
        "equal transformed values keep the next key's order, e.g. [{column: ts, transform: day}, "
        "{column: id}]. Not with a zorder or hilbert strategy.",
        json_schema_extra={"pattern": r"^(identity|year|month|day|hour|(bucket|truncate)\[[1-9][0-9]*\])$"},
    )
    direction: Direction = Field("asc", description="Sort direction: asc (default) or desc.")
    nulls: Annotated[
        NullOrder, WithJsonSchema({"anyOf": [{"type": "string", "enum": ["first", "last"]},
                                             {"type": "null"}]})
    ] = Field(
        "first",
        description="Where nulls sort: first or last. Absent or null: as Iceberg does, first for asc and "
        "last for desc.",
        json_schema_extra=_no_default,
    )

    @model_validator(mode="before")
    @classmethod
    def _default_nulls(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("nulls") is None:
            data = {**data, "nulls": "last" if data.get("direction") == "desc" else "first"}
        return data

    @field_validator("transform", mode="before")
    @classmethod
    def _transform(cls, value: Any) -> str:
        return transforms.parse(transforms.IDENTITY if value is None else str(value))

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        return transforms.without_identity(handler(self))

    @property
    def label(self) -> str:
        """The key as a sort order prints it: ``id``, ``bucket[8](id)``."""
        return self.column if self.transform == transforms.IDENTITY else f"{self.transform}({self.column})"


def check_curve_keys(strategy: str, keys: Sequence[SortKey]) -> None:
    """A curve needs at least 2 keys (Hilbert at most 4) of plain column values; empty keys are checked once
    resolved."""
    transformed = [k for k in keys if k.transform != transforms.IDENTITY]
    if strategy in CURVES and transformed:
        raise ValueError(
            f"{strategy} interleaves the keys' own values, and key {transformed[0].label} is a "
            f"{transformed[0].transform} transform; fix: sort by the column itself (drop `transform`) or "
            "use strategy: linear"
        )
    if strategy in CURVES and 0 < len(keys) < 2:
        raise ValueError(
            f"{strategy} interleaves at least 2 columns, got {len(keys)} key ({keys[0].column}); "
            "add a key or use strategy: linear"
        )
    if strategy == "hilbert" and len(keys) > MAX_HILBERT_KEYS:
        raise ValueError(
            f"hilbert takes at most {MAX_HILBERT_KEYS} columns, got {len(keys)} "
            f"({', '.join(k.column for k in keys)}); drop keys or use strategy: zorder"
        )


class SortSpec(Frozen):
    """How rewritten files are sorted; empty `keys` means the Iceberg table's own sort order."""

    strategy: Strategy = Field(
        "linear",
        description="linear (default): rows are ordered by the keys, the first key most significant. zorder "
        "and hilbert: rows are ordered along a curve over the keys, so that filters on any of them skip "
        "data; each key is first scaled to its rank among sampled quantiles of its values (numbers, dates, "
        "timestamps, strings), so skewed keys spread over the curve as evenly as uniform ones. zorder "
        "interleaves the ranks' bits and needs at least 2 keys; hilbert follows the Hilbert curve (no "
        "jumps across the key space) and takes 2 to 4 keys. Directions do not apply to a curve. "
        "`lakesort advise` predicts which strategy and keys serve the probes best.",
    )
    keys: tuple[SortKey, ...] = Field(
        (),
        description="The sort columns, each at most once. Absent or empty: the Iceberg table's own sort "
        "order (identity transforms only).",
    )

    @model_validator(mode="after")
    def _valid(self) -> SortSpec:
        seen: set[tuple[str, str]] = set()
        for key in self.keys:
            if (key.column, key.transform) in seen:
                raise ValueError(f"{key.label!r} appears twice in keys")
            seen.add((key.column, key.transform))
        check_curve_keys(self.strategy, self.keys)
        return self

    @property
    def is_curve(self) -> bool:
        """True for zorder and hilbert: rows follow a curve over the keys, no key is ordered."""
        return self.strategy in CURVES


class VerifySpec(Frozen):
    """What the verify step checks in the staged files; null fields are derived by `TableSpec`.

    Row group sizes are the compressed bytes in the footer.
    """

    column_index_columns: Annotated[
        Literal["all"] | tuple[str, ...],
        PlainValidator(_columns_or_all),
        # Dumped as it reads back: pydantic's own serializer of this union warned on every dump of a list.
        PlainSerializer(lambda value: value if value == "all" else list(value)),
        WithJsonSchema({"anyOf": [{"const": "all"}, {"type": "array", "items": _column_schema()}]}),
    ] = Field("all", description="'all' (default), or the list of columns that must carry a column index.")
    boundary_order: dict[NonEmpty, BoundaryOrder] | None = Field(
        None,
        description="Column -> the boundary order (ASCENDING, DESCENDING or UNORDERED) every file's column "
        "index must show for it. Absent or null: derived from the sort: a linear sort's first key is ordered "
        "by its direction; a zorder or hilbert sort asserts nothing (verification reports each key's "
        "overlap depth instead).",
    )
    bloom_filter_columns: Columns | None = Field(
        None,
        description="Columns whose bloom filters every file must carry; each must be in "
        "writer.bloom_filters. Absent or null: the writer's bloom filter columns.",
    )
    min_row_group_size: SizeOrZero = Field(0, description="Smallest row group allowed. Default 0.")
    max_row_group_size: Size | None = Field(
        None,
        description="Largest row group allowed. Absent or null: 2 x writer.row_group_size (parquet-mr checks "
        "the buffered size only every so many rows, so row groups overshoot).",
    )
    min_file_size: SizeOrZero = Field(
        0,
        description="Smallest file allowed. Default 0: a partition's last file is legitimately small, and a "
        "file cannot tell it is the last one.",
    )
    max_file_size: Size | None = Field(
        None, description="Largest file allowed. Absent or null: 2 x target_file_size."
    )


class Probe(Frozen):
    """A query the owners run; `where` is parsed at load time so a typo fails the spec, not the run."""

    name: str = Field(
        description="Name of the probe in reports, unique within the spec; written like an identifier "
        "(letters, digits, _ and -, starting with a letter or _).",
        json_schema_extra={"pattern": rf"^{_IDENTIFIER.pattern}$"},
    )
    where: Annotated[str, Field(min_length=1)] = Field(
        description="The query's filter, SQL in Spark's dialect (what layout.expr.sql.parse_where accepts), "
        "e.g. l_shipdate = DATE '1995-06-17'."
    )
    columns: Columns | None = Field(
        None, description="The columns the query reads. Absent or null: all columns."
    )
    weight: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(
        1.0,
        description="How much the probe counts when `lakesort advise` ranks layouts by the bytes the probes "
        "read (e.g. how often it runs a day); greater than 0. Default 1.",
    )

    @field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        # The whole name (it names files and report anchors): `ship date`, `9bad` or `../x` are refused.
        if not _IDENTIFIER.fullmatch(value):
            raise ValueError(f"expected a name of letters, digits, _ and -, starting with a letter or _, "
                             f"got {value!r}")
        return value

    @field_validator("where")
    @classmethod
    def _parses(cls, value: str, info: ValidationInfo) -> str:
        try:
            parse_where(value)
        except UsageError as error:
            name = info.data.get("name", "?")
            # sqlglot underlines the culprit with terminal escapes over several lines; one plain line
            # reads better in a log and keeps one error per line.
            detail = " ".join(_ANSI.sub("", str(error)).split())
            raise ValueError(f"probe {name!r}: {detail}") from None
        return value


class UpsertKeys(Frozen):
    """The row key of an upsert table and how rows with the same key merge."""

    columns: Annotated[Columns, Field(min_length=1), WithJsonSchema(_columns_schema(min_items=1))] = Field(
        description="The columns of the row key (at least one)."
    )
    sequence: NonEmpty = Field(description="The column that orders the versions of a row.")
    merge: MergeMode = Field(
        "deduplicate",
        description="Which row of a key survives: deduplicate (default) keeps the highest sequence, "
        "first-row the lowest.",
    )


# Unreferenced files younger than this are never deleted: a writer that does not take lakesort's lease (an
# ingest job) may have written files it has not committed yet.
MIN_ORPHAN_GRACE = dt.timedelta(hours=1)


class Retention(Frozen):
    """How much history the nightly maintenance keeps (`lakesort expire`): snapshots and the files under
    the table location that nothing retained references."""

    # Defaults as written in a spec (validated into timedeltas), so the JSON schema shows "3d".
    max_age: Duration = Field(
        "3d",
        validate_default=True,
        description="Snapshots older than this are expired, except the newest min_snapshots of every branch "
        "and the heads of every branch and tag. A duration: 36h, 3d, 2w. Default 3d.",
    )
    min_snapshots: Annotated[int, Field(ge=1)] = Field(
        5,
        description="The newest snapshots of every branch (the main one included) always kept, whatever "
        "their age. At least 1. Default 5.",
    )
    orphan_grace: Duration = Field(
        "3d",
        validate_default=True,
        description="Files under the table location that no snapshot ever referenced (a crashed writer's "
        "leftovers) are deleted only once older than this, by modification time: a writer may have written "
        "files it has not committed yet. At least 1h. Default 3d.",
    )

    @field_validator("orphan_grace")
    @classmethod
    def _grace(cls, value: dt.timedelta) -> dt.timedelta:
        if value < MIN_ORPHAN_GRACE:
            raise ValueError(f"orphan_grace must be at least 1h (a writer may not have committed its files "
                             f"yet), got {format_duration_short(value)}")
        return value


class CommitSpec(Frozen):
    """How a run commits its groups: in parts, each its own Iceberg `replace` snapshot (Iceberg's
    `partial-progress.enabled` / `partial-progress.max-commits`), so that a conflict, a failure or a kill
    late in a long run loses at most one part's work; the parts already committed stay."""

    max_part_bytes: Size = Field(
        10 * GiB,
        description="Most input bytes one commit (part) of a run replaces; a larger group is a part of its "
        "own. Default 10GiB.",
    )
    max_part_groups: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description="Most rewrite groups one commit (part) of a run replaces. Absent or null: no bound by "
        "count.",
    )


class TableSpec(Frozen):
    """The spec of one table; build with `load_spec` or `parse_spec` so errors name the file.

    `spec_hash` fingerprints what changes the bytes written (sort, sizes that shape files, writer,
    keys), so a planner can tell whether a partition was compacted under the same spec. Owner,
    probes, catalog, table name, verification bounds, retention and the planning thresholds
    (`small_file_size`, `min_small_files`, the delete thresholds) do not enter it: changing them must not make
    every partition look stale.
    """

    table: str = Field(
        description="Iceberg identifier namespace.name (the namespace may have several levels).",
        json_schema_extra={"pattern": rf"^{_TABLE.pattern}$"},
    )
    catalog: str | None = Field(
        None,
        description="Catalog name in pyiceberg's configuration. Absent or null: pyiceberg's default catalog.",
    )
    owner: Owner = Field(description="The owning team, named in reports and alerts.")
    # Absent and empty mean the same (the table's own order), so both hash alike.
    sort: SortSpec = Field(
        SortSpec(),
        description="How rewritten files are sorted. Default: linear, in the Iceberg table's own sort order.",
    )
    target_file_size: Size = Field(
        128 * MiB,
        description="Size the rewrite aims for per output file. Absent: the table's "
        "write.target-file-size-bytes, else 128MiB.",
    )
    small_file_size: Size | None = Field(
        None,
        description="Files below this size count as small; at most target_file_size. Absent or null: 0.75 x "
        "target_file_size (Iceberg's own min-file-size-bytes ratio).",
    )
    min_small_files: Annotated[int, Field(ge=2)] = Field(
        2,
        description="A partition with at least this many small files needs a rewrite. At least 2 (the "
        "default): one small file is just a partition's last file, and rewriting it alone would give a small "
        "file again, every night.",
    )
    max_sorted_runs: Annotated[int, Field(ge=1)] = Field(
        4,
        description="Most sorted runs a partition may hold (linear, unkeyed tables). A nightly rewrite sorts "
        "only the new files into a run of their own, merged with the smallest runs once the partition holds "
        "this many (so it never holds more); a reader of a key reads at most this many files of a "
        "partition. 1: every rewrite merges the partition into one run. Default 4.",
    )
    full_compaction_every: Duration | None = Field(
        None,
        description="A partition holding several sorted runs is merged into one once the oldest run written "
        "since its last full merge is this old (e.g. 7d: weekly), so readers of old data read one run. "
        "Absent or null: runs are merged only by size and max_sorted_runs (and `lakesort compact --full`).",
    )
    delete_file_threshold: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description="Merge-on-read tables: a data file to which at least this many delete files apply is "
        "rewritten with its deletes applied. Absent or null: no bound by count (Iceberg's rewrite_data_files "
        "default, delete-file-threshold).",
    )
    delete_ratio_threshold: Annotated[float, Field(gt=0, le=1)] = Field(
        0.3,
        description="Merge-on-read tables: a data file whose deleted rows are at least this share of its "
        "rows is rewritten with its deletes applied. Rows known deleted are those of the position delete "
        "files that reference that file alone (Iceberg's measure too). Default 0.3 (Iceberg's "
        "delete-ratio-threshold).",
    )
    max_group_size: Size = Field(
        1 * GiB,
        description="Most input bytes one rewrite group (one Spark task set) reads; at least "
        "target_file_size. Default 1GiB.",
    )
    writer: WriterSpec = Field(
        WriterSpec(), description="Parquet settings the Spark job passes to parquet-mr."
    )
    verify: VerifySpec = Field(
        VerifySpec(), description="What the verify step checks in the staged files before they are committed."
    )
    probes: tuple[Probe, ...] = Field(
        (),
        description="The queries owners run, measured before and after each rewrite: how many files, row "
        "groups, pages and rows a reader skips. Default: none.",
    )
    keys: UpsertKeys | None = Field(
        None, description="Upsert tables only: the row key and how rows with the same key merge."
    )
    commit: CommitSpec = Field(
        CommitSpec(),
        description="How a run commits: in parts of at most max_part_bytes of input (default 10GiB) and "
        "max_part_groups groups, each its own snapshot.",
    )
    retention: Retention = Field(
        Retention(),
        description="How much history the nightly maintenance keeps: snapshots by age and count, and how old "
        "an unreferenced file must be before it is deleted. Default: max_age 3d, min_snapshots 5, "
        "orphan_grace 3d.",
    )

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
            raise ValueError(f"max_group_size ({self.max_group_size}) "
                             f"must be at least target_file_size ({target})")
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
                raise ValueError(f"verify.{low} ({getattr(verify, low)}) "
                                 f"exceeds verify.{high} ({derived[high]})")
        # Frozen models: derived defaults are filled in once, here, so that everything downstream
        # (and the hash) sees one normalized value.
        object.__setattr__(self, "small_file_size", small)
        filled = verify.model_copy(update=derived)
        # model_copy counts the derived values as set: keep what the file set, so a spec resolved against its
        # table (`layout.spec.table_properties`) derives them again from the table's sizes.
        object.__setattr__(filled, "__pydantic_fields_set__", set(verify.model_fields_set))
        object.__setattr__(self, "verify", filled)
        return self

    @property
    def source(self) -> str:
        """The file the spec was read from, for messages."""
        return self._source

    @property
    def spec_hash(self) -> str:
        """16 hex digits of sha256 over the canonical JSON of what changes the bytes written."""
        layout = self.model_dump(mode="json", include=set(_HASH_FIELDS))
        # Added after hashes were first recorded: left out while unset, so those hashes stay the same; and
        # left out at parquet-mr's default, which an unset size writes too (a table property of 1 MiB, filled
        # in where the spec is silent, made every earlier run of the table look like another layout's).
        if layout["writer"].get("dictionary_page_size") in (None, DEFAULT_DICTIONARY_PAGE_SIZE):
            layout["writer"].pop("dictionary_page_size", None)
        canonical = json.dumps({"v": _HASH_VERSION, **layout}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]
