"""The leaf columns of a footer's schema: each one's path, levels and type (`Column`).

A footer lists its schema as a flattened tree (each element says how many children follow it); the
readers of a file address its column chunks by leaf, in that order. Decoding the tree checks it, since
a corrupt one would otherwise attribute chunks to the wrong columns."""

from __future__ import annotations

from typing import Any, NamedTuple

from layout.errors import ParquetError
from layout.parquet import format as fmt
from layout.parquet.format import FieldRepetitionType, PhysicalType
from layout.parquet.types import ColumnType

__all__ = ["Column", "build_columns", "column_names"]


class Column(NamedTuple):
    index: int  # type: ignore[assignment]  # the leaf's position: shadows tuple.index
    path: tuple[str, ...]
    name: str  # dotted path
    type: ColumnType
    max_definition_level: int
    max_repetition_level: int


def column_names(schema: list[fmt.SchemaElement], path: str) -> list[tuple[tuple[str, ...], int, int, int]]:
    """(path, max def level, max rep level, schema index) of every leaf, in schema order (iterative)."""
    if not schema:
        raise ParquetError(path, "corrupt footer: the schema is empty")
    leaves = []
    root_children = schema[0].num_children or 0
    if root_children < 0:
        raise ParquetError(path, f"corrupt schema: root has {root_children} children")
    # stack of [remaining children, path, def level, rep level]
    stack: list[list[Any]] = [[root_children, (), 0, 0]]
    i = 1
    while stack:
        top = stack[-1]
        if top[0] == 0:
            stack.pop()
            continue
        top[0] -= 1
        if i >= len(schema):
            raise ParquetError(path, f"corrupt schema: the schema tree declares more than {len(schema)} "
                                     f"elements")
        el = schema[i]
        rep = el.repetition_type
        d = top[2] + (rep != FieldRepetitionType.REQUIRED and rep is not None)
        r = top[3] + (rep == FieldRepetitionType.REPEATED)
        node_path = top[1] + (el.name or "",)
        nc = el.num_children
        if nc is not None and nc < 0:
            raise ParquetError(path, f"corrupt schema: element {el.name!r} has {nc} children")
        if nc or (nc == 0 and el.type is None):
            if len(stack) > 1000:
                raise ParquetError(path, "corrupt schema: nested more than 1000 levels deep")
            stack.append([nc, node_path, d, r])
        else:
            leaves.append((node_path, d, r, i))
        i += 1
    if i != len(schema):
        raise ParquetError(path, f"corrupt schema: {len(schema) - i} schema elements are not in the tree")
    return leaves


def build_columns(md: fmt.FileMetaData, file_path: str) -> tuple[Column, ...]:
    """Every leaf column of the footer `md` of the file at `file_path`, typed by its column order."""
    leaves = column_names(md.schema or [], file_path)
    orders = md.column_orders
    if orders is not None and len(orders) != len(leaves):
        orders = None  # a mismatched list cannot be attributed: treat as absent (Arrow does the same)
    out = []
    for j, (path, d, r, si) in enumerate(leaves):
        el = md.schema[si]
        name = ".".join(path)
        if el.type is None:
            raise ParquetError(file_path, f"corrupt schema: leaf column {name!r} has no physical type")
        if not isinstance(el.type, PhysicalType):
            raise ParquetError(file_path, f"corrupt schema: invalid physical type {el.type} for column "
                                          f"{name!r}")
        if el.type == PhysicalType.FIXED_LEN_BYTE_ARRAY and (el.type_length is None or el.type_length < 0):
            raise ParquetError(file_path, f"corrupt schema: FIXED_LEN_BYTE_ARRAY column {name!r} has no "
                                          f"valid type_length")
        ct = ColumnType.from_schema(el, orders[j] if orders is not None else None, name)
        out.append(Column(j, path, name, ct, d, r))
    return tuple(out)
