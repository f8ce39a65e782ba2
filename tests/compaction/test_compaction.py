"""Compaction end to end: plan, the Spark job, the checked commit, and the faults that must leave the table as it was.

Time budget (2 cores): a `spark-submit` costs about a minute here, whatever the data size, so only the runs whose
point is the subprocess go through it: the end-to-end run on Spark local, the run on a standalone cluster, the job
killed mid-write and the job failing on a corrupt input. Every other test runs the *same job code*
(`jobs/compact.py`'s `compact_groups` + `write_manifest`) on the session's in-process SparkSession, through
`layout.compaction.pipeline.driver.compact` with only `submit` replaced (`in_process_job`); planning, staging, the checks and the
commit are the real ones.

Tables: the demo table (TPC-H lineitem, scale 0.01, 3 appends: 83 month partitions of 3 small files) is built
once; tests that mutate it restore a pristine copy *to the same path* first (the SQLite catalog and the Iceberg
metadata hold absolute paths, so a copy elsewhere would still point at the original's files). Tests that compact it
name two months (`MONTHS`) to keep the Spark work small.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lossless import job_part, load_job

import layout.compaction.pipeline.driver
import layout.compaction.pipeline.submit
from layout.catalog import load_catalog, load_table
from layout.cli import EXIT_OK, main
from layout.compaction.integrity.staged import CommitRefused, check_staged, staged_columns
from layout.compaction.pipeline.commit import commit_rewrite
from layout.compaction.pipeline.driver import compact
from layout.compaction.pipeline.submit import CompactionFailed
from layout.compaction.planning.planner import RUN_ID, SPEC_HASH, RewritePlan, plan_rewrite
from layout.demo import build_demo, generate_lineitem
from layout.errors import LakesortError, ParquetError, UsageError
from layout.io import resolve
from layout.manifest import StagedManifest
from layout.parquet import BoundaryOrder, ParquetFile
from layout.spec import parse_spec
from layout.upkeep.cleanup import staging_root

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
SPARK_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4", "spark.driver.memory": "1g"}
MONTHS = ["l_shipdate_month=1995-03", "l_shipdate_month=1995-04"]
TARGET = 16 * 1024  # the demo's months hold ~30-45 KiB in 3 files: a 16 KiB target asks for ~3 files per month
OWNER = {"name": "Test Team", "email": "test@example.com"}


def demo_spec(**overrides) -> object:
    doc = {
        "table": "demo.lineitem", "catalog": "lakesort", "owner": OWNER,
        "sort": {"keys": [{"column": "l_shipdate"}, {"column": "l_orderkey"}]},
        "target_file_size": TARGET, "max_group_size": "1MiB",
        # Small row groups and pages, so every file has several of each to check the order of.
        "writer": {"row_group_size": "8KiB", "page_size": "1KiB", "page_row_count_limit": 20},
    }
    doc.update(overrides)
    return parse_spec(doc, source="test-spec")


# ---- isolation, tables, helpers ---------------------------------------------------------------------


def _isolate(mp: pytest.MonkeyPatch, root: Path) -> None:
    """The catalog is found through `root/.pyiceberg.yaml` only (as tests/test_demo.py does)."""
    mp.chdir(root)
    mp.setenv("HOME", str(root))
    mp.delenv("PYICEBERG_HOME", raising=False)
    mp.delenv("LAKESORT_SPARK_MASTER", raising=False)
    mp.setenv("LAKESORT_WORK_DIR", str(root / "work"))  # run files and table leases of this test only


@pytest.fixture(scope="module")
def tpch_cache(tmp_path_factory) -> Path:
    """lineitem at scale 0.01, generated once for every demo table of this module."""
    out = tmp_path_factory.mktemp("tpch")
    generate_lineitem(0.01, out)
    return out


def _build_demo(root: Path, tpch: Path) -> None:
    shutil.copytree(tpch, root / ".lakesort" / "tpch", dirs_exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        _isolate(mp, root)
        summary = build_demo(root / ".lakesort", scale=0.01, batches=3)
    assert summary.created and summary.rows == 60_175


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, tpch_cache) -> Path:
    root = tmp_path_factory.mktemp("demo")
    _build_demo(root, tpch_cache)
    shutil.copytree(root / ".lakesort", root / "pristine", ignore=shutil.ignore_patterns("tpch"))
    return root


@pytest.fixture
def demo_home(pristine, monkeypatch) -> Path:
    """The demo table as built, restored in place for this test; cwd and HOME point at its catalog."""
    home = pristine / ".lakesort"
    for name in ("warehouse", "catalog.db"):
        target = home / name
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    shutil.copytree(pristine / "pristine", home, dirs_exist_ok=True)
    _isolate(monkeypatch, pristine)
    return pristine


@pytest.fixture(scope="module")
def job() -> types.ModuleType:
    return load_job()


@pytest.fixture
def in_process_job(spark, job, monkeypatch) -> list[RewritePlan]:
    """`layout.compaction.pipeline.driver.submit` runs the job's own functions on the in-process session; returns the plans run."""
    runs: list[RewritePlan] = []

    def submit(plan_path, manifest_path, *, master, name, conf=None, work_dir, groups=None):
        plan = RewritePlan.from_json(Path(plan_path).read_text())
        staged = job.compact_groups(spark, plan, [g for g in plan.groups if groups is None or g.group_id in groups])
        job.write_manifest(spark, plan, staged, str(manifest_path), 0.0)
        runs.append(plan)

    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", submit)
    return runs


NAME_MAPPING = "schema.name-mapping.default"


def readable(table):
    """The table as pyiceberg reads it: compacted files carry Iceberg field ids, so no name mapping is needed."""
    return table


def canonical(data: pa.Table) -> pa.Table:
    """pyiceberg returns string or large_string depending on the files read: compare values, not that choice."""
    return data.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_large_string(f.type) else f
                                for f in data.schema]))


def by_every_column(data: pa.Table) -> pa.Table:
    return data.sort_by([(c, "ascending") for c in data.column_names]).combine_chunks()


def sorted_rows(table, snapshot_id: int | None = None) -> pa.Table:
    table = readable(table)
    data = table.scan(snapshot_id=snapshot_id).to_arrow() if snapshot_id else table.scan().to_arrow()
    return by_every_column(canonical(data))


def month_filter(month: str):
    """The pyiceberg row filter of one `l_shipdate_month=YYYY-MM` partition."""
    from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

    year, number = map(int, month.split("=")[1].split("-"))
    following = f"{year + number // 12}-{number % 12 + 1:02d}-01"
    return And(GreaterThanOrEqual("l_shipdate", f"{year}-{number:02d}-01"), LessThan("l_shipdate", following))


def live_files(table) -> list:
    return [t.file for t in table.scan().plan_files()] if table.current_snapshot() else []


def partition_of(table, data_file) -> str:
    return table.spec().partition_to_path(data_file.partition, table.schema())


def staged_files(table) -> list[str]:
    from pyarrow import fs as pafs

    filesystem, root = resolve(staging_root(table))
    if filesystem.get_file_info(root).type == pafs.FileType.NotFound:
        return []
    return sorted(i.path for i in filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
                  if i.type == pafs.FileType.File)


def staged_parquet(table) -> list[str]:
    """The Parquet files under the staging root (Spark also leaves _SUCCESS and Hadoop .crc files there)."""
    return [p for p in staged_files(table) if p.endswith(".parquet") and not Path(p).name.startswith(".")]


def open_parquet(uri: str) -> ParquetFile:
    filesystem, path = resolve(uri)
    return ParquetFile.open(path, filesystem=filesystem)


@dataclass
class State:
    snapshot_id: int | None
    rows: pa.Table
    files: set[str]


def state(table) -> State:
    table = table.refresh()
    snap = table.current_snapshot()
    return State(snap.snapshot_id if snap else None, sorted_rows(table), {f.file_path for f in live_files(table)})


def assert_unchanged(table, before: State) -> None:
    after = state(table)
    assert after.snapshot_id == before.snapshot_id
    assert after.files == before.files
    assert after.rows.equals(before.rows)
    assert staged_files(table) == [], "staged files were left behind"


# ---- 1. end to end on Spark local (spark-submit) ----------------------------------------------------


@dataclass
class E2E:
    root: Path
    spec: object
    before: State
    result: object
    seconds: float


@pytest.fixture(scope="module")
def e2e(tmp_path_factory, tpch_cache) -> E2E:
    """The whole demo table compacted once through the real `spark-submit` (local mode)."""
    root = tmp_path_factory.mktemp("e2e")
    _build_demo(root, tpch_cache)
    spec = demo_spec()
    with pytest.MonkeyPatch.context() as mp:
        _isolate(mp, root)
        table = load_table("demo.lineitem")
        before = state(table)
        started = time.perf_counter()
        result = compact("demo.lineitem", spec=spec, spark_conf=SPARK_CONF, work_dir=root / "work")
        seconds = time.perf_counter() - started
    return E2E(root, spec, before, result, seconds)


@pytest.fixture
def e2e_table(e2e, monkeypatch):
    _isolate(monkeypatch, e2e.root)
    return load_table("demo.lineitem")


def test_e2e_commits_one_snapshot_with_the_same_rows(e2e, e2e_table):
    result = e2e.result
    assert not result.nothing_to_do and result.snapshot_id is not None
    assert e2e_table.current_snapshot().snapshot_id == result.snapshot_id
    # The compaction's snapshot is the only new one, and its parent is the snapshot planned against.
    assert e2e_table.current_snapshot().parent_snapshot_id == e2e.before.snapshot_id == result.plan.snapshot_id
    assert result.rows == 60_175
    after = sorted_rows(e2e_table, result.snapshot_id)
    before = sorted_rows(e2e_table, e2e.before.snapshot_id)  # the old snapshot is still readable
    assert before.equals(e2e.before.rows)
    assert after.schema == before.schema
    assert after.equals(before)
    assert staged_parquet(e2e_table) and set(staged_parquet(e2e_table)) == {
        resolve(f.file_path)[1] for f in live_files(e2e_table)}, "the committed files are the staged ones, in place"


def test_e2e_snapshot_summary_names_the_run_and_spec(e2e, e2e_table):
    props = e2e_table.current_snapshot().summary.additional_properties
    assert props[RUN_ID] == e2e.result.plan.run_id
    assert props[SPEC_HASH] == e2e.result.plan.spec_hash
    assert props["lakesort.rows"] == "60175"
    assert props["lakesort.base-snapshot-id"] == str(e2e.before.snapshot_id)


def test_e2e_fewer_files_within_the_size_bound(e2e, e2e_table):
    """Fewer files, and none above 2 x target: the bound `verify.max_file_size` defaults to, because parquet-mr
    checks its buffered size only every so many rows. No lower bound per file: a partition's last file is
    legitimately small. How one rewrite group splits over several files is
    `test_a_group_larger_than_the_target_splits_into_disjoint_ordered_files`."""
    files = live_files(e2e_table)
    result = e2e.result
    assert result.files_before == len(e2e.before.files) == 249
    assert result.files_after == len(files) < result.files_before
    assert result.files_removed == 249
    assert max(f.file_size_in_bytes for f in files) <= 2 * TARGET
    # Every file the plan rewrote is gone; every month is still there.
    assert not {f.file_path for f in files} & e2e.before.files
    assert len({partition_of(e2e_table, f) for f in files}) == 83


def test_e2e_sort_key_pages_ascending_in_every_row_group(e2e, e2e_table):
    row_groups = pages = 0
    for f in live_files(e2e_table):
        pf = open_parquet(f.file_path)
        for rg in range(pf.num_row_groups):
            ci = pf.column_index(rg, "l_shipdate")
            assert ci is not None, f"{f.file_path} row group {rg}: no column index"
            assert ci.boundary_order == BoundaryOrder.ASCENDING, (f.file_path, rg, ci.boundary_order)
            row_groups += 1
            pages += len(ci.min_values)
    assert pages > row_groups > len(live_files(e2e_table)), "the small writer settings should give many of each"


def test_e2e_files_and_row_groups_ordered_and_disjoint_within_a_partition(e2e, e2e_table):
    """What range partitioning on (group, l_shipdate, l_orderkey) guarantees: files of one partition hold
    disjoint ranges of the whole sort key, so in the first key alone consecutive files may share only their
    boundary value (min(next) >= max(prev), equal when one ship date straddles the split); within a file the row
    groups follow the same order. On the full key (l_shipdate, l_orderkey) the last row of a file is <= the first
    row of the next (equal keys can straddle: an order has several lineitems, often shipped the same day)."""
    by_partition: dict[str, list] = {}
    for f in live_files(e2e_table):
        by_partition.setdefault(partition_of(e2e_table, f), []).append(f)
    for label, files in by_partition.items():
        spans = []
        for f in files:
            pf = open_parquet(f.file_path)
            stats = [pf.statistics(rg, "l_shipdate") for rg in range(pf.num_row_groups)]
            for prev, nxt in itertools.pairwise(stats):
                assert prev.max <= nxt.min, f"{label} {f.file_path}: row groups out of order"
            filesystem, path = resolve(f.file_path)
            keys = pq.read_table(path, filesystem=filesystem, columns=["l_shipdate", "l_orderkey"]).to_pylist()
            tuples = [(r["l_shipdate"], r["l_orderkey"]) for r in keys]
            assert tuples == sorted(tuples), f"{label} {f.file_path}: rows not sorted"
            spans.append((stats[0].min, stats[-1].max, tuples[0], tuples[-1]))
        spans.sort()
        for (_, prev_max, _, prev_last), (next_min, _, next_first, _) in itertools.pairwise(spans):
            assert next_min >= prev_max, f"{label}: files overlap in l_shipdate"
            assert next_first >= prev_last, f"{label}: files overlap in (l_shipdate, l_orderkey)"


def test_e2e_rerun_plans_nothing(e2e, e2e_table):
    plan = plan_rewrite(e2e_table, e2e.spec)
    assert plan.groups == ()
    again = compact("demo.lineitem", spec=e2e.spec, spark_conf=SPARK_CONF)
    assert again.nothing_to_do and again.snapshot_id is None
    assert e2e_table.refresh().current_snapshot().snapshot_id == e2e.result.snapshot_id


def test_compacted_table_is_readable_without_a_name_mapping(e2e, e2e_table):
    assert NAME_MAPPING not in e2e_table.properties
    assert e2e_table.scan().to_arrow().num_rows == 60_175


def test_e2e_rerun_for_the_same_partitions_plans_nothing(e2e, e2e_table):
    plan = plan_rewrite(e2e_table, e2e.spec, partitions=[g.partition for g in e2e.result.plan.groups])
    assert plan.groups == (), [d.reasons for d in plan.partitions if d.action == "rewrite"][:3]


# ---- 2. a real Spark standalone cluster ------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def standalone_cluster(tmp_path):
    """A Spark master and two workers (1 core, 1 GiB each) on 127.0.0.1, from pyspark's own `bin/spark-class`."""
    import pyspark

    spark_home = Path(pyspark.__file__).resolve().parent
    spark_class = spark_home / "bin" / "spark-class"
    assert spark_class.is_file(), f"pyspark ships no bin/spark-class at {spark_home}"
    port, master_ui, worker_ui = _free_port(), _free_port(), _free_port()
    logs = tmp_path / "cluster"
    logs.mkdir()
    env = dict(os.environ, SPARK_HOME=str(spark_home), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(logs),
               SPARK_WORKER_DIR=str(logs / "work"), PYSPARK_PYTHON=sys.executable,
               # The master's REST server has a fixed port (6066): off, so parallel runs cannot collide.
               SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
    url = f"spark://127.0.0.1:{port}"
    procs = []
    try:
        master_log = logs / "master.log"
        with open(master_log, "w") as out:
            procs.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(master_ui)],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        for i, ui in enumerate((worker_ui, _free_port())):
            with open(logs / f"worker-{i}.log", "w") as out:
                procs.append(subprocess.Popen(
                    [str(spark_class), "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                     "--cores", "1", "--memory", "1g", "--webui-port", str(ui), "--work-dir", str(logs / f"work-{i}")],
                    stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        deadline = time.monotonic() + 90
        while master_log.read_text(errors="replace").count("Registering worker") < 2:
            dead = [p for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                tail = master_log.read_text(errors="replace")[-2000:]
                pytest.fail(f"the standalone cluster did not come up ({'a process exited' if dead else 'timeout'}):"
                            f"\n{tail}")
            time.sleep(0.5)
        yield url
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


def _executors_per_job(event_dir: Path) -> dict[int, set[str]]:
    """From the application's Spark event log: the executor ids that ran tasks of each job."""
    stage_job: dict[int, int] = {}
    executors: dict[int, set[str]] = {}
    for log_file in (p for p in event_dir.rglob("*") if p.is_file()):
        for line in log_file.read_text(errors="replace").splitlines():
            event = json.loads(line)
            if event["Event"] == "SparkListenerJobStart":
                stage_job.update({stage: event["Job ID"] for stage in event["Stage IDs"]})
            elif event["Event"] == "SparkListenerTaskEnd":
                job = stage_job.get(event["Stage ID"])
                executors.setdefault(job, set()).add(event["Task Info"]["Executor ID"])
    return executors


def test_compaction_on_a_standalone_cluster(demo_home, standalone_cluster, tmp_path):
    """The job on a standalone cluster of two workers: an executor on each, and the tasks of one Spark job
    (reading the inputs, the shuffle and sort, the write, the read-back) spread over both."""
    table = load_table("demo.lineitem")
    before = state(table)
    events = tmp_path / "events"
    events.mkdir()
    result = compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS, master=standalone_cluster,
                     spark_conf={**SPARK_CONF, "spark.executor.memory": "512m", "spark.executor.cores": "1",
                                 "spark.cores.max": "2", "spark.eventLog.enabled": "true",
                                 "spark.eventLog.dir": events.as_uri(), "spark.eventLog.compress": "false",
                                 "spark.eventLog.rolling.enabled": "false"},
                     work_dir=demo_home / "work")
    manifest = StagedManifest.from_json((demo_home / "work" / "manifest-0.json").read_text())
    assert manifest.spark_master == standalone_cluster
    table = table.refresh()
    assert result.snapshot_id == table.current_snapshot().snapshot_id != before.snapshot_id
    assert result.files_removed == 6
    assert sorted_rows(table).equals(before.rows)
    assert staged_files(table) and all(p.startswith(resolve(table.location())[1]) for p in staged_files(table))
    per_job = _executors_per_job(events)
    assert set().union(*per_job.values()) - {"driver"} == {"0", "1"}, per_job
    assert any(len(ids) == 2 for ids in per_job.values()), f"no job ran tasks on both workers: {per_job}"


# ---- 3. faults: the table stays as it was, and a rerun succeeds ------------------------------------


class _KillMidWrite:
    """Stands in for `subprocess` in layout.compaction.pipeline.driver: starts the real spark-submit, watches the run's staging
    directory, and SIGKILLs the whole process group (spark-submit, the JVM, its Python workers) as soon as the
    first file appears there: the job dies mid-write, as on a lost driver or an OOM kill."""

    def __init__(self) -> None:
        self.killed_with: list[str] = []

    def run(self, cmd, *, stdout, stderr, env, check):
        plan = RewritePlan.from_json(Path(cmd[cmd.index("--plan") + 1]).read_text())
        filesystem, run_dir = resolve(f"{plan.table_location.rstrip('/')}/data/lakesort-staging/{plan.run_id}")
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, env=env, start_new_session=True)
        from pyarrow import fs as pafs

        try:
            deadline = time.monotonic() + 300
            while proc.poll() is None and time.monotonic() < deadline:
                if filesystem.get_file_info(run_dir).type == pafs.FileType.Directory:
                    found = [i.path for i in filesystem.get_file_info(pafs.FileSelector(run_dir, recursive=True))
                             if i.type == pafs.FileType.File]
                    if found:
                        self.killed_with = found
                        break
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        return subprocess.CompletedProcess(cmd, proc.returncode)


def test_fault_job_killed_mid_write(demo_home, spark, job, monkeypatch):
    """The real spark-submit, SIGKILLed once its first staged file exists: CompactionFailed, the table as it
    was, the partial staging output deleted; then a rerun commits."""
    table = load_table("demo.lineitem")
    before = state(table)
    killer = _KillMidWrite()
    monkeypatch.setattr(layout.compaction.pipeline.submit, "subprocess", types.SimpleNamespace(run=killer.run, STDOUT=subprocess.STDOUT))
    with pytest.raises(CompactionFailed, match=r"exit -9"):
        compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS, spark_conf=SPARK_CONF,
                work_dir=demo_home / "work")
    assert killer.killed_with, "the job finished before a staged file appeared: nothing was killed mid-write"
    assert_unchanged(table, before)
    monkeypatch.setattr(layout.compaction.pipeline.submit, "subprocess", subprocess)
    _rerun_succeeds(table, before, spark, job, monkeypatch)


def _rerun_succeeds(table, before: State, spark, job, monkeypatch, rows: pa.Table | None = None):
    def submit(plan_path, manifest_path, *, master, name, conf=None, work_dir, groups=None):
        plan = RewritePlan.from_json(Path(plan_path).read_text())
        job.write_manifest(spark, plan, job.compact_groups(spark, plan, list(plan.groups)), str(manifest_path), 0.0)

    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", submit)
    result = compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS)
    table = table.refresh()
    assert result.snapshot_id == table.current_snapshot().snapshot_id != before.snapshot_id
    assert sorted_rows(table).equals(before.rows if rows is None else rows)
    assert table.current_snapshot().summary.additional_properties[RUN_ID] == result.plan.run_id
    return result


def test_fault_exception_just_before_commit(demo_home, in_process_job):
    table = load_table("demo.lineitem")
    before = state(table)
    seen = []

    def verify(manifest):
        seen.append(manifest)
        outputs = {resolve(f.path)[1] for g in manifest.groups for f in g.outputs}
        # Every output the manifest names is on storage, under the staging root, when verify runs.
        assert outputs and outputs <= set(staged_parquet(table)), "verify runs while the staged files exist"
        assert all(Path(p).is_file() and Path(p).stat().st_size > 0 for p in outputs)
        raise RuntimeError("verification says no")

    with pytest.raises(RuntimeError, match="verification says no"):
        compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS, verify=verify)
    assert len(seen) == 1 and sum(len(g.outputs) for g in seen[0].groups) > 0
    assert_unchanged(table, before)
    # A rerun from this state is the plain run the other tests make (after the kill, after a concurrent commit).


def test_steps_retried_after_the_commit_keep_the_committed_files(demo_home, in_process_job):
    """An Airflow retry of verify, commit or the Spark task after the commit went through (its worker died
    before reporting success): each is a no-op. Before, the retried step failed (its inputs were gone) and its
    failure path deleted the run's staged files, which were the table's files by then."""
    from layout.compaction.pipeline import steps
    from layout.upkeep.cleanup import delete_staged

    table = load_table("demo.lineitem")
    before = state(table)
    result = compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS, work_dir=demo_home / "work",
                     verify=lambda manifest: None)
    committed = state(table)
    assert committed.snapshot_id == result.snapshot_id != before.snapshot_id
    prepared = steps.PreparedRun.load(demo_home / "work")
    assert steps.verify(prepared, verifier=lambda manifest: pytest.fail("a committed run was verified again")).status == "passed"
    again = steps.commit(prepared)
    assert (again.snapshot_id, again.files_removed, again.files_added, again.rows) == (
        result.snapshot_id, result.files_removed, result.files_added, result.rows)
    assert steps.abandon(prepared, "spark: a retried job found its output there") == 0
    delete_staged(table, prepared.run_id)  # only what no snapshot references (Spark's _SUCCESS and .crc files)
    assert all(Path(resolve(path)[1]).is_file() for path in committed.files)
    after = state(table)  # reads every live file
    assert (after.snapshot_id, after.files) == (committed.snapshot_id, committed.files)
    assert after.rows.equals(before.rows)


def _remove_one_file(path: str) -> int:
    """A concurrent writer's commit (its own catalog connection) that removes one data file; its row count."""
    other = load_catalog().load_table("demo.lineitem")
    victim = next(f for f in live_files(other) if f.file_path == path)
    with other.transaction() as tx, tx.update_snapshot().overwrite() as overwrite:
        overwrite.delete_data_file(victim)
    return victim.record_count


def test_fault_concurrent_commit_removes_an_input_before_the_commit(demo_home, in_process_job, spark, job,
                                                                    monkeypatch, capsys):
    """Another writer removes one planned input while the staged output is being verified: the commit sees the
    input gone and refuses (CommitRefused); the table keeps the other writer's state; a rerun then succeeds."""
    table = load_table("demo.lineitem")
    before = state(table)
    removed = []

    def verify(manifest):
        removed.append(manifest.groups[0].inputs[0])
        _remove_one_file(removed[0])

    with pytest.raises(CommitRefused, match="no longer in"):
        compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS, verify=verify)
    table = table.refresh()
    concurrent = state(table)
    assert concurrent.snapshot_id != before.snapshot_id
    assert concurrent.files == before.files - {removed[0]}
    assert table.current_snapshot().summary.additional_properties.get(RUN_ID) is None
    assert staged_files(table) == []
    result = _rerun_succeeds(table, concurrent, spark, job, monkeypatch, rows=concurrent.rows)
    # The committed outputs live under the staging root: `lakesort cleanup` must leave every one of them.
    committed = staged_parquet(table)
    assert set(committed) == {resolve(f.file_path)[1] for f in live_files(table.refresh())
                              if "lakesort-staging" in f.file_path}
    assert len(committed) == result.files_added
    litter = len(staged_files(table)) - len(committed)  # _SUCCESS and .crc files: referenced by nothing
    assert main(["cleanup", "demo.lineitem", "--grace-hours", "0"]) == EXIT_OK
    assert f"removed {litter} orphaned" in capsys.readouterr().out
    assert staged_files(table) == committed
    assert sorted_rows(table).equals(concurrent.rows)


def test_fault_concurrent_commit_races_the_commit_itself(demo_home, in_process_job, monkeypatch):
    """Another writer removes one of the planned inputs after the commit's own input check, while the overwrite is
    being built: the catalog must refuse the lakesort snapshot (pyiceberg's CommitFailedException: the branch
    moved), or the removed rows would come back through the staged output; the staged files are removed.
    pyiceberg 0.12 retries the commit, re-validates, and raises ValidationException ("Data files were concurrently
    deleted"): not a LakesortError, but a clean refusal all the same."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    import layout.compaction.pipeline.commit

    table = load_table("demo.lineitem")
    before = state(table)
    real = layout.compaction.pipeline.commit.output_data_files
    raced = []

    def racing(*args, **kwargs):
        if not raced:
            other = load_catalog().load_table("demo.lineitem")
            raced.append(next(f.file_path for f in live_files(other) if partition_of(other, f) == MONTHS[0]))
            _remove_one_file(raced[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(layout.compaction.pipeline.commit, "output_data_files", racing)
    with pytest.raises((CommitFailedException, CommitRefused, ValidationException)):
        compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS)
    monkeypatch.setattr(layout.compaction.pipeline.commit, "output_data_files", real)
    concurrent = state(table)
    assert concurrent.files == before.files - {raced[0]}
    assert table.refresh().current_snapshot().summary.additional_properties.get(RUN_ID) is None
    assert staged_files(table) == []


def _stage(table, spec, spark, job, work: Path, **plan_kwargs) -> tuple[RewritePlan, StagedManifest]:
    """Plan and run the job (in process) without committing: the staged files stay."""
    plan = plan_rewrite(table, spec, **plan_kwargs)
    assert plan.groups
    work.mkdir(parents=True, exist_ok=True)
    job.write_manifest(spark, plan, job.compact_groups(spark, plan, list(plan.groups)), str(work / "m.json"), 0.0)
    return plan, StagedManifest.from_json((work / "m.json").read_text())


def _drop_checksum(local: str) -> None:
    """Hadoop's local file system keeps a `.<name>.crc` beside each file and would refuse the changed bytes
    itself; object stores keep none: the checks below must not rely on it."""
    Path(local).with_name(f".{Path(local).name}.crc").unlink(missing_ok=True)


def _tamper_rows(path: str) -> None:
    """Drop the last row of a staged file."""
    filesystem, local = resolve(path)
    _drop_checksum(local)
    data = pq.read_table(local, filesystem=filesystem)
    pq.write_table(data.slice(0, data.num_rows - 1), local, filesystem=filesystem)


def _tamper_value(path: str) -> None:
    """Same rows, one value changed (the first row's l_comment): only the fingerprint can tell."""
    filesystem, local = resolve(path)
    _drop_checksum(local)
    data = pq.read_table(local, filesystem=filesystem)
    i = data.column_names.index("l_comment")
    column = data.column(i).combine_chunks()
    changed = pa.concat_arrays([pa.array(["tampered"], column.type), column.slice(1)])
    pq.write_table(data.set_column(i, data.field(i), changed), local, filesystem=filesystem)


def _tamper_delete(path: str) -> None:
    filesystem, local = resolve(path)
    _drop_checksum(local)
    filesystem.delete_file(local)


def _swap_first_rows(one: str, other: str) -> None:
    """Swap the first rows of two staged files of different groups: every group keeps its row count and the
    rows over all groups are the same; only the hash salted with each row's group can tell."""
    tables = {}
    for path in (one, other):
        filesystem, local = resolve(path)
        _drop_checksum(local)
        tables[path] = (filesystem, local, pq.read_table(local, filesystem=filesystem))
    (fs1, local1, a), (fs2, local2, b) = tables[one], tables[other]
    pq.write_table(pa.concat_tables([b.slice(0, 1), a.slice(1)]), local1, filesystem=fs1)
    pq.write_table(pa.concat_tables([a.slice(0, 1), b.slice(1)]), local2, filesystem=fs2)


TAMPERING = [
    (_tamper_value, r"content fingerprint of the staged files .* differs"),
    (_tamper_rows, r"staged files hold \d+ rows, the input \d+"),
    (_tamper_delete, r"staged files hold \d+ rows, the input \d+"),
]


def _read_back_again(job, spark, plan, manifest: StagedManifest) -> StagedManifest:
    """The manifest as the job's tail (read-back, then footers) would write it for the staged files as they
    are now: what the job reports when its write went wrong."""
    checked = job_part("readback").read_back(spark, plan, job_part("write").staging_dir(plan), staged_columns(plan))

    def now(f):
        filesystem, local = resolve(f.path)
        part_dir, group_dir = Path(local).parent.name, Path(local).parent.parent.name
        rows, hash_sum = checked[int(group_dir.split("=", 1)[1]), part_dir.split("=", 1)[1], Path(local).name]
        return f.model_copy(update={"size": filesystem.get_file_info(local).size, "rows": pq.read_metadata(local).num_rows,
                                    "read_back_rows": rows, "read_back_hash_sum": str(hash_sum)})

    groups = tuple(g.model_copy(update={"outputs": tuple(now(f) for f in g.outputs if Path(resolve(f.path)[1]).exists())})
                   for g in manifest.groups)
    return manifest.model_copy(update={"groups": groups})


def test_staged_output_is_checked_before_commit_and_cleanup_removes_leftovers(demo_home, spark, job, capsys):
    """One real job run (not committed). A write that went wrong, each time on a fresh copy of its staged
    files: a value changed (same row count: only the fingerprint tells), a row dropped, a file deleted, rows
    swapped between groups (only the group salt tells), then read back by the job's own read-back ->
    CommitRefused naming what differs, nothing committed, the staged files removed. A file changed after it was verified: the commit refuses it by its size. Spark's read-back
    figures wrong: the recheck outside Spark refuses. Finally the untouched staged files are left behind as a
    crashed run would, and `lakesort cleanup TABLE` removes them and nothing else."""
    table = load_table("demo.lineitem")
    before = state(table)
    plan, manifest = _stage(table, demo_spec(), spark, job, demo_home / "work", partitions=MONTHS)
    columns = [f.name for f in table.schema().fields]
    check_staged(manifest, columns, recheck="all")  # untouched, the output passes
    run_dir = Path(resolve(f"{staging_root(table)}/{plan.run_id}")[1])
    saved = demo_home / "saved-staging"
    shutil.copytree(run_dir, saved)
    for tamper, message in TAMPERING:
        if not run_dir.exists():
            shutil.copytree(saved, run_dir)
        tamper(manifest.groups[0].outputs[0].path)
        with pytest.raises(CommitRefused, match=message):
            commit_rewrite(table, plan, _read_back_again(job, spark, plan, manifest))
        assert_unchanged(table, before)
        assert not run_dir.exists()

    shutil.copytree(saved, run_dir)
    assert len(manifest.groups) == 2
    _swap_first_rows(manifest.groups[0].outputs[0].path, manifest.groups[1].outputs[0].path)
    with pytest.raises(CommitRefused, match=r"content fingerprint of the staged files .* differs"):
        commit_rewrite(table, plan, _read_back_again(job, spark, plan, manifest))
    assert_unchanged(table, before)

    shutil.copytree(saved, run_dir)
    _tamper_rows(manifest.groups[0].outputs[0].path)
    with pytest.raises(CommitRefused, match=r"has \d+ bytes, \d+ when it was verified"):
        commit_rewrite(table, plan, manifest, verified=True)
    assert_unchanged(table, before)

    shutil.copytree(saved, run_dir)
    first = manifest.groups[0].outputs[0]
    wrong = first.model_copy(update={"read_back_hash_sum": str(int(first.read_back_hash_sum) + 1)})
    group = manifest.groups[0].model_copy(update={"outputs": (wrong, *manifest.groups[0].outputs[1:])})
    lied = manifest.model_copy(update={"groups": (group, *manifest.groups[1:]),
                                       "expected_hash_sum": str(int(manifest.expected_hash_sum) + 1)})
    with pytest.raises(CommitRefused, match="re-read outside Spark"):
        check_staged(lied, columns, recheck="all")
    check_staged(lied, columns, recheck="none")  # without the second reader, nothing else could tell

    orphans = staged_files(table)
    assert {resolve(f.path)[1] for g in manifest.groups for f in g.outputs} <= set(orphans)
    assert main(["cleanup", "demo.lineitem", "--grace-hours", "0"]) == EXIT_OK
    assert f"removed {len(orphans)} orphaned staged file(s)" in capsys.readouterr().out
    after = state(table)
    assert staged_files(table) == [] and not run_dir.exists()
    assert after.snapshot_id == before.snapshot_id and after.files == before.files
    assert all(Path(resolve(p)[1]).is_file() for p in after.files), "cleanup removed a live data file"
    assert after.rows.equals(before.rows)


# ---- 4. keyed tables -------------------------------------------------------------------------------


KEYED_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("seq", pa.int64(), nullable=False),
                          pa.field("payload", pa.string())])


def _keyed_batches() -> list[pa.Table]:
    """Upserts across snapshots; for some ids a later snapshot carries a *lower* seq (late, stale data), so
    "highest seq" and "latest snapshot" differ."""
    def batch(ids, seq, tag):
        return pa.Table.from_pylist([{"id": i, "seq": seq(i), "payload": f"{tag}-{i}"} for i in ids], KEYED_SCHEMA)

    return [
        batch(range(60), lambda i: 10, "a"),
        batch(range(30), lambda i: 20, "b"),
        batch(range(20, 40), lambda i: 5 if i % 2 else 30, "c"),  # odd ids: stale (seq 5 < 10/20)
        batch(range(55, 70), lambda i: 1, "d"),  # 55..59 stale, 60..69 new
    ]


def _keyed_table(name: str):
    catalog = load_catalog()
    catalog.create_namespace_if_not_exists("keyed")
    table = catalog.create_table(f"keyed.{name}", schema=KEYED_SCHEMA)
    for b in _keyed_batches():
        table.append(b)
    return table.refresh()


def _expected_merge(pick) -> dict[int, tuple[int, str]]:
    best: dict[int, dict] = {}
    for b in _keyed_batches():
        for row in b.to_pylist():
            cur = best.get(row["id"])
            if cur is None or pick(row["seq"], cur["seq"]):
                best[row["id"]] = row
    return {i: (r["seq"], r["payload"]) for i, r in best.items()}


@pytest.mark.parametrize(("merge", "pick"), [
    ("deduplicate", lambda new, cur: new > cur),
    ("first-row", lambda new, cur: new < cur),
])
def test_keyed_table_keeps_one_row_per_key(demo_home, in_process_job, merge, pick):
    table = _keyed_table(merge.replace("-", "_"))
    spec = parse_spec({
        "table": f"keyed.{merge.replace('-', '_')}", "catalog": "lakesort", "owner": OWNER,
        "sort": {"keys": [{"column": "id"}]}, "target_file_size": "64KiB",
        "keys": {"columns": ["id"], "sequence": "seq", "merge": merge},
    }, source="keyed-spec")
    rows_before = table.scan().to_arrow().num_rows
    assert NAME_MAPPING not in table.properties
    result = compact(spec.table, spec=spec)
    table = table.refresh()
    got = readable(table).scan().to_arrow().to_pylist()
    expected = _expected_merge(pick)
    assert rows_before == 60 + 30 + 20 + 15 > len(expected) == 70
    assert result.rows == len(got) == len(expected)
    assert {r["id"]: (r["seq"], r["payload"]) for r in got} == expected
    assert table.current_snapshot().summary.additional_properties[RUN_ID] == result.plan.run_id
    # Spot checks against hand-derived answers.
    survivors = {r["id"]: r["payload"] for r in got}
    if merge == "deduplicate":
        assert (survivors[0], survivors[21], survivors[22], survivors[57]) == ("b-0", "b-21", "c-22", "a-57")
    else:
        assert (survivors[0], survivors[21], survivors[22], survivors[57]) == ("a-0", "c-21", "a-22", "d-57")


# ---- 5. bad input ----------------------------------------------------------------------------------


def test_corrupt_input_file_fails_the_job_and_commits_nothing(demo_home):
    table = load_table("demo.lineitem")
    before = state(table)
    month = MONTHS[0]
    victim = next(f.file_path for f in live_files(table) if partition_of(table, f) == month)
    filesystem, local = resolve(victim)
    size = filesystem.get_file_info(local).size
    Path(local).write_bytes(bytes((i * 37 + 11) % 256 for i in range(size)))  # garbage, same size, no magic
    with pytest.raises(LakesortError) as info:
        compact("demo.lineitem", spec=demo_spec(), partitions=[month], spark_conf=SPARK_CONF,
                work_dir=demo_home / "work")
    # Every input's footer is opened before any Spark work, so the corrupt file is named right away.
    assert isinstance(info.value, ParquetError)
    assert Path(local).name in str(info.value), f"the error does not name the corrupt file:\n{info.value}"
    table = table.refresh()
    assert table.current_snapshot().snapshot_id == before.snapshot_id
    assert {f.file_path for f in live_files(table)} == before.files
    assert staged_files(table) == []
    # The run is recorded as failed, naming the file, so the owners' report shows it.
    from layout.metrics.measure import read_runs

    failed = [r for r in read_runs(load_catalog()).to_pylist() if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["error"].startswith("prepare: ") and Path(local).name in failed[0]["error"]


def test_unknown_sort_key_is_refused_before_any_spark_work(demo_home, monkeypatch):
    def no_spark(*args, **kwargs):
        raise AssertionError("spark-submit must not run")

    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", no_spark)
    spec = demo_spec(sort={"keys": [{"column": "l_shipdat"}]})
    with pytest.raises(UsageError, match=r"`l_shipdat` is not a column of demo.lineitem; did you mean `l_shipdate`"):
        compact("demo.lineitem", spec=spec)


def test_empty_table_has_nothing_to_do(demo_home, monkeypatch):
    def no_spark(*args, **kwargs):
        raise AssertionError("spark-submit must not run")

    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", no_spark)
    catalog = load_catalog()
    catalog.create_namespace_if_not_exists("keyed")
    table = catalog.create_table("keyed.empty", schema=KEYED_SCHEMA)
    spec = parse_spec({"table": "keyed.empty", "catalog": "lakesort", "owner": OWNER,
                       "sort": {"keys": [{"column": "id"}]}}, source="empty-spec")
    result = compact("keyed.empty", spec=spec)
    assert result.nothing_to_do and result.snapshot_id is None and result.files_before == 0
    assert table.refresh().current_snapshot() is None
    with pytest.raises(UsageError, match="no such partition"):
        compact("keyed.empty", spec=spec, partitions=["id=1"])


def test_emptied_partition_has_nothing_to_do(demo_home, monkeypatch):
    """A month whose rows were all deleted has no live files: it is not planned, and naming it is an error that
    lists real partitions."""
    from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

    def no_spark(*args, **kwargs):
        raise AssertionError("spark-submit must not run")

    table = load_table("demo.lineitem")
    table.delete(And(GreaterThanOrEqual("l_shipdate", "1995-03-01"), LessThan("l_shipdate", "1995-04-01")))
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", no_spark)
    spec = demo_spec()
    plan = plan_rewrite(table.refresh(), spec, partitions=[MONTHS[1]])
    assert [d.partition for d in plan.partitions] == [MONTHS[1]]
    with pytest.raises(UsageError, match=r"no such partition\(s\): l_shipdate_month=1995-03; partitions look like: "
                                         r"l_shipdate_month=1992-01"):
        compact("demo.lineitem", spec=spec, partitions=[MONTHS[0]])


# ---- verification before the commit, and reading the compacted table as one sorted stream -------------


def test_staged_output_failing_verification_is_not_committed(demo_home, in_process_job, monkeypatch):
    """The default verifier (layout rules, then the GX suites) refuses a layout the spec does not intend:
    here the spec wants `l_shipdate` DESCENDING pages while the sort is ascending. Nothing is committed,
    the staged files are removed, and the failing expectation is visible in the Data Docs."""
    from layout.verify.rules import VerificationFailed

    monkeypatch.setenv("LAKESORT_REPORT_DIR", str(demo_home / "reports"))
    table = load_table("demo.lineitem")
    before = state(table)
    spec = demo_spec(verify={"boundary_order": {"l_shipdate": "DESCENDING"}})
    with pytest.raises(VerificationFailed) as info:
        compact("demo.lineitem", spec=spec, partitions=MONTHS)
    assert "boundary_order" in str(info.value) or any(f.rule == "boundary_order" for f in info.value.report.findings)
    assert_unchanged(table, before)
    docs = demo_home / "reports" / "gx" / "gx-data-docs"
    html = "\n".join(p.read_text(errors="replace") for p in docs.rglob("*.html"))
    assert "boundary_order" in html and "DESCENDING" in html, "the failing expectation shows in the Data Docs"


def test_compacted_files_read_as_one_sorted_stream(e2e, e2e_table):
    """Each compacted file is sorted by the sort key: merging them (loser tree) equals pyiceberg's scan of the
    same rows sorted by pyarrow. The oracle is another reader (pyiceberg) and another sort (`sort_by`), so a row
    lost or repeated by lakesort's own reader is caught as well as one lost by the merge."""
    from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

    from layout.read.plan import plan
    from layout.read.scan import read_sorted

    keys = ["l_shipdate", "l_orderkey"]
    p = plan("demo.lineitem", "l_shipdate >= DATE '1993-01-01' AND l_shipdate < DATE '1994-01-01'", cache=False)
    assert len(p.files) > 1
    merged = canonical(pa.Table.from_batches(list(read_sorted(p, keys))))
    scanned = canonical(readable(e2e_table).scan(row_filter=And(
        GreaterThanOrEqual("l_shipdate", "1993-01-01"), LessThan("l_shipdate", "1994-01-01"))).to_arrow())
    expected = scanned.sort_by([(k, "ascending") for k in keys])
    assert merged.num_rows == scanned.num_rows > 0
    assert merged.column_names == scanned.column_names
    # The key order is total up to ties; rows with equal keys may come in any order, so compare the keys in
    # stream order and the rows as a multiset.
    assert merged.select(keys).equals(expected.select(keys).combine_chunks())
    assert by_every_column(merged).equals(by_every_column(scanned)), "the same rows, none lost or repeated"


def test_a_group_larger_than_the_target_splits_into_disjoint_ordered_files(demo_home, spark, in_process_job):
    """One month, one rewrite group, target_file_size half its input: the plan asks for two files. Every output
    file is sorted by (l_shipdate, l_orderkey) and together they hold exactly the rows pyiceberg scanned from
    the month before the compaction. The two files' key ranges are disjoint and ordered: the boundary is a
    sampled quantile of the whole sort key, so equal keys share a file and the last key of one file is below
    the first key of the next. Each file is written by a task of its own (not one task for the group, as a
    window over the group ran before)."""
    table = load_table("demo.lineitem")
    month = MONTHS[0]
    inputs = [f for f in live_files(table) if partition_of(table, f) == month]
    expected = by_every_column(canonical(readable(table).scan(row_filter=month_filter(month)).to_arrow()))
    assert expected.num_rows == sum(f.record_count for f in inputs) > 0
    # The writer's defaults (not demo_spec's tiny pages), so the output is about as big as the input.
    spec = demo_spec(target_file_size=math.ceil(sum(f.file_size_in_bytes for f in inputs) / 2), writer={})

    # No layout rules: this test's own checks below are the oracle, not `layout.verify.rules`'s.
    result = compact("demo.lineitem", spec=spec, partitions=[month], verify=lambda manifest: [])
    tracker = spark.sparkContext.statusTracker()
    jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup("lakesort: fingerprint, shuffle, sort, write")]
    # The last stage of the part is the write (after AQE's broadcasts and the shuffle): a task per file.
    write = tracker.getStageInfo(max(s for job in jobs if job is not None for s in job.stageIds))
    assert write is not None and write.numTasks == 2, write
    (run,) = in_process_job
    (group,) = run.groups
    assert group.partition == month and group.output_files == 2 and len(group.inputs) == len(inputs)
    table = table.refresh()
    outputs = [f for f in live_files(table) if partition_of(table, f) == month]
    assert result.files_added == len(outputs) >= 1
    # Each task's own sort (by the key alone: here its exact prefix, `layout.compaction.executor.sort_prefix`) is the
    # write's only sort: Spark's planned write would sort by the partition columns instead, keeping the key
    # order only while nothing spills.
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()  # a Scala Seq
    plans = [p for p in (executions.apply(i).physicalPlanDescription() for i in range(executions.size()))
             if "lakesort-staging" in p and "InsertIntoHadoopFsRelationCommand" in p]
    sorts = [line for line in plans[-1].splitlines() if line.startswith("Arguments: [") and " ASC " in line]
    # (the description lists the adaptive plan's initial and final forms: the same sort)
    # (the prefix is computed again from the key columns after the shuffle, not carried through it)
    assert sorts and all(s.startswith("Arguments: [(shiftleft(") and s.count(" ASC ") == 1 and "lakesort_group" not in s
                         for s in sorts), sorts

    keys = ["l_shipdate", "l_orderkey"]
    spans, parts = [], []
    for f in outputs:
        filesystem, path = resolve(f.file_path)
        data = pq.read_table(path, filesystem=filesystem)
        tuples = list(zip(*(data.column(k).to_pylist() for k in keys), strict=True))
        assert tuples and tuples == sorted(tuples), f"{path}: rows not sorted by {keys}"
        spans.append((tuples[0], tuples[-1]))
        parts.append(data)
    written = by_every_column(canonical(pa.concat_tables(parts, promote_options="permissive")))
    assert written.num_rows == expected.num_rows
    assert written.cast(expected.schema).equals(expected), "the output files hold exactly the month's rows"
    after = by_every_column(canonical(readable(table).scan(row_filter=month_filter(month)).to_arrow()))
    assert after.equals(expected), "pyiceberg reads the same rows back after the commit"

    assert len(outputs) == 2
    (first_lo, first_hi), (second_lo, second_hi) = sorted(spans)
    assert first_lo <= first_hi < second_lo <= second_hi, f"the files' key ranges overlap: {sorted(spans)}"
    # Neither file is a sliver: the rows are split about evenly (ranks, not bytes: within a factor of two).
    assert min(p.num_rows for p in parts) * 2 >= max(p.num_rows for p in parts)


def _write_stage_tasks(spark) -> int:
    tracker = spark.sparkContext.statusTracker()
    jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup("lakesort: fingerprint, shuffle, sort, write")]
    write = tracker.getStageInfo(max(s for job in jobs if job is not None for s in job.stageIds))
    return write.numTasks


def test_files_written_in_pieces_are_stitched_with_their_indexes(demo_home, spark, in_process_job):
    """A month into two files, each written by three tasks (spark.lakesort.compact.pieceBytes at a sixth of the
    input) and stitched from their row groups (`layout.parquet.stitch`). Oracles that do not trust the
    stitcher: pyiceberg reads the month's rows back unchanged after the commit; pyarrow reads each file sorted
    with disjoint key ranges; the full verification (column and offset indexes, bloom filters, order) passes;
    every row group's bloom filter knows the row group's keys."""
    table = load_table("demo.lineitem")
    month = MONTHS[1]
    inputs = [f for f in live_files(table) if partition_of(table, f) == month]
    size = sum(f.file_size_in_bytes for f in inputs)
    expected = by_every_column(canonical(readable(table).scan(row_filter=month_filter(month)).to_arrow()))
    spec = demo_spec(target_file_size=math.ceil(size / 2),
                     writer={"row_group_size": "8KiB", "page_size": "1KiB", "page_row_count_limit": 20,
                             "bloom_filters": {"l_orderkey": {"ndv": 1000, "fpp": 0.05}}})
    spark.conf.set("spark.lakesort.compact.pieceBytes", str(math.ceil(size / 6)))
    try:
        result = compact("demo.lineitem", spec=spec, partitions=[month])
    finally:
        spark.conf.unset("spark.lakesort.compact.pieceBytes")
    assert _write_stage_tasks(spark) == 6
    table = table.refresh()
    outputs = [f for f in live_files(table) if partition_of(table, f) == month]
    assert result.files_added == len(outputs) == 2
    after = by_every_column(canonical(readable(table).scan(row_filter=month_filter(month)).to_arrow()))
    assert after.equals(expected), "pyiceberg reads the same rows back after the commit"
    keys = ["l_shipdate", "l_orderkey"]
    spans = []
    for f in outputs:
        filesystem, path = resolve(f.file_path)
        assert path.rsplit("/", 1)[1].startswith("stitched-part-"), path
        pf = ParquetFile.open(path, filesystem=filesystem)
        assert pf.num_row_groups >= 3, "three pieces, each at least a row group"
        data = pq.read_table(path, filesystem=filesystem)
        tuples = list(zip(*(data.column(k).to_pylist() for k in keys), strict=True))
        assert tuples == sorted(tuples), f"{path}: rows not sorted by {keys}"
        spans.append((tuples[0], tuples[-1]))
        first = 0
        for rg in range(pf.num_row_groups):
            bloom = pf.bloom_filter(rg, "l_orderkey")
            assert bloom is not None and bloom.might_contain(data.column("l_orderkey")[first].as_py())
            assert pf.offset_index(rg, "l_orderkey") is not None and pf.column_index(rg, "l_orderkey") is not None
            first += pf.metadata.row_groups[rg].num_rows
    (a_lo, a_hi), (b_lo, b_hi) = sorted(spans)
    assert a_lo <= a_hi < b_lo <= b_hi


@pytest.mark.parametrize("flat", [False, True])
def test_small_files_share_write_tasks(demo_home, spark, in_process_job, flat):
    """Six months of ~3 small files each. Written by Spark's partitioned writer (spark.lakesort.compact.flatWrite
    off, as past FLAT_MAX_TASKS slots or on an object store): their slots share tasks (never two of one month;
    at least four tasks on two cores), so the write runs fewer tasks than it writes files. Written into one
    directory (the default on a local file system): a task per file, each moved into its month's directory.
    Either way every file is one partition's, sorted, verified, and pyiceberg reads each month back unchanged."""
    table = load_table("demo.lineitem")
    months = sorted({partition_of(table, f) for f in live_files(table)})[:6]
    expected = {m: by_every_column(canonical(readable(table).scan(row_filter=month_filter(m)).to_arrow()))
                for m in months}
    spark.conf.set("spark.lakesort.compact.flatWrite", str(flat).lower())
    try:
        result = compact("demo.lineitem", spec=demo_spec(), partitions=months)
    finally:
        spark.conf.unset("spark.lakesort.compact.flatWrite")
    if flat:
        assert _write_stage_tasks(spark) == result.files_added > len(months)  # a task per file (no pieces here)
    else:
        assert 4 <= _write_stage_tasks(spark) < result.files_added
    table = table.refresh()
    for m in months:
        after = by_every_column(canonical(readable(table).scan(row_filter=month_filter(m)).to_arrow()))
        assert after.equals(expected[m])


def _group_jobs(spark, part: str) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(f"lakesort: {part}"))


@pytest.mark.parametrize("bounds", ["true", "too narrow"])
def test_key_ranges_come_from_the_manifests_and_a_wrong_bound_writes_again(demo_home, spark, job, monkeypatch,
                                                                           caplog, bounds):
    """Every input read by Spark's own reader, no merge rule: the job runs no first pass (no Spark job in its
    "read, sample" part); rows and the sort prefix's key ranges come from the manifests (`InputFile.ranges`).
    With bounds narrower than the data (a writer's wrong metrics, simulated in the plan) the write sees values
    outside them, says so, and writes everything again with ranges from the input. Either way the month is
    split into two sorted files with disjoint key ranges, and pyiceberg reads the same rows back."""
    table = load_table("demo.lineitem")
    month = MONTHS[0]
    inputs = [f for f in live_files(table) if partition_of(table, f) == month]
    expected = by_every_column(canonical(readable(table).scan(row_filter=month_filter(month)).to_arrow()))
    before = _group_jobs(spark, "read, sample")
    plans: list[RewritePlan] = []

    def submit(plan_path, manifest_path, *, master, name, conf=None, work_dir, groups=None):
        plan = RewritePlan.from_json(Path(plan_path).read_text())
        files = [f for g in plan.groups for f in g.inputs]
        assert files and all(f.spark_native and len(f.ranges) == 2 and all(f.ranges) for f in files)
        if bounds == "too narrow":  # every file claims l_shipdate's range is its upper bound alone
            groups_ = [g.model_copy(update={"inputs": tuple(
                f.model_copy(update={"ranges": ((f.ranges[0][1], f.ranges[0][1]), f.ranges[1])}) for f in g.inputs)})
                for g in plan.groups]
            plan = plan.model_copy(update={"groups": tuple(groups_)})
        plans.append(plan)
        job.write_manifest(spark, plan, job.compact_groups(spark, plan, list(plan.groups)), str(manifest_path), 0.0)

    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", submit)
    spec = demo_spec(target_file_size=math.ceil(sum(f.file_size_in_bytes for f in inputs) / 2), writer={})
    with caplog.at_level("WARNING", logger="lakesort.compact"):
        result = compact("demo.lineitem", spec=spec, partitions=[month])
    first_pass = _group_jobs(spark, "read, sample") - before
    assert plans and (first_pass > 0) == (bounds == "too narrow"), first_pass
    missed = [r for r in caplog.records if "outside the range" in r.getMessage()]
    assert bool(missed) == (bounds == "too narrow"), [r.getMessage() for r in caplog.records]
    if missed:
        assert "l_shipdate" in missed[0].getMessage() and "writing again" in missed[0].getMessage()
    # ... and the run's record carries it as a warning, naming the column (not only the job's log)
    from layout.metrics.measure import read_runs

    (run,) = [r for r in read_runs(load_catalog()).to_pylist() if r["run_id"] == plans[0].run_id]
    warned = [f for f in json.loads(run["findings"]) if f["rule"] == "manifest_bounds"]
    assert run["status"] == "committed" and len(warned) == (bounds == "too narrow"), run["findings"]
    assert all(f["column"] == "l_shipdate" and f["severity"] == "warning" for f in warned)
    table = table.refresh()
    outputs = [f for f in live_files(table) if partition_of(table, f) == month]
    assert result.files_added == len(outputs) == 2
    spans = []
    for f in outputs:
        filesystem, path = resolve(f.file_path)
        data = pq.read_table(path, filesystem=filesystem)
        tuples = list(zip(data.column("l_shipdate").to_pylist(), data.column("l_orderkey").to_pylist(), strict=True))
        assert tuples == sorted(tuples), f"{path}: rows not sorted"
        spans.append((tuples[0], tuples[-1]))
    (a_lo, a_hi), (b_lo, b_hi) = sorted(spans)
    assert a_lo <= a_hi < b_lo <= b_hi
    after = by_every_column(canonical(readable(table).scan(row_filter=month_filter(month)).to_arrow()))
    assert after.equals(expected), "pyiceberg reads the same rows back after the commit"


@pytest.mark.parametrize("slots", [2, 3, 7])
def test_a_single_partition_s_boundaries_picked_in_python_are_spark_s(spark, job, slots):
    """`slots.quantile_picks` over the drawn rows' prefixes sorted in Python gives the boundaries that
    `boundaries` picks in Spark from the same sample (the first pass's shape, `as_summary`)."""
    from pyspark.sql import functions as F

    from layout.compaction.executor.slots import quantile_picks
    from layout.compaction.executor.sort_prefix import plan_prefix

    rows = [(0, "p", (i * 7919) % 1000, (i * 104729) % 50 - 25) for i in range(997)] + [(0, "p", None, 3)]
    drawn = spark.createDataFrame(rows, "lakesort_group int, lakesort_part string, a long, b long")
    keys = [("a", "asc", "first"), ("b", "desc", "last")]
    prefix = plan_prefix([("CAST(`a` AS BIGINT)", "asc", "first", 0, 999), ("CAST(`b` AS BIGINT)", "desc", "last", -25, 24)])
    (row,) = job_part("sample").boundaries(spark, job_part("sample").as_summary(drawn, keys), {(0, "p"): slots}, keys, prefix).collect()
    picked = quantile_picks(sorted(r[0] for r in drawn.select(F.expr(prefix.sql())).collect()), slots)
    assert list(row["__bounds"]) == picked and len(picked) == slots - 1
    assert quantile_picks([], slots) == []


@pytest.mark.parametrize("directions", [("asc", "first", "asc", "first"), ("asc", "last", "desc", "first"),
                                        ("desc", "last", "asc", "last"), ("desc", "first", "desc", "last")])
def test_the_file_boundary_comparison_is_spark_s_sort_order(spark, job, directions):
    """The job places rows against sampled boundary keys with `before`, written as Spark expressions. For every
    pair of keys (two columns: a double with NaN, -0.0 and nulls, a string with nulls), `before` must say exactly
    what Spark's own sort says (rank by orderBy), in each direction and null placement: otherwise a file could
    take rows that sort into its neighbour, and files would overlap."""
    from pyspark.sql import functions as F

    keys = [("x", directions[0], directions[1]), ("s", directions[2], directions[3])]
    xs = [None, float("nan"), -1.5, -0.0, 0.0, 2.0, float("inf")]
    ss = [None, "", "a", "ab", "b"]
    rows = [(x, s) for x in xs for s in ss]
    df = spark.createDataFrame(rows, "x double, s string")
    def norm(x, s):  # Spark's sort: every NaN equal, -0.0 equal to 0.0
        return ("nan" if x is not None and math.isnan(x) else (0.0 if x == 0 else x)), s

    rank: dict = {}
    for r in df.orderBy(*[job_part("frames").ordered(F.col(n), d, nl) for n, d, nl in keys]).collect():
        rank.setdefault(norm(r.x, r.s), len(rank))
    left = df.select(F.col("x"), F.col("s"))
    right = df.select(F.struct(F.col("x").alias("k0"), F.col("s").alias("k1")).alias("b"))
    pairs = left.crossJoin(right).select("x", "s", "b", job_part("frames").before([F.col("x"), F.col("s")], F.col("b"), keys)
                                        .alias("before")).collect()

    wrong = [(p.x, p.s, p.b.k0, p.b.k1, p.before) for p in pairs
             if p.before != (rank[norm(p.x, p.s)] < rank[norm(p.b.k0, p.b.k1)])]
    assert len(pairs) == len(rows) ** 2 and not wrong, wrong[:5]


def test_literal_frames_keep_every_value_and_type(spark, job):
    """Small lookup tables (file listing, per-partition rates and first file ids) are one SQL VALUES clause:
    strings with quotes, backslashes, newlines and non-ASCII characters, ints and doubles come back as given."""
    rows = [("it's", 1, 0.25), ("a\\b'", 2**40, 1.0), ("new\nline \u00fc \u2713", -3, 1e-300), ("", 0, 3.0)]
    frame = job_part("frames").literal_frame(spark, rows, ["s", "__n", "rate"])
    assert [tuple(r) for r in frame.collect()] == rows
    assert [f.dataType.simpleString() for f in frame.schema.fields] == ["string", "bigint", "double"]
    assert job_part("frames").literal_frame(spark, [(1,)], ["g"]).schema.fields[0].dataType.simpleString() == "int"


def test_task_keys_send_each_slot_to_its_own_task(spark):
    """The key of task i lands in shuffle partition i under Spark's hash partitioning of that many tasks, and
    `spark_hash_int` is Spark's own `hash()` of an int (edge values and a seeded spread of others)."""
    import random

    from pyspark.sql import functions as F

    from layout.compaction.executor.slots import spark_hash_int, task_keys

    rng = random.Random(7)
    values = [0, 1, -1, 42, (1 << 31) - 1, -(1 << 31), *[rng.randint(-(1 << 31), (1 << 31) - 1) for _ in range(2000)]]
    got = spark.createDataFrame([(v,) for v in values], "v int").select("v", F.hash("v").alias("h")).collect()
    assert [(r.v, r.h) for r in got] == [(v, spark_hash_int(v)) for v in values]
    for n in (1, 3, 84, 1000):
        keys = task_keys(n)
        placed = (spark.createDataFrame([(k, i) for i, k in enumerate(keys)], "k int, i int").repartition(n, "k")
                  .select("i", F.spark_partition_id().alias("p")).collect())
        assert sorted((r.i, r.p) for r in placed) == [(i, i) for i in range(n)]

