"""Benchmark: `lakesort compact` against a naive Spark sort and DuckDB, and the nightly rewrite amplification.

Run from the repo root:

    .venv/bin/python tests/benchmarks/bench_compact.py [--quick] [--scale 1] [--batches 3] [--keep]

The table: TPC-H `lineitem` at scale factor 1 (0.1 with --quick) ingested by `layout.demo.build_demo`
into `demo.lineitem` of a throw-away pyiceberg SQL catalog (SQLite) in a temporary directory: rows
shuffled, appended in `--batches` appends (3), partitioned by month of l_shipdate, so each append
writes one small unsorted file per month it holds rows of (84 months; 250 files at SF 0.1, as the
last month has only a few rows). tpchgen-cli's output (lineitem and
orders) is cached under tests/benchmarks/.cache/tpch/ (git-ignored). Before pyiceberg is imported,
PYICEBERG_HOME and HOME point at the temporary directory, PYICEBERG_* variables are dropped and the
working directory is changed to it; the loaded catalog's URI is checked to be under it. Nothing in the
repository (its `.lakesort/` demo warehouse, its `.pyiceberg.yaml`) is read or written.

The spec is dags/tables/demo_lineitem.yaml with sizes for a real table: target 128MiB, row groups
32MiB, pages 1MiB / 20,000 rows, zstd(3), a bloom filter on l_orderkey; sort (l_shipdate, l_orderkey).

Measured in one run, all Spark work through spark-submit with the same master (local[*]) and conf
(`--spark-conf`, default driver memory 6g, 8 shuffle partitions, UI off), JVM startup included:

1. naive: a script doing `spark.read.parquet(<the input files>).orderBy(<keys>).write.parquet(<tmp>)`
   with the plan's writer options (same codec, page, row group and bloom filter settings as lakesort),
   against `lakesort.compact.compact(...)`, the whole step (plan, layout.zip, spark-submit of
   jobs/compact.py, fingerprint re-check of the staged files, Iceberg commit). Goal: lakesort at most
   1.3x naive. The step is broken down by timing `plan_rewrite`, `submit`, `check_staged` and
   `commit_rewrite` (wrapped in place), and the job's own time from its manifest; the metadata proof
   (`prove_staged`, run in the verify step and again by the commit) is reported with its share.
2. DuckDB: `COPY (SELECT * FROM read_parquet([...]) ORDER BY <keys>) TO '<tmp>/out.parquet'
   (FORMAT parquet, COMPRESSION zstd)`, the single-machine reference.
3. nightly amplification: after the first compaction, one day of new orders is appended with
   `table.append`: the lineitems of the orders placed on `--day` (from tpchgen's orders table), their
   order keys shifted past the largest one so they are new rows. TPC-H ships a line 1-121 days after the
   order, so a day of orders lands in about five monthly partitions, as a real day of ingest does.
   `compact` runs again; figure: the second plan's input bytes / the appended files' bytes. Goal: <= 1.2.
   The plan's decisions are printed with it, and a plan-only variant (one day of shipments, one
   partition) for comparison.

Exits 0 whether or not a goal is met. Timings are single runs on whatever else the machine is doing.
"""

from __future__ import annotations

import argparse
import atexit
import datetime as dt
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

CACHE_ROOT = HERE / ".cache" / "tpch"
NAIVE_GOAL = 1.3
AMPLIFICATION_GOAL = 1.2
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
df.orderBy(*[F.col(k).asc_nulls_first() for k in args["keys"]]).write.options(**args["options"]).parquet(args["output"])
print("NAIVE_JOB_SECONDS", time.perf_counter() - started, flush=True)
spark.stop()
'''

log = logging.getLogger("bench_compact")


# --- isolation ----------------------------------------------------------------------------------------


def isolate(home: Path) -> None:
    """Point pyiceberg (and everything else that looks at ~ or .) at `home`; must run before it is imported."""
    if any(m == "pyiceberg" or m.startswith("pyiceberg.") for m in sys.modules):
        raise RuntimeError("pyiceberg is already imported: PYICEBERG_HOME would be ignored")
    for key in [k for k in os.environ if k.startswith("PYICEBERG_")]:
        del os.environ[key]
    os.environ["PYICEBERG_HOME"] = str(home)
    os.environ["HOME"] = str(home)
    os.chdir(home)
    from layout.catalog import write_sql_catalog_config

    write_sql_catalog_config(home, home)
    # build_demo generates lineitem under <home>/tpch/sf=<scale>/: reuse (and fill) the benchmark cache.
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    (home / "tpch").symlink_to(CACHE_ROOT, target_is_directory=True)


def check_catalog(home: Path) -> None:
    from layout.catalog import load_catalog

    uri = str(load_catalog().properties.get("uri", ""))
    if not uri.startswith(f"sqlite:///{home.resolve()}/"):
        raise RuntimeError(f"pyiceberg resolved the catalog {uri!r}, not the one under {home}: refusing to go on")
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
    """Wrap module functions in place; accumulate their wall time and keep their last result."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.result: dict[str, object] = {}
        self._undo: list = []

    def wrap(self, module, name: str, label: str) -> None:
        original = getattr(module, name)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                out = original(*args, **kwargs)
                self.result[label] = out
                return out
            finally:
                self.seconds[label] += time.perf_counter() - t0

        setattr(module, name, timed)
        self._undo.append((module, name, original))

    def reset(self) -> None:
        self.seconds.clear()
        self.result.clear()

    def restore(self) -> None:
        for module, name, original in reversed(self._undo):
            setattr(module, name, original)


# --- the three contenders -----------------------------------------------------------------------------


def run_naive(inputs: list[str], options: dict[str, str], conf: dict[str, str], master: str, work: Path) -> dict:
    from layout.compaction.submit import spark_submit_binary

    work.mkdir(parents=True, exist_ok=True)
    script, args_path, out = work / "naive_sort.py", work / "naive_args.json", work / "out"
    script.write_text(NAIVE_JOB)
    args_path.write_text(json.dumps({"inputs": inputs, "keys": list(KEYS), "options": options, "output": str(out)}))
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


def run_compact(spec, conf: dict[str, str], master: str, work: Path, timers: Timers) -> dict:
    from layout.compaction.driver import compact

    timers.reset()
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    result = compact(spec.table, spec=spec, master=master, spark_conf=conf, work_dir=work)
    seconds = time.perf_counter() - t0
    manifest_path = work / "manifest.json"
    job = json.loads(manifest_path.read_text())["seconds"] if manifest_path.exists() and result.plan.groups else 0.0
    return {"seconds": seconds, "result": result, "plan": result.plan, "job_seconds": job,
            "parts": dict(timers.seconds)}


def print_breakdown(label: str, run: dict) -> None:
    parts, total = run["parts"], run["seconds"]
    plan_s = parts.get("plan_rewrite", 0.0)
    submit_s = parts.get("submit", 0.0)
    check_s = parts.get("check_staged", 0.0)
    commit_s = parts.get("commit_rewrite", 0.0)
    rows = [
        ("plan_rewrite (manifests -> plan)", plan_s),
        ("submit: spark-submit wall", submit_s),
        ("  of which jobs/compact.py compact_groups", run["job_seconds"]),
        ("  of which JVM, session, layout.zip, stop", submit_s - run["job_seconds"]),
        ("commit_rewrite (its own check, proof, Iceberg commit)", commit_s),
        ("check_staged: re-read, fingerprint (verify + commit)", check_s),
        ("metadata proof (verify + commit)", parts.get("prove_staged", 0.0)),
        ("other (verify step's layout rules and GX, live counts)", total - plan_s - submit_s - commit_s),
    ]
    print(f"\n  {label}: {total:.1f}s in all")
    for name, secs in rows:
        print(f"    {name:<48} {secs:8.1f}s {100 * secs / total:5.1f}%")
    top = max((("plan", plan_s), ("Spark job", submit_s), ("staged-file checks", check_s),
               ("commit", commit_s)), key=lambda kv: kv[1])
    print(f"    dominant part: {top[0]} ({100 * top[1] / total:.0f}%)")


# --- a day of appends ---------------------------------------------------------------------------------


def max_order_key(scale: float) -> int:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    return int(pc.max(pq.read_table(tpch_file(scale, "orders"), columns=["o_orderkey"])["o_orderkey"]).as_py())


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


# --- main ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="scale factor 0.1")
    parser.add_argument("--scale", type=float, default=None, help="TPC-H scale factor (default 1, 0.1 with --quick)")
    parser.add_argument("--batches", type=int, default=3, help="ingest appends (each writes one file per month)")
    parser.add_argument("--day", type=dt.date.fromisoformat, default=dt.date(1995, 6, 15),
                        help="order date of the nightly append (default 1995-06-15)")
    parser.add_argument("--days", type=int, default=1, help="days of orders in the nightly append")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help=f"Spark conf for both jobs (default {DEFAULT_CONF})")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    scale = args.scale or (0.1 if args.quick else 1.0)
    conf = dict(kv.split("=", 1) for kv in args.spark_conf) if args.spark_conf else dict(DEFAULT_CONF)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("pyiceberg").setLevel(logging.WARNING)

    home = Path(tempfile.mkdtemp(prefix="lakesort-bench-compact-")).resolve()
    if args.keep:
        print(f"keeping {home}")
    else:
        atexit.register(shutil.rmtree, home, True)
    isolate(home)
    check_catalog(home)

    import layout.compaction.commit
    import layout.compaction.driver
    import layout.compaction.planner
    from layout.catalog import load_table
    from layout.demo import build_demo
    from layout.spec import parse_spec

    spec = parse_spec(SPEC, source="bench_compact.SPEC")
    timers = Timers()
    timers.wrap(layout.compaction.planner, "plan_rewrite", "plan_rewrite")
    timers.wrap(layout.compaction.driver, "submit", "submit")
    timers.wrap(layout.compaction.commit, "commit_rewrite", "commit_rewrite")
    timers.wrap(layout.compaction.commit, "check_staged", "check_staged")
    timers.wrap(layout.compaction.commit, "prove_staged", "prove_staged")
    atexit.register(timers.restore)

    # --- ingest
    started = time.perf_counter()
    summary = build_demo(home, scale=scale, batches=args.batches, config_dir=home)
    table = load_table(spec.table, spec.catalog)
    files = live_files(table)
    inputs = sorted(files)
    in_bytes = sum(files.values())
    print(f"\ningested TPC-H lineitem sf={scale:g}: {summary.rows:,} rows in {len(files)} files "
          f"({args.batches} appends), {mib(in_bytes)}, in {time.perf_counter() - started:.0f}s")
    if len(files) < 200:
        print(f"  NOTE: only {len(files)} files (< 200): raise --batches")
    print(f"spark-submit --master {args.master}, conf {conf} (+ spark.sql.session.timeZone=UTC)")
    print(f"{os.cpu_count()} CPUs, load average now {os.getloadavg()[0]:.1f} (other jobs share the machine)")

    # --- 1 and 2: the first compaction against the naive sort and DuckDB, on the same files
    options = spec.writer.spark_options()
    print("\nnaive Spark sort ...", flush=True)
    naive = run_naive(inputs, options, conf, args.master, home / "naive")
    print(f"  {naive['seconds']:.1f}s (read+sort+write inside the job {naive['job_seconds']:.1f}s), "
          f"{naive['files']} files, {mib(naive['bytes'])}")
    print("DuckDB COPY ... ORDER BY ...", flush=True)
    duck = run_duckdb(inputs, home / "duckdb")
    print(f"  {duck['seconds']:.1f}s ({duck['threads']} threads), {mib(duck['bytes'])}")
    print("lakesort compact ...", flush=True)
    first = run_compact(spec, conf, args.master, home / "compact-1", timers)
    planned = {f.path for g in first["plan"].groups for f in g.inputs}
    if planned != set(inputs):
        print(f"  WARNING: the plan reads {len(planned)} files, the baselines read {len(inputs)}")
    r = first["result"]
    out_files = live_files(load_table(spec.table, spec.catalog))
    print(f"  {first['seconds']:.1f}s: {r.files_before} -> {r.files_after} files ({len(first['plan'].groups)} "
          f"groups), {r.rows:,} rows, {mib(sum(out_files.values()))}")

    # --- 3: one day of appends, then the nightly compaction
    table = load_table(spec.table, spec.catalog)
    arrow_schema = table.schema().as_arrow()
    shift = max_order_key(scale) + 1  # shifted keys are new orders
    day_rows, n_orders = orders_of_days(scale, args.day, args.days, shift, arrow_schema)
    appended = append(table, day_rows)
    app_bytes = sum(appended.values())
    print(f"\nnightly: appended {day_rows.num_rows:,} lineitems of {n_orders:,} orders placed "
          f"{args.day}{f' + {args.days - 1} days' if args.days > 1 else ''} in {len(appended)} files, "
          f"{mib(app_bytes)} ({app_bytes:,} bytes)")
    nightly = run_compact(spec, conf, args.master, home / "compact-2", timers)
    amplification = nightly["plan"].input_bytes / app_bytes if app_bytes else float("nan")
    print(f"  lakesort compact: {nightly['seconds']:.1f}s, rewrote {mib(nightly['plan'].input_bytes)} "
          f"({nightly['plan'].input_bytes:,} bytes) in {len(nightly['plan'].groups)} groups")
    explain_plan(nightly["plan"], appended)

    # plan-only variant: a day of shipments (arrival order = sort order), one partition
    ship_day = args.day + dt.timedelta(days=40)
    ship_rows = shipments_of_day(scale, ship_day, 2 * shift, arrow_schema)
    table = load_table(spec.table, spec.catalog)
    shipped = append(table, ship_rows)
    ship_bytes = sum(shipped.values())
    ship_plan = layout.compaction.planner.plan_rewrite(load_table(spec.table, spec.catalog), spec)
    ship_amp = ship_plan.input_bytes / ship_bytes if ship_bytes else float("nan")
    print(f"\nplan only: appended {ship_rows.num_rows:,} lineitems shipped {ship_day} in {len(shipped)} file(s), "
          f"{mib(ship_bytes)}; the plan would rewrite {mib(ship_plan.input_bytes)}")
    explain_plan(ship_plan, shipped)

    # --- the figures
    print_breakdown("lakesort compact, first run (every file)", first)
    print_breakdown("lakesort compact, nightly run", nightly)
    ratio = first["seconds"] / naive["seconds"]
    print(f"\n    {'sf=' + format(scale, 'g') + ', ' + str(len(files)) + ' files, ' + mib(in_bytes):<44} "
          f"{'seconds':>8} {'vs naive':>9}  goal")
    print(f"    {'naive Spark orderBy + write (spark-submit)':<44} {naive['seconds']:>8.1f} {1.0:>8.2f}x")
    print(f"    {'lakesort compact (plan, job, check, commit)':<44} {first['seconds']:>8.1f} {ratio:>8.2f}x  "
          f"<= {NAIVE_GOAL}x {'OK' if ratio <= NAIVE_GOAL else 'MISSED'}")
    print(f"    {'DuckDB COPY ... ORDER BY':<44} {duck['seconds']:>8.1f} {duck['seconds'] / naive['seconds']:>8.2f}x  "
          f"(lakesort / DuckDB {first['seconds'] / duck['seconds']:.2f}x)")
    print(f"    {'nightly: rewritten / appended bytes':<44} {amplification:>8.1f}x {'':>9}  "
          f"<= {AMPLIFICATION_GOAL}x {'OK' if amplification <= AMPLIFICATION_GOAL else 'MISSED'}")
    print(f"    {'plan only, one day of shipments':<44} {ship_amp:>8.1f}x")
    print(f"    load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[2]:.1f} (15 min), "
          f"{os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
