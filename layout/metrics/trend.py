"""A table's headline efficiency over time: the report's trend line (the index's sparkline), and whether the
layout's health dropped (`dropped`: the scheduled advisor's trigger, the report headline's next step).

At each measurement (a run's `before` or `after`, or an on-demand one), the mean layout-independent
efficiency (`efficiency_clustered`: perfectly clustered bytes over bytes read) of the owners' probes, or
of every probe when the owners have none measured; measurements from before the column existed are
left out. Befores are points too: the line drops as new data lands unsorted and rises at each compaction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from layout.metrics.measure import Measurement

__all__ = ["DROP", "Drop", "TrendPoint", "dropped", "efficiency_trend"]

# The layout's health dropped when the headline efficiency fell by more than this share of what it was
# (new data landing unsorted, or probes the layout no longer serves): a quarter, well beyond the few percent
# a measurement moves by between nights of the same layout.
DROP = 0.25


@dataclass(frozen=True, slots=True)
class TrendPoint:
    """A table's headline efficiency at one measurement."""

    moment: datetime
    run_id: str
    phase: str
    efficiency: float


def efficiency_trend(measurements: Iterable[Measurement]) -> tuple[TrendPoint, ...]:
    """The mean efficiency_clustered per measurement (run, phase) of the owners' probes, by time."""
    measured = [m for m in measurements if m.efficiency_clustered is not None]
    owners = [m for m in measured if m.probe_kind == "owner"]
    groups: defaultdict[tuple[str, str], list[Measurement]] = defaultdict(list)
    for m in owners or measured:
        groups[m.run_id, m.phase].append(m)
    points = [TrendPoint(min(m.measured_at for m in ms), run_id, phase,
                         sum(m.efficiency_clustered or 0.0 for m in ms) / len(ms))
              for (run_id, phase), ms in groups.items()]
    return tuple(sorted(points, key=lambda p: (p.moment, p.run_id, p.phase)))


@dataclass(frozen=True, slots=True)
class Drop:
    """The headline efficiency fell from `then` (at a reference measurement) to `now` (the latest)."""

    then: TrendPoint
    now: TrendPoint


def dropped(points: Sequence[TrendPoint], *, since: datetime | None = None) -> Drop | None:
    """The drop of the latest point below the reference by more than DROP: the reference is the newest point
    at or before `since` (the last advice), or, without `since`, the newest `after` of a compaction (what the
    last compaction left); None when there is none, or no drop."""
    if not points:
        return None
    now = points[-1]
    if since is not None and now.moment <= since:  # nothing measured since
        return None
    earlier = [p for p in points[:-1] if (p.moment <= since if since is not None else p.phase == "after")]
    if not earlier:
        return None
    then = earlier[-1]
    return Drop(then, now) if now.efficiency < (1 - DROP) * then.efficiency else None
