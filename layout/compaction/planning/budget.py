"""A night's budget spent where it pays most: the planned runs ranked by predicted benefit over predicted cost,
and admitted in that order while the budget lasts. Pure: the predictions come in (`benefit`), the decisions
go out; nothing is read or written here.

    decisions = decide(candidates, budget_bytes=64 << 30)   # ranked, each "ran" or "deferred" with its reason

The rules, in order:

1. Rank: by benefit / cost, highest first, compared exactly (fractions, not floats, so that the order never
   depends on rounding); ties by the larger benefit, then the smaller cost, then the table's name: the same
   candidates always give the same order.
2. Admit in that order each candidate with a predicted benefit whose cost fits in what is left of the budget;
   one that does not fit is deferred ("over budget") and the next is tried, so a smaller run further down
   may still use the rest of the night.
3. A candidate larger than the whole budget is deferred ("larger than the whole budget"), never admitted
   beside others, unless nothing else is admitted tonight: then the best-ranked such candidate runs alone
   (its decision says so), or a table too large for any budget would never be compacted.
4. A candidate with no predicted benefit (0: its probes would read nothing less) runs only after every
   candidate with a benefit, in what is left of the budget; otherwise it is deferred ("no predicted
   benefit"). With an unlimited budget (None) everything runs, in rank order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Annotated, Literal

from pydantic import Field

from layout.models import Frozen

__all__ = ["BudgetDecision", "Candidate", "Outcome", "PredictionSource", "decide", "ranked"]

# Where a candidate's predicted benefit came from (`layout.compaction.planning.benefit`).
PredictionSource = Literal["measured-run", "advisor", "measurement", "fallback"]
Outcome = Literal["ran", "deferred"]
OVER_BUDGET = "over budget"
LARGER_THAN_BUDGET = "larger than the whole budget"
NO_BENEFIT = "no predicted benefit"
ALONE = "larger than the whole budget, run alone: nothing else was admitted tonight"


class Candidate(Frozen):
    """One table's planned run: what it rewrites and what it is predicted to save."""

    table: str
    partitions: tuple[str, ...] = ()
    # The bytes the owners' probes would stop reading, weighted by each probe's weight (`benefit`).
    benefit_bytes: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    cost_bytes: Annotated[int, Field(ge=0)]  # the input bytes the run rewrites
    source: PredictionSource
    detail: str = ""  # how the prediction was made, for the log and the report

    @property
    def ratio(self) -> Fraction:
        """Benefit per byte rewritten, exactly (a cost of 0 counts as 1 byte)."""
        return Fraction(self.benefit_bytes) / max(self.cost_bytes, 1)

    def describe(self) -> str:
        return (f"{self.table}: benefit {self.benefit_bytes:.0f} B / cost {self.cost_bytes} B "
                f"= {float(self.ratio):.3g} ({self.source}{': ' + self.detail if self.detail else ''})")


class BudgetDecision(Frozen):
    """A candidate's place in the ranking and what the budget made of it."""

    candidate: Candidate
    rank: int  # 1: the most valuable per byte
    outcome: Outcome
    reason: str | None = None  # why deferred, or why run although larger than the budget
    budget_bytes: int | None = None  # the night's budget (None: unlimited)
    spent_bytes: int = 0  # the cost of the runs that ran, this one and those ranked above it

    @property
    def ran(self) -> bool:
        return self.outcome == "ran"

    def describe(self) -> str:
        what = "ran" if self.ran else f"deferred ({self.reason})"
        if self.ran and self.reason:
            what = f"ran ({self.reason})"
        return f"#{self.rank} {what}: {self.candidate.describe()}"


def _order(candidate: Candidate) -> tuple[Fraction, float, int, str]:
    return -candidate.ratio, -candidate.benefit_bytes, candidate.cost_bytes, candidate.table


def ranked(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Most benefit per byte first; ties: larger benefit, smaller cost, table name."""
    return sorted(candidates, key=_order)


def decide(candidates: Sequence[Candidate], *, budget_bytes: int | None) -> list[BudgetDecision]:
    """Every candidate's decision, in rank order (module docstring: the rules). `budget_bytes` None: unlimited.
    Two candidates of one table are refused (a table has one run a night)."""
    seen: set[str] = set()
    for c in candidates:
        if c.table in seen:
            raise ValueError(f"{c.table}: two candidates for one table; a table has one run a night")
        seen.add(c.table)
    order = ranked(candidates)
    outcome: dict[str, tuple[Outcome, str | None]] = {}
    spent = 0

    def fits(c: Candidate) -> bool:
        return budget_bytes is None or spent + c.cost_bytes <= budget_bytes

    # Those with a benefit first, then those without, each group in rank order.
    for with_benefit in (True, False):
        for c in order:
            if (c.benefit_bytes > 0) is not with_benefit:
                continue
            if budget_bytes is not None and c.cost_bytes > budget_bytes:
                outcome[c.table] = ("deferred", LARGER_THAN_BUDGET if with_benefit else NO_BENEFIT)
            elif fits(c):
                outcome[c.table] = ("ran", None)
                spent += c.cost_bytes
            else:
                outcome[c.table] = ("deferred", OVER_BUDGET if with_benefit else NO_BENEFIT)
    if not any(o == "ran" for o, _ in outcome.values()):
        alone = next((c for c in order if c.benefit_bytes > 0 and outcome[c.table][1] == LARGER_THAN_BUDGET), None)
        if alone is not None:
            outcome[alone.table] = ("ran", ALONE)
    decisions, running = [], 0
    for rank, c in enumerate(order, start=1):
        result, reason = outcome[c.table]
        running += c.cost_bytes if result == "ran" else 0
        decisions.append(BudgetDecision(candidate=c, rank=rank, outcome=result, reason=reason,
                                        budget_bytes=budget_bytes, spent_bytes=running))
    return decisions
