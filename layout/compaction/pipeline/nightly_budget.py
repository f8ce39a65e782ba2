"""The nightly's budget, where every table's plan is known (the DAG's `planned` task): the planned runs ranked by
predicted benefit over cost (`layout.compaction.planning.benefit`, `.budget`), the admitted ones returned in
that order (their Spark jobs are mapped, and so queued through the pool, in it), the deferred ones recorded
in `lakesort.compaction_runs` (status "deferred", the decision in `reason`) and their leases released.

The tables' histories are read once per catalog (three scans: runs, probe measurements, advice), not once
per table; a history that cannot be read leaves the tables of that catalog to the fallback prediction, logged:
the budget never fails the nightly. The backfill and `lakesort compact` are not budgeted.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from layout.advise.history import ADVICE, ADVICE_FIELDS
from layout.catalog import load_catalog
from layout.compaction.pipeline import steps
from layout.compaction.pipeline.runs import PlannedTable, to_compact
from layout.compaction.pipeline.steps import PreparedRun
from layout.compaction.planning.benefit import AdvisedLayouts, History, PastRun, ProbeReading, predict
from layout.compaction.planning.budget import BudgetDecision, decide
from layout.metrics import store
from layout.metrics.runs import RunOutcome, RunRecord, record_runs
from layout.upkeep.lease import release_lease

__all__ = ["budget_decisions", "histories", "within_budget"]

log = logging.getLogger(__name__)


def histories(tables: Mapping[str, str | None]) -> dict[str, History]:
    """{table: its History} for `tables` (table -> catalog), read once per catalog."""
    by_catalog: dict[str | None, set[str]] = defaultdict(set)
    for table, catalog in tables.items():
        by_catalog[catalog].add(table)
    out: dict[str, History] = {}
    for catalog, names in by_catalog.items():
        try:
            cat = load_catalog(catalog)
            runs = _rows(store.read(cat, store.COMPACTION_RUNS, store.RUNS_FIELDS), names)
            readings = _rows(store.read(cat, store.PRUNING_METRICS, store.METRICS_FIELDS), names)
            advice = _rows(store.read(cat, ADVICE, ADVICE_FIELDS), names)
        except Exception as exc:  # noqa: BLE001 - the nightly goes on, on the fallback prediction
            log.warning("budget: lakesort's records in catalog %s could not be read (%s): its tables are ranked "
                        "by the fallback prediction", catalog or "(default)", exc)
            continue
        for name in names:
            out[name] = History(
                runs=tuple(PastRun(run_id=r["run_id"], status=r["status"], started_at=r["started_at"],
                                   bytes_rewritten=r["bytes_rewritten"] or 0) for r in runs[name]),
                readings=tuple(ProbeReading(**{k: r[k] for k in ProbeReading.model_fields})
                               for r in readings[name] if r["probe_kind"] == "owner"),
                advice=AdvisedLayouts.from_rows(advice[name]))
    return out


def _rows(table: Any, names: set[str]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in table.to_pylist():
        if row["table"] in names:
            grouped[row["table"]].append(row)
    return grouped


def budget_decisions(prepared: Iterable[PreparedRun], *, budget_bytes: int | None) -> list[BudgetDecision]:
    """The ranked decisions over the prepared runs (their plans and the tables' histories)."""
    prepared = list(prepared)
    found = histories({p.table: p.catalog for p in prepared})
    candidates = [predict(p.plan(), weights={probe.name: probe.weight for probe in p.spec.probes},
                          history=found.get(p.table, History()), partitions=p.partitions) for p in prepared]
    return decide(candidates, budget_bytes=budget_bytes)


def _defer(deferred: list[BudgetDecision], prepared: Mapping[str, PreparedRun], *, budget: str, of: int) -> None:
    """The deferred runs' rows in `lakesort.compaction_runs`, one snapshot per catalog; a failure is logged (the
    runs are deferred all the same)."""
    by_catalog: dict[str | None, list[RunRecord]] = defaultdict(list)
    for d in deferred:
        c = d.candidate
        reason = (f"{d.reason}: ranked #{d.rank} of {of}, benefit {c.benefit_bytes:.0f} B / cost {c.cost_bytes} B "
                  f"({c.source}), budget {budget}")
        run = prepared[c.table]
        by_catalog[run.catalog].append(steps.run_record(run, RunOutcome(status="deferred", reason=reason)))
    for catalog, rows in by_catalog.items():
        try:
            record_runs(load_catalog(catalog), rows)
        except Exception as exc:  # noqa: BLE001 - a metrics hiccup must never fail the nightly
            log.warning("could not record %d deferred run(s) in catalog %s: %s", len(rows), catalog or "(default)",
                        exc)


def within_budget(results: Iterable[PlannedTable], *, budget_bytes: int | None) -> list[PlannedTable]:
    """The runs with Spark work (`to_compact`) that the budget admits, most valuable first; the others are
    recorded as deferred, with the reason, and their leases released. Logs the ranking, the order and what was
    deferred."""
    planned = {r.table: r for r in to_compact(results)}
    if not planned:
        return []
    prepared = {table: run.prepared() for table, run in planned.items()}
    decisions = budget_decisions(prepared.values(), budget_bytes=budget_bytes)
    budget = "unlimited" if budget_bytes is None else f"{budget_bytes} B"
    log.info("budget: %d planned run(s) ranked by predicted benefit over cost, budget %s:", len(decisions), budget)
    for d in decisions:
        log.info("  %s", d.describe())
    admitted = [planned[d.candidate.table] for d in decisions if d.ran]
    _defer([d for d in decisions if not d.ran], prepared, budget=budget, of=len(decisions))
    for d in decisions:
        if not d.ran:
            release_lease(d.candidate.table, planned[d.candidate.table].owner)
    spent = sum(d.candidate.cost_bytes for d in decisions if d.ran)
    deferred = [d.candidate.table for d in decisions if not d.ran]
    log.info("budget: %d run(s) admitted, in this order: %s; %d B of %s", len(admitted),
             ", ".join(r.table for r in admitted) or "none", spent, budget)
    log.info("budget: %d deferred to a later night: %s", len(deferred), ", ".join(deferred) or "none")
    return admitted
