"""The tasks of a DAG run over all its tables (layout.compaction.pipeline.dag_run), without Airflow: the runs
admitted to Spark (`admitted`, the DAGs' `planned`), and the run's last task (`close`, the DAGs' `report`):
the leases the run left, the housekeeping of lakesort's own tables (its failures logged, never raised) and
the reports, skipped by a dry run. The budget itself: tests/dags/test_nightly_budget.py."""

from __future__ import annotations

import logging

import pytest

from layout.compaction.pipeline import dag_run
from layout.compaction.pipeline.runs import PlannedTable
from layout.upkeep.lease import LeaseOwner, acquire_lease, read_lease

MINE, OTHER = LeaseOwner.dag("lakesort_backfill", "r1"), LeaseOwner.dag("lakesort_nightly", "n1")


def payload(table: str, status: str) -> dict:
    return PlannedTable(table=table, owner=MINE, status=status,
                        summary=f"{table}: {status}").model_dump(mode="json")


def test_admitted_keeps_the_planned_runs(caplog):
    """Unbudgeted (the backfill): every planned run, in order; the others' summaries go to the log, and a
    table whose prepare failed (None) drops out."""
    prepared = [payload("t.a", "planned"), None, payload("t.b", "nothing-to-do"), payload("t.c", "planned")]
    with caplog.at_level(logging.INFO):
        kept = dag_run.admitted(prepared, budgeted=False)
    assert [(r.table, r.status) for r in kept] == [("t.a", "planned"), ("t.c", "planned")]
    assert "t.b: nothing-to-do" in caplog.text and "2 table(s) to compact: t.a, t.c" in caplog.text


def test_admitted_budgeted_asks_the_nightly_budget(monkeypatch):
    """Budgeted (the nightly): the runs `nightly_budget.within_budget` admits, with
    $LAKESORT_NIGHTLY_BUDGET_BYTES (unset: None, unlimited)."""
    calls = []

    def within_budget(results, *, budget_bytes):
        calls.append(([r.table for r in results], budget_bytes))
        return results[:1]

    monkeypatch.setattr(dag_run, "within_budget", within_budget)
    monkeypatch.setenv("LAKESORT_NIGHTLY_BUDGET_BYTES", "1KiB")
    prepared = [payload("t.a", "planned"), None, payload("t.b", "dry-run")]
    assert [r.table for r in dag_run.admitted(prepared, budgeted=True)] == ["t.a"]
    monkeypatch.delenv("LAKESORT_NIGHTLY_BUDGET_BYTES")
    dag_run.admitted(prepared, budgeted=True)
    assert calls == [(["t.a", "t.b"], 1024), (["t.a", "t.b"], None)]


def test_close_sweeps_the_runs_leases_and_a_dry_run_ends_there(registry, monkeypatch, caplog):
    """A table whose tasks stopped early (upstream_failed) released nothing: the run's last task does, and
    only the run's own leases. A dry run leaves the report as it was: no housekeeping, no reports."""
    acquire_lease("t.events", MINE)
    acquire_lease("t.other", OTHER)
    monkeypatch.setattr(dag_run, "housekeeping", lambda: pytest.fail("a dry run does no housekeeping"))
    monkeypatch.setattr(dag_run, "advice", lambda: pytest.fail("a dry run advises nothing"))
    with caplog.at_level(logging.INFO):
        assert dag_run.close(MINE, dry_run=True, write_reports=lambda: pytest.fail("no report")) is None
    assert read_lease("t.events") is None and read_lease("t.other").same_run(OTHER)
    assert "released 1 table lease(s) left by failed tasks" in caplog.text
    assert "dry run: the report is left as it was" in caplog.text


def test_close_keeps_house_then_writes_the_reports(registry, tmp_path, monkeypatch, caplog):
    done = []
    monkeypatch.setattr(dag_run, "housekeeping", lambda: done.append("housekeeping"))
    monkeypatch.setattr(dag_run, "advice", lambda: done.append("advice"))  # layout.advise.schedule's tests
    index = tmp_path / "reports" / "index.html"

    def write_reports():
        done.append("reports")
        return index

    with caplog.at_level(logging.INFO):
        assert dag_run.close(MINE, dry_run=False, write_reports=write_reports) == str(index)
    assert done == ["housekeeping", "advice", "reports"]
    assert f"lakesort report: {index.resolve()}" in caplog.text
    assert "released" not in caplog.text  # the run held no lease


def test_housekeeping_of_every_configured_catalog(registry, iceberg_catalog, monkeypatch, caplog):
    """Each catalog the registry configures tables in (t.events' `lakesort`), its own tables housekept; a
    catalog that fails is a warning and the next one goes on; an unreadable registry is a warning."""
    from layout.catalog import load_catalog

    assert dag_run.catalog_names() == ["lakesort"]
    seen = []

    def housekeep(catalog):
        seen.append(catalog.name)
        if catalog.name == "broken":
            raise RuntimeError("catalog down")
        return [type("Result", (), {"summary": lambda self: "lakesort.compaction_runs: 3 data file(s)"})()]

    monkeypatch.setattr(dag_run, "housekeep", housekeep)
    monkeypatch.setattr(dag_run, "catalog_names", lambda: ["broken", "lakesort"])
    monkeypatch.setattr(
        dag_run,
        "load_catalog",
        lambda name: type("C", (), {"name": name})() if name == "broken" else load_catalog(name),
    )
    with caplog.at_level(logging.INFO):
        assert dag_run.housekeeping() is None
    assert seen == ["broken", "lakesort"]
    assert "housekeeping of lakesort's tables in catalog broken failed: catalog down" in caplog.text
    assert "housekeeping: lakesort.compaction_runs: 3 data file(s)" in caplog.text

    def unreadable():
        raise OSError("registry gone")

    monkeypatch.setattr(dag_run, "catalog_names", unreadable)
    caplog.clear()
    assert dag_run.housekeeping() is None
    assert "housekeeping: the registry could not be read: registry gone" in caplog.text


def test_housekeeping_of_a_catalog_without_lakesorts_tables(registry, iceberg_catalog, caplog):
    """The real thing, on a catalog where lakesort has recorded nothing yet: nothing to do, nothing fails."""
    with caplog.at_level(logging.WARNING):
        dag_run.housekeeping()
    assert "housekeeping" not in caplog.text
