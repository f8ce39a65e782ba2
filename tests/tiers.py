"""The test suite's tiers, the guard of the fast tier, and the suite's time budget (a pytest plugin).

Tiers, named by markers:
- unmarked: unit and property tests, in this Python process (`make check`, the inner loop: no JVM).
- `integration`: the test starts something outside this process that takes seconds: a JVM (Spark,
  Iceberg's Java runtime, its REST catalog), a server on 127.0.0.1, Airflow's CLI, or a `spark-submit`. It
  is set from the fixtures a test uses (INTEGRATION_FIXTURES) and by the markers `spark` and `slow`, which
  imply it.
`make test` runs both tiers, nothing skipped.

`--no-jvm` (`make check`): every `java` this test session and its subprocesses could start is a stub that
fails, naming the test's tier: an unmarked test that starts a JVM fails instead of slowing the inner loop.

`--budget` (`make test`): after the run, the 15 slowest tests (set-up, call and tear-down together) and the
suite's wall time against pyproject's `[tool.lakesort.test-budget]`; over the budget by more than its margin,
the run fails, so that the suite's growth shows when it happens.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import time
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

REPO = Path(__file__).resolve().parents[1]

# Fixtures that start a JVM, a server or Airflow (tests/conftest.py and the folders' conftests): a test using
# any of them, directly or through another fixture, is an integration test.
INTEGRATION_FIXTURES = frozenset({
    "spark", "iceberg_spark", "bed", "in_process_job",  # Spark in this process; Iceberg's Spark
    "object_store", "rest_catalog", "on_rest", "rest_iceberg_catalog",  # S3, Iceberg's REST catalog
    "airflow_home", "spark_available",  # `airflow dags test`, spark-submit
})
IMPLIED_BY = ("spark", "slow")
# Session set-ups that the modules using them share on one xdist worker (`make test` runs two): each started
# once, not once per worker. In order: a module using several goes to the first group it matches.
SHARED_GROUPS = (
    ("servers", frozenset({"airflow_home", "object_store", "rest_catalog", "on_rest",
                           "rest_iceberg_catalog"})),
    ("iceberg-bed", frozenset({"iceberg_spark", "bed"})),
)
SLOWEST = 15
# The test JVMs are short-lived and work on small data, two workers at a time on two cores: C1 alone compiles
# enough (C2's compiler threads cost a quarter of the CPU of test_end_to_end.py: 61 -> 45 CPU-seconds) and one
# serial collector keeps GC threads off the other worker's core. Tests only: the product's JVMs are untouched.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
GROUPS_FILE = "LAKESORT_TEST_GROUPS"  # the environment variable naming where the workers write the groups

_JAVA_STUB = """#!/bin/sh
echo "java started by a test of the fast tier (make check): mark the test 'integration' (tests/tiers.py)" >&2
exit 97
"""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lakesort tiers")
    group.addoption("--no-jvm", action="store_true",
                    help="fail any test that starts a JVM (the fast tier's guard; make check)")
    group.addoption("--budget", action="store_true",
                    help="print the slowest tests; fail past [tool.lakesort.test-budget] (make test)")


def pytest_configure(config: pytest.Config) -> None:
    controller = not hasattr(config, "workerinput")
    if controller:  # every JVM of the session: Spark's, the bed's, the servers', each spark-submit's
        given = os.environ.get("JAVA_TOOL_OPTIONS", "")
        os.environ["JAVA_TOOL_OPTIONS"] = f"{given} {TEST_JVM_OPTIONS}".strip()
    if config.getoption("--no-jvm") and controller:  # xdist's workers inherit the environment
        _hide_java()
    if config.getoption("--budget") and controller:
        config.pluginmanager.register(Budget(config), "lakesort-budget")
    if controller and config.getoption("dist", "no") == "loadgroup":
        # The workers write the groups they computed here, for GroupScheduling on this process to read.
        os.environ[GROUPS_FILE] = str(Path(tempfile.mkdtemp(prefix="lakesort-groups-")) / "groups.json")
        config.option.loadscopereorder = False  # the workers' order (largest integration groups first) holds


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getoption("dist", "no") != "loadgroup":
        return None
    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION_FIXTURES.intersection(getattr(item, "fixturenames", ())) or any(
                item.get_closest_marker(name) for name in IMPLIED_BY):
            item.add_marker(pytest.mark.integration)
    if hasattr(config, "workerinput") and os.environ.get(GROUPS_FILE):
        groups = _group(items)
        written = Path(f"{os.environ[GROUPS_FILE]}.{config.workerinput['workerid']}")
        written.write_text(json.dumps(groups))
        written.replace(os.environ[GROUPS_FILE])  # whole or absent: every worker writes the same groups


def _group(items: list[pytest.Item]) -> dict[str, str]:
    """The work units of the two workers, {nodeid: group}: one group per module (its module-scoped
    set-ups run once), except that the modules sharing a session's server or JVM (SHARED_GROUPS) form one
    group, which starts it once. Sorts `items` so that the integration groups go first, the costliest first:
    the two workers then finish together rather than one waiting on the last slow module."""
    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    by_module: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        by_module[module(item)].append(item)
    group_of: dict[str, str] = {}
    for name, members in by_module.items():
        used = set().union(*(getattr(i, "fixturenames", ()) for i in members))
        group_of[name] = next((g for g, fixtures in SHARED_GROUPS if fixtures & used), name)
    weight: dict[str, int] = defaultdict(int)  # a rough cost: an integration test 1, a slow one 16
    for item in items:
        cost = 16 if item.get_closest_marker("slow") else 1 if item.get_closest_marker("integration") else 0
        weight[group_of[module(item)]] += cost
    first = {g: n for n, g in enumerate(dict.fromkeys(group_of[module(i)] for i in items))}
    items.sort(key=lambda i: (-weight[g := group_of[module(i)]], first[g]))
    return {item.nodeid: group_of[module(item)] for item in items}


class GroupScheduling(LoadScopeScheduling):
    """xdist's scheduling by scope, with this plugin's groups as the scopes. (xdist's own `loadgroup` renames
    each item's nodeid with its group, which pytest 9.2's structured node ids no longer let it do.)"""

    _groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # first called once every worker has collected, so the file is there
            self._groups = json.loads(Path(os.environ[GROUPS_FILE]).read_text())
        return self._groups.get(nodeid, nodeid)


def _hide_java() -> None:
    """JAVA_HOME and the head of PATH point at a `java` that fails: Spark's launcher, Iceberg's bed and
    every subprocess take the one of JAVA_HOME or PATH (tests/conftest.py keeps a JAVA_HOME whose bin/java
    exists)."""
    home = Path(tempfile.mkdtemp(prefix="lakesort-no-jvm-"))
    (home / "bin").mkdir()
    stub = home / "bin" / "java"
    stub.write_text(_JAVA_STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.environ["JAVA_HOME"] = str(home)
    os.environ["PATH"] = f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"


def budget_settings() -> dict:
    """pyproject's [tool.lakesort.test-budget]: seconds, margin, and the calibration's reference seconds."""
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["lakesort"]["test-budget"]


def calibrate() -> float:
    """Seconds of a fixed single-threaded workload (best of three): how fast this machine is today, so that a
    slower machine is given proportionally more time (never less than the budget)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        total = 0
        for i in range(2_000_000):
            total += i * i % 7
        best = min(best, time.perf_counter() - start)
    return best


class Budget:
    """The suite's wall time and its slowest tests, on the controlling process (xdist's workers report to
    it)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config, self.start = config, time.monotonic()
        self.settings = budget_settings()
        self.speed = calibrate()
        self.spent: dict[str, float] = defaultdict(float)
        self.busy: dict[str, float] = defaultdict(float)  # per xdist worker: how evenly the groups fell

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.spent[report.nodeid] += report.duration
        worker = getattr(getattr(report, "node", None), "gateway", None)
        self.busy[getattr(worker, "id", "main")] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        wall = time.monotonic() - self.start
        scale = max(1.0, self.speed / self.settings["calibration_seconds"])
        allowed = self.settings["seconds"] * scale * (1 + self.settings["margin"])
        self.verdict = (wall, scale, allowed)
        if wall > allowed and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        wall, scale, allowed = self.verdict
        tr = terminalreporter
        tr.section(f"the {SLOWEST} slowest tests (set-up + call + tear-down)")
        for nodeid, seconds in sorted(self.spent.items(), key=lambda kv: -kv[1])[:SLOWEST]:
            tr.write_line(f"{seconds:8.1f} s  {nodeid}")
        budget = self.settings["seconds"]
        tr.write_line("time in tests per worker: " + ", ".join(
            f"{worker} {seconds:.0f} s" for worker, seconds in sorted(self.busy.items())))
        reference, margin = self.settings["calibration_seconds"], self.settings["margin"]
        tr.write_line(
            f"suite wall time {wall:.0f} s; budget {budget} s x machine {scale:.2f} (calibration "
            f"{self.speed:.3f} s, reference {reference} s) + {margin:.0%} margin = {allowed:.0f} s")
        if wall > allowed:
            tr.write_line(
                f"FAILED: the suite took {wall:.0f} s, over its budget of {allowed:.0f} s: find the new slow "
                "tests above and share their set-up (tests/README.md), or raise [tool.lakesort.test-budget] "
                "in pyproject.toml with the reason in the commit", red=True)
