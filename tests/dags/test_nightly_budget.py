"""The nightly's budget in the DAG (dags/lakesort_common.py `planned`), through the DAG's own tasks without
Airflow running (as tests/dags/test_common.py): the nightly's `planned` is budgeted and the backfill's is not;
over two planned tables the more valuable one goes on to `spark_jobs` whole and the other, which no longer
fits whole, trimmed to its most valuable partitions that fit: its saved run and plan hold only their groups,
its Spark jobs only those, and its other partitions are deferred (recorded with why, read back the next night
as one night deferred); the report task's housekeeping reaches every configured catalog and its index shows
the deferral. The steps of the ranking: tests/compaction/test_budget*.py."""

from __future__ import annotations

import datetime as dt
import logging
import time
from pathlib import Path

import pyarrow as pa
import pytest
from test_common import task_context

from layout.compaction.pipeline.nightly_budget import histories
from layout.compaction.pipeline.runs import PlannedTable
from layout.compaction.planning.benefit import nights_deferred
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


def test_the_budget_admits_the_most_valuable_and_trims_the_rest(nightly, events, registry, iceberg_catalog,
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
        {**zeros, "run_id": "r0", "table": "t.small", "status": "committed", "trigger": "nightly",
         "started_at": at, "duration_s": 1.0, "bytes_rewritten": 1000, "verification": "passed",
         "findings": "[]"}])
    metric = {name: 0 for name, kind, required in store.METRICS_FIELDS
              if required and kind in ("long", "double")}
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
        # t.events' months, each worth its bytes (all unsorted): the largest first, each while it fits in what
        # t.small leaves; with one byte short of both, the smallest waits.
        events_run = PlannedTable.model_validate(prepared[0]).prepared()
        months: dict[str, int] = {}
        for g in events_run.plan().groups:
            months[g.partition] = months.get(g.partition, 0) + g.bytes
        assert len(months) == 4
        kept, left = [], costs["t.events"] - 1
        for month in sorted(months, key=lambda m: (-months[m], m)):
            if months[month] <= left:
                kept.append(month)
                left -= months[month]
        waiting = sorted(set(months) - set(kept), key=lambda m: (-months[m], m))
        assert waiting
        monkeypatch.setenv("LAKESORT_NIGHTLY_BUDGET_BYTES", str(costs["t.small"] + costs["t.events"] - 1))
        planned = nightly_dag.get_task("planned")
        with caplog.at_level(logging.INFO):
            # None: a failed prepare
            admitted = planned.python_callable(prepared + [None], **planned.op_kwargs)
        assert [a["table"] for a in admitted] == ["t.small", "t.events"]
        assert "#1 ran: t.small: benefit" in caplog.text
        reason = f"over budget: partitions {', '.join(waiting)} deferred"
        assert (
            f"#2 ran {len(kept)} of 4 partition(s), {sum(months[m] for m in kept)} B ({reason}): t.events"
            in caplog.text
        )

        # The trimmed run, saved: its plan, its jobs and the payload `spark_jobs` reads hold
        # only the kept months.
        trimmed = PlannedTable.model_validate(admitted[1])
        run = trimmed.prepared()
        assert run.run_id == events_run.run_id and run.partitions == trimmed.partitions == tuple(sorted(kept))
        groups = {g.group_id: g.partition for g in run.plan().groups}
        assert set(groups.values()) == set(kept) and run.input_bytes == sum(months[m] for m in kept)
        assert trimmed.jobs == run.jobs and {i for j in run.jobs for i in j.group_ids} == set(groups)
        jobs = nightly_dag.get_task("spark_jobs").python_callable(admitted)
        assert {j["name"].split()[1] for j in jobs} == {"t.small", "t.events"}
        for job in (j for j in jobs if j["name"].split()[1] == "t.events"):
            args = job["application_args"]
            assert args[args.index("--plan") + 1] == run.plan_path
            assert {int(i) for i in args[args.index("--groups") + 1].split(",")} <= set(groups)
        owner = LeaseOwner.dag("lakesort_nightly", "r1")
        # kept: runs on
        assert read_lease("t.small").same_run(owner) and read_lease("t.events").same_run(owner)

        # The months that wait: a deferred run of their own, with why; the next night reads it as one night.
        (row,) = [r for r in read_runs(iceberg_catalog, "t.events").to_pylist() if r["status"] == "deferred"]
        assert row["run_id"] == f"{run.run_id}-deferred" and row["partitions_rewritten"] == len(waiting)
        assert row["reason"].startswith(f"{reason}: ranked #2 of 2") and "(fallback)" in row["reason"]
        assert row["spec_hash"] and '"sort.keys": {"kind": "spec"' in row["config_sources"]
        history = histories({"t.events": run.catalog})["t.events"]
        tomorrow = dt.datetime.fromtimestamp(time.time(), dt.UTC).date() + dt.timedelta(days=1)
        assert nights_deferred(history, tonight=tomorrow) == 1

        # The backfill's `planned` keeps every planned run, whatever the budget.
        backfill = dags["lakesort_backfill"].get_task("planned")
        monkeypatch.setenv("LAKESORT_NIGHTLY_BUDGET_BYTES", "1")
        assert ([a["table"] for a in backfill.python_callable(admitted, **backfill.op_kwargs)]
                == ["t.small", "t.events"])

        # The report task: housekeeping of lakesort's own tables in every configured catalog, and the index
        # with the deferral and why.
        with caplog.at_level(logging.INFO):
            index = common.report.function()
        assert "housekeeping: lakesort.compaction_runs" in caplog.text
        html = Path(index).read_text(encoding="utf-8")
        assert f"{reason}: ranked #2 of 2" in html and "deferred" in html
        assert context["params"] == {}
