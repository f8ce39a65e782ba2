"""How far the files of a layout overlap in a key: the number of files a point lookup may have to read.

The rewrite planner decides by it (a partition whose sorted runs overlap too deeply is rewritten), the
layout rules report it, the metrics record it as clustering health.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["overlap_depth"]


def overlap_depth(intervals: Iterable[tuple[Any, Any]]) -> int:
    """The most files that pairwise overlap in the key; a file without bounds overlaps everything.

    Two closed ranges overlap when they intersect, except when one ends exactly where the other begins
    ([1,2] and [2,3], or [2,2] and [2,2]): range partitioning splits a run of one key value across files
    that way, and counting it would make every nightly run rewrite the partition again.
    """
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
