"""Sorted runs: what a partition holds between full compactions, and which runs a nightly rewrite merges.

A sorted run is the set of files one lakesort run wrote into a partition: their key ranges are disjoint
and ordered, so a reader needs one file of the run for a key. A partition may hold up to
`max_sorted_runs` runs (the table spec): a nightly rewrite sorts only the files that are no run yet
(appended by other writers, or written under another spec) into a new run, instead of rewriting every
compacted file their keys overlap (which rewrote 23-87x the bytes a night appended).

The runs are derived from Iceberg metadata alone: a file belongs to the run of the lakesort commit that
added it (`lakesort.run-id` in that snapshot's summary, or, once the snapshot has expired, its path:
`layout.catalog.stamp_of`). Nothing is kept on the side.

Which runs are merged with the new one, size-tiered like Paimon's universal compaction: starting from
the newest, the next older run joins while it holds at most (1 + RUN_SIZE_RATIO) times the bytes gathered
so far; then, if the partition would still hold more than `max_sorted_runs` runs, the next older ones
join until it does not. Small runs merge early, big old runs are left alone, so each byte is rewritten
about log(bytes) times rather than every night.

What this costs (`tests/compaction/planning/test_sorted_runs.py` simulates it): with one equal append per night for 30
nights into a partition that holds a large compacted run, and at most 4 runs, bytes written / bytes
appended is 3.43. No policy can do much better: knowing every night in advance, the least is 2.97 (a
dynamic program over every choice of runs to merge, the base never merged); at most 5 runs, 2.4.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from layout.read.overlap import overlap_depth

__all__ = ["RUN_SIZE_RATIO", "RunFile", "SortedRun", "runs_to_merge", "sorted_runs"]

# Simulated over 30 nights of equal appends beside a large base run, at most 4 runs: 1.0 rewrites least
# (3.43 bytes written per byte appended; 0.5 gives 6.63, 2.0 gives 4.7; with varying appends 3.05).
RUN_SIZE_RATIO = 1.0


class RunFile(Protocol):
    """What the planner knows of a data file from the manifests: its first sort key's bounds and its commit."""

    path: str
    size: int
    snapshot_id: int
    sequence_number: int
    lo: Any
    hi: Any


@dataclass(frozen=True)
class SortedRun:
    """The files one lakesort run wrote into one partition; `sequence` orders runs (higher: newer)."""

    run_id: str
    files: tuple[Any, ...]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def sequence(self) -> int:
        return max(f.sequence_number for f in self.files)

    @property
    def disjoint(self) -> bool:
        """The run's files hold disjoint key ranges (files touching at one key value count as disjoint)."""
        return overlap_depth((f.lo, f.hi) for f in self.files) <= 1


def sorted_runs(files: Iterable[RunFile], run_of: Mapping[str, str]) -> list[SortedRun]:
    """The runs among `files` (the partition's files lakesort wrote under the current spec), newest first.
    `run_of` maps a file's path to the lakesort run that wrote it; a file not there is no run's (the caller
    treats it as new)."""
    by_run: dict[str, list[RunFile]] = {}
    for f in files:
        run = run_of.get(f.path)
        if run is not None:
            by_run.setdefault(run, []).append(f)
    runs = [SortedRun(run_id, tuple(sorted(members, key=lambda f: f.path))) for run_id, members in by_run.items()]
    return sorted(runs, key=lambda r: (-r.sequence, r.run_id))


def runs_to_merge(new_bytes: int, runs: Sequence[SortedRun], max_runs: int, ratio: float = RUN_SIZE_RATIO) -> int:
    """How many of the newest `runs` (newest first) to merge with the new files (`new_bytes` of them), so that
    the partition then holds at most `max_runs` runs. With nothing new, runs are merged only when there are
    too many (and then at least two, or merging would rewrite a run as it is)."""
    if max_runs < 1:
        raise ValueError(f"max_runs must be at least 1, got {max_runs}")
    if new_bytes <= 0:
        return len(runs) + 1 - max_runs if len(runs) > max_runs else 0
    gathered, merged = new_bytes, 0
    while merged < len(runs) and runs[merged].bytes <= gathered * (1 + ratio):
        gathered += runs[merged].bytes
        merged += 1
    # After the rewrite the partition holds the new run (the new files and the merged runs) and the rest.
    return max(merged, len(runs) + 1 - max_runs)
