"""The values planning produces and reading consumes: what to read of each file, row group and page.

`layout.read.plan` builds a `Plan`; `layout.read.scan` reads one. The reader depends on this module,
never the reverse, and a plan holds no reader: it can be logged, compared, sent as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from layout.expr.predicate import Expr
from layout.read.selection import RowSelection

__all__ = ["FilePlan", "Plan", "PlanCounts", "RowGroupPlan"]


@dataclass(frozen=True, slots=True)
class RowGroupPlan:
    index: int
    num_rows: int
    selection: RowSelection  # rows that might match
    all_match: bool  # statistics prove every row matches: no exact filter needed


@dataclass(frozen=True, slots=True)
class FilePlan:
    path: str
    row_groups: tuple[RowGroupPlan, ...]
    filesystem: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class PlanCounts:
    """What a plan keeps (`*_selected`) of the whole source (`*_total`); see `layout.read.plan` for each.

    `row_groups_total` and `pages_total` are counted from footers only: None when planning did not open
    every file (an Iceberg table whose manifests rule files out, planned without `exact_totals`), since
    counting them over the opened files alone would overstate what the reader reads. The other totals
    are always counts: of an Iceberg table's unopened files they come from the manifests.

    `delete_*` (Iceberg merge-on-read tables; 0 elsewhere): the position and equality delete files a reader
    opens and merges for the data files it selects, each counted once however many of them it applies to,
    and their bytes (file sizes); `*_total` for a scan of the whole snapshot. Rows stay what the data files
    hold: a reader reads them, then drops the deleted ones, which only the delete files' contents tell.
    """

    files_total: int = 0
    files_selected: int = 0
    row_groups_total: int | None = 0
    row_groups_selected: int = 0
    pages_total: int | None = 0
    pages_selected: int = 0
    rows_total: int = 0
    rows_selected: int = 0
    bytes_total: int = 0
    bytes_selected: int = 0
    delete_files_total: int = 0
    delete_files_selected: int = 0
    delete_bytes_total: int = 0
    delete_bytes_selected: int = 0


@dataclass(frozen=True, slots=True)
class Plan:
    source: str
    predicate: Expr  # bound, NOT-free
    columns: tuple[str, ...] | None  # projection; None = every column
    files: tuple[FilePlan, ...]
    counts: PlanCounts
    plan_ms: float
    page_comparisons: int = 0  # column-index bound comparisons made by page search

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source, "where": str(self.predicate),
            "columns": list(self.columns) if self.columns is not None else None,
            **{k: getattr(self.counts, k) for k in PlanCounts.__dataclass_fields__},
            "plan_ms": round(self.plan_ms, 3),
            "selection": [
                {"path": f.path, "row_group": rg.index, "ranges": [list(r) for r in rg.selection.ranges]}
                for f in self.files for rg in f.row_groups
            ],
        }
        return out
