"""Benchmark: layout.read.merge.merge_sorted against heapq.merge and a full pyarrow sort.

Run from the repo root:

    .venv/bin/python tests/benchmarks/bench_merge.py [--quick] [--repeats 3] [--k 4 16 64] [--clock cpu]

k sorted streams of N rows each (N = 1,000,000; 100,000 with --quick), in batches of 65,536 rows, with
int64 keys or 32-byte string keys (the int64 key zero-padded), either fully interleaved (stream i
holds i, i + k, i + 2k, ...) or in long runs (each stream's rows in blocks of 100,000 consecutive
keys; 10,000 with --quick). For each case we time, best of N repeats, in the same process:

* `merge_sorted(streams, "k")`, consuming every output batch;
* `pyarrow.concat_tables(...).sort_by("k")` (the same rows as one table);
* `heapq.merge` over per-stream Python tuples (key, stream, pos), built from the key lists outside
  the timing (only up to --heapq-max-rows rows in total: the tuples of 64M rows do not fit in memory).

Goals: faster than the pyarrow sort for every long-runs case and for int64 keys interleaved; for
string keys interleaved within 2x of it. Figures are rows per second and ratios to the pyarrow sort.
`--clock cpu` times with the process's CPU time (all threads) instead of the wall clock: steadier on a
machine shared with other jobs.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from layout.read.merge import merge_sorted

BATCH_ROWS = 65_536


def make_streams(k: int, rows: int, block: int, strings: bool) -> list[pa.Table]:
    """k sorted tables; block = 1 is fully interleaved, otherwise runs of `block` consecutive keys."""
    tables = []
    for i in range(k):
        j = np.arange(rows, dtype=np.int64)
        keys = j * k + i if block == 1 else (j // block) * block * k + i * block + j % block
        column = pa.array(keys)
        if strings:
            column = pc.utf8_lpad(pc.cast(column, pa.string()), 32, "0")
        tables.append(pa.table({"k": column, "v": pa.array(j)}))
    return tables


CLOCK = time.perf_counter


def best_of(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        t0 = CLOCK()
        fn()
        best = min(best, CLOCK() - t0)
    return best


def bench_case(k: int, rows: int, block: int, strings: bool, repeats: int, heapq_max: int) -> dict:
    tables = make_streams(k, rows, block, strings)
    total = k * rows

    def ours() -> None:
        result = merge_sorted([t.to_batches(max_chunksize=BATCH_ROWS) for t in tables], "k")
        assert sum(b.num_rows for b in result) == total

    def arrow_sort() -> None:
        pa.concat_tables(tables).sort_by("k")

    # correctness once, on the first and last rows
    first = next(iter(merge_sorted([t.to_batches(max_chunksize=BATCH_ROWS) for t in tables], "k")))
    expected = pa.concat_tables(tables).sort_by("k").slice(0, first.num_rows)
    assert first.column("k").equals(expected.column("k").combine_chunks())

    out = {"merge_sorted": best_of(ours, repeats), "pyarrow sort_by": best_of(arrow_sort, repeats)}
    if total <= heapq_max:
        runs = [
            [(key, i, pos) for pos, key in enumerate(t.column("k").to_pylist())] for i, t in enumerate(tables)
        ]

        def heap() -> None:
            n = 0
            for _ in heapq.merge(*runs):
                n += 1
            assert n == total

        out["heapq.merge (tuples)"] = best_of(heap, repeats)
        del runs
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100,000 rows per stream instead of 1,000,000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--k", type=int, nargs="+", default=[4, 16, 64])
    parser.add_argument("--heapq-max-rows", type=int, default=16_000_000)
    parser.add_argument(
        "--clock", choices=["wall", "cpu"], default="wall", help="wall clock or process CPU time"
    )
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    rows = 100_000 if args.quick else 1_000_000
    block = 10_000 if args.quick else 100_000

    print(f"{rows:,} rows per stream, batches of {BATCH_ROWS:,}, best of {args.repeats}, {args.clock} clock")
    header = f"{'case':<28} {'rows':>11} {'merge rows/s':>13} {'sort rows/s':>12} {'heapq rows/s':>13} "
    print(header + f"{'sort/merge':>11} {'heapq/merge':>12}  goal")
    verdicts = []
    for strings in (False, True):
        for pattern, blk in (("interleaved", 1), ("runs", block)):
            for k in args.k:
                r = bench_case(k, rows, blk, strings, args.repeats, args.heapq_max_rows)
                total = k * rows
                ours, sort = r["merge_sorted"], r["pyarrow sort_by"]
                heap = r.get("heapq.merge (tuples)")
                speedup = sort / ours  # > 1: merge_sorted is faster than the sort
                need = 0.5 if strings and pattern == "interleaved" else 1.0
                ok = speedup >= need
                goal = f">= {need:g}x {'OK' if ok else 'MISSED'}"
                verdicts.append(ok)
                name = f"{'str32' if strings else 'int64'} {pattern} k={k}"
                heap_rate = f"{total / heap:>13,.0f}" if heap else f"{'(skipped)':>13}"
                heap_ratio = f"{heap / ours:>11.2f}x" if heap else f"{'-':>12}"
                print(
                    f"{name:<28} {total:>11,} {total / ours:>13,.0f} {total / sort:>12,.0f} {heap_rate} "
                    f"{speedup:>10.2f}x {heap_ratio}  {goal}"
                )
    print(f"goals met: {sum(verdicts)}/{len(verdicts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
