"""The nightly's budget (`layout.compaction.planning.budget`): the ranking, the ageing and the admission (of
runs whole, or trimmed to their most valuable partitions) against a brute-force oracle (exact fractions, every
pair compared), and the rules one by one; a low-value table deferred night after night is admitted in the end;
the benefit prediction (`layout.compaction.planning.benefit`) from each of its sources, apportioned across the
partitions, and the nights deferred in a row read from the runs. Pure logic: values in, decisions out."""

from __future__ import annotations

import datetime as dt
import functools
import json
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout.compaction.plan import InputFile, RewriteGroup, RewritePlan
from layout.compaction.planning.benefit import (
    AdvisedLayouts,
    History,
    PastRun,
    ProbeReading,
    nights_deferred,
    predict,
)
from layout.compaction.planning.budget import (
    ALONE,
    LARGER_THAN_BUDGET,
    NO_BENEFIT,
    OVER_BUDGET,
    Candidate,
    PartitionShare,
    decide,
    partitions_deferred,
    ranked,
)

# Benefits and costs from small sets, so that ties (equal ratios, equal benefits) are common.
_BENEFITS = [0.0, 0.5, 1.0, 2.0, 3.0, 10.0, 1e9, 1 / 3]
_COSTS = [0, 1, 2, 3, 6, 10, 100]


def _candidate(i: int, benefit: float, cost: int, parts: list[tuple[float, int]], nights: int) -> Candidate:
    """A run; with `parts`, of those partitions (its benefit and cost then their sums)."""
    shares = tuple(PartitionShare(partition=f"p={k}", benefit_bytes=b, cost_bytes=c)
                   for k, (b, c) in enumerate(parts))
    if shares:
        benefit, cost = sum(s.benefit_bytes for s in shares), sum(s.cost_bytes for s in shares)
    return Candidate(table=f"ns.t{i}", benefit_bytes=benefit, cost_bytes=cost, source="fallback",
                     shares=shares, nights_deferred=nights)


_candidates = st.lists(
    st.builds(_candidate, st.integers(0, 60), st.sampled_from(_BENEFITS), st.sampled_from(_COSTS),
              st.lists(st.tuples(st.sampled_from(_BENEFITS[:6]), st.sampled_from(_COSTS[:6])), max_size=4),
              st.sampled_from([0, 0, 1, 2, 5])),
    max_size=9, unique_by=lambda c: c.table)
_budgets = st.one_of(st.none(), st.integers(0, 130))


def _compare(*pairs) -> int:
    for x, y in pairs:
        if x != y:
            return -1 if x < y else 1
    return 0


def _before(a: Candidate, b: Candidate) -> int:
    """The oracle's order: benefit x (1 + nights deferred) over cost compared by cross-multiplication (a cost
    of 0 counts as 1), then the larger priority, the smaller cost, the name."""
    pa, pb = (Fraction(a.benefit_bytes) * (1 + a.nights_deferred),
              Fraction(b.benefit_bytes) * (1 + b.nights_deferred))
    return _compare((-pa * max(b.cost_bytes, 1), -pb * max(a.cost_bytes, 1)), (-pa, -pb),
                    (a.cost_bytes, b.cost_bytes), (a.table, b.table))


def _share_before(a: PartitionShare, b: PartitionShare) -> int:
    return _compare((-Fraction(a.benefit_bytes) * max(b.cost_bytes, 1),
                     -Fraction(b.benefit_bytes) * max(a.cost_bytes, 1)),
                    (-a.benefit_bytes, -b.benefit_bytes), (a.cost_bytes, b.cost_bytes),
                    (a.partition, b.partition))


def _oracle(
    candidates: list[Candidate], budget: int | None
) -> dict[str, tuple[str, str | None, tuple[str, ...]]]:
    """The rules written out plainly, over the oracle's order: table -> (outcome, reason,
    partitions deferred)."""
    order = sorted(candidates, key=functools.cmp_to_key(_before))
    out: dict[str, tuple[str, str | None, tuple[str, ...]]] = {}
    left = budget
    for c in [c for c in order if c.benefit_bytes > 0] + [c for c in order if c.benefit_bytes == 0]:
        worth = c.benefit_bytes > 0
        if left is None or c.cost_bytes <= left:
            out[c.table] = ("ran", None, ())
            left = None if left is None else left - c.cost_bytes
            continue
        if not worth:
            out[c.table] = ("deferred", NO_BENEFIT, ())
            continue
        kept, deferred = [], []
        for share in sorted(c.shares, key=functools.cmp_to_key(_share_before)):
            if share.benefit_bytes > 0 and share.cost_bytes <= left:
                kept.append(share)
                left -= share.cost_bytes
            else:
                deferred.append(share.partition)
        if kept:
            out[c.table] = ("ran", partitions_deferred(deferred), tuple(deferred))
        else:
            out[c.table] = ("deferred", LARGER_THAN_BUDGET if c.cost_bytes > budget else OVER_BUDGET, ())
    if all(o == "deferred" for o, _, _ in out.values()):
        for c in order:
            if out[c.table] == ("deferred", LARGER_THAN_BUDGET, ()):
                out[c.table] = ("ran", ALONE, ())
                break
    return out


@settings(max_examples=300, deadline=None)
@given(_candidates, _budgets)
def test_decisions_match_the_oracle(candidates, budget):
    decisions = decide(candidates, budget_bytes=budget)
    order = sorted(candidates, key=functools.cmp_to_key(_before))
    assert [d.candidate for d in decisions] == order == ranked(reversed(candidates))
    assert [d.rank for d in decisions] == list(range(1, len(candidates) + 1))
    got = {d.candidate.table: (d.outcome, d.reason, d.deferred_partitions) for d in decisions}
    assert got == _oracle(candidates, budget)
    ran = [d for d in decisions if d.ran]
    spent = sum(d.admitted_bytes for d in ran)
    assert [d.spent_bytes for d in decisions][-1:] == ([spent] if decisions else [])
    if budget is not None and spent > budget:  # only one run larger than the whole budget, alone
        assert [d.reason for d in ran] == [ALONE]
    # a trimmed run: its kept and deferred partitions are all of them, the kept ones worth it
    for d in decisions:
        if d.trimmed:
            kept = {s.partition: s for s in d.candidate.shares if s.partition in d.kept_partitions}
            assert set(kept) | set(d.deferred_partitions) == {s.partition for s in d.candidate.shares}
            assert kept and all(s.benefit_bytes > 0 for s in kept.values())
            assert d.admitted_bytes == sum(s.cost_bytes for s in kept.values()) < d.candidate.cost_bytes
    # No deferred run or partition with a benefit would have fit in what the budget left.
    if budget is not None and not any(d.reason == ALONE for d in ran):
        assert all(d.candidate.cost_bytes > budget - spent for d in decisions
                   if not d.ran and d.candidate.benefit_bytes > 0)
        assert all(s.cost_bytes > budget - spent for d in decisions for s in d.candidate.shares
                   if s.benefit_bytes > 0 and (not d.ran or s.partition in d.deferred_partitions))


def test_the_rules_one_by_one():
    def c(name, benefit, cost):
        return Candidate(table=name, benefit_bytes=benefit, cost_bytes=cost, source="measurement")

    fleet = [c("a.big", 900, 90), c("a.best", 50, 5), c("a.mid", 40, 10), c("a.late", 20, 10),
             c("a.zero", 0, 1)]
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


def test_a_run_that_does_not_fit_keeps_its_most_valuable_partitions():
    def share(name, benefit, cost):
        return PartitionShare(partition=name, benefit_bytes=benefit, cost_bytes=cost)

    shares = (share("m=01", 10, 10), share("m=02", 60, 20), share("m=03", 0, 5), share("m=04", 30, 10))
    big = Candidate(table="a.big", benefit_bytes=100, cost_bytes=45, source="measurement", shares=shares)
    small = Candidate(table="a.small", benefit_bytes=40, cost_bytes=10, source="measurement")
    (first, second) = decide([big, small], budget_bytes=40)
    assert (first.candidate.table, first.ran, first.trimmed) == ("a.small", True, False)
    # 30 left: m=02 (3 per byte) and m=04 (3 per byte, a smaller benefit) fit, m=01 no longer;
    # m=03 is worth nothing.
    assert second.trimmed and second.kept_partitions == ("m=02", "m=04")
    assert second.deferred_partitions == ("m=01", "m=03") and second.admitted_bytes == 30 == 40 - 10
    assert second.reason == "over budget: partitions m=01, m=03 deferred" and second.spent_bytes == 40
    assert "ran 2 of 4 partition(s), 30 B (over budget: partitions m=01, m=03 deferred)" in second.describe()
    # Larger than the whole budget: its partitions that fit all the same, not the whole run alone.
    (only,) = decide([big], budget_bytes=25)
    assert (only.kept_partitions == ("m=02",)
            and only.reason.startswith("over budget: partitions m=04, m=01, m=03"))
    # No partition fits: deferred whole, and, nothing else admitted, run alone.
    assert [(d.outcome, d.reason) for d in decide([big], budget_bytes=4)] == [("ran", ALONE)]
    many = Candidate(table="a.many", benefit_bytes=8, cost_bytes=8, source="fallback",
                     shares=tuple(share(f"d={i}", 1, 1) for i in range(8)))
    (d,) = decide([many], budget_bytes=1)
    assert d.reason == "over budget: partitions d=1, d=2, d=3, d=4, d=5, ... (7 in all) deferred"
    with pytest.raises(ValueError, match="do not add up"):
        Candidate(table="a.bad", benefit_bytes=1, cost_bytes=9, source="fallback", shares=shares)


def test_a_low_value_table_deferred_night_after_night_is_admitted_in_the_end():
    """Night after night a valuable table takes the whole budget; the other, worth a tenth as much per byte,
    is deferred, its deferrals recorded as the nightly records them, and read back as its nights in a row: its
    priority grows by its benefit each night until it outranks the valuable one: night 10, ten times its
    benefit, ties (same priority, same cost: the name, "a.high" first); night 11 it runs, and the valuable
    one, deferred once, comes back first the night after."""
    recorded: dict[str, list[PastRun]] = {"a.high": [], "a.low": []}
    ran_on: dict[str, list[int]] = {"a.high": [], "a.low": []}
    for night in range(1, 13):
        tonight = T0.date() + dt.timedelta(days=night)
        fleet = [Candidate(table=t, benefit_bytes=b, cost_bytes=100, source="measurement",
                           nights_deferred=nights_deferred(History(runs=tuple(recorded[t])), tonight=tonight))
                 for t, b in (("a.high", 100.0), ("a.low", 10.0))]
        for d in decide(fleet, budget_bytes=100):
            table = d.candidate.table
            status = "committed" if d.ran else "deferred"
            at = dt.datetime.combine(tonight, dt.time(2), dt.UTC)
            recorded[table].append(PastRun(run_id=f"{table}-{night}", status=status, started_at=at))
            if d.ran:
                ran_on[table].append(night)
    assert ran_on == {"a.high": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12], "a.low": [11]}


def test_the_nights_deferred_in_a_row():
    def run(status, day, hour=2):
        return PastRun(run_id=f"{status}-{day}-{hour}", status=status,
                       started_at=T0 + dt.timedelta(days=day, hours=hour))

    def nights(*runs, tonight=10):
        return nights_deferred(History(runs=runs), tonight=(T0 + dt.timedelta(days=tonight)).date())

    assert nights() == 0 and nights(run("committed", 9)) == 0
    # 8: no row
    assert nights(run("committed", 5), run("deferred", 6), run("deferred", 7), run("deferred", 9)) == 3
    # the failed run had its turn
    assert nights(run("deferred", 6), run("failed", 7), run("deferred", 8)) == 1
    # A run trimmed to some partitions: its deferred rest counts the night;
    # dry runs and tonight's rows do not.
    assert nights(run("committed", 8), run("deferred", 8), run("dry-run", 9), run("deferred", 10)) == 1


# ---- the prediction ----------------------------------------------------------------------------------------

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def plan_of(*files: tuple[int, str | None]) -> RewritePlan:
    inputs = tuple(InputFile(path=f"f{i}", size=size, rows=1, sorted_run=run)
                   for i, (size, run) in enumerate(files))
    return RewritePlan(run_id="tonight", table="ns.t", catalog=None, table_location="x",
                       metadata_location="x", snapshot_id=1, spec_hash="h", strategy="linear", sort_keys=(),
                       target_file_size=1, writer_options={}, table_schema_json="{}", forced=False,
                       created_at=0.0, partitions=(),
                       groups=(RewriteGroup(group_id=0, partition="p=1", inputs=inputs, output_files=1,
                                            reasons=("small files",)),))


def reading(run_id, phase, probe, selected, *, hours=0, total=10_000, ideal=0, clustered=None):
    return ProbeReading(run_id=run_id, phase=phase, probe=probe, measured_at=T0 + dt.timedelta(hours=hours),
                        bytes_total=total, bytes_selected=selected, bytes_ideal=ideal,
                        bytes_clustered=clustered)


def test_the_prediction_from_each_source():
    plan = plan_of((600, None), (400, "run-1"))  # 1000 B to rewrite, 600 of them not a sorted run yet
    weights = {"p": 2.0, "q": 1.0}
    # Nothing recorded: the fallback, the unsorted input bytes.
    new = predict(plan, weights=weights, history=History())
    assert (new.source, new.benefit_bytes, new.cost_bytes, new.partitions) == ("fallback", 600.0, 1000,
                                                                              ("p=1",))
    # A measurement of the table as it is: beyond the clustered ideal
    # (else the page-level one), per table byte.
    measured = History(readings=(reading("m", "on-demand", "p", 3000, clustered=1000),
                                 reading("m", "on-demand", "q", 2000, ideal=500),
                                 reading("m", "on-demand", "gone", 9000)))  # a probe the spec dropped
    got = predict(plan, weights=weights, history=measured)
    assert (got.source == "measurement"
            and got.benefit_bytes == pytest.approx((2 * 2000 + 1500) / 10_000 * 1000))
    # The advisor beats a measurement: the current layout less the spec's, per table byte.
    advice = AdvisedLayouts(run_id="a", advised_at=T0, table_bytes=20_000, current={"p": 8000, "q": 100},
                            spec={"p": 2000, "q": 300})  # q would read more: counts as no saving
    got = predict(plan, weights=weights, history=measured.model_copy(update={"advice": advice}))
    assert got.source == "advisor" and got.benefit_bytes == pytest.approx(2 * 6000 / 20_000 * 1000)
    # A measured run beats both: what its probes stopped reading per byte it rewrote (the newest such run).
    runs = (PastRun(run_id="r1", status="committed", started_at=T0, bytes_rewritten=4000),
            PastRun(run_id="r2", status="committed", started_at=T0 + dt.timedelta(days=1),
                    bytes_rewritten=8000),
            PastRun(run_id="r3", status="failed", started_at=T0 + dt.timedelta(days=2), bytes_rewritten=8000))
    history = History(runs=runs, advice=advice, readings=(
        *measured.readings, reading("r1", "before", "p", 9000), reading("r1", "after", "p", 1000),
        reading("r2", "before", "p", 5000), reading("r2", "after", "p", 1000),
        reading("r2", "before", "q", 700), reading("r2", "after", "q", 100)))
    got = predict(plan, weights=weights, history=history)
    assert got.source == "measured-run" and "run r2" in got.detail
    assert got.benefit_bytes == pytest.approx((2 * 4000 + 600) / 8000 * 1000)


def test_the_benefit_apportioned_across_the_partitions():
    def group(gid, partition, *files):
        return RewriteGroup(group_id=gid, partition=partition, output_files=1, reasons=("small files",),
                            inputs=tuple(InputFile(path=f"{partition}/{i}", size=s, rows=1, sorted_run=r)
                                         for i, (s, r) in enumerate(files)))

    plan = plan_of((1, None)).model_copy(update={"groups": (
        group(0, "m=1", (300, None), (100, "run")), group(1, "m=2", (100, None)),
        group(2, "m=1", (200, None)), group(3, "m=3", (400, "run")))})
    got = predict(plan, weights={}, history=History())  # the fallback: 600 unsorted bytes
    assert got.benefit_bytes == 600 and got.cost_bytes == 1100
    # By each partition's unsorted bytes; m=3, only a sorted run, none.
    assert {s.partition: (s.benefit_bytes, s.cost_bytes) for s in got.shares} == \
        {"m=1": (500, 600), "m=2": (100, 100), "m=3": (0, 400)}
    measured = History(readings=(reading("m", "on-demand", "p", 3000, clustered=1000),))
    got = predict(plan, weights={"p": 1.0}, history=measured)
    assert got.benefit_bytes == pytest.approx(2000 / 10_000 * 1100)
    assert ([s.benefit_bytes for s in got.shares]
            == pytest.approx([got.benefit_bytes * 5 / 6, got.benefit_bytes / 6, 0]))
    # Every input a sorted run (a merge): by the partitions' input bytes.
    merge = plan.model_copy(update={"groups": (group(0, "m=1", (300, "a")), group(1, "m=2", (100, "b")))})
    got = predict(merge, weights={"p": 1.0}, history=measured)
    assert ([s.benefit_bytes for s in got.shares]
            == pytest.approx([got.benefit_bytes * 3 / 4, got.benefit_bytes / 4]))


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
