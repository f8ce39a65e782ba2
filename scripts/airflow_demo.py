"""`make demo`, the Airflow part: run lakesort_nightly end to end on the demo warehouse and summarise it.

    .venv/bin/python scripts/airflow_demo.py [--home .lakesort]
    .venv/bin/python scripts/airflow_demo.py --serve     # then the Airflow UI on http://127.0.0.1:8080

1. An Airflow home with SQLite under <home>/airflow, initialised once (DB migration, the `lakesort` pool);
   <home>/airflow/env.sh holds the environment of this demo. The home is for this machine's user alone: its
   API server listens on 127.0.0.1, the directory is 700 and the files holding secrets (the admin password,
   airflow.cfg's keys, the metadata DB) are 600. `--serve` runs the API server, scheduler, DAG processor and
   triggerer on it; unlike `airflow standalone`, it starts no task log server, which Airflow binds to every
   interface (nothing sets its address): the API server reads the task logs from this home's log folder.
2. `airflow dags test lakesort_nightly`: the registered tables (dags/tables: the demo table) compacted on
   Spark local[*] (the `spark_default` connection, JSON form) in the embedded Iceberg catalog that
   `lakesort demo` configured (.pyiceberg.yaml in the working directory). Our steps' log lines are shown;
   Airflow's full output goes to <home>/airflow/logs/demo-nightly.log.
3. A summary from the metrics tables (lakesort.compaction_runs, lakesort.pruning_metrics) and the report.

A second run finds nothing to do and says so. Exit status: 0 when the DAG run succeeded.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import secrets
import shlex
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
DAG_ID = "lakesort_nightly"
LOOPBACK = "127.0.0.1"
PASSWORDS = "simple_auth_manager_passwords.json.generated"  # Airflow's name for the generated admin password
# What `--serve` runs on the demo's home: what `airflow standalone` runs, without the task log servers.
SERVE = (("api-server",), ("scheduler", "--skip-serve-logs"), ("dag-processor",),
         ("triggerer", "--skip-serve-logs"))

# structlog's console lines: "<time> [<level>] <message> [<logger>] key=value ..."
LINE = re.compile(r"^\S+ \[(?P<level>\w+)\s*\] (?P<msg>.*?)\s+\[(?P<logger>[\w.]+)\](?: (?P<kv>.*))?$")


def demo_env(home: Path) -> dict[str, str]:
    """Everything the DAGs need, explicit (absolute paths: tasks may run from any directory)."""
    airflow_home = home / "airflow"
    port = os.environ.get("AIRFLOW__API__PORT") or "8080"
    env = {
        "AIRFLOW_HOME": str(airflow_home),
        # This machine only: the API server (UI, REST and the tasks' execution API) on the loopback address.
        "AIRFLOW__API__HOST": LOOPBACK,
        "AIRFLOW__API__PORT": port,
        "AIRFLOW__API__BASE_URL": f"http://{LOOPBACK}:{port}",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(airflow_home / PASSWORDS),
        # The DAG's local Spark: its driver and UI on the loopback address too (`lakesort compact` sets the
        # same for its local master, layout.compaction.pipeline.submit).
        "SPARK_LOCAL_IP": LOOPBACK,
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # The Spark connection in JSON form (the URI form can lose the spark:// scheme): local mode here;
        # a cluster is a different host, e.g. {"conn_type": "spark", "host":
        # "spark://spark-master", "port": 7077}.
        "AIRFLOW_CONN_SPARK_DEFAULT": os.environ.get("AIRFLOW_CONN_SPARK_DEFAULT")
        or json.dumps({"conn_type": "spark", "host": "local[*]"}),
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # spark-submit, beside this Python
        "PYICEBERG_HOME": str(Path.cwd()),  # the .pyiceberg.yaml `lakesort demo` wrote
        "LAKESORT_TABLES_DIR": str(REPO / "dags" / "tables"),
        # No LAKESORT_WORK_DIR: the DAG's runs and a hand-run `lakesort compact` share the default work
        # directory, hence the table's lease (a run of one waits for, or refuses beside, the other's).
        "LAKESORT_REPORT_DIR": str(home / "reports"),
        "LAKESORT_SPARK_CONF": json.dumps({"spark.log.level": "WARN",
                                           "spark.ui.showConsoleProgress": "false"}),
        "LAKESORT_SPARK_RETRIES": "0",  # a demo fails at once instead of retrying with backoff
        "PYTHONWARNINGS": "ignore::DeprecationWarning",
    }
    return {**os.environ, **env}


def run_airflow(env: dict[str, str], *args: str, log: Path) -> None:
    with open(log, "a") as out:
        done = subprocess.run([str(VENV_BIN / "airflow"), *args], env=env, stdout=out,
                              stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        sys.exit(f"airflow {' '.join(args)} failed (exit {done.returncode}); see {log}")


def init_airflow(home: Path, env: dict[str, str]) -> None:
    """Once per Airflow version: migrate the SQLite DB and create the pool (a second run skips this)."""
    import airflow

    airflow_home = home / "airflow"
    (airflow_home / "logs").mkdir(parents=True, exist_ok=True)
    secure(airflow_home)
    marker = airflow_home / f".lakesort-initialised-{airflow.__version__}"
    exports = {k: env[k] for k in ("AIRFLOW_HOME", "AIRFLOW__CORE__DAGS_FOLDER",
                                   "AIRFLOW__CORE__LOAD_EXAMPLES", "AIRFLOW_CONN_SPARK_DEFAULT",
                                   "AIRFLOW__API__HOST", "AIRFLOW__API__PORT", "AIRFLOW__API__BASE_URL",
                                   "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", "SPARK_LOCAL_IP",
                                   "PYICEBERG_HOME", "LAKESORT_TABLES_DIR", "LAKESORT_REPORT_DIR")}
    lines = [f"export {k}={shlex.quote(v)}" for k, v in exports.items()]
    (airflow_home / "env.sh").write_text(
        "# Written by `make demo`: the environment of the demo's Airflow home, for this machine's user only\n"
        "# (the API server on 127.0.0.1). Run its components with\n"
        "#   .venv/bin/python scripts/airflow_demo.py --serve\n"
        "# or `source` this file for the airflow CLI. (`airflow standalone` also starts task log servers,\n"
        "# which Airflow binds to every interface.)\n" + "\n".join(lines)
        + f"\nexport PATH={shlex.quote(str(VENV_BIN))}:\"$PATH\"\n")
    if marker.exists() and (airflow_home / "airflow.db").exists():
        secure(airflow_home)
        print(f"== Airflow home {airflow_home} (SQLite): ready")
        return
    started = time.perf_counter()
    log = airflow_home / "logs" / "demo-init.log"
    run_airflow(env, "db", "migrate", log=log)
    run_airflow(env, "pools", "set", "lakesort", "2", "lakesort Spark jobs (nightly and backfill)", log=log)
    marker.touch()
    secure(airflow_home)  # the DB and airflow.cfg Airflow has just written
    print(f"== Airflow home {airflow_home} (SQLite): initialised in {time.perf_counter() - started:.0f}s")


def secure(airflow_home: Path) -> None:
    """The home for its user alone: the directory 700; the admin password (generated here, so that it never
    exists readable by others, as Airflow would write it under a usual umask), airflow.cfg (its fernet and JWT
    keys) and the metadata DB (connections) 600."""
    airflow_home.chmod(0o700)
    passwords = airflow_home / PASSWORDS
    if not passwords.exists():
        fd = os.open(passwords, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps({"admin": secrets.token_urlsafe(16)}) + "\n")
    for name in (PASSWORDS, "airflow.cfg", "airflow.db"):
        if (airflow_home / name).exists():
            (airflow_home / name).chmod(0o600)


def start(env: dict[str, str], components: Sequence[Sequence[str]] = SERVE, **popen: Any
          ) -> list[subprocess.Popen[Any]]:
    """`components` of Airflow on the demo's home, each an `airflow` process; what they write (logs, the DB's
    journal, airflow.cfg) is this user's alone (umask 077)."""
    return [subprocess.Popen([str(VENV_BIN / "airflow"), *c], env=env, umask=0o077, **popen)
            for c in components]


def serve(home: Path, env: dict[str, str]) -> int:
    """The Airflow UI on this machine: `SERVE`'s components on the demo's home until Ctrl-C."""
    procs = start(env)
    print(f"== Airflow on http://{LOOPBACK}:{env['AIRFLOW__API__PORT']} (user admin, password in "
          f"{os.path.relpath(home / 'airflow' / PASSWORDS)}); Ctrl-C stops it", flush=True)
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
    return max((p.returncode or 0) for p in procs)


def show(line: str, state: dict) -> str | None:
    """The line as the demo shows it, or None: our steps' messages and each task's outcome."""
    m = LINE.match(line)
    if not m:
        return None
    msg, logger, kv = m["msg"], m["logger"], m["kv"] or ""
    if msg.startswith("[DAG TEST] starting task_id="):
        task, index = re.search(r"task_id=(\S+) map_index=(-?\d+)", msg).groups()
        state["task"] = task + (f"[{index}]" if index != "-1" else "")
        state["started"] = time.perf_counter()
        return None
    if msg == "Task instance state updated" and "new_state=" in kv and state.get("task"):
        new = re.search(r"new_state=(\w+)", kv)[1]
        task = state.pop("task")
        return (f"   {'ok ' if new == 'success' else '!! '}{task}: {new} "
                f"({time.perf_counter() - state['started']:.0f}s)")
    if logger.startswith("lakesort"):
        return f"     {msg}"
    # not the per-partition decisions
    if logger == "layout.compaction.pipeline.steps" and not msg.startswith("  "):
        return f"     {msg}"
    if logger in ("layout.compaction.pipeline.commit", "layout.report.render", "layout.verify.expectations") \
            or (logger == "layout.metrics.measure" and "measured" in msg):
        return f"     {msg}"
    if "lakesort.compact:" in msg and ": group " not in msg:  # the Spark job's own summary lines
        return f"     spark: {msg.split('lakesort.compact:', 1)[1].strip()}"
    if msg.startswith("Spark-Submit cmd:"):
        master = re.search(r"--master (\S+)", msg)
        return f"     spark-submit --master {master[1] if master else '?'} ... jobs/compact.py"
    if m["level"] in ("error", "critical") and "Traceback" not in msg:
        return f"   !! {msg[:300]}"
    return None


def run_nightly(home: Path, env: dict[str, str]) -> tuple[int, Path]:
    log = home / "airflow" / "logs" / "demo-nightly.log"
    print(f"== airflow dags test {DAG_ID}  (Spark: "
          f"{json.loads(env['AIRFLOW_CONN_SPARK_DEFAULT']).get('host')}; full output: "
          f"{os.path.relpath(log)})")
    state: dict = {}
    with open(log, "w") as out:
        proc = subprocess.Popen([str(VENV_BIN / "airflow"), "dags", "test", DAG_ID], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        for line in proc.stdout:
            out.write(line)
            shown = show(line.rstrip("\n"), state)
            if shown:
                print(shown, flush=True)
        return proc.wait(), log


def _size(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def summarise(home: Path, env: dict[str, str], since: dt.datetime) -> None:
    """This run's rows of the metrics tables, per table, and the report's path."""
    os.environ.update({k: env[k] for k in ("PYICEBERG_HOME", "LAKESORT_TABLES_DIR")})
    from layout.catalog import load_catalog
    from layout.metrics.measure import read_metrics, read_runs
    from layout.spec import load_specs

    print("== summary")
    for spec in load_specs(Path(env["LAKESORT_TABLES_DIR"])):
        catalog = load_catalog(spec.catalog)
        runs = [r for r in read_runs(catalog, spec.table).to_pylist() if r["started_at"] >= since]
        if not runs:
            print(f"{spec.table}: no run recorded (its prepare failed? see the log above)")
            continue
        run = max(runs, key=lambda r: r["started_at"])
        if run["status"] == "nothing-to-do":
            print(f"{spec.table}: nothing to do, every partition is compacted already (no Spark job ran; "
                  f"{run['files_before']} files)")
            continue
        print(f"{spec.table}: {run['status']} ({run['trigger']} run {run['run_id']}, "
              f"{run['duration_s']:.0f}s)")
        print(f"  partitions rewritten   {run['partitions_rewritten']} ({run['groups']} group(s))")
        print(f"  data files             {run['files_before']} -> {run['files_after']}   "
              f"({_size(run['bytes_before'])} -> {_size(run['bytes_after'])})")
        warnings = len(json.loads(run["findings"] or "[]"))
        print(f"  verification           {run['verification']}"
              + (f" ({warnings} finding(s), none blocking)" if warnings and run["verification"] == "passed"
                 else ""))
        if run["error"]:
            print(f"  error                  {run['error'][:300]}")
        metrics = [m for m in read_metrics(catalog, spec.table).to_pylist() if m["run_id"] == run["run_id"]]
        if metrics:
            probes: dict[str, dict[str, int]] = {}
            for m in metrics:
                probes.setdefault(m["probe"], {"kind": m["probe_kind"]})[m["phase"]] = m["bytes_selected"]
            owner = [p for p in probes.values() if p["kind"] == "owner"]
            before, after = sum(p.get("before", 0) for p in owner), sum(p.get("after", 0) for p in owner)
            less = f" ({100 * (1 - after / before):.0f}% less)" if before else ""
            print(f"  bytes the owners' probes select: {_size(before)} before, {_size(after)} after{less}")
            for name, p in probes.items():
                if p["kind"] == "owner":
                    print(f"    {name:<22} {_size(p.get('before')):>10} -> {_size(p.get('after'))}")
    index = Path(env["LAKESORT_REPORT_DIR"]) / "index.html"
    if index.exists():
        print(f"report: {os.path.relpath(index)}  (open it in a browser)")
    else:
        print("report: not written (layout.report.render not available yet?)")


def failed_tasks(home: Path) -> list[str]:
    with sqlite3.connect(home / "airflow" / "airflow.db") as con:
        (run_id,) = con.execute(
            "SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (DAG_ID,)
        ).fetchone()
        return [f"{t}[{label}]" if label else t for t, label in con.execute(
            "SELECT task_id, rendered_map_index FROM task_instance WHERE dag_id = ? AND run_id = ? "
            "AND state IN ('failed', 'upstream_failed')", (DAG_ID, run_id))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=Path(".lakesort"),
                        help="the demo home (default .lakesort)")
    parser.add_argument("--serve", action="store_true",
                        help="run the Airflow UI and scheduler on the demo's home (127.0.0.1) until Ctrl-C")
    args = parser.parse_args()
    home = args.home.resolve()
    env = demo_env(home)
    init_airflow(home, env)
    if args.serve:
        return serve(home, env)
    tables = sorted(p.name for p in (REPO / "dags" / "tables").glob("*.yaml"))
    print(f"== registered tables: dags/tables/{', dags/tables/'.join(tables)}")
    since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    started = time.perf_counter()
    code, log = run_nightly(home, env)
    print(f"== {DAG_ID}: {'succeeded' if code == 0 else 'FAILED'} in {time.perf_counter() - started:.0f}s")
    summarise(home, env, since)
    if code != 0:
        print(f"failed tasks: {', '.join(failed_tasks(home)) or '?'}; full output: {os.path.relpath(log)}")
    print(f"Airflow UI on this home (http://{LOOPBACK}:{env['AIRFLOW__API__PORT']}): "
          f"{os.path.relpath(sys.executable)} scripts/airflow_demo.py --serve")
    return code


if __name__ == "__main__":
    sys.exit(main())
