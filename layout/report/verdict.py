"""What a table page's headline says in words: what the efficiency means, and the most useful next step.

    verdict(view)   # a Verdict: the efficiency as a data owner reads it, and one next step

The efficiency is the table's headline figure (`TableView.trend`'s latest point: the owners' probes' mean
efficiency against a table perfectly clustered for each), read as "readers fetch about n times the bytes they
need" and graded:

- good, from `GOOD` (50%): within twice what any layout could read; nothing to gain that a rewrite pays for;
- fair, from `FAIR` (10%): up to ten times; a better sort order may pay;
- poor, below: more than ten times.

The next step is the first that applies of: the last run failed (fix what its error says); a verification
failed; never measured (measure it); the nightly's budget deferred it (the budget, or wait); the advisor
recommends another sort order, or compacting with the spec's (`layout.advise`); the layout's health dropped
since the last compaction (`layout.metrics.trend.dropped`: the nightly will compact it); poor or fair with no
advice yet (the scheduled advisor will say, or `lakesort advise`); else nothing to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from layout.metrics.trend import dropped
from layout.report.views import TableView

__all__ = ["FAIR", "GOOD", "Verdict", "verdict"]

GOOD = 0.5
FAIR = 0.1
# A compaction with the spec's own sort is worth suggesting when the advisor predicts it reads at most this
# share of what the table as it is reads.
WORTH_COMPACTING = 0.8

Grade = Literal["good", "fair", "poor"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The headline's words: the efficiency (None: never measured), its grade and meaning, and the next step,
    a sentence and, when it is one, the command that takes it."""

    efficiency: float | None
    grade: Grade | None
    meaning: str
    step: str
    command: str | None = None


def _grade(efficiency: float) -> Grade:
    return "good" if efficiency >= GOOD else "fair" if efficiency >= FAIR else "poor"


def _meaning(efficiency: float) -> str:
    if efficiency >= 0.995:
        return "readers fetch no more than a table perfectly clustered for the owners' probes would"
    if efficiency <= 0:
        return "readers fetch bytes although no layout would need to read any"
    times = 1 / efficiency
    spelled = f"{times:.1f}" if times < 10 else f"{times:,.0f}"
    judged = {"good": "good: within twice the least any layout could read",
              "fair": "fair: a better sort order may read less",
              "poor": "poor: the layout barely serves these queries"}[_grade(efficiency)]
    return f"readers fetch about {spelled} times the bytes a perfectly clustered table would need ({judged})"


def verdict(view: TableView) -> Verdict:
    """The headline's words for `view` (module docstring)."""
    trend = view.trend
    efficiency = trend[-1].efficiency if trend else None
    grade = _grade(efficiency) if efficiency is not None else None
    meaning = _meaning(efficiency) if efficiency is not None else "not measured yet"

    def made(step: str, command: str | None = None) -> Verdict:
        return Verdict(efficiency, grade, meaning, step, command)

    table, last = view.table, view.last_run
    if last is not None and last.status == "failed":
        return made("The last compaction failed: fix what its error says (under Latest runs); the next "
                    "nightly run tries again, or run it now.", f"lakesort compact {table}")
    verification = view.latest_verification
    if verification is not None and verification.run.verification == "failed":
        return made("The last verification failed: read its findings under Verification before the next run.")
    if not view.measured:
        return made("Measure it, to know what readers skip (each compaction measures before and after).",
                    f"lakesort measure {table}")
    deferred = view.deferred
    if deferred is not None:
        return made(f"The nightly's budget deferred its compaction ({deferred.reason}): it runs on a later "
                    "night, or raise LAKESORT_NIGHTLY_BUDGET_BYTES.")
    rec = view.advice.recommendation if view.advice is not None else None
    if rec is not None and rec.action == "change-spec":
        return made(f"Change the table's sort to {rec.label}: the advisor predicts it reads "
                    f"{_share(rec.vs_current)} of what the table reads now (the spec snippet is under What "
                    "would help).")
    if (rec is not None and rec.action == "keep-spec" and rec.vs_current is not None
            and rec.vs_current <= WORTH_COMPACTING):
        return made(f"Compact it with its own sort: the advisor predicts {_share(rec.vs_current)} of the "
                    "bytes read now.", f"lakesort compact {table} --force")
    drop = dropped(trend)
    if drop is not None:
        return made(f"New data has diluted the layout (efficiency {drop.then.efficiency:.1%} after the "
                    f"last compaction, {drop.now.efficiency:.1%} now): the next nightly compaction restores "
                    "it, or compact it now.", f"lakesort compact {table}")
    if grade == "good":
        return made("Nothing to do: the nightly compaction keeps it so.")
    if rec is not None:  # keep-layout, or the spec's sort with little to gain
        return made("Nothing to change in the sort: the advisor predicts no sort order reads much less; the "
                    "probes themselves (how much each selects) set what is left.")
    return made("See whether another sort order would read less: the nightly run advises each table weekly "
                "(What would help, below), or ask now.", f"lakesort advise {table}")


def _share(value: float | None) -> str:
    """0.05 -> "5%"; None (the table as it is reads nothing) -> "a share"."""
    return "a share" if value is None else f"{value:.0%}"
