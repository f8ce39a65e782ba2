"""How far the files of a layout overlap in a key: the number of files a point lookup may have to read.

The rewrite planner decides by it (a partition whose sorted runs overlap too deeply is rewritten), the
layout rules report it, the metrics record it as clustering health (`layout.metrics.clustering`).

One relation underlies every figure here. Two files' closed key ranges overlap when they intersect,
except when one ends exactly where the other begins ([1,2] and [2,3], or [2,2] and [2,2]): range
partitioning splits a run of one key value across files that way, and counting it would make every
nightly run rewrite the partition again. A file without bounds (None) overlaps every file.

- `overlap_depth`: the most files that pairwise overlap (the deepest point of the layout);
- `overlap_depths`: for each file, the most files that pairwise overlap *and include it* (its depth, as
  Snowflake's clustering information counts a micro-partition's depth); their maximum is `overlap_depth`;
- `overlap_counts`: for each file, how many other files it overlaps (Snowflake's overlaps).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["overlap_counts", "overlap_depth", "overlap_depths"]


def overlap_depth(intervals: Iterable[tuple[Any, Any]]) -> int:
    """The most files that pairwise overlap in the key; a file without bounds overlaps everything."""
    CLOSE, POINT, OPEN = 0, 1, 2  # at one key: ranges ending there, then single-value ranges, then starts
    events, unknown = [], 0
    for lo, hi in intervals:
        if lo is None or hi is None:
            unknown += 1
        elif lo == hi:
            events.append((lo, POINT))
        else:
            events.append((lo, OPEN))
            events.append((hi, CLOSE))
    depth = best = 0
    for _, kind in sorted(events, key=lambda e: (e[0], e[1])):
        if kind == POINT:  # overlaps the ranges open across this key, touches the rest
            best = max(best, depth + 1)
        else:
            depth += 1 if kind == OPEN else -1
            best = max(best, depth)
    return best + unknown


def overlap_depths(intervals: Sequence[tuple[Any, Any]]) -> list[int]:
    """Each file's depth: the largest set of pairwise overlapping files that includes it (1 alone).

    Intervals on a line overlap pairwise exactly when they share a point, so a file's depth is the
    deepest place within its range. With the distinct bounds sorted, k_0 < k_1 < ..., a range [lo, hi]
    (lo < hi) covers the gaps (k_j, k_j+1) between its bounds and the bounds strictly inside; a
    single-value file [x, x] sits on x, where it overlaps the ranges that contain x strictly (and no
    other single-value file at x: they only touch). So: the ranges covering each gap (G), the ranges
    strictly containing each bound plus one when a single-value file sits there (P); a range's depth is
    the largest G or P within it, a single-value file's its P. Files without bounds add to every depth
    (they overlap all), and their own depth is the deepest place of all. O(n log n): the range maxima
    come from a sparse table.
    """
    unknown = sum(1 for lo, hi in intervals if lo is None or hi is None)
    known = [(lo, hi) for lo, hi in intervals if lo is not None and hi is not None]
    if not known:
        return [unknown] * len(intervals)
    keys = sorted({k for pair in known for k in pair})
    index = {k: i for i, k in enumerate(keys)}
    m = len(keys)
    gap_delta = np.zeros(m + 1, np.int64)  # ranges covering gap j: +1 at index(lo), -1 at index(hi)
    inside_delta = np.zeros(m + 1, np.int64)  # ranges strictly containing bound i
    point = np.zeros(m, np.int64)
    spans = []
    for lo, hi in known:
        a, b = index[lo], index[hi]
        spans.append((a, b))
        if a == b:
            point[a] = 1
            continue
        gap_delta[a] += 1
        gap_delta[b] -= 1
        inside_delta[a + 1] += 1
        inside_delta[b] -= 1
    gaps = np.cumsum(gap_delta)[: max(m - 1, 1)]
    at_point = np.where(point > 0, np.cumsum(inside_delta)[:m] + 1, 0)
    # One array to query: gap j at position 2j + 1, bound i at position 2i; a range [a, b] covers the
    # positions 2a + 1 .. 2b - 1 (its gaps and the bounds strictly inside).
    places = np.zeros(2 * m - 1, np.int64)
    places[0::2] = at_point
    if m > 1:
        places[1::2] = gaps
    largest = _RangeMax(places)
    depths = iter([int(at_point[a]) if a == b else largest(2 * a + 1, 2 * b - 1) for a, b in spans])
    deepest = int(places.max()) + unknown
    return [deepest if lo is None or hi is None else next(depths) + unknown for lo, hi in intervals]


def overlap_counts(intervals: Sequence[tuple[Any, Any]]) -> list[int]:
    """How many other files each file overlaps.

    A bounded file g does not overlap a bounded f exactly when g.hi <= f.lo or g.lo >= f.hi (equality
    is only touching); both hold only when f and g are single-value files at the same key, counted once.
    Binary searches over the sorted bounds count them; files without bounds overlap all.
    """
    unknown = sum(1 for lo, hi in intervals if lo is None or hi is None)
    known = [(lo, hi) for lo, hi in intervals if lo is not None and hi is not None]
    his, los = sorted(hi for _, hi in known), sorted(lo for lo, _ in known)
    points: dict[Any, int] = {}
    for lo, hi in known:
        if lo == hi:
            points[lo] = points.get(lo, 0) + 1
    out = []
    for lo, hi in intervals:
        if lo is None or hi is None:
            out.append(len(intervals) - 1)
            continue
        apart = bisect.bisect_right(his, lo) + (len(los) - bisect.bisect_left(los, hi))
        if lo == hi:  # the single-value files at lo were counted on both sides (this one among them),
            apart -= points[lo] + 1  # and this file is not one of the others
        out.append(len(known) - 1 - apart + unknown)
    return out


class _RangeMax:
    """Maximum of `values[lo..hi]` (inclusive) in O(1) after O(n log n) preparation (a sparse table)."""

    def __init__(self, values: np.ndarray) -> None:
        self.levels = [values]
        width = 1
        while 2 * width <= len(values):
            last = self.levels[-1]
            self.levels.append(np.maximum(last[:-width], last[width:]))
            width *= 2

    def __call__(self, lo: int, hi: int) -> int:
        level = (hi - lo + 1).bit_length() - 1
        row = self.levels[level]
        return int(max(row[lo], row[hi - (1 << level) + 1]))
