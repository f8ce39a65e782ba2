"""Helpers of the DAG tests: the environment of `airflow` subprocesses, the small lake's tables, and
`airflow dags test` runs read back from Airflow's SQLite DB (states, XComs, asset events)."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
VENV_BIN = Path(sys.executable).parent
MONTHS = ("1995-05", "1995-06", "1996-03")  # the demo spec's owner probes look at 1995-06 and 1996-03
BROKEN_MONTH = "1995-04"


def airflow_env(home: Path, lake: Path | None = None) -> dict[str, str]:
    """The environment of an `airflow` subprocess: our DAGs, Spark local[2], the lake's catalog."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "LAKESORT_", "PYICEBERG_"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        # JSON form: the hook takes a host without "://" and without a port as the master itself.
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # spark-submit
        "LAKESORT_SPARK_CONF": json.dumps({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                                           "spark.driver.memory": "1g", "spark.log.level": "WARN",
                                           "spark.driver.extraJavaOptions":
                                               "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}),
        "LAKESORT_SPARK_RETRIES": "0",  # a failing Spark job fails the test at once
        "PYTHONWARNINGS": "ignore::DeprecationWarning",
    })
    if lake is not None:
        env.update({
            "PYICEBERG_HOME": str(lake),  # lake/.pyiceberg.yaml
            "LAKESORT_TABLES_DIR": str(lake / "tables"),
            "LAKESORT_WORK_DIR": str(lake / "work"),
            "LAKESORT_REPORT_DIR": str(lake / "reports"),
        })
    return env


def java_available() -> bool:
    java = shutil.which("java") or (Path(os.environ.get("JAVA_HOME", "/nonexistent")) / "bin" / "java")
    return bool(java) and Path(java).exists()


def lineitem(home: Path, months: tuple[str, ...]):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from layout.demo import generate_lineitem

    source = pq.read_table(generate_lineitem(0.01, home / "tpch"))
    source = source.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_string_view(f.type) else f
                                    for f in source.schema]))
    month = pc.strftime(source["l_shipdate"], format="%Y-%m")
    return source.filter(pc.is_in(month, value_set=pa.array(list(months))))


def create_table(catalog, name: str, data, batches: int, seed: int):
    import numpy as np
    import pyarrow as pa
    from pyiceberg.transforms import MonthTransform

    table = catalog.create_table(name, schema=data.schema)
    with table.update_spec() as spec:
        spec.add_field("l_shipdate", MonthTransform(), "l_shipdate_month")
    # Like a streaming ingest (layout.demo): arrival order, small appends.
    shuffled = data.take(pa.array(np.random.default_rng(seed).permutation(data.num_rows)))
    shuffled = shuffled.cast(table.schema().as_arrow())
    bounds = np.linspace(0, shuffled.num_rows, batches + 1).astype(int)
    for lo, hi in itertools.pairwise(bounds):
        table.append(shuffled.slice(lo, hi - lo))
    return table.refresh()


@dataclass
class Lake:
    root: Path
    catalog: object
    source_rows: object  # pyarrow.Table: what demo.lineitem holds
    broken_file: str

    def table(self, name: str = "demo.lineitem"):
        return self.catalog.load_table(name)


@dataclass
class DagRun:
    dag_id: str
    run_id: str
    state: str
    returncode: int
    output: str
    seconds: float
    tasks: dict[tuple[str, str], str]  # (task_id, rendered map index or "") -> state
    db: Path

    def state_of(self, task_id: str, label: str = "") -> str | None:
        return self.tasks.get((task_id, label))

    def states(self, task_id: str) -> dict[str, str]:
        return {label: state for (tid, label), state in self.tasks.items() if tid == task_id}

    def xcom(self, task_id: str, label: str = ""):
        with sqlite3.connect(self.db) as con:
            rows = con.execute(
                "SELECT x.value FROM xcom x JOIN task_instance ti ON ti.dag_id = x.dag_id AND ti.run_id = "
                "x.run_id AND ti.task_id = x.task_id AND ti.map_index = x.map_index WHERE x.dag_id = ? AND "
                "x.run_id = ? AND x.task_id = ? AND x.key = 'return_value' AND "
                "coalesce(ti.rendered_map_index, '') = ?",
                (self.dag_id, self.run_id, task_id, label)).fetchall()
        assert len(rows) == 1, f"{task_id}[{label}]: {len(rows)} XCom value(s)"
        value = json.loads(rows[0][0])
        return json.loads(value) if isinstance(value, str) else value

    def asset_events(self) -> list[tuple[str, dict]]:
        with sqlite3.connect(self.db) as con:
            rows = con.execute(
                "SELECT a.uri, e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                "WHERE e.source_dag_id = ? AND e.source_run_id = ?", (self.dag_id, self.run_id)).fetchall()
        return [(uri, json.loads(extra) if isinstance(extra, str) else extra) for uri, extra in rows]


def run_dag(home: Path, lake: Lake, dag_id: str, conf: dict | None = None, *,
            env: dict[str, str] | None = None, timeout: float = 600) -> DagRun:
    """`airflow dags test DAG_ID [--conf JSON]` (tasks in-process, one after the other), then its states."""
    cmd = [str(VENV_BIN / "airflow"), "dags", "test", dag_id]
    if conf is not None:
        cmd += ["--conf", json.dumps(conf)]
    started = time.perf_counter()
    done = subprocess.run(cmd, env={**airflow_env(home, lake.root), **(env or {})}, cwd=lake.root,
                          capture_output=True, text=True, timeout=timeout, check=False)
    seconds = time.perf_counter() - started
    db = home / "airflow.db"
    with sqlite3.connect(db) as con:
        run_id, state = con.execute("SELECT run_id, state FROM dag_run WHERE dag_id = ? "
                                    "ORDER BY id DESC LIMIT 1",
                                    (dag_id,)).fetchone()
        tasks = {(tid, label or ""): st for tid, label, st in con.execute(
            "SELECT task_id, rendered_map_index, state FROM task_instance WHERE dag_id = ? AND run_id = ?",
            (dag_id, run_id))}
    output = done.stdout + done.stderr
    (lake.root / f"{dag_id}-{dt.datetime.now():%H%M%S}.log").write_text(output)  # kept for a failing test
    return DagRun(dag_id, run_id, state, done.returncode, output, seconds, tasks, db)
