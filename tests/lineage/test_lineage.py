"""`layout.lineage` without Spark: the guard (no extra or no configuration: nothing emitted, nothing said), an
emission failure that never fails the run, dataset namespaces without secrets, stable run ids, the Spark job's
parent confs (CLI) and the provider's injection (DAGs), and the DAG commit task's lineage."""

from __future__ import annotations

import json
import logging
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from layout import lineage
from layout.compaction.pipeline import submit
from layout.compaction.pipeline.runs import CommittedRun
from layout.upkeep.lease import LeaseOwner

DAGS = Path(__file__).resolve().parents[2] / "dags"


@pytest.fixture
def clean_env(tmp_path, monkeypatch):
    """No OpenLineage configuration anywhere (variables, ./openlineage.yml,
    ~/.openlineage), a fresh client."""
    import os

    for key in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    lineage._client.cache_clear()
    yield tmp_path
    lineage._client.cache_clear()


def file_transport(monkeypatch, path: Path) -> None:
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "file")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__LOG_FILE_PATH", str(path))
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__APPEND", "true")
    lineage._client.cache_clear()


def run(table="t.events"):
    return lineage.RunLineage(table=table, catalog=None, run_id="20260101T000000-abc")


def test_without_the_extra_nothing_is_emitted_or_said(clean_env, monkeypatch, caplog):
    """The guard: openlineage-python not importable (simulated) -> no client, no event, no warning."""
    file_transport(monkeypatch, clean_env / "events.jsonl")
    monkeypatch.setitem(sys.modules, "openlineage.client", None)  # `import openlineage.client` fails
    monkeypatch.setattr(lineage, "available", lambda: False)
    with caplog.at_level(logging.DEBUG, logger="layout.lineage"):
        events = run()
        events.start(read=lineage.Counts(rows=1))
        events.complete(written=lineage.Counts(rows=1))
        events.fail(RuntimeError("boom"))
    assert not (clean_env / "events.jsonl").exists()
    assert [r.levelname for r in caplog.records] == ["DEBUG"]  # one line, once per process


def test_without_configuration_nothing_is_emitted(clean_env, capsys, caplog):
    """The extra installed but no transport configured: the client would print to the console; lakesort sends
    nothing instead."""
    pytest.importorskip("openlineage.client")
    assert not lineage.configured()
    run().start()
    assert capsys.readouterr() == ("", "") and not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_configuration_the_standard_ways(clean_env, monkeypatch):
    pytest.importorskip("openlineage.client")
    (clean_env / "openlineage.yml").write_text("transport:\n  type: console\n")
    assert lineage.configured()  # ./openlineage.yml, the client's own lookup
    (clean_env / "openlineage.yml").unlink()
    monkeypatch.setenv("OPENLINEAGE_URL", "http://127.0.0.1:5000")
    assert lineage.configured()
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    assert not lineage.configured()


def test_an_emission_failure_is_a_warning(clean_env, monkeypatch, caplog):
    pytest.importorskip("openlineage.client")
    file_transport(monkeypatch, clean_env / "no-such-dir" / "deeper" / "events.jsonl")
    client = lineage._client()
    assert client is not None

    def broken(event):
        raise OSError("the lineage backend is down")

    monkeypatch.setattr(client, "emit", broken)
    with caplog.at_level(logging.WARNING, logger="layout.lineage"):
        run().complete(written=lineage.Counts(rows=3, bytes=10))
    assert "t.events: the OpenLineage COMPLETE event of run 20260101T000000-abc was not sent: the lineage " \
           "backend is down" in caplog.text


def test_a_failure_message_loses_credentials(clean_env, monkeypatch):
    pytest.importorskip("openlineage.client")
    path = clean_env / "events.jsonl"
    file_transport(monkeypatch, path)
    run().fail(RuntimeError("could not connect to postgresql://lakesort:s3cret@db:5432/iceberg: timeout"))
    (event,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert event["eventType"] == "FAIL"
    assert event["run"]["facets"]["errorMessage"]["message"] == (
        "could not connect to postgresql://db:5432/iceberg: timeout")


def test_run_ids_are_stable_uuids():
    one = lineage.run_uuid("20260101T000000-abc")
    assert one == lineage.run_uuid("20260101T000000-abc") != lineage.run_uuid("20260101T000000-abd")
    assert str(uuid.UUID(one)) == one


@pytest.mark.parametrize(("config", "namespace"), [
    ({"type": "sql", "uri": "postgresql+psycopg2://lakesort:s3cret@db.example:5432/iceberg?sslpassword=x",
      "warehouse": "s3://lake/warehouse/"}, "s3://lake/warehouse"),
    ({"type": "rest", "uri": "https://user:s3cret@catalog.example:8181/api/catalog?token=s3cret",
      "credential": "client:s3cret", "warehouse": "lakehouse"}, "https://catalog.example:8181/api/catalog"),
    ({"type": "hive", "uri": "thrift://metastore:9083"}, "thrift://metastore:9083"),
    ({"type": "sql", "uri": "postgresql://u:s3cret@db/iceberg"}, "postgresql://db/iceberg"),
    ({"type": "glue"}, "iceberg://prod"),
    ({"type": "sql", "uri": "sqlite:////x/catalog.db"}, "sqlite:////x/catalog.db"),
    ({"type": "sql", "uri": "sqlite:////x/catalog.db", "warehouse": "file:///x/warehouse/"}, "file:///x/warehouse"),
])
def test_dataset_namespaces_carry_no_secret(config, namespace, monkeypatch):
    pytest.importorskip("openlineage.client")
    monkeypatch.setattr(lineage, "_catalog_config", lambda catalog: ("prod", config))
    assert lineage.dataset_namespace("prod") == namespace
    inputs, outputs = lineage.datasets(table="sales.orders", catalog="prod", written=lineage.Counts(rows=5))
    from openlineage.client.serde import Serde

    text = Serde.to_json(inputs[0]) + Serde.to_json(outputs[0])
    assert "s3cret" not in text and "sslpassword" not in text and "token" not in text
    assert outputs[0].name == "sales.orders" and outputs[0].namespace == namespace


LISTENING = {"spark.extraListeners": f"com.example.Other, {lineage.SPARK_LISTENER}"}


def test_the_spark_job_is_parented_to_the_cli_run(monkeypatch):
    monkeypatch.delenv("LAKESORT_SPARK_CONF", raising=False)
    parent = run().parent
    assert submit.with_lineage_parent(None, parent) is None  # no listener: the conf as it was
    assert submit.with_lineage_parent({"a": "1"}, parent) == {"a": "1"}
    conf = submit.with_lineage_parent(LISTENING, parent)
    assert conf == {**LISTENING,
                    "spark.openlineage.parentJobNamespace": "lakesort",
                    "spark.openlineage.parentJobName": "compact.t.events",
                    "spark.openlineage.parentRunId": lineage.run_uuid("20260101T000000-abc"),
                    "spark.openlineage.rootParentJobNamespace": "lakesort",
                    "spark.openlineage.rootParentJobName": "compact.t.events",
                    "spark.openlineage.rootParentRunId": lineage.run_uuid("20260101T000000-abc")}
    # The listener in $LAKESORT_SPARK_CONF counts too; a parent named there is left alone.
    monkeypatch.setenv("LAKESORT_SPARK_CONF", json.dumps(LISTENING))
    assert submit.with_lineage_parent({}, parent)["spark.openlineage.parentJobName"] == "compact.t.events"
    monkeypatch.setenv("LAKESORT_SPARK_CONF", json.dumps({**LISTENING, "spark.openlineage.parentRunId": "x"}))
    assert submit.with_lineage_parent({}, parent) == {}


def test_the_dags_ask_the_provider_to_inject_the_task(tmp_path, monkeypatch):
    """SparkSubmitOperator's own injection (`openlineage_inject_parent_job_info`) when the job's conf runs the
    listener: the parent is the Airflow `compact` task."""
    monkeypatch.setattr(submit, "java_options", lambda: None)
    monkeypatch.setenv("LAKESORT_SHIP_LAYOUT", "installed")
    monkeypatch.delenv("LAKESORT_SPARK_CONF", raising=False)
    plain = submit.describe_job(plan_path="p", manifest_path="m", groups=None, name="n", work_dir=tmp_path)
    assert "openlineage_inject_parent_job_info" not in plain.operator_kwargs()
    monkeypatch.setenv("LAKESORT_SPARK_CONF", json.dumps(LISTENING))
    listening = submit.describe_job(plan_path="p", manifest_path="m", groups=None, name="n",
                                    work_dir=tmp_path)
    assert listening.operator_kwargs()["openlineage_inject_parent_job_info"] is True


def test_the_dag_commit_task_lineage(tmp_path, monkeypatch):
    """The DAGs' commit task (`_CommitTask`) gives the provider the table read and written, with what was
    rewritten (the rows read as planned, before deletes dropped some); before a result (a failed commit),
    nothing."""
    if "airflow" not in sys.modules:  # Airflow imported here must not touch ~/airflow
        monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
        monkeypatch.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    monkeypatch.setenv("LAKESORT_TABLES_DIR", str(DAGS / "tables"))  # what the DAG file sets when imported
    pytest.importorskip("airflow.providers.openlineage")
    monkeypatch.syspath_prepend(str(DAGS))
    from lakesort_common import _CommitTask

    monkeypatch.setattr(lineage, "_catalog_config", lambda catalog: (
        "lakesort", {"type": "sql", "uri": "sqlite:////x/catalog.db", "warehouse": "file:///x/warehouse"}))
    committed = CommittedRun(table="t.events", owner=LeaseOwner.dag("lakesort_nightly", "r"), catalog=None,
                             run_id="r1", work_dir="w", trigger="nightly", snapshot_id=7, partitions=("p",),
                             files_removed=12, files_added=3, rows=91, bytes_removed=5000, bytes_added=4000,
                             rows_read=96)
    task = SimpleNamespace(_committed=committed.model_dump(mode="json"))
    found = _CommitTask.get_openlineage_facets_on_complete(task, None)
    (source,), (target,) = found.inputs, found.outputs
    assert (
        (source.namespace, source.name)
        == (target.namespace, target.name)
        == ("file:///x/warehouse", "t.events")
    )
    stats = target.outputFacets["outputStatistics"]
    assert (stats.rowCount, stats.size, stats.fileCount) == (91, 4000, 3)
    read = source.inputFacets["inputStatistics"]
    assert (read.rowCount, read.size, read.fileCount) == (96, 5000, 12)
    # a payload from before rows_read: the rows written
    older = committed.model_copy(update={"rows_read": None})
    task = SimpleNamespace(_committed=older.model_dump(mode="json"))
    (source,) = _CommitTask.get_openlineage_facets_on_complete(task, None).inputs
    assert source.inputFacets["inputStatistics"].rowCount == 91
    empty = _CommitTask.get_openlineage_facets_on_complete(SimpleNamespace(), None)
    assert empty.inputs == [] and empty.outputs == []
