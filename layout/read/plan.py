"""`plan(source, where, columns)`: exactly what a page-index-aware reader must read, level by level.

Files (Iceberg manifest bounds through pyiceberg, or the footers' row-group statistics aggregated),
row groups (footer statistics, then bloom filters for `=` / `IN`), pages (column indexes, binary
search when ordered) into row selections intersected across the columns of an AND and united for an
OR. A plan is a value: planning produces it, `layout.read.scan` reads it. Pruning is sound: the selection
holds every matching row; `layout.read.scan.read_table` then filters exactly.

Through the metadata cache (the default), a file's footer and each column chunk's page structures (the
search structure over its column index, its pages' first rows and byte sums) are built once per file
version; a warm plan then costs O(log pages) per searched chunk on an ordered column index.

Counts: `*_total` are over the whole source, `*_selected` what survives. Pages and bytes count the
column chunks of the projected and predicate columns (a chunk without an offset index counts as one
page, read whole), bytes as compressed chunk sizes (`*_selected`: the pages a reader fetches plus the
dictionary page it also fetches), so that bytes selected over bytes total is the share of those
columns' data a reader fetches. A directory's files are all opened, so every count comes from footers.
An Iceberg table's planning opens only the files its manifests keep (see `layout.read.iceberg`), so
the totals of the files it does not open come from their manifest entries: `files_total`,
`rows_total` (record counts) and `bytes_total` (column sizes: the same compressed chunk sizes a footer
sums, per field id; a file whose entry lacks one of the columns is opened for its footer instead).
`row_groups_total` and `pages_total` only footers know: they are None unless every file was opened
(the manifests kept them all, or `exact_totals=True`); `*_selected` are always counts.

A merge-on-read Iceberg table's plan also counts the delete files a reader must open for the data files
it selects (`delete_files_selected`, `delete_bytes_selected`: distinct, a delete file that applies to
several selected files is read once) and for the whole snapshot (`delete_*_total`), by Iceberg's rules
(`layout.read.iceberg.SnapshotDeletes`). Rows are still the data files' rows: a reader reads them and then
drops the deleted ones, which only the delete files' contents tell, so no count subtracts them.
`layout.read.scan` reads the data files' rows as they are: it does not apply deletes.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from layout.catalog import load_table
from layout.errors import UsageError
from layout.expr.bind import Kind, bind
from layout.expr.predicate import AlwaysTrue, Expr, rewrite_not
from layout.expr.predicate import columns as expr_columns
from layout.expr.sql import parse_where
from layout.io import list_parquet_files, resolve, table_identifier
from layout.parquet import ColumnType, ParquetFile
from layout.parquet.format import chunk_metadata
from layout.read.cache import FileKey, MetadataCache, default_cache, file_key, filesystem_id
from layout.read.chunks import ChunkPages, ChunkStructures, chunk_pages
from layout.read.iceberg import (
    IcebergFile,
    SnapshotScan,
    Unkept,
    field_ids,
    iceberg_kinds,
    snapshot_of,
    snapshot_scan,
)
from layout.read.plan_values import FilePlan, Plan, PlanCounts, RowGroupPlan
from layout.read.pruning import BloomEvaluator, ColumnStats, PageSelector, StatsEvaluator, Truth
from layout.read.selection import RowSelection

log = logging.getLogger(__name__)

# Decoded metadata takes several times its encoded size in Python objects; the cache bounds by this.
DECODED_SIZE_FACTOR = 8
# What one cached item costs the cache beyond its value (entry, dict and LRU slots, key tuple).
CACHE_ITEM_OVERHEAD = 512

_KINDS = {
    "bool": Kind.BOOLEAN, "int": Kind.INTEGER, "float": Kind.FLOAT, "double": Kind.FLOAT,
    "float16": Kind.FLOAT, "decimal": Kind.DECIMAL, "string": Kind.STRING, "binary": Kind.BINARY,
    "uuid": Kind.BINARY, "date": Kind.DATE, "time": Kind.TIME, "int96": Kind.TIMESTAMP,
}


def kind_of(ct: ColumnType) -> Kind | None:
    """The predicate kind of a Parquet column type (None: not comparable)."""
    if ct.kind == "timestamp":
        return Kind.TIMESTAMP_TZ if ct.utc else Kind.TIMESTAMP
    return _KINDS.get(ct.kind)


def plan(
    source: str | os.PathLike[str],
    where: str | Expr | None = None,
    columns: Sequence[str] | None = None,
    *,
    cache: MetadataCache | Literal[False] | None = None,
    snapshot_id: int | None = None,
    exact_totals: bool = False,
) -> Plan:
    """Plan a read of `source` (a Parquet file, a directory, or an Iceberg table `ns.table`).

    `where` is SQL text or a predicate; `columns` the projection (None: all). `cache=None` uses the
    process-wide metadata cache, `False` none, or pass a `MetadataCache`. `snapshot_id` plans an
    older snapshot of an Iceberg table (time travel); the current one by default. `exact_totals=True`
    opens the footer of every file of an Iceberg table, the ones its manifests rule out too, so that
    `row_groups_total` and `pages_total` are counts rather than None (see the module docstring); it
    costs what a directory always costs, a footer per file, and changes no other count.
    """
    started = time.perf_counter()
    the_cache = default_cache() if cache is None else (None if cache is False else cache)
    expr = parse_where(where) if isinstance(where, str) else (where if where is not None else AlwaysTrue())
    scope = _scope(os.fspath(source), expr, the_cache, snapshot_id, exact_totals)
    first, bound = scope.first, scope.bound
    predicate_columns = sorted(expr_columns(bound))
    projected = tuple(columns) if columns is not None else None
    for name in (*predicate_columns, *(projected or ())):
        first.pf.column(name)  # UsageError naming the file and the valid columns
    needed = _needed(predicate_columns, projected, first.pf)
    if scope.scan is not None and not exact_totals:
        scope.add_unkept(needed)
    tally: Counter[str] = Counter()
    file_plans = []
    selected: list[int] = []  # indexes into the Iceberg scan's files of the selected ones: their deletes
    comparisons = 0
    # Pages a file holds need its offset indexes; not worth reading for a total that will be None.
    count_pages = scope.unkept is None or scope.unkept.files == 0
    for entry, keep in scope.entries:
        facts = first if entry.path == first.key.path else _open(entry, the_cache)
        chunks = ChunkStructures(facts.pf) if the_cache is None else _CachedChunks(facts, the_cache)
        planned, n = _plan_file(facts, entry, bound, predicate_columns, needed, keep, count_pages,
                                tally, chunks)
        comparisons += n
        if planned is not None:
            file_plans.append(planned)
            if entry.index is not None:
                selected.append(entry.index)
        _recache(facts, the_cache)
    counts = scope.counts(tally, selected)
    elapsed = (time.perf_counter() - started) * 1000
    log.info("planned %s: files %d/%d, row groups %d/%s, pages %d/%s, rows %d/%d in %.1f ms",
             source, counts.files_selected, counts.files_total, counts.row_groups_selected,
             counts.row_groups_total, counts.pages_selected, counts.pages_total, counts.rows_selected,
             counts.rows_total, elapsed)
    if counts.delete_files_total:
        log.info("planned %s: delete files %d/%d (%d/%d bytes) to merge", source,
                 counts.delete_files_selected, counts.delete_files_total, counts.delete_bytes_selected,
                 counts.delete_bytes_total)
    return Plan(os.fspath(source), bound, projected, tuple(file_plans), counts, elapsed, comparisons)


@dataclass(frozen=True, slots=True)
class _Entry:
    filesystem: Any
    path: str
    size: int | None  # known from a manifest or the listing: no stat needed
    mtime_ns: int | None = None  # from the listing (None for Iceberg files: their paths are never reused)
    index: int | None = None  # an Iceberg file's index in its SnapshotScan's files (its delete files)


class _Scope:
    """The files a plan opens, the bound predicate, and the totals of the files it does not open.

    `entries` pairs each file to open with whether to plan it: True (the manifests keep it), False
    (opened for its totals only: `exact_totals`, or a manifest entry without the columns' sizes), None
    (decided by its footer's statistics: a directory's files). `first` is the file whose footer bound
    the predicate and checks the column names; it is opened, but planned only if it is in `entries`.
    """

    __slots__ = ("bound", "entries", "first", "scan", "table", "unkept")

    def __init__(self, entries: list[tuple[_Entry, bool | None]], first: _FileFacts, bound: Expr,
                 scan: SnapshotScan | None = None, table: Any = None) -> None:
        self.entries, self.first, self.bound, self.scan, self.table = entries, first, bound, scan, table
        self.unkept: Unkept | None = None  # the manifests' totals of the files not in `entries`

    def add_unkept(self, needed: list[str]) -> None:
        """Plan the kept files only; the manifests give the others' totals, or their footers when they lack
        the sizes of the `needed` columns."""
        scan = self.scan
        assert scan is not None  # only for Iceberg sources
        unkept = scan.unkept(field_ids(self.table, needed))
        kept = scan.kept
        if unkept.unsized:  # these are opened after all, in the manifests' order with the kept ones
            opened = sorted({*kept, *unkept.unsized})
            kept_set = set(kept)
            self.entries = [(_iceberg_entry(scan.files, i), i in kept_set) for i in opened]
            unsized = [scan.files[i] for i in unkept.unsized]
            # their footers count them: take them out of the manifests' share
            unkept = Unkept(unkept.files - len(unsized), unkept.rows - sum(f.record_count for f in unsized),
                            unkept.bytes, ())
        self.unkept = unkept

    def counts(self, tally: Counter[str], selected: Sequence[int] = ()) -> PlanCounts:
        """The counts from the footers' `tally`, the manifests' totals of the files not opened, and the delete
        files of the `selected` files (indexes into the scan's files)."""
        scan = self.scan
        if scan is not None and scan.deletes is not None:
            chosen, whole = scan.delete_read(selected), scan.delete_total
            tally.update(delete_files_selected=chosen.files, delete_bytes_selected=chosen.bytes,
                         delete_files_total=whole.files, delete_bytes_total=whole.bytes)
        rest = self.unkept
        if rest is None or rest.files == 0:  # every file was opened: all counts from footers
            return PlanCounts(**tally)
        return replace(
            PlanCounts(**tally), files_total=tally["files_total"] + rest.files,
            rows_total=tally["rows_total"] + rest.rows, bytes_total=tally["bytes_total"] + rest.bytes,
            row_groups_total=None, pages_total=None,
        )


def _scope(source: str, expr: Expr, cache: MetadataCache | None, snapshot_id: int | None,
           exact_totals: bool) -> _Scope:
    identifier = table_identifier(source)
    if identifier is None:
        if snapshot_id is not None:
            raise UsageError(f"{source}: a snapshot id needs an Iceberg table (namespace.name), not a path")
        entries = [_Entry(f, i.path, i.size, i.mtime_ns) for f, i in list_parquet_files(source)]
        if not entries:
            raise UsageError(f"{source}: no data files to plan (an empty table or directory)")
        first = _open(entries[0], cache)
        return _Scope([(e, None) for e in entries], first, _bind(expr, _kinds(first.pf)))
    table = load_table(identifier)
    snapshot = snapshot_of(table, snapshot_id)
    if snapshot is None:
        raise UsageError(f"{source}: no data files to plan (an empty table or directory)")
    # Manifest pruning needs the bound predicate before any footer is read: bind it by the table's
    # schema, then check that binding against the footer of the first file opened, and prune again in
    # the rare case they differ (a type the schema and the file map to different kinds, a name only
    # one of them has), so that the manifests always prune with the predicate the pages are pruned with.
    ice_kinds = iceberg_kinds(table)
    try:
        guess = _bind(expr, ice_kinds)
    except UsageError:
        guess = AlwaysTrue()  # keeps every file; the footer's binding below reports the error, if any
    scan = snapshot_scan(table, guess, cache, snapshot)
    if not scan.files:
        raise UsageError(f"{source}: no data files to plan (an empty table or directory)")
    # The first kept file; when the manifests keep none, the first file, only to check the binding.
    first = _open(_iceberg_entry(scan.files, scan.kept[0] if scan.kept else 0), cache)
    kinds = _kinds(first.pf)
    bound = _bind(expr, kinds)
    if bound != guess or any(ice_kinds.get(c) is not kinds.get(c) for c in expr_columns(bound)):
        log.info("%s: the table's schema binds %s otherwise than the footer of %s; pruning again",
                 source, expr, first.pf.path)
        scan = snapshot_scan(table, bound, cache, snapshot)
    kept = set(scan.kept)
    chosen: list[tuple[_Entry, bool | None]]
    if exact_totals:
        chosen = [(_iceberg_entry(scan.files, i), i in kept) for i in range(len(scan.files))]
    else:
        chosen = [(_iceberg_entry(scan.files, i), True) for i in scan.kept]
    return _Scope(chosen, first, bound, scan, table)


def _iceberg_entry(files: Sequence[IcebergFile], index: int) -> _Entry:
    f = files[index]
    filesystem, path = resolve(f.path)
    return _Entry(filesystem, path, f.size, index=index)


def _kinds(pf: ParquetFile) -> dict[str, Kind]:
    return {c.name: k for c in pf.columns if (k := kind_of(c.type)) is not None}


def _bind(expr: Expr, kinds: dict[str, Kind]) -> Expr:
    return rewrite_not(bind(expr, kinds))


class _FileFacts:
    """A ParquetFile plus what planning derives from it, cached together per file version.

    Warm planning then costs a few dictionary lookups per file: statistics as order keys and per-chunk
    page and byte totals are computed once, not on every plan.
    """

    __slots__ = ("_file_stats", "_file_totals", "_stats", "_totals", "accounted", "fs_id", "index", "key",
                 "pf", "read_ahead")

    def __init__(self, pf: ParquetFile, key: Any, fs_id: str) -> None:
        self.pf, self.key, self.fs_id = pf, key, fs_id
        self.index = {c.name: c.index for c in pf.columns}
        self.accounted = 0  # bytes_read when the cache last sized this entry
        self.read_ahead: set[tuple[Any, ...]] = set()  # what `_read_ahead` read for this file already
        self._stats: dict[tuple[int, int], ColumnStats] = {}
        self._totals: dict[tuple[int, int], tuple[int, int]] = {}
        self._file_totals: dict[tuple[int, ...], tuple[int, int]] = {}
        self._file_stats: dict[tuple[tuple[str, int], ...], dict[str, ColumnStats | None]] = {}

    def file_totals(self, cols: tuple[int, ...]) -> tuple[int, int]:
        """(pages, bytes) of the given columns over the whole file."""
        try:
            return self._file_totals[cols]
        except KeyError:
            pass
        per_chunk = [self.totals(rg, c) for rg in range(self.pf.num_row_groups) for c in cols]
        value = (sum(p for p, _ in per_chunk), sum(b for _, b in per_chunk))
        self._file_totals[cols] = value
        return value

    def file_bytes(self, cols: tuple[int, ...]) -> int:
        """Compressed bytes of the given columns over the whole file (the footer alone:
        no page index read)."""
        try:
            return self._file_totals[cols][1]
        except KeyError:
            pass
        groups = self.pf.row_groups
        return sum(chunk_metadata(groups[rg].columns[c]).total_compressed_size
                   for rg in range(len(groups)) for c in cols)

    def file_stats(self, present: tuple[tuple[str, int], ...]) -> dict[str, ColumnStats | None]:
        """Each predicate column's bounds over the whole file (its row groups' merged)."""
        try:
            return self._file_stats[present]
        except KeyError:
            pass
        groups = range(self.pf.num_row_groups)
        value = {n: _merge([self.stats(rg, c) for rg in groups]) for n, c in present}
        self._file_stats[present] = value
        return value

    def stats(self, rg: int, col: int) -> ColumnStats:
        try:
            return self._stats[rg, col]
        except KeyError:
            pass
        pf = self.pf
        ct = pf.columns[col].type
        num_rows = pf.row_groups[rg].num_rows
        s = pf.statistics_keys(rg, col)
        value = ColumnStats(ct, num_rows) if s is None else ColumnStats(
            ct, num_rows, s.min, s.max, s.min_exact, s.max_exact, s.null_count, s.nan_count)
        self._stats[rg, col] = value
        return value

    def totals(self, rg: int, col: int) -> tuple[int, int]:
        """(pages, compressed bytes) of one chunk; a chunk without an offset index counts as one page."""
        try:
            return self._totals[rg, col]
        except KeyError:
            pass
        oi = self.pf.offset_index(rg, col)
        pages = len(oi.page_locations) if oi is not None and oi.page_locations else 1
        value = (pages, chunk_metadata(self.pf.row_groups[rg].columns[col]).total_compressed_size)
        self._totals[rg, col] = value
        return value


def _open(entry: _Entry, cache: MetadataCache | None) -> _FileFacts:
    fs_id = filesystem_id(entry.filesystem)
    key = FileKey(entry.path, entry.size, entry.mtime_ns) if entry.size is not None else \
        file_key(entry.filesystem, entry.path)

    def parquet_file() -> ParquetFile:
        # The size a manifest or listing gave (or the stat the key took): the footer read asks no more.
        return ParquetFile.open(entry.path, filesystem=entry.filesystem, size=key.size)

    if cache is None:
        return _FileFacts(parquet_file(), key, fs_id)

    def load() -> tuple[_FileFacts, int]:
        facts = _FileFacts(parquet_file(), key, fs_id)
        facts.accounted = facts.pf.bytes_read
        return facts, facts.accounted * DECODED_SIZE_FACTOR

    return cache.get_or_load(fs_id, key, "parquet", load)


class _CachedChunks(ChunkStructures):
    """Page structures of one file's chunks through the metadata cache, next to the file's footer.

    Each is an item of its own, `("page_search", rg, col)` or `("chunk_pages", rg, col)`, under the file's
    `FileKey`: built once per file version (a rewritten file has a new key, so it never gets the old
    structures), sized by what it keeps alive (column-index bounds included, though the footer's entry
    counts them too: over rather than under the byte budget), evicted like any other item. A warm
    plan's lookup is a few dictionary operations.
    """

    def __init__(self, facts: _FileFacts, cache: MetadataCache) -> None:
        super().__init__(facts.pf)
        self.facts, self.cache = facts, cache

    def _load(self, item: Hashable, build: Callable[[], Any]) -> Any:
        def load() -> tuple[Any, int]:
            value = build()
            return value, CACHE_ITEM_OVERHEAD + (value.nbytes if value is not None else 0)

        return self.cache.get_or_load(self.facts.fs_id, self.facts.key, item, load)


def _recache(facts: _FileFacts, cache: MetadataCache | None) -> None:
    """Page indexes read while planning live in the ParquetFile: re-size its cache entry when it grew."""
    if cache is not None and facts.pf.bytes_read != facts.accounted:
        facts.accounted = facts.pf.bytes_read
        cache.put(facts.fs_id, facts.key, "parquet", facts, facts.accounted * DECODED_SIZE_FACTOR)


def _plan_file(
    facts: _FileFacts, entry: _Entry, expr: Expr, predicate_columns: list[str], needed: list[str],
    keep: bool | None, count_pages: bool, tally: Counter[str], chunks: ChunkStructures,
) -> tuple[FilePlan | None, int]:
    pf = facts.pf
    tally["files_total"] += 1
    tally["rows_total"] += pf.num_rows
    cols = tuple(facts.index[n] for n in needed if n in facts.index)
    n_groups = pf.num_row_groups
    tally["row_groups_total"] += n_groups
    present = tuple((n, facts.index[n]) for n in predicate_columns if n in facts.index)
    # Files: manifest bounds (Iceberg: decided before opening) or the row groups' statistics merged.
    if keep is None:
        keep = StatsEvaluator(facts.file_stats(present)).eval(expr) is not Truth.NONE
    stats = [{n: facts.stats(rg, c) for n, c in present} for rg in range(n_groups)] if keep else []
    truths = [StatsEvaluator(s).eval(expr) for s in stats]
    _read_ahead(facts, cols, present, truths, count_pages)
    if count_pages:
        pages, nbytes = facts.file_totals(cols)
        tally["pages_total"] += pages
    else:
        nbytes = facts.file_bytes(cols)
    tally["bytes_total"] += nbytes
    if not keep:
        return None, 0
    planned, comparisons = [], 0
    for rg in range(n_groups):
        num_rows = pf.row_groups[rg].num_rows
        truth = truths[rg]
        if truth is not Truth.NONE and truth is not Truth.ALL:
            blooms = {n: pf.bloom_filter(rg, c) for n, c in present if pf.has_bloom_filter(rg, c)}
            if blooms and BloomEvaluator(blooms).eval(expr) is Truth.NONE:
                truth = Truth.NONE
        if truth is Truth.NONE or num_rows == 0:
            continue
        if truth is Truth.ALL:
            selection = RowSelection.all(num_rows)
        else:
            selector = PageSelector(pf, rg, num_rows, chunks)
            selection = selector.select(expr)
            comparisons += selector.comparisons
        if not selection:
            continue
        tally["row_groups_selected"] += 1
        tally["rows_selected"] += selection.row_count
        for c in cols:
            if selection.row_count == num_rows:  # everything: the totals, no page arithmetic
                pages, nbytes = facts.totals(rg, c)
            else:
                pages, nbytes = _fetched(chunks.pages(rg, c), pf, rg, c, selection)
            tally["pages_selected"] += pages
            tally["bytes_selected"] += nbytes
        planned.append(RowGroupPlan(rg, num_rows, selection, truth is Truth.ALL))
    if not planned:
        return None, comparisons
    tally["files_selected"] += 1  # a file counts as selected when a reader has anything to read in it
    return FilePlan(pf.path, tuple(planned), entry.filesystem), comparisons


def _read_ahead(facts: _FileFacts, cols: tuple[int, ...], present: tuple[tuple[str, int], ...],
                truths: list[Truth], count_pages: bool) -> None:
    """Read, in one request where the gap allows, every page index and bloom filter planning this file
    will ask for, instead of one request per chunk (on an object store each costs a round trip and a
    fee): the offset indexes of the counted columns (of every row group when pages are totalled, else of
    the row groups the statistics keep) and, in the row groups the statistics leave undecided, the
    predicate columns' column indexes, offset indexes and bloom filters. Done once per file version
    and predicate outcome (`facts.read_ahead`), so a warm plan does not walk the chunks again."""
    kept = [rg for rg, t in enumerate(truths) if t is not Truth.NONE]
    undecided = [rg for rg in kept if truths[rg] is not Truth.ALL]
    what = (cols, present, tuple(kept), tuple(undecided), count_pages)
    if what in facts.read_ahead:
        return
    pf = facts.pf
    counted = range(pf.num_row_groups) if count_pages else kept
    searched = [(rg, c) for rg in undecided for _, c in present]
    pf.prefetch(
        offset_index=[*((rg, c) for rg in counted for c in cols), *searched],
        column_index=[(rg, c) for rg, c in searched if pf.columns[c].max_repetition_level == 0],
        bloom_filter=[(rg, c) for rg, c in searched if pf.has_bloom_filter(rg, c)],
    )
    if len(facts.read_ahead) >= 64:  # one entry per predicate outcome: bounded, as a cached value must be
        facts.read_ahead.clear()
    facts.read_ahead.add(what)


def _merge(stats: list[ColumnStats | None]) -> ColumnStats | None:
    present = [s for s in stats if s is not None]
    if not stats or len(present) < len(stats):
        return None
    out = present[0]
    for s in present[1:]:
        out = out.merge(s)
    return out


def selected_pages(pf: ParquetFile, rg: int, col: int, selection: RowSelection) -> tuple[int, int]:
    """Pages of one chunk a reader fetches for `selection`, and their bytes (dictionary page included)."""
    return _fetched(chunk_pages(pf, rg, col), pf, rg, col, selection)


def _fetched(pages: ChunkPages | None, pf: ParquetFile, rg: int, col: int,
             selection: RowSelection) -> tuple[int, int]:
    if pages is None:  # no offset index, or a repeated column: the whole chunk as one page
        return 1, chunk_metadata(pf.row_groups[rg].columns[col]).total_compressed_size
    return pages.fetched(selection)


def needed_columns(plan: Plan, pf: ParquetFile) -> list[str]:
    """The columns a plan's counts cover in `pf`: the predicate's and the projection (None: all)."""
    return [n for n in _needed(expr_columns(plan.predicate), plan.columns, pf) if pf.has_column(n)]


def _needed(predicate_columns: Iterable[str], projected: Sequence[str] | None, pf: ParquetFile) -> list[str]:
    return sorted(set(predicate_columns)
                  | set(projected if projected is not None else (c.name for c in pf.columns)))


__all__ = ["FilePlan", "Plan", "PlanCounts", "RowGroupPlan", "kind_of", "needed_columns", "plan",
           "selected_pages"]
