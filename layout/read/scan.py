"""Reading a plan: only the selected row groups, the selected rows, filtered exactly.

Byte ranges are fetched through Arrow's pre-buffering, coalesced the way the Arrow Rust reader does
for object stores (ranges closer than 1 MiB merged, each request at most 32 MiB). Predicate columns
are read first; the other projected columns only for row groups where rows survive (late
materialization). The result equals a full scan filtered by the predicate, in file, row-group and
row order. I/O is per column chunk: pyarrow cannot decode a subset of a chunk's pages.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from layout.errors import UsageError
from layout.expr.bind import to_arrow_filter
from layout.expr.predicate import columns as expr_columns
from layout.io import data_files
from layout.read.chains import sorted_chains
from layout.read.merge import MergeFunction, MergeResult, merge_sorted
from layout.read.plan_values import FilePlan, Plan, RowGroupPlan
from layout.read.selection import RowSelection

COALESCE_HOLE_BYTES = 1 << 20  # arrow-rs object_store coalescing gap
COALESCE_MAX_BYTES = 32 << 20
_ROW = "__lakesort_row"


def _format() -> ds.ParquetFileFormat:
    options = ds.ParquetFragmentScanOptions(
        pre_buffer=True,
        cache_options=pa.CacheOptions(hole_size_limit=COALESCE_HOLE_BYTES,
                                      range_size_limit=COALESCE_MAX_BYTES),
    )
    return ds.ParquetFileFormat(default_fragment_scan_options=options)


def read_batches(plan: Plan) -> Iterator[pa.RecordBatch]:
    """The plan's matching rows, one table's batches per file."""
    _refuse_deletes(plan)
    fmt = _format()
    for file in plan.files:
        table = _read_file(plan, file, fmt)
        if table is not None and table.num_rows:
            yield from table.to_batches()


def read_sorted(plan: Plan, key: str | Sequence[str], *, merge: MergeFunction | None = None,
                sequence: str | None = None, descending: bool = False,
                batch_size: int = 65_536) -> MergeResult:
    """The matching rows in key order, through the loser-tree merge: one stream per chain of files that
    follow each other in the first key (`layout.read.chains`: a sorted run's files are one stream, so a
    partition of a few runs merges a few streams), each file read when the merge reaches it."""
    _refuse_deletes(plan)

    keys = [key] if isinstance(key, str) else list(key)
    wanted = [*keys, *([sequence] if sequence else [])]
    if plan.columns is not None:
        missing = [c for c in wanted if c not in plan.columns]
        if missing:
            raise UsageError(f"to_sorted_batches needs {', '.join(missing)} in the plan's columns; plan with "
                             f"columns={[*plan.columns, *missing]}")
    fmt = _format()

    def stream(chain: list[FilePlan]) -> Iterator[pa.RecordBatch]:
        for file in chain:
            table = _read_file(plan, file, fmt)
            if table is not None:
                yield from table.to_batches()

    chains = sorted_chains(plan.files, keys[0], descending=descending)
    return merge_sorted([stream(c) for c in chains], keys, merge=merge, sequence=sequence,
                        descending=descending, batch_size=batch_size)


def read_table(plan: Plan) -> pa.Table:
    _refuse_deletes(plan)
    fmt = _format()
    tables = [t for f in plan.files if (t := _read_file(plan, f, fmt)) is not None]
    if tables:
        return pa.concat_tables(tables)
    return _empty(plan, fmt)


def match_selections(plan: Plan) -> Iterator[tuple[FilePlan, list[tuple[RowGroupPlan, RowSelection]]]]:
    """Per planned file, the rows of each selected row group that truly match, found by reading only
    the predicate columns (what the ideal reader of `layout.metrics.measure` would have to fetch)."""
    fmt = _format()
    filter_columns = list(dict.fromkeys(_top(c) for c in expr_columns(plan.predicate)))
    for file in plan.files:
        groups = [rg.index for rg in file.row_groups]
        masks = [rg.selection.to_mask(rg.num_rows) for rg in file.row_groups]
        if filter_columns and not all(rg.all_match for rg in file.row_groups):
            mask = np.concatenate(masks)
            positions = np.flatnonzero(mask)
            candidates = _read_groups(fmt, file, groups, filter_columns).take(pa.array(positions))
            matched = np.zeros(len(mask), dtype=bool)
            matched[candidates.append_column(_ROW, pa.array(positions)).filter(
                to_arrow_filter(plan.predicate)).column(_ROW).to_numpy()] = True
            starts = np.cumsum([0] + [rg.num_rows for rg in file.row_groups])
            masks = [matched[starts[i]:starts[i + 1]] for i in range(len(groups))]
        yield file, [(rg, RowSelection.from_mask(m)) for rg, m in zip(file.row_groups, masks, strict=True)]


def _top(name: str) -> str:
    return name.split(".", 1)[0]  # nested fields are read through their top-level column


def _projection(plan: Plan, schema: pa.Schema) -> list[str]:
    if plan.columns is None:
        return list(schema.names)
    return list(dict.fromkeys(_top(c) for c in plan.columns))


def _read_groups(fmt: ds.ParquetFileFormat, file: FilePlan, groups: list[int],
                 columns: list[str]) -> pa.Table:
    """These row groups' columns, in the order asked: a fragment yields its row groups in an order of its
    own (0, 32, 2, 4, ... for [0, 2, ..., 32]), which `fragment.row_groups` reports."""
    fragment = fmt.make_fragment(file.path, filesystem=file.filesystem, row_groups=groups)
    table = fragment.to_table(columns=columns)
    got = [rg.id for rg in fragment.row_groups]
    if got == groups:
        return table
    sizes = {rg.id: rg.num_rows for rg in fragment.row_groups}
    offsets, offset = {}, 0
    for gid in got:
        offsets[gid] = offset
        offset += sizes[gid]
    return pa.concat_tables([table.slice(offsets[g], sizes[g]) for g in groups])


def _read_file(plan: Plan, file: FilePlan, fmt: ds.ParquetFileFormat) -> pa.Table | None:
    groups = [rg.index for rg in file.row_groups]
    schema = fmt.make_fragment(file.path, filesystem=file.filesystem).physical_schema
    projected = _projection(plan, schema)
    filter_columns = list(dict.fromkeys(_top(c) for c in expr_columns(plan.predicate)))
    first = _read_groups(fmt, file, groups, filter_columns) if filter_columns else None
    # Rows the selection keeps, as positions in the concatenation of the selected row groups.
    mask = np.concatenate([rg.selection.to_mask(rg.num_rows) for rg in file.row_groups])
    exact = all(rg.all_match for rg in file.row_groups)
    positions = np.flatnonzero(mask)
    if first is not None and not exact and len(positions):
        candidates = first.take(pa.array(positions)).append_column(_ROW, pa.array(positions))
        positions = candidates.filter(to_arrow_filter(plan.predicate)).column(_ROW).to_numpy()
    if not len(positions):
        return None
    rest = [c for c in projected if c not in filter_columns]
    if not rest:
        # `first` is None here only for an empty projection without a predicate (AttributeError: reported).
        return first.take(pa.array(positions)).select(projected)  # type: ignore[union-attr]
    # Late materialization: the other columns only for row groups that still have rows.
    starts = np.cumsum([0] + [rg.num_rows for rg in file.row_groups])
    owner = np.searchsorted(starts, positions, side="right") - 1
    alive = sorted(set(owner.tolist()))
    if len(alive) < len(groups):
        shift = np.zeros(len(groups), dtype=np.int64)
        offset = 0
        for i in range(len(groups)):
            if i in alive:
                shift[i] = starts[i] - offset
                offset += file.row_groups[i].num_rows
        local = positions - shift[owner]
    else:
        local = positions
    others = _read_groups(fmt, file, [groups[i] for i in alive], rest).take(pa.array(local))
    if first is not None:
        picked = first.take(pa.array(positions))
        for name in filter_columns:
            others = others.append_column(picked.schema.field(name), picked.column(name))
    return others.select(projected)


def _empty(plan: Plan, fmt: ds.ParquetFileFormat) -> pa.Table:
    """An empty table with the projected schema (from the source's first file)."""

    filesystem, path = data_files(plan.source)[0]
    schema = fmt.make_fragment(path, filesystem=filesystem).physical_schema
    projected = _projection(plan, schema)
    return schema.empty_table().select(projected)


def _refuse_deletes(plan: Plan) -> None:
    """This reader reads data files and never merges delete files: a plan whose files have any is refused,
    where reading would return rows the table deleted (planning and measuring count them: `PlanCounts`)."""
    if plan.counts.delete_files_selected:
        raise UsageError(f"{plan.source}: {plan.counts.delete_files_selected} delete file(s) apply to the "
                         "data files this read selects, and lakesort's reader does not merge deletes; "
                         "compact the table with lakesort (which applies them) or read it with an "
                         "engine that merges them")
