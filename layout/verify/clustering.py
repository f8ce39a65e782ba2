"""How well a curve layout (zorder, hilbert) clusters each of its keys, from the footers' statistics.

A curve orders rows by an index over every key, so no key's pages are ordered and BoundaryOrder promises
nothing. What a reader of one key gets from such a layout is how narrow the key's ranges are: the
figures here, per sort key, within each partition (files never mix partitions, and a reader that filters
on the partition reads one):

- overlap depth of the files' and of the row groups' key ranges (`layout.read.overlap.overlap_depths`:
  each file's depth is the most files that pairwise overlap and include it; 1 when it overlaps nothing),
  averaged over the files (row groups) and at most;
- the share of a partition's row groups a point lookup on the key touches (a row group is touched when
  its [min, max] holds the value), averaged over one lookup per row group, of a value taken from **the
  row groups' own bounds**: among the partition's row-group bounds sorted, the one halfway (by rank)
  between the row group's minimum and maximum, so a value inside its range, where the data is (a
  lookup of the minima and maxima themselves would favour the edges of the key's range, which few row
  groups reach). A perfectly clustered key gives about 1/row groups, an unclustered one about 1.0.

Only footers are read (row-group statistics of the key). A row group without statistics overlaps
everything (as in `overlap`); one that holds only nulls has no range and is left out.
`layout.verify.rules` turns the figures into informational findings (rule ``clustering``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from layout.read.overlap import overlap_depths
from layout.verify.facts import OpenedFile

__all__ = ["CurveNote", "KeyClustering", "curve_notes", "key_clustering"]


@dataclass(frozen=True, slots=True)
class KeyClustering:
    """The clustering of one key over a set of files; depths and lookups within each partition."""

    column: str
    partitions: int
    files: int
    row_groups: int
    file_depth_average: float
    file_depth_max: int
    row_group_depth_average: float
    row_group_depth_max: int
    lookup_share: float  # average share of a partition's row groups a point lookup touches (0..1)
    lookups: int  # lookups averaged: one per bounded row group, a bound inside its range
    unbounded_row_groups: int  # no statistics for the key: they overlap everything

    def describe(self) -> str:
        """One line for a finding's `observed`."""
        return (f"files: overlap depth {self.file_depth_average:.2f} on average, {self.file_depth_max} at "
                f"most; row groups: depth {self.row_group_depth_average:.2f} on average, "
                f"{self.row_group_depth_max} at most; a point lookup touches {100 * self.lookup_share:.1f}% "
                f"of a partition's row groups (average over {self.lookups} lookups, one inside each row "
                "group's range, taken from the row groups' own bounds)")


def _row_group_spans(f: OpenedFile, column: str) -> list[tuple[Any, Any]]:
    """(lo, hi) order keys of each row group holding a value of `column`; (None, None) without statistics."""
    pf = f.pf
    out = []
    for rg in range(pf.num_row_groups):
        stats = pf.statistics_keys(rg, column)
        if stats is None or stats.min is None or stats.max is None:
            if stats is not None and stats.null_count == pf.row_groups[rg].num_rows:
                continue  # only nulls: no range a lookup could hit
            out.append((None, None))
        else:
            out.append((stats.min, stats.max))
    return out


def _file_span(spans: Sequence[tuple[Any, Any]]) -> tuple[Any, Any] | None:
    if not spans:
        return None  # nothing but nulls: the file holds no key range
    if any(lo is None for lo, _ in spans):
        return None, None
    return min(lo for lo, _ in spans), max(hi for _, hi in spans)


def _lookups(spans: Sequence[tuple[Any, Any]]) -> tuple[float, int]:
    """(sum over lookups of the share of `spans` each touches, lookups): one lookup per bounded span, of
    the bound halfway by rank between its lo and hi (module docstring); unbounded spans are touched by
    every lookup."""
    bounded = [(lo, hi) for lo, hi in spans if lo is not None]
    unknown = len(spans) - len(bounded)
    if not bounded:
        return 0.0, 0
    los, his = sorted(lo for lo, _ in bounded), sorted(hi for _, hi in bounded)
    bounds = sorted({v for pair in bounded for v in pair})
    rank = {v: i for i, v in enumerate(bounds)}
    total = 0.0
    for lo, hi in bounded:
        value = bounds[(rank[lo] + rank[hi]) // 2]
        touched = bisect.bisect_right(los, value) - bisect.bisect_left(his, value) + unknown
        total += touched / len(spans)
    return total, len(bounded)


def key_clustering(files: Sequence[OpenedFile], column: str) -> KeyClustering | None:
    """The clustering of `column` over `files` (the files lacking the column are left out); None when no
    file has it."""
    by_partition: dict[str, list[list[tuple[Any, Any]]]] = {}
    for f in files:
        if f.pf.has_column(column):
            by_partition.setdefault(f.partition, []).append(_row_group_spans(f, column))
    if not by_partition:
        return None
    file_depths: list[int] = []
    group_depths: list[int] = []
    lookup_total, lookups, unbounded = 0.0, 0, 0
    for per_file in by_partition.values():
        spans = [s for s in (_file_span(rgs) for rgs in per_file) if s is not None]
        file_depths.extend(overlap_depths(spans))
        groups = [span for rgs in per_file for span in rgs]
        group_depths.extend(overlap_depths(groups))
        total, count = _lookups(groups)
        lookup_total += total
        lookups += count
        unbounded += sum(1 for lo, _ in groups if lo is None)
    return KeyClustering(
        column=column, partitions=len(by_partition), files=len(file_depths), row_groups=len(group_depths),
        file_depth_average=sum(file_depths) / len(file_depths) if file_depths else 0.0,
        file_depth_max=max(file_depths, default=0),
        row_group_depth_average=sum(group_depths) / len(group_depths) if group_depths else 0.0,
        row_group_depth_max=max(group_depths, default=0),
        lookup_share=lookup_total / lookups if lookups else 0.0, lookups=lookups,
        unbounded_row_groups=unbounded)


@dataclass(frozen=True, slots=True)
class CurveNote:
    """What the `clustering` rule reports for one key (an informational finding)."""

    column: str
    observed: str
    intended: str
    diagnosis: str


def curve_notes(files: Sequence[OpenedFile], strategy: str, keys: Sequence[str]) -> list[CurveNote]:
    """One note per key of a `strategy` curve that the files hold."""
    notes = []
    for column in keys:
        found = key_clustering(files, column)
        if found is None:
            continue  # a key the files lack: the page_index rule and the spec checks say so
        notes.append(CurveNote(
            column, found.describe(),
            f"a {strategy} layout: narrow `{column}` ranges (depth near 1, few row groups per lookup)",
            f"{strategy} orders rows along a curve over {', '.join(keys)}, so no column's pages are ordered "
            f"and BoundaryOrder is not checked; over {found.files} file(s) and {found.row_groups} row "
            f"group(s) in {found.partitions} partition(s), the lower the depths and the lookup share, the "
            f"more a reader filtering on `{column}` skips (`lakesort advise` compares "
            "layouts by the probes' bytes)"))
    return notes
