"""Merge-on-read inputs in the rewrite plan: which data files their deletes condemn,
and the deletes a group applies.

Iceberg's own rewrite judges a data file by its deletes (`delete-file-threshold`, `delete-ratio-threshold`);
lakesort's planner asks `past_thresholds` the same, with the spec's `delete_file_threshold` and
`delete_ratio_threshold`. A group carries every delete file that applies to one of its inputs
(`delete_inputs`), with what the Spark job needs to apply it by Iceberg's rules; `unappliable` refuses a
partition whose deletes the job cannot apply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from pyiceberg.types import StructType

from layout.compaction.plan import DeleteInput

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

    from layout.read.deletes import DeleteFile
    from layout.spec import TableSpec

__all__ = ["delete_inputs", "equality_column", "past_thresholds", "unappliable"]


class _Data(Protocol):
    @property  # read-only: the planner's entries are frozen models
    def path(self) -> str: ...
    @property
    def rows(self) -> int: ...


def past_thresholds(data: Sequence[_Data], deletes: Mapping[str, tuple[DeleteFile, ...]],
                            spec: TableSpec) -> tuple[str, set[str]] | None:
    """The data files whose deletes pass the spec's thresholds, as Iceberg's rewrite judges them: at least
    `delete_file_threshold` delete files apply, or the rows known deleted (the record counts of the
    file-scoped position deletes, which reference that file alone) are at least `delete_ratio_threshold` of
    its rows. None when no file does."""
    by_count, by_ratio = set(), set()
    for e in data:
        found = deletes.get(e.path, ())
        if not found:
            continue
        if spec.delete_file_threshold is not None and len(found) >= spec.delete_file_threshold:
            by_count.add(e.path)
        known = sum(d.record_count for d in found if d.file_scoped)
        if e.rows and known / e.rows >= spec.delete_ratio_threshold:
            by_ratio.add(e.path)
    if not by_count and not by_ratio:
        return None
    parts = []
    if by_count:
        parts.append(f"{len(by_count)} with at least {spec.delete_file_threshold} delete files "
                     "(delete_file_threshold)")
    if by_ratio:
        parts.append(f"{len(by_ratio)} with at least {spec.delete_ratio_threshold:g} of their rows deleted "
                     "(delete_ratio_threshold)")
    files = {d.path for e in data for d in deletes.get(e.path, ())}
    reason = (f"{len(by_count | by_ratio)} file(s) carry deletes past the thresholds: {' and '.join(parts)}; "
              f"rewritten with the {len(files)} delete file(s) that apply to them applied")
    return reason, by_count | by_ratio


def unappliable(table: Table, chosen: Sequence[_Data],
                deletes: Mapping[str, tuple[DeleteFile, ...]]) -> str | None:
    """Why the delete files that apply to the chosen files cannot be applied by the job (None: they can)."""
    schema = table.schema()
    for e in chosen:
        for d in deletes.get(e.path, ()):
            for field_id in d.equality_ids:
                if equality_column(schema, field_id) is None:
                    return (f"equality delete file {d.path} compares field id {field_id}, which the table's "
                            "current schema has not as a column lakesort can compare (dropped, or inside a "
                            "list or map); nothing rewritten here: apply it with Iceberg's "
                            f"rewrite_data_files (file {e.path})")
    return None


def equality_column(schema: Schema, field_id: int) -> str | None:
    """The dotted column path of an equality field as the current schema names it; None when the schema lacks
    it or it lies inside a list or map (Iceberg allows neither)."""
    name = schema.find_column_name(field_id)
    if name is None or not schema.find_field(field_id).field_type.is_primitive:
        return None
    parent = schema._lazy_id_to_parent.get(field_id)
    while parent is not None:
        if not isinstance(schema.find_field(parent).field_type, StructType):
            return None
        parent = schema._lazy_id_to_parent.get(parent)
    return name


def delete_inputs(members: Sequence[_Data], deletes: Mapping[str, tuple[DeleteFile, ...]],
                   table: Table | None) -> tuple[DeleteInput, ...]:
    found = {d.path: d for e in members for d in deletes.get(e.path, ())}
    if not found:
        return ()
    schema = table.schema() if table is not None else None
    return tuple(
        DeleteInput(path=d.path, kind=d.kind, size=d.size, rows=d.record_count,
                    sequence_number=d.sequence_number, spec_id=d.spec_id, partition_key=str(d.partition),
                    unpartitioned=d.is_global, equality_ids=d.equality_ids,
                    equality_columns=tuple(equality_column(schema, i) or "" for i in d.equality_ids)
                    if schema is not None else ())
        for d in sorted(found.values(), key=lambda d: (d.sequence_number, d.path))
    )
