"""Sorted runs: what a partition holds between full compactions, and which runs a nightly rewrite merges.

A sorted run is the set of files one lakesort run wrote into a partition: their key ranges are disjoint
and ordered, so a reader needs one file of the run for a key. A partition may hold up to
`max_sorted_runs` runs (the table spec): a nightly rewrite sorts only the files that are no run yet
(appended by other writers, or written under another spec) into a new run, instead of rewriting every
compacted file their keys overlap (which rewrote 23-87x the bytes a night appended).

The runs are derived from Iceberg metadata alone: a file belongs to the run of the lakesort commit that
added it (`lakesort.run-id` in that snapshot's summary, or, once the snapshot has expired, its path:
`layout.catalog.stamp_of`). Nothing is kept on the side.

Which runs a night merges (`runs_to_merge`), online (it knows the runs and tonight's bytes, not the nights to
come):

- While the partition has a free slot, nothing is merged: the new files become a run of their own. A merge
  made before the runs allowed are used writes bytes that a shorter horizon never needs.
- When it has none, the new files are merged with the fewest of the *smallest* runs that keep it within
  `max_sorted_runs` (with nothing new, at least two runs, or merging would rewrite a run as it is), and with
  the next smallest too when that one holds at most MERGE_GROWTH (2) times the biggest run already joining:
  two runs of about one size merged together free a slot for many cheap nights, while a run much bigger than
  tonight's merge is left for later. The runs merged are the smallest, not the newest: a big night (a
  backfill) must not sit in the way of every later merge. Merging runs that are not the newest is sound
  because a table with runs has no keys: no row's meaning depends on which run holds it.

What this costs, against the least any merge policy could write knowing every night in advance (the oracle
of `tests/compaction/planning/test_sorted_runs.py`: each night's new bytes are written once, merged with any
chosen runs; the partition's compacted run, from its first compaction, holds one of the `max_sorted_runs`
slots and is never merged; cost is bytes written / bytes appended). Equal nights, `max_sorted_runs` 4: 10
nights 2.00 (optimum 1.80: 1.11x), 30 nights 3.37 (optimum 2.97: 1.13x). The worst ratio over any
horizon of 1-30 equal nights: 1.27x at 3 runs, 1.27x at 4, 1.25x at 5, 1.24x at 6 (and 1.0 at 2). No
online policy can be within 1.2x at every horizon: the best possible worst ratio (exhaustive search over
every online policy, same test file) is 1.27x at 3 runs, 1.23x at 4, 1.20x at 5, 1.18x at 6. Unequal
nights cost more where big nights fill the slots and tiny ones follow, each rewriting the smallest big run
(the oracle, seeing them coming, merged the big runs first; an online policy that did would pay whenever
another big night followed instead): the worst sequences of up to 6 nights found are 2.22x at 3 runs, 1.64x
at 4, 1.38x at 5. A backfill with slots to spare keeps a run of its own: later nights merge among themselves.
The previous policy (merge the newest runs while each is at most twice what is gathered, from the first
night on) wrote 2.60 over 10 equal nights (1.44x the optimum) and never used the fourth slot. Measured
(`tests/benchmarks/bench_nightly.py --quick --nights 10`: TPC-H SF 0.1, a day of orders a night over five
monthly partitions, 4 runs): 1.88 against the oracle's 1.79 for the same appends (1.05x), depth 4; the
previous policy 2.27 (1.27x), depth 3.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from layout.read.overlap import overlap_depth

__all__ = ["MERGE_GROWTH", "RunFile", "SortedRun", "merge_order", "runs_to_merge", "sorted_runs"]

# When the slots are full, the next smallest run joins the merge if it holds at most this many times the
# biggest run already joining. Chosen against the oracle of tests/compaction/planning/test_sorted_runs.py
# over 1-30 equal nights and random ones at 2-6 runs: 1.5 gives 1.19x the optimum over 30 equal nights at 4
# runs (2.0: 1.13x) and up to 1.74x on random nights at 3 runs (2.0: 1.59x).
MERGE_GROWTH = 2.0


class RunFile(Protocol):
    """What the planner knows of a data file from the manifests:
    its first sort key's bounds and its commit."""

    # Read-only: the planner's entries are frozen models.
    @property
    def path(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def snapshot_id(self) -> int: ...
    @property
    def sequence_number(self) -> int: ...
    @property
    def lo(self) -> Any: ...
    @property
    def hi(self) -> Any: ...


@dataclass(frozen=True)
class SortedRun:
    """The files one lakesort run wrote into one partition; `sequence` orders runs (higher: newer)."""

    run_id: str
    files: tuple[RunFile, ...]

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

    def merge_key(self) -> tuple[int, int, str]:
        """The order `runs_to_merge` takes runs in: smallest first (ties: newest first)."""
        return self.bytes, -self.sequence, self.run_id


def sorted_runs(files: Iterable[RunFile], run_of: Mapping[str, str | None]) -> list[SortedRun]:
    """The runs among `files` (the partition's files lakesort wrote under the current spec), newest first.
    `run_of` maps a file's path to the lakesort run that wrote it; a file not there is no run's (the caller
    treats it as new)."""
    by_run: dict[str, list[RunFile]] = {}
    for f in files:
        run = run_of.get(f.path)
        if run is not None:
            by_run.setdefault(run, []).append(f)
    runs = [SortedRun(run_id, tuple(sorted(members, key=lambda f: f.path)))
            for run_id, members in by_run.items()]
    return sorted(runs, key=lambda r: (-r.sequence, r.run_id))


def merge_order(runs: Iterable[SortedRun]) -> list[SortedRun]:
    """The runs in the order `runs_to_merge` counts them: smallest first (ties: newest first)."""
    return sorted(runs, key=SortedRun.merge_key)


def runs_to_merge(new_bytes: int, runs: Sequence[SortedRun], max_runs: int,
                  growth: float = MERGE_GROWTH) -> int:
    """How many runs to merge with the new files (`new_bytes` of them): the first that many of
    `merge_order(runs)` (the smallest), so that the partition then holds at most `max_runs` runs. Nothing
    while a slot is free; with nothing new, runs are merged only when there are too many (and then at least
    two, or merging would rewrite a run as it is). `runs` may come in any order."""
    if max_runs < 1:
        raise ValueError(f"max_runs must be at least 1, got {max_runs}")
    if new_bytes <= 0:
        return len(runs) + 1 - max_runs if len(runs) > max_runs else 0
    # After the rewrite the partition holds the new run (the new files and the merged runs) and the rest.
    forced = max(0, len(runs) + 1 - max_runs)
    if forced == 0:
        return 0
    ordered = merge_order(runs)
    if forced < len(ordered) and ordered[forced].bytes <= growth * ordered[forced - 1].bytes:
        return forced + 1
    return forced
