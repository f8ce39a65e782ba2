"""The advice: candidates ranked by the bytes the probes would read, and the recommendation.

Ranking: by `total_bytes`, the probes' predicted bytes weighted by each probe's `weight` (ties: the
current layout, then the simpler strategy, then fewer keys). `vs_current` is a candidate's total over
the current layout's (0.25: a quarter of what readers fetch today).

The recommendation is the top-ranked layout other than the current one (among those within `TIE_MARGIN`
of it, the simplest: linear before zorder before hilbert, fewer keys first, since a linear sort keeps
sorted runs and costs nightly runs less), unless
- it reads no less than the table as it is: keep the layout (``action: keep-layout``);
- the spec's own sort reads within `SPEC_MARGIN` of it: keep the spec and compact (``keep-spec``), since
  a change of sort rewrites the whole table for little;
otherwise ``change-spec``, with the YAML snippet that applies it.

Write cost: `write_bytes` is what one full rewrite of the table in that layout writes (compressed bytes,
see `layout.advise.simulate.predict`; the current layout's: the table's bytes now), and `write_change`
the recommendation's against the table's bytes now. Nightly runs differ beyond that: a linear sort keeps
sorted runs (a night sorts only its new rows, `incremental`), a curve rewrites every file new rows
overlap, which is every file of a partition that gets new rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from layout.models import Frozen, Strategy
from layout.spec import SortKey

__all__ = [
    "SPEC_MARGIN",
    "TIE_MARGIN",
    "Advice",
    "CandidateAdvice",
    "LayoutStrategy",
    "ProbeWeight",
    "Recommendation",
    "Unranked",
    "rank",
    "recommend",
    "spec_snippet",
]

# The spec's own sort is kept when it reads at most this much more than the best candidate.
SPEC_MARGIN = 0.05
# Layouts this close to the best count as ties, decided for the simplest.
TIE_MARGIN = 0.01
_COMPLEXITY = {"current": 0, "linear": 1, "zorder": 2, "hilbert": 3}


# A layout the advisor weighs: the table as it is ("current"), or a sort strategy over some keys.
LayoutStrategy = Literal["current", Strategy]

class ProbeWeight(Frozen):
    name: str
    where: str
    weight: float = 1.0


class Unranked(Frozen):
    """A layout's figures before ranking: what `rank` takes."""

    strategy: LayoutStrategy
    sort_keys: tuple[SortKey, ...] = ()
    scaling: Literal["quantile", "minmax"] | None = None
    origin: Literal["table", "spec", "probes"] = "probes"
    label: str
    predicted_bytes: dict[str, int]
    write_bytes: int
    incremental: bool | None = None


class CandidateAdvice(Frozen):
    """One ranked layout with its predicted bytes per probe (the current layout's are measured)."""

    rank: int
    strategy: LayoutStrategy
    sort_keys: tuple[SortKey, ...] = ()
    scaling: Literal["quantile", "minmax"] | None = None
    origin: Literal["table", "spec", "probes"] = "probes"
    label: str
    predicted_bytes: dict[str, int]
    total_bytes: float  # the probes' bytes, weighted
    vs_current: float | None  # total_bytes over the current layout's; None when that reads nothing
    write_bytes: int
    incremental: bool | None = None  # nightly runs sort only new rows (linear); None for the current layout

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k.column for k in self.sort_keys)

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "strategy": self.strategy, "keys": list(self.keys),
                "scaling": self.scaling, "origin": self.origin, "label": self.label,
                "predicted_bytes": dict(self.predicted_bytes), "total_bytes": self.total_bytes,
                "vs_current": self.vs_current, "write_bytes": self.write_bytes,
                "incremental": self.incremental}


class Recommendation(Frozen):
    action: Literal["keep-layout", "keep-spec", "change-spec"]
    strategy: LayoutStrategy
    sort_keys: tuple[SortKey, ...] = ()
    label: str
    total_bytes: float
    vs_current: float | None
    write_bytes: int
    write_change: float | None  # write_bytes over the table's bytes now, minus 1
    reason: str
    spec_snippet: str  # YAML for the table spec; "" when nothing changes

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k.column for k in self.sort_keys)

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "strategy": self.strategy, "keys": list(self.keys),
                "label": self.label, "total_bytes": self.total_bytes, "vs_current": self.vs_current,
                "write_bytes": self.write_bytes, "write_change": self.write_change, "reason": self.reason,
                "spec_snippet": self.spec_snippet}


class Advice(Frozen):
    """One run of the advisor on one table."""

    run_id: str
    table: str
    advised_at: dt.datetime
    sample_rows: int
    table_rows: int
    seed: int
    probes: tuple[ProbeWeight, ...]
    candidates: tuple[CandidateAdvice, ...]  # ranked, the current layout among them
    recommendation: Recommendation | None
    seconds: float = Field(0.0, description="how long advising took")

    @property
    def current(self) -> CandidateAdvice | None:
        return next((c for c in self.candidates if c.strategy == "current"), None)

    def to_json(self) -> dict[str, Any]:
        """The document `lakesort advise --json` prints."""
        return {"table": self.table, "sample_rows": self.sample_rows, "table_rows": self.table_rows,
                "seed": self.seed, "run_id": self.run_id, "advised_at": self.advised_at.isoformat(),
                "seconds": round(self.seconds, 3),
                "probes": [p.model_dump() for p in self.probes],
                "candidates": [c.to_json() for c in self.candidates],
                "recommendation": self.recommendation.to_json() if self.recommendation else None}


def weighted_total(predicted: dict[str, int], probes: Sequence[ProbeWeight]) -> float:
    return float(sum(p.weight * predicted.get(p.name, 0) for p in probes))


def rank(entries: Sequence[Unranked], probes: Sequence[ProbeWeight]) -> tuple[CandidateAdvice, ...]:
    """The layouts ranked by the probes' weighted bytes (ties: current, simpler, fewer keys, label)."""
    totals = [weighted_total(e.predicted_bytes, probes) for e in entries]
    current = next((t for e, t in zip(entries, totals, strict=True) if e.strategy == "current"), None)
    order = sorted(range(len(entries)), key=lambda i: (
        totals[i], _COMPLEXITY[entries[i].strategy], len(entries[i].sort_keys), entries[i].label))
    return tuple(CandidateAdvice(**entries[i].model_dump(), rank=place, total_bytes=totals[i],
                                 vs_current=totals[i] / current if current else None)
                 for place, i in enumerate(order, start=1))


def spec_snippet(strategy: str, keys: Sequence[SortKey]) -> str:
    """The `sort:` block of a table spec for this layout."""
    lines = ["sort:", f"  strategy: {strategy}", "  keys:"]
    for key in keys:
        extra = ""
        if strategy == "linear" and key.direction == "desc":
            extra = ", direction: desc" + (", nulls: first" if key.nulls == "first" else "")
        elif strategy == "linear" and key.nulls == "last":
            extra = ", nulls: last"
        lines.append(f"    - {{column: {key.column}{extra}}}")
    return "\n".join(lines) + "\n"


def recommend(candidates: Sequence[CandidateAdvice], *, table: str,
              table_bytes: int) -> Recommendation | None:
    """The recommendation from ranked candidates (module docstring)."""
    current = next((c for c in candidates if c.strategy == "current"), None)
    others = [c for c in candidates if c.strategy != "current"]
    if not others:
        return None
    lowest = min(c.total_bytes for c in others)
    best = min((c for c in others if c.total_bytes <= lowest * (1 + TIE_MARGIN)),
               key=lambda c: (_COMPLEXITY[c.strategy], len(c.sort_keys), c.total_bytes, c.rank))
    spec = next((c for c in candidates if c.origin == "spec"), None)

    def made(c: CandidateAdvice, action: Literal["keep-layout", "keep-spec", "change-spec"],
             reason: str) -> Recommendation:
        write_change = c.write_bytes / table_bytes - 1 if table_bytes and c.strategy != "current" else None
        return Recommendation(action=action, strategy=c.strategy, sort_keys=c.sort_keys, label=c.label,
                              total_bytes=c.total_bytes, vs_current=c.vs_current, write_bytes=c.write_bytes,
                              write_change=write_change, reason=reason,
                              spec_snippet=("" if c.strategy == "current"
                                            else spec_snippet(c.strategy, c.sort_keys)))

    if current is not None and current.total_bytes <= best.total_bytes:
        if not current.total_bytes:
            return made(current, "keep-layout", "the probes read nothing from the table as it is (their "
                                                "predicates rule every file out): no layout reads less")
        return made(current, "keep-layout", "no layout is predicted to read less than the table as it is "
                                            f"(the best, {best.label}, "
                                            f"reads {_times(best.vs_current)} what it reads)")
    against = (f"{_times(best.vs_current)} what the current layout reads" if best.vs_current is not None
               else "")
    if spec is not None and spec.total_bytes <= best.total_bytes * (1 + SPEC_MARGIN):
        same = spec is best
        reason = (f"the spec's own sort, {spec.label}, is the best layout" if same else
                  f"the spec's own sort, {spec.label}, reads within {SPEC_MARGIN:.0%} of the best "
                  f"({best.label})")
        return made(spec, "keep-spec", f"{reason}: {against}; keep the spec and compact "
                                       f"(lakesort compact {table} --force)")
    beyond = (f"; the spec's own sort ({spec.label}) would read "
              f"{_times(spec.total_bytes / best.total_bytes)} what this layout "
              "reads") if spec is not None and best.total_bytes else ""
    return made(best, "change-spec", f"{best.label} reads {against}{beyond}; put the snippet in the table "
                                     f"spec and compact (lakesort compact {table} --force)")


def _times(value: float | None) -> str:
    """0.05 -> "5% of", 7.7 -> "7.7 times" (to precede "what ... reads")."""
    if value is None:
        return "-"
    return f"{100 * value:.0f}% of" if value < 2 else f"{value:.1f} times"
