"""A night's budget spent where it pays most: the planned runs ranked by predicted benefit over predicted
cost, and admitted in that order while the budget lasts; of a run that does not fit whole, its most valuable
partitions that do. Pure: the predictions come in (`benefit`), the decisions go out; nothing is read or
written here.

    decisions = decide(candidates, budget_bytes=64 << 30)   # ranked, each "ran" or "deferred" with its reason

The rules, in order:

1. Priority: the predicted benefit times (1 + the nights the table was deferred in a row), so that a run
   deferred night after night is not starved: its priority grows each night until it outranks the runs that
   keep coming first (`Candidate.priority`; the nights: `benefit.nights_deferred`).
2. Rank: by priority / cost, highest first, compared exactly (fractions, not floats, so that the order never
   depends on rounding); ties by the larger priority, then the smaller cost, then the table's name: the same
   candidates always give the same order.
3. Admit in that order each candidate with a predicted benefit whose cost fits in what is left of the budget.
   One that does not fit whole (over what is left, or larger than the whole budget) keeps its most valuable
   partitions that fit: its partitions (`Candidate.shares`: each one's part of the benefit and of the cost)
   ranked like the runs (benefit / cost, then the larger benefit, the smaller cost, the partition's name),
   each admitted if it has a benefit and fits in what is left; the run goes on trimmed to them, the others
   are deferred ("over budget: partitions X, Y deferred"). With no partition that fits, the run is deferred
   ("over budget", or "larger than the whole budget"), and the next is tried, so a smaller run further down
   may still use the rest of the night.
4. A candidate larger than the whole budget of which no partition was admitted runs whole only when nothing
   else is admitted tonight: then the best-ranked such candidate runs alone (its decision says so), or a
   table too large for any budget, in one partition, would never be compacted.
5. A candidate with no predicted benefit (0: its probes would read nothing less) runs, whole, only after every
   candidate with a benefit, in what is left of the budget; otherwise it is deferred ("no predicted
   benefit"); ageing does not lift it (0 times anything is 0). With an unlimited budget (None) everything
   runs, whole, in rank order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Annotated, Literal

from pydantic import Field, model_validator

from layout.models import Frozen

__all__ = ["BudgetDecision", "Candidate", "Outcome", "PartitionShare", "PredictionSource", "decide",
           "partitions_deferred", "ranked", "ranked_shares"]

# Where a candidate's predicted benefit came from (`layout.compaction.planning.benefit`).
PredictionSource = Literal["measured-run", "advisor", "measurement", "fallback"]
Outcome = Literal["ran", "deferred"]
OVER_BUDGET = "over budget"
LARGER_THAN_BUDGET = "larger than the whole budget"
NO_BENEFIT = "no predicted benefit"
ALONE = "larger than the whole budget, run alone: nothing else was admitted tonight"
LISTED_PARTITIONS = 5  # deferred partitions a reason names (a table may have thousands)


def partitions_deferred(partitions: Sequence[str]) -> str:
    """The reason of a run trimmed to some of its partitions: "over budget: partitions a, b deferred"."""
    named = ", ".join(partitions[:LISTED_PARTITIONS])
    more = f", ... ({len(partitions)} in all)" if len(partitions) > LISTED_PARTITIONS else ""
    return f"{OVER_BUDGET}: partitions {named}{more} deferred"


class PartitionShare(Frozen):
    """A partition's part of its run: the bytes of its rewrite and its part of the predicted benefit."""

    partition: str
    benefit_bytes: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    cost_bytes: Annotated[int, Field(ge=0)]

    @property
    def ratio(self) -> Fraction:
        return Fraction(self.benefit_bytes) / max(self.cost_bytes, 1)


class Candidate(Frozen):
    """One table's planned run: what it rewrites and what it is predicted to save."""

    table: str
    partitions: tuple[str, ...] = ()
    # The bytes the owners' probes would stop reading, weighted by each probe's weight (`benefit`).
    benefit_bytes: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    cost_bytes: Annotated[int, Field(ge=0)]  # the input bytes the run rewrites
    source: PredictionSource
    detail: str = ""  # how the prediction was made, for the log and the report
    # Per partition of the run (their costs add up to the run's); none:
    # the run is admitted whole or not at all.
    shares: tuple[PartitionShare, ...] = ()
    nights_deferred: Annotated[int, Field(ge=0)] = 0  # nights in a row the budget deferred this table

    @model_validator(mode="after")
    def _shares_add_up(self) -> Candidate:
        names = [s.partition for s in self.shares]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.table}: a partition has two shares")
        if self.shares and sum(s.cost_bytes for s in self.shares) != self.cost_bytes:
            raise ValueError(f"{self.table}: the partitions' costs do not add up to the "
                             f"run's {self.cost_bytes} B")
        return self

    @property
    def priority(self) -> float:
        """The benefit, aged: times (1 + the nights deferred in a row)."""
        return self.benefit_bytes * (1 + self.nights_deferred)

    @property
    def ratio(self) -> Fraction:
        """Priority per byte rewritten, exactly (a cost of 0 counts as 1 byte)."""
        return Fraction(self.benefit_bytes) * (1 + self.nights_deferred) / max(self.cost_bytes, 1)

    def describe(self) -> str:
        aged = f" x {1 + self.nights_deferred} (deferred {self.nights_deferred} night(s))" \
            if self.nights_deferred else ""
        return (f"{self.table}: benefit {self.benefit_bytes:.0f} B{aged} / cost {self.cost_bytes} B "
                f"= {float(self.ratio):.3g} ({self.source}{': ' + self.detail if self.detail else ''})")


class BudgetDecision(Frozen):
    """A candidate's place in the ranking and what the budget made of it."""

    candidate: Candidate
    rank: int  # 1: the most valuable per byte
    outcome: Outcome
    reason: str | None = None  # why deferred, why trimmed, or why run although larger than the budget
    budget_bytes: int | None = None  # the night's budget (None: unlimited)
    spent_bytes: int = 0  # the cost of what ran, of this one and those ranked above it
    # A run trimmed to some of its partitions (rule 3): those deferred; () when it ran whole or not at all.
    deferred_partitions: tuple[str, ...] = ()

    @property
    def ran(self) -> bool:
        return self.outcome == "ran"

    @property
    def trimmed(self) -> bool:
        return self.ran and bool(self.deferred_partitions)

    @property
    def kept_partitions(self) -> tuple[str, ...]:
        """The partitions that run tonight (a trimmed run's, in rank order; else all of them, or none)."""
        if not self.ran:
            return ()
        if not self.trimmed:
            return self.candidate.partitions or tuple(s.partition for s in self.candidate.shares)
        deferred = set(self.deferred_partitions)
        return tuple(s.partition for s in ranked_shares(self.candidate) if s.partition not in deferred)

    @property
    def admitted_bytes(self) -> int:
        """The bytes this decision lets run tonight."""
        if not self.ran:
            return 0
        if not self.trimmed:
            return self.candidate.cost_bytes
        deferred = set(self.deferred_partitions)
        return sum(s.cost_bytes for s in self.candidate.shares if s.partition not in deferred)

    def describe(self) -> str:
        what = "ran" if self.ran else f"deferred ({self.reason})"
        if self.ran and self.reason:
            what = f"ran ({self.reason})"
        if self.trimmed:
            what = f"ran {len(self.kept_partitions)} of {len(self.candidate.shares)} partition(s), " \
                   f"{self.admitted_bytes} B ({self.reason})"
        return f"#{self.rank} {what}: {self.candidate.describe()}"


def _order(candidate: Candidate) -> tuple[Fraction, float, int, str]:
    return -candidate.ratio, -candidate.priority, candidate.cost_bytes, candidate.table


def ranked(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Most priority per byte first; ties: larger priority, smaller cost, table name."""
    return sorted(candidates, key=_order)


def ranked_shares(candidate: Candidate) -> list[PartitionShare]:
    """A run's partitions, most benefit per byte first; ties: larger benefit, smaller cost, partition name
    (the table's ageing multiplies every partition's alike, so it does not change their order)."""
    return sorted(candidate.shares, key=lambda s: (-s.ratio, -s.benefit_bytes, s.cost_bytes, s.partition))


def _trim(candidate: Candidate, left: int) -> tuple[int, tuple[str, ...]] | None:
    """Rule 3's partitions: (their cost, the partitions deferred), or None when none fits."""
    kept, deferred, used = 0, [], 0
    for share in ranked_shares(candidate):
        if share.benefit_bytes > 0 and used + share.cost_bytes <= left:
            kept += 1
            used += share.cost_bytes
        else:
            deferred.append(share.partition)
    return (used, tuple(deferred)) if kept else None


def decide(candidates: Sequence[Candidate], *, budget_bytes: int | None) -> list[BudgetDecision]:
    """Every candidate's decision, in rank order (module docstring: the rules). `budget_bytes` None:
    unlimited. Two candidates of one table are refused (a table has one run a night)."""
    seen: set[str] = set()
    for c in candidates:
        if c.table in seen:
            raise ValueError(f"{c.table}: two candidates for one table; a table has one run a night")
        seen.add(c.table)
    order = ranked(candidates)
    # table -> (outcome, reason, the cost admitted, the partitions deferred)
    outcome: dict[str, tuple[Outcome, str | None, int, tuple[str, ...]]] = {}
    spent = 0

    # Those with a benefit first, then those without, each group in rank order.
    for with_benefit in (True, False):
        for c in order:
            if (c.benefit_bytes > 0) is not with_benefit:
                continue
            if budget_bytes is None or spent + c.cost_bytes <= budget_bytes:
                outcome[c.table] = ("ran", None, c.cost_bytes, ())
                spent += c.cost_bytes
            elif with_benefit and (trim := _trim(c, budget_bytes - spent)) is not None:
                used, deferred = trim
                outcome[c.table] = ("ran", partitions_deferred(deferred), used, deferred)
                spent += used
            elif not with_benefit:
                outcome[c.table] = ("deferred", NO_BENEFIT, 0, ())
            else:
                outcome[c.table] = ("deferred",
                                    LARGER_THAN_BUDGET if c.cost_bytes > budget_bytes else OVER_BUDGET, 0, ())
    if not any(o[0] == "ran" for o in outcome.values()):
        alone = next((c for c in order if c.benefit_bytes > 0 and outcome[c.table][1] == LARGER_THAN_BUDGET),
                     None)
        if alone is not None:
            outcome[alone.table] = ("ran", ALONE, alone.cost_bytes, ())
    decisions, running = [], 0
    for rank, c in enumerate(order, start=1):
        result, reason, used, deferred = outcome[c.table]
        running += used
        decisions.append(BudgetDecision(candidate=c, rank=rank, outcome=result, reason=reason,
                                        budget_bytes=budget_bytes, spent_bytes=running,
                                        deferred_partitions=deferred))
    return decisions
