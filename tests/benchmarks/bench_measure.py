"""What a measurement costs: planning cold and warm, and the ideal (reading the predicate columns).

    .venv/bin/python tests/benchmarks/bench_measure.py --scale 1 [--batches 3] [--no-after] [--keep]
    .venv/bin/python tests/benchmarks/bench_measure.py [--table demo.lineitem] [--repeats 3]

With `--scale`, the goal of measuring (issue #16): measuring the probes of a table costs at most 25% of
its compaction and grows with the selected data, not the table. TPC-H `lineitem` at that scale factor is
ingested by `layout.demo.build_demo` into `demo.lineitem` of a throw-away SQLite catalog in a temporary
directory, isolated as `bench_compact` does (its `isolate`: PYICEBERG_HOME, HOME and the working
directory point there; tpchgen's output is cached under tests/benchmarks/.cache/tpch/). The spec is
bench_compact's (sizes of a real table, sort l_shipdate, l_orderkey) with the probes of
dags/tables/demo_lineitem.yaml: the owners' 4 probes and 8 standard ones, drawn once on the snapshot
before, as a compaction run does. `layout.metrics.measure.measure` is timed on the unsorted snapshot
the ingest leaves ("before": one small file per month per append, every row group selected by probes
off the partition column); then, unless `--no-after`, the table is compacted by
`layout.compaction.pipeline.driver.compact` (spark-submit, local[*], as bench_compact runs it) and the sorted
snapshot is measured too ("after"). Each measurement is broken down into planning cold and warm and
the ideal, and is run again with the ideal computed exactly (no row-group budget) to show what the cap
saves and what the estimate misses. The figure: drawing + before + after against the compaction.

Without `--scale`: runs on a table of the configured catalog (default: the demo table of `make demo`)
and, when the table has an older snapshot, on the snapshot before the last compaction too. For each
owner probe it prints the cold plan, the warm plan and the ideal, best of N, and the ratios cold/warm
and ideal/cold.

Timings are single runs on whatever else the machine is doing; exits 0 whether or not a goal is met.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import sys
import time

import yaml
from bench_compact import DEFAULT_CONF, REPO_ROOT, SPEC, Timers, isolated_home, live_files, mib

GOAL_SHARE = 0.25  # of the compaction's time, both snapshots together
DEMO_SPEC = REPO_ROOT / "dags" / "tables" / "demo_lineitem.yaml"


def best(fn, repeats: int) -> tuple[float, object]:
    times, value = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - started)
    return min(times) * 1000, value


# --- on a table of the configured catalog ----------------------------------------------------------------


def measure_one(table: str, probe, snapshot: int, repeats: int) -> tuple[float, float, float]:
    """(cold, warm, ideal) milliseconds, best of `repeats`."""
    # layout (and so pyiceberg) is imported only once the mode is known: --scale must isolate first.
    from layout.metrics.measure import ideal
    from layout.read.cache import MetadataCache
    from layout.read.plan import plan

    cold, _ = best(lambda: plan(table, probe.where, probe.columns, cache=MetadataCache(),
                                snapshot_id=snapshot),
                   repeats)
    cache = MetadataCache()
    warm_plan = plan(table, probe.where, probe.columns, cache=cache, snapshot_id=snapshot)
    warm, _ = best(lambda: plan(table, probe.where, probe.columns, cache=cache, snapshot_id=snapshot),
                   repeats)
    took, _ = best(lambda: ideal(warm_plan), repeats)
    return cold, warm, took


def per_probe(args: argparse.Namespace) -> None:
    # See measure_one: nothing imports pyiceberg before the mode is chosen.
    from layout.catalog import load_table
    from layout.metrics.measure import owner_probes
    from layout.registry import find_spec

    spec = find_spec(args.table)
    table = load_table(spec.table, spec.catalog)
    snapshots = [s.snapshot_id for s in table.snapshots()]
    for label, snapshot in (("before the last compaction", snapshots[-2] if len(snapshots) > 1 else None),
                            ("current", snapshots[-1])):
        if snapshot is None:
            continue
        print(f"\n{args.table} snapshot {snapshot} ({label})")
        print(f"  {'probe':<18} {'cold ms':>9} {'warm ms':>9} {'ideal ms':>9} "
              f"{'cold/warm':>10} {'ideal/cold':>11}")
        for probe in owner_probes(spec):
            cold, warm, took = measure_one(args.table, probe, snapshot, args.repeats)
            print(f"  {probe.name:<18} {cold:9.1f} {warm:9.1f} {took:9.1f} "
                  f"{cold / warm:10.1f} {took / cold:11.2f}")


# --- on a TPC-H table built for the run ---------------------------------------------------------------------


def timed_measure(spec, snapshot: int, probes, timers: Timers, **budget) -> dict:
    """One `measure` of `probes` on `snapshot` (nothing recorded), with its breakdown in seconds."""
    # Imported after bench_compact.isolate (see scale_mode).
    from layout.metrics import measure as measuring

    timers.reset()
    started = time.perf_counter()
    rows = measuring.measure(spec.table, spec=spec, snapshot_id=snapshot, probes=probes,
                             record=False, **budget)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "rows": rows, "ideal": timers.seconds.get("ideal", 0.0),
            "cold": sum(m.plan_cold_ms for m in rows) / 1000,
            "warm": sum(m.plan_warm_ms for m in rows) / 1000}


def print_measurement(label: str, run: dict, exact: dict | None) -> None:
    s = run["seconds"]
    print(f"\n{label}: {len(run['rows'])} probes in {s:.2f}s: plans cold {run['cold']:.2f}s, warm "
          f"{run['warm']:.2f}s, ideal {run['ideal']:.2f}s ({run['ideal'] / s:.0%} of the measurement)")
    if exact is not None:
        print(f"  the same with the exact ideal: {exact['seconds']:.2f}s, ideal {exact['ideal']:.2f}s")
    by_name = {m.probe: m for m in exact["rows"]} if exact is not None else {}
    print(f"  {'probe':<22} {'row groups':>11} {'bytes selected':>15} {'efficiency':>10} {'exact':>7}  ideal")
    for m in run["rows"]:
        e = by_name.get(m.probe)
        total = "?" if m.row_groups_total is None else m.row_groups_total  # None: not every footer opened
        print(f"  {m.probe:<22} {m.row_groups_selected:>5}/{total:<5} {m.bytes_selected:>15,} "
              f"{m.efficiency:>10.3f} {e.efficiency if e else float('nan'):>7.3f}  {m.ideal_method}")


def scale_mode(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    home = isolated_home("lakesort-bench-measure-", keep=args.keep)

    # pyiceberg may be imported only now that PYICEBERG_HOME points at the temporary catalog.
    from layout.catalog import load_table
    from layout.compaction.pipeline.driver import compact
    from layout.demo import build_demo
    from layout.metrics import measure as measuring
    from layout.spec import parse_spec

    probes = yaml.safe_load(DEMO_SPEC.read_text())["probes"]
    spec = parse_spec({**SPEC, "probes": probes}, source="bench_measure")
    timers = Timers()
    timers.wrap(measuring, "ideal", "ideal")
    atexit.register(timers.restore)

    started = time.perf_counter()
    summary = build_demo(home, scale=args.scale, batches=args.batches, config_dir=home)
    table = load_table(spec.table, spec.catalog)
    files = live_files(table)
    print(f"ingested TPC-H lineitem sf={args.scale:g}: {summary.rows:,} rows in {len(files)} files, "
          f"{mib(sum(files.values()))}, in {time.perf_counter() - started:.0f}s")
    print(f"{os.cpu_count()} CPUs, load average now {os.getloadavg()[0]:.1f} (other jobs share the machine)")

    # As a compaction run does (layout.compaction.pipeline.steps.measure): the probes drawn once, on the
    # snapshot before, and measured on both.
    snapshot = table.current_snapshot().snapshot_id
    started = time.perf_counter()
    probes = measuring.probes_for(spec, table, snapshot)
    drawing = time.perf_counter() - started
    print(f"\ndrawing the standard probes (once for both snapshots): {drawing:.2f}s")
    before = timed_measure(spec, snapshot, probes, timers)
    before_exact = timed_measure(spec, snapshot, probes, timers, ideal_row_groups=None)
    print_measurement("before (unsorted)", before, before_exact)
    if args.no_after:
        return
    print("\nlakesort compact ...", flush=True)
    started = time.perf_counter()
    result = compact(spec.table, spec=spec, master="local[*]", spark_conf=DEFAULT_CONF,
                     work_dir=home / "compact")
    compaction = time.perf_counter() - started
    print(f"  {compaction:.1f}s: {result.files_before} -> {result.files_after} files")
    after = timed_measure(spec, result.snapshot_id, probes, timers)
    after_exact = timed_measure(spec, result.snapshot_id, probes, timers, ideal_row_groups=None)
    print_measurement("after (sorted)", after, after_exact)
    both = drawing + before["seconds"] + after["seconds"]
    both_exact = drawing + before_exact["seconds"] + after_exact["seconds"]
    ideal, cold = before["ideal"] + after["ideal"], before["cold"] + after["cold"]
    print(f"\n    measuring (drawing + before + after): {both:.2f}s = {both / compaction:.1%} of the "
          f"compaction ({compaction:.1f}s); goal <= {GOAL_SHARE:.0%} "
          f"{'OK' if both <= GOAL_SHARE * compaction else 'MISSED'}")
    print(f"      of which cold plans {cold:.2f}s ({cold / both:.0%}), ideal {ideal:.2f}s "
          f"({ideal / both:.0%}), drawing {drawing:.2f}s ({drawing / both:.0%})")
    print(f"    with the exact ideal: {both_exact:.2f}s = {both_exact / compaction:.1%}")
    print(f"    load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[2]:.1f} (15 min)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=None,
                        help="build TPC-H lineitem at this scale factor in a temporary "
                             "catalog and time `measure`")
    parser.add_argument("--batches", type=int, default=3, help="ingest appends (each "
                                                               "writes one file per month)")
    parser.add_argument("--no-after", action="store_true", help="skip the compaction and the sorted snapshot")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--table", default="demo.lineitem")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.scale is not None:
        scale_mode(args)
    else:
        per_probe(args)


if __name__ == "__main__":
    sys.exit(main())
