"""What a measurement costs, per probe: planning cold and warm, and the ideal (reading the predicate columns).

    .venv/bin/python tests/benchmarks/bench_measure.py [--table demo.lineitem] [--repeats 3]

Runs on a table of the configured catalog (default: the demo table of `make demo`) and, when the table has
an older snapshot, on the snapshot before the last compaction too. For each probe of the table's spec it
prints the cold plan, the warm plan and the ideal computation (`layout.read.scan.match_selections` plus page
counting), best of N, and the ratios cold/warm and ideal/cold: the ideal is the extra a measurement pays
over a plain plan.
"""

from __future__ import annotations

import argparse
import time

from layout.catalog import load_table
from layout.metrics.measure import ideal, owner_probes
from layout.read.cache import MetadataCache
from layout.read.plan import plan
from layout.registry import find_spec


def best(fn, repeats: int) -> tuple[float, object]:
    times, value = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - started)
    return min(times) * 1000, value


def measure_one(table: str, probe, snapshot: int, repeats: int) -> tuple[float, float, float]:
    """(cold, warm, ideal) milliseconds, best of `repeats`."""
    cold, _ = best(lambda: plan(table, probe.where, probe.columns, cache=MetadataCache(), snapshot_id=snapshot),
                   repeats)
    cache = MetadataCache()
    warm_plan = plan(table, probe.where, probe.columns, cache=cache, snapshot_id=snapshot)
    warm, _ = best(lambda: plan(table, probe.where, probe.columns, cache=cache, snapshot_id=snapshot), repeats)
    took, _ = best(lambda: ideal(warm_plan), repeats)  # layout.metrics.measure.ideal
    return cold, warm, took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="demo.lineitem")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    spec = find_spec(args.table)
    table = load_table(spec.table, spec.catalog)
    snapshots = [s.snapshot_id for s in table.snapshots()]
    for label, snapshot in (("before the last compaction", snapshots[-2] if len(snapshots) > 1 else None),
                            ("current", snapshots[-1])):
        if snapshot is None:
            continue
        print(f"\n{args.table} snapshot {snapshot} ({label})")
        print(f"  {'probe':<18} {'cold ms':>9} {'warm ms':>9} {'ideal ms':>9} {'cold/warm':>10} {'ideal/cold':>11}")
        for probe in owner_probes(spec):
            cold, warm, took = measure_one(args.table, probe, snapshot, args.repeats)
            print(f"  {probe.name:<18} {cold:9.1f} {warm:9.1f} {took:9.1f} {cold / warm:10.1f} {took / cold:11.2f}")


if __name__ == "__main__":
    main()
