"""Benchmark: page search as the planner pays for it, binary (ASCENDING) against linear
(UNORDERED), cold and warm.

Run from the repo root:

    .venv/bin/python tests/benchmarks/bench_page_search.py [--quick] [--pages 100000] [--repeats 3]

One column chunk of 100,000 pages (8 rows each) of a sorted int64 column `k`, written by pyarrow with its
page index into a temporary directory (deleted at the end) and opened with `ParquetFile`; its column index
is ASCENDING, no page is null. Every figure goes through the planner's own per-chunk code: a
`PageSelector` over the planner's cached chunk structures (`layout.read.plan._CachedChunks`, a
`MetadataCache`) selects the rows of a bound predicate on `k` (`k = v`, or `k BETWEEN lo AND hi`), then
the pages and bytes a reader fetches for them are counted (`ChunkPages.fetched`), as `plan` does:

* warm plan: the chunk's structures are in the cache (an earlier plan of the file built them): two cache
  lookups, the search, pages to rows, the fetched pages counted;
* cold plan: the cache is cleared before each probe (untimed), so the same call also builds the search
  structure (`chunk_search_index`) and the chunk's pages (`chunk_pages`), O(pages), and stores them.
  Reading and decoding the page index, which a cold plan pays too whatever the search, is timed apart;
* search only: `PageSearchIndex.search().between(interval)` on the cached structure, no other cost.

Linear = the same code with the chunk's search structure forced to UNORDERED (cached under an item of its
own), i.e. a linear scan over lazily decoded keys where the planner would binary search. Probes: points
(one page) and 1% ranges (1% of the pages), at random positions; the planner binds `BETWEEN` as `>= AND
<=`, two searches (each selecting a half-open run of pages) whose rows it intersects, so a range plan
makes twice the comparisons of the one closed-interval search timed as "search only"; every probe's selection
is checked against the rows expected and the pages fetched, and binary against linear. Reported: the best of N
repeats of the mean time per probe, bound comparisons per probe, and linear / binary per phase in the
same run. Verdict: the warm plan, every cost counted, worst probe kind; goal >= 100x. The cold ratio is
printed beside it. Nothing about time is asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs

from layout.expr.bind import bind
from layout.expr.predicate import Expr, rewrite_not
from layout.expr.sql import parse_where
from layout.parquet import ParquetFile
from layout.read import chunks as chunk_structures
from layout.read.cache import MetadataCache, file_key, filesystem_id
from layout.read.pages import Interval
from layout.read.plan import _CachedChunks, _fetched, _FileFacts, kind_of
from layout.read.pruning import PageSelector, literal_key
from layout.read.selection import RowSelection

GOAL = 100.0
ROWS_PER_PAGE = 8


# --- the column chunk -----------------------------------------------------------------------------------


def write_chunk(directory: Path, n_pages: int) -> Path:
    path = directory / "sorted.parquet"
    n = n_pages * ROWS_PER_PAGE
    pq.write_table(pa.table({"k": pa.array(range(n), pa.int64())}), path, write_page_index=True,
                   data_page_size=1, write_batch_size=ROWS_PER_PAGE, use_dictionary=False,
                   compression="none", row_group_size=n)
    return path


class LinearChunks(_CachedChunks):
    """The planner's cached chunk structures, the search structure forced to a linear scan."""

    def search_index(self, rg: int, col: int):
        def build():
            index = chunk_structures.chunk_search_index(self.pf, rg, col)
            return None if index is None else dataclasses.replace(index, order="UNORDERED")

        return self._get(("linear_page_search", rg, col), build)


# --- probes ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Probe:
    expr: Expr  # bound, NOT-free
    interval: Interval  # the same, as order keys, for the search-only figure
    first_page: int
    n_pages: int

    def expected(self) -> tuple[RowSelection, int]:
        rows = (self.first_page * ROWS_PER_PAGE, (self.first_page + self.n_pages) * ROWS_PER_PAGE)
        return RowSelection((rows,)), self.n_pages


def probes(pf: ParquetFile, kind: str, count: int, seed: int) -> list[Probe]:
    ct = pf.column("k").type
    kinds = {"k": kind_of(ct)}
    n = len(pf.offset_index(0, "k").page_locations)
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        if kind == "point":
            page = rng.randrange(n)
            value = rng.randrange(page * ROWS_PER_PAGE, (page + 1) * ROWS_PER_PAGE)
            where, interval, width = f"k = {value}", Interval.point(literal_key(ct, value)), 1
        else:
            width = max(1, n // 100)
            page = rng.randrange(n - width + 1)
            lo, hi = page * ROWS_PER_PAGE, (page + width) * ROWS_PER_PAGE - 1
            where = f"k BETWEEN {lo} AND {hi}"
            interval = Interval(literal_key(ct, lo), True, literal_key(ct, hi), True)
        out.append(Probe(rewrite_not(bind(parse_where(where), kinds)), interval, page, width))
    return out


# --- measuring ------------------------------------------------------------------------------------------


def plan_chunk(chunks_type: type[_CachedChunks], facts: _FileFacts, cache: MetadataCache,
               probe: Probe) -> tuple[RowSelection, tuple[int, int], int]:
    """What `plan` does for the chunk: select rows from the page index, count the pages to fetch."""
    chunks = chunks_type(facts, cache)
    num_rows = facts.pf.row_groups[0].num_rows
    selector = PageSelector(facts.pf, 0, num_rows, chunks)
    selection = selector.select(probe.expr)
    return selection, _fetched(chunks.pages(0, 0), facts.pf, 0, 0, selection), selector.comparisons


def timed_plans(chunks_type: type[_CachedChunks], facts: _FileFacts, cache: MetadataCache,
                cases: list[Probe], cold: bool, repeats: int) -> tuple[float, float]:
    """Best of `repeats` of the mean seconds per probe, and comparisons per probe; checks every result."""
    best, comparisons = float("inf"), 0.0
    for _ in range(repeats):
        elapsed, total = 0.0, 0
        plan_chunk(chunks_type, facts, cache, cases[0])  # warm: the structures are cached from here on
        for probe in cases:
            if cold:
                cache.clear()
            t0 = time.perf_counter()
            selection, (pages, _), n = plan_chunk(chunks_type, facts, cache, probe)
            elapsed += time.perf_counter() - t0
            total += n
            rows, n_pages = probe.expected()
            assert selection == rows, f"{chunks_type.__name__} {probe.expr}: {selection} != {rows}"
            assert pages == n_pages, f"{chunks_type.__name__} {probe.expr}: {pages} pages != {n_pages}"
        best = min(best, elapsed / len(cases))
        comparisons = total / len(cases)
    return best, comparisons


def timed_searches(chunks_type: type[_CachedChunks], facts: _FileFacts, cache: MetadataCache,
                   cases: list[Probe], repeats: int) -> float:
    """Search only: the cached structure's `search().between(interval)`."""
    index = chunks_type(facts, cache).search_index(0, 0)
    best = float("inf")
    for _ in range(repeats):
        elapsed = 0.0
        for probe in cases:
            t0 = time.perf_counter()
            pages = index.search().between(probe.interval)
            elapsed += time.perf_counter() - t0
            assert pages == list(range(probe.first_page, probe.first_page + probe.n_pages)), probe.interval
        best = min(best, elapsed / len(cases))
    return best


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def fmt_time(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:9.2f} ms"


# --- main -----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer probes and repeats")
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=None, help="default 3 (2 with --quick)")
    parser.add_argument("--seed", type=int, default=20240607)
    args = parser.parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 3)
    n_many, n_few = (200, 3) if args.quick else (1_000, 10)

    with tempfile.TemporaryDirectory(prefix="lakesort-bench-") as tmp:
        t0 = time.perf_counter()
        path = write_chunk(Path(tmp), args.pages)
        write_s = time.perf_counter() - t0
        local = fs.LocalFileSystem()
        key, fs_id = file_key(local, str(path)), filesystem_id(local)

        def read_page_index() -> ParquetFile:
            pf = ParquetFile.open(path)
            pf.raw_column_index(0, 0)
            pf.offset_index(0, 0)
            return pf

        decode_s = best_of(repeats, read_page_index)
        pf = read_page_index()
        facts = _FileFacts(pf, key, fs_id)
        ct = pf.column("k").type
        n_pages = len(pf.offset_index(0, 0).page_locations)
        assert n_pages == args.pages and pf.raw_column_index(0, 0).boundary_order.name == "ASCENDING"
        build_index_s = best_of(repeats, lambda: chunk_structures.chunk_search_index(pf, 0, 0))
        build_pages_s = best_of(repeats, lambda: chunk_structures.chunk_pages(pf, 0, 0))
        index, chunk = chunk_structures.chunk_search_index(pf, 0, 0), chunk_structures.chunk_pages(pf, 0, 0)

        print(f"one column chunk: {n_pages:,} pages of {ROWS_PER_PAGE} rows, sorted int64 `k` "
              f"({ct.physical_type.name}, ASCENDING column index, no null pages), written in {write_s:.1f} s")
        print(f"best of {repeats} repeats of the mean per probe; probes per kind: {n_many:,} for the binary "
              f"search warm, {n_few} for everything else (the first {n_few} of them), random positions\n")
        print(f"a cold plan pays, whatever the search: page index read + decode {fmt_time(decode_s)}")
        print(f"structures a cold plan builds (once per file version, then cached): search structure "
              f"{fmt_time(build_index_s)} ({index.nbytes / 2**20:.1f} MiB accounted), chunk pages "
              f"{fmt_time(build_pages_s)} ({chunk.nbytes / 2**20:.1f} MiB accounted)\n")

        cache = MetadataCache()
        results: dict[tuple[str, str, str], float] = {}
        comparisons: dict[tuple[str, str], float] = {}
        kinds = ("point", "1% range")
        for i, kind in enumerate(kinds):
            cases = probes(pf, kind, n_many, args.seed + i)
            few = cases[:n_few]
            for name, chunks_type in (("binary", _CachedChunks), ("linear", LinearChunks)):
                warm_cases = cases if name == "binary" else few
                results[name, "search only", kind] = timed_searches(
                    chunks_type, facts, cache, warm_cases, repeats
                )
                results[name, "warm plan", kind], comparisons[name, kind] = timed_plans(
                    chunks_type, facts, cache, warm_cases, False, repeats)
                results[name, "cold plan", kind], _ = timed_plans(
                    chunks_type, facts, cache, few, True, repeats
                )
            # Same rows from both searches, probe by probe (each was checked against the expected rows too).
            for probe in few:
                binary = plan_chunk(_CachedChunks, facts, cache, probe)[:2]
                assert binary == plan_chunk(LinearChunks, facts, cache, probe)[:2], probe.expr

    phases = ("search only", "warm plan", "cold plan")
    notes = {"search only": "search().between() on the cached structure",
             "warm plan": "cache lookups + search + pages to rows + fetched pages counted",
             "cold plan": "the same + structures built and stored"}
    print(f"    {'':<8} {'':<12} {kinds[0]:>12} {kinds[1]:>12}")
    for name in ("binary", "linear"):
        for phase in phases:
            cells = " ".join(f"{fmt_time(results[name, phase, kind]):>12}" for kind in kinds)
            print(f"    {name if phase == phases[0] else '':<8} {phase:<12} {cells}   {notes[phase]}")
        cmp_cells = " ".join(f"{comparisons[name, kind]:>12,.0f}" for kind in kinds)
        print(f"    {'':<8} {'comparisons':<12} {cmp_cells}   bound comparisons per probe")
    print()
    ratios = {(phase, kind): results["linear", phase, kind] / results["binary", phase, kind]
              for phase in phases for kind in kinds}
    print("linear / binary, same run:")
    for phase in phases:
        print(f"    {phase:<12} " + "  ".join(f"{kind} {ratios[phase, kind]:>8,.1f}x" for kind in kinds))
    print()

    warm = min(ratios["warm plan", kind] for kind in kinds)
    cold = min(ratios["cold plan", kind] for kind in kinds)
    verdict = "OK" if warm >= GOAL else "MISSED"
    print(f"warm plan, every cost the planner pays counted: binary vs linear, worst of {len(kinds)} probe "
          f"kinds: {warm:,.0f}x  (goal >= {GOAL:.0f}x)  {verdict}")
    worst_cold = max(results["binary", "cold plan", kind] for kind in kinds)
    print(f"cold plan (structures built, O(pages), once per file version): worst {cold:,.1f}x; binary "
          f"{fmt_time(worst_cold).strip()} per chunk, plus the page index read + decode "
          f"{fmt_time(decode_s).strip()} any search pays")
    return 0


if __name__ == "__main__":
    sys.exit(main())
