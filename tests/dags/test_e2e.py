"""End to end: `airflow dags test` on a small lake (Spark local[2], SQLite Iceberg catalog,
SQLite Airflow DB).

In order (each fixture builds on the one before, once per module):
  1. lakesort_nightly over two registered tables: demo.lineitem compacts; demo.broken (a truncated data
     file) fails in its own `prepare` with a log line naming the file, and nothing else of its compaction
     runs; then both are maintained (their history is younger than the retention: nothing is deleted).
     The Airflow OpenLineage provider (the `lineage` extra) writes the run's events to a file: the commit
     task's carry the table as input and output with the rows, bytes and files rewritten.
  2. lakesort_backfill for one partition with force: only that partition's files are rewritten.
  3. lakesort_backfill as a dry run over a date range: the plan in the log and XCom, nothing changes.
Then the nightly planning step once more finds nothing to do.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest
from dag_harness import REPO, airflow_env, run_dag

pytestmark = [pytest.mark.spark, pytest.mark.slow]

GOOD, BROKEN = "demo.lineitem", "demo.broken"
BUDGET = 1 << 30  # bytes to rewrite a night: far more than the good table's


def files_by_partition(table) -> dict[str, set[str]]:
    spec, schema = table.spec(), table.schema()
    out: dict[str, set[str]] = defaultdict(set)
    for task in table.scan().plan_files():
        out[spec.partition_to_path(task.file.partition, schema)].add(task.file.file_path)
    return dict(out)


def rows(table):
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: (r["l_orderkey"], r["l_linenumber"]))


def runs_of(lake, run_id: str) -> dict:
    from layout.metrics.measure import read_runs

    found = [r for r in read_runs(lake.catalog, GOOD).to_pylist() if r["run_id"] == run_id]
    assert len(found) == 1, f"{len(found)} compaction_runs row(s) for {run_id}"
    return found[0]


SPARK_LINEAGE_JARS = sorted((REPO / ".testbed" / "openlineage").glob("openlineage-spark_*.jar"))


def lineage_env(home, lake) -> dict[str, str]:
    """The Airflow OpenLineage provider's events, one JSON a line, to lake/openlineage.jsonl (its file
    transport); with the test bed's openlineage-spark, the Spark job's own events to
    lake/spark-openlineage*."""
    env = {
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "append": True, "log_file_path": str(lake.root / "openlineage.jsonl")}
        )
    }
    if SPARK_LINEAGE_JARS:
        conf = json.loads(airflow_env(home, lake.root)["LAKESORT_SPARK_CONF"])
        env["LAKESORT_SPARK_CONF"] = json.dumps({
            **conf, "spark.jars": str(SPARK_LINEAGE_JARS[0]),
            "spark.extraListeners": "io.openlineage.spark.agent.OpenLineageSparkListener",
            "spark.openlineage.transport.type": "file",
            "spark.openlineage.transport.location": str(lake.root / "spark-openlineage")})
    return env


@pytest.fixture(scope="module")
def nightly(airflow_home, lake, spark_available):
    before = {name: (lake.table(name).current_snapshot().snapshot_id, files_by_partition(lake.table(name)))
              for name in (GOOD, BROKEN)}
    # A finite night's budget that holds the good table's run: the budget's ranking runs in the real DAG run
    # (its admission and deferrals are tested in tests/dags/test_nightly_budget.py and the 50-table test).
    env = {**lineage_env(airflow_home, lake), "LAKESORT_NIGHTLY_BUDGET_BYTES": str(BUDGET)}
    run = run_dag(airflow_home, lake, "lakesort_nightly", env=env)
    print(f"lakesort_nightly: {run.seconds:.1f}s")
    return run, before


@pytest.fixture(scope="module")
def backfill(nightly, airflow_home, lake):
    before = files_by_partition(lake.table())
    snapshot = lake.table().current_snapshot().snapshot_id
    run = run_dag(airflow_home, lake, "lakesort_backfill",
                  {"table": GOOD, "partitions": ["l_shipdate_month=1995-06"], "force": True})
    print(f"lakesort_backfill: {run.seconds:.1f}s")
    return run, before, snapshot


@pytest.fixture(scope="module")
def dry_run(backfill, airflow_home, lake):
    before = (lake.table().current_snapshot().snapshot_id, files_by_partition(lake.table()))
    run = run_dag(airflow_home, lake, "lakesort_backfill",
                  {"table": GOOD, "from": "1995-05-20", "to": "1995-06-03", "force": True, "dry_run": True})
    print(f"lakesort_backfill (dry run): {run.seconds:.1f}s")
    return run, before


def test_nightly_compacts_the_good_table(nightly, lake):
    run, before = nightly
    for task_id in ("list_tables", "planned", "spark_jobs", "report"):
        assert run.state_of(task_id) == "success", (task_id, run.tasks)
    assert run.state_of("prepare", GOOD) == "success"
    assert set(run.states("compact").values()) == {"success"}
    assert len(run.states("compact")) == 1  # one Spark job: 3 small partitions
    assert next(iter(run.states("compact"))).startswith(f"lakesort-compact {GOOD} ")
    for step in ("table.verify", "table.commit", "table.measure"):
        assert run.states(step) == {GOOD: "success"}, step

    table = lake.table()
    snapshot = table.current_snapshot()
    assert snapshot.snapshot_id != before[GOOD][0]
    run_id = snapshot.summary.additional_properties["lakesort.run-id"]
    after = files_by_partition(table)
    old = before[GOOD][1]
    assert set(after) == set(old) == {"l_shipdate_month=1995-05", "l_shipdate_month=1995-06",
                                      "l_shipdate_month=1996-03"}
    for partition, files in after.items():  # every partition rewritten: 4 small files -> 1 new file
        assert len(old[partition]) == 4 and len(files) == 1 and not files & old[partition]
    assert rows(table) == sorted(lake.source_rows.to_pylist(),
                                 key=lambda r: (r["l_orderkey"], r["l_linenumber"]))

    record = runs_of(lake, run_id)
    assert (record["status"], record["trigger"], record["verification"]) == ("committed", "nightly", "passed")
    assert (record["partitions_rewritten"], record["files_before"], record["files_after"]) == (3, 12, 3)
    assert (record["rows_rewritten"] == lake.source_rows.num_rows
            and record["snapshot_after"] == snapshot.snapshot_id)

    from layout.metrics.measure import read_metrics

    metrics = [m for m in read_metrics(lake.catalog, GOOD).to_pylist() if m["run_id"] == run_id]
    by_phase = defaultdict(dict)
    for m in metrics:
        by_phase[m["phase"]][m["probe"]] = m
    assert set(by_phase) == {"before", "after"} and by_phase["before"].keys() == by_phase["after"].keys()
    assert {"ship_date_point", "ship_date_week", "order_lookup", "ship_modes"} <= by_phase["after"].keys()
    assert by_phase["before"]["ship_date_point"]["snapshot_id"] == before[GOOD][0]
    assert by_phase["after"]["ship_date_point"]["snapshot_id"] == snapshot.snapshot_id
    owner_before = sum(m["bytes_selected"] for m in by_phase["before"].values() if m["probe_kind"] == "owner")
    owner_after = sum(m["bytes_selected"] for m in by_phase["after"].values() if m["probe_kind"] == "owner")
    assert owner_after < owner_before  # sorted files: the owners' queries read less
    assert re.search(rf"{GOOD}: the owners' probes select {owner_before} bytes before "
                     rf"and {owner_after} after",
                     run.output)

    # The "table compacted" asset event, through the alias, with the run in its extra.
    events = run.asset_events()
    assert [(uri, extra["run_id"], extra["snapshot_id"]) for uri, extra in events] == [
        (f"iceberg://lakesort/{GOOD}", run_id, snapshot.snapshot_id)]
    assert sorted(events[0][1]["partitions"]) == sorted(after)

    assert not list((lake.root / "work").glob("*/lease.json"))  # every lease released
    assert (lake.root / "reports" / "index.html").is_file(), "the report task wrote no reports/index.html"
    assert f"lakesort report: {(lake.root / 'reports' / 'index.html').resolve()}" in run.output
    # The planned task ranked the night's one planned run within the budget and admitted it.
    assert f"budget: 1 planned run(s) ranked by predicted benefit over cost, budget {BUDGET} B" in run.output
    assert re.search(rf"budget: 1 run\(s\) admitted, in this order: {GOOD}; \d+ B of {BUDGET} B", run.output)


def test_nightly_lineage(nightly, lake):
    """The provider's listener emitted every task's events; the commit task's COMPLETE names the table as
    input and output (`dags/lakesort_common.py`'s commit task,
    `layout.lineage.datasets`) with what was rewritten."""
    pytest.importorskip("airflow.providers.openlineage", reason="the lineage extra is not installed")
    path = lake.root / "openlineage.jsonl"
    assert path.is_file(), "the OpenLineage provider wrote no events"
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    jobs = {(e["job"]["name"], e["eventType"]) for e in events}
    for task_id in ("prepare", "compact", "table.verify", "table.commit", "table.measure"):
        assert (f"lakesort_nightly.{task_id}", "COMPLETE") in jobs, (task_id, sorted(jobs))
    (commit,) = [e for e in events if e["job"]["name"] == "lakesort_nightly.table.commit"
                 and e["eventType"] == "COMPLETE"]
    (source,), (target,) = commit["inputs"], commit["outputs"]
    # The SQL catalog's tables are named by its warehouse location (`layout.lineage.dataset_namespace`).
    assert (source["namespace"], source["name"]) == (target["namespace"], target["name"])
    assert target["name"] == GOOD and re.fullmatch(r"file:///.+/warehouse", target["namespace"]), target
    written = target["outputFacets"]["outputStatistics"]
    read = source["inputFacets"]["inputStatistics"]
    assert ((written["rowCount"], written["fileCount"]) == (lake.source_rows.num_rows, 3)
            and written["size"] > 0)
    assert (read["rowCount"], read["fileCount"]) == (lake.source_rows.num_rows, 12) and read["size"] > 0
    assert target["facets"]["catalog"]["framework"] == "iceberg"

    # The Spark job's own events (openlineage-spark): the application's parent is the `compact` task's run, as
    # the provider injected it (SparkSubmitOperator's openlineage_inject_parent_job_info),
    # the root the DAG run's.
    if not SPARK_LINEAGE_JARS:
        return
    (compact,) = {e["run"]["runId"] for e in events if e["job"]["name"] == "lakesort_nightly.compact"}
    spark = [json.loads(line) for f in lake.root.glob("spark-openlineage*")
             for line in f.read_text().splitlines() if line.strip()]
    parents = [e["run"]["facets"]["parent"] for e in spark if "parent" in e["run"].get("facets", {})]
    shown = [(e["eventType"], e["job"]["name"], e["run"]["facets"].get("parent")) for e in spark]
    assert any(
        p["run"]["runId"] == compact and p["job"]["name"] == "lakesort_nightly.compact" for p in parents
    ), shown
    (dag_run,) = {e["run"]["runId"] for e in events if e["job"]["name"] == "lakesort_nightly"} or {None}
    assert all(p.get("root", {}).get("run", {}).get("runId") == dag_run for p in parents), shown


def test_nightly_maintains_every_table(nightly, lake):
    """After the compactions, each table's maintenance: recorded, nothing expired or deleted (every snapshot
    is younger than the default retention of 3 days, and there are 5 at most), every snapshot still readable;
    the report shows the storage."""
    from layout.metrics.maintenance import read_maintenance

    run, _ = nightly
    assert run.states("maintain") == {GOOD: "success", BROKEN: "success"}
    rows = {r["table"]: r for r in read_maintenance(lake.catalog).to_pylist() if r["run_id"] == run.run_id}
    assert set(rows) == {GOOD, BROKEN}
    good = rows[GOOD]
    assert (good["status"], good["trigger"], good["snapshots_expired"]) == ("done", "nightly", 0)
    assert good["files_after"] == good["files_before"] and good["bytes_before"] > good["live_bytes"] > 0
    assert run.xcom("maintain", GOOD)["snapshots_after"] == good["snapshots_before"] == 5
    table = lake.table()  # four appends, then the compaction: every snapshot reads, each more rows
    counts = [table.scan(snapshot_id=s.snapshot_id).to_arrow().num_rows for s in table.metadata.snapshots]
    assert counts == sorted(counts) and counts[0] > 0 and counts[-2:] == [lake.source_rows.num_rows] * 2
    html = (lake.root / "reports" / "tables" / f"{GOOD}.html").read_text()
    assert "storage over time (total vs live)" in html


def test_a_broken_table_fails_alone(nightly, lake):
    run, before = nightly
    assert run.state_of("prepare", BROKEN) == "failed"
    assert run.states("table.verify") == {GOOD: "success"}  # no task of the broken table after prepare
    # One clear line: the table, the step, the file.
    file_name = lake.broken_file.rsplit("/", 1)[1]
    failure = [line for line in run.output.splitlines() if f"{BROKEN}: prepare failed:" in line]
    assert failure and file_name in failure[0], failure
    # The DAG run fails (check_tables) although the good table and the report completed.
    assert run.state_of("check_tables") == "failed" and run.state == "failed" and run.returncode != 0
    table = lake.table(BROKEN)
    assert table.current_snapshot().snapshot_id == before[BROKEN][0]
    assert files_by_partition(table) == before[BROKEN][1]


def test_backfill_rewrites_only_the_forced_partition(backfill, lake):
    run, before, snapshot_before = backfill
    assert run.state == "success" and run.returncode == 0, run.tasks
    assert run.state_of("check_request") == "success" and run.state_of("check_tables") == "skipped"
    assert run.states("table.commit") == {GOOD: "success"}
    table = lake.table()
    after = files_by_partition(table)
    forced = "l_shipdate_month=1995-06"
    assert after[forced] and not after[forced] & before[forced]  # new files for the forced partition
    assert {p: f for p, f in after.items() if p != forced} == {p: f for p, f in before.items() if p != forced}
    assert rows(table) == sorted(lake.source_rows.to_pylist(),
                                 key=lambda r: (r["l_orderkey"], r["l_linenumber"]))

    snapshot = table.current_snapshot()
    assert snapshot.parent_snapshot_id == snapshot_before
    record = runs_of(lake, snapshot.summary.additional_properties["lakesort.run-id"])
    assert (record["status"], record["trigger"], record["partitions_rewritten"]) == ("committed", "backfill",
                                                                                     1)
    assert [uri for uri, _ in run.asset_events()] == [f"iceberg://lakesort/{GOOD}"]


def test_dry_run_plans_and_changes_nothing(dry_run, lake):
    run, (snapshot_before, files_before) = dry_run
    assert run.state == "success" and run.returncode == 0, run.tasks
    plan = run.xcom("prepare", GOOD)
    assert plan["status"] == "dry-run" and plan["jobs"] == []
    view = plan["plan"]
    # 1995-05-20..1995-06-03 touches two months; forced, both would be rewritten.
    assert [(p["partition"], p["action"]) for p in view["partitions"]] == [
        ("l_shipdate_month=1995-05", "rewrite"), ("l_shipdate_month=1995-06", "rewrite")]
    assert (view["forced"]
            and {g["partition"] for g in view["groups"]} == {p["partition"] for p in view["partitions"]})
    assert f"{GOOD}: would rewrite 2 of 2 partition(s)" in run.output
    assert "dry run, nothing changes" in run.output
    # Nothing ran after the plan, and the table is as it was.
    assert run.state_of("compact") == "skipped" and set(run.states("table.commit").values()) == {"skipped"}
    table = lake.table()
    assert table.current_snapshot().snapshot_id == snapshot_before
    assert files_by_partition(table) == files_before
    assert runs_of(lake, plan["run_id"])["status"] == "dry-run"


def test_then_nothing_is_left_to_do(dry_run, lake, monkeypatch, caplog):
    """The nightly `prepare` step once more, in this process (the DAG wiring of a run without Spark work is
    the dry run's above): nothing to do, said so, recorded, no lease left."""
    import logging

    from layout.compaction.pipeline.runs import TableRequest, prepare_table
    from layout.metrics.measure import read_runs
    from layout.upkeep.lease import LeaseOwner

    for name, value in {"PYICEBERG_HOME": str(lake.root), "LAKESORT_TABLES_DIR": str(lake.root / "tables"),
                        "LAKESORT_WORK_DIR": str(lake.root / "work")}.items():
        monkeypatch.setenv(name, value)
    snapshot = lake.table().current_snapshot().snapshot_id
    with caplog.at_level(logging.INFO):
        result = prepare_table(TableRequest(table=GOOD, trigger="nightly"),
                               owner=LeaseOwner.dag("lakesort_nightly", "again"))
    assert result.status == "nothing-to-do" and result.jobs == ()
    assert f"{GOOD}: nothing to do (3 partition(s) checked)" in caplog.text
    assert lake.table().current_snapshot().snapshot_id == snapshot
    assert not list((lake.root / "work").glob("*/lease.json"))
    record = runs_of(lake, result.run_id)
    assert (record["status"], record["trigger"], record["partitions_rewritten"]) == ("nothing-to-do",
                                                                                     "nightly", 0)
    assert not [r for r in read_runs(lake.catalog, GOOD).to_pylist() if r["status"] == "failed"]
