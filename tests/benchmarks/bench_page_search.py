"""Benchmark: binary search (ASCENDING) against a linear scan (UNORDERED) over one column index.

Run from the repo root:

    .venv/bin/python tests/benchmarks/bench_page_search.py [--quick] [--pages 100000] [--repeats 3]

One column chunk of 100,000 pages of a sorted int64 column: its column index bounds are built in
memory (page i holds the sorted keys [mins[i], maxs[i]], wide random int64s, no null pages). The same
`PageBounds` are searched by `page_search("ASCENDING", ...)` (binary search) and by
`page_search("UNORDERED", ...)` (linear scan), with two kinds of bounds:

* `int keys`: plain lists of Python ints (order keys already decoded);
* `lazy keys`: what the planner builds (`layout.pruning._page_search`): `_LazyKeys` over the raw
  PLAIN-encoded min/max bytes with the real `ColumnType` of an int64 column of a small pyarrow-written
  file, so decoding the order keys a search touches is part of the measured cost. Fresh `_LazyKeys`
  are put into the strategy before every search, untimed, so no search profits from keys an earlier
  one decoded.

Probes at random positions: point lookups (a key inside a random page: one page selected) and 1% ranges
(1% of the pages, starting at a random page). For every probe both strategies must select the same pages,
and the pages expected from how the bounds were built. Reported: time per search (best of N repeats of
the mean over the probes, `time.perf_counter` around each `between` call) and bound comparisons per
search (`PageSearch.comparisons`). Goal: binary search >= 100x faster than the linear scan.

Strategy construction is timed apart: `PageSearch.__post_init__` lists the non-null pages, an O(n) pass
that the planner pays per column chunk and plan whatever the BoundaryOrder; it is printed with the
ratio it leaves when counted in.
"""

from __future__ import annotations

import argparse
import random
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pyarrow as pa
import pyarrow.parquet as pq

from layout.pages import Interval, PageBounds, PageSearch, page_search
from layout.parquet import ColumnType, ParquetFile
from layout.pruning import _LazyKeys

GOAL = 100.0


# --- the column index ---------------------------------------------------------------------------------


def int64_column_type() -> ColumnType:
    """The ColumnType of an int64 column, as `ParquetFile` decodes it from a pyarrow-written file."""
    with tempfile.TemporaryDirectory(prefix="lakesort-bench-") as tmp:
        path = Path(tmp) / "k.parquet"
        pq.write_table(pa.table({"k": pa.array([1, 2, 3], pa.int64())}), path, write_page_index=True)
        ct = ParquetFile.open(path).column("k").type
    assert ct.kind == "int" and ct.sort_order.name == "SIGNED", ct
    return ct


def sorted_bounds(n_pages: int, seed: int) -> tuple[list[int], list[int]]:
    """Ascending, non-overlapping page bounds: 2n sorted distinct random int64s, paired up."""
    rng = random.Random(seed)
    keys: set[int] = set()
    while len(keys) < 2 * n_pages:
        keys.add(rng.randrange(-(2**62), 2**62))
    ordered = sorted(keys)
    return ordered[0::2], ordered[1::2]


class Variant:
    """One way of holding the bounds; `make(order)` builds a strategy ready to search.

    `fresh()`, when given, returns new bounds (new lazy keys, nothing decoded) to put into a strategy
    before each timed search, so that no search profits from the keys an earlier one decoded.
    """

    def __init__(self, name: str, make: Callable[[str], PageSearch],
                 fresh: Callable[[], PageBounds] | None = None) -> None:
        self.name, self.make, self.fresh = name, make, fresh


def variants(mins: list[int], maxs: list[int], ct: ColumnType) -> list[Variant]:
    n = len(mins)
    null_pages = [False] * n
    null_counts = [0] * n
    int_bounds = PageBounds(null_pages, mins, maxs, null_counts, exact=True)
    raw_mins = [struct.pack("<q", v) for v in mins]
    raw_maxs = [struct.pack("<q", v) for v in maxs]
    assert ct.order_key(raw_mins[0]) == mins[0] and ct.order_key(raw_maxs[-1]) == maxs[-1]

    def lazy_bounds() -> PageBounds:
        # As layout.pruning._page_search builds them for a non-float column: nothing decoded up front.
        return PageBounds(null_pages, _LazyKeys(ct, raw_mins, null_pages), _LazyKeys(ct, raw_maxs, null_pages),
                          null_counts, exact=True, nan_possible=False)

    return [Variant("int keys", lambda order: page_search(order, int_bounds)),
            Variant("lazy keys", lambda order: page_search(order, lazy_bounds()), lazy_bounds)]


# --- probes -------------------------------------------------------------------------------------------


def probes(mins: list[int], maxs: list[int], kind: str, count: int, seed: int) -> list[tuple[Interval, list[int]]]:
    """`count` random intervals of one kind, each with the pages it must select."""
    rng = random.Random(seed)
    n = len(mins)
    out = []
    for _ in range(count):
        if kind == "point":
            p = rng.randrange(n)
            out.append((Interval.point(rng.randint(mins[p], maxs[p])), [p]))
        else:
            width = max(1, n // 100)
            p = rng.randrange(n - width + 1)
            out.append((Interval(mins[p], True, maxs[p + width - 1], True), list(range(p, p + width))))
    return out


def run_searches(search: PageSearch, cases: Sequence[tuple[Interval, list[int]]],
                 fresh: Callable[[], PageBounds] | None) -> tuple[float, float, list[list[int]]]:
    """Mean seconds and comparisons per search, and the pages each search selected.

    `fresh`: new bounds (new lazy keys) for every search, swapped in outside the timed region. The
    strategy's list of non-null pages depends only on `null_pages`, which stay the same.
    """
    elapsed, comparisons, selected = 0.0, 0, []
    for interval, _ in cases:
        if fresh is not None:
            search.bounds = fresh()
        before = search.comparisons
        t0 = time.perf_counter()
        pages = search.between(interval)
        elapsed += time.perf_counter() - t0
        comparisons += search.comparisons - before
        selected.append(pages)
    return elapsed / len(cases), comparisons / len(cases), selected


def measure(variant: Variant, order: str, cases, repeats: int) -> tuple[float, float]:
    best, comps = float("inf"), 0.0
    for _ in range(repeats):
        secs, comps, selected = run_searches(variant.make(order), cases, variant.fresh)
        for (interval, expected), got in zip(cases, selected):
            assert got == expected, f"{variant.name} {order} {interval}: {got[:5]}... != {expected[:5]}..."
        best = min(best, secs)
    return best, comps


def construction_ms(variant: Variant, order: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        variant.make(order)
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


# --- main ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer probes and repeats")
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=None, help="default 3 (2 with --quick)")
    parser.add_argument("--seed", type=int, default=20240607)
    args = parser.parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 3)
    n_binary, n_linear = (200, 3) if args.quick else (1_000, 10)

    ct = int64_column_type()
    mins, maxs = sorted_bounds(args.pages, args.seed)
    print(f"one column chunk: {args.pages:,} pages, int64 ({ct.physical_type.name}, sort order "
          f"{ct.sort_order.name}), no null pages; best of {repeats} repeats of the mean per search")
    print(f"probes: {n_binary:,} per kind for binary search, {n_linear} for the linear scan "
          "(the first of them shared), random positions\n")

    rows = []
    ratios = []
    for variant in variants(mins, maxs, ct):
        for kind in ("point", "1% range"):
            cases = probes(mins, maxs, kind, n_binary, args.seed + len(rows))
            binary_s, binary_c = measure(variant, "ASCENDING", cases, repeats)
            linear_s, linear_c = measure(variant, "UNORDERED", cases[:n_linear], repeats)
            # measure() checked every search against the pages expected, so for the shared probes both
            # strategies selected the same pages; say it once more, directly
            binary, linear = variant.make("ASCENDING"), variant.make("UNORDERED")
            for interval, _ in cases[:n_linear]:
                assert binary.between(interval) == linear.between(interval), interval
            selected = len(cases[0][1])
            rows.append((variant.name, kind, selected, binary_s, binary_c, linear_s, linear_c))
            ratios.append(linear_s / binary_s)

    header = (f"    {'bounds':<10} {'probe':<9} {'pages':>6} {'binary us':>11} {'cmp':>6} "
              f"{'linear us':>12} {'cmp':>8} {'linear / binary':>16}")
    print(header)
    for name, kind, selected, bs, bc, ls, lc in rows:
        print(f"    {name:<10} {kind:<9} {selected:>6} {bs * 1e6:>11.2f} {bc:>6.1f} "
              f"{ls * 1e6:>12.1f} {lc:>8.0f} {ls / bs:>15.0f}x")
    print()

    print("strategy construction (PageSearch.__post_init__ lists the non-null pages: O(n) per chunk):")
    build = {}
    for variant in variants(mins, maxs, ct):
        build[variant.name] = construction_ms(variant, "ASCENDING", repeats)
        print(f"    {variant.name:<10} page_search(...) {build[variant.name]:8.3f} ms")
    for name, kind, _, bs, _, ls, _ in rows:
        b_ms = build[name] / 1e3
        print(f"    {name:<10} {kind:<9} with construction counted: binary {(bs + b_ms) * 1e3:7.3f} ms, "
              f"linear {(ls + b_ms) * 1e3:8.3f} ms, {(ls + b_ms) / (bs + b_ms):5.1f}x")
    print()

    worst = min(ratios)
    verdict = "OK" if worst >= GOAL else "MISSED"
    print(f"binary vs linear search, worst of {len(ratios)} cases: {worst:,.0f}x "
          f"(median {statistics.median(ratios):,.0f}x)  (goal >= {GOAL:.0f}x)  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
