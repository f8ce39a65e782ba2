"""Benchmark: `layout.read.plan` cold (fresh metadata cache) against warm (the same cache, again), and on
an Iceberg table against pyiceberg's own scan planning.

Run from the repo root:

    .venv/bin/python tests/benchmarks/bench_planning.py [--quick] [--files 5000] [--no-directory] \\
        [--no-iceberg]

The table: 1,000 Parquet files (200 with --quick, or --files N) of 20,000 rows each, written with pyarrow
(`write_page_index=True`, 2 row groups of 10,000 rows, pages of 1,000 rows), sorted by an int64 key `k`
with disjoint ascending key ranges per file, as a compacted table would be; payload columns `c` (int64,
unsorted but locally clustered), `v` (int64, random), `x` (double) and `s` (string). The files are cached
under tests/benchmarks/.cache/ (`--regenerate` rewrites them). Two sources over the same files: the
plain directory (`--no-directory` skips it), and an Iceberg table `bench.events` in a pyiceberg SQL catalog
(SQLite) cached beside the files, the files appended with one `table.add_files` (`--no-iceberg` skips it).
PYICEBERG_HOME is set to that catalog's directory (layout.catalog reads it at every lookup), so no other
catalog (such as `make demo`'s) is touched.

Probes on the sort key: a point lookup and a 1% range. For each source and probe:

* cold: `plan(source, where, cache=MetadataCache())`, a fresh cache per run, so every footer, offset
  index and column index it needs (and the Iceberg manifests) is read and decoded again. The OS page
  cache is warm either way (the files were just written or read): cold here means "nothing decoded in
  this process", not "nothing in memory", so reads from a real object store would make it slower still.
* warm: one `MetadataCache`, a first plan to fill it, then the timed plans.

On the Iceberg table, each cold run is paired with one of pyiceberg's own planning, the two alternating,
both equally cold: pyiceberg's process-wide manifest cache (`pyiceberg.manifest.clear_manifest_cache`) is
cleared before each, and each loads the table afresh from the catalog (`layout.catalog.load_table`, which
`plan` calls itself) inside its timing; pyiceberg's run is `table.scan(row_filter=...).plan_files()`
with the same predicate as a pyiceberg expression, its file list materialized. Goals there: lakesort's
cold plan at most 1.5x pyiceberg's cold planning (the same process, the same minute), warm < 50 ms.
For the directory: warm >= 12x faster than cold, and warm < 50 ms.

Wall time with `time.perf_counter`, median of N runs; reported with the plan counts and the cache's
counters. When a warm plan takes 50 ms or more, it is profiled with cProfile and the top functions are
printed.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import os
import pstats
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.expressions import And, BooleanExpression, EqualTo, GreaterThanOrEqual, LessThanOrEqual
from pyiceberg.manifest import clear_manifest_cache

from layout.catalog import load_catalog, load_table, write_sql_catalog_config
from layout.parquet import ParquetFile
from layout.read.cache import MetadataCache
from layout.read.plan import Plan, plan

CACHE_ROOT = HERE / ".cache"
WARM_GOAL_RATIO = 12.0
WARM_GOAL_MS = 50.0
PYICEBERG_GOAL_RATIO = 1.5


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
    return (f"{len(files)} files, {pf.num_row_groups} row groups x {pf.row_groups[0].num_rows:,} rows per "
            f"file, {pages} pages per column chunk, {len(pf.columns)} columns, {size / 2**20:.0f} MiB; "
            "BoundaryOrder " + ", ".join(f"{n}={o}" for n, o in orders.items()))


# --- an Iceberg table over the same files -------------------------------------------------------------


def iceberg_table(home: Path, files: list[Path], identifier: str = "bench.events") -> str:
    """`identifier` in the SQLite catalog under `home`, holding exactly `files` (one `add_files`).

    Reused when it is already there with as many data files; otherwise (re)created. `plan()` finds the
    catalog through pyiceberg's configuration, which `layout.catalog` reads at every lookup: PYICEBERG_HOME
    points at `home` (see `main`). The catalog is checked to live under `home` before anything is changed.
    """
    catalog = load_catalog()
    uri = str(catalog.properties.get("uri", ""))
    if str(home.resolve()) not in uri:
        raise RuntimeError(f"pyiceberg resolved the catalog {uri!r}, not the one under {home}: refusing to "
                           "create a table there (was PYICEBERG_HOME set after the catalog was configured?)")
    if catalog.table_exists(identifier):
        snapshot = catalog.load_table(identifier).current_snapshot()
        if snapshot is not None and snapshot.summary.get("total-data-files") == str(len(files)):
            print(f"Iceberg table {identifier}: reusing its {len(files)} files "
                  f"({home.relative_to(REPO_ROOT)})")
            return identifier
        catalog.drop_table(identifier)  # not purge_table: the data files are the cached ones, kept
    namespace = identifier.rpartition(".")[0]
    catalog.create_namespace_if_not_exists(namespace)
    table = catalog.create_table(identifier, schema=pq.read_schema(files[0]))
    started = time.perf_counter()
    table.add_files([str(p) for p in files])
    print(f"Iceberg table {identifier}: add_files of {len(files)} files in "
          f"{time.perf_counter() - started:.1f}s")
    return identifier


def iceberg_home(files_dir: Path) -> Path:
    """The catalog's directory beside the files it is made of (cached with them)."""
    home = files_dir.with_name(f"iceberg-{files_dir.name}")
    home.mkdir(exist_ok=True)
    write_sql_catalog_config(home, home)
    return home


# --- timing -------------------------------------------------------------------------------------------


def timed_plan(source: str, where: str, cache: MetadataCache) -> tuple[float, Plan]:
    t0 = time.perf_counter()
    result = plan(source, where, cache=cache)
    return time.perf_counter() - t0, result


def timed_pyiceberg(identifier: str, row_filter: BooleanExpression) -> tuple[float, int]:
    """pyiceberg's own cold planning: a fresh table from the catalog, its manifest cache emptied first."""
    clear_manifest_cache()
    t0 = time.perf_counter()
    tasks = list(load_table(identifier).scan(row_filter=row_filter).plan_files())
    return time.perf_counter() - t0, len(tasks)


def counts_line(p: Plan) -> str:
    c = p.counts
    return (f"files {c.files_selected}/{c.files_total}, row groups "
            f"{c.row_groups_selected}/{c.row_groups_total}, pages {c.pages_selected}/{c.pages_total}, rows "
            f"{c.rows_selected:,}/{c.rows_total:,}, bytes {c.bytes_selected:,}/{c.bytes_total:,}")


@dataclass
class Result:
    source: str
    probe: str
    cold_ms: float
    warm_ms: float
    pyiceberg_ms: float | None = None  # cold, in the same runs (Iceberg only)


def bench(source: str, label: str, probes: dict[str, tuple[str, BooleanExpression]], n_cold: int, n_warm: int,
          profile_top: int, *, iceberg: bool = False) -> list[Result]:
    results = []
    for name, (where, row_filter) in probes.items():
        cold, theirs, cold_plan, their_files = [], [], None, None
        for _ in range(n_cold):
            if iceberg:  # alternating, so that a busy moment of the machine weighs on both alike
                secs, their_files = timed_pyiceberg(source, row_filter)
                theirs.append(secs)
                clear_manifest_cache()
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
        if iceberg:
            their_ms = statistics.median(theirs) * 1e3
            print(f"    pyiceberg plan_files cold median {their_ms:9.1f} ms (min {min(theirs) * 1e3:.1f}, "
                  f"n={n_cold}), {their_files} files kept")
        print(f"    cold median {cold_ms:9.1f} ms (min {min(cold) * 1e3:.1f}, n={n_cold}); "
              f"warm median {warm_ms:7.2f} ms (min {min(warm) * 1e3:.2f}, n={n_warm}); "
              f"cold / warm {cold_ms / warm_ms:5.1f}x")
        print(f"    warm cache: {stats.entries} entries, {stats.bytes / 2**20:.1f} MiB estimated, "
              f"hit rate {stats.hit_rate:.3f}, loads {stats.loads}, evictions {stats.evictions}")
        if warm_ms >= WARM_GOAL_MS and profile_top:
            profile(source, where, cache, profile_top)
        results.append(Result(label, name, cold_ms, warm_ms,
                              statistics.median(theirs) * 1e3 if iceberg else None))
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
                print(
                    "      " + line.replace(str(REPO_ROOT) + os.sep, "").replace(sys.base_prefix, "<python>")
                )


# --- main ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 files, fewer runs")
    parser.add_argument("--files", type=int, default=None, help="number of files (default "
                                                                "1000, 200 with --quick)")
    parser.add_argument("--rows", type=int, default=20_000, help="rows per file")
    parser.add_argument("--cold", type=int, default=None, help="cold runs per probe "
                                                               "(default 5, 3 with --quick)")
    parser.add_argument("--warm", type=int, default=None, help="warm runs per probe "
                                                               "(default 20, 10 with --quick)")
    parser.add_argument("--no-iceberg", action="store_true", help="only the plain directory")
    parser.add_argument("--no-directory", action="store_true", help="only the Iceberg table")
    parser.add_argument("--regenerate", action="store_true", help="rewrite the cached files")
    parser.add_argument("--profile-top", type=int, default=15,
                        help="functions to print when warm is slow (0: no)")
    args = parser.parse_args(argv)
    n_files = args.files or (200 if args.quick else 1_000)
    n_cold = args.cold or (3 if args.quick else 5)
    n_warm = args.warm or (10 if args.quick else 20)

    files = write_sorted_files(n_files, args.rows, regenerate=args.regenerate)
    print(describe(files))
    total = n_files * args.rows
    point = key_at(files, args.rows, total // 2 + 12_345)
    lo_row = total * 37 // 100
    lo, hi = key_at(files, args.rows, lo_row), key_at(files, args.rows, lo_row + total // 100 - 1)
    probes = {
        "point": (f"k = {point}", EqualTo("k", point)),
        "1% range": (f"k BETWEEN {lo} AND {hi}", And(GreaterThanOrEqual("k", lo), LessThanOrEqual("k", hi))),
    }
    print("plans project every column (as `lakesort plan` does); times are wall times around plan(...)\n")

    results = []
    if not args.no_directory:
        results += bench(str(files[0].parent), "directory", probes, n_cold, n_warm, args.profile_top)
    if not args.no_iceberg:
        # layout.catalog reads pyiceberg's configuration afresh at every lookup, so setting it here works.
        home = iceberg_home(files[0].parent)
        os.environ["PYICEBERG_HOME"] = str(home)
        if args.regenerate:
            shutil.rmtree(home / "warehouse", ignore_errors=True)
            (home / "catalog.db").unlink(missing_ok=True)
            iceberg_home(files[0].parent)
        identifier = iceberg_table(home, files)
        print("  cold: a fresh MetadataCache, pyiceberg's manifest cache cleared and the table loaded from "
              "the catalog inside the timing, for lakesort and pyiceberg alike; "
              "the OS page cache is warm for both")
        results += bench(identifier, "iceberg", probes, n_cold, n_warm, args.profile_top, iceberg=True)

    print(f"\n    {'source':<10} {'probe':<9} {'pyiceberg':>10} {'cold ms':>9} {'warm ms':>9} "
          f"{'cold/pyice':>11} {'cold/warm':>10}  goals")
    for r in results:
        if r.pyiceberg_ms is not None:
            ratio = r.cold_ms / r.pyiceberg_ms
            goals = (f"cold <= {PYICEBERG_GOAL_RATIO}x pyiceberg cold "
                     f"{'OK' if ratio <= PYICEBERG_GOAL_RATIO else 'MISSED'}, warm < {WARM_GOAL_MS:.0f} ms "
                     f"{'OK' if r.warm_ms < WARM_GOAL_MS else 'MISSED'}")
            theirs, versus = f"{r.pyiceberg_ms:10.1f}", f"{ratio:10.2f}x"
        else:
            goals = (f"cold/warm >= {WARM_GOAL_RATIO:.0f}x "
                     f"{'OK' if r.cold_ms / r.warm_ms >= WARM_GOAL_RATIO else 'MISSED'}, warm < "
                     f"{WARM_GOAL_MS:.0f} ms {'OK' if r.warm_ms < WARM_GOAL_MS else 'MISSED'}")
            theirs, versus = f"{'-':>10}", f"{'-':>11}"
        print(f"    {r.source:<10} {r.probe:<9} {theirs} {r.cold_ms:>9.1f} {r.warm_ms:>9.2f} {versus} "
              f"{r.cold_ms / r.warm_ms:>9.1f}x  {goals}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
