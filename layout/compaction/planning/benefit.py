"""What a planned run is predicted to save: the bytes the owners' probes would stop reading, weighted by each
probe's `weight`, over the bytes it rewrites (the `budget.Candidate` the nightly ranks). Pure: the table's
history comes in as values (`History`, made from the rows of lakesort's own tables by
`layout.compaction.pipeline.nightly_budget`).

The prediction, from the first source that has one (`Candidate.source`):

1. ``measured-run``: the table's last committed run whose owner probes were measured before and after it.
   What the probes stopped reading then, per byte it rewrote, times the bytes tonight's run rewrites. The
   return a rewrite of this table actually had: the best evidence there is.
2. ``advisor``: the last advice (`lakesort advise`, `lakesort.advice`): the probes' bytes in the current
   layout less those predicted for the spec's layout, per byte of the table, times tonight's bytes.
3. ``measurement``: the newest measurement of the owner probes (an on-demand one: `lakesort_report`, `lakesort
   measure`): what each reads beyond a table perfectly clustered for it (`bytes_clustered`, else the
   page-level `bytes_ideal`), per byte of the table, times tonight's bytes.
4. ``fallback`` (a new table: nothing measured, nothing advised): the plan's input bytes that are not yet a
   sorted run of the table's layout (files other writers wrote, or written under another layout), as if one
   probe of weight 1 read them all and a sort let it skip them: an optimistic guess, in the same unit as the
   others, so that a new table is compacted early and measured, and ranked by its measurements after.

Sources 1-3 assume that the saving is spread over the table's bytes like the rewrite is (a byte rewritten
tonight is worth what a byte was worth then); a probe the spec no longer lists is left out, and so is the
saving of a probe that would read more.

Per partition (`Candidate.shares`, what the budget trims a run to): the run's benefit is apportioned across
its planned partitions by each one's bytes that are not yet sorted runs of the table's layout (the bytes a
sort would cluster; the fallback's own measure, so there it is exact), and by each one's input bytes when no
input of the run is unsorted (a merge of sorted runs only). Not by the probes' bytes per partition:
`lakesort.pruning_metrics` records a probe's bytes for the whole table, not per partition. A partition whose
inputs are all sorted runs, in a run that has unsorted ones, gets no share: it is deferred before the others.

Ageing (`nights_deferred`): the nights in a row the budget deferred the table, whole or some of its
partitions, from its rows of `lakesort.compaction_runs`; the budget multiplies the benefit by one more than
that. Counted per table: the records name no partition, so a partition deferred with others counts its
table's nights.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from layout.compaction.plan import RewritePlan
from layout.compaction.planning.budget import Candidate, PartitionShare, PredictionSource
from layout.models import Frozen

__all__ = ["AdvisedLayouts", "History", "PastRun", "ProbeReading", "nights_deferred", "predict", "shares",
           "unsorted_bytes"]

# The statuses of a run that was given its turn (it ran, or had nothing to do): they end a run of deferrals.
_TURN = frozenset({"committed", "failed", "nothing-to-do"})


class PastRun(Frozen):
    """A row of `lakesort.compaction_runs`, as far as the prediction reads it."""

    run_id: str
    status: str
    started_at: dt.datetime
    bytes_rewritten: int = 0


class ProbeReading(Frozen):
    """An owner probe's row of `lakesort.pruning_metrics`, as far as the prediction reads it."""

    run_id: str
    phase: str  # before | after | on-demand
    probe: str
    measured_at: dt.datetime
    bytes_total: int
    bytes_selected: int
    bytes_ideal: int
    bytes_clustered: int | None = None


class AdvisedLayouts(Frozen):
    """The last advice of a table (`lakesort.advice`): per probe,
    the bytes read now and in the spec's layout."""

    run_id: str
    advised_at: dt.datetime
    table_bytes: int
    current: dict[str, int]
    spec: dict[str, int]

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]]) -> AdvisedLayouts | None:
        """From the rows of the table's newest advice run (by advised_at, then run id); None without a row for
        the current layout and one for the spec's."""
        if not rows:
            return None
        newest = max(rows, key=lambda r: (r["advised_at"], r["run_id"]))
        run = [r for r in rows if r["run_id"] == newest["run_id"]]
        current = next((r for r in run if r["strategy"] == "current"), None)
        spec = next((r for r in run if r["origin"] == "spec" and r["strategy"] != "current"), None)
        if current is None or spec is None:
            return None
        return cls(run_id=newest["run_id"], advised_at=newest["advised_at"],
                   table_bytes=newest["table_bytes"], current=json.loads(current["predicted_bytes"]),
                   spec=json.loads(spec["predicted_bytes"]))


class History(Frozen):
    """What lakesort recorded of one table: its runs, its owner probes' measurements, its last advice."""

    runs: tuple[PastRun, ...] = ()
    readings: tuple[ProbeReading, ...] = ()
    advice: AdvisedLayouts | None = None


def unsorted_bytes(plan: RewritePlan) -> int:
    """The plan's input bytes that are not a sorted run of the plan's layout."""
    return sum(f.size for g in plan.groups for f in g.inputs if f.sorted_run is None)


def shares(plan: RewritePlan, benefit_bytes: float) -> tuple[PartitionShare, ...]:
    """`benefit_bytes` apportioned across the plan's partitions (the module docstring's rule), with each one's
    input bytes as its cost; in the plan's partition order."""
    cost: dict[str, int] = {}
    unsorted: dict[str, int] = {}
    for g in plan.groups:
        cost[g.partition] = cost.get(g.partition, 0) + g.bytes
        unsorted[g.partition] = (unsorted.get(g.partition, 0)
                                 + sum(f.size for f in g.inputs if f.sorted_run is None))
    weight = unsorted if sum(unsorted.values()) > 0 else cost
    total = sum(weight.values())
    return tuple(PartitionShare(partition=p, cost_bytes=c,
                                benefit_bytes=benefit_bytes * weight[p] / total if total > 0 else 0.0)
                 for p, c in cost.items())


def nights_deferred(history: History, *, tonight: dt.date) -> int:
    """The nights before `tonight` (UTC dates of the runs' starts) on which the budget deferred the table,
    whole or in part, counted back from the newest until a night when its run had its turn without a deferral
    (committed, failed or nothing to do; dry runs do not count). Nights without a row (the nightly did not
    plan the table) neither count nor break the run."""
    nights: dict[dt.date, set[str]] = {}
    for run in history.runs:
        day = run.started_at.astimezone(dt.UTC).date()
        if day < tonight and (run.status == "deferred" or run.status in _TURN):
            nights.setdefault(day, set()).add(run.status)
    count = 0
    for day in sorted(nights, reverse=True):
        if "deferred" not in nights[day]:
            break
        count += 1
    return count


def _weighted(saved: Mapping[str, float], weights: Mapping[str, float]) -> float:
    return sum(weights[p] * max(v, 0.0) for p, v in saved.items() if p in weights)


def _measured_run(history: History, weights: Mapping[str, float]) -> tuple[float, str] | None:
    """Saved weighted bytes per byte rewritten, by the last committed run measured before and after."""
    by_run: dict[str, dict[str, dict[str, int]]] = {}
    for r in history.readings:
        if r.phase in ("before", "after") and r.probe in weights:
            by_run.setdefault(r.run_id, {}).setdefault(r.phase, {})[r.probe] = r.bytes_selected
    for run in sorted(history.runs, key=lambda r: (r.started_at, r.run_id), reverse=True):
        phases = by_run.get(run.run_id, {})
        if run.status != "committed" or run.bytes_rewritten <= 0 or not phases.get("before") \
                or not phases.get("after"):
            continue
        before, after = phases["before"], phases["after"]
        saved = _weighted({p: before[p] - after[p] for p in before.keys() & after.keys()}, weights)
        return (saved / run.bytes_rewritten,
                f"run {run.run_id} saved {saved:.0f} weighted probe bytes rewriting {run.bytes_rewritten} B")
    return None


def _advised(history: History, weights: Mapping[str, float]) -> tuple[float, str] | None:
    advice = history.advice
    if advice is None or advice.table_bytes <= 0:
        return None
    saved = _weighted({p: advice.current[p] - advice.spec.get(p, advice.current[p]) for p in advice.current},
                      weights)
    return (saved / advice.table_bytes,
            (f"advice {advice.run_id}: the spec's layout saves {saved:.0f} weighted probe bytes of a "
            f"{advice.table_bytes} B table"))


def _measured(history: History, weights: Mapping[str, float]) -> tuple[float, str] | None:
    newest: dict[str, ProbeReading] = {}
    for r in history.readings:
        if r.probe in weights and (r.probe not in newest or r.measured_at > newest[r.probe].measured_at):
            newest[r.probe] = r
    total = max((r.bytes_total for r in newest.values()), default=0)
    if total <= 0:
        return None
    ideal = {p: r.bytes_clustered if r.bytes_clustered is not None else r.bytes_ideal
             for p, r in newest.items()}
    saved = _weighted({p: r.bytes_selected - ideal[p] for p, r in newest.items()}, weights)
    when = max(r.measured_at for r in newest.values())
    return (saved / total, (f"measured {when:%Y-%m-%d %H:%M}: the probes read {saved:.0f} weighted bytes "
                           f"beyond a perfectly clustered {total} B table"))


def predict(plan: RewritePlan, *, weights: Mapping[str, float], history: History,
            partitions: Iterable[str] = ()) -> Candidate:
    """The candidate of `plan` (a table's run tonight): its cost (input bytes), its predicted benefit from
    the first source that has one, apportioned across its partitions, and the nights it was deferred in a row
    before the plan's night (module docstring); `weights`: the spec's owner probes, name -> weight."""
    cost = plan.input_bytes
    parts = tuple(partitions) or tuple(sorted({g.partition for g in plan.groups}))
    nights = nights_deferred(history, tonight=dt.datetime.fromtimestamp(plan.created_at, dt.UTC).date())
    sources: tuple[tuple[PredictionSource, tuple[float, str] | None], ...] = (
        ("measured-run", _measured_run(history, weights)), ("advisor", _advised(history, weights)),
        ("measurement", _measured(history, weights)))
    for source, found in sources:
        if found is not None:
            per_byte, detail = found
            return Candidate(table=plan.table, partitions=parts, benefit_bytes=per_byte * cost,
                             cost_bytes=cost, source=source, detail=detail,
                             shares=shares(plan, per_byte * cost), nights_deferred=nights)
    unsorted = unsorted_bytes(plan)
    return Candidate(table=plan.table, partitions=parts, benefit_bytes=float(unsorted), cost_bytes=cost,
                     source="fallback", detail=f"nothing measured or advised: {unsorted} B of the input are "
                                               "not sorted runs yet", shares=shares(plan, float(unsorted)),
                     nights_deferred=nights)
