"""Benchmark: lakesort compact against its peers, Iceberg's rewrite_data_files and Delta's OPTIMIZE ZORDER BY.

Run from the repo root (needs `make testbed`: the bed's Spark 4.1 with Iceberg's runtime and Delta):

    .venv/bin/python tests/benchmarks/bench_peers.py --quick                # SF 0.1, minutes
    .venv/bin/python tests/benchmarks/bench_peers.py                        # SF1: partitioned, flat, nightly
    .venv/bin/python tests/benchmarks/bench_peers.py --cases flat --sf10 \\
        --tools iceberg-sort,lakesort-linear

One run, the same data and the same Spark resources for every tool (`--master`, default local[2]; driver
memory 6g, 8 shuffle partitions, UI off; each tool's JVM started for it and its start counted):

- Iceberg: `CALL lakesort.system.rewrite_data_files(table => ..., strategy => 'sort', sort_order => ...,
  options => map('target-file-size-bytes', ..., 'rewrite-all', 'true'))` with the spec's keys, and with
  `zorder(l_shipdate, l_orderkey)`, through Iceberg's JdbcCatalog on the SQLite catalog file pyiceberg uses
  (the bed's Spark 4.1, Iceberg's runtime 1.12.0);
  the table's write.parquet.* properties are the spec's writer;
- Delta: `OPTIMIZE delta.`path` ZORDER BY (l_shipdate, l_orderkey)` on a Delta table written (untimed) from
  the same input files' rows, maxFileSize the same target, parquet-mr's settings the spec's
  (Delta 4.1.0, Spark 4.1);
- lakesort: `compact(...)` (plan, Spark job, verify, commit) with strategy linear, zorder and hilbert on the
  same keys, on lakesort's own Spark (4.2), as bench_compact runs it.

Cases: `partitioned` (TPC-H lineitem SF1 partitioned by month of l_shipdate, bench_compact's: 252 shuffled
files), `flat` (SF1 unpartitioned, 20 appends, 64 MiB target), `sf10` (`--sf10`: SF10 unpartitioned; Iceberg's
sort and lakesort linear unless `--tools` says otherwise) and `nightly`: SF1 partitioned by month whose
partitions each hold 4 sorted runs, built by lakesort itself (4 appends of a quarter of the shuffled rows,
each followed by `compact`; while the state is built, runs are merged only when a partition would hold more
than max_sorted_runs, so each night's run is kept whatever the nightly policy of the day), then merged into
one by Iceberg's sort rewrite, by lakesort's default path (`compact(force=True)`, the `--full` merge) and by
lakesort with the merge path off (Spark conf `spark.lakesort.compact.mergeRuns=false`).

Every tool starts from an identical copy of the input state (peers_tools.State). Per tool and case: wall time;
the input files' bytes (each read whole by every tool: exact); bytes read, shuffled and written from its Spark
event log (task metrics; the bytes read undercount, see print_case); files and bytes out (file sizes); then,
on the files the tool left live (hard-linked into a directory of their own), the probes' bytes by lakesort's
model (`layout.read.plan` over the files) and by DataFusion (`layout.metrics.engine`), and lakesort verify's
findings (column and offset indexes, BoundaryOrder, page sizes) with the spec the tool was asked to meet.
Probes: a point and a range on each key (l_shipdate: a day, a week; l_orderkey: one order, 1% of the keys) and
the owners' late_returns, every column projected; and each key probe family drawn `--draws` times (100 days,
weeks, orders and 1% ranges, the same draws for every tool; lakesort's model), since one draw compares where
pages happen to end more than the layouts (a day of SF10 is about 24,000 rows over pages of 20,000 rows).

Goals, printed as ratios: issue #38's (first compaction lakesort <= 1.0x Iceberg's sort rewrite, probes' bytes
<= Iceberg's; the merge of 4 runs >= 2x faster than Iceberg's sort rewrite and >= 1.5x faster than lakesort's
sort path; zorder and hilbert probes' bytes <= Delta's and Iceberg's zorder), then the goals it closed on
(`closing_goals`; why: tests/benchmarks/README.md). Exits 0 whether or not a goal is met; single runs on
whatever else the machine is doing.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import itertools

import bench_compact
from bench_compact import SPEC, isolated_home, mib, tpch_file
from peers_measure import (
    LayoutFindings,
    ProbeBytes,
    ProbeDraws,
    draws_for,
    findings,
    link_outputs,
    probe_bytes,
    probe_draws,
)
from peers_tools import (
    TOOLS,
    State,
    Tool,
    ToolRun,
    bed_ready,
    delta_optimize,
    delta_write,
    iceberg_rewrite,
    lakesort_compact,
    live_paths,
    set_iceberg_writer,
)

KEYS = ("l_shipdate", "l_orderkey")
CONF = {"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC"}
FIRST_GOAL, MERGE_ICEBERG_GOAL, MERGE_SORT_GOAL = 1.0, 2.0, 1.5
# The goals #38 closed on, where its own proved out of reach (the figures: tests/benchmarks/README.md): the
# rewrite without the proof, which no peer makes, at most Iceberg's time, and the proof at most this share of
# the run; each key probe family's mean bytes over the draws at most DRAWS_GOAL x Iceberg's (a single probe
# compares where pages end); the merge at least as fast as the sort path, with no shuffle; each curve's bytes
# summed over the key probes at most each peer z-order's.
PROOF_SHARE_GOAL, DRAWS_GOAL = 0.15, 1.05
NIGHTS = 4
FIRST_TOOLS = ("iceberg-sort", "iceberg-zorder", "delta-zorder", "lakesort-linear", "lakesort-zorder",
               "lakesort-hilbert")
NIGHTLY_TOOLS = ("iceberg-sort", "lakesort-linear", "lakesort-sort-path")

log = logging.getLogger("bench_peers")


@dataclass(frozen=True)
class PeerCase:
    name: str
    scale: float
    table: str
    kind: str  # partitioned, flat, nightly
    target: str
    appends: int
    tools: tuple[str, ...]
    # nightly: the table partitioned by month of l_shipdate (else one group of every run)
    by_month: bool = True


CASES = {
    "partitioned": PeerCase("partitioned", 1, "demo.lineitem", "partitioned", "128MiB", 3, FIRST_TOOLS),
    "flat": PeerCase("flat", 1, "bench.lineitem_flat", "flat", "64MiB", 20, FIRST_TOOLS),
    "nightly": PeerCase("nightly", 1, "bench.lineitem_nightly", "nightly", "128MiB", NIGHTS, NIGHTLY_TOOLS),
    "nightly-flat": PeerCase("nightly-flat", 1, "bench.lineitem_nightly_flat", "nightly", "128MiB", NIGHTS,
                             NIGHTLY_TOOLS, by_month=False),
    "sf10": PeerCase("sf10", 10, "bench.lineitem_sf10", "flat", "128MiB", 20,
                     ("iceberg-sort", "lakesort-linear")),
}


@dataclass(frozen=True)
class Outcome:
    run: ToolRun
    probes: tuple[ProbeBytes, ...]
    layout: LayoutFindings
    draws: tuple[ProbeDraws, ...] = ()


def spec_for(case: PeerCase, strategy: str):
    from layout.spec import parse_spec

    return parse_spec({**SPEC, "table": case.table, "target_file_size": case.target,
                       "sort": {"strategy": strategy,
                                "keys": [{"column": k, "direction": "asc"} for k in KEYS]}},
                      source=f"bench_peers[{case.name}, {strategy}]")


def probes_for(scale: float) -> list[tuple[str, str]]:
    """A point and a range on each key, and the owners' late_returns. TPC-H order keys run to 6M x SF, the
    first 8 of every 32 used: the point is one that exists, the range 1% of the keys."""
    order = int(4_000_000 * scale) // 32 * 32 + 1
    span = int(60_000 * scale)
    return [("ship_day", "l_shipdate = DATE '1995-03-15'"),
            ("ship_week", "l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-03-07'"),
            ("one_order", f"l_orderkey = {order}"),
            ("orders_1pct", f"l_orderkey BETWEEN {order} AND {order + span}"),
            ("late_returns", "l_returnflag = 'R' AND l_receiptdate > DATE '1998-10-01'")]


# --- building the input states --------------------------------------------------------------------------


def build(case: PeerCase, home: Path, master: str) -> float:
    started = time.perf_counter()
    if case.kind == "nightly":
        build_nightly(case, home, master)
    else:
        bench_compact.build(bench_compact.Case(case.name, case.scale, case.table, case.kind == "partitioned",
                                               case.target, case.appends), home)
        set_iceberg_writer(case.table, spec_for(case, "linear"))
    return time.perf_counter() - started


def build_nightly(case: PeerCase, home: Path, master: str) -> None:
    """NIGHTS appends of a quarter of the shuffled rows into a table partitioned by month, each followed by a
    lakesort compaction that keeps the night's run: `runs_to_merge` is wrapped for the build so that runs are
    merged only when a partition would hold more than max_sorted_runs. The policy does that itself today
    (nothing is merged while a slot is free); the wrapper keeps the state the same if the policy starts
    merging earlier."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.transforms import MonthTransform

    from layout.catalog import load_catalog
    from layout.compaction.pipeline.driver import compact
    from layout.compaction.planning import planner

    catalog = load_catalog("lakesort")
    catalog.create_namespace_if_not_exists(case.table.split(".")[0])
    source = pq.read_table(tpch_file(case.scale, "lineitem"))
    source = source.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_string_view(f.type) else f
                                    for f in source.schema]))
    table = catalog.create_table(case.table, schema=source.schema)
    if case.by_month:
        with table.update_spec() as update:
            update.add_field("l_shipdate", MonthTransform(), "l_shipdate_month")
    # Before the nights: lakesort resolves what the spec leaves open (the dictionary page size) from the
    # table's properties, and that enters the layout's hash; set later,
    # the runs would no longer count as this layout's.
    set_iceberg_writer(case.table, spec_for(case, "linear"))
    table = table.refresh()
    shuffled = source.take(pa.array(np.random.default_rng(7).permutation(source.num_rows)))
    shuffled = shuffled.cast(table.schema().as_arrow())
    spec = spec_for(case, "linear")
    original = planner.runs_to_merge
    planner.runs_to_merge = lambda new_bytes, runs, max_runs, *a, **k: max(0, len(runs) + 1 - max_runs)
    try:
        bounds = np.linspace(0, shuffled.num_rows, NIGHTS + 1).astype(int)
        for night, (lo, hi) in enumerate(itertools.pairwise(bounds), start=1):
            table.refresh().append(shuffled.slice(lo, hi - lo))
            compact(spec.table, spec=spec, master=master, spark_conf=CONF,
                    work_dir=home / f"build-night-{night}")
            print(f"  night {night}: {hi - lo:,} rows appended and compacted", flush=True)
    finally:
        planner.runs_to_merge = original
    table = table.refresh()
    by_partition = Counter(str(task.file.partition) for task in table.scan().plan_files())
    runs = Counter(by_partition.values())
    print(f"  files per partition (a night's run is one file of a partition at this size): "
          f"{', '.join(f'{n} files: {count} partitions' for n, count in sorted(runs.items()))}")


# --- one tool -------------------------------------------------------------------------------------------


def run_tool(tool: Tool, case: PeerCase, home: Path, state: State, delta_path: Path | None, args) -> Outcome:
    spec = spec_for(case, tool.strategy)
    work = home / f"work-{case.name}-{tool.name}"
    target = spec.target_file_size
    print(f"  {tool.name}: ...", end="", flush=True)
    if tool.engine == "iceberg":
        state.restore()
        run = iceberg_rewrite(tool, case.table, KEYS, target, home, args.master, CONF, work)
    elif tool.engine == "delta":
        assert delta_path is not None
        run = delta_optimize(tool, delta_path, KEYS, target, args.master, CONF,
                             spec.writer.spark_options(), work)
    else:
        state.restore()
        run = lakesort_compact(tool, spec, args.master, CONF, work, force=case.kind == "nightly")
    print(f" {run.seconds:.1f}s, {run.files_in} -> {len(run.files_out)} files; {run.note}", flush=True)
    links = home / f"probe-{case.name}-{tool.name}"
    partitions = link_outputs(list(run.files_out), links)
    probes = tuple(probe_bytes(links, probes_for(case.scale)))
    layout = findings(partitions, spec, KEYS)
    draws = tuple(probe_draws(links, draws_for(case.scale, args.draws))) if args.draws else ()
    if not args.keep:
        shutil.rmtree(links, ignore_errors=True)
        shutil.rmtree(work / "events", ignore_errors=True)
    return Outcome(run, probes, layout, draws)


def run_case(case: PeerCase, home: Path, args, tools: list[str]) -> dict[str, Outcome]:
    print(f"\n=== {case.name}: TPC-H lineitem sf={case.scale:g}, {case.kind}, target {case.target}; tools "
          f"{', '.join(tools)} ===", flush=True)
    built = build(case, home, args.master)
    inputs = live_paths(case.table)
    print(f"  input: {len(inputs)} files, {mib(sum(inputs.values()))}, built in {built:.0f}s", flush=True)
    state = State(home, case.name)
    delta_path = None
    if any(TOOLS[t].engine == "delta" for t in tools):
        delta_path = home / f"delta-{case.name}"
        seconds = delta_write(sorted(inputs), delta_path, case.kind != "flat", args.master, CONF,
                              spec_for(case, "zorder").writer.spark_options(),
                              home / f"work-{case.name}-delta-write")
        print(f"  Delta table written from the same {len(inputs)} files in {seconds:.0f}s (untimed)",
              flush=True)
    outcomes = {}
    for name in tools:
        try:
            outcomes[name] = run_tool(TOOLS[name], case, home, state, delta_path, args)
        except Exception as error:  # noqa: BLE001 - one tool failing must not lose the others' figures
            print(f"\n  {name} FAILED: {str(error)[-2000:]}", flush=True)
    if not args.keep:
        state.drop()
        if delta_path is not None:
            shutil.rmtree(delta_path, ignore_errors=True)
    print_case(case, outcomes)
    return outcomes


# --- printing -------------------------------------------------------------------------------------------


def io_text(run: ToolRun) -> tuple[str, str, str]:
    io = run.io
    if io is None:
        return "-", "-", "-"
    return mib(io.read), mib(io.shuffle_written), mib(io.written)


def print_case(case: PeerCase, outcomes: dict[str, Outcome]) -> None:
    if not outcomes:
        return
    names = [p.name for p in next(iter(outcomes.values())).probes]
    print(f"\n  {case.name}: wall time, Spark's I/O (event log), output")
    print(f"    {'tool':<20} {'wall s':>7} {'inputs':>12} {'read (log)':>12} {'shuffled':>12} "
          f"{'written':>12} {'files':>9} {'out':>12}")
    for name, o in outcomes.items():
        read, shuffled, written = io_text(o.run)
        print(f"    {name:<20} {o.run.seconds:7.1f} {mib(o.run.bytes_in):>12} {read:>12} {shuffled:>12} "
              f"{written:>12} {o.run.files_in:>4}->{len(o.run.files_out):<4} {mib(o.run.bytes_out):>12}")
    if any(o.run.tool.startswith("lakesort") for o in outcomes.values()):
        # Spark's input metrics count what Hadoop's file system statistics saw on the task's own thread: rows
        # pulled by another thread (a Python stage's feeder: lakesort's fingerprint and merge) go uncounted.
        print("    inputs: the input files' bytes, each read whole by every tool. read (log): Spark's task "
              "input metrics, which undercount reads made off the task's thread "
              "(lakesort's rows go to Python)")
    print(f"\n  {case.name}: probes' bytes read afterwards, KiB (lakesort's model / DataFusion)")
    print(f"    {'tool':<20} " + " ".join(f"{n:>21}" for n in names))
    for name, o in outcomes.items():
        cells = [f"{p.model / 1024:,.0f} / " + (f"{p.engine / 1024:,.0f}" if p.engine is not None else "?")
                 for p in o.probes]
        print(f"    {name:<20} " + " ".join(f"{c:>21}" for c in cells))
    unconfirmed = {p.engine_status for o in outcomes.values() for p in o.probes if p.engine is None}
    if unconfirmed:
        print(f"    DataFusion: {'; '.join(sorted(unconfirmed))}")
    print_draws(case, outcomes)
    print(f"\n  {case.name}: lakesort verify on each tool's output (the spec of its strategy)")
    for name, o in outcomes.items():
        print(f"    {name:<20} {o.layout.text()}")


def print_draws(case: PeerCase, outcomes: dict[str, Outcome]) -> None:
    """The key probes drawn many times (the same draws for every tool): mean KiB by lakesort's model, and
    against Iceberg's sort rewrite the mean of the per-draw ratios and the share of draws read
    in no more bytes."""
    first = next((o for o in outcomes.values() if o.draws), None)
    if first is None:
        return
    names = [d.name for d in first.draws]
    ice = outcomes.get("iceberg-sort")
    print(f"\n  {case.name}: key probes drawn {len(first.draws[0].values)} times each, mean KiB (lakesort's "
          f"model){'; per draw against iceberg-sort: mean ratio, share of draws <= it' if ice else ''}")
    print(f"    {'tool':<20} " + " ".join(f"{n:>26}" for n in names))
    for name, o in outcomes.items():
        cells = []
        for d in o.draws:
            cell = f"{d.mean / 1024:,.0f}"
            theirs = (next((t for t in ice.draws if t.name == d.name), None) if ice and name != "iceberg-sort"
                      else None)
            if theirs is not None:
                per = [ratio(a, b) for a, b in zip(d.values, theirs.values, strict=True) if b]
                within = sum(a <= b for a, b in zip(d.values, theirs.values, strict=True)) / len(d.values)
                cell += f" ({sum(per) / max(len(per), 1):.2f}x, {within:.0%})"
            cells.append(cell)
        print(f"    {name:<20} " + " ".join(f"{c:>26}" for c in cells))


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def print_goals(results: dict[str, dict[str, Outcome]]) -> None:
    print("\n=== goals (issue #38; ratios from this one run) ===")
    _print_issue_goals(results)
    print("\n=== the goals #38 closed on (its own above; why: tests/benchmarks/README.md) ===")
    for line in closing_goals(results):
        print(f"  {line}")


def closing_goals(results: dict[str, dict[str, Outcome]]) -> list[str]:
    """One line per goal #38 closed on and case, ending OK or MISSED (`PROOF_SHARE_GOAL`, `DRAWS_GOAL`)."""
    lines = []

    def verdict(ok: bool) -> str:
        return "OK" if ok else "MISSED"

    for case, outcomes in results.items():
        nightly, ice, ls, sort_path = _sort_tools(case, outcomes)
        if nightly:
            if sort_path and ls:
                r = ratio(sort_path.run.seconds, ls.run.seconds)
                # A merge shuffles no rows (the job's small aggregations shuffle a few KiB); the merge takes
                # groups of spark.lakesort.compact.mergeMinBytes and more, and smaller ones are sorted.
                if ls.run.io is not None and ls.run.io.shuffle_written > ls.run.bytes_in / 100:
                    lines.append(f"{case}: no group merged (each under the merge's minimum size, so sorted; "
                                 f"{mib(ls.run.io.shuffle_written)} shuffled): "
                                 f"sort path / default = {r:.2f}x")
                else:
                    shuffled = mib(ls.run.io.shuffle_written) if ls.run.io is not None else "?"
                    lines.append(f"{case}: lakesort's sort path / its merge = {r:.2f}x (>= 1.0x), the merge "
                                 f"shuffling no rows ({shuffled}) "
                                 f"{verdict(r >= 1.0 and ls.run.io is not None)}")
            continue
        if ice and ls:
            without = ratio(ls.run.seconds - ls.run.proof_seconds, ice.run.seconds)
            share = ratio(ls.run.proof_seconds, ls.run.seconds)
            lines.append(f"{case}: lakesort without its proof / Iceberg's sort rewrite = {without:.2f}x (<= "
                         f"1.0x), the proof {share:.0%} of the run (<= {PROOF_SHARE_GOAL:.0%}) "
                         f"{verdict(without <= 1.0 and share <= PROOF_SHARE_GOAL)}")
            if ls.draws and ice.draws:
                worst = max(ratio(d.mean, t.mean) for d, t in zip(ls.draws, ice.draws, strict=True))
                lines.append(f"{case}: drawn key probes, lakesort's mean bytes / Iceberg's, the worst family "
                             f"= {worst:.2f}x (<= {DRAWS_GOAL}x) {verdict(worst <= DRAWS_GOAL)}")
        for curve in ("lakesort-zorder", "lakesort-hilbert"):
            for peer in ("delta-zorder", "iceberg-zorder"):
                mine, theirs = outcomes.get(curve), outcomes.get(peer)
                if mine and theirs:
                    r = ratio(*(sum(p.model for p in o.probes if p.name != "late_returns")
                                for o in (mine, theirs)))
                    lines.append(f"{case}: {curve} / {peer}, bytes summed over the key probes = {r:.2f}x (<= "
                                 f"1.0x) {verdict(r <= 1.0)}")
    return lines


def _sort_tools(
    case: str, outcomes: dict[str, Outcome]
) -> tuple[bool, Outcome | None, Outcome | None, Outcome | None]:
    """Whether the case is a nightly merge, and its outcomes of Iceberg's sort,
    lakesort linear and its sort path."""
    return (CASES[case].kind == "nightly", outcomes.get("iceberg-sort"), outcomes.get("lakesort-linear"),
            outcomes.get("lakesort-sort-path"))


def _print_issue_goals(results: dict[str, dict[str, Outcome]]) -> None:
    for case, outcomes in results.items():
        nightly, ice, ls, sort_path = _sort_tools(case, outcomes)
        if nightly:
            if ice and ls:
                r = ratio(ice.run.seconds, ls.run.seconds)
                print(f"  {case} merge of {NIGHTS} runs: Iceberg's sort rewrite / lakesort = {r:.2f}x "
                      f"(goal >= {MERGE_ICEBERG_GOAL}x) {'OK' if r >= MERGE_ICEBERG_GOAL else 'MISSED'}")
            if sort_path and ls:
                r = ratio(sort_path.run.seconds, ls.run.seconds)
                print(f"  {case} merge of {NIGHTS} runs: lakesort's sort path / lakesort = {r:.2f}x "
                      f"(goal >= {MERGE_SORT_GOAL}x) {'OK' if r >= MERGE_SORT_GOAL else 'MISSED'}")
            continue
        if ice and ls:
            r = ratio(ls.run.seconds, ice.run.seconds)
            print(f"  {case}: lakesort linear / Iceberg's sort rewrite, time = {r:.2f}x (goal <= "
                  f"{FIRST_GOAL}x) {'OK' if r <= FIRST_GOAL else 'MISSED'}")
            if ls.run.proof_seconds:
                print(f"  {case}: the same without lakesort's proof (read-back {ls.run.proof_seconds:.1f}s "
                      "with verify, which Iceberg does not do) = "
                      f"{ratio(ls.run.seconds - ls.run.proof_seconds, ice.run.seconds):.2f}x")
            worse = [f"{p.name} {p.model / max(q.model, 1):.2f}x"
                     for p, q in zip(ls.probes, ice.probes, strict=True) if p.model > q.model]
            print(f"  {case}: probes' bytes, lakesort linear <= Iceberg's sort for every probe: "
                  f"{'OK' if not worse else 'MISSED (' + ', '.join(worse) + ')'}")
            if ls.draws and ice.draws:
                means = [f"{d.name} {ratio(d.mean, t.mean):.2f}x"
                         for d, t in zip(ls.draws, ice.draws, strict=True)]
                over = [d.name for d, t in zip(ls.draws, ice.draws, strict=True) if d.mean > t.mean]
                print(f"  {case}: key probes drawn {len(ls.draws[0].values)} times, lakesort linear / "
                      f"Iceberg's sort, mean bytes: {', '.join(means)} {'OK' if not over else 'MISSED'}")
        for curve in ("lakesort-zorder", "lakesort-hilbert"):
            mine = outcomes.get(curve)
            for peer in ("delta-zorder", "iceberg-zorder"):
                theirs = outcomes.get(peer)
                if not mine or not theirs:
                    continue
                cells = [f"{p.name} {ratio(p.model, q.model):.2f}x"
                         for p, q in zip(mine.probes, theirs.probes, strict=True) if p.name != "late_returns"]
                worse = [p.name for p, q in zip(mine.probes, theirs.probes, strict=True)
                         if p.name != "late_returns" and p.model > q.model]
                print(f"  {case}: {curve} / {peer}, probes on the keys' bytes: {', '.join(cells)} "
                      f"{'OK' if not worse else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="partitioned,flat,nightly",
                        help=f"comma separated, of {', '.join(CASES)} (default: all but sf10)")
    parser.add_argument("--sf10", action="store_true", help="also SF10 unpartitioned (long)")
    parser.add_argument("--quick", action="store_true", help="a tenth of the scale (SF 0.1; "
                                                             "not the issue's figures)")
    parser.add_argument("--tools", default="", help="comma separated, "
                                                    f"of {', '.join(TOOLS)} (default: the case's)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--draws", type=int, default=100,
                        help="draws of each key probe family (a day, a week, an order, "
                             "1%% of orders; 0: none)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory and the outputs")
    args = parser.parse_args(argv)
    names = ([n for n in args.cases.split(",") if n]
             + (["sf10"] if args.sf10 and "sf10" not in args.cases else []))
    unknown = ([n for n in names if n not in CASES]
               + [t for t in args.tools.split(",") if t and t not in TOOLS])
    if unknown:
        parser.error(f"unknown case(s) or tool(s) {unknown}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    missing = bed_ready()
    if missing:
        print(f"cannot run the peers: {missing}")
        return 0
    home = isolated_home("lakesort-bench-peers-", keep=args.keep)
    # Run files and the tables' leases under the temporary directory too: the default (<tmp>/lakesort-work) is
    # shared with any other lakesort run on the machine,
    # whose lease on a table of the same name would refuse ours.
    os.environ["LAKESORT_WORK_DIR"] = str(home / "lakesort-work")
    print(f"master {args.master}, conf {CONF}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    results = {}
    for name in names:
        case = CASES[name]
        if args.quick:
            case = dataclasses.replace(case, scale=case.scale / 10)
        chosen = [t for t in args.tools.split(",") if t] or list(case.tools)
        if case.kind == "nightly":  # the merge compares the sort tools only
            chosen = [t for t in chosen if TOOLS[t].strategy == "linear"]
        results[name] = run_case(case, home, args, chosen)
    print_goals(results)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
