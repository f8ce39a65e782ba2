"""Coalescing byte ranges: few large reads instead of many small ones, as object stores bill them.

On an object store each request costs a round trip (tens of milliseconds before the first byte) and a
fee, while a few more bytes in one response cost almost nothing. So the byte ranges a reader wants
(the column and offset indexes of several column chunks, which Parquet writers put next to each other
before the footer) are sorted, ranges closer than a gap are merged into one read, and each merged
read's bytes are sliced back into the ranges asked for. This is arrow-rs object_store's
`coalesce_ranges` (and Arrow C++'s `ReadRangeCache` with its hole size limit), written out here
because neither is reachable from Python: pyarrow exposes no range coalescing of its own.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

from layout.errors import UsageError
from layout.sizes import MiB

__all__ = ["DEFAULT_GAP", "coalesce", "read_ranges"]

# Ranges at most this far apart are read in one request. arrow-rs object_store uses 1 MiB
# (OBJECT_STORE_COALESCE_DEFAULT): at the ~100 MB/s one S3 stream delivers, 1 MiB of unwanted bytes
# costs ~10 ms, less than the first-byte latency of the request it saves (and a fraction of its fee).
# A Parquet file's page indexes are contiguous, so the columns a probe does not ask for, in between the
# ones it does, are far below this: one request covers them.
DEFAULT_GAP = 1 * MiB


def coalesce(ranges: Sequence[tuple[int, int]], gap: int = DEFAULT_GAP) -> list[tuple[int, int]]:
    """The `(offset, length)` reads that cover `ranges` (each `(offset, length)`): sorted, with every two
    ranges whose gap is at most `gap` bytes (overlapping and touching ones included) in one read.

    The result never overlaps, and two consecutive reads are more than `gap` bytes apart. Empty ranges
    are covered by whatever read holds their offset, or need none.
    """
    if gap < 0:
        raise UsageError(f"coalesce: the gap must be >= 0 bytes, got {gap}")
    merged: list[list[int]] = []  # [start, end)
    for offset, length in sorted(r for r in ranges if r[1] > 0):
        if offset < 0:
            raise UsageError(f"coalesce: negative offset {offset}")
        if merged and offset - merged[-1][1] <= gap:
            merged[-1][1] = max(merged[-1][1], offset + length)
        else:
            merged.append([offset, offset + length])
    return [(start, end - start) for start, end in merged]


def read_ranges(read: Callable[[int, int], bytes], ranges: Sequence[tuple[int, int]],
                gap: int = DEFAULT_GAP) -> list[bytes]:
    """Each of `ranges`' bytes, in the order given, through `coalesce`d calls of `read(offset, length)`.

    `read` must return exactly `length` bytes (the caller checks short reads); slices of one merged
    read are `bytes` of their own, so keeping one does not keep the whole read alive.
    """
    for offset, length in ranges:
        if offset < 0 or length < 0:
            raise UsageError(f"read_ranges: invalid range (offset {offset}, length {length})")
    reads = coalesce(ranges, gap)
    data = [read(offset, length) for offset, length in reads]
    starts = [offset for offset, _ in reads]
    out = []
    for offset, length in ranges:
        if length == 0:
            out.append(b"")
            continue
        i = bisect.bisect_right(starts, offset) - 1  # the read that starts at or before it covers it
        view = memoryview(data[i])
        begin = offset - starts[i]
        out.append(bytes(view[begin:begin + length]))
    return out

