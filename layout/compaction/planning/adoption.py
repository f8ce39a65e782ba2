"""Adopting other writers' files as they are, when their metadata shows they already meet the spec.

A file lakesort did not write under the current spec (a "foreign" file: Iceberg's own writers, an ingest job,
lakesort under another spec) used to be rewritten once, whatever it held. A table whose writers already sort
by its sort order, at the target size, with page indexes, paid a full rewrite for nothing. Now each foreign
file of the current partition spec is checked, and adopted (left in place) when it passes:

- per file, from its footer and page indexes only, never its values: the layout rules lakesort's own output
  must pass (`layout.verify.rules.FILE_RULES`: column and offset indexes, the BoundaryOrder the spec intends,
  row groups in the first key's order, row group and file sizes within the verify bounds, bloom filters where
  the spec asks for them), each error a shortfall;
- per partition, from the manifests: it is not one of `min_small_files` small files (a single small file is
  just a writer's last one), its manifest bounds of the first sort key are known, and the files one commit of
  the other writer added are disjoint in that key, so they form a sorted run. Consecutive commits whose files
  stay disjoint together form one run (daily appends of a time-sorted table are one run); the planner counts
  these runs beside lakesort's own (`sorted_runs`) and merges them when a partition holds too many.

Only linear, unkeyed specs adopt: a curve's clustering cannot be told from one file's statistics, and a keyed
table needs every file merged to keep one row per key.

Cost: only the footers (and page index bytes) of the foreign files of the partitions being planned are read,
`READ_THREADS` at a time, through the table's FileIO. A file that passes is recorded (`AdoptionRecord`: its
path and size, in the shared work directory, one record per table and check key), so a nightly run reads the
footers of new foreign files only. That is sound because Iceberg data files are immutable and their paths
never reused, and the key covers everything the per-file verdict depends on (the layout hash with the sort
keys, the verify bounds, this check's version). The partition conditions are cheap and re-evaluated every
run. The in-process metadata cache (`layout.read.cache`) would not do: every nightly run is a new process.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from pyiceberg.io.pyarrow import PyArrowFileIO

from layout.compaction.planning.sorted_runs import RunFile
from layout.errors import InputError
from layout.io import resolve
from layout.read.overlap import overlap_depth
from layout.settings import settings
from layout.verify.facts import open_files
from layout.verify.findings import Finding, Intent
from layout.verify.rules import FILE_RULES

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

    from layout.spec import SortKey, TableSpec

__all__ = ["CHECK_VERSION", "READ_THREADS", "AdoptionRecord", "adopt", "adoption_key", "check_files",
           "not_adoptable", "shortfall_reason"]

log = logging.getLogger(__name__)

# Bump when what a file must pass changes: records made under another version are not trusted.
CHECK_VERSION = 1
# Footers read at once: each is one or two small reads, mostly waiting on storage (an object store's
# latency), so more threads than cores pay off; the decoding itself holds the GIL.
READ_THREADS = 16


def not_adoptable(spec: TableSpec) -> str | None:
    """Why no foreign file can be adopted under `spec`, or None when they can."""
    if spec.keys is not None:
        return "a keyed table merges every other writer's file to keep one row per key"
    if spec.sort.is_curve:
        return f"a {spec.sort.strategy} layout cannot be told from one file's statistics"
    return None


def adoption_key(spec: TableSpec, layout_hash: str) -> str:
    """What a file's verdict depends on: the layout (sort keys included), the verify bounds, this check."""
    text = f"{CHECK_VERSION}|{layout_hash}|{spec.verify.model_dump_json()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---- per file: the footer against the layout rules ----------------------------------------------------


def check_files(paths: Iterable[str], spec: TableSpec, keys: Sequence[SortKey], io: FileIO | None = None,
                *, threads: int = READ_THREADS) -> dict[str, tuple[str, ...]]:
    """Each file's shortfalls against the spec's per-file layout rules (empty: it passes), from its footer
    and page indexes, read in parallel; a footer that cannot be read is a shortfall too (the rewrite's input
    check then names the file)."""
    intent = replace(Intent.of(spec, keys), read_values=False)
    todo = list(dict.fromkeys(paths))
    if not todo:
        return {}
    with ThreadPoolExecutor(max(1, min(threads, len(todo)))) as pool:
        return dict(zip(todo, pool.map(lambda p: _check_one(p, intent, io), todo)))


def _check_one(path: str, intent: Intent, io: FileIO | None) -> tuple[str, ...]:
    try:
        (opened,) = open_files([_located(path, io)], None)
        findings = [f for rule in FILE_RULES for f in rule(opened, intent) if f.severity == "error"]
    except InputError as error:  # ParquetError among them: not a readable Parquet file
        return (f"footer unreadable ({error})",)
    columns: dict[str, list[str]] = {}  # shortfall -> the columns that have it, in the rules' order
    for f in findings:
        names = columns.setdefault(_shortfall(f), [])
        if f.column is not None and f.column not in names:
            names.append(f.column)
    return tuple(what + (f" ({', '.join(f'`{c}`' for c in names)})" if names else "")
                 for what, names in columns.items())


def _located(path: str, io: FileIO | None) -> tuple[Any, str]:
    """(pyarrow filesystem, path) through the table's FileIO, so its credentials apply; else by the URI."""
    if isinstance(io, PyArrowFileIO):
        scheme, netloc, local = PyArrowFileIO.parse_location(path, io.properties)
        return io.fs_by_scheme(scheme, netloc), local
    return resolve(path)


def _shortfall(f: Finding) -> str:
    """A finding in a few words that are the same for every file that has it (the columns come apart)."""
    if f.rule in ("page_index", "bloom_filter"):
        # "no column index", "no bloom filter", "column not in the file"
        return f.observed.split(" in ", 1)[0]
    if f.rule == "boundary_order":
        return f"pages {f.observed}, not {f.intended}"
    if f.rule == "row_group_order":
        return "row groups out of order"
    if f.rule in ("file_size", "row_group_size"):
        return f"{f.rule.replace('_', ' ')} outside {f.intended}"
    return f"{f.rule}: {f.observed}"


# ---- per partition: small files and sorted runs, from the manifests -----------------------------------


def adopt(data: Sequence[RunFile], candidates: Sequence[RunFile], spec: TableSpec, first_key: str
          ) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """Of a partition's `candidates` (foreign files that passed `check_files`; `data`: all its data files),
    (the adopted ones -> their sorted run, the others -> why not)."""
    small_size = spec.small_file_size
    assert small_size is not None  # filled in by TableSpec's validation
    small = [f for f in data if f.size < small_size]
    many_small = len(small) >= spec.min_small_files
    rejected: dict[str, tuple[str, ...]] = {}
    by_commit: dict[int, list[RunFile]] = {}
    for f in candidates:
        if f.lo is None or f.hi is None:
            rejected[f.path] = ((f"no manifest bounds of `{first_key}` (its place among sorted runs is "
                                 "unknown)"),)
        elif many_small and f.size < small_size:
            why = (f"a size under small_file_size ({spec.small_file_size} bytes), "
                   f"like {len(small)} file(s) of the partition")
            rejected[f.path] = (why,)
        else:
            by_commit.setdefault(f.snapshot_id, []).append(f)
    runs: list[tuple[str, list[RunFile]]] = []
    for snapshot_id, files in sorted(by_commit.items(), key=lambda kv: max(f.sequence_number for f in kv[1])):
        if overlap_depth((f.lo, f.hi) for f in files) > 1:
            why = (f"files overlapping in `{first_key}` within one commit (snapshot "
                   f"{snapshot_id}): no sorted run")
            rejected.update({f.path: (why,) for f in files})
        elif runs and overlap_depth((f.lo, f.hi) for f in [*runs[-1][1], *files]) <= 1:
            runs[-1][1].extend(files)
        else:
            runs.append((f"adopted-{snapshot_id}", list(files)))
    return {f.path: run for run, files in runs for f in files}, rejected


def shortfall_reason(foreign: int, rejected: Mapping[str, tuple[str, ...]], layout_hash: str) -> str:
    """One reason for the foreign files a partition rewrites: each shortfall with how many files have it and
    the first of them; and how many of the partition's foreign files are adopted."""
    files: dict[str, list[str]] = {}
    for path, shortfalls in sorted(rejected.items()):
        for text in shortfalls:
            files.setdefault(text, []).append(PurePosixPath(path).name)
    details = "; ".join(f"{len(names)} with {text}, e.g. {names[0]}" for text, names in files.items())
    adopted = foreign - len(rejected)
    tail = f"; the other {adopted} adopted as they are" if adopted else ""
    return (f"{len(rejected)} file(s) not written by lakesort under spec {layout_hash} fall short of it: "
            f"{details}{tail}")


# ---- the record: files already found to pass, kept between runs --------------------------------------


class AdoptionRecord:
    """The foreign files of one table that passed `check_files` under one `adoption_key`, by path and size.

    One JSON file per table in the work directory, which every worker shares (leases live there too): a
    nightly run on another worker finds it. Kept bounded by the table: files no longer live are dropped
    whenever it is written. Written whole and renamed into place; two planners writing at once (a
    `plan-rewrite` beside a nightly run) lose at most the other's additions, which costs a re-check, never
    a wrong verdict. `path=None`: nothing is kept."""

    def __init__(self, path: Path | None, key: str = "") -> None:
        self.path = path
        self.key = key
        self._files: dict[str, int] | None = None

    @classmethod
    def for_table(cls, table: str, key: str) -> AdoptionRecord:
        return cls(settings().work_dir / table / f"adopted-{key}.json", key)

    def files(self) -> dict[str, int]:
        if self._files is None:
            self._files = self._load()
        return self._files

    def passed(self, path: str, size: int) -> bool:
        return self.files().get(path) == size

    def update(self, passed: Mapping[str, int], live: Mapping[str, int]) -> None:
        """Add the files that passed now; keep only files still live (path -> size) in the table."""
        if self.path is None:
            return
        before = self.files()
        after = {p: s for p, s in {**before, **passed}.items() if live.get(p) == s}
        if after == before:
            return
        self._files = after
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        partial.write_text(json.dumps({"check": CHECK_VERSION, "key": self.key, "files": after}))
        os.replace(partial, self.path)
        for other in self.path.parent.glob("adopted-*.json"):  # verdicts under another spec are void
            if other != self.path:
                other.unlink(missing_ok=True)

    def _load(self) -> dict[str, int]:
        if self.path is None or not self.path.is_file():
            return {}
        try:
            doc = json.loads(self.path.read_text())
            if doc.get("check") != CHECK_VERSION or doc.get("key") != self.key:
                return {}
            return {str(p): int(s) for p, s in doc["files"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            log.warning("%s: unreadable adoption record (%s): its files are checked again", self.path, error)
            return {}
