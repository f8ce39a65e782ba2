"""Benchmark: `lakesort compact` against a plain Spark sort, at scale, with a breakdown and peak memory.

Run from the repo root:

    .venv/bin/python tests/benchmarks/bench_compact.py [--cases partitioned,flat] [--sf10] [--quick] [--keep]

Three cases on TPC-H `lineitem` (tpchgen-cli, cached under tests/benchmarks/.cache/tpch/, git-ignored), each a
table of a throw-away pyiceberg SQL catalog (SQLite) in a temporary directory:

- `partitioned`: SF1 (6M rows) as `layout.demo.build_demo` makes it: rows shuffled, three appends,
  partitioned by month of l_shipdate, so 252 small unsorted files in 84 partitions;
- `flat`: SF1 unpartitioned, appended in 20 chunks (20 files), compacted into files of 64 MiB (several files
  in one group: the file boundaries come from sampled quantiles, not one task);
- `sf10` (`--sf10`): SF10 (60M rows) unpartitioned, 20 appends, target 128 MiB.

Before pyiceberg is imported, PYICEBERG_HOME and HOME point at the temporary directory, PYICEBERG_* variables
are dropped and the working directory is changed to it; the loaded catalog's URI is checked to be under it.

For each case, in one run with the same master and Spark conf (`--spark-conf`; default driver memory 6g, 8
shuffle partitions, UI off; `--sf10` runs both with lakesort's defaults, no conf at all), JVM start included:

1. naive: `spark-submit` of `spark.read.parquet(<the input files>).orderBy(<keys>).write.parquet(<tmp>)` with
   the plan's writer options (same codec, page, row group and bloom filter settings);
2. `lakesort.compaction.driver.compact(...)`: plan, layout.zip, spark-submit of jobs/compact.py (read, input
   fingerprint, file boundaries, sort, write, read-back fingerprint), verify (Spark's figures, a sampled
   recheck outside Spark, the metadata proof, layout rules and GX) and the Iceberg commit. Goal: at most 1.3x
   naive. The breakdown times each step (wrapped in place) and the job's parts (from its manifest); "other"
   is what no timer covers (the lease, loading the table), so the rows add up to the total;
3. measuring, separately: every probe of the spec on the snapshots before and after (`steps.measure`). Goal:
   at most 25% of the compaction;
4. peak memory, sampled every 100 ms: the Spark driver JVM (resident set), its Python workers (summed), and
   this process (the lakesort side of a run: planning, verify, commit).

DuckDB's `COPY ... ORDER BY` on the same files is printed as the single-machine reference (`--duckdb`).
Exits 0 whether or not a goal is met. Timings are single runs on whatever else the machine is doing.
The nightly rewrite amplification is tests/benchmarks/bench_nightly.py.
"""

from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import psutil

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

CACHE_ROOT = HERE / ".cache" / "tpch"
NAIVE_GOAL = 1.3
MEASURE_GOAL = 0.25
KEYS = ("l_shipdate", "l_orderkey")
DEFAULT_CONF = {"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false"}

SPEC = {
    "table": "demo.lineitem",
    "catalog": "lakesort",
    "owner": {"name": "Benchmarks", "email": "bench@example.com"},
    "sort": {"strategy": "linear", "keys": [{"column": k, "direction": "asc"} for k in KEYS]},
    "target_file_size": "128MiB",
    "writer": {
        "row_group_size": "32MiB",
        "page_size": "1MiB",
        "page_row_count_limit": 20000,
        "column_index_truncate_length": 64,
        "compression": "zstd",
        "compression_level": 3,
        "dictionary": True,
        "bloom_filters": {"l_orderkey": {"ndv": 100000, "fpp": 0.01}},
    },
    "probes": [
        {"name": "one_order", "where": "l_orderkey = 4000000"},
        {"name": "one_week", "where": "l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-03-07'"},
        {"name": "late_returns", "where": "l_returnflag = 'R' AND l_receiptdate > DATE '1998-10-01'"},
    ],
}

NAIVE_JOB = '''\
"""The naive sort: read the files, orderBy the keys, write Parquet. Argument: a JSON file."""
import json
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

args = json.loads(open(sys.argv[1]).read())
spark = SparkSession.builder.appName("bench-naive-sort").getOrCreate()
started = time.perf_counter()
df = spark.read.parquet(*args["inputs"])
df.orderBy(*[F.col(k).asc_nulls_first() for k in args["keys"]]).write.options(**args["options"])\
.parquet(args["output"])
print("NAIVE_JOB_SECONDS", time.perf_counter() - started, flush=True)
spark.stop()
'''


log = logging.getLogger("bench_compact")


# --- isolation ----------------------------------------------------------------------------------------


def isolate(home: Path) -> None:
    """Point pyiceberg (and everything else that looks at ~ or .) at `home`;
    must run before it is imported."""
    if any(m == "pyiceberg" or m.startswith("pyiceberg.") for m in sys.modules):
        raise RuntimeError("pyiceberg is already imported: PYICEBERG_HOME would be ignored")
    for key in [k for k in os.environ if k.startswith("PYICEBERG_")]:
        del os.environ[key]
    os.environ["PYICEBERG_HOME"] = str(home)
    os.environ["HOME"] = str(home)
    # Run files and table leases of this run only: the shared default work directory holds other runs' leases.
    os.environ["LAKESORT_WORK_DIR"] = str(home / "lakesort-work")
    os.chdir(home)
    from layout.catalog import write_sql_catalog_config

    write_sql_catalog_config(home, home)
    # build_demo generates lineitem under <home>/tpch/sf=<scale>/: reuse (and fill) the benchmark cache.
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    (home / "tpch").symlink_to(CACHE_ROOT, target_is_directory=True)


def isolated_home(prefix: str, *, keep: bool) -> Path:
    """A temporary directory holding the catalog, HOME and the working directory (`isolate`), removed at
    exit unless `keep`; the catalog pyiceberg then resolves is checked to be the one under it."""
    home = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    if keep:
        print(f"keeping {home}")
    else:
        atexit.register(shutil.rmtree, home, True)
    isolate(home)
    check_catalog(home)
    return home


def check_catalog(home: Path) -> None:
    from layout.catalog import load_catalog

    uri = str(load_catalog().properties.get("uri", ""))
    if not uri.startswith(f"sqlite:///{home.resolve()}/"):
        raise RuntimeError(f"pyiceberg resolved the catalog {uri!r}, "
                           f"not the one under {home}: refusing to go on")
    print(f"catalog: {uri}")


def tpch_file(scale: float, table: str) -> Path:
    from layout.demo import tpchgen_binary

    target = CACHE_ROOT / f"sf={scale:g}" / f"{table}.parquet"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([tpchgen_binary(), "parquet", "-s", f"{scale:g}", f"--tables={table}", "-o",
                        str(target.parent)], check=True, capture_output=True)
    return target


# --- helpers ------------------------------------------------------------------------------------------


def local_path(uri: str) -> str:
    return uri.removeprefix("file://")


def live_files(table) -> dict[str, int]:
    return {t.file.file_path: t.file.file_size_in_bytes for t in table.scan().plan_files()}


def dir_bytes(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*.parquet") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


class Timers:
    """Wrap module functions in place; accumulate their wall time and keep their last result.

    A call made inside another timed call counts for the outer one only (steps.commit calls live_totals), so
    that the breakdown's rows add up to the total instead of leaving a negative "other".
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.result: dict[str, object] = {}
        self._undo: list = []
        self._depth = 0

    def wrap(self, module, name: str, label: str) -> None:
        original = getattr(module, name)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            self._depth += 1
            try:
                out = original(*args, **kwargs)
                self.result[label] = out
                return out
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.seconds[label] += time.perf_counter() - t0

        setattr(module, name, timed)
        self._undo.append((module, name, original))

    def reset(self) -> None:
        self.seconds.clear()
        self.result.clear()

    def restore(self) -> None:
        for module, name, original in reversed(self._undo):
            setattr(module, name, original)



# --- the contenders -------------------------------------------------------------------------------------


def run_naive(inputs: list[str], options: dict[str, str], conf: dict[str, str],
              master: str, work: Path) -> dict:
    from layout.compaction.pipeline.submit import spark_submit_binary

    work.mkdir(parents=True, exist_ok=True)
    script, args_path, out = work / "naive_sort.py", work / "naive_args.json", work / "out"
    script.write_text(NAIVE_JOB)
    args_path.write_text(json.dumps({"inputs": inputs, "keys": list(KEYS), "options": options,
                                     "output": str(out)}))
    cmd = [spark_submit_binary(), "--master", master, "--name", "bench-naive-sort",
           "--conf", "spark.sql.session.timeZone=UTC"]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += [str(script), str(args_path)]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    t0 = time.perf_counter()
    with open(work / "spark-submit.log", "w") as log_file:
        done = subprocess.run(cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env, check=False)
    seconds = time.perf_counter() - t0
    text = (work / "spark-submit.log").read_text(errors="replace")
    if done.returncode != 0:
        raise RuntimeError(f"naive Spark job failed (exit {done.returncode}):\n{text[-3000:]}")
    job = next(float(line.split()[1]) for line in text.splitlines() if line.startswith("NAIVE_JOB_SECONDS"))
    files, size = dir_bytes(out)
    return {"seconds": seconds, "job_seconds": job, "files": files, "bytes": size}



def run_duckdb(inputs: list[str], work: Path) -> dict:
    import duckdb

    work.mkdir(parents=True, exist_ok=True)
    out = work / "out.parquet"
    files = ", ".join("'" + local_path(p).replace("'", "''") + "'" for p in inputs)
    sql = (f"COPY (SELECT * FROM read_parquet([{files}]) ORDER BY {', '.join(KEYS)}) "
           f"TO '{out}' (FORMAT parquet, COMPRESSION zstd)")
    con = duckdb.connect()
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    t0 = time.perf_counter()
    con.execute(sql)
    seconds = time.perf_counter() - t0
    con.close()
    return {"seconds": seconds, "files": 1, "bytes": out.stat().st_size, "threads": threads}


# --- peak memory ----------------------------------------------------------------------------------------


@dataclass
class PeakMemory:
    """Resident set peaks, sampled every 100 ms while running: the Spark driver JVM (in local mode the
    executors too), its Python workers summed, and this process."""

    driver: int = 0
    workers: int = 0
    lakesort: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(0.1):
            try:
                self.lakesort = max(self.lakesort, me.memory_info().rss)
                workers = 0
                for child in me.children(recursive=True):
                    try:
                        name, rss = child.name(), child.memory_info().rss
                        # Python started by Spark (the job's driver, its workers): a child of this process
                        # between fork and exec has its name and (shared) pages too, 2.5 GiB once.
                        spark_python = (name.startswith("python")
                                        and any(p.name() == "java" for p in child.parents()))
                    except psutil.Error:
                        continue
                    if name == "java":
                        self.driver = max(self.driver, rss)
                    elif spark_python:
                        workers += rss
                self.workers = max(self.workers, workers)
            except psutil.Error:
                continue

    def text(self) -> str:
        return (f"driver JVM {gib(self.driver)}, Python workers {gib(self.workers)}, "
                f"lakesort process {gib(self.lakesort)}")


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


# --- the cases --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    scale: float
    table: str
    partitioned: bool
    target: str
    appends: int


CASES = {
    "partitioned": Case("partitioned", 1, "demo.lineitem", True, "128MiB", 3),
    "flat": Case("flat", 1, "bench.lineitem_flat", False, "64MiB", 20),
    "sf10": Case("sf10", 10, "bench.lineitem_sf10", False, "128MiB", 20),
}


def build(case: Case, home: Path):
    """The case's table (`build_demo` for the partitioned one;
    chunks of tpchgen's file appended otherwise)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from layout.catalog import load_catalog, load_table
    from layout.demo import build_demo

    started = time.perf_counter()
    if case.partitioned:
        build_demo(home, scale=case.scale, batches=case.appends, config_dir=home)
        return load_table(case.table, "lakesort"), time.perf_counter() - started
    catalog = load_catalog("lakesort")
    namespace, _ = case.table.split(".")
    catalog.create_namespace_if_not_exists(namespace)
    source = pq.ParquetFile(tpch_file(case.scale, "lineitem"))
    plain = pa.schema([pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type)
                       for f in source.schema_arrow])
    table = catalog.create_table(case.table, schema=plain)
    rows_per_append = -(-source.metadata.num_rows // case.appends)
    chunk = []
    for batch in source.iter_batches(batch_size=min(rows_per_append, 1 << 20)):  # a chunk in memory at a time
        chunk.append(batch.cast(plain))
        if sum(b.num_rows for b in chunk) >= rows_per_append:
            table.append(pa.Table.from_batches(chunk).cast(table.schema().as_arrow()))
            chunk = []
    if chunk:
        table.append(pa.Table.from_batches(chunk).cast(table.schema().as_arrow()))
    return table.refresh(), time.perf_counter() - started


def spec_for(case: Case):
    from layout.spec import parse_spec

    return parse_spec({**SPEC, "table": case.table, "target_file_size": case.target},
                      source=f"bench_compact.SPEC[{case.name}]")


STEPS = (  # (module, function, label), wrapped in place
    ("layout.compaction.pipeline.steps", "prepare", "prepare"),
    ("layout.compaction.pipeline.driver", "submit", "submit"),
    ("layout.compaction.pipeline.steps", "check_staged", "verify: Spark's figures, recheck"),
    ("layout.compaction.pipeline.steps", "prove_staged", "verify: metadata proof"),
    ("layout.compaction.pipeline.steps", "_verify_layout", "verify: layout rules, GX"),
    ("layout.compaction.pipeline.steps", "commit", "commit"),
    ("layout.compaction.pipeline.steps", "live_totals", "live totals"),
)


def run_compact(spec, conf: dict[str, str], master: str, work: Path, timers: Timers) -> dict:
    from layout.compaction.pipeline.driver import compact

    timers.reset()
    work.mkdir(parents=True, exist_ok=True)
    with PeakMemory() as memory:
        t0 = time.perf_counter()
        result = compact(spec.table, spec=spec, master=master, spark_conf=conf, work_dir=work)
        seconds = time.perf_counter() - t0
    manifests = [json.loads(p.read_text()) for p in sorted(work.glob("manifest-*.json"))]
    job = {"seconds": sum(m["seconds"] for m in manifests), "parts": defaultdict(float)}
    for m in manifests:
        for part, secs in m.get("timings", {}).items():
            job["parts"][part] += secs
    return {"seconds": seconds, "result": result, "plan": result.plan, "job": job,
            "parts": dict(timers.seconds), "memory": memory, "work": work}


def run_measure(work: Path) -> float:
    from layout.compaction.pipeline.steps import PreparedRun, measure

    prepared = PreparedRun.load(work)
    t0 = time.perf_counter()
    outcome = measure(prepared)  # the run's own spec, carried in run.json
    seconds = time.perf_counter() - t0
    print(f"  measuring: {outcome.probes} probes before and after in {seconds:.1f}s; owners' probes read "
          f"{mib(outcome.bytes_selected_before or 0)} -> {mib(outcome.bytes_selected_after or 0)}")
    return seconds


def print_breakdown(run: dict) -> None:
    parts, total, job = run["parts"], run["seconds"], run["job"]
    submit = parts.get("submit", 0.0)
    verify = sum(v for k, v in parts.items() if k.startswith("verify"))
    rows = [("prepare: plan, input footers, layout.zip", parts.get("prepare", 0.0)),
            ("submit: spark-submit", submit)]
    rows += [(f"  job: {name}", secs) for name, secs in job["parts"].items()]
    rows += [("  job: manifest, other", job["seconds"] - sum(job["parts"].values())),
             ("  JVM start, Spark session, stop", submit - job["seconds"])]
    rows += [(k, v) for k, v in parts.items() if k.startswith("verify")]
    rows += [("commit: files unchanged, Iceberg commit, run record", parts.get("commit", 0.0)),
             ("live totals", parts.get("live totals", 0.0))]
    covered = (parts.get("prepare", 0.0) + submit + verify + parts.get("commit", 0.0)
               + parts.get("live totals", 0.0))
    rows.append(("other: the lease, loading the table", total - covered))
    print(f"    {'part':<54} {'seconds':>8} {'share':>6}")
    for name, secs in rows:
        print(f"    {name:<54} {secs:8.1f} {100 * secs / total:5.1f}%")
    print(f"    {'total (top-level rows add up to it)':<54} {total:8.1f}")


def run_case(case: Case, home: Path, args, conf: dict[str, str], timers: Timers) -> dict:
    print(f"\n=== {case.name}: TPC-H lineitem sf={case.scale:g}, "
          f"{'partitioned by month' if case.partitioned else 'unpartitioned'}, "
          f"target {case.target} ===", flush=True)
    table, built = build(case, home)
    files = live_files(table)
    inputs = sorted(files)
    spec = spec_for(case)
    print(f"  {table.scan().to_arrow_batch_reader().schema.names[:3]}...: {len(files)} files, "
          f"{mib(sum(files.values()))}, built in {built:.0f}s; Spark conf {conf or '(defaults)'}")
    with PeakMemory() as naive_memory:
        naive = run_naive(inputs, spec.writer.spark_options(), conf, args.master, home / f"naive-{case.name}")
    print(f"  naive Spark sort: {naive['seconds']:.1f}s ({naive['files']} files, {mib(naive['bytes'])}); "
          f"peak {naive_memory.text()}", flush=True)
    run = run_compact(spec, conf, args.master, home / f"compact-{case.name}", timers)
    r = run["result"]
    print(f"  lakesort compact: {run['seconds']:.1f}s ({r.files_before} -> {r.files_after} files, "
          f"{len(run['plan'].groups)} groups, {r.rows:,} rows); peak {run['memory'].text()}")
    print_breakdown(run)
    measured = run_measure(run["work"])
    duck = run_duckdb(inputs, home / f"duckdb-{case.name}") if args.duckdb else None
    if duck:
        print(f"  DuckDB COPY ... ORDER BY: {duck['seconds']:.1f}s ({duck['threads']} threads)")
    ratios = [run["seconds"] / naive["seconds"]]
    # the same input again: the table rolled back to before the compaction
    for pair in range(2, args.pairs + 1):
        table = table.refresh()
        table.manage_snapshots().rollback_to_snapshot(run["plan"].snapshot_id).commit()
        again = run_naive(inputs, spec.writer.spark_options(), conf, args.master,
                          home / f"naive-{case.name}-{pair}")
        rerun = run_compact(spec, conf, args.master, home / f"compact-{case.name}-{pair}", timers)
        ratios.append(rerun["seconds"] / again["seconds"])
        print(f"  pair {pair}: naive Spark sort {again['seconds']:.1f}s, lakesort compact "
              f"{rerun['seconds']:.1f}s: {ratios[-1]:.2f}x", flush=True)
    return {"case": case, "naive": naive, "run": run, "measure": measured, "duck": duck,
            "naive_memory": naive_memory, "ratios": ratios}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="partitioned,flat",
                        help="comma separated: partitioned, flat, sf10")
    parser.add_argument("--sf10", action="store_true", help="also the SF10 case (with "
                                                            "lakesort's default conf)")
    parser.add_argument("--quick", action="store_true", help="SF 0.1 instead of 1 (not the issue's figures)")
    parser.add_argument("--duckdb", action="store_true", help="also DuckDB's COPY ... ORDER BY")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help=f"Spark conf for both jobs (default {DEFAULT_CONF})")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--pairs", type=int, default=1, metavar="N",
                        help="run the plain sort and the compaction N times each, in turn, on the same input "
                             "(the table rolled back between compactions); "
                             "the ratio is the median of the pairs'")
    args = parser.parse_args(argv)
    names = [n for n in args.cases.split(",") if n] + (["sf10"] if args.sf10 else [])
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {sorted(CASES)}")
    conf = dict(kv.split("=", 1) for kv in args.spark_conf) if args.spark_conf else dict(DEFAULT_CONF)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("pyiceberg").setLevel(logging.WARNING)

    home = isolated_home("lakesort-bench-compact-", keep=args.keep)
    import importlib

    timers = Timers()
    for module, name, label in STEPS:
        timers.wrap(importlib.import_module(module), name, label)
    atexit.register(timers.restore)
    print(f"spark-submit --master {args.master}; {os.cpu_count()} CPUs, "
          f"{psutil.virtual_memory().total / 2**30:.0f} GiB, load average {os.getloadavg()[0]:.1f}")

    results = []
    for name in names:
        case = CASES[name]
        if args.quick:
            case = Case(case.name, case.scale / 10, case.table, case.partitioned, case.target, case.appends)
        results.append(run_case(case, home, args, {} if name == "sf10" else conf, timers))

    print(f"\n    {'case':<40} {'naive s':>8} {'lakesort s':>10} {'ratio':>6}  goal <= {NAIVE_GOAL}x"
          f"   {'measure':>8}  goal <= {MEASURE_GOAL:.0%}")
    for res in results:
        ratio = statistics.median(res["ratios"])
        share = res["measure"] / res["run"]["seconds"]
        label = f"{res['case'].name} (sf={res['case'].scale:g}, {res['run']['result'].files_before} files)"
        print(f"    {label:<40} {res['naive']['seconds']:8.1f} {res['run']['seconds']:10.1f} {ratio:5.2f}x  "
              f"{'OK' if ratio <= NAIVE_GOAL else 'MISSED':<14} "
              f"{share:7.0%}   {'OK' if share <= MEASURE_GOAL else 'MISSED'}")
        if len(res["ratios"]) > 1:
            print(f"    {'':<40} median of {len(res['ratios'])} pairs: "
                  f"{', '.join(f'{r:.2f}x' for r in res['ratios'])} (the seconds are the first pair's)")
    for res in results:
        print(f"    peak memory, {res['case'].name}: lakesort run {res['run']['memory'].text()}; "
              f"naive driver JVM {gib(res['naive_memory'].driver)}")
    print(f"    load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
