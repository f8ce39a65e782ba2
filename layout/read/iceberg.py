"""Iceberg sources for planning: a snapshot's data files as its manifests record them, pruned by their bounds.

`snapshot_scan` reads every data manifest of a snapshot once (pyiceberg's reader, in its thread pool) and
keeps two things: every live data file with what its manifest entry says (path, size, record count,
per-field column sizes), and which of them the predicate may match. The files pyiceberg's own
`plan_files` would keep are exactly these: its partition and inclusive metrics evaluators (partition
values, per-file lower/upper bounds, null and NaN counts) are used unchanged. Reading the manifests once
instead of asking pyiceberg to plan twice (once for every file, once for the predicate) gives the table
totals at the cost of one pyiceberg plan; the price is that manifests pyiceberg would skip on their
partition summaries are read too, since their files count in the totals. A snapshot with live delete
manifests is planned by pyiceberg in full, only to tell whether a delete file applies (then refused).

Our predicate is translated leaf by leaf; a leaf pyiceberg cannot bind (a type it does not compare, a
literal of another scale) becomes AlwaysTrue, which is sound because the tree has no NOT left in it.
A snapshot never changes, so what is read of it is cached per manifest list: the files once, and which
of them a predicate keeps per (schema, predicate).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import pyiceberg.expressions as ice
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.expressions.visitors import bind
from pyiceberg.io.pyarrow import parquet_path_to_id_mapping, schema_to_pyarrow
from pyiceberg.manifest import ManifestContent
from pyiceberg.table import ManifestGroupPlanner
from pyiceberg.types import DecimalType
from pyiceberg.utils.concurrent import ExecutorFactory

from layout.errors import UsageError
from layout.expr.bind import Kind, schema_kinds
from layout.expr.predicate import Expr, PredicateVisitor, rewrite_not, visit
from layout.read.cache import FileKey, MetadataCache

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

log = logging.getLogger(__name__)

_CACHE_FS = "iceberg-snapshot"
# Estimated bytes a cached IcebergFile keeps alive, and each of its column sizes (Python objects).
_FILE_BYTES, _SIZE_BYTES = 400, 120


@dataclass(frozen=True, slots=True)
class IcebergFile:
    """A data file as the manifest records it."""

    path: str
    size: int
    record_count: int
    delete_files: int  # delete files that apply to it (reads must merge them; we refuse for now)
    # Compressed bytes per field id, summed over the row groups (Iceberg's `column_sizes`); None when
    # the manifest has none. Writers leave out columns whose metrics mode is `none`.
    column_sizes: Mapping[int, int] | None = field(default=None, compare=False, repr=False)


def snapshot_of(table: Table, snapshot_id: int | None = None) -> Snapshot | None:
    """The snapshot (default: the current one; None for a table without any); an unknown id is a UsageError."""
    snapshot = table.current_snapshot() if snapshot_id is None else table.snapshot_by_id(snapshot_id)
    if snapshot is None and snapshot_id is not None:
        known = ", ".join(str(s.snapshot_id) for s in table.snapshots()[-5:]) or "none"
        raise UsageError(f"{'.'.join(table.name())}: no snapshot {snapshot_id} (latest: {known}); "
                         "list them with `lakesort inspect` or pyiceberg's table.snapshots()")
    return snapshot


def snapshot_files(table: Table, expr: Expr | None, cache: MetadataCache | None,
                   snapshot_id: int | None = None) -> list[IcebergFile]:
    """Data files of a snapshot (default: the current one) that might hold rows matching `expr` (all
    files for None), by pyiceberg's `plan_files`."""
    snapshot = snapshot_of(table, snapshot_id)
    if snapshot is None:
        return []
    iceberg_expr = to_iceberg(table, expr) if expr is not None else None

    def load() -> tuple[list[IcebergFile], int]:

        scan = table.scan(row_filter=iceberg_expr if iceberg_expr is not None else AlwaysTrue(),
                          snapshot_id=snapshot.snapshot_id)
        files = [
            IcebergFile(t.file.file_path, t.file.file_size_in_bytes, t.file.record_count, len(t.delete_files))
            for t in scan.plan_files()
        ]
        return files, 200 * len(files) + 1024

    if cache is None:
        return load()[0]
    key = FileKey(snapshot.manifest_list, snapshot.snapshot_id)
    return cache.get_or_load(_CACHE_FS, key, ("files", repr(iceberg_expr)), load)


def iceberg_kinds(table: Table) -> dict[str, Kind]:
    """Column name -> predicate `Kind` by the table's schema (struct fields as dotted paths), without
    opening a data file. The planner checks them against the footer of the first file it opens."""
    return schema_kinds(schema_to_pyarrow(table.schema(), include_field_ids=False))


def field_ids(table: Table, names: Sequence[str]) -> tuple[int | None, ...]:
    """The field id of each Parquet column (dotted path, as pyiceberg maps them); None when unknown."""
    mapping = parquet_path_to_id_mapping(table.schema())
    return tuple(mapping.get(name) for name in names)


@dataclass(frozen=True, slots=True)
class Unkept:
    """What the manifests say of the files a predicate does not keep, for some columns (field ids)."""

    files: int  # every file not kept, the unsized ones too
    rows: int  # their record counts
    bytes: int  # the columns' compressed bytes, over the files not in `unsized`
    unsized: tuple[int, ...]  # indexes (into SnapshotScan.files) of files without a size for a column


class _Kept:
    """Which files a predicate keeps (indexes, ascending), and what the others amount to per column set."""

    __slots__ = ("_unkept", "indexes")

    def __init__(self, indexes: tuple[int, ...]) -> None:
        self.indexes = indexes
        self._unkept: dict[tuple[int | None, ...], Unkept] = {}


class SnapshotScan:
    """Every live data file of a snapshot (`files`, in manifest order) and those a predicate keeps."""

    __slots__ = ("_kept", "files")

    def __init__(self, files: tuple[IcebergFile, ...], kept: _Kept) -> None:
        self.files, self._kept = files, kept

    @property
    def kept(self) -> tuple[int, ...]:
        """Indexes into `files` of the files the manifests keep, ascending."""
        return self._kept.indexes

    def unkept(self, ids: tuple[int | None, ...]) -> Unkept:
        """Totals of the files not kept, with the bytes of the columns `ids` from their column sizes.

        A file whose entry has no size for one of the columns (no column sizes, a metrics mode of `none`,
        a column added after it was written, a name without a field id) is listed in `unsized` instead:
        only its footer can tell. Computed once per column set and kept with the cached scan.
        """
        memo = self._kept._unkept
        try:
            return memo[ids]
        except KeyError:
            pass
        kept = set(self._kept.indexes)
        unkept = [(i, f) for i, f in enumerate(self.files) if i not in kept]
        rows = sum(f.record_count for _, f in unkept)
        if not ids or None in ids:  # no columns: no bytes; a column without a field id: no manifest sizes it
            value = memo[ids] = Unkept(len(unkept), rows, 0, tuple(i for i, _ in unkept) if ids else ())
            return value
        sizes_of = itemgetter(*ids)  # one id: the size itself, several: a tuple of them
        nbytes = 0
        unsized = []
        for i, f in unkept:
            if f.record_count < 0:  # an old import's "unknown" (pyiceberg keeps such files): the footer knows
                unsized.append(i)
                continue
            try:
                got = sizes_of(f.column_sizes)  # type: ignore[arg-type]  # None: TypeError, below
            except (KeyError, TypeError):
                unsized.append(i)
                continue
            nbytes += got if len(ids) == 1 else sum(got)
        files = len(unkept)
        value = memo[ids] = Unkept(files, rows, nbytes, tuple(unsized))
        return value


def snapshot_scan(table: Table, expr: Expr | None, cache: MetadataCache | None, snapshot: Snapshot) -> SnapshotScan:
    """The snapshot's data files, and those that might hold rows matching `expr` (None: all of them).

    Refuses (UsageError) a snapshot whose data files have delete files: the reader does not merge them.
    """
    iceberg_expr = to_iceberg(table, expr) if expr is not None else AlwaysTrue()
    if cache is None:
        files, kept = _read(table, snapshot, iceberg_expr)
        return SnapshotScan(files, _Kept(kept))
    key = FileKey(snapshot.manifest_list, snapshot.snapshot_id)
    # The schema takes part: a later schema change (a rename) rebinds the predicate to other field ids.
    item = ("kept", table.metadata.current_schema_id, repr(iceberg_expr))
    files, kept_item = cache.get(_CACHE_FS, key, "files"), cache.get(_CACHE_FS, key, item)
    if files is None or kept_item is None:
        # Both from this one read: a snapshot's manifests list the same files in the same order every
        # time, so the indexes of other predicates' cached items stay valid when "files" is replaced.
        files, kept = _read(table, snapshot, iceberg_expr)
        kept_item = _Kept(kept)
        cache.put(_CACHE_FS, key, "files", files,
                  1024 + sum(_FILE_BYTES + _SIZE_BYTES * len(f.column_sizes or ()) for f in files))
        cache.put(_CACHE_FS, key, item, kept_item, 1024 + 16 * len(kept))
    return SnapshotScan(files, kept_item)


def _read(table: Table, snapshot: Snapshot, iceberg_expr: Any) -> tuple[tuple[IcebergFile, ...], tuple[int, ...]]:
    """One pass over the snapshot's data manifests: every live data file, and the indexes of those kept."""
    metadata, io = table.metadata, table.io
    manifests = snapshot.manifests(io)
    if any(m.content != ManifestContent.DATA and (m.has_added_files() or m.has_existing_files()) for m in manifests):
        _refuse_deletes(table, snapshot)
    data_manifests = [m for m in manifests if m.content == ManifestContent.DATA]
    # pyiceberg's own evaluators for the predicate: what its plan_files keeps, we keep. They are methods
    # of its planner (pyiceberg is pinned to one version; the Iceberg soundness property test compares
    # the kept files with its plan_files and would catch a change).
    judge = ManifestGroupPlanner(metadata, io, row_filter=iceberg_expr, case_sensitive=True)
    partition_evaluators: dict[int, Any] = {}
    metrics = judge._build_metrics_evaluator()
    files: list[IcebergFile] = []
    kept: list[int] = []
    # Manifests are read in pyiceberg's thread pool, as its planning does, and judged here in order.
    reads = ExecutorFactory.get_or_create().map(lambda m: m.fetch_manifest_entry(io, discard_deleted=True),
                                                data_manifests)
    for manifest, entries in zip(data_manifests, reads, strict=True):
        partition = partition_evaluators.get(manifest.partition_spec_id)
        if partition is None:
            partition = judge._build_partition_evaluator(manifest.partition_spec_id)
            partition_evaluators[manifest.partition_spec_id] = partition
        for entry in entries:
            data = entry.data_file
            if data.record_count == 0:
                continue  # pyiceberg's planning leaves empty files out (its include_empty_files=false)
            if partition(data) and metrics(data):
                kept.append(len(files))
            files.append(IcebergFile(data.file_path, data.file_size_in_bytes, data.record_count, 0,
                                     data.column_sizes or None))
    return tuple(files), tuple(kept)


def _refuse_deletes(table: Table, snapshot: Snapshot) -> None:
    """Delete files are live: ask pyiceberg whether any applies to a data file (only such tables pay for it)."""
    tasks = table.scan(snapshot_id=snapshot.snapshot_id).plan_files()
    if any(t.delete_files for t in tasks):
        raise UsageError(f"{'.'.join(table.name())}: the table has delete files, which lakesort's reader does "
                         "not apply yet; compact it first or read it with an engine that merges deletes")


def to_iceberg(table: Table, expr: Expr) -> Any:
    """Our predicate as a pyiceberg expression, leaves pyiceberg cannot bind widened to AlwaysTrue."""
    return visit(rewrite_not(expr), _ToIceberg(table.schema()))


class _ToIceberg(PredicateVisitor[Any]):
    def __init__(self, schema: Any) -> None:

        self.ice = ice
        self.schema = schema

    def _leaf(self, make: Any, *args: Any) -> Any:

        try:
            if not self._exact(*args):
                return self.ice.AlwaysTrue()
            leaf = make(*args)
            bind(self.schema, leaf, case_sensitive=True)
            return leaf
        except Exception as exc:  # noqa: BLE001 - pyiceberg raises many types; any failure means "keep"
            log.debug("file pruning ignores %s: %s", args, exc)
            return self.ice.AlwaysTrue()

    def _exact(self, column: str, *literals: Any) -> bool:
        """pyiceberg rounds a decimal literal to the column's scale when binding (1.004 < x becomes
        1.00 < x on DECIMAL(p, 2)), which would prune wrongly: such leaves are not handed to it."""


        try:
            field_type = self.schema.find_field(column).field_type
        except ValueError:
            return True  # unknown here: binding fails below and the leaf is kept
        if not isinstance(field_type, DecimalType):
            return True
        values = [v for lit in literals for v in (lit if isinstance(lit, (set, frozenset)) else (lit,))]
        step = Decimal(1).scaleb(-field_type.scale)
        return all(not isinstance(v, Decimal) or v == v.quantize(step) for v in values)

    def visit_true(self) -> Any:
        return self.ice.AlwaysTrue()

    def visit_false(self) -> Any:
        return self.ice.AlwaysFalse()

    def visit_not(self, child: Any) -> Any:
        raise UsageError("internal: NOT should have been pushed into the leaves")

    def visit_and(self, left: Any, right: Any) -> Any:
        return self.ice.And(left, right)

    def visit_or(self, left: Any, right: Any) -> Any:
        return self.ice.Or(left, right)

    def visit_eq(self, column: str, literal: Any) -> Any:
        return self._leaf(self.ice.EqualTo, column, literal)

    def visit_not_eq(self, column: str, literal: Any) -> Any:
        return self._leaf(self.ice.NotEqualTo, column, literal)

    def visit_lt(self, column: str, literal: Any) -> Any:
        return self._leaf(self.ice.LessThan, column, literal)

    def visit_lt_eq(self, column: str, literal: Any) -> Any:
        return self._leaf(self.ice.LessThanOrEqual, column, literal)

    def visit_gt(self, column: str, literal: Any) -> Any:
        return self._leaf(self.ice.GreaterThan, column, literal)

    def visit_gt_eq(self, column: str, literal: Any) -> Any:
        return self._leaf(self.ice.GreaterThanOrEqual, column, literal)

    def visit_in(self, column: str, literals: frozenset[Any]) -> Any:
        return self._leaf(self.ice.In, column, set(literals))

    def visit_not_in(self, column: str, literals: frozenset[Any]) -> Any:
        return self._leaf(self.ice.NotIn, column, set(literals))

    def visit_is_null(self, column: str) -> Any:
        return self._leaf(self.ice.IsNull, column)

    def visit_not_null(self, column: str) -> Any:
        return self._leaf(self.ice.NotNull, column)

    def visit_is_nan(self, column: str) -> Any:
        return self._leaf(self.ice.IsNaN, column)

    def visit_not_nan(self, column: str) -> Any:
        return self._leaf(self.ice.NotNaN, column)

    def visit_starts_with(self, column: str, prefix: str | bytes) -> Any:
        return self._leaf(self.ice.StartsWith, column, prefix) if isinstance(prefix, str) else self.ice.AlwaysTrue()

    def visit_not_starts_with(self, column: str, prefix: str | bytes) -> Any:
        # Iceberg's NotStartsWith keeps nulls, ours drops them: only wider, so still sound.
        if isinstance(prefix, str):
            return self._leaf(self.ice.NotStartsWith, column, prefix)
        return self.ice.AlwaysTrue()

    def visit_like(self, column: str, pattern: str) -> Any:
        return self.ice.AlwaysTrue()

    def visit_not_like(self, column: str, pattern: str) -> Any:
        return self.ice.AlwaysTrue()
