"""Verify the layout that was written: prove each promise of the table spec, and say why one was not kept.

    report = verify_files(paths, spec)             # Parquet files: paths or (filesystem, path) pairs
    report = verify_source("demo.lineitem")         # a file, a directory or an Iceberg table
    report = verify_staged(manifest, spec, keys)    # the staged outputs of a compaction run
    facts = layout_facts(paths)                     # file x row group x column facts (pyarrow.Table)

Only metadata is read (footers, page indexes, bloom filter offsets), except to explain a dropped column
index, which reads that one column of that one row group. Rules, one small function each (`RULES`):

``page_index``      column index and offset index in every chunk of the required columns (error)
``nan_column_index`` a float/double chunk holding NaN without a column index (warning): parquet-mr writes
                    none there, whatever its settings; the job starts a row group where the first sort key's
                    NaN rows begin, so only those row groups lose it. A NaN chunk *with* an index is a
                    page_index error
``boundary_order``  the column index's BoundaryOrder is the intended one (error, with the first pair of
                    pages that breaks the order)
``row_group_order`` row groups of a file ordered in the first sort key (error)
``overlap``         files of one sorted run of a partition hold disjoint ranges of the first sort key
                    (error); a table's partition holds at most max_sorted_runs overlapping runs (warning)
``row_group_size`` / ``file_size``  within the spec's verify bounds (error)
``pages``           pages per row group and rows per page (info)
``clustering``      a curve layout (zorder, hilbert): per key, the files' and row groups' overlap depth and
                    the share of row groups a point lookup touches (info; `layout.verify.clustering`)
``bloom_filter``    bloom filters where the spec asks for them (error)
``sorting_columns`` / ``sort_order_id``  recorded sort metadata agrees with the spec (warning)

Ties: equal first-key values may straddle a row-group or file boundary (parquet-mr cuts row groups by
size, and Spark's range partitioning on several keys can cut inside one value of the first), so
``max(i) == min(i + 1)`` is ordered and disjoint. A reader looking for that value reads both sides,
which no layout avoids. `layout.read.overlap.overlap_depth` does not count such touching files as
overlapping (so the planner does not rewrite them again); they are reported as a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from layout.verify.facts import FACTS_COLUMNS, OpenedFile, facts_schema, layout_facts, open_files
from layout.verify.findings import SEVERITIES, Finding, Intent, VerificationFailed, VerifyReport
from layout.verify.index_rules import check_page_index
from layout.verify.order_rules import (
    check_boundary_order,
    check_clustering,
    check_overlap,
    check_row_group_order,
    check_sort_order_ids,
    check_sorting_columns,
)
from layout.verify.sources import resolve_source, staged_files
from layout.verify.writer_rules import check_bloom_filters, check_pages, check_sizes

if TYPE_CHECKING:

    from layout.manifest import StagedManifest
    from layout.spec import SortKey, TableSpec

log = logging.getLogger(__name__)


FileRule = Callable[[OpenedFile, Intent], Iterable[Finding]]


FILE_RULES: tuple[FileRule, ...] = (check_page_index, check_boundary_order, check_row_group_order,
                                    check_sizes, check_pages, check_bloom_filters)
RULES = ("page_index", "nan_column_index", "boundary_order", "row_group_order", "overlap", "row_group_size",
         "file_size", "pages", "bloom_filter", "sorting_columns", "sort_order_id", "clustering")


# --- entry points -----------------------------------------------------------------------------------


def verify_files(files: Iterable[Any], spec: TableSpec | None = None, *,
                 sort_keys: Sequence[SortKey] | None = None, partitions: Mapping[str, str] | None = None,
                 runs: Mapping[str, str] | None = None) -> VerifyReport:
    """Check Parquet files (paths, or (filesystem, path) pairs) against `spec` (None: indexes only).

    `sort_keys` default to the spec's; `partitions` maps a path to its partition (default: its directory)
    and `runs` to its sorted run in it (default: a partition's files are one run) for the overlap rule.
    Unreadable files raise `ParquetError` (an InputError)."""
    opened = open_files(files, partitions, runs)
    intent = Intent.of(spec, sort_keys)
    findings: list[Finding] = []
    for f in opened:
        for rule in FILE_RULES:
            findings.extend(rule(f, intent))
    findings.extend(check_overlap(opened, intent))
    findings.extend(check_sorting_columns(opened, intent))
    findings.extend(check_clustering(opened, intent))
    return _report(findings, opened)


def _report(findings: Iterable[Finding], opened: Sequence[OpenedFile]) -> VerifyReport:
    return _sorted(findings, len(opened), sum(f.pf.num_row_groups for f in opened))


def _sorted(findings: Iterable[Finding], files: int, row_groups: int) -> VerifyReport:
    """Errors first, then warnings, then info; within a severity in rule order (stable otherwise)."""
    ordered = sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), RULES.index(f.rule)))
    return VerifyReport(tuple(ordered), files, row_groups)


def verify_source(source: str, spec: TableSpec | None = None) -> VerifyReport:
    """A file, a directory (rules of `spec`, default indexes only) or an Iceberg table `ns.table`.

    For a table without `spec`, the spec is looked up in the registry (`layout.registry.find_spec`);
    without one there, the default rules apply. A table's sort keys default to its sort order."""
    found = resolve_source(source, spec)
    if found.table is None:
        return verify_files(found.files, found.spec)
    if found.spec is None:
        return verify_files(found.files, None, partitions=found.partitions)
    report = verify_files(found.files, found.spec, sort_keys=found.sort_keys, partitions=found.partitions,
                          runs=found.runs)
    extra = check_sort_order_ids(found.table, found.spec, [p for _, p in found.files])
    return _sorted(report.findings + tuple(extra), report.files, report.row_groups)


def verify_staged(manifest: StagedManifest, spec: TableSpec, sort_keys: Sequence[SortKey], *,
                  opened: Sequence[OpenedFile] | None = None) -> VerifyReport:
    """The staged outputs of a run, each group's files one partition for the overlap rule; `opened`: the
    same files already opened (`layout.verify.sources.open_staged`), shared with the GX facts."""
    if opened is not None:
        return verify_files(opened, spec, sort_keys=sort_keys)
    files, partitions = staged_files(manifest)
    return verify_files(files, spec, sort_keys=sort_keys, partitions=partitions)


__all__ = [
    "FACTS_COLUMNS", "RULES", "Finding", "Intent", "VerificationFailed", "VerifyReport", "facts_schema",
    "layout_facts", "verify_files", "verify_source", "verify_staged",
]
