"""A plan's files chained into sorted runs: the fewest streams a sorted read of them needs.

A partition that lakesort compacts holds a few sorted runs (`layout.compaction.planning.sorted_runs`), each a
set of files with disjoint, ordered key ranges. Read in key order, a run is one stream: its files one after
the other. So `read_sorted` merges one stream per chain, not one per file (k = the overlap depth, at most
max_sorted_runs, instead of the file count), and opens each file only when the merge reaches it.

Chains are found from the footers alone, whatever wrote the files: the first key's bounds over the row
groups the plan selected (`ParquetFile.statistics_keys`, sound bounds as pruning uses them), files sorted
by where they start, each appended to the first chain it strictly follows (the interval-partitioning
greedy: as few chains as the files' overlap depth). Only strict order chains two files: with equal
bounds at the seam, later keys could interleave. A file without usable bounds, or with nulls in the
key (nulls sort before or after every value), is a chain of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from layout.parquet import ParquetFile
from layout.read.plan_values import FilePlan

__all__ = ["sorted_chains"]


def sorted_chains(files: Sequence[FilePlan], key: str, *, descending: bool = False) -> list[list[FilePlan]]:
    """`files` as chains: within a chain, every row of a file sorts strictly before (after, `descending`)
    every row of the next, by `key`. Chains keep the files' order of first appearance for ties."""
    bounded: list[tuple[Any, Any, int, FilePlan]] = []
    alone: list[list[FilePlan]] = []
    for i, f in enumerate(files):
        span = _bounds(f, key)
        if span is None:
            alone.append([f])
        else:
            bounded.append((*span, i, f))
    # Ascending: by lower bound, each file after a chain whose last upper bound is below it.
    # Descending: the mirror image (by upper bound, from the top).
    if descending:
        bounded.sort(key=lambda b: (_Desc(b[1]), b[2]))
    else:
        bounded.sort(key=lambda b: (b[0], b[2]))
    chains: list[list[FilePlan]] = []
    ends: list[Any] = []  # each chain's last bound (upper, or lower when descending)
    for lo, hi, _, f in bounded:
        for c, end in enumerate(ends):
            if (end > hi) if descending else (end < lo):
                chains[c].append(f)
                ends[c] = lo if descending else hi
                break
        else:
            chains.append([f])
            ends.append(lo if descending else hi)
    return chains + alone


def _bounds(file: FilePlan, key: str) -> tuple[Any, Any] | None:
    """The key's [min, max] over the file's selected row groups; None when unknown or when there are nulls."""
    pf = ParquetFile.open(file.path, filesystem=file.filesystem)
    if not pf.has_column(key):
        return None
    lo = hi = None
    for group in file.row_groups:
        stats = pf.statistics_keys(group.index, key)
        if stats is None or stats.min is None or stats.max is None or stats.null_count != 0:
            return None
        lo = stats.min if lo is None else min(lo, stats.min)
        hi = stats.max if hi is None else max(hi, stats.max)
    return None if lo is None else (lo, hi)


class _Desc:
    """Reverses the order of a comparable value (sorting by it sorts descending)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Desc) -> bool:
        less: bool = other.value < self.value
        return less

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and other.value == self.value
