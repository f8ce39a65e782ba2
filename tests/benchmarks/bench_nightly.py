"""Benchmark: the nightly rewrite amplification
(bytes a nightly compaction rewrites / bytes the night appended).

Run from the repo root:

    .venv/bin/python tests/benchmarks/bench_nightly.py [--quick] [--scale 1] [--batches 3] [--keep]
    .venv/bin/python tests/benchmarks/bench_nightly.py --quick --nights 30     # issue #17's 30 nights

The table: TPC-H `lineitem` as `layout.demo.build_demo` makes it (shuffled rows, `--batches` appends,
partitioned by month of l_shipdate), in a throw-away catalog (bench_compact.py's isolation). After the
first compaction, one day of new orders is appended with `table.append`: the lineitems of the orders
placed on `--day` (from tpchgen's orders table), their order keys shifted past the largest one so they
are new rows. TPC-H ships a line 1-121 days after the order, so a day of orders lands in about five
monthly partitions, as a real day of ingest does. `compact` runs again; figure: the plan's input bytes /
the appended files' bytes. With `--nights N`, N nights in a row (each appends the next day of orders and
compacts): the figure is the sum over the nights, and after each night a dry plan reports the deepest
overlap of any partition (at most the spec's max_sorted_runs). Beside it, the least any merge policy could
have rewritten for the same nights, knowing them in advance (issue #38's goal: at most 1.2x that): per
partition, the exhaustive oracle of tests/compaction/planning/test_sorted_runs.py over the bytes each night
appended there (up to ORACLE_NIGHTS nights; the oracle counts appended bytes, while the plan counts the files
lakesort wrote, whose size differs a little). The plan's decisions are printed with it, and a plan-only
variant (one day of shipments, one partition) for comparison. Exits 0 whether or not a goal is met.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import math
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from bench_compact import SPEC, isolated_home, live_files, mib, tpch_file

AMPLIFICATION_GOAL = 2.0  # issue #17: over 30 nights
OPTIMUM_GOAL = 1.2  # issue #38: rewritten / appended at most this times the least any merge policy rewrites
ORACLE_NIGHTS = 12  # the oracle is exhaustive: past this many nights in a partition it takes too long
DEFAULT_CONF = {"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false"}


READ_GOAL = 1.25  # issue #17: the owners' probes read at most this over a fully compacted table
STORAGE_GOAL = 1.5  # issue #17: bytes under the table location over the live data, retention of 2 days


def maintain(spec, nights: int):
    """`lakesort expire` after a night, with the retention of `nights` simulated nights: the nights pass in
    minutes, so snapshots are kept by count (each night commits two: the append and the compaction), not
    by age. Every retained snapshot is then read in full (pyiceberg), as the issue asks."""
    from layout.catalog import load_table
    from layout.spec import Retention
    from layout.upkeep.lease import LeaseOwner, new_run_id
    from layout.upkeep.maintain import maintain_table

    kept = spec.model_copy(update={"retention": Retention(max_age="1s", min_snapshots=2 * nights)})
    result = maintain_table(spec.table, owner=LeaseOwner.cli(new_run_id("expire")), spec=kept)
    table = load_table(spec.table, spec.catalog)
    for snapshot in table.snapshots():
        rows = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow().num_rows
        expected = int(snapshot.summary["total-records"]) if snapshot.summary else rows
        if rows != expected:
            raise SystemExit(f"snapshot {snapshot.snapshot_id} reads {rows} rows, "
                             f"its summary says {expected}")
    return result


def probes_against_full(spec, args, home: Path, *, first_day: dt.date, new_key: int) -> float:
    """The owners' probes and two on the appended data (a week of the months the nights landed in, one new
    order), planned on the table as the nights left it and again after `compact --full` of the partitions
    the nights touched: the worst ratio of bytes selected. Run after the last night (a full compaction
    every night would cost what the sorted runs save)."""
    from layout.compaction.pipeline.driver import compact
    from layout.read.plan import plan
    from layout.spec import Probe

    week = first_day + dt.timedelta(days=40)
    probes = [*spec.probes,
              Probe(name="appended_week",
                    where=f"l_shipdate BETWEEN DATE '{week}' AND DATE '{week + dt.timedelta(days=6)}'"),
              Probe(name="new_order", where=f"l_orderkey = {new_key}")]

    def selected() -> dict[str, int]:
        return {p.name: plan(spec.table, p.where, p.columns, cache=False).counts.bytes_selected
                for p in probes}

    runs = selected()
    touched = [d.partition for d in plan_partitions(spec) if d.sorted_runs > 1 or d.overlap_depth > 1]
    compact(spec.table, spec=spec, partitions=touched or None, force=True, master=args.master,
            spark_conf=DEFAULT_CONF, work_dir=home / "compact-full")
    full = selected()
    print(f"\nprobes after {args.nights} night(s) against compact --full of {len(touched)} partition(s) "
          f"(bytes selected):")
    for name in runs:
        print(f"    {name:<16} {mib(runs[name]):>12} vs {mib(full[name]):>12}  "
              f"{runs[name] / full[name] if full[name] else float('nan'):.2f}x")
    return max((runs[n] / full[n] for n in runs if full[n]), default=float("nan"))


def partition_of(path: str) -> str:
    """The partition directory of an appended file (pyiceberg writes `.../data/<field>=<value>/<file>`)."""
    found = re.search(r"/([^/]+=[^/]+)/[^/]+$", path)
    return found.group(1) if found else ""


def least_rewritten(per_partition: dict[str, list[int]], max_runs: int) -> int | None:
    """The least bytes any merge policy rewrites for the nights each partition got (the oracle of
    tests/compaction/planning/test_sorted_runs.py, per partition, summed); None past ORACLE_NIGHTS nights."""
    planning_tests = str(HERE.parent / "compaction" / "planning")
    if planning_tests not in sys.path:
        sys.path.insert(0, planning_tests)
    from test_sorted_runs import least_bytes

    if any(len(nights) > ORACLE_NIGHTS for nights in per_partition.values()):
        return None
    return sum(least_bytes(tuple(nights), max_runs) for nights in per_partition.values())


def plan_partitions(spec):
    from layout.catalog import load_table
    from layout.compaction.planning.planner import plan_rewrite

    return plan_rewrite(load_table(spec.table, spec.catalog), spec).partitions


# --- a day of appends ---------------------------------------------------------------------------------


def max_order_key(scale: float) -> int:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    return int(
        pc.max(pq.read_table(tpch_file(scale, "orders"), columns=["o_orderkey"])["o_orderkey"]).as_py()
    )


def orders_of_days(scale: float, first_day: dt.date, days: int, key_shift: int, arrow_schema):
    """The lineitems of the orders placed on [first_day, first_day + days), as new rows (keys shifted)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    orders = pq.read_table(tpch_file(scale, "orders"), columns=["o_orderkey", "o_orderdate"])
    last = first_day + dt.timedelta(days=days)
    mask = pc.and_(pc.greater_equal(orders["o_orderdate"], pa.scalar(first_day)),
                   pc.less(orders["o_orderdate"], pa.scalar(last)))
    keys = orders.filter(mask)["o_orderkey"]
    lines = read_lineitem(scale, arrow_schema)
    lines = lines.filter(pc.is_in(lines["l_orderkey"], value_set=keys.combine_chunks()))
    return _shift_keys(lines, key_shift), len(keys)


def shipments_of_day(scale: float, day: dt.date, key_shift: int, arrow_schema):
    """The lineitems shipped on `day`, as new rows (keys shifted): one partition's worth of arrivals."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lines = read_lineitem(scale, arrow_schema)
    lines = lines.filter(pc.equal(lines["l_shipdate"], pa.scalar(day)))
    return _shift_keys(lines, key_shift)


_LINEITEM: dict[float, object] = {}


def read_lineitem(scale: float, arrow_schema):
    """tpchgen's lineitem in the table's Arrow schema (no string_view, which filters cannot take)."""
    import pyarrow.parquet as pq

    if scale not in _LINEITEM:
        lines = pq.read_table(tpch_file(scale, "lineitem"))
        _LINEITEM[scale] = lines.select([f.name for f in arrow_schema]).cast(arrow_schema)
    return _LINEITEM[scale]


def _shift_keys(lines, key_shift: int):
    import pyarrow as pa
    import pyarrow.compute as pc

    index = lines.schema.get_field_index("l_orderkey")
    field = lines.schema.field(index)
    return lines.set_column(index, field, pc.add(lines["l_orderkey"], pa.scalar(key_shift, field.type)))


def append(table, rows) -> dict[str, int]:
    """Append `rows`; the files the append added (path -> bytes)."""
    before = live_files(table)
    table.append(rows)
    return {p: s for p, s in live_files(table.refresh()).items() if p not in before}


def explain_plan(plan, appended: dict[str, int]) -> None:
    for d in plan.partitions:
        if d.action == "rewrite":
            print(f"    {d.partition}: {d.files} files, {mib(d.bytes)}; {'; '.join(d.reasons)}")
    old = [(f.path, f.size) for g in plan.groups for f in g.inputs if f.path not in appended]
    new = [(f.path, f.size) for g in plan.groups for f in g.inputs if f.path in appended]
    print(f"    inputs: {len(new)} appended file(s), {mib(sum(s for _, s in new))}; "
          f"{len(old)} previously compacted file(s), {mib(sum(s for _, s in old))}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="scale factor 0.1")
    parser.add_argument("--scale", type=float, default=None,
                        help="TPC-H scale factor (default 1, 0.1 with --quick)")
    parser.add_argument("--batches", type=int, default=3, help="ingest appends (each "
                                                               "writes one file per month)")
    parser.add_argument("--day", type=dt.date.fromisoformat, default=dt.date(1995, 6, 15),
                        help="order date of the nightly append (default 1995-06-15)")
    parser.add_argument("--days", type=int, default=1, help="days of orders in the nightly append")
    parser.add_argument("--nights", type=int, default=1,
                        help="nights to simulate (each appends the next --days of orders and compacts)")
    parser.add_argument("--retain-nights", type=int, default=2,
                        help="maintenance after each night keeps the snapshots of this "
                             "many nights (0: none run)")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    scale = args.scale or (0.1 if args.quick else 1.0)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("pyiceberg").setLevel(logging.WARNING)
    home = isolated_home("lakesort-bench-nightly-", keep=args.keep)

    from layout.catalog import load_table
    from layout.compaction.pipeline.driver import compact
    from layout.compaction.planning.planner import plan_rewrite
    from layout.demo import build_demo
    from layout.spec import parse_spec

    spec = parse_spec(SPEC, source="bench_compact.SPEC")
    started = time.perf_counter()
    summary = build_demo(home, scale=scale, batches=args.batches, config_dir=home)
    print(f"ingested TPC-H lineitem sf={scale:g}: {summary.rows:,} rows in "
          f"{time.perf_counter() - started:.0f}s")
    compact(spec.table, spec=spec, master=args.master, spark_conf=DEFAULT_CONF, work_dir=home / "compact-1")

    table = load_table(spec.table, spec.catalog)
    arrow_schema = table.schema().as_arrow()
    shift = max_order_key(scale) + 1  # shifted keys are new orders
    total_appended = total_rewritten = deepest = 0
    storage = None
    new_key = None  # an order the first night appended: the point lookup of probes_against_full
    # the bytes each night appended, by partition: the oracle's nights
    per_partition: dict[str, list[int]] = {}
    for night in range(args.nights):
        first_day = args.day + dt.timedelta(days=night * args.days)
        day_rows, n_orders = orders_of_days(scale, first_day, args.days, shift, arrow_schema)
        if new_key is None and day_rows.num_rows:
            new_key = day_rows["l_orderkey"][0].as_py()
        appended = append(load_table(spec.table, spec.catalog), day_rows)
        app_bytes = sum(appended.values())
        night_bytes: dict[str, int] = {}
        for path, size in appended.items():
            night_bytes[partition_of(path)] = night_bytes.get(partition_of(path), 0) + size
        for partition, size in night_bytes.items():
            per_partition.setdefault(partition, []).append(size)
        t0 = time.perf_counter()
        result = compact(spec.table, spec=spec, master=args.master, spark_conf=DEFAULT_CONF,
                         work_dir=home / f"compact-night-{night + 1}")
        after = plan_rewrite(load_table(spec.table, spec.catalog), spec)  # a dry plan: the partitions' runs
        depth = max((d.overlap_depth for d in after.partitions), default=0)
        deepest = max(deepest, depth)
        total_appended += app_bytes
        total_rewritten += result.plan.input_bytes
        storage = maintain(spec, args.retain_nights) if args.retain_nights else None
        print(f"\nnight {night + 1}: appended {day_rows.num_rows:,} lineitems of {n_orders:,} orders placed "
              f"{first_day}{f' + {args.days - 1} days' if args.days > 1 else ''} in {len(appended)} files, "
              f"{mib(app_bytes)}; compact {time.perf_counter() - t0:.1f}s rewrote "
              f"{mib(result.plan.input_bytes)} "
              f"({result.plan.input_bytes / app_bytes if app_bytes else float('nan'):.1f}x) in "
              f"{len(result.plan.groups)} groups; deepest overlap now {depth} (max_sorted_runs "
              f"{spec.max_sorted_runs}); so far {total_rewritten / total_appended:.2f}x"
              + (f"; under the location {mib(storage.bytes_after)}, live {mib(storage.live_bytes)} "
                 f"({storage.bytes_after / storage.live_bytes:.2f}x)" if storage else ""))
        explain_plan(result.plan, appended)
    amplification = total_rewritten / total_appended if total_appended else float("nan")
    least = least_rewritten(per_partition, spec.max_sorted_runs)
    optimum = least / total_appended if least and total_appended else float("nan")
    read_ratio = probes_against_full(spec, args, home, first_day=args.day, new_key=new_key or shift + 1)

    ship_day = args.day + dt.timedelta(days=40)
    ship_rows = shipments_of_day(scale, ship_day, 2 * shift, arrow_schema)
    shipped = append(load_table(spec.table, spec.catalog), ship_rows)
    ship_bytes = sum(shipped.values())
    ship_plan = plan_rewrite(load_table(spec.table, spec.catalog), spec)
    ship_amp = ship_plan.input_bytes / ship_bytes if ship_bytes else float("nan")
    print(f"\nplan only: appended {ship_rows.num_rows:,} lineitems shipped {ship_day} in {len(shipped)} "
          f"file(s), {mib(ship_bytes)}; the plan would rewrite {mib(ship_plan.input_bytes)}")
    explain_plan(ship_plan, shipped)
    print(f"\n    {f'{args.nights} night(s): rewritten / appended bytes':<44} {amplification:>8.2f}x  "
          f"<= {AMPLIFICATION_GOAL}x {'OK' if amplification <= AMPLIFICATION_GOAL else 'MISSED'}")
    print(f"    {'the least any merge policy rewrites (oracle)':<44} {optimum:>8.2f}x  "
          f"({len(per_partition)} partitions, {max(map(len, per_partition.values()), default=0)} nights at "
          "most)")
    ratio = amplification / optimum
    print(f"    {'rewritten / that least':<44} {ratio:>8.2f}x  <= {OPTIMUM_GOAL}x "
          f"{'n/a' if math.isnan(ratio) else 'OK' if ratio <= OPTIMUM_GOAL else 'MISSED'}")
    print(f"    {'deepest overlap after any night':<44} {deepest:>8d}   <= {spec.max_sorted_runs} "
          f"{'OK' if deepest <= spec.max_sorted_runs else 'MISSED'}")
    if storage is not None:
        ratio = storage.bytes_after / storage.live_bytes
        print(f"    {f'bytes under the location / live, {args.retain_nights} nights kept':<44} "
              f"{ratio:>8.2f}x  <= {STORAGE_GOAL}x {'OK' if ratio <= STORAGE_GOAL else 'MISSED'}")
    print(f"    {'plan only, one day of shipments':<44} {ship_amp:>8.1f}x")
    print(f"    {'probes: bytes read / fully compacted, worst':<44} {read_ratio:>8.2f}x  <= {READ_GOAL}x "
          f"{'OK' if read_ratio <= READ_GOAL else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
