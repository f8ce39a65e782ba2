"""A table's headline efficiency over time: the trend line (sparkline) of the index.

At each measurement (a run's `before` or `after`, or an on-demand one), the mean layout-independent
efficiency (`efficiency_clustered`: perfectly clustered bytes over bytes read) of the owners' probes, or
of every probe when the owners have none measured; measurements from before the column existed are
left out. Befores are points too: the line drops as new data lands unsorted and rises at each compaction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from layout.report.rows import Measurement

__all__ = ["TrendPoint", "efficiency_trend"]


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
