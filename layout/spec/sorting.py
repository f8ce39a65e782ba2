"""Sort keys and boundary orders: a spec's sort as it applies to one Iceberg table."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pyiceberg.table.sorting import NullOrder as IcebergNullOrder
from pyiceberg.table.sorting import SortDirection
from pyiceberg.transforms import IdentityTransform

from layout.errors import ConfigError
from layout.spec.models import BoundaryOrder, SortKey, TableSpec, check_curve_keys

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["intended_boundary_orders", "resolve_sort_keys", "written_sort_order_id"]


def resolve_sort_keys(spec: TableSpec, table: Table) -> tuple[SortKey, ...]:
    """The spec's sort keys, else the table's identity sort order; checked against the table schema."""
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
        for field in order.fields:
            if not isinstance(field.transform, IdentityTransform):
                column = schema.find_column_name(field.source_id) or f"<field id {field.source_id}>"
                raise ConfigError(
                    f"{spec.source}: sort: the sort order of {name} sorts by {field.transform}({column}); "
                    "lakesort sorts by plain column values only (identity transforms), so set sort.keys "
                    "in the spec"
                )
        keys = _table_keys(table)
        origin = f"the sort order of {name}"
        try:
            check_curve_keys(strategy, keys)
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


def _table_keys(table: Table) -> tuple[SortKey, ...]:
    """The table's sort order as sort keys (identity transforms are the caller's to check)."""
    schema = table.schema()
    return tuple(
        SortKey(
            column=schema.find_column_name(field.source_id) or f"<field id {field.source_id}>",
            direction="desc" if field.direction == SortDirection.DESC else "asc",
            nulls="last" if field.null_order == IcebergNullOrder.NULLS_LAST else "first",
        )
        for field in table.sort_order().fields
    )


def written_sort_order_id(table: Table, strategy: str, keys: Sequence[Any]) -> int | None:
    """The id of the table's sort order when rows written by `strategy` over `keys` are in that order (a
    linear sort by exactly its keys (`SortKey`s or the plan's), directions and null orders, whether the spec
    named them or took them from the table), else None: a data file's sort_order_id promises readers that
    order, so it is left out otherwise."""
    order = table.sort_order()
    if order.is_unsorted or strategy != "linear":
        return None
    if any(not isinstance(field.transform, IdentityTransform) for field in order.fields):
        return None
    written = tuple((k.column, k.direction, k.nulls) for k in keys)
    table_keys = tuple((k.column, k.direction, k.nulls) for k in _table_keys(table))
    return order.order_id if written == table_keys else None


def intended_boundary_orders(spec: TableSpec, sort_keys: Sequence[SortKey]) -> dict[str, BoundaryOrder]:
    """Column -> the BoundaryOrder each rewritten file's column index should show.

    `verify.boundary_order` wins when given. Otherwise a linear sort orders pages only by its first
    key (later keys restart within each value of the first); a curve (zorder, hilbert) orders rows by
    an index over every key, so no single column's pages are ordered and nothing is asserted.
    """
    if spec.verify.boundary_order is not None:
        return dict(spec.verify.boundary_order)
    if spec.sort.is_curve or not sort_keys:
        return {}
    first = sort_keys[0]
    return {first.column: "DESCENDING" if first.direction == "desc" else "ASCENDING"}
