"""The nightly's budget in the DAG (dags/lakesort_common.py `planned`), through the DAG's own tasks without
Airflow running (as tests/dags/test_common.py): the nightly's `planned` is budgeted and the backfill's is not;
over two planned tables the more valuable one goes on to `spark_jobs` and the other is deferred (recorded
with why, its lease released); the report task's housekeeping reaches every configured catalog and its index
shows the deferral. The steps of the ranking: tests/compaction/test_budget*.py."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

import pyarrow as pa
import pytest
from test_common import task_context

from layout.metrics import store
from layout.metrics.runs import read_runs
from layout.upkeep.lease import LeaseOwner, read_lease

SMALL_SPEC = """\
table: t.small
catalog: lakesort
owner: {name: Test Team, email: test@example.com}
sort: {keys: [{column: k}]}
probes: [{name: low, where: "k < 10", weight: 4}]
"""


@pytest.fixture(scope="module")
def nightly():
    import lakesort_common as common
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=common.DAGS_DIR)
    assert bag.import_errors == {}
    return common, bag.dags


def test_only_the_nightly_is_budgeted(nightly):
    _, dags = nightly
    assert dags["lakesort_nightly"].get_task("planned").op_kwargs == {"budgeted": True}
    assert dags["lakesort_backfill"].get_task("planned").op_kwargs == {"budgeted": False}


def test_the_budget_admits_the_most_valuable_and_defers_the_rest(nightly, events, registry, iceberg_catalog,
                                                                 monkeypatch, caplog):
    common, dags = nightly
    (registry / "small.yaml").write_text(SMALL_SPEC)
    small = iceberg_catalog.create_table("t.small", schema=pa.schema([("k", pa.int64())]))
    for values in ([5, 3, 9], [8, 1, 2]):
        small.append(pa.table({"k": pa.array(values, pa.int64())}))
    # t.small's last run saved its probe 4 x 900 bytes for 1000 rewritten: 3.6 per byte, where t.events has
    # nothing on record (the fallback: 1 per byte, its inputs all unsorted).
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    zeros = {name: 0 for name, kind, required in store.RUNS_FIELDS if required and kind == "long"}
    store.upsert(iceberg_catalog, store.COMPACTION_RUNS, store.RUNS_FIELDS, store.RUNS_KEY, [
        {**zeros, "run_id": "r0", "table": "t.small", "status": "committed", "trigger": "nightly", "started_at": at,
         "duration_s": 1.0, "bytes_rewritten": 1000, "verification": "passed", "findings": "[]"}])
    metric = {name: 0 for name, kind, required in store.METRICS_FIELDS if required and kind in ("long", "double")}
    store.upsert(iceberg_catalog, store.PRUNING_METRICS, store.METRICS_FIELDS, store.METRICS_KEY, [
        {**metric, "run_id": "r0", "phase": phase, "table": "t.small", "measured_at": at, "probe": "low",
         "probe_kind": "owner", "predicate": "k < 10", "columns": "", "bytes_selected": selected}
        for phase, selected in (("before", 1000), ("after", 100))])

    nightly_dag = dags["lakesort_nightly"]
    with task_context() as context:
        items = nightly_dag.get_task("list_tables").python_callable()
        assert [i["table"] for i in items] == ["t.events", "t.small"]
        prepared = [common.prepare.function(item) for item in items]
        costs = {p["table"]: sum(j["input_bytes"] for j in p["jobs"]) for p in prepared}
        monkeypatch.setenv("LAKESORT_NIGHTLY_BUDGET_BYTES", str(costs["t.small"] + costs["t.events"] - 1))
        planned = nightly_dag.get_task("planned")
        with caplog.at_level(logging.INFO):
            admitted = planned.python_callable(prepared + [None], **planned.op_kwargs)  # None: a failed prepare
        assert [a["table"] for a in admitted] == ["t.small"]
        assert "#1 ran: t.small: benefit" in caplog.text and "#2 deferred (over budget): t.events" in caplog.text
        jobs = nightly_dag.get_task("spark_jobs").python_callable(admitted)
        assert {j["name"].split()[1] for j in jobs} == {"t.small"}
        owner = LeaseOwner.dag("lakesort_nightly", "r1")
        assert read_lease("t.small").same_run(owner) and read_lease("t.events") is None
        (row,) = [r for r in read_runs(iceberg_catalog, "t.events").to_pylist() if r["status"] == "deferred"]
        assert row["reason"].startswith("over budget: ranked #2 of 2") and "(fallback)" in row["reason"]
        assert row["spec_hash"] and '"sort.keys": {"kind": "spec"' in row["config_sources"]

        # The backfill's `planned` keeps every planned run, whatever the budget.
        backfill = dags["lakesort_backfill"].get_task("planned")
        monkeypatch.setenv("LAKESORT_NIGHTLY_BUDGET_BYTES", "1")
        assert [a["table"] for a in backfill.python_callable(admitted, **backfill.op_kwargs)] == ["t.small"]

        # The report task: housekeeping of lakesort's own tables in every configured catalog, and the index
        # with the deferral and why.
        with caplog.at_level(logging.INFO):
            index = common.report.function()
        assert "housekeeping: lakesort.compaction_runs" in caplog.text
        html = Path(index).read_text(encoding="utf-8")
        assert "over budget: ranked #2 of 2" in html and "deferred" in html
        assert context["params"] == {}
