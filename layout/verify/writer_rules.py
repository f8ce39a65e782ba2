"""The rules of what the writer's settings decide: file and row group sizes, pages, bloom filters.

``file_size`` / ``row_group_size`` within the spec's verify bounds (error); ``pages`` per row group and
rows per page (info); ``bloom_filter`` where the spec asks for one (error), with why a writer left it
out. The whole list of rules is `layout.verify.rules`'s."""

from __future__ import annotations

from collections.abc import Iterable

from layout.verify.facts import OpenedFile, all_dictionary, row_group_bytes, rows_per_page
from layout.verify.findings import Finding, Intent

__all__ = ["check_bloom_filters", "check_pages", "check_sizes"]


# --- rule 4: sizes and pages ------------------------------------------------------------------------


def check_sizes(f: OpenedFile, intent: Intent) -> Iterable[Finding]:
    pf = f.pf
    low, high = intent.min_file_size, intent.max_file_size
    if pf.size < low or (high is not None and pf.size > high):
        yield Finding("file_size", "error", pf.path, None, None, f"{pf.size:,} bytes",
                      f"{low:,} .. {high or 0:,} bytes",
                      f"file of {pf.size:,} bytes is outside verify.min/max_file_size; the rewrite sizes "
                      "files from target_file_size: check the output file count of the job, or the bounds")
    low, high = intent.min_row_group_size, intent.max_row_group_size
    for rg in range(pf.num_row_groups):
        size = row_group_bytes(pf, rg)
        last = rg == pf.num_row_groups - 1  # a file's last row group holds what is left: legitimately small
        if (size < low and not last) or (high is not None and size > high):
            yield Finding("row_group_size", "error", pf.path, rg, None, f"{size:,} bytes",
                          f"{low:,} .. {high or 0:,} bytes",
                          f"row group {rg} has {size:,} compressed bytes, outside "
                          "verify.min/max_row_group_size; writer.row_group_size (parquet.block.size) sets "
                          "the buffered size parquet-mr cuts at")


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
                      f"{pf.num_row_groups} row group(s); {min(counts)}..{max(counts)} pages per column "
                      f"chunk; {min(rows):,}..{max(rows):,} rows per page",
                      f"at most {intent.page_row_limit or '-'} rows per page",
                      "page counts and sizes from the offset index, for the record")


# --- rule 5: bloom filters --------------------------------------------------------------------------


def check_bloom_filters(f: OpenedFile, intent: Intent) -> Iterable[Finding]:
    pf = f.pf
    for name in intent.bloom_columns:
        if not pf.has_column(name):
            yield Finding("bloom_filter", "error", pf.path, None, name, "column not in the file",
                          "a bloom filter",
                          f"the spec asks for a bloom filter on `{name}` but the file has no such column")
            continue
        missing = [rg for rg in range(pf.num_row_groups) if not pf.has_bloom_filter(rg, name)]
        if not missing:
            continue
        dictionary = [rg for rg in missing if all_dictionary(pf, rg, name)]
        if dictionary:
            why = (f"{len(dictionary)} of these chunk(s) are dictionary-encoded in every data page, and "
                   "parquet-mr (ParquetFileWriter.writeColumnChunk) writes no bloom filter for such a chunk "
                   "(the dictionary answers the lookup, but only for readers that read dictionaries); write "
                   f"the column without dictionary encoding: parquet.enable.dictionary#{name}=false in the "
                   "writer options (or writer.dictionary: false for every column)")
        else:
            why = (f"the writer did not write one: check that it gets "
                   f"parquet.bloom.filter.enabled#{name}=true (writer.bloom_filters)")
        yield Finding("bloom_filter", "error", pf.path, missing[0], name,
                      f"no bloom filter in {len(missing)} of {pf.num_row_groups} row group(s)",
                      "a bloom filter in every row group", f"bloom filter missing for `{name}`: {why}")
