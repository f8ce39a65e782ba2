"""Benchmark: `layout.read.plan` cold (fresh metadata cache) against warm (the same cache, again).

Run from the repo root:

    .venv/bin/python tests/benchmarks/bench_planning.py [--quick] [--files 1000] [--no-iceberg]

The table: 1,000 Parquet files (200 with --quick) of 20,000 rows each, written with pyarrow
(`write_page_index=True`, 2 row groups of 10,000 rows, pages of 1,000 rows), sorted by an int64 key `k`
with disjoint ascending key ranges per file, as a compacted table would be; payload columns `c` (int64,
unsorted but locally clustered), `v` (int64, random), `x` (double) and `s` (string). The files are cached
under tests/benchmarks/.cache/ (`--regenerate` rewrites them). Two sources over the same files: the
plain directory, and an Iceberg table in a pyiceberg SQL catalog (SQLite) in a temporary directory, the
files appended with `table.add_files` (`--no-iceberg` skips it). PYICEBERG_HOME is set to that
directory (layout.catalog reads it at every lookup), so no other catalog (such as `make demo`'s) is touched.

Probes on the sort key: a point lookup and a 1% range. For each source and probe:

* cold: `plan(source, where, cache=MetadataCache())`, a fresh cache per run, so every footer, offset
  index and column index (and the Iceberg file list) is read and decoded again. The OS page cache is
  warm either way (the files were just written or read): cold here means "nothing decoded in this
  process", not "nothing in memory", so reads from a real object store would make it slower still.
  pyiceberg's own in-process caches (it keeps manifest lists and manifests it has read) stay warm.
* warm: one `MetadataCache`, a first plan to fill it, then the timed plans.

Wall time around `plan(...)` with `time.perf_counter`, median of N runs; reported with the plan counts
and the cache's counters. Goals: warm >= 12x faster than cold, and warm < 50 ms. When a warm plan takes
50 ms or more, it is profiled with cProfile and the top functions are printed.
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import hashlib
import io
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from layout.catalog import write_sql_catalog_config
from layout.parquet import ParquetFile
from layout.read.cache import MetadataCache
from layout.read.plan import Plan, plan

CACHE_ROOT = HERE / ".cache"
WARM_GOAL_RATIO = 12.0
WARM_GOAL_MS = 50.0


# --- the sorted table ---------------------------------------------------------------------------------


def _file_table(rng: np.random.Generator, first_key: int, first_row: int, rows: int) -> pa.Table:
    g = np.arange(first_row, first_row + rows, dtype=np.int64)  # global row number
    k = first_key + np.cumsum(rng.integers(1, 20, rows, dtype=np.int64))  # strictly ascending
    # Not sorted but locally clustered (think event time against ingestion order): blocks of 700 rows
    # of consecutive values, the blocks shuffled within windows of 16, so pages stay narrow but their
    # bounds do not ascend (BoundaryOrder UNORDERED).
    block = g // 700
    c = ((block // 16) * 16 + (block % 16) * 7 % 16) * 700 + g % 700
    user = pa.array((g * 7919) % 100_000)
    return pa.table({
        "k": k,
        "c": c,
        "v": rng.integers(0, 1_000, rows, dtype=np.int64),
        "x": rng.random(rows),
        "s": pc.binary_join_element_wise("user-", pc.cast(user, pa.string()), ""),
    })


def write_sorted_files(n_files: int, rows: int, *, page_rows: int = 1_000, row_group_rows: int = 10_000,
                       seed: int = 7, regenerate: bool = False, tag: str = "sorted") -> list[Path]:
    """`n_files` pyarrow-written Parquet files sorted by `k` across files, cached under .cache/."""
    params = {"n": n_files, "rows": rows, "page": page_rows, "rg": row_group_rows, "seed": seed, "v": 2}
    key = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    out = CACHE_ROOT / f"{tag}-{n_files}x{rows}-{key}"
    if out.is_dir() and not regenerate:
        files = sorted(out.glob("*.parquet"))
        if len(files) == n_files:
            return files
    shutil.rmtree(out, ignore_errors=True)
    staging = out.with_name(out.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    last_key = 0
    for f in range(n_files):
        table = _file_table(rng, last_key, f * rows, rows)
        last_key = int(table.column("k")[-1].as_py())
        pq.write_table(table, staging / f"part-{f:05d}.parquet", write_page_index=True,
                       max_rows_per_page=page_rows, row_group_size=row_group_rows,
                       sorting_columns=[pq.SortingColumn(0)])
    staging.rename(out)
    print(f"wrote {n_files} files x {rows:,} rows to {out.relative_to(REPO_ROOT)} "
          f"in {time.perf_counter() - started:.1f}s")
    return sorted(out.glob("*.parquet"))


def key_at(files: list[Path], rows: int, global_row: int) -> int:
    """The sort key of one row of the table (by global row number)."""
    f, r = divmod(global_row, rows)
    return int(pq.read_table(files[f], columns=["k"]).column("k")[r].as_py())


def describe(files: list[Path]) -> str:
    pf = ParquetFile.open(files[0])
    orders = {n: pf.column_index(0, n).boundary_order.name for n in ("k", "c", "v")}
    pages = len(pf.offset_index(0, "k").page_locations)
    size = sum(p.stat().st_size for p in files)
    return (f"{len(files)} files, {pf.num_row_groups} row groups x {pf.row_groups[0].num_rows:,} rows per file, "
            f"{pages} pages per column chunk, {len(pf.columns)} columns, {size / 2**20:.0f} MiB; "
            f"BoundaryOrder " + ", ".join(f"{n}={o}" for n, o in orders.items()))


# --- an Iceberg table over the same files -------------------------------------------------------------


def iceberg_table(home: Path, files: list[Path], identifier: str = "bench.events") -> str:
    """Create `identifier` in a new SQLite catalog under `home` and add `files` to it.

    `plan()` finds the catalog through pyiceberg's configuration, which `layout.catalog` reads at every
    lookup: PYICEBERG_HOME points at `home` (see `main`).
    The catalog is checked to live under `home` before anything is created in it.
    """
    from layout.catalog import load_catalog

    catalog = load_catalog()
    uri = str(catalog.properties.get("uri", ""))
    if str(home.resolve()) not in uri:
        raise RuntimeError(f"pyiceberg resolved the catalog {uri!r}, not the one under {home}: refusing to "
                           "create a table there (was pyiceberg.catalog imported before PYICEBERG_HOME was set?)")
    namespace = identifier.rpartition(".")[0]
    catalog.create_namespace_if_not_exists(namespace)
    table = catalog.create_table(identifier, schema=pq.read_schema(files[0]))
    started = time.perf_counter()
    table.add_files([str(p) for p in files])
    print(f"Iceberg table {identifier}: add_files of {len(files)} files in {time.perf_counter() - started:.1f}s")
    return identifier


# --- timing -------------------------------------------------------------------------------------------


def timed_plan(source: str, where: str, cache: MetadataCache) -> tuple[float, Plan]:
    t0 = time.perf_counter()
    result = plan(source, where, cache=cache)
    return time.perf_counter() - t0, result


def counts_line(p: Plan) -> str:
    c = p.counts
    return (f"files {c.files_selected}/{c.files_total}, row groups {c.row_groups_selected}/{c.row_groups_total}, "
            f"pages {c.pages_selected}/{c.pages_total}, rows {c.rows_selected:,}/{c.rows_total:,}, "
            f"bytes {c.bytes_selected:,}/{c.bytes_total:,}")


def bench(source: str, label: str, probes: dict[str, str], n_cold: int, n_warm: int,
          profile_top: int) -> list[tuple[str, str, float, float]]:
    results = []
    for name, where in probes.items():
        cold, cold_plan = [], None
        for _ in range(n_cold):
            secs, cold_plan = timed_plan(source, where, MetadataCache())
            cold.append(secs)
        cache = MetadataCache()
        timed_plan(source, where, cache)  # fill
        warm, warm_plan = [], None
        for _ in range(n_warm):
            secs, warm_plan = timed_plan(source, where, cache)
            warm.append(secs)
        assert warm_plan.counts == cold_plan.counts, (warm_plan.counts, cold_plan.counts)
        stats = cache.stats()
        cold_ms, warm_ms = statistics.median(cold) * 1e3, statistics.median(warm) * 1e3
        print(f"  {label} / {name}: WHERE {where}")
        print(f"    counts: {counts_line(warm_plan)}; page comparisons {warm_plan.page_comparisons}")
        print(f"    cold median {cold_ms:9.1f} ms (min {min(cold) * 1e3:.1f}, n={n_cold}); "
              f"warm median {warm_ms:7.2f} ms (min {min(warm) * 1e3:.2f}, n={n_warm}); "
              f"cold / warm {cold_ms / warm_ms:5.1f}x")
        print(f"    warm cache: {stats.entries} entries, {stats.bytes / 2**20:.1f} MiB estimated, "
              f"hit rate {stats.hit_rate:.3f}, loads {stats.loads}, evictions {stats.evictions}")
        if warm_ms >= WARM_GOAL_MS and profile_top:
            profile(source, where, cache, profile_top)
        results.append((label, name, cold_ms, warm_ms))
    return results


def profile(source: str, where: str, cache: MetadataCache, top: int, runs: int = 3) -> None:
    """Print the top functions of `runs` warm plans, by own time and (layout's only) by cumulative time."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        plan(source, where, cache=cache)
    profiler.disable()
    for order, restrict, what in (("tottime", (), "by own time"),
                                  ("cumulative", ("layout",), "layout functions by cumulative time")):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(*restrict, top)
        print(f"    cProfile of {runs} warm plans, top {top} {what} (seconds for all {runs}):")
        lines = out.getvalue().splitlines()
        start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
        for line in lines[start:]:
            if line.strip():
                print("      " + line.replace(str(REPO_ROOT) + os.sep, "").replace(sys.base_prefix, "<python>"))


# --- main ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 files, fewer runs")
    parser.add_argument("--files", type=int, default=None, help="number of files (default 1000, 200 with --quick)")
    parser.add_argument("--rows", type=int, default=20_000, help="rows per file")
    parser.add_argument("--cold", type=int, default=None, help="cold runs per probe (default 5, 3 with --quick)")
    parser.add_argument("--warm", type=int, default=None, help="warm runs per probe (default 20, 10 with --quick)")
    parser.add_argument("--no-iceberg", action="store_true", help="only the plain directory")
    parser.add_argument("--regenerate", action="store_true", help="rewrite the cached files")
    parser.add_argument("--profile-top", type=int, default=15, help="functions to print when warm is slow (0: no)")
    args = parser.parse_args(argv)
    n_files = args.files or (200 if args.quick else 1_000)
    n_cold = args.cold or (3 if args.quick else 5)
    n_warm = args.warm or (10 if args.quick else 20)

    if not args.no_iceberg:
        # layout.catalog reads pyiceberg's configuration afresh at every lookup, so setting it here works.
        iceberg_home = Path(tempfile.mkdtemp(prefix="lakesort-bench-iceberg-"))
        atexit.register(shutil.rmtree, iceberg_home, True)
        write_sql_catalog_config(iceberg_home, iceberg_home)
        os.environ["PYICEBERG_HOME"] = str(iceberg_home)
    files = write_sorted_files(n_files, args.rows, regenerate=args.regenerate)
    print(describe(files))
    total = n_files * args.rows
    point = key_at(files, args.rows, total // 2 + 12_345)
    lo_row = total * 37 // 100
    lo, hi = key_at(files, args.rows, lo_row), key_at(files, args.rows, lo_row + total // 100 - 1)
    probes = {"point": f"k = {point}", "1% range": f"k BETWEEN {lo} AND {hi}"}
    print("plans project every column (as `lakesort plan` does); times are wall times around plan(...)\n")

    results = bench(str(files[0].parent), "directory", probes, n_cold, n_warm, args.profile_top)
    if not args.no_iceberg:
        identifier = iceberg_table(iceberg_home, files)
        results += bench(identifier, "iceberg", probes, n_cold, n_warm, args.profile_top)

    print(f"\n    {'source':<10} {'probe':<9} {'cold ms':>9} {'warm ms':>9} {'cold / warm':>12}  goals")
    for label, name, cold_ms, warm_ms in results:
        ok_ratio = cold_ms / warm_ms >= WARM_GOAL_RATIO
        ok_abs = warm_ms < WARM_GOAL_MS
        print(f"    {label:<10} {name:<9} {cold_ms:>9.1f} {warm_ms:>9.2f} {cold_ms / warm_ms:>11.1f}x  "
              f">= {WARM_GOAL_RATIO:.0f}x {'OK' if ok_ratio else 'MISSED'}, "
              f"< {WARM_GOAL_MS:.0f} ms {'OK' if ok_abs else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
