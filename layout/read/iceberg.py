"""Iceberg sources for planning: a snapshot's data files as its manifests record them, pruned by their bounds.

`snapshot_scan` reads every data manifest of a snapshot once (pyiceberg's reader, in its thread pool) and
keeps two things: every live data file with what its manifest entry says (path, size, record count,
per-field column sizes), and which of them the predicate may match. The files pyiceberg's own
`plan_files` would keep are exactly these: its partition and inclusive metrics evaluators (partition
values, per-file lower/upper bounds, null and NaN counts) are used unchanged. Reading the manifests once
instead of asking pyiceberg to plan twice (once for every file, once for the predicate) gives the table
totals at the cost of one pyiceberg plan; the price is that manifests pyiceberg would skip on their
partition summaries are read too, since their files count in the totals.

A merge-on-read snapshot also has live delete manifests (position and equality deletes): they are read in
the same pass, and each data file gets the delete files that apply to it by Iceberg's rules
(`layout.read.deletes`: partition, sequence numbers, `file_path` bounds), which a reader must open and merge
(`SnapshotDeletes`). A snapshot without delete manifests costs nothing more: no partition keys, no index.

Our predicate is translated leaf by leaf; a leaf pyiceberg cannot bind (a type it does not compare, a
literal of another scale) becomes AlwaysTrue, which is sound because the tree has no NOT left in it.
A snapshot never changes, so what is read of it is cached per manifest list: the files (with their
deletes) once, and which of them a predicate keeps per (schema, predicate).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
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
from layout.read.deletes import DataRef, DeleteFile, DeleteIndex, delete_file_of

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot
    from pyiceberg.typedef import Record

log = logging.getLogger(__name__)

_CACHE_FS = "iceberg-snapshot"
# Estimated bytes a cached IcebergFile keeps alive, and each of its column sizes (Python objects); a
# DeleteFile, and each data file's reference to one.
_FILE_BYTES, _SIZE_BYTES = 400, 120
_DELETE_BYTES, _APPLIES_BYTES = 600, 40


@dataclass(frozen=True, slots=True)
class IcebergFile:
    """A data file as the manifest records it."""

    path: str
    size: int
    record_count: int
    delete_files: int  # delete files that apply to it: a reader opens and merges them (`SnapshotDeletes`)
    # Compressed bytes per field id, summed over the row groups (Iceberg's `column_sizes`); None when
    # the manifest has none. Writers leave out columns whose metrics mode is `none`.
    column_sizes: Mapping[int, int] | None = field(default=None, compare=False, repr=False)


def snapshot_of(table: Table, snapshot_id: int | None = None) -> Snapshot | None:
    """The snapshot (default: the current one; None for a table without any);
    an unknown id is a UsageError."""
    snapshot = table.current_snapshot() if snapshot_id is None else table.snapshot_by_id(snapshot_id)
    if snapshot is None and snapshot_id is not None:
        known = ", ".join(str(s.snapshot_id) for s in table.snapshots()[-5:]) or "none"
        raise UsageError(f"{'.'.join(table.name())}: no snapshot {snapshot_id} (latest: {known}); "
                         "list them with `lakesort inspect` or pyiceberg's table.snapshots()")
    return snapshot


def snapshot_files(table: Table, expr: Expr | None, cache: MetadataCache | None,
                   snapshot_id: int | None = None) -> list[IcebergFile]:
    """Data files of a snapshot (default: the current one) that might hold rows matching `expr` (all
    files for None): the files pyiceberg's `plan_files` keeps (`snapshot_scan`), without its planning,
    which raises on equality deletes."""
    snapshot = snapshot_of(table, snapshot_id)
    if snapshot is None:
        return []
    scan = snapshot_scan(table, expr, cache, snapshot)
    return [scan.files[i] for i in scan.kept]


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


@dataclass(frozen=True, slots=True)
class DeleteRead:
    """The distinct delete files a reader opens for some data files, and their bytes."""

    files: int = 0
    bytes: int = 0


class SnapshotDeletes:
    """The delete files of a snapshot that apply to at least one of its live data files (`files`), and for
    each data file (by its index in `SnapshotScan.files`) the indexes into `files` of those that apply.

    A delete file that applies to several data files is opened once by a reader planning them together
    (Iceberg's readers index a scan's deletes once), so what a set of data files costs is the distinct
    delete files over them (`read`). Delete files that apply to no live data file (left dangling by a
    rewrite) are not in `files`: no reader opens them.
    """

    __slots__ = ("_all", "applying", "files")

    def __init__(self, files: tuple[DeleteFile, ...], applying: tuple[tuple[int, ...], ...]) -> None:
        self.files, self.applying = files, applying
        self._all: DeleteRead | None = None

    @classmethod
    def index(cls, deletes: Iterable[DeleteFile], data: Sequence[DataRef]) -> SnapshotDeletes:
        """Which of `deletes` apply to each of `data` (`layout.read.deletes.DeleteIndex`, Iceberg's rules)."""
        index = DeleteIndex(deletes)
        position: dict[str, int] = {}
        files: list[DeleteFile] = []
        applying = []
        for ref in data:
            found = []
            for d in index.for_file(ref):
                at = position.get(d.path)
                if at is None:
                    at = position[d.path] = len(files)
                    files.append(d)
                found.append(at)
            applying.append(tuple(found))
        return cls(tuple(files), tuple(applying))

    def read(self, data_indexes: Iterable[int]) -> DeleteRead:
        """The distinct delete files that apply to the data files `data_indexes`, and their bytes."""
        seen: set[int] = set()
        for i in data_indexes:
            seen.update(self.applying[i])
        return DeleteRead(len(seen), sum(self.files[d].size for d in seen))

    @property
    def total(self) -> DeleteRead:
        """What a scan of every live data file opens: each delete file in `files` once."""
        if self._all is None:
            self._all = DeleteRead(len(self.files), sum(d.size for d in self.files))
        return self._all


class SnapshotScan:
    """Every live data file of a snapshot (`files`, in manifest order), those a predicate keeps, and the
    delete files that apply to them (`deletes`; None: the snapshot has no live delete files)."""

    __slots__ = ("_kept", "deletes", "files")

    def __init__(self, files: tuple[IcebergFile, ...], kept: _Kept,
                 deletes: SnapshotDeletes | None = None) -> None:
        self.files, self._kept, self.deletes = files, kept, deletes

    def delete_read(self, data_indexes: Iterable[int]) -> DeleteRead:
        """The distinct delete files (and bytes) a reader opens for the data files `data_indexes`."""
        return DeleteRead() if self.deletes is None else self.deletes.read(data_indexes)

    @property
    def delete_total(self) -> DeleteRead:
        """The distinct delete files (and bytes) a scan of every live data file opens."""
        return DeleteRead() if self.deletes is None else self.deletes.total

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


def snapshot_scan(table: Table, expr: Expr | None, cache: MetadataCache | None,
                  snapshot: Snapshot) -> SnapshotScan:
    """The snapshot's data files, and those that might hold rows matching `expr` (None: all of them), with
    the delete files that apply to each."""
    iceberg_expr = to_iceberg(table, expr) if expr is not None else AlwaysTrue()
    if cache is None:
        files, kept, deletes = _read(table, snapshot, iceberg_expr)
        return SnapshotScan(files, _Kept(kept), deletes)
    key = FileKey(snapshot.manifest_list, snapshot.snapshot_id)
    # The schema takes part: a later schema change (a rename) rebinds the predicate to other field ids.
    item = ("kept", table.metadata.current_schema_id, repr(iceberg_expr))
    read, kept_item = cache.get(_CACHE_FS, key, "files"), cache.get(_CACHE_FS, key, item)
    if read is None or kept_item is None:
        # Both from this one read: a snapshot's manifests list the same files in the same order every
        # time, so the indexes of other predicates' cached items stay valid when "files" is replaced.
        files, kept, deletes = _read(table, snapshot, iceberg_expr)
        kept_item = _Kept(kept)
        size = 1024 + sum(_FILE_BYTES + _SIZE_BYTES * len(f.column_sizes or ()) for f in files)
        if deletes is not None:
            size += _DELETE_BYTES * len(deletes.files) + _APPLIES_BYTES * sum(map(len, deletes.applying))
        cache.put(_CACHE_FS, key, "files", (files, deletes), size)
        cache.put(_CACHE_FS, key, item, kept_item, 1024 + 16 * len(kept))
    else:
        files, deletes = read
    return SnapshotScan(files, kept_item, deletes)


def _read(table: Table, snapshot: Snapshot, iceberg_expr: Any
          ) -> tuple[tuple[IcebergFile, ...], tuple[int, ...], SnapshotDeletes | None]:
    """One pass over the snapshot's manifests: every live data file, the indexes of those kept, and, when
    delete manifests are live, the delete files that apply to each data file."""
    metadata, io = table.metadata, table.io
    manifests = snapshot.manifests(io)
    data_manifests = [m for m in manifests if m.content == ManifestContent.DATA]
    # A delete manifest with only deleted entries (a rewrite removed its files) holds no live delete file.
    delete_manifests = [m for m in manifests if m.content == ManifestContent.DELETES
                        and (m.has_added_files() or m.has_existing_files())]
    # pyiceberg's own evaluators for the predicate: what its plan_files keeps, we keep. They are methods
    # of its planner (pyiceberg is pinned to one version; the Iceberg soundness property test compares
    # the kept files with its plan_files and would catch a change).
    judge = ManifestGroupPlanner(metadata, io, row_filter=iceberg_expr, case_sensitive=True)
    partition_evaluators: dict[int, Any] = {}
    metrics = judge._build_metrics_evaluator()
    files: list[IcebergFile] = []
    kept: list[int] = []
    # Only a snapshot with live deletes pays for the data files' references
    # (partition keys, sequence numbers).
    refs: list[DataRef] | None = [] if delete_manifests else None
    # Manifests are read in pyiceberg's thread pool, as its planning does, and judged here in order.
    reads = iter(ExecutorFactory.get_or_create().map(
        lambda m: m.fetch_manifest_entry(io, discard_deleted=True), [*data_manifests, *delete_manifests]))
    for manifest in data_manifests:
        partition = partition_evaluators.get(manifest.partition_spec_id)
        if partition is None:
            partition = judge._build_partition_evaluator(manifest.partition_spec_id)
            partition_evaluators[manifest.partition_spec_id] = partition
        for entry in next(reads):
            data = entry.data_file
            if data.record_count == 0:
                continue  # pyiceberg's planning leaves empty files out (its include_empty_files=false)
            if partition(data) and metrics(data):
                kept.append(len(files))
            files.append(IcebergFile(data.file_path, data.file_size_in_bytes, data.record_count, 0,
                                     data.column_sizes or None))
            if refs is not None:
                refs.append(DataRef(data.file_path, manifest.partition_spec_id,
                                    _partition_key(data.partition), entry.sequence_number or 0))
    if refs is None:
        return tuple(files), tuple(kept), None
    specs = metadata.specs()
    found = []
    for manifest in delete_manifests:
        spec = specs[manifest.partition_spec_id]
        for entry in next(reads):
            d = entry.data_file
            found.append(delete_file_of(d, sequence_number=entry.sequence_number or 0,
                                        partition=_partition_key(d.partition), spec=spec))
    deletes = SnapshotDeletes.index(found, refs)
    files = [replace(f, delete_files=len(applying)) if applying else f
             for f, applying in zip(files, deletes.applying, strict=True)]
    return tuple(files), tuple(kept), deletes


def _partition_key(partition: Record) -> tuple[Any, ...]:
    """A partition tuple's values, alike for data and delete files of one spec (both decoded by its type)."""
    return tuple(partition[i] for i in range(len(partition)))


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
        return (self._leaf(self.ice.StartsWith, column, prefix) if isinstance(prefix, str)
                else self.ice.AlwaysTrue())

    def visit_not_starts_with(self, column: str, prefix: str | bytes) -> Any:
        # Iceberg's NotStartsWith keeps nulls, ours drops them: only wider, so still sound.
        if isinstance(prefix, str):
            return self._leaf(self.ice.NotStartsWith, column, prefix)
        return self.ice.AlwaysTrue()

    def visit_like(self, column: str, pattern: str) -> Any:
        return self.ice.AlwaysTrue()

    def visit_not_like(self, column: str, pattern: str) -> Any:
        return self.ice.AlwaysTrue()
