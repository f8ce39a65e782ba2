"""Sort keys and boundary orders: a spec's sort as it applies to one Iceberg table."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pyiceberg.table.sorting import NullOrder as IcebergNullOrder
from pyiceberg.table.sorting import SortDirection

from layout import transforms
from layout.errors import ConfigError
from layout.spec.models import BoundaryOrder, SortKey, TableSpec, check_curve_keys

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["intended_boundary_orders", "order_column", "own_sort_keys", "resolve_sort_keys",
           "written_sort_order_id"]


def resolve_sort_keys(spec: TableSpec, table: Table) -> tuple[SortKey, ...]:
    """The spec's sort keys, else the table's sort order (`own_sort_keys`); checked against the table schema:
    each key a column of the table, each transform one Iceberg applies to its type."""
    schema = table.schema()
    name = ".".join(table.name())
    strategy, keys = spec.sort.strategy, spec.sort.keys
    origin = "sort.keys"
    if not keys:
        if table.sort_order().is_unsorted:
            raise ConfigError(
                f"{spec.source}: sort: no sort keys: the spec has no sort.keys and the Iceberg table {name} "
                "has no sort order; add sort.keys to the spec (or a sort order to the table)"
            )
        keys = own_sort_keys(table, where=f"{spec.source}: sort")
        origin = f"the sort order of {name}"
        try:
            check_curve_keys(strategy, keys)
        except ValueError as error:
            raise ConfigError(f"{spec.source}: sort: {error} (keys from {origin}); or set sort.keys in the "
                              "spec") from None
    columns = schema.column_names
    for index, key in enumerate(keys):
        if key.column not in columns:
            close = difflib.get_close_matches(key.column, columns, n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ConfigError(
                f"{spec.source}: sort.keys[{index}].column: {key.column!r} is not a column of {name}{hint}"
                + ("" if origin == "sort.keys" else f" (from {origin})")
            )
        why = transforms.unsupported(key.transform, schema.find_field(key.column).field_type)
        if why is not None:
            raise ConfigError(f"{spec.source}: sort.keys[{index}].transform: {why} ({key.column} of {name}); "
                              "fix: a transform of its type (truncate[W] or bucket[N] of any, year/month/day "
                              "of dates and timestamps, hour of timestamps) or none")
    return keys


def own_sort_keys(table: Table, *, where: str | None = None) -> tuple[SortKey, ...]:
    """The table's sort order as sort keys, transforms included. A field lakesort cannot sort by (a `void`
    transform, one of a newer Iceberg) is a `ConfigError` naming it, its place in the order and the fix."""
    schema, order = table.schema(), table.sort_order()
    name = ".".join(table.name())
    keys = []
    for index, field in enumerate(order.fields):
        column = schema.find_column_name(field.source_id) or f"<field id {field.source_id}>"
        try:
            transform = transforms.parse(str(field.transform))
        except ValueError:
            raise ConfigError(
                f"{where + ': ' if where else ''}the sort order of {name} (order id {order.order_id}), field "
                f"{index} sorts by {field.transform}({column}), a transform lakesort does not sort by (it "
                f"sorts by {transforms.KNOWN}); fix: set sort.keys in the table's spec, or the table "
                f"property lakesort.sort-keys (ALTER TABLE {name} SET TBLPROPERTIES "
                f"('lakesort.sort-keys'='{column}')), which win over the table's order"
            ) from None
        keys.append(SortKey(
            column=column, transform=transform,
            direction="desc" if field.direction == SortDirection.DESC else "asc",
            nulls="last" if field.null_order == IcebergNullOrder.NULLS_LAST else "first",
        ))
    return tuple(keys)


def written_sort_order_id(table: Table, strategy: str, keys: Sequence[Any]) -> int | None:
    """The id of the table's sort order when rows written by `strategy` over `keys` are in that order (a
    linear sort by exactly its keys (`SortKey`s or the plan's): columns, transforms, directions and null
    orders, whether the spec named them or took them from the table), else None: a data file's sort_order_id
    promises readers that order, so it is left out otherwise."""
    order = table.sort_order()
    if order.is_unsorted or strategy != "linear":
        return None
    try:
        table_keys = tuple((k.column, k.transform, k.direction, k.nulls) for k in own_sort_keys(table))
    except ConfigError:
        return None  # an order lakesort cannot sort by: its files follow another
    written = tuple((k.column, getattr(k, "transform", transforms.IDENTITY), k.direction, k.nulls)
                    for k in keys)
    return order.order_id if written == table_keys else None


def intended_boundary_orders(spec: TableSpec, sort_keys: Sequence[SortKey]) -> dict[str, BoundaryOrder]:
    """Column -> the BoundaryOrder each rewritten file's column index should show.

    `verify.boundary_order` wins when given. Otherwise a linear sort orders pages only by the column its
    first keys order (`order_column`; later keys restart within each value of it); a curve (zorder,
    hilbert) orders rows by an index over every key, so no single column's pages are ordered and nothing is
    asserted.
    """
    if spec.verify.boundary_order is not None:
        return dict(spec.verify.boundary_order)
    if spec.sort.is_curve:
        return {}
    first = order_column(sort_keys)
    if first is None:
        return {}
    return {first.column: "DESCENDING" if first.direction == "desc" else "ASCENDING"}


def order_column(sort_keys: Sequence[SortKey]) -> SortKey | None:
    """The key whose column the rows are in order of, across the file: the first key when it sorts by the
    column itself; else the first keys' column when they all keep its order (truncate, year ... hour) in one
    direction and one of them is the column itself (``day(ts), ts``: ts ascends across the file, where
    ``day(ts), id`` orders ts only day by day); else None (``bucket[8](id)``: id ascends within a bucket)."""
    if not sort_keys:
        return None
    first = sort_keys[0]
    for key in sort_keys:
        if key.column != first.column or key.direction != first.direction \
                or not transforms.keeps_order(key.transform):
            return None
        if key.transform == transforms.IDENTITY:
            return key
    return None
