"""Iceberg sources for planning: the data files of a snapshot, pruned by manifest bounds through pyiceberg.

pyiceberg's own scan planning evaluates manifest partition summaries and per-file lower/upper bounds
and null counts (its inclusive metrics evaluator), so file-level pruning is delegated to it. Our
predicate is translated leaf by leaf; a leaf pyiceberg cannot bind (a type it does not compare, a
literal of another scale) becomes AlwaysTrue, which is sound because the tree has no NOT left in it.
A snapshot never changes, so its file lists are cached per (manifest list, predicate).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyiceberg.expressions as ice
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.expressions.visitors import bind
from pyiceberg.types import DecimalType

from layout.errors import UsageError
from layout.expr.predicate import Expr, PredicateVisitor, rewrite_not, visit
from layout.read.cache import FileKey, MetadataCache

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

_CACHE_FS = "iceberg-snapshot"


@dataclass(frozen=True, slots=True)
class IcebergFile:
    """A data file as the manifest records it."""

    path: str
    size: int
    record_count: int
    delete_files: int  # delete files that apply to it (reads must merge them; we refuse for now)


def snapshot_files(table: Table, expr: Expr | None, cache: MetadataCache | None,
                   snapshot_id: int | None = None) -> list[IcebergFile]:
    """Data files of a snapshot (default: the current one) that might hold rows matching `expr` (all
    files for None)."""
    snapshot = table.current_snapshot() if snapshot_id is None else table.snapshot_by_id(snapshot_id)
    if snapshot is None:
        if snapshot_id is not None:
            known = ", ".join(str(s.snapshot_id) for s in table.snapshots()[-5:]) or "none"
            raise UsageError(f"{'.'.join(table.name())}: no snapshot {snapshot_id} (latest: {known}); "
                             "list them with `lakesort inspect` or pyiceberg's table.snapshots()")
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
