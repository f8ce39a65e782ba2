"""The nightly's budget over a real SQL catalog of 50 tables of different sizes and histories, configured the
four ways (a YAML spec, lakesort.* table properties, a namespace default, their own sort order):
`lakesort tables` shows each one's configuration and sources; the nightly's first task and `prepare` plan
every table (no Spark); the `planned` step ranks them by predicted benefit over cost, keeps the budget,
returns the admitted runs most valuable first (the order checked against the predictions, computed here from
the history the test recorded), records the deferred ones with why (and the configuration's sources), releases
their leases, and the report's index shows them."""

from __future__ import annotations

import datetime as dt
import json
import logging
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.transforms import IdentityTransform

from layout.advise.history import ADVICE, ADVICE_FIELDS, ADVICE_KEY
from layout.cli import EXIT_OK, main
from layout.compaction.pipeline import runs
from layout.compaction.pipeline.nightly_budget import budget_decisions, within_budget
from layout.metrics import store
from layout.metrics.runs import read_runs
from layout.upkeep.lease import LeaseOwner, read_lease

SPEC = """table: {table}
owner: {{name: Team, email: team@example.com}}
sort: {{keys: [{{column: k, direction: desc}}]}}
probes:
  - {{name: p1, where: "k > 10", weight: 2}}
  - {{name: p2, where: "v < 0.5"}}
"""
DEFAULTS = """defaults:
  - match: "*"
    owner: {name: Platform, email: platform@example.com}
  - match: "sales.*"
    sort: {keys: [{column: d}]}
    probes: [{name: p1, where: "k > 10"}]
"""
PROPERTIES = {"lakesort.sort-keys": "v, k desc",
              "lakesort.probes": '[{name: p1, where: "k > 10", weight: 3}]'}
WEIGHTS = {"yaml": {"p1": 2.0, "p2": 1.0}, "props": {"p1": 3.0}, "sales": {"p1": 1.0}, "ordered": {}}
KIND = {"yaml": "spec", "props": "property", "sales": "default", "ordered": "sort-order"}
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def data(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"k": pa.array(rng.integers(0, 1000, rows), pa.int64()),
                     "d": pa.array([f"d{i}" for i in rng.integers(0, 50, rows)]),
                     "v": pa.array(rng.random(rows))})


def metric(table: str, run_id: str, phase: str, probe: str, selected: int, at: dt.datetime, *, total=100_000,
           clustered=None) -> dict:
    row = {name: 0 for name, kind, required in store.METRICS_FIELDS
           if required and kind in ("long", "double")}
    return {**row, "run_id": run_id, "phase": phase, "table": table, "measured_at": at, "probe": probe,
            "probe_kind": "owner", "predicate": "k > 10", "columns": "", "bytes_total": total,
            "bytes_selected": selected, "bytes_ideal": 0, "bytes_clustered": clustered}


def advice(table: str, strategy: str, origin: str, predicted: dict, table_bytes: int) -> dict:
    return {"run_id": f"advice-{table}", "table": table, "advised_at": T0, "rank": 1, "strategy": strategy,
            "keys": "k", "sort_keys": "[]", "scaling": None, "origin": origin, "label": strategy,
            "predicted_bytes": json.dumps(predicted), "total_bytes": 0.0, "vs_current": None,
            "write_bytes": 1, "incremental": None, "recommended": 0, "sample_rows": 1, "table_rows": 1,
            "table_bytes": table_bytes, "seed": 0, "probes": "[]", "seconds": 0.0}


@pytest.fixture
def fleet(iceberg_catalog, registry):
    """50 tables: 12 with a YAML spec, 12 configured by properties, 12 by the `sales.*` default, 14 by their
    own sort order; one append of 20 to 400 rows (every fifth table two); the first 36 with a history cycling
    through a measured run, an advice, an on-demand measurement and nothing. Returns {table:
    expected benefit per byte (None:
    the fallback)}."""
    (registry / "events.yaml").unlink()
    (registry / "_defaults.yaml").write_text(DEFAULTS)
    names = [f"{ns}.t{i}" for ns, n in (("yaml", 12), ("props", 12), ("sales", 12), ("ordered", 14))
             for i in range(n)]
    for namespace in ("yaml", "props", "sales", "ordered"):
        iceberg_catalog.create_namespace(namespace)
    per_byte: dict[str, float | None] = {}
    metrics, run_rows, advice_rows = [], [], []
    for j, name in enumerate(names):
        ns = name.split(".")[0]
        if ns == "yaml":
            (registry / f"{name}.yaml").write_text(SPEC.format(table=name))
        table = iceberg_catalog.create_table(name, schema=data(1, 0).schema,
                                             properties=PROPERTIES if ns == "props" else {})
        if ns == "ordered":
            with table.update_sort_order() as order:
                order.asc("v", IdentityTransform())
        for a in range(1 + (j % 5 == 0)):
            table.append(data(20 + (j * 53 + a * 31) % 380, seed=j * 10 + a).cast(table.schema().as_arrow()))
        weights, history = WEIGHTS[ns], j % 4 if ns != "ordered" else 3
        per_byte[name] = None
        if history == 0:  # a committed run, measured before and after
            rewritten = 20_000 + 1000 * j
            run_rows.append({"run_id": f"r{j}", "table": name, "status": "committed", "trigger": "nightly",
                             "started_at": T0, "duration_s": 1.0, "bytes_rewritten": rewritten})
            saved = 0.0
            for p, w in weights.items():
                before, after = 1000 + 700 * j, 100 + 10 * j
                metrics += [metric(name, f"r{j}", "before", p, before, T0),
                            metric(name, f"r{j}", "after", p, after, T0)]
                saved += w * (before - after)
            per_byte[name] = saved / rewritten
        elif history == 1:  # an advice: the current layout and the spec's
            current = {p: 5000 + 300 * j for p in weights}
            spec = {p: 1000 for p in weights}
            advice_rows += [advice(name, "current", "table", current, 40_000),
                            advice(name, "linear", "spec", spec, 40_000)]
            per_byte[name] = sum(w * (current[p] - spec[p]) for p, w in weights.items()) / 40_000
        elif history == 2:  # an on-demand measurement of the table as it is
            at = T0 + dt.timedelta(hours=j)
            metrics += [metric(name, f"m{j}", "on-demand", p, 30_000, at, clustered=2000 * j)
                        for p in weights]
            per_byte[name] = sum(w * max(30_000 - 2000 * j, 0) for w in weights.values()) / 100_000
    defaults = {name: None for name, kind, required in store.RUNS_FIELDS if not required}
    zeros = {name: 0 for name, kind, required in store.RUNS_FIELDS if required and kind == "long"}
    store.upsert(iceberg_catalog, store.COMPACTION_RUNS, store.RUNS_FIELDS, store.RUNS_KEY,
                 [{**defaults, **zeros, "verification": "passed", "findings": "[]", **r} for r in run_rows])
    store.upsert(iceberg_catalog, store.PRUNING_METRICS, store.METRICS_FIELDS, store.METRICS_KEY, metrics)
    store.upsert(iceberg_catalog, ADVICE, ADVICE_FIELDS, ADVICE_KEY, advice_rows)
    return per_byte


def test_the_nightly_spends_its_budget_where_it_pays_most(fleet, iceberg_catalog, capsys, caplog):
    # `lakesort tables`: each table's configuration and where each key came from.
    assert main(["tables", "--json"]) == EXIT_OK
    listed = {row["table"]: row for row in json.loads(capsys.readouterr().out)["tables"]}
    assert set(listed) == set(fleet)
    for name, row in listed.items():
        ns = name.split(".")[0]
        assert row["configured"] and row["sources"]["sort.keys"]["kind"] == KIND[ns], row
        if ns != "ordered":  # the probes (and their weights) the prediction reads, each from its source
            assert row["sources"]["probes"]["kind"] == KIND[ns], row
            assert {p["name"]: p["weight"] for p in row["config"]["probes"]} == WEIGHTS[ns], name

    # The nightly's first task and its `prepare` per table: every table planned, under the run's lease.
    owner = LeaseOwner.dag("lakesort_nightly", "fleet")
    requests = runs.nightly_requests()
    assert [r.table for r in requests] == sorted(fleet)
    planned = [runs.prepare_table(r, owner=owner) for r in requests]
    assert {p.status for p in planned} == {"planned"}
    prepared = {p.table: p.prepared() for p in planned}
    cost = {table: run.input_bytes for table, run in prepared.items()}
    assert len(set(cost.values())) > 30  # tables of different sizes
    budget = sum(cost.values()) * 2 // 5

    # The predictions, as this test recorded the histories: the benefit per byte times the bytes to rewrite
    # (the fallback: every input byte, none is a sorted run yet);
    # the order and the admission follow from them.
    benefit = {t: cost[t] if fleet[t] is None else fleet[t] * cost[t] for t in fleet}
    order = sorted(fleet, key=lambda t: (-Fraction(benefit[t]) / cost[t], -benefit[t], cost[t], t))
    expected, left = [], budget
    for t in order:
        if cost[t] <= left:
            expected.append(t)
            left -= cost[t]
    decisions = budget_decisions(prepared.values(), budget_bytes=budget)
    assert [d.candidate.table for d in decisions] == order
    for d in decisions:
        t = d.candidate.table
        assert d.candidate.benefit_bytes == pytest.approx(benefit[t]) and d.candidate.cost_bytes == cost[t]
    sources = {d.candidate.table: d.candidate.source for d in decisions}
    assert sources["yaml.t0"] == "measured-run" and sources["props.t1"] == "advisor"  # j = 0, 13
    assert sources["sales.t2"] == "measurement" and sources["yaml.t3"] == sources["ordered.t5"] == "fallback"

    with caplog.at_level(logging.INFO):
        admitted = within_budget(planned, budget_bytes=budget)
    assert [r.table for r in admitted] == expected  # the most valuable first, within the budget
    assert sum(cost[t] for t in expected) <= budget and 10 < len(expected) < 40
    deferred = sorted(set(fleet) - set(expected))
    assert (
        f"budget: {len(deferred)} deferred to a later night: {', '.join(d for d in order if d in deferred)}"
        in caplog.text
    )
    assert f"#1 ran: {order[0]}: benefit" in caplog.text

    # The deferred: recorded with why, and the configuration they carried; their leases released.
    rows = {r["table"]: r for r in read_runs(iceberg_catalog).to_pylist() if r["status"] == "deferred"}
    assert sorted(rows) == deferred
    first_deferred = next(t for t in order if t in deferred)
    row = rows[first_deferred]
    assert row["reason"].startswith(f"over budget: ranked #{order.index(first_deferred) + 1} of 50")
    assert row["trigger"] == "nightly" and row["spec_hash"] == prepared[first_deferred].config.spec_hash
    kind = KIND[first_deferred.split(".")[0]]
    assert json.loads(row["config_sources"])["sort.keys"]["kind"] == kind
    assert all(read_lease(t) is None for t in deferred)
    assert all(read_lease(t).same_run(owner) for t in expected)

    # `lakesort tables` and the report's index: per table, the deferral and why.
    capsys.readouterr()
    assert main(["tables", "--namespace", first_deferred.split(".")[0], "--json"]) == EXIT_OK
    last = {r["table"]: r["last_run"] for r in json.loads(capsys.readouterr().out)["tables"]}[first_deferred]
    assert (last["status"], last["reason"]) == ("deferred", row["reason"])
    from layout.report.render import write_reports

    index = write_reports().read_text(encoding="utf-8")
    assert f"over budget: ranked #{order.index(first_deferred) + 1} of 50" in index
