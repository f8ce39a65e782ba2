"""The figures the compaction job plans its write with, and the checks of what Spark read against them.

Per (group, partition directory) its partition key and rows, and the sort prefix's key ranges: from the
manifests when Spark's own reader reads every file (`manifest_figures`: no first pass over the input), or
from a first pass. How many output files each partition gets (`file_counts`). The checks: every natively
read file gave the rows its manifest records (`check_native_rows`), and the write's observed key ranges lie
within the bounds its prefix was planned with (`check_ranges`). Pure: the job (`jobs/compact.py`) computes
what Spark read and calls these.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from layout.compaction.executor import partitions as partitioning
from layout.errors import InputError

if TYPE_CHECKING:
    from layout.compaction.executor.sort_prefix import PrefixPlan
    from layout.compaction.plan import RewriteGroup

__all__ = ["ManifestRangeMiss", "check_native_rows", "check_ranges", "file_counts", "manifest_figures"]

log = logging.getLogger(__name__)

Parts = dict[tuple[int, str], tuple[str, int]]  # (group id, partition directory) -> (partition key, rows)


class ManifestRangeMiss(InputError):
    """The write saw a sort key value outside the range its files' manifest bounds give: the prefix it sorted
    by may misorder rows, so the job writes the staged files again with ranges from the input itself.
    `column` names the key."""

    def __init__(self, message: str, *, column: str | None = None) -> None:
        super().__init__(message)
        self.column = column


def manifest_figures(groups: Sequence[RewriteGroup],
                     ordinals: Sequence[str | None]) -> tuple[Parts, list[dict[str, Any]]] | None:
    """Without a first pass, for a job whose every file Spark reads natively (no merge rule; a curve's index
    has no prefix, so only rows): per (group, partition) its partition key and rows, and the sort prefix's key
    ranges (figures as `sort_prefix.sort_prefix` takes them), from the manifests (`InputFile.rows`,
    `.ranges`). None when a key of the prefix has no bounds in some file's manifest entry (metrics off, a
    column added since, a type promoted since, an older plan): the first pass then measures them. The write
    checks both: its observed rows against these, its observed key ranges against the bounds
    (`check_ranges`)."""
    prefix_keys = []
    for i, ordinal in enumerate(ordinals):
        if ordinal is None:
            break
        prefix_keys.append(i)
    parts: Parts = {}
    low: dict[int, int] = {}
    high: dict[int, int] = {}
    for g in groups:
        for f in g.inputs:
            if f.rows == 0:  # no rows, no bounds: a first pass would not see its partition either
                continue
            pair = (g.group_id, partitioning.key_dir(f.partition_key))
            parts[pair] = (f.partition_key, parts.get(pair, ("", 0))[1] + f.rows)
            for i in prefix_keys:
                bound = f.ranges[i] if i < len(f.ranges) else None
                if bound is None:
                    log.info("%s: no manifest bounds of sort key %d: "
                             "measuring the key ranges in a first pass",
                             f.path, i + 1)
                    return None
                low[i], high[i] = min(low.get(i, bound[0]), bound[0]), max(high.get(i, bound[1]), bound[1])
    # Keys after the first one without an ordinal never enter the prefix: no range (None) is what they need.
    figures = [{f"__{end}{i}": (low if end == "low" else high).get(i)
                for i, o in enumerate(ordinals) if o is not None for end in ("low", "high")}]
    return parts, figures


def check_ranges(prefix: PrefixPlan, observed: Sequence[tuple[int | None, int | None]],
                 names: Sequence[str]) -> None:
    """The write's observed key ranges (smallest, largest ordinal per prefix key; None without values) lie
    within the ranges the prefix was planned with (a value outside would have been clamped onto the range's
    end, and could sort out of order): else ManifestRangeMiss, naming the key."""
    for key, name, (lo, hi) in zip(prefix.keys, names, observed, strict=False):
        if lo is not None and hi is not None and (lo < key.low or hi > key.high):
            raise ManifestRangeMiss(f"sort key {name}: the input holds ordinals {lo}..{hi}, outside the "
                                    f"range {key.low}..{key.high} of its files' manifest bounds (the table's "
                                    "metrics are wrong)", column=name)


def check_native_rows(native: Mapping[str, tuple[str, int]],
                      counted: Iterable[tuple[str | None, int]]) -> None:
    """Every natively read file gave the rows its manifest records (pyiceberg's reader checks its own files).
    `native`: Spark's name of each file -> (its path, the manifest's rows); `counted`: (Spark's name or None,
    rows), several per file when it spans partitions."""
    rows: dict[str, int] = {}
    for source, n in counted:
        if source is not None:
            rows[source] = rows.get(source, 0) + n
    for source, (path, expected) in sorted(native.items()):
        if rows.get(source, 0) != expected:
            raise InputError(f"{path}: Spark read {rows.get(source, 0)} rows of it, the manifest says "
                             f"{expected}: the file does not hold the rows Iceberg recorded for "
                             "it; nothing is committed")


def file_counts(groups: Sequence[RewriteGroup], parts: Parts) -> dict[tuple[int, str], int]:
    """Output files per (group, partition): its share of the group's planned files by rows (at least one)."""
    wanted = {g.group_id: max(1, g.output_files) for g in groups}
    group_rows: dict[int, int] = {}
    for (gid, _), (_, rows) in parts.items():
        group_rows[gid] = group_rows.get(gid, 0) + rows
    return {(gid, part): max(1, round(wanted[gid] * rows / (group_rows[gid] or 1)))
            for (gid, part), (_, rows) in sorted(parts.items())}
