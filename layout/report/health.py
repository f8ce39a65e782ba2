"""Clustering health over time, per sort key: what a table page shows of `lakesort.clustering_metrics`.

Each measurement (a run's `before` or `after`, or an on-demand one) recorded a row per sort key and
partition; per key they are summarised over the partitions by `layout.metrics.clustering.summarize`
(averages weighted by files, the largest depth, histograms summed). Every measurement is a point in
time, befores included: between two compactions new files land and the depth grows, and the next
compaction brings it down, which is the story the chart tells.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from layout.metrics.clustering import KeySummary, summarize
from layout.report.rows import ClusteringRow

__all__ = ["DEEPEST", "HealthPoint", "KeyHealth", "key_health"]

DEEPEST = 10  # partitions a page lists for the latest measurement of a key


@dataclass(frozen=True, slots=True)
class HealthPoint:
    """One measurement of one sort key over every partition."""

    moment: datetime
    run_id: str
    phase: str
    summary: KeySummary


@dataclass(frozen=True, slots=True)
class KeyHealth:
    """A sort key's measurements, oldest first."""

    sort_key: str
    points: tuple[HealthPoint, ...]

    @property
    def latest(self) -> HealthPoint:
        return self.points[-1]

    @property
    def previous(self) -> HealthPoint | None:
        """The measurement before the latest (a run's `before` when the latest is its `after`)."""
        return self.points[-2] if len(self.points) > 1 else None

    @property
    def deepest(self) -> tuple[ClusteringRow, ...]:
        """The latest measurement's partitions that overlap (depth above 1), deepest first,
        DEEPEST at most."""
        return tuple(r for r in self.latest.summary.deepest if r.average_depth > 1)[:DEEPEST]

    @property
    def overlapping_partitions(self) -> int:
        return sum(1 for r in self.latest.summary.deepest if r.average_depth > 1)


def key_health(rows: Iterable[ClusteringRow], order: Sequence[str] = ()) -> tuple[KeyHealth, ...]:
    """Per sort key, its measurements by time: the keys of `order` (the spec's) first, in that order, then
    any other key measured (a key the spec no longer has), by name."""
    by_measurement: defaultdict[tuple[str, str], list[ClusteringRow]] = defaultdict(list)
    for row in rows:
        by_measurement[row.run_id, row.phase].append(row)
    points: defaultdict[str, list[HealthPoint]] = defaultdict(list)
    for (run_id, phase), measured in sorted(by_measurement.items(),
                                            key=lambda item: (min(r.measured_at for r in item[1]), item[0])):
        moment = min(r.measured_at for r in measured)
        for summary in summarize(measured):
            points[summary.sort_key].append(HealthPoint(moment, run_id, phase, summary))
    keys = [k for k in order if k in points] + sorted(k for k in points if k not in order)
    return tuple(KeyHealth(key, tuple(points[key])) for key in keys)
