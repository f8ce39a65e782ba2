"""The page index rules: a column index and an offset index in every chunk of the required columns.

``page_index`` (error) where one is missing, with why the writer left it out and the setting that keeps
it; ``nan_column_index`` (warning) where a float/double chunk holding NaN has none (parquet-mr writes
none there, whatever its settings). The whole list of rules is `layout.verify.rules`'s."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from layout.parquet import ParquetFile, PhysicalType
from layout.parquet import format as fmt
from layout.verify.facts import OpenedFile, nan_values
from layout.verify.findings import Finding, Intent

__all__ = ["check_page_index"]

# parquet-mr (ParquetFileWriter, 1.17) drops a chunk's column index when the min/max bytes it would
# store exceed this many bytes per page on average.
PARQUET_MR_MINMAX_PER_PAGE = 4096
# parquet-mr's default column index truncate length: any value up to half the limit always fits.
DEFAULT_TRUNCATE_LENGTH = 64
DEFAULT_PAGE_SIZE = 1 << 20


# --- rule 1: column index and offset index ------------------------------------------------------------


def check_page_index(f: OpenedFile, intent: Intent) -> Iterable[Finding]:
    pf = f.pf
    names = [c.name for c in pf.columns] if intent.index_columns == "all" else list(intent.index_columns)
    for name in names:
        if not pf.has_column(name):
            yield Finding("page_index", "error", pf.path, None, name, "column not in the file",
                          "column index and offset index",
                          f"`{name}` is required by verify.column_index_columns "
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
        if nan is None and not has and intent.read_values:  # the footer does not say: read the chunk
            # (only where the index is missing); a caller reading metadata only counts the chunk as missing
            # its index
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
                      f"no column index in {len(missing)} of {total} row group(s)",
                      "a column index in every row group" + (" without NaN" if lost else ""),
                      f"column index missing for `{name}`: "
                      + (_why_no_column_index(f, missing[0], name, intent) if intent.read_values
                         else f"the writer ({pf.created_by or 'unknown'}) wrote none"))
    if indexed:
        yield Finding("page_index", "error", pf.path, indexed[0], name,
                      f"a column index in row group(s) {_listed(indexed)} holding NaN",
                      "no column index where a chunk holds NaN",
                      f"row group(s) {_listed(indexed)} of `{name}` hold NaN (their footer statistics say "
                      f"so: a NaN bound, no NaN count) and still have a column index "
                      f"({pf.created_by or 'unknown writer'}): its page bounds were taken over NaN values, "
                      "so a reader may skip pages holding matches; write the file with parquet-mr (Spark), "
                      "which drops it, or store NaN as null")
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
    cause = ("parquet-mr (Spark's writer) writes no column index for a float/double column chunk holding "
             "NaN, and no writer setting changes that")
    cost = (f"readers cannot prune row group(s) {_listed(lost)} by `{name}`'s page index, nor by its row "
            "group statistics (they hold NaN as the max): a query filtering on it reads every page of them")
    fix = f"store NaN as null in `{name}` to keep them prunable"
    key = intent.first_key
    if key is None or key.column != name:
        return (f"NaN values of `{name}` are spread over the rows ("
                f"{'not the first sort key' if intent.sort_keys else 'no sort key'}"
                f"), so every row group holding one loses its column index: {cause}; {cost}; {fix}")
    where = "last" if key.direction == "asc" else "first"
    if mixed:
        return (f"row group(s) {_listed(mixed)} mix NaN with numbers in the first sort key `{name}`: the "
                f"write did not start a row group where the NaN rows begin (they sort {where} for `{name}` "
                f"{key.direction}), so the numbers there lost the column index too; {cause}; {cost}. "
                f"lakesort's compaction cuts there: rewrite the partition (lakesort compact --force "
                f"--partition ...), or {fix}")
    return (f"only row group(s) {_listed(lost)}, holding the NaN rows of the first sort key `{name}` (they "
            f"sort {where} for `{name}` {key.direction}, and the write starts a row group where they begin), "
            f"lack it: {cause}; {cost}; every other row group keeps it. To keep those too, {fix}")


def _why_no_offset_index(pf: ParquetFile) -> str:
    return (f"the writer ({pf.created_by or 'unknown'}) wrote none; parquet-mr always writes one, "
            "pyarrow only with write_page_index=True")


def _why_no_column_index(f: OpenedFile, rg: int, name: str, intent: Intent) -> str:
    column = f.pf.column(name)
    if column.type.physical_type == PhysicalType.INT96:
        return ("parquet-mr writes no column index for INT96 timestamps; write timestamps as INT64 "
                "(Spark: spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS)")
    if column.type.physical_type != PhysicalType.BYTE_ARRAY:
        return (f"the writer ({f.pf.created_by or 'unknown'}) wrote none although "
                f"{column.type.physical_type} bounds are small; check that it writes page indexes "
                "(pyarrow: write_page_index=True)")
    pages, per_page, how = _minmax_bytes_per_page(f, rg, name)
    current = intent.truncate_length
    limit = PARQUET_MR_MINMAX_PER_PAGE
    if per_page is None or per_page <= limit:
        shown = "unknown" if per_page is None else f"{per_page:,.0f}"
        return (f"min/max values average {shown} bytes per page over {pages:,} page(s) ({how}), within "
                f"parquet-mr's {limit:,}-byte limit: the writer did not write one; check that it writes page "
                "indexes (pyarrow: write_page_index=True)")
    if current is not None and 2 * current <= limit:
        fix = (f"the spec's writer.column_index_truncate_length ({current}) would keep it under the limit, "
               f"so the file was not written with it: pass parquet.columnindex.truncate.length={current} "
               f"to the writer")
    else:
        fix = (f"set writer.column_index_truncate_length (currently "
               f"{current if current is not None else 'unknown'})"
               f" to {DEFAULT_TRUNCATE_LENGTH} (any value up to {limit // 2:,} keeps min+max within "
               f"{limit:,} bytes)")
    return (f"column index dropped for `{name}` in row group {rg}: min/max values average {per_page:,.0f} "
            f"bytes per page over {pages:,} page(s) ({how}), over parquet-mr's {limit:,}-byte limit; {fix}")


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
    md = fmt.chunk_metadata(pf.row_groups[rg].columns[column.index])
    pages = len(starts) or _estimated_pages(md)
    sizes = md.size_statistics
    if sizes is not None and sizes.unencoded_byte_array_data_bytes and md.num_values:
        # Average value length times two: the best guess without reading the values.
        return (pages, 2 * sizes.unencoded_byte_array_data_bytes / md.num_values,
                "estimated from size statistics")
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
