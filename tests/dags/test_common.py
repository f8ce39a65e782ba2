"""The DAGs' wiring (dags/lakesort_common.py) without Airflow running: the registry and its default, the
table's spec resolved by the first task and carried by the others, the task bodies' Airflow side (a busy
table skips a nightly and fails a backfill; a failed Spark job fails `verify`, a spec edited during the run
fails `commit`, without retries), and the spark-submit command the DAG's `compact` task runs. What the
steps do is tested in tests/compaction/pipeline/."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import lakesort_common as common
import pytest

from layout.compaction.pipeline import runs
from layout.compaction.pipeline.submit import describe_job
from layout.registered import table_names
from layout.upkeep.lease import LeaseOwner, acquire_lease, read_lease, release_lease


@contextlib.contextmanager
def task_context(dag_id: str = "lakesort_nightly", run_id: str = "r1"):
    """What Airflow gives a running task, as far as the task bodies read it."""
    from airflow.sdk.execution_time.context import set_current_context

    context = {"dag": type("Dag", (), {"dag_id": dag_id})(), "run_id": run_id, "params": {}}
    with set_current_context(context):
        yield context


def test_the_registry_is_read_at_parse_time(registry):
    """The backfill offers the registry's tables, their names only (`layout.registered`)."""
    assert common.tables_dir() == registry
    assert table_names(common.tables_dir()) == ["t.events"]
    (registry / "broken.yaml").write_text("table: [unclosed\n")  # parse time: skipped, never fatal
    assert table_names(common.tables_dir()) == ["t.events"]


def test_tables_dir_defaults_beside_the_dag_files(monkeypatch, tmp_path):
    """Whatever the working directory, for the DAG files and for `layout` inside the tasks alike."""
    from layout.registry import find_spec
    from layout.settings import settings

    monkeypatch.delenv("LAKESORT_TABLES_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert common.tables_dir() == common.DAGS_DIR / "tables" == settings().tables_dir
    assert "demo.lineitem" in table_names(common.tables_dir())
    assert find_spec("demo.lineitem").table == "demo.lineitem"


def test_the_nightly_resolves_each_spec_once_in_its_first_task(events, registry, monkeypatch):
    """`list_tables` reads the registry once and each request carries its table's spec; the tasks after it
    never look it up (here, a lookup fails them). A spec that does not load rides without one: its own
    `prepare` fails with the spec's error, naming the file."""
    from airflow.dag_processing.dagbag import DagBag

    from layout.compaction.pipeline.config import RunConfig
    from layout.errors import ConfigError

    (registry / "broken.yaml").write_text("table: t.broken\nowner: {name: Team}\ntarget_file_size: lots\n")
    list_tables = DagBag(dag_folder=common.DAGS_DIR).dags["lakesort_nightly"].get_task("list_tables")
    with task_context():
        events_item, broken_item = sorted(list_tables.python_callable(),
                                          key=lambda i: i["table"] != "t.events")
    assert json.loads(json.dumps(events_item)) == events_item
    config = runs.TableRequest.model_validate(events_item).config
    assert isinstance(config, RunConfig) and config.source == str(registry / "events.yaml")
    assert (broken_item["table"], broken_item["config"]) == ("t.broken", None)

    def no_lookup(table, *args):
        raise AssertionError(f"{table}'s spec was looked up again")

    with monkeypatch.context() as mp:
        mp.setattr(runs, "find_spec", no_lookup)
        with task_context() as context:
            planned = runs.PlannedTable.model_validate(common.prepare.function(events_item))
            assert planned.prepared().config == config.resolved(events)  # with the table's write properties
            assert common.maintain.function(events_item)["status"] == "done"  # the run's lease, taken over
            assert context["lakesort_table"] == "t.events"
    with task_context(), pytest.raises(ConfigError, match=r"broken.yaml: target_file_size"):
        common.prepare.function(broken_item)


def test_a_spec_edited_during_the_run_fails_commit_without_retries(events, registry, tmp_path):
    """prepare, then the table's spec file changes: the commit task re-reads it and fails at once (a retry
    cannot help), naming the file; the lease is released, the table unchanged."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.exceptions import AirflowFailException

    commit = DagBag(dag_folder=common.DAGS_DIR).dags["lakesort_nightly"].get_task("table.commit")
    with task_context():
        planned = runs.PlannedTable.model_validate(
            common.prepare.function({"table": "t.events", "trigger": "nightly"})
        )
    spec_file = registry / "events.yaml"
    spec_file.write_text(spec_file.read_text().replace("sort: {keys: [{column: d}, {column: k}]}",
                                                       "sort: {keys: [{column: k}]}"))
    verified = runs.VerifiedRun(table="t.events", owner=planned.owner, run_id=planned.run_id,
                                work_dir=planned.work_dir, verification="passed", warnings=0)
    snapshot = events.current_snapshot().snapshot_id
    with task_context(), pytest.raises(AirflowFailException,
                                       match=rf"{spec_file} changed since run {planned.run_id} was planned "
                                             rf"\(spec hash"):
        commit.python_callable(verified.model_dump(mode="json"))
    assert read_lease("t.events") is None and events.refresh().current_snapshot().snapshot_id == snapshot


def test_a_busy_table_skips_a_nightly_and_fails_a_backfill(events, tmp_path):
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    holder = LeaseOwner.cli()
    acquire_lease("t.events", holder)
    with task_context() as context, pytest.raises(AirflowSkipException,
                                                  match=r"is working on this table.*skipped"):
        common.prepare.function({"table": "t.events", "trigger": "nightly"})
    assert context["lakesort_table"] == "t.events"  # the map index's label in the UI
    with task_context("lakesort_backfill"), pytest.raises(AirflowFailException, match="trigger again when"):
        common.prepare.function({"table": "t.events", "trigger": "backfill"})
    assert read_lease("t.events").same_run(holder)


def test_prepare_fails_without_retries_on_a_spark_the_job_does_not_run_on(events, tmp_path, monkeypatch):
    """SparkSubmitOperator runs the `spark-submit` on PATH, which runs $SPARK_HOME's Spark: here a 3.4."""
    from airflow.sdk.exceptions import AirflowFailException

    home = tmp_path / "spark-3.4"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "spark-submit").write_text("#!/bin/sh\nexit 1\n")
    (home / "bin" / "spark-submit").chmod(0o755)
    (home / "RELEASE").write_text("Spark 3.4.1 built for Hadoop 3.3.4\n")
    monkeypatch.setenv("SPARK_HOME", str(home))
    monkeypatch.setenv("PATH", str(home / "bin"))
    with task_context(), pytest.raises(AirflowFailException, match=r"Spark 3\.4\.1 .*3\.5, 4\.0, 4\.1, 4\.2"):
        common.prepare.function({"table": "t.events", "trigger": "nightly"})
    assert read_lease("t.events") is None


def test_the_tasks_pass_json_and_a_failed_spark_job_fails_verify(events, tmp_path):
    """prepare -> planned -> spark_jobs -> table.verify through their JSON payloads; the Spark job left no
    manifest, so `verify` abandons the run, releases the lease and fails without retries."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.exceptions import AirflowFailException

    verify = DagBag(dag_folder=common.DAGS_DIR).dags["lakesort_nightly"].get_task("table.verify")
    with task_context() as context:
        payload = common.prepare.function({"table": "t.events", "trigger": "nightly"})
        assert json.loads(json.dumps(payload)) == payload
        (planned,) = common.planned.function([payload, None])  # None: a table whose prepare failed
        assert runs.PlannedTable.model_validate(planned).status == "planned"
        assert read_lease("t.events").same_run(LeaseOwner.dag("lakesort_nightly", "r1"))
        (kwargs,) = common.spark_jobs.function([planned])
        assert (kwargs["name"].startswith("lakesort-compact t.events ")
                and kwargs["py_files"].endswith("layout.zip"))
        with pytest.raises(AirflowFailException, match=r"Spark job\(s\) \[0\] failed: run abandoned"):
            verify.python_callable(planned)
        assert context["lakesort_table"] == "t.events"
        assert not (tmp_path / "work" / "t.events" / "lease.json").exists()


def test_the_maintain_task_returns_json_and_skips_a_busy_table(events, tmp_path):
    """The nightly `maintain` task: the table's maintenance as a JSON payload, under this run's lease (taken
    over if a failed task of the run left it held); a table another run holds is skipped, untouched."""
    from airflow.sdk.exceptions import AirflowSkipException

    from layout.metrics.maintenance import read_maintenance

    request = {"table": "t.events", "trigger": "nightly"}
    # as a failed compaction task leaves it
    acquire_lease("t.events", LeaseOwner.dag("lakesort_nightly", "r1"))
    with task_context() as context:
        payload = common.maintain.function(request)
    assert json.loads(json.dumps(payload)) == payload and context["lakesort_table"] == "t.events"
    assert (payload["status"], payload["run_id"], payload["snapshots_expired"]) == ("done", "r1", [])
    # nothing to delete
    assert payload["files_before"] > 0 and payload["files_after"] == payload["files_before"]
    catalog = events.catalog
    (row,) = read_maintenance(catalog, "t.events").to_pylist()
    assert (row["run_id"], row["status"], row["trigger"]) == ("r1", "done", "nightly")
    release_lease("t.events", LeaseOwner.dag("lakesort_nightly", "r1"))
    holder = LeaseOwner.cli()
    acquire_lease("t.events", holder)
    with task_context(run_id="r2"), pytest.raises(AirflowSkipException,
                                                  match=r"is working on this table.*skipped"):
        common.maintain.function(request)
    assert read_lease("t.events").same_run(holder)
    assert [r["run_id"] for r in read_maintenance(catalog, "t.events").to_pylist()] == ["r1"]


def test_the_report_task_sweeps_the_runs_leases(registry, tmp_path):
    """A table whose tasks stopped early (upstream_failed) released nothing: the report task does."""
    mine, other = LeaseOwner.dag("lakesort_backfill", "r1"), LeaseOwner.dag("lakesort_nightly", "n1")
    acquire_lease("t.events", mine)
    acquire_lease("t.other", other)
    with task_context("lakesort_backfill") as context:
        context["params"] = {"dry_run": True}  # a dry run leaves the report as it was
        assert common.report.function() is None
    assert read_lease("t.events") is None and read_lease("t.other").same_run(other)


def test_the_dags_submit_command(events, monkeypatch):
    """What the nightly DAG's `compact` task runs, read from the DAG itself: the DagBag's SparkSubmitOperator,
    unmapped with what the DAG's own `spark_jobs` task returns for a planned run of t.events, and the
    spark-submit command its hook builds: our job script, the run's plan, manifest and groups, its name, the
    layout zip and the Spark conf; the same command `lakesort compact` runs (one description)."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from layout.compaction.planning.planner import RewritePlan

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    bag = DagBag(dag_folder=common.DAGS_DIR)
    assert bag.import_errors == {}
    dag = bag.dags["lakesort_nightly"]
    compact, spark_jobs = dag.get_task("compact"), dag.get_task("spark_jobs")
    assert compact.operator_class is SparkSubmitOperator
    # The mapped kwargs are exactly the `spark_jobs` task's return value, one dict per Spark application.
    assert (compact.expand_input.value.operator is spark_jobs
            and compact.expand_input.value.key == "return_value")

    run = runs.prepare_table(runs.TableRequest(table="t.events", trigger="nightly"),
                             owner=LeaseOwner.dag("lakesort_nightly", "r1"))
    assert run.status == "planned"
    (kwargs,) = spark_jobs.python_callable([run.model_dump(mode="json")])
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
    assert Path(args["--manifest"]).parent == Path(args["--plan"]).parent == Path(run.work_dir)
    assert not Path(args["--manifest"]).exists(), "the job writes the manifest"
    assert task.name == f"lakesort-compact t.events {plan.run_id} job 0"
    assert task.conf["spark.sql.session.timeZone"] == "UTC"
    assert Path(task.py_files) == Path(run.work_dir) / "layout.zip" and Path(task.py_files).is_file()
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
    # `lakesort compact` (layout.compaction.pipeline.submit.submit) runs this very command for the same job.
    job = run.prepared().jobs[0]
    same = describe_job(plan_path=args["--plan"], manifest_path=job.manifest_path, groups=job.group_ids,
                        name=task.name, work_dir=run.work_dir)
    assert same.command(binary="spark-submit", master="local[2]") == cmd


def test_the_dag_files_stay_wiring():
    """The DAG files only wire the pipeline's steps into tasks (the logic lives in layout, tested without
    Airflow): the three DAGs and their shared module stay within 300 lines in all."""
    files = [common.DAGS_DIR / f"{name}.py" for name in
             ("lakesort_nightly", "lakesort_backfill", "lakesort_report", "lakesort_common")]
    lines = {f.name: len(f.read_text().splitlines()) for f in files}
    assert sum(lines.values()) <= 300, f"{sum(lines.values())} lines in the DAG files: {lines}"
