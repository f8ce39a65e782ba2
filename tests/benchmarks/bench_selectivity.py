"""Benchmark: rows `layout.read.plan` keeps after page-index pruning, against what DataFusion keeps.

Run from the repo root:

    .venv/bin/python tests/benchmarks/bench_selectivity.py [--quick] [--files 20]

The table: 20 Parquet files of 20,000 rows (10 with --quick), written by bench_planning's writer and
cached under tests/benchmarks/.cache/: sorted by `k` across files, 2 row groups of 10,000 rows per file,
pages of exactly 1,000 rows, page index written; `c` is not sorted but locally clustered (its column
indexes are UNORDERED), `v` is uniformly random.

Probes: a point lookup and 0.1%, 1% and 10% ranges on the sort key `k` (at fixed, not page-aligned
positions), a point lookup on `c`, and one on `v`. For each probe:

* ours: `plan(dir, where, columns=[predicate column], cache=False)`: `counts.rows_selected` (rows left
  after file, row-group and page pruning), `row_groups_selected`, `pages_selected`;
* DataFusion (`datafusion` Python package, same version as installed): a SessionContext with
  `datafusion.execution.parquet.enable_page_index=true` and `...pushdown_filters=true` (the names are
  checked: `SessionConfig.set` rejects unknown keys, and the effective values are printed), the
  directory registered as a Parquet table, `EXPLAIN ANALYZE SELECT * FROM t WHERE ...`. From the
  DataSourceExec metrics line we parse `files_ranges_pruned_statistics`, `row_groups_pruned_statistics`,
  `row_groups_pruned_bloom_filter`, `page_index_pages_pruned` and `page_index_rows_pruned`, each shown by
  DataFusion 55 as "N total -> M matched" (older versions print `page_index_rows_matched` and
  `..._pruned` as two counters; both forms are parsed). The metrics we parse are printed raw.

DataFusion prints counts humanized ("10.00 K"), so `page_index_rows_pruned` is rounded. The rows
DataFusion keeps are therefore taken exactly from the page counts: every page holds 1,000 rows and every
row group 10,000, so kept rows = row groups kept x 10,000 - pages pruned x 1,000 (DataFusion skips the
page index of row groups its statistics prove fully matched; their pages count as kept); the same figure
from the humanized row metric is shown next to it as a cross-check. Goal: our rows no more than DataFusion's,
on every probe. Rows that really match (a `count(*)`) are shown for scale.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
for _p in (REPO_ROOT, HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from bench_planning import describe, key_at, write_sorted_files
from datafusion import SessionConfig, SessionContext

from layout.read.plan import plan

ROWS_PER_FILE, ROW_GROUP_ROWS, PAGE_ROWS = 20_000, 10_000, 1_000
DF_SETTINGS = {
    "datafusion.execution.parquet.enable_page_index": "true",
    "datafusion.execution.parquet.pushdown_filters": "true",
}
PARSED = ("files_ranges_pruned_statistics", "row_groups_pruned_statistics", "row_groups_pruned_bloom_filter",
          "page_index_pages_pruned", "page_index_rows_pruned", "page_index_rows_matched")
_UNITS = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
_NUM = r"([\d.]+)(?: ?([KMBT]))?"


def _number(text: str, unit: str | None) -> float:
    return float(text) * _UNITS[unit or ""]


def parse_metrics(line: str) -> dict[str, tuple[float, float | None]]:
    """{name: (total, matched)} for "name=N total → M matched", {name: (value, None)} for "name=N"."""
    out: dict[str, tuple[float, float | None]] = {}
    for name in PARSED:
        m = re.search(rf"\b{name}={_NUM} total → {_NUM} matched", line)
        if m:
            out[name] = (_number(m.group(1), m.group(2)), _number(m.group(3), m.group(4)))
            continue
        m = re.search(rf"\b{name}={_NUM}(?=[,\]])", line)
        if m:
            out[name] = (_number(m.group(1), m.group(2)), None)
    return out


def raw_metrics(line: str) -> str:
    metrics = line[line.index("metrics=[") + len("metrics=["):].rstrip("]")
    return ", ".join(p for p in metrics.split(", ") if p.split("=", 1)[0] in PARSED)


def total_matched(m: dict[str, tuple[float, float | None]], name: str, old_matched: str | None = None):
    """(total, matched) of a metric in either form; None when DataFusion did not report it."""
    if name not in m:
        return None
    total, matched = m[name]
    if matched is None:  # older DataFusion: separate `<x>_pruned` and `<x>_matched` counters
        if old_matched is None or old_matched not in m:
            return None
        pruned, matched = total, m[old_matched][0]
        total = pruned + matched
    return total, matched


def datafusion_context(directory: Path) -> SessionContext:
    config = SessionConfig().with_information_schema(True)
    for key, value in DF_SETTINGS.items():
        config = config.set(key, value)  # raises on a key this DataFusion does not know
    ctx = SessionContext(config)
    ctx.register_parquet("t", str(directory))
    names = ", ".join(f"'{k}'" for k in DF_SETTINGS)
    rows = ctx.sql(f"SELECT name, value FROM information_schema.df_settings WHERE name IN ({names})")
    effective = dict(zip(*(c.to_pylist() for c in rows.to_arrow_table().columns)))
    print("DataFusion settings: " + ", ".join(f"{k}={effective.get(k)}" for k in DF_SETTINGS))
    return ctx


def datafusion_probe(ctx: SessionContext, where: str) -> tuple[dict, str]:
    result = ctx.sql(f"EXPLAIN ANALYZE SELECT * FROM t WHERE {where}").to_arrow_table()
    text = "\n".join(result.column("plan").to_pylist())
    lines = [ln for ln in text.splitlines() if "DataSourceExec" in ln and "metrics=[" in ln]
    if len(lines) != 1:
        raise RuntimeError(f"expected one DataSourceExec line with metrics, got:\n{text}")
    return parse_metrics(lines[0]), raw_metrics(lines[0])


def count(ctx: SessionContext, where: str) -> int:
    return ctx.sql(f"SELECT count(*) AS n FROM t WHERE {where}").to_arrow_table().column("n")[0].as_py()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 files instead of 20")
    parser.add_argument("--files", type=int, default=None)
    parser.add_argument("--regenerate", action="store_true", help="rewrite the cached files")
    args = parser.parse_args(argv)
    n_files = args.files or (10 if args.quick else 20)

    files = write_sorted_files(n_files, ROWS_PER_FILE, page_rows=PAGE_ROWS, row_group_rows=ROW_GROUP_ROWS,
                               regenerate=args.regenerate)
    directory = files[0].parent
    print(describe(files))
    total = n_files * ROWS_PER_FILE

    def key_range(start_fraction: float, fraction: float) -> str:
        lo_row = int(total * start_fraction) + 137  # not aligned to pages or row groups
        lo = key_at(files, ROWS_PER_FILE, lo_row)
        hi = key_at(files, ROWS_PER_FILE, lo_row + max(1, int(total * fraction)) - 1)
        return f"k BETWEEN {lo} AND {hi}"

    probes = {
        "k point": f"k = {key_at(files, ROWS_PER_FILE, total // 3 + 4_321)}",
        "k 0.1%": key_range(0.21, 0.001),
        "k 1%": key_range(0.43, 0.01),
        "k 10%": key_range(0.62, 0.10),
        "c point (unsorted)": f"c = {int(total * 0.55) + 99}",
        "v point (random)": "v = 3",
    }
    ctx = datafusion_context(directory)
    print()

    rows = []
    for name, where in probes.items():
        column = where.split()[0]
        ours = plan(str(directory), where, columns=[column], cache=False)
        metrics, raw = datafusion_probe(ctx, where)
        print(f"  {name}: WHERE {where}")
        print(f"    DataFusion metrics: {raw}")
        files_tm = total_matched(metrics, "files_ranges_pruned_statistics")
        rg_stats = total_matched(metrics, "row_groups_pruned_statistics")
        rg_bloom = total_matched(metrics, "row_groups_pruned_bloom_filter")
        pages_tm = total_matched(metrics, "page_index_pages_pruned")
        rows_tm = total_matched(metrics, "page_index_rows_pruned", "page_index_rows_matched")
        df_row_groups = int((rg_bloom or rg_stats)[1])
        df_files = int(files_tm[1]) if files_tm else None
        # DataFusion skips the page index for row groups its statistics prove fully matched, so the page
        # metrics cover only the other kept row groups: what it drops is the pruned pages / rows.
        pages_pruned = int(pages_tm[0] - pages_tm[1]) if pages_tm is not None else 0
        df_pages = df_row_groups * (ROW_GROUP_ROWS // PAGE_ROWS) - pages_pruned
        df_rows = df_row_groups * ROW_GROUP_ROWS - pages_pruned * PAGE_ROWS
        humanized = None
        if rows_tm is not None:
            humanized = df_row_groups * ROW_GROUP_ROWS - (rows_tm[0] - rows_tm[1])
            if abs(humanized - df_rows) > max(10, 0.01 * ROW_GROUP_ROWS * df_row_groups):
                print(f"    WARNING: page_index_rows_pruned gives {humanized:,.0f} kept rows, the page "
                      f"counts {df_rows:,}: the file layout is not what this script assumes")
        c = ours.counts
        matching = count(ctx, where)
        assert c.rows_selected >= matching, f"{name}: plan kept {c.rows_selected} < {matching} matching rows"
        print(f"    ours: files {c.files_selected}, row groups {c.row_groups_selected}, "
              f"pages {c.pages_selected}, rows {c.rows_selected:,};  DataFusion: files {df_files}, "
              f"row groups {df_row_groups}, pages {df_pages}, rows {df_rows:,} (from the humanized row "
              f"metric {'n/a' if humanized is None else f'{humanized:,.0f}'}); matching rows {matching:,}")
        rows.append((name, matching, c.rows_selected, df_rows, c.row_groups_selected, df_row_groups,
                     c.pages_selected, df_pages))

    print(f"\n    {'probe':<20} {'matching':>9} {'ours rows':>10} {'DF rows':>10} {'ours/DF':>8} "
          f"{'ours rg':>8} {'DF rg':>6} {'ours pg':>8} {'DF pg':>6}  goal: ours rows <= DF rows")
    missed = 0
    for name, matching, our_rows, df_rows, our_rg, df_rg, our_pg, df_pg in rows:
        ok = our_rows <= df_rows
        missed += not ok
        ratio = our_rows / df_rows if df_rows else float("nan")
        print(f"    {name:<20} {matching:>9,} {our_rows:>10,} {df_rows:>10,} {ratio:>8.2f} "
              f"{our_rg:>8} {df_rg:>6} {our_pg:>8} {df_pg:>6}  {'OK' if ok else 'MISSED'}")
    print(f"\nours no larger than DataFusion on {len(rows) - missed} of {len(rows)} probes  "
          f"{'OK' if not missed else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
