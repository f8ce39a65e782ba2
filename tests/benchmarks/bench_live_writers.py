"""Benchmark: compacting beside a live writer (issue #51), `lakesort compact` against Iceberg's own
`rewrite_data_files`, with the oracle after every run.

Run from the repo root (it needs the test bed: `make testbed`):

    .venv/bin/python tests/benchmarks/bench_live_writers.py [--writer merge,upsert,stream] [--runs 10]
        [--rows 600000] [--days 12] [--interval 2] [--tools lakesort,iceberg] [--master local[2]]
        [--driver-memory 4g] [--keep]

For each writer (tests/interop/live_writers.py: `merge`, Spark's MERGE INTO in merge-on-read mode; `upsert`,
Flink-style equality deletes by key from Iceberg's Java writer then the new versions, NULL keys included;
`stream`, Structured Streaming from the `rate-micro-batch` source with Iceberg's sink), a table of `--rows`
rows (default 600,000: TPC-H SF 0.1 lineitem's count) partitioned by day over `--days` days, format v2,
merge-on-read, written by Iceberg Spark in three INSERTs and a DELETE (position deletes), in a throw-away
SQLite catalog in a temporary directory. Then `--runs` rounds, each of:
1. lakesort: the writer starts (its own Iceberg Spark process, committing every `--interval` seconds) and
   makes a first commit; `lakesort compact TABLE --spec FILE --force --no-measure` runs as a user runs it
   (the CLI in a subprocess, spark-submit on `--master`); the writer makes one more commit and stops;
2. Iceberg: the same with `CALL lakesort.system.rewrite_data_files(table, strategy 'sort', sort_order 'id ASC
   NULLS FIRST', options rewrite-all, target-file-size-bytes)` in a second Iceberg Spark process.
After each, the oracle (`live_writers.judge`): Iceberg Spark's read equals the writer's model, each rewrite
reads as its parent, no live delete file applies where it must not, and the retained snapshots read whole:
every file any of them names exists, and Iceberg Spark reads the rewrites, their parents and children and
the last snapshot (`--read-all`: every snapshot committed since the round began, a Spark job over hundreds of
small files each). Recorded per round: committed or refused (and why), commit attempts, parts, rows, delete
files carried and removed (lakesort's snapshot summaries), the writer's commits and those Iceberg refused it
(a rewrite that committed first), wall time. The figures end as Markdown tables.

Each lakesort round starts with the table as the previous Iceberg round left it and the other way round, so
every round compacts a table the writer has just changed. After a round the oracle failed, the model is reset
to the table's rows, so that the next round is judged on its own. Exits 0 whatever the outcome (an oracle
failure is reported; `--keep` keeps the tables for a look).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
for _path in (REPO_ROOT, REPO_ROOT / "tests", REPO_ROOT / "tests" / "interop", HERE):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_compact import isolated_home  # the paths above make these importable
from bench_deletes import ensure_java_home

WRITERS = ("merge", "upsert", "stream")
TOOLS = ("lakesort", "iceberg")
TARGET = "128MiB"
TARGET_BYTES = 128 << 20
PREFIX = "lakesort."


@dataclass
class Round:
    writer: str
    tool: str
    run: int
    committed: bool = False
    outcome: str = ""  # why not, when not committed
    attempts: int = 0
    parts: int = 0
    rows: int = 0
    carried: int = 0
    removed: int = 0
    seconds: float = 0.0
    writer_commits: int = 0
    writer_refused: int = 0
    oracle: str = ""
    details: dict[str, Any] = field(default_factory=dict)


class Bench:
    def __init__(self, args: argparse.Namespace, home: Path) -> None:
        import iceberg_bed

        self.args, self.home = args, home
        self.done: list[Round] = []
        os.environ["LAKESORT_BED_MASTER"], os.environ["LAKESORT_BED_MEMORY"] = args.master, args.driver_memory
        self.beds = 0
        self.main = self.bed()  # set-up, the oracle and Iceberg's rewrite
        self.writer_bed = self.bed()  # the writer's commits, beside a rewrite
        self.iceberg_bed = iceberg_bed

    def bed(self) -> Any:
        import iceberg_bed

        self.beds += 1
        scratch = self.home / f"bed-{self.beds}"
        scratch.mkdir()
        started = time.perf_counter()
        spark = iceberg_bed.IcebergSpark(self.home / "catalog.db", f"file://{self.home / 'warehouse'}",
                                         scratch)
        print(f"  (Iceberg Spark {spark.version} started in {time.perf_counter() - started:.0f}s)",
              flush=True)
        return spark

    def close(self) -> None:
        self.main.close()
        self.writer_bed.close()

    # ---- one writer's rounds --------------------------------------------------------------------------

    def writer_rounds(self, kind: str) -> list[Round]:
        import live_writers

        name = f"bench.live_{kind}"
        self.main.sql("CREATE NAMESPACE IF NOT EXISTS bench")
        started = time.perf_counter()
        table, model = live_writers.create_table(self.main, name, rows=self.args.rows, days=self.args.days)
        print(f"\n=== {kind}: {name}, {model.count():,} rows over {table.days} days, built in "
              f"{time.perf_counter() - started:.0f}s ===", flush=True)
        spec_file = self.home / f"{kind}.yaml"
        spec_file.write_text(json.dumps({"table": name, "catalog": "lakesort",
                                         "owner": {"name": "Benchmarks", "email": "bench@example.com"},
                                         "sort": {"keys": [{"column": "id"}]}, "target_file_size": TARGET}))
        rounds = []
        seed = 0
        for run in range(1, self.args.runs + 1):
            for tool in self.args.tools:
                seed += 1
                writer = live_writers.WRITERS[kind](self.writer_bed, table, model,
                                                    interval=self.args.interval, batch=self.args.batch,
                                                    seed=seed)
                one = Round(kind, tool, run)
                self.round(one, writer, table, model, spec_file)
                rounds.append(one)
                self.done.append(one)
                if self.args.json is not None:  # after every round: a benchmark stopped keeps its figures
                    self.args.json.write_text(json.dumps([r.__dict__ for r in self.done], indent=1,
                                                         default=str))
                print(f"  {kind} run {run} {tool}: {describe(one)}", flush=True)
        return rounds

    def round(self, one: Round, writer: Any, table: Any, model: Any, spec_file: Path) -> None:
        import live_writers

        from layout.catalog import load_catalog

        before = live_writers.snapshots(self.main, table.name)
        since = before[-1]["snapshot_id"]
        writer.start()
        try:
            writer.wait_commits(1, timeout=120)
            started = time.perf_counter()
            if one.tool == "lakesort":
                self.lakesort(one, table.name, spec_file)
            else:
                self.iceberg(one, table.name)
            one.seconds = time.perf_counter() - started
            writer.wait_commits(len(writer.commits) + 1, timeout=120)
        finally:
            writer.stop()
        one.writer_commits = len(writer.commits)
        one.writer_refused = len(getattr(writer, "conflicts", ()))
        after = live_writers.snapshots(self.main, table.name)
        new = [s for s in after if s["snapshot_id"] not in {b["snapshot_id"] for b in before}]
        rewrites = [s for s in new if s["operation"] == "replace"]
        if one.tool == "lakesort":
            ours = [s["summary"] for s in rewrites if f"{PREFIX}run-id" in (s["summary"] or {})]
            one.committed = one.committed and bool(ours)
            one.parts = len(ours)
            one.attempts = sum(int(s.get(f"{PREFIX}commit-attempts", 1)) for s in ours) or one.attempts
            one.rows = sum(int(s.get(f"{PREFIX}rows", 0)) for s in ours)
            one.carried = sum(int(s.get(f"{PREFIX}carried-delete-files", 0)) for s in ours)
            one.removed = sum(int(s.get("removed-delete-files", 0)) for s in ours)
        else:
            one.committed = one.committed and bool(rewrites)
            one.parts = len(rewrites)
            one.attempts = 1
            one.rows = sum(int(s["summary"].get("added-records", 0)) for s in rewrites)
            one.removed = sum(int(s["summary"].get("removed-delete-files", 0)) for s in rewrites)
        try:
            verdict = live_writers.judge(self.main, table, model, catalog=load_catalog(), since=since,
                                         read_all=self.args.read_all)
            one.oracle = (f"holds ({verdict.rows:,} rows, {verdict.snapshots_read} snapshots read, "
                          f"{verdict.deletes.position_files} position / {verdict.deletes.equality_files} "
                          "equality delete files live)")
        except AssertionError as exc:
            one.oracle = f"FAILS: {str(exc)[:2000]}"
            model.reset(self.main.read(table.name))  # the next round is judged on its own

    def lakesort(self, one: Round, name: str, spec_file: Path) -> None:
        conf = {"spark.driver.memory": self.args.driver_memory, "spark.sql.shuffle.partitions": "4",
                "spark.ui.enabled": "false"}
        env = {**os.environ, "LAKESORT_SPARK_CONF": json.dumps(conf)}
        log = self.home / f"lakesort-{one.writer}-{one.run}.log"
        with open(log, "w") as out:
            proc = subprocess.run([str(REPO_ROOT / ".venv" / "bin" / "lakesort"), "compact", name, "--spec",
                                   str(spec_file), "--force", "--no-measure", "--master", self.args.master],
                                  stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
        text = log.read_text(errors="replace")
        one.committed = proc.returncode == 0
        one.attempts = sum(1 for line in text.splitlines() if " attempt " in line and "commit part" in line)
        if not one.committed:
            lines = [line for line in text.splitlines() if line.strip()]
            one.outcome = f"exit {proc.returncode}: " + (lines[-1][:300] if lines else "")
        one.details["output"] = [line for line in text.splitlines() if name in line or "commit" in line][-5:]

    def iceberg(self, one: Round, name: str) -> None:
        options = {"rewrite-all": "true", "target-file-size-bytes": str(TARGET_BYTES)}
        try:
            out = self.main.call("rewrite_data_files", table=name, strategy="sort",
                                 sort_order="id ASC NULLS FIRST", options=options)
            one.committed = True
            one.details["output"] = out
        except self.iceberg_bed.BedError as exc:
            one.outcome = java_cause(str(exc))


def java_cause(message: str) -> str:
    """The Java exception behind a bed error (py4j's first line only names the call), shortened."""
    for line in message.splitlines():
        line = line.strip().lstrip(": ")
        if "Exception: " in line and not line.startswith("Iceberg Spark: Py4J"):
            return line.removeprefix("org.apache.iceberg.exceptions.")[:240]
    return message.splitlines()[0][:240]


def describe(one: Round) -> str:
    how = "committed" if one.committed else f"REFUSED ({one.outcome})"
    return (f"{how}; {one.attempts} attempt(s), {one.parts} part(s), {one.rows:,} rows, {one.carried} "
            f"delete files carried, {one.removed} removed; {one.seconds:.1f}s; writer: {one.writer_commits} "
            f"commits, {one.writer_refused} refused; oracle {one.oracle}")


def summary(rounds: list[Round], args: argparse.Namespace) -> None:
    print(f"\n{args.runs} run(s) per writer and tool; {args.rows:,} rows, {args.days} partitions; the writer "
          f"commits every {args.interval:g}s.\n")
    head = ("writer", "tool", "committed", "1st attempt", "<= 3 attempts", "attempts (max)", "parts",
            "rows (median)", "delete files carried", "seconds (median)", "writer commits", "writer refused",
            "oracle held")
    table = [head]
    for kind in dict.fromkeys(r.writer for r in rounds):
        for tool in args.tools:
            mine = [r for r in rounds if r.writer == kind and r.tool == tool]
            if not mine:
                continue
            ok = [r for r in mine if r.committed]
            n = len(mine)
            table.append((
                kind, tool, f"{len(ok)}/{n}", f"{sum(r.committed and r.attempts <= 1 for r in mine)}/{n}",
                f"{sum(r.committed and r.attempts <= 3 for r in mine)}/{n}",
                str(max((r.attempts for r in mine), default=0)),
                str(sum(r.parts for r in ok)),
                f"{int(statistics.median(r.rows for r in ok)):,}" if ok else "-",
                str(sum(r.carried for r in mine)),
                f"{statistics.median(r.seconds for r in mine):.1f}",
                str(sum(r.writer_commits for r in mine)), str(sum(r.writer_refused for r in mine)),
                f"{sum(r.oracle.startswith('holds') for r in mine)}/{n}"))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for i, row in enumerate(table):
        print("| " + " | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    refusals = sorted({(r.writer, r.tool, r.outcome) for r in rounds if not r.committed})
    if refusals:
        print("\nWhy not committed:")
        for kind, tool, outcome in refusals:
            print(f"- {kind} / {tool}: {outcome}")
    failures = [r for r in rounds if not r.oracle.startswith("holds")]
    for r in failures:
        print(f"\nORACLE FAILED: {r.writer} run {r.run} {r.tool}: {r.oracle}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writer", default=",".join(WRITERS), help="comma separated: merge, upsert, stream")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma separated: lakesort, iceberg")
    parser.add_argument("--runs", type=int, default=10, help="rounds per writer and tool (default 10)")
    parser.add_argument("--rows", type=int, default=600_000, help="the table's rows (default 600,000)")
    parser.add_argument("--days", type=int, default=12, help="partitions (default 12)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between the writer's commits")
    parser.add_argument("--batch", type=int, default=50, help="keys a writer step touches (rows per batch)")
    parser.add_argument("--master", default="local[2]", help="both tools' Spark master")
    parser.add_argument("--driver-memory", default="4g", help="both tools' and the writer's driver memory")
    parser.add_argument("--read-all", action="store_true",
                        help="the oracle reads every snapshot of a run (default: the rewrites, their parents "
                             "and children and the last, and every file of every snapshot must exist)")
    parser.add_argument("--json", type=Path, help="also write every round's figures to this JSON file "
                                                  "(rewritten after each round)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    writers = [w for w in args.writer.split(",") if w]
    args.tools = [t for t in args.tools.split(",") if t]
    if bad := [w for w in writers if w not in WRITERS] + [t for t in args.tools if t not in TOOLS]:
        parser.error(f"unknown writer(s) or tool(s) {bad}; writers {list(WRITERS)}, tools {list(TOOLS)}")
    args.json = args.json.resolve() if args.json else None
    home = isolated_home("lakesort-bench-live-", keep=args.keep)
    ensure_java_home()
    import iceberg_bed

    if why := iceberg_bed.missing():
        print(f"the test bed is missing: {why}", file=sys.stderr)
        return 2
    from pyiceberg.catalog.sql import SqlCatalog

    SqlCatalog("lakesort", uri=f"sqlite:///{home / 'catalog.db'}", warehouse=f"file://{home / 'warehouse'}")
    bench = Bench(args, home)
    rounds: list[Round] = []
    try:
        for kind in writers:
            try:
                rounds += bench.writer_rounds(kind)
            except Exception:  # noqa: BLE001 - reported, the next writer goes on
                print(f"  {kind}: the benchmark failed:\n{traceback.format_exc()}", flush=True)
    finally:
        bench.close()
    summary(rounds, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
