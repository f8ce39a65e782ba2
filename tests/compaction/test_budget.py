"""The nightly's budget (`layout.compaction.planning.budget`): the ranking and the admission against a
brute-force oracle (exact fractions, every pair compared), and the rules one by one; the benefit prediction
(`layout.compaction.planning.benefit`) from each of its sources. Pure logic: values in, decisions out."""

from __future__ import annotations

import datetime as dt
import functools
import json
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout.compaction.plan import InputFile, RewriteGroup, RewritePlan
from layout.compaction.planning.benefit import AdvisedLayouts, History, PastRun, ProbeReading, predict
from layout.compaction.planning.budget import (
    ALONE,
    LARGER_THAN_BUDGET,
    NO_BENEFIT,
    OVER_BUDGET,
    Candidate,
    decide,
    ranked,
)

# Benefits and costs from small sets, so that ties (equal ratios, equal benefits) are common.
_candidates = st.lists(
    st.builds(lambda i, b, c: Candidate(table=f"ns.t{i}", benefit_bytes=b, cost_bytes=c, source="fallback"),
              st.integers(0, 60), st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 10.0, 1e9, 1 / 3]),
              st.sampled_from([0, 1, 2, 3, 6, 10, 100])),
    max_size=9, unique_by=lambda c: c.table)
_budgets = st.one_of(st.none(), st.integers(0, 130))


def _before(a: Candidate, b: Candidate) -> int:
    """The oracle's order: benefit/cost compared by cross-multiplication (a cost of 0 counts as 1)."""
    left, right = Fraction(a.benefit_bytes) * max(b.cost_bytes, 1), Fraction(b.benefit_bytes) * max(a.cost_bytes, 1)
    if left != right:
        return -1 if left > right else 1
    for x, y in ((-a.benefit_bytes, -b.benefit_bytes), (a.cost_bytes, b.cost_bytes), (a.table, b.table)):
        if x != y:
            return -1 if x < y else 1
    return 0


def _oracle(candidates: list[Candidate], budget: int | None) -> dict[str, tuple[str, str | None]]:
    """The rules written out plainly, over the oracle's order."""
    order = sorted(candidates, key=functools.cmp_to_key(_before))
    out: dict[str, tuple[str, str | None]] = {}
    left = budget
    for c in [c for c in order if c.benefit_bytes > 0] + [c for c in order if c.benefit_bytes == 0]:
        worth = c.benefit_bytes > 0
        if left is None:
            out[c.table] = ("ran", None)
        elif c.cost_bytes > budget:
            out[c.table] = ("deferred", LARGER_THAN_BUDGET if worth else NO_BENEFIT)
        elif c.cost_bytes <= left:
            out[c.table] = ("ran", None)
            left -= c.cost_bytes
        else:
            out[c.table] = ("deferred", OVER_BUDGET if worth else NO_BENEFIT)
    if all(o == "deferred" for o, _ in out.values()):
        for c in order:
            if out[c.table] == ("deferred", LARGER_THAN_BUDGET):
                out[c.table] = ("ran", ALONE)
                break
    return out


@settings(max_examples=300, deadline=None)
@given(_candidates, _budgets)
def test_decisions_match_the_oracle(candidates, budget):
    decisions = decide(candidates, budget_bytes=budget)
    order = sorted(candidates, key=functools.cmp_to_key(_before))
    assert [d.candidate for d in decisions] == order == ranked(reversed(candidates))
    assert [d.rank for d in decisions] == list(range(1, len(candidates) + 1))
    assert {d.candidate.table: (d.outcome, d.reason) for d in decisions} == _oracle(candidates, budget)
    ran = [d for d in decisions if d.ran]
    spent = sum(d.candidate.cost_bytes for d in ran)
    if budget is not None and spent > budget:  # only one run larger than the whole budget, alone
        assert [d.reason for d in ran] == [ALONE]
    # No deferred run with a benefit would have fit in what the budget left.
    if budget is not None and not any(d.reason == ALONE for d in ran):
        assert all(d.candidate.cost_bytes > budget - spent for d in decisions
                   if not d.ran and d.candidate.benefit_bytes > 0)


def test_the_rules_one_by_one():
    def c(name, benefit, cost):
        return Candidate(table=name, benefit_bytes=benefit, cost_bytes=cost, source="measurement")

    fleet = [c("a.big", 900, 90), c("a.best", 50, 5), c("a.mid", 40, 10), c("a.late", 20, 10), c("a.zero", 0, 1)]
    got = {d.candidate.table: (d.rank, d.outcome, d.reason) for d in decide(fleet, budget_bytes=20)}
    assert got == {"a.big": (1, "deferred", LARGER_THAN_BUDGET),  # 10 per byte, but larger than the night
                   "a.best": (2, "ran", None), "a.mid": (3, "ran", None),
                   "a.late": (4, "deferred", OVER_BUDGET),
                   "a.zero": (5, "ran", None)}  # no benefit: after the others, in what the budget left
    # Nothing else fits: the best of those larger than the budget runs alone, and says so.
    got = {d.candidate.table: (d.outcome, d.reason) for d in decide(fleet[:1] + [c("a.other", 5, 50)],
                                                                     budget_bytes=20)}
    assert got == {"a.big": ("ran", ALONE), "a.other": ("deferred", LARGER_THAN_BUDGET)}
    # Unlimited: everything, in rank order; no benefit: deferred when the budget has nothing left.
    assert all(d.ran for d in decide(fleet, budget_bytes=None))
    assert {d.candidate.table: d.reason for d in decide([c("a.zero", 0, 5)], budget_bytes=1)} == \
        {"a.zero": NO_BENEFIT}
    with pytest.raises(ValueError, match="a.mid: two candidates"):
        decide([c("a.mid", 1, 1), c("a.mid", 2, 2)], budget_bytes=None)


# ---- the prediction ----------------------------------------------------------------------------------------

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def plan_of(*files: tuple[int, str | None]) -> RewritePlan:
    inputs = tuple(InputFile(path=f"f{i}", size=size, rows=1, sorted_run=run) for i, (size, run) in enumerate(files))
    return RewritePlan(run_id="tonight", table="ns.t", catalog=None, table_location="x", metadata_location="x",
                       snapshot_id=1, spec_hash="h", strategy="linear", sort_keys=(), target_file_size=1,
                       writer_options={}, table_schema_json="{}", forced=False, created_at=0.0, partitions=(),
                       groups=(RewriteGroup(group_id=0, partition="p=1", inputs=inputs, output_files=1,
                                            reasons=("small files",)),))


def reading(run_id, phase, probe, selected, *, hours=0, total=10_000, ideal=0, clustered=None):
    return ProbeReading(run_id=run_id, phase=phase, probe=probe, measured_at=T0 + dt.timedelta(hours=hours),
                        bytes_total=total, bytes_selected=selected, bytes_ideal=ideal, bytes_clustered=clustered)


def test_the_prediction_from_each_source():
    plan = plan_of((600, None), (400, "run-1"))  # 1000 B to rewrite, 600 of them not a sorted run yet
    weights = {"p": 2.0, "q": 1.0}
    # Nothing recorded: the fallback, the unsorted input bytes.
    new = predict(plan, weights=weights, history=History())
    assert (new.source, new.benefit_bytes, new.cost_bytes, new.partitions) == ("fallback", 600.0, 1000, ("p=1",))
    # A measurement of the table as it is: beyond the clustered ideal (else the page-level one), per table byte.
    measured = History(readings=(reading("m", "on-demand", "p", 3000, clustered=1000),
                                 reading("m", "on-demand", "q", 2000, ideal=500),
                                 reading("m", "on-demand", "gone", 9000)))  # a probe the spec dropped
    got = predict(plan, weights=weights, history=measured)
    assert got.source == "measurement" and got.benefit_bytes == pytest.approx((2 * 2000 + 1500) / 10_000 * 1000)
    # The advisor beats a measurement: the current layout less the spec's, per table byte.
    advice = AdvisedLayouts(run_id="a", advised_at=T0, table_bytes=20_000, current={"p": 8000, "q": 100},
                            spec={"p": 2000, "q": 300})  # q would read more: counts as no saving
    got = predict(plan, weights=weights, history=measured.model_copy(update={"advice": advice}))
    assert got.source == "advisor" and got.benefit_bytes == pytest.approx(2 * 6000 / 20_000 * 1000)
    # A measured run beats both: what its probes stopped reading per byte it rewrote (the newest such run).
    runs = (PastRun(run_id="r1", status="committed", started_at=T0, bytes_rewritten=4000),
            PastRun(run_id="r2", status="committed", started_at=T0 + dt.timedelta(days=1), bytes_rewritten=8000),
            PastRun(run_id="r3", status="failed", started_at=T0 + dt.timedelta(days=2), bytes_rewritten=8000))
    history = History(runs=runs, advice=advice, readings=(
        *measured.readings, reading("r1", "before", "p", 9000), reading("r1", "after", "p", 1000),
        reading("r2", "before", "p", 5000), reading("r2", "after", "p", 1000),
        reading("r2", "before", "q", 700), reading("r2", "after", "q", 100)))
    got = predict(plan, weights=weights, history=history)
    assert got.source == "measured-run" and "run r2" in got.detail
    assert got.benefit_bytes == pytest.approx((2 * 4000 + 600) / 8000 * 1000)


def test_advice_rows_read_back():
    def row(run_id, strategy, origin, predicted, at):
        return {"run_id": run_id, "advised_at": at, "strategy": strategy, "origin": origin, "table_bytes": 10,
                "predicted_bytes": json.dumps(predicted)}

    rows = [row("old", "current", "table", {"p": 1}, T0), row("old", "linear", "spec", {"p": 0}, T0),
            row("new", "current", "table", {"p": 9}, T0 + dt.timedelta(days=1)),
            row("new", "zorder", "probes", {"p": 1}, T0 + dt.timedelta(days=1)),
            row("new", "linear", "spec", {"p": 3}, T0 + dt.timedelta(days=1))]
    advised = AdvisedLayouts.from_rows(rows)
    assert (advised.run_id, advised.current, advised.spec) == ("new", {"p": 9}, {"p": 3})
    assert AdvisedLayouts.from_rows(rows[2:4]) is None and AdvisedLayouts.from_rows([]) is None
