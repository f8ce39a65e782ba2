"""The DAG files parse as the DAG processor parses them: no import errors, the expected DAGs, schedules,
params and task structure; fast, and without importing pyspark, pyarrow, pyiceberg or layout."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from dag_harness import DAGS, airflow_env

EXPECTED = {"lakesort_nightly", "lakesort_backfill", "lakesort_report"}
COMPACTION_TASKS = {"prepare", "planned", "spark_jobs", "compact", "table.verify", "table.commit",
                    "table.measure", "report", "check_tables"}


@pytest.fixture(scope="module")
def dagbag(tmp_path_factory):
    import os

    from airflow.dag_processing.dagbag import BundleDagBag

    # The registry as shipped (dags/tables), whatever the developer's environment says.
    saved = os.environ.pop("LAKESORT_TABLES_DIR", None)
    try:
        bag = BundleDagBag(dag_folder=DAGS, bundle_path=DAGS, known_pools={"default_pool", "lakesort"})
    finally:
        if saved is not None:
            os.environ["LAKESORT_TABLES_DIR"] = saved
    return bag


def test_no_import_errors_and_expected_dags(dagbag):
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == EXPECTED
    # lakesort_common.py is a helper (listed in .airflowignore), not a DAG file.
    assert {Path(s.file).name for s in dagbag.dagbag_stats} == {f"{d}.py" for d in EXPECTED}


def test_parse_time_in_process(dagbag):
    seconds = sum(s.duration.total_seconds() for s in dagbag.dagbag_stats)
    assert seconds < 2, f"parsing the DAG files took {seconds:.2f}s"


def test_schedules_and_run_limits(dagbag):
    from airflow.sdk import CronTriggerTimetable
    from airflow.sdk.definitions.timetables.simple import NullTimetable

    nightly = dagbag.dags["lakesort_nightly"]
    assert isinstance(nightly.timetable, CronTriggerTimetable)
    assert nightly.timetable.expression == "0 2 * * *" and str(nightly.timetable.timezone) == "UTC"
    for dag_id in EXPECTED:
        dag = dagbag.dags[dag_id]
        assert dag.max_active_runs == 1 and not dag.catchup and "lakesort" in dag.tags
    for dag_id in ("lakesort_backfill", "lakesort_report"):  # manual only
        assert isinstance(dagbag.dags[dag_id].timetable, NullTimetable)


def test_backfill_params_schema(dagbag):
    from airflow.sdk.exceptions import ParamValidationError

    params = dagbag.dags["lakesort_backfill"].params
    assert set(params.keys()) == {"table", "partitions", "from", "to", "force", "dry_run"}
    schema = {k: params.get_param(k).schema for k in params}
    assert schema["table"]["type"] == "string" and schema["table"]["enum"] == ["demo.lineitem"]
    assert schema["partitions"]["type"] == "array" and schema["partitions"]["items"]["type"] == "string"
    assert schema["from"]["format"] == schema["to"]["format"] == "date"
    assert schema["force"]["type"] == schema["dry_run"]["type"] == "boolean"
    assert params.dump() == {"table": "demo.lineitem", "partitions": [], "from": None, "to": None,
                             "force": False, "dry_run": False}

    def resolved(conf):  # what triggering with --conf does: the params updated, then validated
        merged = copy.deepcopy(params)
        merged.update(conf)
        return merged.validate()

    assert resolved({"partitions": ["l_shipdate_month=1995-03"], "force": True})["force"] is True
    for bad in ({"table": "demo.nope"}, {"partitions": "l_shipdate_month=1995-03"}, {"force": "yes"},
                {"from": "03/01/1995"}, {"partitions": ["a=1", "a=1"]}):
        with pytest.raises(ParamValidationError):
            resolved(bad)


def _task_ids(dag) -> set[str]:
    return {t.task_id for t in dag.tasks}


def test_compaction_task_structure(dagbag):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from airflow.sdk import AssetAlias
    from airflow.sdk.definitions.mappedoperator import MappedOperator
    from airflow.sdk.definitions.taskgroup import MappedTaskGroup

    for dag_id, first in (("lakesort_nightly", "list_tables"), ("lakesort_backfill", "check_request")):
        dag = dagbag.dags[dag_id]
        assert _task_ids(dag) == COMPACTION_TASKS | {first}
        task = dag.get_task
        assert task("prepare").upstream_task_ids == {first}
        assert isinstance(task("prepare"), MappedOperator)
        assert task("planned").trigger_rule == "all_done"  # collects the tables whose prepare succeeded
        compact = task("compact")
        assert isinstance(compact, MappedOperator) and compact.operator_class is SparkSubmitOperator
        assert compact.upstream_task_ids == {"spark_jobs"}
        kwargs = compact.partial_kwargs
        assert kwargs["conn_id"] == "spark_default" and compact.pool == "lakesort"
        assert compact.retries == 2 and compact.retry_exponential_backoff == 2.0
        assert compact.max_active_tis_per_dagrun == 2
        # Per table: a mapped task group, each step depending on its own table's step before.
        verify, commit, measure = task("table.verify"), task("table.commit"), task("table.measure")
        assert isinstance(verify.task_group, MappedTaskGroup)
        assert verify.trigger_rule == "all_done"  # also after a failed Spark job: it abandons the run
        assert {"compact", "planned"} <= verify.upstream_task_ids
        assert commit.upstream_task_ids == {"table.verify"} and measure.upstream_task_ids == {"table.commit"}
        assert [o for o in commit.outlets] == [AssetAlias("lakesort-compacted")]
        assert task("report").trigger_rule == "all_done" and "table.measure" in task("report").upstream_task_ids
        watcher = task("check_tables")
        assert watcher.trigger_rule == "one_failed" and watcher.upstream_task_ids == _task_ids(dag) - {"check_tables"}


def test_report_dag_structure(dagbag):
    dag = dagbag.dags["lakesort_report"]
    assert _task_ids(dag) == {"list_tables", "measure", "report", "check_tables"}
    assert dag.get_task("measure").upstream_task_ids == {"list_tables"}
    assert dag.get_task("report").upstream_task_ids == {"measure"}
    assert dag.get_task("report").trigger_rule == "all_done"


def test_fresh_parse_is_fast_light_and_configurable(tmp_path):
    """In a new interpreter, as the DAG processor: under 2 s for all DAGs, nothing heavy imported, and the
    cron and connection taken from the environment."""
    script = textwrap.dedent(f"""
        import json, sys, time
        from pathlib import Path
        from airflow.dag_processing.dagbag import BundleDagBag
        dags = Path({str(DAGS)!r})
        started = time.perf_counter()
        bag = BundleDagBag(dag_folder=dags, bundle_path=dags)
        seconds = time.perf_counter() - started
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "pyarrow", "pyiceberg", "layout",
                                                                   "pandas", "great_expectations"))
        nightly = bag.dags["lakesort_nightly"]
        print(json.dumps({{"seconds": seconds, "errors": {{str(k): v for k, v in bag.import_errors.items()}},
                          "heavy": heavy, "cron": nightly.timetable.expression,
                          "conn_id": nightly.get_task("compact").partial_kwargs["conn_id"],
                          "pool": nightly.get_task("compact").pool}}))
    """)
    env = airflow_env(tmp_path / "airflow")
    env.update(LAKESORT_NIGHTLY_CRON="30 3 * * *", LAKESORT_SPARK_CONN_ID="spark_yarn")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == {}
    assert result["heavy"] == []
    assert result["seconds"] < 2, f"parsing all DAGs took {result['seconds']:.2f}s"
    assert (result["cron"], result["conn_id"], result["pool"]) == ("30 3 * * *", "spark_yarn", "lakesort")
