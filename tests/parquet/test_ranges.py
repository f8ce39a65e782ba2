"""`layout.parquet.ranges`: coalesced reads against a brute-force oracle (hypothesis)."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout.errors import UsageError
from layout.parquet.ranges import DEFAULT_GAP, coalesce, read_ranges

FILE = bytes(range(256)) * 16  # 4 KiB whose every byte says where it is (mod 256)

ranges_st = st.lists(
    st.tuples(st.integers(0, len(FILE)), st.integers(0, 512)).map(
        lambda r: (r[0], min(r[1], len(FILE) - r[0]))
    ),
    max_size=30,
)
gaps = st.integers(0, 2048)


def _covered(ranges):
    """Every byte offset some range asks for (the oracle: one set of offsets, no merging)."""
    return {i for offset, length in ranges for i in range(offset, offset + length)}


@settings(max_examples=300, deadline=None)
@given(ranges_st, gaps)
def test_reads_cover_exactly_what_the_gap_allows(ranges, gap):
    reads = coalesce(ranges, gap)
    # Sorted, never overlapping, and no two reads within the gap of each other (else they'd be one).
    for (a, n), (b, _) in pairwise(reads):
        assert a + n + gap < b, (reads, gap)
    assert all(n > 0 for _, n in reads)
    # Every wanted byte is read; every byte read is wanted or in a gap of at most `gap` between wanted ones.
    wanted = _covered(ranges)
    read = _covered(reads)
    assert wanted <= read
    for offset, length in reads:
        assert offset in wanted and offset + length - 1 in wanted
        run = 0
        for i in range(offset, offset + length):
            run = 0 if i in wanted else run + 1
            assert run <= gap


@settings(max_examples=300, deadline=None)
@given(ranges_st, gaps)
def test_every_range_gets_its_own_bytes(ranges, gap):
    calls = []

    def read(offset, length):
        calls.append((offset, length))
        return FILE[offset:offset + length]

    out = read_ranges(read, ranges, gap)
    assert out == [FILE[o:o + n] for o, n in ranges]
    assert calls == coalesce(ranges, gap)


def test_the_default_gap_merges_neighbours_into_one_read():
    assert (coalesce([(5000, 10), (0, 100), (100, 50), (3 * DEFAULT_GAP, 1)])
            == [(0, 5010), (3 * DEFAULT_GAP, 1)])
    assert coalesce([(0, 10), (20, 10)], gap=9) == [(0, 10), (20, 10)]
    assert coalesce([(0, 10), (20, 10)], gap=10) == [(0, 30)]
    assert coalesce([]) == []


def test_bad_ranges_are_usage_errors():
    with pytest.raises(UsageError, match="gap"):
        coalesce([(0, 1)], gap=-1)
    with pytest.raises(UsageError, match="offset -1"):
        read_ranges(lambda o, n: b"", [(-1, 3)])
