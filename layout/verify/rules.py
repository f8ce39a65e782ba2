"""Verify the layout that was written: prove each promise of the table spec, and say why one was not kept.

    report = verify_files(paths, spec)             # Parquet files: paths or (filesystem, path) pairs
    report = verify_source("demo.lineitem")         # a file, a directory or an Iceberg table
    report = verify_staged(manifest, spec, keys)    # the staged outputs of a compaction run
    facts = layout_facts(paths)                     # file x row group x column facts (pyarrow.Table)

Only metadata is read (footers, page indexes, bloom filter offsets), except to explain a dropped column
index, which reads that one column of that one row group. Rules, one small function each (`RULES`):

``page_index``      column index and offset index in every chunk of the required columns (error)
``nan_column_index`` a float/double chunk holding NaN without a column index (warning): parquet-mr writes none
                    there, whatever its settings; the job starts a row group where the first sort key's NaN rows
                    begin, so only those row groups lose it. A NaN chunk *with* an index is a page_index error
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

import itertools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from layout.io import live_data_files
from layout.parquet import ParquetFile, PhysicalType
from layout.read.overlap import overlap_depth
from layout.verify.clustering import curve_notes
from layout.verify.facts import (
    FACTS_COLUMNS,
    OpenedFile,
    all_dictionary,
    facts_schema,
    layout_facts,
    nan_values,
    open_files,
    row_group_bytes,
    rows_per_page,
)
from layout.verify.findings import SEVERITIES, Finding, Intent, VerificationFailed, VerifyReport
from layout.verify.sources import resolve_source, staged_files

if TYPE_CHECKING:

    from layout.manifest import StagedManifest
    from layout.spec import SortKey, TableSpec

log = logging.getLogger(__name__)

# parquet-mr (ParquetFileWriter, 1.17) drops a chunk's column index when the min/max bytes it would
# store exceed this many bytes per page on average.
PARQUET_MR_MINMAX_PER_PAGE = 4096
# parquet-mr's default column index truncate length: any value up to half the limit always fits.
DEFAULT_TRUNCATE_LENGTH = 64
DEFAULT_PAGE_SIZE = 1 << 20
ORDER_NAMES = {"asc": "ASCENDING", "desc": "DESCENDING"}


FileRule = Callable[[OpenedFile, Intent], Iterable[Finding]]


# --- rule 1: column index and offset index ------------------------------------------------------------


def check_page_index(f: OpenedFile, intent: Intent) -> Iterable[Finding]:
    pf = f.pf
    names = [c.name for c in pf.columns] if intent.index_columns == "all" else list(intent.index_columns)
    for name in names:
        if not pf.has_column(name):
            yield Finding("page_index", "error", pf.path, None, name, "column not in the file",
                          "column index and offset index", f"`{name}` is required by verify.column_index_columns "
                          "but the file has no such column; fix the list in the spec or the writer's schema")
            continue
        yield from _column_indexes(f, name, intent)
        missing = [rg for rg in range(pf.num_row_groups) if not pf.has_offset_index(rg, name)]
        if missing:
            yield Finding("page_index", "error", pf.path, missing[0], name,
                          f"no offset index in {len(missing)} of {pf.num_row_groups} row group(s)",
                          "an offset index in every row group", f"offset index missing for `{name}`: "
                          f"{_why_no_offset_index(pf)}")


def _column_indexes(f: OpenedFile, name: str, intent: Intent) -> Iterable[Finding]:
    """A column index in every row group, except where a float/double chunk holds NaN: parquet-mr writes none
    there, whatever its settings, so those are reported (`nan_column_index`, a warning), not refused; a chunk
    without NaN that lacks one, or one with NaN that has one, is an error."""
    pf = f.pf
    floats = pf.column(name).type.physical_type in (PhysicalType.FLOAT, PhysicalType.DOUBLE)
    missing, lost, mixed, indexed = [], [], [], []
    for rg in range(pf.num_row_groups):
        has = pf.has_column_index(rg, name)
        nan = nan_values(pf, rg, name) if floats else "none"
        if nan is None and not has and intent.read_values:  # the footer does not say: read the chunk (only
            # where the index is missing); a caller reading metadata only counts the chunk as missing its index
            nan = "some" if _has_nan(f, rg, name) else "none"
        if nan in ("some", "all") and not has:
            lost.append(rg)
            if nan == "some":
                mixed.append(rg)
        elif not has:
            missing.append(rg)
        elif nan in ("some", "all") and _nan_uncounted(pf, rg, name):
            indexed.append(rg)
    total = pf.num_row_groups
    if missing:
        yield Finding("page_index", "error", pf.path, missing[0], name,
                      f"no column index in {len(missing)} of {total} row group(s)", "a column index in every row group"
                      + (" without NaN" if lost else ""),
                      f"column index missing for `{name}`: " + (_why_no_column_index(f, missing[0], name, intent)
                      if intent.read_values else f"the writer ({pf.created_by or 'unknown'}) wrote none"))
    if indexed:
        yield Finding("page_index", "error", pf.path, indexed[0], name,
                      f"a column index in row group(s) {_listed(indexed)} holding NaN",
                      "no column index where a chunk holds NaN",
                      f"row group(s) {_listed(indexed)} of `{name}` hold NaN (their footer statistics say so: a NaN "
                      f"bound, no NaN count) and still have a column index ({pf.created_by or 'unknown writer'}): "
                      "its page bounds were taken over NaN values, so a reader may skip pages holding matches; "
                      "write the file with parquet-mr (Spark), which drops it, or store NaN as null")
    if lost:
        yield Finding("nan_column_index", "warning", pf.path, lost[0], name,
                      f"no column index in row group(s) {_listed(lost)} of {total}: they hold NaN",
                      "a column index in every row group without NaN", _why_nan(name, lost, mixed, intent))


def _listed(row_groups: Sequence[int]) -> str:
    shown = ", ".join(str(rg) for rg in row_groups[:10])
    return shown + (f" and {len(row_groups) - 10} more" if len(row_groups) > 10 else "")


def _nan_uncounted(pf: ParquetFile, rg: int, name: str) -> bool:
    """The chunk's NaN shows only as a NaN bound, not as a count: a writer that knows NaN (parquet-format's
    `nan_count`) may write a sound column index beside it; one that does not took the index over NaN too."""
    md = pf.row_groups[rg].columns[pf.column(name).index].meta_data
    return md is None or md.statistics is None or md.statistics.nan_count is None


def _why_nan(name: str, lost: Sequence[int], mixed: Sequence[int], intent: Intent) -> str:
    """What NaN in `name` costs readers, and whether the write could have kept more of its column index."""
    cause = ("parquet-mr (Spark's writer) writes no column index for a float/double column chunk holding NaN, and "
             "no writer setting changes that")
    cost = (f"readers cannot prune row group(s) {_listed(lost)} by `{name}`'s page index, nor by its row group "
            "statistics (they hold NaN as the max): a query filtering on it reads every page of them")
    fix = f"store NaN as null in `{name}` to keep them prunable"
    key = intent.first_key
    if key is None or key.column != name:
        return (f"NaN values of `{name}` are spread over the rows ({'not the first sort key' if intent.sort_keys else 'no sort key'}"
                f"), so every row group holding one loses its column index: {cause}; {cost}; {fix}")
    where = "last" if key.direction == "asc" else "first"
    if mixed:
        return (f"row group(s) {_listed(mixed)} mix NaN with numbers in the first sort key `{name}`: the write did not "
                f"start a row group where the NaN rows begin (they sort {where} for `{name}` {key.direction}), so the "
                f"numbers there lost the column index too; {cause}; {cost}. lakesort's compaction cuts there: rewrite "
                f"the partition (lakesort compact --force --partition ...), or {fix}")
    return (f"only row group(s) {_listed(lost)}, holding the NaN rows of the first sort key `{name}` (they sort "
            f"{where} for `{name}` {key.direction}, and the write starts a row group where they begin), lack it: "
            f"{cause}; {cost}; every other row group keeps it. To keep those too, {fix}")


def _why_no_offset_index(pf: ParquetFile) -> str:
    return (f"the writer ({pf.created_by or 'unknown'}) wrote none; parquet-mr always writes one, "
            "pyarrow only with write_page_index=True")


def _why_no_column_index(f: OpenedFile, rg: int, name: str, intent: Intent) -> str:
    column = f.pf.column(name)
    if column.type.physical_type == PhysicalType.INT96:
        return ("parquet-mr writes no column index for INT96 timestamps; write timestamps as INT64 "
                "(Spark: spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS)")
    if column.type.physical_type != PhysicalType.BYTE_ARRAY:
        return (f"the writer ({f.pf.created_by or 'unknown'}) wrote none although {column.type.physical_type} "
                "bounds are small; check that it writes page indexes (pyarrow: write_page_index=True)")
    pages, per_page, how = _minmax_bytes_per_page(f, rg, name)
    current = intent.truncate_length
    limit = PARQUET_MR_MINMAX_PER_PAGE
    if per_page is None or per_page <= limit:
        shown = "unknown" if per_page is None else f"{per_page:,.0f}"
        return (f"min/max values average {shown} bytes per page over {pages:,} page(s) ({how}), within "
                f"parquet-mr's {limit:,}-byte limit: the writer did not write one; check that it writes page "
                "indexes (pyarrow: write_page_index=True)")
    if current is not None and 2 * current <= limit:
        fix = (f"the spec's writer.column_index_truncate_length ({current}) would keep it under the limit, so "
               f"the file was not written with it: pass parquet.columnindex.truncate.length={current} to the writer")
    else:
        fix = (f"set writer.column_index_truncate_length (currently {current if current is not None else 'unknown'})"
               f" to {DEFAULT_TRUNCATE_LENGTH} (any value up to {limit // 2:,} keeps min+max within {limit:,} bytes)")
    return (f"column index dropped for `{name}` in row group {rg}: min/max values average {per_page:,.0f} bytes "
            f"per page over {pages:,} page(s) ({how}), over parquet-mr's {limit:,}-byte limit; {fix}")


def _has_nan(f: OpenedFile, rg: int, name: str) -> bool:
    """Whether a float/double column chunk holds a NaN (read from the data: footers do not count NaNs)."""

    with pq.ParquetFile(f.pf.path, filesystem=f.filesystem) as reader:
        values = reader.read_row_group(rg, columns=[name]).column(0)
    return bool(pc.any(pc.is_nan(values)).as_py())


def _minmax_bytes_per_page(f: OpenedFile, rg: int, name: str) -> tuple[int, float | None, str]:
    """(pages, average untruncated min+max bytes per page, how it was measured)."""
    pf = f.pf
    column = pf.column(name)
    oi = pf.offset_index(rg, name)
    starts = [p.first_row_index for p in oi.page_locations or ()] if oi is not None else []
    if starts and len(column.path) == 1 and column.max_repetition_level == 0:
        return len(starts), _measured_minmax(f, rg, name, starts), "measured from the values"
    md = pf.row_groups[rg].columns[column.index].meta_data
    pages = len(starts) or _estimated_pages(md)
    sizes = md.size_statistics
    if sizes is not None and sizes.unencoded_byte_array_data_bytes and md.num_values:
        # Average value length times two: the best guess without reading the values.
        return pages, 2 * sizes.unencoded_byte_array_data_bytes / md.num_values, "estimated from size statistics"
    return pages, None, "no per-page data"


def _measured_minmax(f: OpenedFile, rg: int, name: str, starts: list[int]) -> float:

    with pq.ParquetFile(f.pf.path, filesystem=f.filesystem) as reader:
        values = reader.read_row_group(rg, columns=[name]).column(0)
    ends = [*starts[1:], len(values)]
    total = 0
    for start, end in zip(starts, ends):
        bounds = pc.min_max(values.slice(start, end - start))
        for bound in (bounds["min"].as_py(), bounds["max"].as_py()):
            total += len(bound.encode() if isinstance(bound, str) else bound or b"")
    return total / len(starts)


def _estimated_pages(md: Any) -> int:
    # Without an offset index: at least one page per parquet-mr default page size (1 MiB) of data.
    return max(1, -(-(md.total_uncompressed_size or 0) // DEFAULT_PAGE_SIZE))


# --- rule 2: BoundaryOrder --------------------------------------------------------------------------


def check_boundary_order(f: OpenedFile, intent: Intent) -> Iterable[Finding]:
    pf = f.pf
    for name, intended in intent.boundary_orders.items():
        if intended == "UNORDERED":
            continue  # any order satisfies "no order promised"
        if not pf.has_column(name):
            yield Finding("boundary_order", "error", pf.path, None, name, "column not in the file", intended,
                          f"the spec orders `{name}` but the file has no such column")
            continue
        for rg in range(pf.num_row_groups):
            ci = pf.column_index(rg, name)
            if ci is None or ci.boundary_order.name == intended:
                continue  # a missing index is rule page_index's finding
            broken = _first_break(pf, rg, name, intended)
            if broken is None:
                continue  # e.g. constant pages: parquet-mr calls them ASCENDING, every order holds
            yield Finding("boundary_order", "error", pf.path, rg, name, ci.boundary_order.name, intended,
                          _why_unordered(f, rg, name, intended, broken, ci))


def _page_keys(pf: ParquetFile, rg: int, name: str) -> list[tuple[int, Any, Any]]:
    """(page, min key, max key) of the non-null pages with usable bounds, in page order."""
    raw = pf.raw_column_index(rg, name)
    order_key = pf.column(name).type.order_key
    out = []
    for page, (null, lo, hi) in enumerate(zip(raw.null_pages, raw.min_values, raw.max_values)):
        if not null:
            try:
                out.append((page, order_key(lo), order_key(hi)))
            except (ValueError, ArithmeticError):
                continue
    return out


def _first_break(pf: ParquetFile, rg: int, name: str, intended: str) -> tuple[int, int] | None:
    """The first consecutive non-null pages (i, j) against `intended`, as parquet-mr defines the order:
    ASCENDING when both the mins and the maxes never decrease (DESCENDING: never increase)."""
    keys = _page_keys(pf, rg, name)
    for (i, lo_i, hi_i), (j, lo_j, hi_j) in itertools.pairwise(keys):
        if intended == "ASCENDING" and (lo_j < lo_i or hi_j < hi_i):
            return i, j
        if intended == "DESCENDING" and (lo_j > lo_i or hi_j > hi_i):
            return i, j
    return None


def _why_unordered(f: OpenedFile, rg: int, name: str, intended: str, broken: tuple[int, int], ci: Any) -> str:
    i, j = broken
    pages = (f"page {i} [{ci.min_values[i]!r} .. {ci.max_values[i]!r}] comes before page {j} "
             f"[{ci.min_values[j]!r} .. {ci.max_values[j]!r}]")
    hint = ""
    others = [c.name for c in f.pf.columns if c.name != name and f.pf.has_column_index(rg, c.name)
              and f.pf.column_index(rg, c.name).boundary_order.name in ORDER_NAMES.values()
              and len(f.pf.column_index(rg, c.name).null_pages) > 1]
    if others:
        hint = f" (the pages are ordered in {', '.join(f'`{c}`' for c in others[:3])}: sorted by that instead?)"
    direction = "asc" if intended == "ASCENDING" else "desc"
    return (f"pages of `{name}` in row group {rg} are not {intended}: {pages}; the rows were not sorted by "
            f"`{name}` {direction} when written{hint}; sort each output file by the spec's first key (sort.keys) "
            "before writing, e.g. sortWithinPartitions after repartitionByRange")


# --- rule 3: ordered row groups, disjoint files ------------------------------------------------------


def _row_group_bounds(pf: ParquetFile, rg: int, name: str) -> tuple[Any, Any]:
    stats = pf.statistics_keys(rg, name)
    return (None, None) if stats is None else (stats.min, stats.max)


def check_row_group_order(f: OpenedFile, intent: Intent) -> Iterable[Finding]:
    key, pf = intent.first_key, f.pf
    if key is None or not pf.has_column(key.column) or pf.num_row_groups < 2:
        return
    bounds = [_row_group_bounds(pf, rg, key.column) for rg in range(pf.num_row_groups)]
    known = [(rg, lo, hi) for rg, (lo, hi) in enumerate(bounds) if lo is not None]  # all-null groups: no bound
    for (i, lo_i, hi_i), (j, lo_j, hi_j) in itertools.pairwise(known):
        bad = hi_i > lo_j if key.direction == "asc" else lo_i < hi_j
        if bad:
            shown = pf.statistics(i, key.column), pf.statistics(j, key.column)
            yield Finding(
                "row_group_order", "error", pf.path, j, key.column,
                f"row group {i} [{shown[0].min!r} .. {shown[0].max!r}], row group {j} "
                f"[{shown[1].min!r} .. {shown[1].max!r}]", f"row groups {ORDER_NAMES[key.direction]} and disjoint",
                f"row groups {i} and {j} overlap in `{key.column}`: the file was not written in "
                f"`{key.column}` {key.direction} order; sort each output file by sort.keys before writing")
            return  # one finding per file: the first break explains the rest


def check_overlap(files: Sequence[OpenedFile], intent: Intent) -> Iterable[Finding]:

    key = intent.first_key
    if key is None:
        return
    by_run: dict[tuple[str, str], list[tuple[str, Any, Any]]] = {}
    for f in files:
        if f.pf.has_column(key.column):
            by_run.setdefault((f.partition, f.run or ""), []).append((f.pf.path, *_file_bounds(f.pf, key.column)))
    yield from _stacked_runs(files, by_run, intent)
    for (label, run), ranges in sorted(by_run.items()):
        if len(ranges) < 2:
            continue
        where = f"partition {label!r}" + (f", sorted run {run}," if run else "")

        unknown = [p for p, lo, _ in ranges if lo is None]
        if unknown:
            yield Finding("overlap", "warning", unknown[0], None, key.column, "no statistics for the key",
                          "disjoint files", f"{len(unknown)} file(s) in {where} have no "
                          f"`{key.column}` statistics, so overlap cannot be checked; write statistics")
            continue
        depth = overlap_depth((lo, hi) for _, lo, hi in ranges)
        pair = _first_overlap(ranges)
        if depth > 1:
            (a, alo, ahi), (b, blo, bhi) = pair
            yield Finding("overlap", "error", b, None, key.column, f"overlap depth {depth}", "overlap depth 1",
                          f"files in {where} overlap in `{key.column}` (depth {depth}): {a} holds "
                          f"[{alo!r} .. {ahi!r}] and {b} [{blo!r} .. {bhi!r}]; range-partition the rewrite on the "
                          f"sort keys (repartitionByRange) so each file holds its own key range, then rewrite "
                          f"the partition again (lakesort compact --force --partition ...)")
        elif pair is not None:
            yield Finding("overlap", "warning", pair[1][0], None, key.column, "files touch",
                          "overlap depth 1", f"files in {where} only touch at `{key.column}` = "
                          f"{pair[0][2]!r} (one value split across two files); readers of that value read both")


def _stacked_runs(files: Sequence[OpenedFile], by_run: Mapping[tuple[str, str], list[tuple[str, Any, Any]]],
                  intent: Intent) -> Iterable[Finding]:
    """A table's partition may hold up to max_sorted_runs sorted runs (`layout.compaction.planning.sorted_runs`); deeper
    than that, a reader of one key reads more files than the spec allows until the next compaction."""
    if intent.max_sorted_runs is None or not any(f.run is not None for f in files):
        return
    by_partition: dict[str, list[tuple[str, Any, Any]]] = {}
    for (label, _), ranges in by_run.items():
        by_partition.setdefault(label, []).extend(ranges)
    for label, ranges in sorted(by_partition.items()):
        depth = overlap_depth((lo, hi) for _, lo, hi in ranges)
        if depth > intent.max_sorted_runs:
            runs = len({run for (part, run) in by_run if part == label})
            yield Finding("overlap", "warning", ranges[0][0], None, intent.first_key.column,
                          f"overlap depth {depth}", f"at most {intent.max_sorted_runs} sorted runs",
                          f"partition {label!r} holds {runs} sorted run(s) or unsorted file(s) overlapping {depth} deep "
                          f"in `{intent.first_key.column}`, more than max_sorted_runs ({intent.max_sorted_runs}); the "
                          "next compaction merges them (lakesort compact, or the nightly DAG)")


def _file_bounds(pf: ParquetFile, name: str) -> tuple[Any, Any]:
    """The file's [min, max] of `name`; (None, None) when a row group with values has no bounds."""
    los, his = [], []
    for rg in range(pf.num_row_groups):
        lo, hi = _row_group_bounds(pf, rg, name)
        if lo is None:
            stats = pf.statistics(rg, name)
            if stats is None or stats.null_count != pf.row_groups[rg].num_rows:
                return None, None
            continue  # an all-null row group bounds nothing
        los.append(lo)
        his.append(hi)
    return (min(los), max(his)) if los else (None, None)


def _first_overlap(ranges: Sequence[tuple[str, Any, Any]]) -> tuple[tuple[str, Any, Any], ...] | None:
    """The first two files whose ranges overlap or touch, in key order; None when all are disjoint."""
    ordered = sorted(ranges, key=lambda r: (r[1], r[2]))
    reach = ordered[0]
    for r in ordered[1:]:
        if r[1] <= reach[2]:
            return reach, r
        reach = r if r[2] > reach[2] else reach
    return None


# --- rule 4: sizes and pages ------------------------------------------------------------------------


def check_sizes(f: OpenedFile, intent: Intent) -> Iterable[Finding]:
    pf = f.pf
    low, high = intent.min_file_size, intent.max_file_size
    if pf.size < low or (high is not None and pf.size > high):
        yield Finding("file_size", "error", pf.path, None, None, f"{pf.size:,} bytes",
                      f"{low:,} .. {high or 0:,} bytes",
                      f"file of {pf.size:,} bytes is outside verify.min/max_file_size; the rewrite sizes files "
                      "from target_file_size: check the output file count of the job, or the bounds")
    low, high = intent.min_row_group_size, intent.max_row_group_size
    for rg in range(pf.num_row_groups):
        size = row_group_bytes(pf, rg)
        last = rg == pf.num_row_groups - 1  # a file's last row group holds what is left: legitimately small
        if (size < low and not last) or (high is not None and size > high):
            yield Finding("row_group_size", "error", pf.path, rg, None, f"{size:,} bytes",
                          f"{low:,} .. {high or 0:,} bytes",
                          f"row group {rg} has {size:,} compressed bytes, outside verify.min/max_row_group_size; "
                          "writer.row_group_size (parquet.block.size) sets the buffered size parquet-mr cuts at")


def check_pages(f: OpenedFile, intent: Intent) -> Iterable[Finding]:
    pf = f.pf
    counts, rows = [], []
    for rg in range(pf.num_row_groups):
        for column in pf.columns:
            page_rows = rows_per_page(pf, rg, column.name)
            if page_rows:
                counts.append(len(page_rows))
                rows.extend(page_rows)
    if counts:
        yield Finding("pages", "info", pf.path, None, None,
                      f"{pf.num_row_groups} row group(s); {min(counts)}..{max(counts)} pages per column chunk; "
                      f"{min(rows):,}..{max(rows):,} rows per page", f"at most {intent.page_row_limit or '-'} rows "
                      "per page", "page counts and sizes from the offset index, for the record")


# --- rule 5: bloom filters --------------------------------------------------------------------------


def check_bloom_filters(f: OpenedFile, intent: Intent) -> Iterable[Finding]:
    pf = f.pf
    for name in intent.bloom_columns:
        if not pf.has_column(name):
            yield Finding("bloom_filter", "error", pf.path, None, name, "column not in the file", "a bloom filter",
                          f"the spec asks for a bloom filter on `{name}` but the file has no such column")
            continue
        missing = [rg for rg in range(pf.num_row_groups) if not pf.has_bloom_filter(rg, name)]
        if not missing:
            continue
        dictionary = [rg for rg in missing if all_dictionary(pf, rg, name)]
        if dictionary:
            why = (f"{len(dictionary)} of these chunk(s) are dictionary-encoded in every data page, and parquet-mr "
                   "(ParquetFileWriter.writeColumnChunk) writes no bloom filter for such a chunk (the dictionary "
                   "answers the lookup, but only for readers that read dictionaries); write the column without "
                   f"dictionary encoding: parquet.enable.dictionary#{name}=false in the writer options "
                   "(or writer.dictionary: false for every column)")
        else:
            why = (f"the writer did not write one: check that it gets parquet.bloom.filter.enabled#{name}=true "
                   "(writer.bloom_filters)")
        yield Finding("bloom_filter", "error", pf.path, missing[0], name,
                      f"no bloom filter in {len(missing)} of {pf.num_row_groups} row group(s)",
                      "a bloom filter in every row group", f"bloom filter missing for `{name}`: {why}")


# --- rule 6: recorded sort metadata -----------------------------------------------------------------


def check_sorting_columns(files: Sequence[OpenedFile], intent: Intent) -> Iterable[Finding]:
    if not intent.sort_keys or not files:
        return
    absent = 0
    for f in files:
        recorded = f.pf.row_groups[0].sorting_columns if f.pf.row_groups else None
        if not recorded:
            absent += 1
            continue
        names = [f.pf.columns[c.column_idx].name if 0 <= (c.column_idx or 0) < len(f.pf.columns) else "?"
                 for c in recorded]
        got = [(n, bool(c.descending)) for n, c in zip(names, recorded)]
        want = [(k.column, k.direction == "desc") for k in intent.sort_keys]
        if got[:len(want)] != want[:len(got)]:
            yield Finding("sorting_columns", "warning", f.pf.path, 0, None, _keys_text(got), _keys_text(want),
                          "the file records it is sorted by other keys than the spec's: it was written under "
                          "another sort order; rewrite it (lakesort compact --force)")
    if absent:
        yield Finding("sorting_columns", "warning", None, None, None,
                      f"{absent} of {len(files)} file(s) record no sorting_columns", _keys_text(
                          [(k.column, k.direction == "desc") for k in intent.sort_keys]),
                      "RowGroup.sorting_columns is not written (Spark/parquet-mr never writes it), so readers "
                      "learn the order only from the column index; informational unless a reader needs it")


def _keys_text(keys: Sequence[tuple[str, bool]]) -> str:
    return ", ".join(f"{n} {'desc' if d else 'asc'}" for n, d in keys) or "none"


def check_sort_order_ids(table: Any, spec: TableSpec, paths: Sequence[str]) -> Iterable[Finding]:
    """Data files' Iceberg sort_order_id against the table's order (when the spec defaults to it)."""
    if spec.sort.keys:
        return  # the spec's own keys win: the table's sort order id says nothing about them
    order_id = table.sort_order().order_id
    wanted = set(paths)
    wrong = [f for f in live_data_files(table) if f.file_path in wanted and f.sort_order_id != order_id]
    if wrong:
        yield Finding("sort_order_id", "warning", wrong[0].file_path, None, None,
                      f"{len(wrong)} file(s) with sort_order_id {sorted({str(w.sort_order_id) for w in wrong})}",
                      f"sort_order_id {order_id}", "the data files do not record the table's sort order id: "
                      "the commit should set it (DataFile.sort_order_id) when the files are written in that order")


# --- rule 7: clustering of a curve layout ------------------------------------------------------------


def check_clustering(files: Sequence[OpenedFile], intent: Intent) -> Iterable[Finding]:
    """Per key of a curve, how narrow its ranges are (no BoundaryOrder to assert): for the record."""
    if intent.curve is not None:
        for note in curve_notes(files, intent.curve, [k.column for k in intent.curve_keys]):
            yield Finding("clustering", "info", None, None, note.column, note.observed, note.intended, note.diagnosis)


FILE_RULES: tuple[FileRule, ...] = (check_page_index, check_boundary_order, check_row_group_order, check_sizes,
                                    check_pages, check_bloom_filters)
RULES = ("page_index", "nan_column_index", "boundary_order", "row_group_order", "overlap", "row_group_size", "file_size", "pages",
         "bloom_filter", "sorting_columns", "sort_order_id", "clustering")


# --- entry points -----------------------------------------------------------------------------------


def verify_files(files: Iterable[Any], spec: TableSpec | None = None, *, sort_keys: Sequence[SortKey] | None = None,
                 partitions: Mapping[str, str] | None = None, runs: Mapping[str, str] | None = None) -> VerifyReport:
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
