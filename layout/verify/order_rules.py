"""The ordering rules: pages, row groups and files in the order of the spec's sort keys.

``boundary_order`` the column index's BoundaryOrder; ``row_group_order`` a file's row groups in the
first sort key; ``overlap`` the files of a sorted run disjoint in it, and a partition's runs no deeper
than max_sorted_runs; ``sorting_columns`` / ``sort_order_id`` the sort a file records; ``clustering``
the overlap of each key of a curve layout. Equal first-key values on both sides of a boundary are
ties, not breaks: `layout.verify.rules` says why."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from layout.io import live_data_files
from layout.parquet import ParquetFile
from layout.read.overlap import overlap_depth
from layout.verify.clustering import curve_notes
from layout.verify.facts import OpenedFile
from layout.verify.findings import Finding, Intent

if TYPE_CHECKING:

    from layout.spec import TableSpec

__all__ = [
    "check_boundary_order", "check_clustering", "check_overlap", "check_row_group_order",
    "check_sort_order_ids", "check_sorting_columns",
]

ORDER_NAMES = {"asc": "ASCENDING", "desc": "DESCENDING"}


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
    if raw is None:
        return []
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
              and (ci := f.pf.column_index(rg, c.name)) is not None
              and ci.boundary_order.name in ORDER_NAMES.values() and len(ci.null_pages) > 1]
    if others:
        hint = (f" (the pages are ordered in {', '.join(f'`{c}`' for c in others[:3])}: sorted by that "
                f"instead?)")
    direction = "asc" if intended == "ASCENDING" else "desc"
    return (f"pages of `{name}` in row group {rg} are not {intended}: {pages}; the rows were not sorted by "
            f"`{name}` {direction} when written{hint}; sort each output file by the spec's first key "
            "(sort.keys) before writing, e.g. sortWithinPartitions after repartitionByRange")


# --- rule 3: ordered row groups, disjoint files ------------------------------------------------------


def _row_group_bounds(pf: ParquetFile, rg: int, name: str) -> tuple[Any, Any]:
    stats = pf.statistics_keys(rg, name)
    return (None, None) if stats is None else (stats.min, stats.max)


def check_row_group_order(f: OpenedFile, intent: Intent) -> Iterable[Finding]:
    key, pf = intent.first_key, f.pf
    if key is None or not pf.has_column(key.column) or pf.num_row_groups < 2:
        return
    bounds = [_row_group_bounds(pf, rg, key.column) for rg in range(pf.num_row_groups)]
    # all-null groups: no bound
    known = [(rg, lo, hi) for rg, (lo, hi) in enumerate(bounds) if lo is not None]
    for (i, lo_i, hi_i), (j, lo_j, hi_j) in itertools.pairwise(known):
        bad = hi_i > lo_j if key.direction == "asc" else lo_i < hi_j
        if bad:
            shown = pf.statistics(i, key.column), pf.statistics(j, key.column)
            assert shown[0] is not None and shown[1] is not None  # both have bounds (`known`)
            yield Finding(
                "row_group_order", "error", pf.path, j, key.column,
                f"row group {i} [{shown[0].min!r} .. {shown[0].max!r}], row group {j} "
                f"[{shown[1].min!r} .. {shown[1].max!r}]",
                f"row groups {ORDER_NAMES[key.direction]} and disjoint",
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
            by_run.setdefault((f.partition, f.run or ""), []).append(
                (f.pf.path, *_file_bounds(f.pf, key.column)))
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
        if depth > 1 and pair is not None:  # depth over 1: a pair overlaps
            (a, alo, ahi), (b, blo, bhi) = pair
            yield Finding("overlap", "error", b, None, key.column, f"overlap depth {depth}",
                          "overlap depth 1",
                          f"files in {where} overlap in `{key.column}` (depth {depth}): {a} holds "
                          f"[{alo!r} .. {ahi!r}] and {b} [{blo!r} .. {bhi!r}]; range-partition the rewrite "
                          f"on the sort keys (repartitionByRange) so each file holds its own key range, then "
                          f"rewrite the partition again (lakesort compact --force --partition ...)")
        elif pair is not None:
            yield Finding("overlap", "warning", pair[1][0], None, key.column, "files touch",
                          "overlap depth 1", f"files in {where} only touch at `{key.column}` = "
                          f"{pair[0][2]!r} (one value split across two files); readers of that value read "
                          f"both")


def _stacked_runs(files: Sequence[OpenedFile], by_run: Mapping[tuple[str, str], list[tuple[str, Any, Any]]],
                  intent: Intent) -> Iterable[Finding]:
    """A table's partition may hold up to max_sorted_runs sorted runs
    (`layout.compaction.planning.sorted_runs`); deeper than that, a reader of one key reads more files than
    the spec allows until the next compaction."""
    key = intent.first_key
    if intent.max_sorted_runs is None or key is None or not any(f.run is not None for f in files):
        return
    by_partition: dict[str, list[tuple[str, Any, Any]]] = {}
    for (label, _), ranges in by_run.items():
        by_partition.setdefault(label, []).extend(ranges)
    for label, ranges in sorted(by_partition.items()):
        depth = overlap_depth((lo, hi) for _, lo, hi in ranges)
        if depth > intent.max_sorted_runs:
            runs = len({run for (part, run) in by_run if part == label})
            yield Finding("overlap", "warning", ranges[0][0], None, key.column,
                          f"overlap depth {depth}", f"at most {intent.max_sorted_runs} sorted runs",
                          f"partition {label!r} holds {runs} sorted run(s) or unsorted file(s) overlapping "
                          f"{depth} deep in `{key.column}`, more than max_sorted_runs "
                          f"({intent.max_sorted_runs}); the next compaction merges them (lakesort compact, "
                          "or the nightly DAG)")


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
                      "RowGroup.sorting_columns is not written (Spark/parquet-mr never writes it), so "
                      "readers learn the order only from the column index; informational unless a reader "
                      "needs it")


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
                      f"{len(wrong)} file(s) with sort_order_id "
                      f"{sorted({str(w.sort_order_id) for w in wrong})}",
                      f"sort_order_id {order_id}", "the data files do not record the table's sort order id: "
                      "the commit should set it (DataFile.sort_order_id) when the files are written in that "
                      "order")


# --- rule 7: clustering of a curve layout ------------------------------------------------------------


def check_clustering(files: Sequence[OpenedFile], intent: Intent) -> Iterable[Finding]:
    """Per key of a curve, how narrow its ranges are (no BoundaryOrder to assert): for the record."""
    if intent.curve is not None:
        for note in curve_notes(files, intent.curve, [k.column for k in intent.curve_keys]):
            yield Finding("clustering", "info", None, None, note.column, note.observed, note.intended,
                          note.diagnosis)
