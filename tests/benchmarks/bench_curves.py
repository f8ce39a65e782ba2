"""Benchmark: how much of a table readers skip under linear, z-order
(min/max and quantile) and Hilbert layouts.

Run from the repo root:

    .venv/bin/python tests/benchmarks/bench_curves.py [--quick] [--rows N] [--lookups K] [--seed S]

Two two-key tables of `--rows` rows (1,000,000; 200,000 with --quick), each key an int64:

* uniform: x and y independent and uniform over [0, 10^9);
* skewed: x with 97% of its rows in [0, 2,000) and the rest uniform over [0, 10^12) (most rows in a
  sliver of the range: what collapses min/max scaling), y log-normal (sigma 2, scaled to integers).

Each table is laid out four ways, the rows sorted by `layout.curves` (the code the advisor and the Spark
job share) and cut the same way: 16 files, 4 row groups each, pages of 1,000 rows, page index on,
written by pyarrow (zstd):

* linear: sorted by (x, y);
* zorder min/max: bits interleaved from ranks scaled by each key's min and max (`minmax_ranks`, 31 bits a
  key), the job's z-order before quantile ranks;
* zorder quantile: ranks from 2**16 quantile boundaries of each key (`quantile_boundaries`, `ranks`);
* hilbert: the same ranks on the Hilbert curve (`hilbert_index`).

Probes, each `--lookups` times (20) at values drawn from the data with the seed: a point lookup on x and on
y (``x = v``), and a range on each holding about 1% of the rows (between two values 1% apart in the key's
order). Each is planned with `layout.read.plan.plan` on the directory (footer statistics for files and
row groups); the table prints the share of files and of row groups skipped, averaged over the lookups.
No goal: it shows what each layout trades. A run takes about 10 seconds (--quick: 3).
"""

from __future__ import annotations

import argparse
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
import pyarrow.parquet as pq

from layout import curves
from layout.read.cache import MetadataCache
from layout.read.plan import plan

FILES, GROUPS_PER_FILE, PAGE_ROWS = 16, 4, 1_000
LAYOUTS = ("linear", "zorder min/max", "zorder quantile", "hilbert")
PROBES = ("x point", "x 1% range", "y point", "y 1% range")


def tables(rows: int, rng: np.random.Generator) -> dict[str, pa.Table]:
    dense = np.where(rng.random(rows) < 0.97, rng.integers(0, 2_000, rows), rng.integers(0, 10**12, rows))
    return {
        "uniform": pa.table({"x": rng.integers(0, 10**9, rows), "y": rng.integers(0, 10**9, rows)}),
        "skewed": pa.table({"x": dense, "y": (rng.lognormal(0, 2, rows) * 1000).astype(np.int64)}),
    }


def order(data: pa.Table, layout: str) -> np.ndarray:
    x, y = data.column("x"), data.column("y")
    if layout == "linear":
        return np.lexsort((y.to_numpy(), x.to_numpy()))
    if layout == "zorder min/max":
        bits = 31
        return np.argsort(curves.zorder_index([curves.minmax_ranks(c, None, None, bits) for c in (x, y)],
                                              bits),
                          kind="stable")
    bits = curves.curve_bits(2)
    bounds = [curves.quantile_boundaries(c, 1 << bits) for c in (x, y)]
    strategy = "zorder" if layout == "zorder quantile" else "hilbert"
    return np.argsort(curves.curve_index([x, y], bounds, strategy=strategy, bits=bits), kind="stable")


def write(data: pa.Table, rows_order: np.ndarray, directory: Path) -> None:
    directory.mkdir(parents=True)
    group_rows = -(-len(rows_order) // (FILES * GROUPS_PER_FILE))
    for i, chunk in enumerate(np.array_split(rows_order, FILES)):
        pq.write_table(data.take(pa.array(chunk)), directory / f"part-{i:03d}.parquet",
                       row_group_size=group_rows, max_rows_per_page=PAGE_ROWS, data_page_size=1 << 30,
                       write_page_index=True, compression="zstd")


def probes(data: pa.Table, lookups: int, rng: np.random.Generator) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key in ("x", "y"):
        values = np.sort(data.column(key).to_numpy())
        n = len(values)
        picks = rng.integers(0, n, lookups)
        out[f"{key} point"] = [f"{key} = {values[i]}" for i in picks]
        starts = rng.integers(0, n - n // 100, lookups)
        out[f"{key} 1% range"] = [f"{key} BETWEEN {values[i]} AND {values[i + n // 100]}" for i in starts]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200,000 rows")
    parser.add_argument("--rows", type=int, default=None, help="rows per table (default 1,000,000)")
    parser.add_argument("--lookups", type=int, default=20, help="values per probe (default 20)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    rows = args.rows or (200_000 if args.quick else 1_000_000)
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(f"{rows:,} rows per table, {FILES} files x {GROUPS_PER_FILE} row groups, pages of {PAGE_ROWS:,} "
          f"rows; {args.lookups} lookups per probe; share skipped: files / row groups")
    header = ["data", "layout", *PROBES]
    lines = [header]
    with tempfile.TemporaryDirectory(prefix="lakesort-bench-curves-") as tmp:
        for name, data in tables(rows, rng).items():
            wheres = probes(data, args.lookups, rng)
            for layout in LAYOUTS:
                directory = Path(tmp) / name / layout.replace(" ", "-").replace("/", "")
                write(data, order(data, layout), directory)
                cache = MetadataCache()
                cells = []
                for probe in PROBES:
                    files = groups = 0.0
                    for where in wheres[probe]:
                        c = plan(str(directory), where, ["x", "y"], cache=cache).counts
                        files += 1 - c.files_selected / c.files_total
                        groups += 1 - c.row_groups_selected / c.row_groups_total
                    k = len(wheres[probe])
                    cells.append(f"{100 * files / k:.0f}% / {100 * groups / k:.0f}%")
                lines.append([name, layout, *cells])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for line in lines[1:]:
        print("| " + " | ".join(line) + " |")
    print(f"({time.perf_counter() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
