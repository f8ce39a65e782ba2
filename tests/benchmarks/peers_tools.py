"""The contenders of bench_peers.py and the states they start from.

Every tool starts from an identical copy of the case's input state: the catalog's SQLite file and the
warehouse as they were after the build (`State`: a copy of the catalog file and hard links of the warehouse's
files, put back before each tool; no tool writes into an existing file, Iceberg and lakesort only add files
and commit through the catalog). Delta's table is written once per case from the same input files' rows.

Tools (`TOOLS`): Iceberg's `rewrite_data_files` with the sort strategy on the spec's keys or `zorder(...)` of
them, Delta's `OPTIMIZE ... ZORDER BY`, both on the test bed's Spark 4.1 (peers_spark.py in
`.testbed/spark-4.1`), and lakesort's `compact` (linear, zorder, hilbert; in this process, on lakesort's own
Spark, as bench_compact runs it). The same master, driver memory and shuffle partitions for all; each tool's
Spark application writes an event log of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from peers_measure import SparkIO, event_log_conf, spark_io

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
BED = REPO_ROOT / ".testbed"
BED_PYTHON = BED / "spark-4.1" / "bin" / "python"
ICEBERG_JARS = BED / "jars"
DELTA_JARS = BED / "delta"
PEERS_JOB = HERE / "peers_spark.py"
# the other path of lakesort's nightly merge (issue #38, part 2)
MERGE_OFF = "spark.lakesort.compact.mergeRuns"


@dataclass(frozen=True)
class Tool:
    name: str
    engine: str  # iceberg, delta, lakesort
    strategy: str  # sort/linear, zorder, hilbert
    merge_runs: str = "true"  # lakesort only: MERGE_OFF's value ("false": the sort path)


TOOLS = {t.name: t for t in (
    Tool("iceberg-sort", "iceberg", "linear"),
    Tool("iceberg-zorder", "iceberg", "zorder"),
    Tool("delta-zorder", "delta", "zorder"),
    Tool("lakesort-linear", "lakesort", "linear"),
    Tool("lakesort-zorder", "lakesort", "zorder"),
    Tool("lakesort-hilbert", "lakesort", "hilbert"),
    Tool("lakesort-sort-path", "lakesort", "linear", merge_runs="false"),
)}


@dataclass(frozen=True)
class ToolRun:
    tool: str
    seconds: float  # wall time, JVM start included
    files_in: int
    bytes_in: int  # the input files' sizes: every tool here reads each input file whole
    files_out: tuple[str, ...]  # the live data files after the run
    bytes_out: int  # their sizes
    io: SparkIO | None  # from the run's event log(s)
    note: str = ""
    # lakesort only: wall seconds of the steps outside the Spark job (prepare, spark-submit's JVM and session
    # around the job, verify, commit) and of the proof, which Iceberg and Delta do not do: the read-back of
    # the staged files in the job and the verify step (the metadata proof, the layout rules, GX)
    steps: tuple[tuple[str, float], ...] = ()
    proof_seconds: float = 0.0


# --- states ---------------------------------------------------------------------------------------------


class State:
    """The catalog file and the warehouse as a build left them; `restore` puts them back."""

    def __init__(self, home: Path, name: str) -> None:
        self.home, self.copy = home, home / f"state-{name}"
        shutil.rmtree(self.copy, ignore_errors=True)
        self.copy.mkdir()
        shutil.copy2(home / "catalog.db", self.copy / "catalog.db")
        # Hard links: the data files are never written in place, and SF10's 2 GB need no second copy.
        shutil.copytree(home / "warehouse", self.copy / "warehouse", copy_function=os.link)

    def restore(self) -> None:
        for extra in ("catalog.db-wal", "catalog.db-shm", "catalog.db-journal"):
            (self.home / extra).unlink(missing_ok=True)
        # In place (the same inode): pyiceberg's open SQLite connections see the old content again.
        shutil.copyfile(self.copy / "catalog.db", self.home / "catalog.db")
        shutil.rmtree(self.home / "warehouse")
        shutil.copytree(self.copy / "warehouse", self.home / "warehouse", copy_function=os.link)

    def drop(self) -> None:
        shutil.rmtree(self.copy, ignore_errors=True)


def live_paths(table_name: str) -> dict[str, int]:
    from layout.catalog import load_table

    table = load_table(table_name, "lakesort")
    return {t.file.file_path.removeprefix("file://"): t.file.file_size_in_bytes
            for t in table.scan().plan_files()}


def set_iceberg_writer(table_name: str, spec) -> None:
    """The table's write.parquet.* properties as the spec's writer settings, so that Iceberg's rewrite writes
    what lakesort's does (lakesort takes them from the spec, which wins over table properties)."""
    from layout.catalog import load_table

    w = spec.writer
    props = {
        "write.parquet.row-group-size-bytes": str(w.row_group_size),
        "write.parquet.page-size-bytes": str(w.page_size),
        "write.parquet.page-row-limit": str(w.page_row_count_limit),
        "write.parquet.dict-size-bytes": str(w.page_size),
        "write.parquet.compression-codec": w.compression,
        "write.parquet.compression-level": str(w.compression_level),
        "write.parquet.bloom-filter-max-bytes": "131072",
    }
    for column, bloom in (w.bloom_filters or {}).items():
        props[f"write.parquet.bloom-filter-enabled.column.{column}"] = "true"
        props[f"write.parquet.bloom-filter-fpp.column.{column}"] = str(bloom.fpp)
    table = load_table(table_name, "lakesort")
    with table.transaction() as tx:
        tx.set_properties(props)


# --- the bed's Spark ------------------------------------------------------------------------------------


def bed_ready() -> str | None:
    """Why the peers cannot run (None: they can)."""
    if not BED_PYTHON.exists():
        return f"no {BED_PYTHON.relative_to(REPO_ROOT)}: run `make testbed`"
    for jars in (ICEBERG_JARS, DELTA_JARS):
        if not any(jars.glob("*.jar")):
            return f"no jars in {jars.relative_to(REPO_ROOT)}: run `make testbed`"
    return None


def run_bed(request: dict, work: Path) -> tuple[dict, float]:
    """peers_spark.py in the bed's Spark 4.1 with `request`; (its answer, wall seconds with JVM start)."""
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"{request['action']}.json"
    path.write_text(json.dumps(request))
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYTHONPATH", "PYSPARK_PYTHON",
                                                             "PYSPARK_DRIVER_PYTHON")}
    env["PYSPARK_PYTHON"] = str(BED_PYTHON)
    log_path = work / f"{request['action']}.log"
    started = time.perf_counter()
    with open(log_path, "w") as log_file:
        done = subprocess.run([str(BED_PYTHON), str(PEERS_JOB), str(path)], stdout=subprocess.PIPE,
                              stderr=log_file, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    answer = next((json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines()
                   if line.startswith("PEERS_RESULT ")), None)
    if done.returncode != 0 or answer is None:
        raise RuntimeError(f"{request['action']} failed (exit {done.returncode}):\n"
                           f"{log_path.read_text(errors='replace')[-4000:]}")
    return answer, seconds


def iceberg_rewrite(tool: Tool, table_name: str, keys: tuple[str, ...], target: int, home: Path,
                    master: str, conf: dict[str, str], work: Path) -> ToolRun:
    before = live_paths(table_name)
    sort_order = (f"zorder({', '.join(keys)})" if tool.strategy == "zorder"
                  else ", ".join(f"{k} ASC NULLS FIRST" for k in keys))
    events = work / "events"
    request = {"action": "iceberg_rewrite", "master": master, "conf": {**conf, **event_log_conf(events)},
               "jar_dirs": [str(ICEBERG_JARS)], "catalog_db": str(home / "catalog.db"),
               "warehouse": (home / "warehouse").as_uri(), "table": table_name, "strategy": "sort",
               "sort_order": sort_order,
               "options": {"target-file-size-bytes": target, "rewrite-all": "true"}}
    answer, seconds = run_bed(request, work)
    after = live_paths(table_name)
    return ToolRun(tool.name, seconds, len(before), sum(before.values()), tuple(sorted(after)),
                   sum(after.values()), spark_io(events),
                   f"procedure {answer['procedure']}, Spark session {answer['session_seconds']:.1f}s, "
                   f"CALL {answer['action_seconds']:.1f}s")


def delta_write(inputs: list[str], path: Path, partitioned: bool, master: str, conf: dict[str, str],
                writer_options: dict[str, str], work: Path) -> float:
    """The Delta table of the same rows (untimed set-up); partitioned by month of l_shipdate as a column of
    its own (`l_shipmonth`), which Delta keeps out of the files."""
    request = {"action": "delta_write", "master": master,
               "conf": {**conf, **delta_writer_conf(writer_options)}, "jar_dirs": [str(DELTA_JARS)],
               "inputs": inputs, "path": str(path),
               "partition_column": (["l_shipmonth", "date_format(l_shipdate, 'yyyy-MM')"] if partitioned
                                    else None)}
    _, seconds = run_bed(request, work)
    return seconds


def delta_writer_conf(writer_options: dict[str, str]) -> dict[str, str]:
    """lakesort's writer options (parquet-mr's keys) as Spark conf for a writer that takes no
    options (OPTIMIZE)."""
    conf = {f"spark.hadoop.{k}": v for k, v in writer_options.items() if k.startswith("parquet.")}
    conf["spark.sql.parquet.compression.codec"] = writer_options.get("compression", "snappy")
    return conf


def delta_optimize(tool: Tool, path: Path, keys: tuple[str, ...], target: int, master: str,
                   conf: dict[str, str], writer_options: dict[str, str], work: Path) -> ToolRun:
    before = [p for p in path.rglob("*.parquet") if "_delta_log" not in p.parts]
    events = work / "events"
    request = {"action": "delta_optimize", "master": master,
               "conf": {**conf, **delta_writer_conf(writer_options), **event_log_conf(events),
                        "spark.databricks.delta.optimize.maxFileSize": str(target)},
               "jar_dirs": [str(DELTA_JARS)], "path": str(path), "zorder": list(keys)}
    answer, seconds = run_bed(request, work)
    files = tuple(sorted(answer["files"]))
    return ToolRun(tool.name, seconds, len(before), sum(p.stat().st_size for p in before), files,
                   sum(os.path.getsize(f) for f in files),
                   spark_io(events), f"Spark session {answer['session_seconds']:.1f}s, "
                   f"OPTIMIZE {answer['action_seconds']:.1f}s")


def lakesort_compact(tool: Tool, spec, master: str, conf: dict[str, str], work: Path, *, force: bool = False
                     ) -> ToolRun:
    from layout.compaction.pipeline.driver import compact

    before = live_paths(spec.table)
    events = work / "events"
    run_conf = {**conf, **event_log_conf(events)}
    if tool.merge_runs != "true":
        run_conf[MERGE_OFF] = tool.merge_runs
    started = time.perf_counter()
    with _timed_steps() as took:
        result = compact(spec.table, spec=spec, master=master, spark_conf=run_conf, work_dir=work / "run",
                         force=force)
    seconds = time.perf_counter() - started
    after = live_paths(spec.table)
    manifests = [json.loads(p.read_text()) for p in sorted((work / "run").glob("manifest-*.json"))]
    timings: dict[str, float] = {}
    for m in manifests:
        for part, secs in m.get("timings", {}).items():
            timings[part] = timings.get(part, 0.0) + secs
    reported = sorted({k for m in manifests for k in _keys(m)
                       if "bytes" in k.lower() and "read" in k.lower()})
    note = (f"{len(result.plan.groups) if result.plan else 0} groups; job "
            f"{sum(m.get('seconds', 0.0) for m in manifests):.1f}s ("
            + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + ")"
            + (f"; manifest reports {', '.join(reported)}" if reported else ""))
    job = sum(m.get("seconds", 0.0) for m in manifests)
    steps = {**took, "spark-submit around the job": took.get("submit", 0.0) - job}
    steps.pop("submit", None)
    note += "; outside the job: " + ", ".join(f"{k} {v:.1f}s" for k, v in steps.items())
    proof = timings.get("read back", 0.0) + took.get("verify", 0.0)
    return ToolRun(tool.name, seconds, len(before), result.plan.input_bytes if result.plan else 0,
                   tuple(sorted(after)), sum(after.values()), spark_io(events), note,
                   tuple(steps.items()), proof)


@contextmanager
def _timed_steps():
    """Wall seconds of the driver's steps (prepare, submit, verify, commit), by wrapping them for one run."""
    from layout.compaction.pipeline import driver, steps

    took: dict[str, float] = {}
    wrapped = [(driver, "prepare_table", "prepare"), (driver, "submit", "submit"),
               (steps, "verify", "verify"), (steps, "commit", "commit")]
    originals = [getattr(module, name) for module, name, _ in wrapped]

    def timer(f, label):
        def run(*args, **kwargs):
            started = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                took[label] = took.get(label, 0.0) + time.perf_counter() - started
        return run

    for (module, name, label), f in zip(wrapped, originals, strict=True):
        setattr(module, name, timer(f, label))
    try:
        yield took
    finally:
        for (module, name, _), f in zip(wrapped, originals, strict=True):
            setattr(module, name, f)


def _keys(value, prefix: str = "") -> list[str]:
    """Every key path of a JSON value (to find what a manifest reports about bytes read)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in [f"{prefix}{k}", *_keys(v, f"{prefix}{k}.")]]
    if isinstance(value, list) and value:
        return _keys(value[0], f"{prefix}[].")
    return []
