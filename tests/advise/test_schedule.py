"""The advisor on a schedule (layout.advise.schedule): which tables are due (never advised, probes changed, a
week old, or the owners' probes' efficiency fell by more than a quarter since), and that one table's failure
leaves the others advised. The catalog's rows are stood in for: the advisor's own tests are test_advise.py."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from layout.advise import Advice, schedule
from layout.advise.result import ProbeWeight
from layout.metrics.measure import Measurement
from layout.spec import parse_spec

NOW = dt.datetime(2025, 3, 10, 2, 0, tzinfo=dt.UTC)
PROBES = [{"name": "p", "where": "k = 1"}]


def table_spec(table: str = "t.x", probes: list[dict] | None = PROBES):
    data = {"table": table, "owner": {"name": "o", "email": "o@example.com"},
            "sort": {"keys": [{"column": "k"}]}}
    return parse_spec({**data, "probes": probes} if probes else data)


def advice(at: dt.datetime, where: str = "k = 1") -> Advice:
    return Advice(run_id="a", table="t.x", advised_at=at, sample_rows=1, table_rows=1, seed=0,
                  probes=(ProbeWeight(name="p", where=where),), candidates=(), recommendation=None)


def measured(at: dt.datetime, efficiency: float, phase: str = "on-demand") -> Measurement:
    return Measurement(
        run_id=f"m{at:%d%H%M}", phase=phase, table="t.x", snapshot_id=1, measured_at=at, probe="p",
        probe_kind="owner", predicate="k = 1", columns="", files_total=1, files_selected=1,
        row_groups_total=1, row_groups_selected=1,
        pages_total=1, pages_selected=1, pages_ideal=1, rows_total=1, rows_selected=1, rows_matching=1,
        bytes_total=100, bytes_selected=100, bytes_ideal=100, efficiency=1.0, plan_cold_ms=0, plan_warm_ms=0,
        efficiency_clustered=efficiency)


@pytest.fixture
def recorded(monkeypatch):
    """The last advice and the measurements `advice_due` reads, as the test sets them."""
    state: dict = {"advice": None, "rows": []}
    monkeypatch.setattr(schedule, "last_advice", lambda catalog, table: state["advice"])
    monkeypatch.setattr(schedule, "_measurements", lambda catalog, table: state["rows"])
    return state


def test_when_advice_is_due(recorded):
    spec = table_spec()
    assert schedule.advice_due(None, table_spec(probes=None), NOW) is None, "no probes: nothing to advise"
    assert schedule.advice_due(None, spec, NOW) == "never advised"
    recorded["advice"] = advice(NOW - dt.timedelta(days=2), where="k = 2")
    assert schedule.advice_due(None, spec, NOW) == "its probes changed since the last advice"
    recorded["advice"] = advice(NOW - dt.timedelta(days=7))
    assert schedule.advice_due(None, spec, NOW) == "last advised 7 day(s) ago"
    recorded["advice"] = advice(NOW - dt.timedelta(days=2))
    assert schedule.advice_due(None, spec, NOW) is None, "at most once a week"
    # 40% at the advice, then 35% (within a quarter), then 20%: the layout's health dropped
    recorded["rows"] = [measured(NOW - dt.timedelta(days=3), 0.4, "after"),
                        measured(NOW - dt.timedelta(days=1), 0.35)]
    assert schedule.advice_due(None, spec, NOW) is None
    recorded["rows"].append(measured(NOW - dt.timedelta(hours=1), 0.2))
    assert schedule.advice_due(None, spec, NOW) == (
        "the owners' probes' efficiency fell from 40.0% to 20.0% since the last advice")
    recorded["advice"] = advice(NOW - dt.timedelta(minutes=30))  # advised since: the drop is its reference
    assert schedule.advice_due(None, spec, NOW) is None


def test_due_tables_are_advised_and_a_failure_skips_only_its_own(recorded, monkeypatch, caplog):
    monkeypatch.setattr(schedule, "load_catalog", lambda name: None)
    ran = []

    def run(spec):
        ran.append(spec.table)
        if spec.table == "t.bad":
            raise RuntimeError("sample failed")
        return advice(NOW)

    specs = {"t.bad": table_spec("t.bad"), "t.x": table_spec(), "t.none": None,
             "t.bare": table_spec("t.bare", probes=None)}
    with caplog.at_level(logging.INFO):
        assert schedule.advise_due(specs, now=NOW, run=run) == {"t.x": "never advised"}
    assert ran == ["t.bad", "t.x"]
    assert "t.bad: the scheduled advice failed (the next run tries again): sample failed" in caplog.text
