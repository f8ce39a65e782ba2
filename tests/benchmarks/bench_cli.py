"""Benchmark: how long `lakesort --help` and `lakesort CMD --help` take to start, against a bare Python.

Run from the repo root:

    .venv/bin/python tests/benchmarks/bench_cli.py [--quick] [--runs 11]

Every measurement is a fresh process, as a user or a DAG task starts the command: the `lakesort` console
script beside `sys.executable` with `--help`, and with `CMD --help` for every command of
`layout.cli.COMMANDS`. The baseline is `python -c "pass"` with the same interpreter (the floor: the
interpreter's own start-up and site), so each figure reads as start-up over a bare Python. Timed from outside
with `time.perf_counter` around the whole process. The targets are interleaved within a round (one unmeasured
warm-up round first, so the OS page cache and the .pyc files are warm), so a change of the machine's load
affects them alike. Printed: the median and min (and max) over `--runs` rounds per target, the median over the
floor's, and the modules each target leaves in `sys.modules` (counted once, in a separate process running
`layout.cli.main` as the script does, against a bare interpreter's). No goal is asserted here; which modules
parsing may import is a test (tests/test_architecture.py, tests/cli/test_dispatch.py). A target that exits
other than 0 ends the benchmark with exit 1. A run starts 15 processes per round:
about 10 s with the default 11 rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

# Run in a child: `lakesort ARGS`, as the console script runs it, then the modules it left in sys.modules.
COUNT = """
import contextlib, io, sys
from layout.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(len(sys.modules), code)
"""


def child_env() -> dict[str, str]:
    """The caller's environment without lakesort's and pyiceberg's settings: help must not depend on them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKESORT_", "PYICEBERG_"))}
    env["COLUMNS"] = "100"
    return env


def run_child(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall time of the whole process, and its stdout; a failing process ends the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return wall, done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds")
    parser.add_argument("--runs", type=int, default=None, help="rounds of fresh processes "
                                                               "(default 11, 5 with --quick)")
    args = parser.parse_args(argv)
    runs = args.runs or (5 if args.quick else 11)

    lakesort = Path(sys.executable).with_name("lakesort")
    if not lakesort.is_file():
        sys.exit(f"no `lakesort` console script beside {sys.executable}: install the project (`make setup`)")
    # The table of commands, read in a child so that this process measures nothing it imported itself.
    _, out = run_child([sys.executable, "-c", "from layout.cli import COMMANDS; print(' '.join(COMMANDS))"],
                       child_env())
    commands = out.split()
    floor_name = 'python -c "pass"'
    targets: list[tuple[str, list[str], list[str]]] = [(floor_name, [sys.executable, "-c", "pass"], [])]
    targets.append(("lakesort --help", [str(lakesort), "--help"], ["--help"]))
    targets += [(f"lakesort {c} --help", [str(lakesort), c, "--help"], [c, "--help"]) for c in commands]

    env = child_env()
    walls: dict[str, list[float]] = {name: [] for name, *_ in targets}
    for run in range(runs + 1):  # round 0 warms the page cache and the .pyc files, unmeasured
        for name, cmd, _ in targets:
            seconds, _ = run_child(cmd, env)
            if run:
                walls[name].append(seconds)

    modules: dict[str, int] = {}
    _, out = run_child([sys.executable, "-c", "import sys; print(len(sys.modules))"], env)
    modules[floor_name] = int(out)
    for name, _, cli_args in targets[1:]:
        _, out = run_child([sys.executable, "-c", COUNT, *cli_args], env)
        count, code = out.split()
        if code != "0":
            sys.exit(f"{name}: exit {code}")
        modules[name] = int(count)

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"start-up of the lakesort command line, fresh processes: {runs} rounds (after one warm-up round), "
          f"{os.cpu_count()} CPUs, load average {load}")
    print(f"{sys.executable} ({sys.version.split()[0]})\n")
    print(f"    {'target':<34} {'median':>8} {'min':>8} {'max':>8} {'over floor':>11} {'modules':>8}   (ms)")
    floor = statistics.median(walls[floor_name])
    for name, *_ in targets:
        values = walls[name]
        med = statistics.median(values)
        over = "(floor)" if name == floor_name else f"{(med - floor) * 1e3:+.1f}"
        print(f"    {name:<34} {med * 1e3:8.1f} {min(values) * 1e3:8.1f} {max(values) * 1e3:8.1f} {over:>11} "
              f"{modules[name]:>8}")
    helps = [statistics.median(walls[name]) for name, *_ in targets[1:]]
    print(f"\nslowest median of a --help: {max(helps) * 1e3:.0f} ms ({(max(helps) - floor) * 1e3:.0f} ms "
          "over the floor)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
