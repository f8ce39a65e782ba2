"""The DAGs' helpers (dags/lakesort_common.py) without Airflow running: backfill requests, date ranges to
partitions, the per-table lease, and a failed Spark job leading to an abandoned run."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import lakesort_common as common
import pytest

SPEC = """\
table: t.events
catalog: lakesort
owner: {name: Test Team, email: test@example.com}
sort: {keys: [{column: d}, {column: k}]}
target_file_size: 1MiB
small_file_size: 512KiB
"""


@pytest.fixture
def registry(tmp_path, monkeypatch):
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "events.yaml").write_text(SPEC)
    monkeypatch.setenv("LAKESORT_TABLES_DIR", str(tables))
    monkeypatch.setenv("LAKESORT_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setenv("LAKESORT_REPORT_DIR", str(tmp_path / "reports"))
    return tables


@pytest.fixture
def events(iceberg_catalog, registry):
    """t.events, partitioned by month of `d`, 1995-01-15..1995-04-15, in three appends (small files)."""
    import pyarrow as pa
    from pyiceberg.transforms import MonthTransform

    iceberg_catalog.create_namespace("t")
    days = [dt.date(1995, 1, 15) + dt.timedelta(days=i) for i in range(91)]
    data = pa.table({"d": pa.array(days, pa.date32()), "k": pa.array(range(91), pa.int64()),
                     "v": pa.array([f"v{i}" for i in range(91)])})
    table = iceberg_catalog.create_table("t.events", schema=data.schema)
    with table.update_spec() as spec:
        spec.add_field("d", MonthTransform(), "d_month")
    for part in (data.slice(0, 30), data.slice(30, 30), data.slice(60)):
        table.append(part.cast(table.schema().as_arrow()))
    return table


def test_registered_tables_reads_the_registry(registry):
    assert common.registered_tables() == ["t.events"]
    assert common.tables_dir() == registry
    (registry / "broken.yaml").write_text("table: [unclosed\n")  # parse time: skipped, never fatal
    assert common.registered_tables() == ["t.events"]


def test_tables_dir_defaults_beside_the_dag_files(monkeypatch, tmp_path):
    monkeypatch.delenv("LAKESORT_TABLES_DIR", raising=False)
    monkeypatch.chdir(tmp_path)  # whatever the working directory
    assert common.tables_dir() == common.DAGS_DIR / "tables"
    assert "demo.lineitem" in common.registered_tables()


def test_check_request(registry):
    (item,) = common.check_request({"table": "t.events", "partitions": ["d_month=1995-02"], "force": True})
    assert item == {"table": "t.events", "trigger": "backfill", "partitions": ["d_month=1995-02"], "from": None,
                    "to": None, "force": True, "dry_run": False}
    (item,) = common.check_request({"table": "t.events", "from": "1995-02-01", "to": "1995-02-28", "dry_run": True})
    assert (item["partitions"], item["from"], item["to"], item["dry_run"]) == (None, "1995-02-01", "1995-02-28", True)
    for bad, message in (
        ({"table": "t.nope"}, "not registered"),
        ({"table": "t.events", "partitions": ["d_month=1995-02"], "from": "1995-02-01", "to": "1995-02-02"}, "either"),
        ({"table": "t.events", "from": "1995-02-01"}, "both"),
        ({"table": "t.events", "from": "1995-03-01", "to": "1995-02-01"}, "after"),
    ):
        with pytest.raises(ValueError, match=message):
            common.check_request(bad)


def test_date_range_to_partitions(events):
    spec = common.find_spec("t.events")
    assert common.partitions_for_dates(spec, "1995-01-31", "1995-03-01") == [
        "d_month=1995-01", "d_month=1995-02", "d_month=1995-03"]
    assert common.partitions_for_dates(spec, "1995-02-10", "1995-02-10") == ["d_month=1995-02"]
    assert common.partitions_for_dates(spec, "1994-01-01", "1994-12-31") == []  # no rows then
    with events.update_spec() as update:  # two partition fields: the range cannot be mapped
        update.add_identity("k")
    with pytest.raises(ValueError, match="give `partitions` instead"):
        common.partitions_for_dates(spec, "1995-01-01", "1995-01-31")


def _owner(run_id: str, dag_id: str = "lakesort_nightly", ago: dt.timedelta = dt.timedelta()) -> dict[str, str]:
    when = dt.datetime.now(dt.UTC) - ago
    return {"dag_id": dag_id, "run_id": run_id, "host": "h", "acquired_at": when.isoformat(timespec="seconds")}


def test_lease(registry, tmp_path):
    nightly, backfill = _owner("n1"), _owner("b1", "lakesort_backfill")
    common.acquire_lease("t.events", nightly)
    path = tmp_path / "work" / "t.events" / "lease.json"
    assert json.loads(path.read_text())["run_id"] == "n1"
    with pytest.raises(common.TableBusy, match="lakesort_nightly run n1 is working on this table"):
        common.acquire_lease("t.events", backfill)
    common.acquire_lease("t.events", nightly)  # the same run again (a retried task)
    common.release_lease("t.events", backfill)  # not the holder: nothing happens
    assert path.exists()
    common.release_lease("t.events", nightly)
    assert not path.exists()

    common.acquire_lease("t.events", _owner("old", ago=common.LEASE_TTL + dt.timedelta(minutes=5)))
    common.acquire_lease("t.events", backfill)  # a dead run's lease is broken
    assert json.loads(path.read_text())["run_id"] == "b1"
    common.acquire_lease("other.table", backfill)
    assert common.sweep_leases(backfill) == 2 and not list((tmp_path / "work").glob("*/lease.json"))


def test_failed_spark_job_abandons_the_run(events, iceberg_catalog, tmp_path):
    """`verify` finds a job without a manifest: staged files removed, the run recorded as failed."""
    from airflow.sdk.exceptions import AirflowFailException

    from layout.compaction import steps as pipeline
    from layout.compaction.commit import staging_root
    from layout.metrics.measure import read_runs

    context = {"dag": type("Dag", (), {"dag_id": "lakesort_nightly"})(), "run_id": "r1"}
    run = common.prepare_table({"table": "t.events", "trigger": "nightly"}, context)
    assert run["status"] == "planned" and run["jobs"] and context["lakesort_table"] == "t.events"
    assert run["py_files"].endswith("layout.zip")
    assert (tmp_path / "work" / "t.events" / "lease.json").exists()
    prepared = pipeline.PreparedRun.load(run["work_dir"])
    (kwargs,) = common.spark_job_kwargs([run])
    assert kwargs["application_args"] == pipeline.job_arguments(prepared, prepared.jobs[0])
    assert kwargs["name"] == f"lakesort-compact t.events {prepared.run_id} job 0"
    assert kwargs["conf"]["spark.sql.session.timeZone"] == "UTC" and kwargs["py_files"] == run["py_files"]

    # What a Spark job that died half-way leaves: a staged file, no manifest.
    orphan = Path(staging_root(events).removeprefix("file://")) / prepared.run_id / "lakesort_group=0" / "part-0.parquet"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"half")
    with pytest.raises(AirflowFailException, match=r"Spark job\(s\) \[0\] failed: run abandoned"):
        common.verify_run(run, context)
    assert not orphan.exists()
    assert not (tmp_path / "work" / "t.events" / "lease.json").exists()
    (record,) = read_runs(iceberg_catalog, "t.events").to_pylist()
    assert record["status"] == "failed" and record["error"].startswith("spark: job(s) 0 failed")


def test_the_dags_submit_command(events, monkeypatch):
    """What the nightly DAG's `compact` task runs, read from the DAG itself: the DagBag's SparkSubmitOperator,
    unmapped with what the DAG's own `spark_jobs` task returns for a planned run of t.events, and the
    spark-submit command its hook builds: our job script, the run's plan, manifest and groups, its name, the
    layout zip and the Spark conf."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from layout.compaction.planner import RewritePlan

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    bag = DagBag(dag_folder=common.DAGS_DIR)
    assert bag.import_errors == {}
    dag = bag.dags["lakesort_nightly"]
    compact, spark_jobs = dag.get_task("compact"), dag.get_task("spark_jobs")
    assert compact.operator_class is SparkSubmitOperator
    # The mapped kwargs are exactly the `spark_jobs` task's return value, one dict per Spark application.
    assert compact.expand_input.value.operator is spark_jobs and compact.expand_input.value.key == "return_value"

    run = common.prepare_table({"table": "t.events", "trigger": "nightly"}, {"dag": dag, "run_id": "r1"})
    assert run["status"] == "planned"
    (kwargs,) = spark_jobs.python_callable([run])
    task = compact.unmap(kwargs)
    assert isinstance(task, SparkSubmitOperator) and task.task_id == "compact"
    assert (task._conn_id, task.pool, task.retries) == ("spark_default", "lakesort", 2)

    application = Path(task.application)
    assert application.is_file() and application.parts[-2:] == ("jobs", "compact.py")
    assert application.resolve() == (common.DAGS_DIR.parent / "jobs" / "compact.py").resolve()
    args = dict(zip(task.application_args[::2], task.application_args[1::2], strict=True))
    assert list(args) == ["--plan", "--manifest", "--groups"]
    plan = RewritePlan.from_json(Path(args["--plan"]).read_text())
    assert plan.table == "t.events" and plan.groups
    assert args["--groups"] == ",".join(str(g.group_id) for g in plan.groups)
    assert Path(args["--manifest"]).parent == Path(args["--plan"]).parent == Path(run["work_dir"])
    assert not Path(args["--manifest"]).exists(), "the job writes the manifest"
    assert task.name == f"lakesort-compact t.events {plan.run_id} job 0"
    assert task.conf["spark.sql.session.timeZone"] == "UTC"
    assert task.py_files == run["py_files"] and Path(task.py_files).name == "layout.zip"
    assert Path(task.py_files).is_file()
    python = task.env_vars["PYSPARK_PYTHON"]
    assert python == task.env_vars["PYSPARK_DRIVER_PYTHON"] and Path(python).exists()

    hook = task._get_hook()
    cmd = hook._build_spark_submit_command(task.application)
    assert hook._env == task.env_vars  # local and client mode: the spark-submit process's environment
    assert cmd[:3] == ["spark-submit", "--master", "local[2]"]
    assert cmd[cmd.index("--name") + 1] == task.name
    assert cmd[cmd.index("--py-files") + 1] == task.py_files
    assert "spark.sql.session.timeZone=UTC" in cmd
    assert cmd[-7:] == [task.application, *task.application_args]
