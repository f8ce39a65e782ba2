"""The nightly's budget, where every table's plan is known (the DAG's `planned` task): the planned runs ranked
by predicted benefit over cost (`layout.compaction.planning.benefit`, `.budget`), the admitted ones returned
in that order (their Spark jobs are mapped, and so queued through the pool, in it), the deferred ones recorded
in `lakesort.compaction_runs` (status "deferred", the decision in `reason`) and their leases released.

A run the budget trims to some of its partitions is saved trimmed (`steps.keep_partitions`) before it is
returned, so its Spark jobs, its verify and its commit see only the kept groups; its deferred partitions are
recorded as a deferred run of their own (run id `<run id>-deferred`: the run's own row becomes the committed
one), and the table keeps its lease for the kept ones. The deferred rows are what the next nights' ageing
counts (`benefit.nights_deferred`).

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
from layout.compaction.planning.budget import OVER_BUDGET, BudgetDecision, decide
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
            log.warning("budget: lakesort's records in catalog %s could not be read (%s): its tables are "
                        "ranked by the fallback prediction", catalog or "(default)", exc)
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


def _defer(deferred: list[BudgetDecision], prepared: Mapping[str, PreparedRun], *,
           budget: str, of: int) -> None:
    """The deferred runs' rows in `lakesort.compaction_runs` (a trimmed run's: its deferred partitions'), one
    snapshot per catalog; a failure is logged (the runs are deferred all the same)."""
    by_catalog: dict[str | None, list[RunRecord]] = defaultdict(list)
    for d in deferred:
        c = d.candidate
        aged = f" x {1 + c.nights_deferred} (deferred {c.nights_deferred} night(s) in a row)" \
            if c.nights_deferred else ""
        reason = (f"{d.reason}: ranked #{d.rank} of {of}, benefit {c.benefit_bytes:.0f} B{aged} / cost "
                  f"{c.cost_bytes} B ({c.source}), budget {budget}")
        run = prepared[c.table]
        row = steps.run_record(run, RunOutcome(status="deferred", reason=reason))
        if d.trimmed:  # the rest of a run that goes on: a row of its own, the run's is its commit's
            shares = {s.partition: s.cost_bytes for s in c.shares}
            row = row.model_copy(update={"run_id": f"{run.run_id}-deferred",
                                         "partitions_rewritten": len(d.deferred_partitions),
                                         "groups": sum(1 for g in run.plan().groups
                                                       if g.partition in set(d.deferred_partitions)),
                                         "reason": f"{reason}; "
                                                   f"{sum(shares[p] for p in d.deferred_partitions)} B "
                                                   "deferred"})
        by_catalog[run.catalog].append(row)
    for catalog, rows in by_catalog.items():
        try:
            record_runs(load_catalog(catalog), rows)
        except Exception as exc:  # noqa: BLE001 - a metrics hiccup must never fail the nightly
            log.warning("could not record %d deferred run(s) in catalog %s: %s", len(rows),
                        catalog or "(default)", exc)


def within_budget(results: Iterable[PlannedTable], *, budget_bytes: int | None) -> list[PlannedTable]:
    """The runs with Spark work (`to_compact`) that the budget admits, most valuable first, a run admitted for
    some of its partitions trimmed to them (saved so, its payload to match); the others, and the partitions
    trimmed off, are recorded as deferred, with the reason, and the leases of the runs deferred whole
    released. Logs the ranking, the order, what was trimmed and what was deferred."""
    planned = {r.table: r for r in to_compact(results)}
    if not planned:
        return []
    prepared = {table: run.prepared() for table, run in planned.items()}
    decisions = budget_decisions(prepared.values(), budget_bytes=budget_bytes)
    budget = "unlimited" if budget_bytes is None else f"{budget_bytes} B"
    log.info("budget: %d planned run(s) ranked by predicted benefit over cost, budget %s:",
             len(decisions), budget)
    for d in decisions:
        log.info("  %s", d.describe())
    # Trimmed runs saved trimmed first: a run returned must be exactly what its jobs, verify and commit see.
    admitted = []
    for i, d in enumerate(decisions):
        if d.trimmed:
            try:
                admitted.append(_trimmed(planned[d.candidate.table], prepared[d.candidate.table], d))
            # The budget never fails the nightly: the run waits, whole.
            except Exception as exc:  # noqa: BLE001
                log.warning("%s: could not be trimmed to its admitted partitions (%s): deferred whole",
                            d.candidate.table, exc)
                decisions[i] = d.model_copy(update={
                    "outcome": "deferred", "deferred_partitions": (),
                    "reason": f"{OVER_BUDGET}, and could not be trimmed ({exc})"})
        elif d.ran:
            admitted.append(planned[d.candidate.table])
    _defer([d for d in decisions if not d.ran or d.trimmed], prepared, budget=budget, of=len(decisions))
    for d in decisions:
        if not d.ran:
            release_lease(d.candidate.table, planned[d.candidate.table].owner)
    spent = sum(d.admitted_bytes for d in decisions)
    deferred = [d.candidate.table for d in decisions if not d.ran]
    trimmed = [f"{d.candidate.table} ({len(d.deferred_partitions)} of {len(d.candidate.shares)} partition(s))"
               for d in decisions if d.trimmed]
    log.info("budget: %d run(s) admitted, in this order: %s; %d B of %s", len(admitted),
             ", ".join(r.table for r in admitted) or "none", spent, budget)
    log.info("budget: %d deferred to a later night: %s", len(deferred), ", ".join(deferred) or "none")
    if trimmed:
        log.info("budget: partitions deferred to a later night: %s", ", ".join(trimmed))
    return admitted


def _trimmed(run: PlannedTable, prepared: PreparedRun, decision: BudgetDecision) -> PlannedTable:
    """`run` trimmed to the partitions the budget kept: saved (`steps.keep_partitions`),
    and its payload to match."""
    kept = steps.keep_partitions(prepared, decision.kept_partitions)
    log.info("%s: trimmed by the budget to %d of %d partition(s): %s", run.table, len(kept.partitions),
             len(prepared.partitions), kept.summary())
    return run.model_copy(update={"partitions": kept.partitions, "jobs": kept.jobs,
                                  "summary": kept.summary()})
