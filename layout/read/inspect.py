"""`lakesort inspect`: what a reader sees in Parquet files, per row group, column and page.

The layout is built once as frozen values (`FileLayout` > `RowGroupLayout` > `ChunkLayout`) and rendered
either as JSON (`to_json`) or as text in the style of parquet-cli's `column-index` command. Only the
columns asked for have their page indexes read and decoded.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from layout.parquet import ColumnType, OffsetIndex, ParquetFile, TypedColumnIndex, TypedStatistics
from layout.sizes import format_size

ABSENT = "absent"


@dataclass(frozen=True, slots=True)
class ChunkLayout:
    name: str
    type: ColumnType
    statistics: TypedStatistics | None
    has_column_index: bool
    has_offset_index: bool
    has_bloom_filter: bool
    column_index: TypedColumnIndex | None
    offset_index: OffsetIndex | None

    @property
    def boundary_order(self) -> str:
        return self.column_index.boundary_order.name if self.column_index else ABSENT

    @property
    def num_pages(self) -> int | None:
        return len(self.offset_index.page_locations) if self.offset_index else None

    def to_json(self) -> dict[str, Any]:
        enc = self.type.to_json
        stats = self.statistics
        ci = self.column_index
        return {
            "name": self.name,
            "physical_type": self.type.physical_type.name,
            "logical_type": self.type.logical_annotation,
            "statistics": None if stats is None else {
                "min": enc(stats.min), "max": enc(stats.max), "null_count": stats.null_count,
                "min_exact": stats.min_exact, "max_exact": stats.max_exact,
            },
            "has_column_index": self.has_column_index,
            "has_offset_index": self.has_offset_index,
            "has_bloom_filter": self.has_bloom_filter,
            "column_index": None if ci is None else {
                "boundary_order": ci.boundary_order.name,
                "null_pages": list(ci.null_pages),
                "null_counts": None if ci.null_counts is None else list(ci.null_counts),
                "min_values": [enc(v) for v in ci.min_values],
                "max_values": [enc(v) for v in ci.max_values],
            },
            "offset_index": None if self.offset_index is None else {
                "page_locations": [
                    {"offset": p.offset, "compressed_page_size": p.compressed_page_size,
                     "first_row_index": p.first_row_index}
                    for p in self.offset_index.page_locations
                ],
            },
        }


@dataclass(frozen=True, slots=True)
class RowGroupLayout:
    index: int
    num_rows: int
    total_byte_size: int
    total_compressed_size: int | None
    columns: tuple[ChunkLayout, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index, "num_rows": self.num_rows, "total_byte_size": self.total_byte_size,
            "total_compressed_size": self.total_compressed_size,
            "columns": [c.to_json() for c in self.columns],
        }


@dataclass(frozen=True, slots=True)
class FileLayout:
    path: str
    size: int
    num_rows: int
    created_by: str | None
    sorting_columns: tuple[str, ...]
    row_groups: tuple[RowGroupLayout, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path, "size": self.size, "num_rows": self.num_rows, "created_by": self.created_by,
            "sorting_columns": list(self.sorting_columns),
            "row_groups": [rg.to_json() for rg in self.row_groups],
        }


def file_layout(pf: ParquetFile, columns: Sequence[str] | None = None, *, pages: bool = True) -> FileLayout:
    """The layout of one file; `pages=False` skips reading page indexes (footer facts only)."""
    chosen = [pf.column(c) for c in columns] if columns else list(pf.columns)
    groups = []
    for rg_index, rg in enumerate(pf.row_groups):
        chunks = tuple(
            ChunkLayout(
                name=col.name,
                type=col.type,
                statistics=pf.statistics(rg_index, col.index),
                has_column_index=pf.has_column_index(rg_index, col.index),
                has_offset_index=pf.has_offset_index(rg_index, col.index),
                has_bloom_filter=pf.has_bloom_filter(rg_index, col.index),
                column_index=pf.column_index(rg_index, col.index) if pages else None,
                offset_index=pf.offset_index(rg_index, col.index) if pages else None,
            )
            for col in chosen
        )
        groups.append(RowGroupLayout(rg_index, rg.num_rows, rg.total_byte_size,
                                     rg.total_compressed_size, chunks))
    return FileLayout(
        path=pf.path, size=pf.size, num_rows=pf.num_rows, created_by=pf.created_by,
        sorting_columns=_sorting_columns(pf), row_groups=tuple(groups),
    )


def _sorting_columns(pf: ParquetFile) -> tuple[str, ...]:
    """The first row group's declared sorting_columns, as `name [DESC] [NULLS FIRST]`."""
    if not pf.row_groups or not pf.row_groups[0].sorting_columns:
        return ()
    out = []
    for sc in pf.row_groups[0].sorting_columns:
        text = pf.columns[sc.column_idx].name if 0 <= sc.column_idx < len(pf.columns) else f"#{sc.column_idx}"
        out.append(text + (" DESC" if sc.descending else "") + (" NULLS FIRST" if sc.nulls_first else ""))
    return tuple(out)


# ---- text rendering -------------------------------------------------------------------------------


def render_pages(layout: FileLayout) -> Iterator[str]:
    """Per row group and column: the column index and offset index side by side, page by page."""
    yield f"file: {layout.path}"
    yield (f"  rows: {layout.num_rows}  size: {format_size(layout.size)}  created by: "
           f"{layout.created_by or '?'}")
    if layout.sorting_columns:
        yield f"  sorting columns: {', '.join(layout.sorting_columns)}"
    for rg in layout.row_groups:
        yield f"row group {rg.index}: {rg.num_rows} rows, {format_size(rg.total_byte_size)} uncompressed"
        for chunk in rg.columns:
            yield from _render_chunk(chunk)
    yield ""


def _render_chunk(chunk: ChunkLayout) -> Iterator[str]:
    enc = chunk.type.to_json
    stats = chunk.statistics
    head = f"  column {chunk.name} ({chunk.type.logical_name})"
    if stats is not None:
        head += f"  min {_cell(enc(stats.min))}  max {_cell(enc(stats.max))}  nulls {stats.null_count}"
    yield head
    bloom = "bloom filter: yes" if chunk.has_bloom_filter else "bloom filter: no"
    if chunk.column_index is None and chunk.offset_index is None:
        yield f"    column index: absent  offset index: absent  {bloom}"
        return
    yield f"    boundary order: {chunk.boundary_order}  {bloom}"
    ci, oi = chunk.column_index, chunk.offset_index
    if oi:
        n = len(oi.page_locations)
    else:
        assert ci is not None  # both absent: returned above
        n = len(ci.null_pages)
    rows = [("page", "null count", "min", "max", "offset", "compressed size", "first row index")]
    for i in range(n):
        loc = oi.page_locations[i] if oi and i < len(oi.page_locations) else None
        null_page = ci is not None and i < len(ci.null_pages) and ci.null_pages[i]
        rows.append((
            f"page-{i}",
            str(ci.null_counts[i]) if ci is not None and ci.null_counts is not None else "",
            "" if ci is None or null_page else _cell(enc(ci.min_values[i])),
            "" if ci is None or null_page else _cell(enc(ci.max_values[i])),
            str(loc.offset) if loc else "", str(loc.compressed_page_size) if loc else "",
            str(loc.first_row_index) if loc else "",
        ))
    if ci is None:
        yield "    column index: absent"
    if oi is None:
        yield "    offset index: absent"
    yield from ("    " + line for line in _table(rows, right={1, 4, 5, 6}))


def render_summary(layouts: Iterable[FileLayout]) -> Iterator[str]:
    """One line per file (paths relative to their common directory), then per column: column index
    coverage and BoundaryOrder counts."""
    layouts = list(layouts)
    root = os.path.commonpath([os.path.dirname(lay.path) for lay in layouts]) if layouts else None
    if root:
        yield f"under {root}:"
    rows = [("file", "rows", "row groups", "pages", "size", "created by")]
    for lay in layouts:
        pages = sum(c.num_pages or 0 for rg in lay.row_groups for c in rg.columns[:1])
        name = os.path.relpath(lay.path, root) if root else lay.path
        rows.append((name, str(lay.num_rows), str(len(lay.row_groups)), str(pages or "-"),
                     format_size(lay.size), (lay.created_by or "?")[:40]))
    hidden = len(rows) - 21
    shown = rows if hidden <= 0 else rows[:11] + [(f"... {hidden} more", "", "", "", "", "")] + rows[-10:]
    yield from _table(shown, right={1, 2, 3, 4})
    sizes = [lay.size for lay in layouts]
    total_rows = sum(lay.num_rows for lay in layouts)
    yield ""
    yield (f"{len(layouts)} files, {total_rows} rows, {format_size(sum(sizes))} "
           f"(average file {format_size(sum(sizes) // max(len(sizes), 1))}, smallest "
           f"{format_size(min(sizes, default=0))}, largest {format_size(max(sizes, default=0))})")
    yield ""
    by_column: dict[str, list[ChunkLayout]] = {}
    for lay in layouts:
        for rg in lay.row_groups:
            for chunk in rg.columns:
                by_column.setdefault(chunk.name, []).append(chunk)
    rows = [("column", "type", "column index", "offset index", "bloom filter", "boundary order")]
    for name, chunks in by_column.items():
        n = len(chunks)
        orders = Counter(c.boundary_order for c in chunks)
        rows.append((
            name, chunks[0].type.logical_name, f"{sum(c.has_column_index for c in chunks)}/{n}",
            f"{sum(c.has_offset_index for c in chunks)}/{n}",
            f"{sum(c.has_bloom_filter for c in chunks)}/{n}",
            ", ".join(f"{k} {v}" for k, v in sorted(orders.items())),
        ))
    yield from _table(rows)


def _table(rows: Sequence[tuple[str, ...]], right: AbstractSet[int] = frozenset()) -> Iterator[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        yield "  ".join(cells).rstrip()


def _cell(value: Any, width: int = 40) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= width else text[: width - 3] + "..."
