"""Benchmark: how long Airflow takes to parse the lakesort DAG files, against a minimal DAG file.

Run from the repo root:

    .venv/bin/python tests/benchmarks/bench_dag_parse.py [--quick] [--runs 9]

Every measurement is a fresh interpreter (`sys.executable`), as the DAG processor parses each file in a
process of its own: it imports `airflow.dag_processing.dagbag.BundleDagBag` (timed apart: Airflow's own
start-up), then parses one target with `BundleDagBag(dag_folder=target, bundle_path=...)`, timed with
`time.perf_counter` around that call only. Targets:

* `minimal DAG file` (the baseline): a DAG file written to a temp dir, one `@dag` with one `@task`,
  importing nothing but `airflow.sdk`;
* each of `dags/lakesort_nightly.py`, `dags/lakesort_backfill.py`, `dags/lakesort_report.py` alone
  (each pays for `lakesort_common` and the Spark provider it imports, as a fresh processor would);
* `dags/` whole (the three files in one bag, as `airflow dags list` or the DagBag test parse them).

Also timed, from outside, the whole process of each target against `python -c "import airflow.sdk"`.
The targets are interleaved within a run, so a change of the machine's load affects them alike. Printed:
the median (and min, max) over `--runs` runs per target, the modules each parse added to `sys.modules`,
and the ratios of the medians to the baseline's. No goal and no time is asserted (tests/dags/test_dagbag.py
asserts what keeps parsing cheap: which modules a parse imports). A target that fails to parse, or parses
to other DAGs than expected, exits 1. Airflow runs with a throw-away AIRFLOW_HOME and without examples;
LAKESORT_* and AIRFLOW_* variables of the caller are dropped. A run starts 6 processes per round, one
warm-up round plus `--runs` rounds, of 3-5 s each on 2 shared CPUs: 1.5 minutes with `--quick`, 4 by default.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
DAGS = REPO_ROOT / "dags"
DAG_FILES = ("lakesort_nightly", "lakesort_backfill", "lakesort_report")

MINIMAL_DAG = textwrap.dedent('''
    """The baseline: the least a DAG file written with the Task SDK costs to parse."""
    from airflow.sdk import dag, task


    @dag(dag_id="minimal", schedule=None, catchup=False)
    def minimal():
        @task
        def noop():
            return None

        noop()


    minimal()
''')

# Run in the child: time Airflow's import and one parse, report them as one JSON line.
CHILD = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    started = time.perf_counter()
    from airflow.dag_processing.dagbag import BundleDagBag
    imported = time.perf_counter()
    target, bundle = Path(sys.argv[1]), Path(sys.argv[2])
    before = len(sys.modules)
    started_parse = time.perf_counter()
    bag = BundleDagBag(dag_folder=target, bundle_path=bundle)
    parsed = time.perf_counter()
    print(json.dumps({"import_s": imported - started, "parse_s": parsed - started_parse,
                      "modules": len(sys.modules) - before, "dag_ids": sorted(bag.dag_ids),
                      "errors": {str(k): v for k, v in bag.import_errors.items()}}))
""")


def child_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "LAKESORT_", "PYICEBERG_"))}
    env.update({"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "PYTHONWARNINGS": "ignore::DeprecationWarning"})
    return env


def run_child(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    """Wall time of the whole process, and its stdout; a failing process ends the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} ... failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return wall, done.stdout


def median_row(name: str, values: list[float], base: float | None) -> str:
    med = statistics.median(values)
    ratio = f"{med / base:9.2f}x" if base else f"{'(base)':>10}"
    return f"    {name:<32} {med * 1e3:9.1f} {min(values) * 1e3:9.1f} {max(values) * 1e3:9.1f} {ratio}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 runs")
    parser.add_argument("--runs", type=int, default=None, help="fresh processes per target "
                                                               "(default 9, 3 with --quick)")
    args = parser.parse_args(argv)
    runs = args.runs or (3 if args.quick else 9)

    tmp = Path(tempfile.mkdtemp(prefix="lakesort-bench-dag-parse-"))
    try:
        minimal_dir = tmp / "minimal"
        minimal_dir.mkdir()
        (minimal_dir / "minimal_dag.py").write_text(MINIMAL_DAG)
        env = child_env(tmp / "airflow")
        # (name, dag_folder, bundle_path, DAG ids expected)
        targets = [("minimal DAG file", minimal_dir / "minimal_dag.py", minimal_dir, {"minimal"})]
        targets += [(f"dags/{name}.py", DAGS / f"{name}.py", DAGS, {name}) for name in DAG_FILES]
        targets.append(("dags/ (all three)", DAGS, DAGS, set(DAG_FILES)))

        parse: dict[str, list[float]] = {name: [] for name, *_ in targets}
        wall: dict[str, list[float]] = {name: [] for name, *_ in targets}
        airflow_import: list[float] = []
        modules: dict[str, set[int]] = {name: set() for name, *_ in targets}
        sdk_wall: list[float] = []
        # A first, unmeasured round: the OS page cache and the .pyc files are warm for every measured one.
        for run in range(runs + 1):
            seconds, _ = run_child([sys.executable, "-c", "import airflow.sdk"], env, tmp)
            if run:
                sdk_wall.append(seconds)
            for name, target, bundle, expected in targets:
                seconds, out = run_child([sys.executable, "-c", CHILD, str(target), str(bundle)], env, tmp)
                result = json.loads(out.strip().splitlines()[-1])
                if result["errors"] or set(result["dag_ids"]) != expected:
                    sys.exit(f"{name}: parsed to {result['dag_ids']} with import errors {result['errors']}")
                if run:
                    parse[name].append(result["parse_s"])
                    wall[name].append(seconds)
                    airflow_import.append(result["import_s"])
                    modules[name].add(result["modules"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"DAG parsing in fresh interpreters: {runs} runs per target (after one warm-up round), "
          f"{os.cpu_count()} CPUs, load average {load}")
    print(f"Airflow's own import (BundleDagBag), median of all {len(airflow_import)} processes: "
          f"{statistics.median(airflow_import) * 1e3:.0f} ms, not counted in the parse times below\n")

    base_name = targets[0][0]
    print(f"parse time, BundleDagBag(...) only (ms; ratio of medians against the {base_name}):")
    print(f"    {'target':<32} {'median':>9} {'min':>9} {'max':>9} {'ratio':>10}   modules imported")
    base = statistics.median(parse[base_name])
    for name, *_ in targets:
        counts = "/".join(str(n) for n in sorted(modules[name]))
        print(median_row(name, parse[name], None if name == base_name else base) + f"   {counts}")
    print()

    print('whole process (ms; ratio of medians against `python -c "import airflow.sdk"`):')
    print(f"    {'target':<32} {'median':>9} {'min':>9} {'max':>9} {'ratio':>10}")
    sdk = statistics.median(sdk_wall)
    print(median_row("python -c 'import airflow.sdk'", sdk_wall, None))
    for name, *_ in targets:
        print(median_row(name, wall[name], sdk))
    return 0


if __name__ == "__main__":
    sys.exit(main())
