"""The DAG files parse as the DAG processor parses them: no import errors, the expected DAGs, schedules,
params and task structure; cheaply: in a fresh interpreter, parsing them imports no heavy module (pyspark,
pyarrow, pyiceberg, great_expectations, ...), of `layout` only the light modules that hold the settings,
and no package beyond an allowed few. How long parsing takes is measured by
tests/benchmarks/bench_dag_parse.py, not asserted here."""

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
# What the tasks import when they run, never the DAG files when they are parsed (lakesort_common imports
# them inside its task functions): none may be in sys.modules after a parse, whoever imported it.
HEAVY = ("pyspark", "pyarrow", "pyiceberg", "great_expectations", "pandas", "numpy", "polars",
         "duckdb", "datafusion", "py4j", "sqlglot", "selenium")
# The DAG files read their settings (cron, pool, retries, connection) when parsed: exactly these modules of
# `layout` may be imported then; they import only the standard library and pydantic (see LIGHT_DEPENDENCIES).
# Of the registry, only the tables' names (`layout.registered`, PyYAML alone); reading and validating the
# specs (`layout.registry`, with `layout.spec`) only inside the tasks.
LAYOUT_AT_PARSE = {"layout", "layout.settings", "layout.errors", "layout.models", "layout.sizes",
                   "layout.registered"}
LIGHT_DEPENDENCIES = {"pydantic", "pydantic_core", "annotated_types", "typing_extensions",
                      "typing_inspection"}
# The only top-level packages, besides the standard library, that parsing the DAG files may add to what
# Airflow's own DAG parsing imports (a parse of an empty folder), besides the modules of dags/ themselves:
# what the Spark provider's SparkSubmitOperator and the standard provider behind @task import (requests...).
# With the `lineage` extra, the Spark provider's SparkSubmitOperator imports the OpenLineage provider's Spark
# helpers, and with them the openlineage client (and what it and the listener import): the provider's doing.
ALLOWED_AT_PARSE = {"airflow", "requests", "urllib3", "charset_normalizer", "packaging", "socks", "layout",
                    "openlineage", "httpx2", "setproctitle"}


@pytest.fixture(scope="module")
def dagbag(tmp_path_factory):
    from airflow.dag_processing.dagbag import BundleDagBag

    # The registry as shipped (dags/tables), whatever the developer's environment says; the environment as
    # it was afterwards (parsing sets LAKESORT_TABLES_DIR's default).
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("LAKESORT_TABLES_DIR", raising=False)
        return BundleDagBag(dag_folder=DAGS, bundle_path=DAGS, known_pools={"default_pool", "lakesort"})


def test_no_import_errors_and_expected_dags(dagbag):
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == EXPECTED
    # lakesort_common.py is a helper (listed in .airflowignore), not a DAG file.
    assert {Path(s.file).name for s in dagbag.dagbag_stats} == {f"{d}.py" for d in EXPECTED}


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
    # The registry's tables offered (their names only: parsing validates no spec); others may be typed in.
    assert schema["table"]["type"] == "string" and schema["table"]["examples"] == ["demo.lineitem"]
    assert schema["partitions"]["type"] == "array" and schema["partitions"]["items"]["type"] == "string"
    assert schema["from"]["format"] == schema["to"]["format"] == "date"
    assert schema["force"]["type"] == schema["dry_run"]["type"] == "boolean"
    assert params.dump() == {"table": "demo.lineitem", "partitions": [], "from": None, "to": None,
                             "force": False, "dry_run": False}

    def resolved(conf):  # what triggering with --conf does: the params updated, then validated
        merged = copy.deepcopy(params)
        merged.update(conf)
        return merged.validate()

    good = {"table": "demo.lineitem"}
    assert resolved({**good, "partitions": ["l_shipdate_month=1995-03"], "force": True})["force"] is True
    # A table without a spec file may be configured by its properties: its first task resolves it.
    assert resolved({"table": "sales.orders"})["table"] == "sales.orders"
    for bad in ({"table": "lineitem"}, {"table": "demo. lineitem"},
                {**good, "partitions": "l_shipdate_month=1995-03"}, {**good, "force": "yes"},
                {**good, "from": "03/01/1995"}, {**good, "partitions": ["a=1", "a=1"]}):
        with pytest.raises(ParamValidationError):
            resolved(bad)


def _task_ids(dag) -> set[str]:
    return {t.task_id for t in dag.tasks}


def test_compaction_task_structure(dagbag):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from airflow.sdk import AssetAlias
    from airflow.sdk.definitions.mappedoperator import MappedOperator
    from airflow.sdk.definitions.taskgroup import MappedTaskGroup

    for dag_id, first, extra in (("lakesort_nightly", "list_tables", {"maintain"}),
                                 ("lakesort_backfill", "check_request", set())):
        dag = dagbag.dags[dag_id]
        assert _task_ids(dag) == COMPACTION_TASKS | {first} | extra
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
        report = task("report")
        assert report.trigger_rule == "all_done"
        if extra:  # the nightly: every table's maintenance once all compactions are done, then the report
            maintain = task("maintain")
            assert isinstance(maintain, MappedOperator) and maintain.trigger_rule == "all_done"
            assert maintain.upstream_task_ids == {first, "table.measure"}
            assert report.upstream_task_ids == {"maintain"}
        else:
            assert "table.measure" in report.upstream_task_ids
        watcher = task("check_tables")
        assert (watcher.trigger_rule == "one_failed"
                and watcher.upstream_task_ids == _task_ids(dag) - {"check_tables"})


def test_report_dag_structure(dagbag):
    dag = dagbag.dags["lakesort_report"]
    assert _task_ids(dag) == {"list_tables", "measure", "report", "check_tables"}
    assert dag.get_task("measure").upstream_task_ids == {"list_tables"}
    assert dag.get_task("report").upstream_task_ids == {"measure"}
    assert dag.get_task("report").trigger_rule == "all_done"


def fresh_parse(tmp_path, env_extra: dict[str, str] | None = None) -> dict:
    """Parse dags/ in a new interpreter, as the DAG processor does, after a parse of an empty folder (which
    loads Airflow's own parsing machinery): the modules the DAG files added, and what they defined."""
    empty = tmp_path / "empty-dags"
    empty.mkdir()
    script = textwrap.dedent(f"""
        import json, os, sys
        from pathlib import Path
        from airflow.dag_processing.dagbag import BundleDagBag
        empty, dags = Path({str(empty)!r}), Path({str(DAGS)!r})
        assert BundleDagBag(dag_folder=empty, bundle_path=empty).dag_ids == []
        before = set(sys.modules)
        bag = BundleDagBag(dag_folder=dags, bundle_path=dags)
        nightly = bag.dags["lakesort_nightly"]
        print(json.dumps({{"errors": {{str(k): v for k, v in bag.import_errors.items()}},
                          "dag_ids": sorted(bag.dag_ids), "modules": sorted(sys.modules),
                          "added": sorted(set(sys.modules) - before),
                          "from_dags": {{n: Path(m.__file__).name for n, m in list(sys.modules.items())
                                        if getattr(m, "__file__", None) and Path(m.__file__).parent == dags}},
                          "cron": nightly.timetable.expression,
                          "conn_id": nightly.get_task("compact").partial_kwargs["conn_id"],
                          "pool": nightly.get_task("compact").pool,
                          "retries": nightly.get_task("compact").retries,
                          "tables_dir": os.environ.get("LAKESORT_TABLES_DIR"),
                          "tables": bag.dags["lakesort_backfill"].params.get_param("table").schema.get("examples")}}))
    """)  # noqa: E501 - a script, run as written
    env = {**airflow_env(tmp_path / "airflow"), **(env_extra or {})}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_fresh_parse_is_light_and_configurable(tmp_path):
    """In a new interpreter, as the DAG processor: nothing heavy imported, nothing beyond the allowed packages
    added to Airflow's own imports, the settings (cron, connection, pool, retries) taken from the environment
    through `layout.settings`, and the registry beside the DAG files (no LAKESORT_TABLES_DIR is set)."""
    result = fresh_parse(tmp_path, {"LAKESORT_NIGHTLY_CRON": "30 3 * * *",
                                    "LAKESORT_SPARK_CONN_ID": "spark_yarn", "LAKESORT_POOL": "lakesort_big",
                                    "LAKESORT_SPARK_RETRIES": "5"})
    assert result["errors"] == {}
    assert set(result["dag_ids"]) == EXPECTED
    heavy = sorted({m.split(".")[0] for m in result["modules"]} & set(HEAVY))
    assert heavy == [], f"parsing the DAG files imported {heavy}: import them inside the task functions"
    layout_modules = {m for m in result["modules"] if m == "layout" or m.startswith("layout.")}
    assert layout_modules == LAYOUT_AT_PARSE, (
        f"parsing the DAG files imported {sorted(layout_modules - LAYOUT_AT_PARSE)} of layout (only "
        f"{sorted(LAYOUT_AT_PARSE)} are light enough): import them inside the task functions")
    # What the light modules need is what Airflow's own parsing imports already: nothing new.
    assert not {m.split(".")[0] for m in result["added"]} & LIGHT_DEPENDENCIES
    # The modules of dags/: the three DAG files and their helper, all imported by this parse, not before it.
    from_dags = result["from_dags"]
    assert sorted(from_dags.values()) == sorted([f"{d}.py" for d in EXPECTED] + ["lakesort_common.py"])
    assert set(from_dags) <= set(result["added"])
    added = {m.split(".")[0] for m in result["added"]} - set(from_dags)
    unexpected = sorted(m for m in added - ALLOWED_AT_PARSE
                        if m not in sys.stdlib_module_names and not m.startswith("_"))
    assert unexpected == [], f"parsing the DAG files newly imports {unexpected}: import them inside the tasks"
    assert (result["cron"], result["conn_id"], result["pool"], result["retries"]) == (
        "30 3 * * *", "spark_yarn", "lakesort_big", 5)
    # The DAGs' default registry, applied as the variable's default so that the tasks' `layout` sees it too.
    assert result["tables_dir"] == str(DAGS / "tables")
    assert result["tables"] == ["demo.lineitem"]  # the names only: the tasks read and validate the specs
