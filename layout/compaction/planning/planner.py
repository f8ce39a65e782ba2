"""The rewrite planner: which partitions of an Iceberg table need sorting and compacting, and why.

For each partition (every one, or the ones a manual run names; those unchanged since lakesort's last commit
there are skipped below) the planner reads the manifest entries (no data files) and decides:

- refuse: delete files apply to the files to rewrite and cannot be applied (an equality delete on a column the
  table no longer has, or inside a list or map);
- rewrite, with reasons: forced; data files carrying deletes past `delete_file_threshold` or
  `delete_ratio_threshold` (merge-on-read tables: the rewrite applies them, `layout.read.deletes` says which);
  at least `min_small_files` files under `small_file_size`; files not written by lakesort under this spec that
  fall short of it (each shortfall named); sorted runs overlapping in the first sort key (the maximum overlap
  depth is reported);
- skip: already compacted under the same spec and unchanged since, so reruns do nothing.

Files of other writers that already meet the spec (sorted, sized, with the page indexes and bloom filters it
asks for, by their footers and manifest bounds) are adopted as they are, each foreign commit's files a sorted
run (`layout.compaction.planning.adoption`): the only reads beyond the manifests are those footers, once per
file.

Linear, unkeyed tables keep sorted runs (`layout.compaction.planning.sorted_runs`): a nightly rewrite sorts
only the files that are no run yet (other writers' appends, files of another spec) into a new run of its own
while the partition holds fewer than `max_sorted_runs`, and once every slot is taken merged with the
smallest runs (`runs_to_merge`). Keyed tables (one row per key needs every overlapping file merged), z-ordered
tables and `max_sorted_runs: 1` rewrite every file whose key range overlaps a new or small file instead, so
the partition is one run again. The chosen files are packed into groups of at most `max_group_size` input
bytes, never splitting a set of overlapping files. The plan is a frozen, JSON-serialisable value: the
Spark job and the commit step read it.
"""

from __future__ import annotations

import calendar
import hashlib
import logging
import math
import re
import struct
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFileContent
from pyiceberg.transforms import parse_transform
from pyiceberg.types import DateType, NestedField, PrimitiveType, TimestampType, TimestamptzType
from pyiceberg.utils.datetime import days_to_date, micros_to_timestamp, micros_to_timestamptz

from layout import transforms
from layout.catalog import RUN_ID, SPEC_HASH, stamp_of
from layout.compaction.executor import partitions as partitioning
from layout.compaction.executor.inputs import shareable_io_properties
from layout.compaction.executor.sort_prefix import bound_ordinal
from layout.compaction.plan import (
    InputFile,
    MergeRuleModel,
    PartitionDecision,
    RewriteGroup,
    RewritePlan,
    SortKeyModel,
)
from layout.compaction.planning.admission import check_table
from layout.compaction.planning.adoption import (
    AdoptionRecord,
    adopt,
    adoption_key,
    check_files,
    not_adoptable,
    shortfall_reason,
)
from layout.compaction.planning.deletes import delete_inputs, past_thresholds, unappliable
from layout.compaction.planning.sorted_runs import SortedRun, runs_to_merge, sorted_runs
from layout.durations import format_duration_short
from layout.errors import UsageError
from layout.models import Frozen
from layout.read.deletes import DataRef, DeleteFile, DeleteIndex, delete_file_of
from layout.read.overlap import overlap_depth
from layout.spec import resolve_sort_keys

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from layout.spec import TableSpec

log = logging.getLogger(__name__)


# ---- reading the table's manifests ------------------------------------------------------------------


class _Entry(Frozen):
    """A live manifest entry as the planner needs it: its file, partition and bounds of the first sort key."""

    path: str
    size: int
    rows: int
    content: int  # 0 data, 1 position deletes, 2 equality deletes
    partition: str
    snapshot_id: int
    sequence_number: int
    spec_id: int = 0
    partition_key: str = "[]"
    lo: Any = None
    hi: Any = None
    ranges: tuple[tuple[int, int] | None, ...] = ()


def _entries(table: Table, first_key: str, keys: Sequence[str] = (), *,
             first_transform: str = transforms.IDENTITY) -> tuple[list[_Entry], list[DeleteFile]]:
    """The live data files of the current snapshot, straight from its manifests (not `inspect.entries`,
    which decodes every column's metrics and fails on uuid columns), and its live delete files. A file under
    an older partition spec is labelled `spec-<id>/<its partition path>`: it is rewritten into the current
    spec. Partitions are told apart by spec id and encoded key, alike for data and delete files."""

    snapshot = table.current_snapshot()
    if snapshot is None:
        return [], []
    schema, specs, current = table.schema(), table.specs(), table.spec().spec_id
    key_field = schema.find_field(first_key)
    key_type = cast(PrimitiveType, key_field.field_type)  # sort keys are primitive columns (admission)
    key_fields = [schema.find_field(k) for k in keys]
    bound = _bound_of(key_field.field_type, key_type, first_transform)
    out = []
    deletes: list[DeleteFile] = []
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            df = entry.data_file
            spec = specs[manifest.partition_spec_id]
            if df.content != DataFileContent.DATA:
                df.spec_id = spec.spec_id
                deletes.append(delete_file_of(df, sequence_number=entry.sequence_number or 0,
                                              partition=partitioning.encode(df.partition, spec, schema),
                                              spec=spec))
                continue
            label = spec.partition_to_path(df.partition, schema) if spec.fields else ""
            if spec.spec_id != current:
                label = f"spec-{spec.spec_id}/{label}"
            lo, hi = (
                (df.lower_bounds or {}).get(key_field.field_id),
                (df.upper_bounds or {}).get(key_field.field_id),
            )
            out.append(_Entry(
                path=df.file_path, size=df.file_size_in_bytes, rows=df.record_count, content=int(df.content),
                # A manifest entry's snapshot id, inherited from its manifest when read (validated here).
                partition=label, snapshot_id=entry.snapshot_id,  # type: ignore[arg-type]
                sequence_number=entry.sequence_number or 0,
                spec_id=spec.spec_id, partition_key=partitioning.encode(df.partition, spec, schema),
                lo=bound(lo), hi=bound(hi),
                ranges=tuple(_ordinal_range(f, df.lower_bounds, df.upper_bounds) for f in key_fields),
            ))
    return out, deletes


def _ref(entry: _Entry) -> DataRef:
    return DataRef(entry.path, entry.spec_id, entry.partition_key, entry.sequence_number)


def _ordinal_range(field: NestedField, lower: dict[int, bytes] | None,
                   upper: dict[int, bytes] | None) -> tuple[int, int] | None:
    """A sort key's manifest bounds as ordinals (`sort_prefix.bound_ordinal`), None when either is absent or
    undecodable (a column added after the file was written, a type promoted since)."""
    low, high = (lower or {}).get(field.field_id), (upper or {}).get(field.field_id)
    if low is None or high is None:
        return None
    kind = cast(PrimitiveType, field.field_type)  # sort keys are primitive columns (admission)
    try:
        lo, hi = (bound_ordinal(field.field_type, from_bytes(kind, b)) for b in (low, high))
    except (ValueError, TypeError, struct.error):
        return None
    return (lo, hi) if lo is not None and hi is not None and lo <= hi else None


def _readable(iceberg_type: Any, value: Any) -> Any:
    """A bound in Python's own type (dates and timestamps as such), comparable within one column."""

    if isinstance(iceberg_type, DateType):
        return days_to_date(value)
    if isinstance(iceberg_type, TimestamptzType):
        return micros_to_timestamptz(value)
    if isinstance(iceberg_type, TimestampType):
        return micros_to_timestamp(value)
    return value


def _lakesort_snapshots(table: Table) -> dict[int, dict[str, str]]:
    """Snapshots committed by lakesort: id -> their lakesort summary properties, and COMMITTED_MS."""
    out = {}
    for snap in table.snapshots():
        props = snap.summary.additional_properties if snap.summary is not None else {}
        if RUN_ID in props:
            out[snap.snapshot_id] = {k: v for k, v in props.items() if k.startswith("lakesort.")}
            out[snap.snapshot_id][COMMITTED_MS] = str(snap.timestamp_ms)
    return out


COMMITTED_MS = "snapshot.timestamp-ms"  # in `_lakesort_snapshots`' values: the snapshot's commit time


# ---- deciding ---------------------------------------------------------------------------------------


def effective_hash(spec_hash: str, keys: Sequence[Any]) -> str:
    """The spec hash with the resolved sort keys in: keys taken from the table's sort order can change."""

    # A transform is in only when there is one: hashes of keys without transforms are as before.
    text = spec_hash + "|" + ";".join(
        f"{k.column},{k.direction},{k.nulls}"
        + ("" if getattr(k, "transform", transforms.IDENTITY) == transforms.IDENTITY else f",{k.transform}")
        for k in keys)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _bound_of(field_type: Any, key_type: PrimitiveType, transform: str) -> Any:
    """A manifest bound of the first key as the planner compares files by it: the value itself, or its
    transform where the transform keeps the order (day(ts)'s bounds are the days of ts's). A bucket says
    nothing from a file's bounds: every file gets bucket 0, so files touch (depth 1, one component): a new
    file has the partition sorted again, and lakesort's own files alone never do (they would, every run, if
    unbounded files overlapped everything)."""
    if not transforms.keeps_order(transform):
        return lambda raw: 0
    apply = (None if transform == transforms.IDENTITY
             else parse_transform(transform).transform(key_type))

    def bound(raw: bytes | None) -> Any:
        if raw is None:
            return None
        value = from_bytes(key_type, raw)
        return _readable(field_type, value) if apply is None else apply(value)

    return bound


def _components(files: Sequence[_Entry]) -> list[list[_Entry]]:
    """Files grouped so that no two groups overlap in the key: sort by lo, sweep."""
    known = sorted((f for f in files if f.lo is not None and f.hi is not None), key=lambda f: (f.lo, f.hi))
    unknown = [f for f in files if f.lo is None or f.hi is None]
    if unknown:  # a file without bounds may overlap anything: everything is one component
        return [list(files)]
    comps: list[list[_Entry]] = []
    reach = None
    for f in known:
        if comps and reach is not None and f.lo <= reach:
            comps[-1].append(f)
            reach = max(reach, f.hi)
        else:
            comps.append([f])
            reach = f.hi
    return comps


def plan_rewrite(
    table: Table, spec: TableSpec, *, partitions: Sequence[str] | None = None, force: bool = False,
    run_id: str | None = None, adoption: AdoptionRecord | None = None,
) -> RewritePlan:
    """Decide per partition; group the files to rewrite. Reads manifests, and the footers of other writers'
    files not checked before (`adoption`: the record of those checked, default the table's in the work
    directory)."""

    started = time.perf_counter()
    check_table(table, spec, probes="warn")  # every mistake the schema reveals, before any work (exit 2)
    keys = resolve_sort_keys(spec, table)
    layout_hash = effective_hash(spec.spec_hash, keys)
    first = keys[0].column
    entries, delete_files = _entries(table, first, [k.column for k in keys],
                                     first_transform=keys[0].transform)
    if spec.max_sorted_runs > 1 and any(k.transform != transforms.IDENTITY for k in keys):
        # Sorted runs are merged by their first key's pages (jobs/compaction/merge.py), not by a transform's
        # values: such a table's partitions are sorted whole.
        spec = spec.model_copy(update={"max_sorted_runs": 1})
    index = DeleteIndex(delete_files)
    # Per data file, the delete files that apply to it: only tables with delete files pay for the lookups.
    deletes = {e.path: found for e in entries if index and (found := index.for_file(_ref(e)))}
    ours = _lakesort_snapshots(table)
    by_partition: dict[str, list[_Entry]] = {}
    for e in entries:
        by_partition.setdefault(e.partition, []).append(e)
    candidates = _candidate_partitions(by_partition, partitions)
    verdicts = {} if force else _check_foreign(table, spec, keys, by_partition, candidates, ours, layout_hash,
                                               adoption)
    decisions: list[PartitionDecision] = []
    groups: list[RewriteGroup] = []
    for label in candidates:
        decision, chosen = _decide(label, by_partition[label], ours, spec, force, first, layout_hash,
                                   verdicts, deletes=deletes)
        if decision.action == "rewrite":
            refusal = unappliable(table, chosen, deletes)
            if refusal is not None:
                decision, chosen = decision.model_copy(update={"action": "refuse", "reasons": (refusal,)}), []
        decisions.append(decision)
        if decision.action == "rewrite":
            groups.extend(_pack(label, chosen, spec, decision.reasons, len(groups), deletes, table,
                                runs=_runs_of(chosen, ours, layout_hash)))
    snapshot = table.current_snapshot()
    plan = RewritePlan(
        run_id=run_id or f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}",
        table=spec.table, catalog=spec.catalog, table_location=table.location(),
        metadata_location=table.metadata_location,
        io_properties=shareable_io_properties(dict(table.io.properties)),
        partition_spec_id=table.spec().spec_id,
        snapshot_id=snapshot.snapshot_id if snapshot else None, spec_hash=layout_hash,
        sequence_number=(snapshot.sequence_number or 0) if snapshot else None,
        strategy=spec.sort.strategy if spec.sort else "linear",
        sort_keys=tuple(SortKeyModel(column=k.column, direction=k.direction, nulls=k.nulls,
                                     transform=k.transform) for k in keys),
        target_file_size=spec.target_file_size, writer_options=spec.writer.spark_options(),
        keys=MergeRuleModel(columns=tuple(spec.keys.columns), sequence=spec.keys.sequence,
                            merge=spec.keys.merge) if spec.keys else None,
        table_schema_json=table.schema().model_dump_json(), forced=force, created_at=time.time(),
        partitions=tuple(decisions), groups=tuple(groups),
    )
    counts = {a: sum(d.action == a for d in decisions) for a in ("rewrite", "skip", "refuse")}
    log.info("planned %s: %d partition(s) to rewrite in %d group(s) (%d bytes), "
             "%d skipped, %d refused, in %.2fs",
             spec.table, counts["rewrite"], len(groups), plan.input_bytes, counts["skip"], counts["refuse"],
             time.perf_counter() - started)
    return plan


def _candidate_partitions(by_partition: dict[str, list[_Entry]], asked: Sequence[str] | None) -> list[str]:
    """The partitions a manual run names, or every partition: `_decide` skips the ones already compacted
    under this spec and unchanged since (reading every manifest entry is needed for that anyway, and a
    "changed since lakesort's last commit" shortcut would miss files appended while a run was working)."""
    if asked:
        unknown = [p for p in asked if p not in by_partition]
        if unknown:
            sample = ", ".join(sorted(by_partition)[:5])
            raise UsageError(f"no such partition(s): {', '.join(unknown)}; partitions look like: {sample}")
        return list(dict.fromkeys(asked))
    return sorted(by_partition)


def _check_foreign(
    table: Table, spec: TableSpec, keys: Sequence[Any], by_partition: dict[str, list[_Entry]],
    candidates: Sequence[str], ours: dict[int, dict[str, str]], layout_hash: str,
    record: AdoptionRecord | None,
) -> dict[str, tuple[str, ...]]:
    """Each foreign data file of the candidate partitions -> its shortfalls against the spec's per-file rules
    (empty: it passes), from the record or its footer (`adoption.check_files`). Files under an older partition
    spec are not checked."""
    if not_adoptable(spec) is not None:
        return {}
    record = record or AdoptionRecord.for_table(spec.table, adoption_key(spec, layout_hash))
    foreign = [e for label in candidates if not label.startswith("spec-")
               for e in by_partition[label] if _stamp(e, ours)[1] != layout_hash]
    verdicts: dict[str, tuple[str, ...]] = {e.path: () for e in foreign if record.passed(e.path, e.size)}
    started = time.perf_counter()
    fresh = check_files([e.path for e in foreign if e.path not in verdicts], spec, keys, table.io)
    sizes = {e.path: e.size for entries in by_partition.values() for e in entries}
    record.update({p: sizes[p] for p, shortfalls in fresh.items() if not shortfalls}, sizes)
    if foreign:
        log.info("%s: %d file(s) of other writers: %d passed before, %d footer(s) "
                 "read in %.2fs, %d of them pass",
                 spec.table, len(foreign), len(verdicts), len(fresh), time.perf_counter() - started,
                 sum(not s for s in fresh.values()))
    return {**verdicts, **fresh}


def _decide(
    label: str, entries: list[_Entry], ours: dict[int, dict[str, str]], spec: TableSpec, force: bool,
    first_key: str, layout_hash: str, verdicts: dict[str, tuple[str, ...]] | None = None, *,
    deletes: Mapping[str, tuple[DeleteFile, ...]] | None = None,
) -> tuple[PartitionDecision, list[_Entry]]:
    """`deletes`: per data file path, the delete files that apply to it (`layout.read.deletes`)."""
    data = list(entries)
    deletes = deletes or {}
    applied = {d.path: d for e in data for d in deletes.get(e.path, ())}
    small_size = spec.small_file_size
    assert small_size is not None  # filled in by TableSpec's validation
    small = [e for e in data if e.size < small_size]
    foreign = [e for e in data if _stamp(e, ours)[1] != layout_hash]
    depth = overlap_depth((e.lo, e.hi) for e in data)
    adopted: dict[str, str] = {}  # foreign files kept as they are -> their sorted run
    rejected: dict[str, tuple[str, ...]] = {}
    known = verdicts or {}
    checked = [e for e in foreign if e.path in known]
    if checked and not force:
        passed = [e for e in checked if not known[e.path]]
        adopted, rejected = adopt(data, passed, spec, first_key)
        rejected.update({e.path: known[e.path] for e in checked if known[e.path]})
    facts: dict[str, Any] = {
        "partition": label, "files": len(data), "bytes": sum(e.size for e in data),
        "rows": sum(e.rows for e in data), "small_files": len(small), "foreign_files": len(foreign),
        "overlap_depth": depth, "delete_files": len(applied),
        "delete_rows": sum(d.record_count for d in applied.values()), "adopted_files": len(adopted),
    }
    if not data:
        return PartitionDecision(action="skip", reasons=("no data files",), **facts), []
    reasons: list[str] = []
    chosen: set[str] = set()
    if force:
        reasons.append("forced")
        chosen = {e.path for e in data}
    burdened = past_thresholds(data, deletes, spec)
    if burdened:
        reasons.append(burdened[0])
        chosen |= burdened[1]
    older = [e for e in data if e.partition.startswith("spec-")]
    if older:
        reasons.append(f"{len(older)} file(s) written under an older partition spec (id {older[0].spec_id}): "
                       "rewritten into the current spec")
        chosen |= {e.path for e in older}
    if checked and rejected:
        reasons.append(shortfall_reason(len(foreign), rejected, layout_hash))
        chosen |= set(rejected)
    elif foreign and not checked:
        why = None if force or older else not_adoptable(spec)
        reasons.append(f"{len(foreign)} file(s) not written by lakesort under spec {layout_hash}"
                       + (f" (none adopted as they are: {why})" if why else ""))
        chosen |= {e.path for e in foreign}
    if not force and _keeps_runs(spec):
        return _decide_runs(data, chosen, reasons, ours, spec, layout_hash, facts, adopted)
    if depth > 1:
        reasons.append(f"sorted runs overlap in {first_key}: depth {depth}")
        for comp in _components(data):
            if len(comp) > 1:
                chosen |= {e.path for e in comp}
    # Small files are merged while the partition is rewritten anyway. lakesort's own outputs alone never
    # trigger a rewrite: they are as the plan sized them, and rewriting them would not make them bigger.
    if chosen and len(small) >= spec.min_small_files:
        reasons.append(f"{len(small)} small file(s) under {spec.small_file_size} bytes")
        chosen |= {e.path for e in small}
    if not reasons or not chosen:
        return (PartitionDecision(action="skip", reasons=(_skip_reason(layout_hash, len(adopted)),), **facts),
                [])
    # Whatever overlaps a chosen file is rewritten with it, so the outputs' runs are disjoint again.
    picked = [e for comp in _components(data) if any(e.path in chosen for e in comp) for e in comp]
    return PartitionDecision(action="rewrite", reasons=tuple(reasons), **facts), picked


def _skip_reason(layout_hash: str, adopted: int) -> str:
    if adopted:
        return (f"meets spec {layout_hash}: {adopted} file(s) of other writers adopted as they are (sorted, "
                "sized, with the page indexes and bloom filters the spec asks for)")
    return f"already compacted under spec {layout_hash}"


def _stamp(entry: _Entry, ours: dict[int, dict[str, str]]) -> tuple[str | None, str | None]:
    """(run id, spec hash) of the lakesort run that wrote the file: its snapshot's summary, or its path once
    maintenance has expired the snapshot; (None, None) for another writer's file."""
    props = ours.get(entry.snapshot_id)
    if props is not None:
        return props.get(RUN_ID), props.get(SPEC_HASH)
    return stamp_of(entry.path) or (None, None)


def _full_merge_due(runs: Sequence[SortedRun], ours: dict[int, dict[str, str]],
                    spec: TableSpec) -> str | None:
    """The reason to merge every run of the partition (`full_compaction_every`): the oldest run written since
    the last full merge (the second oldest run: the oldest is what that merge wrote) is that old."""
    if spec.full_compaction_every is None or len(runs) < 2:
        return None
    created = _created(runs[-2], ours)
    if created is None or time.time() - created < spec.full_compaction_every.total_seconds():
        return None
    return (f"full compaction: {len(runs)} sorted runs, the oldest since the last full merge written "
            f"{time.strftime('%Y-%m-%d', time.gmtime(created))} (full_compaction_every "
            f"{format_duration_short(spec.full_compaction_every)})")


def _created(run: SortedRun, ours: dict[int, dict[str, str]]) -> float | None:
    """When the run was committed (seconds since the epoch): its snapshot's timestamp, or the time its run id
    starts with (`plan_rewrite` names runs `%Y%m%dT%H%M%S-...`) once the snapshot has expired."""
    stamps = [float(ours[f.snapshot_id][COMMITTED_MS]) / 1000 for f in run.files
              if COMMITTED_MS in ours.get(f.snapshot_id, {})]
    if stamps:
        return min(stamps)
    found = re.search(r"\d{8}T\d{6}", run.run_id)
    if found is None:
        return None
    return calendar.timegm(time.strptime(found.group(), "%Y%m%dT%H%M%S"))


def _keeps_runs(spec: TableSpec) -> bool:
    return spec.max_sorted_runs > 1 and spec.keys is None and (spec.sort is None or not spec.sort.is_curve)


def _decide_runs(
    data: list[_Entry], new: set[str], reasons: list[str], ours: dict[int, dict[str, str]], spec: TableSpec,
    layout_hash: str, facts: dict[str, Any], adopted: dict[str, str] | None = None,
) -> tuple[PartitionDecision, list[_Entry]]:
    """Sorted runs: the new files (`new`: other writers', another spec's) become one new run, merged with the
    smallest runs that `runs_to_merge` picks; the other runs stay as they are. `adopted`: other writers' files
    kept as they are, by the sorted run they form (`adoption.adopt`)."""
    run_of = {**{e.path: _stamp(e, ours)[0] for e in data}, **(adopted or {})}
    runs = sorted_runs((e for e in data if e.path not in new), run_of)
    new = set(new)
    for run in runs:
        if not run.disjoint:  # e.g. two runs' outputs stamped with one run id: sorted into the new run again
            reasons.append(f"the files of run {run.run_id} overlap in the sort key: sorted again")
            new |= {f.path for f in run.files}
    runs = [r for r in runs if r.disjoint]
    facts = {**facts, "sorted_runs": len(runs)}
    merged = runs_to_merge(sum(e.size for e in data if e.path in new), runs, spec.max_sorted_runs)
    due = _full_merge_due(runs, ours, spec)
    runs = sorted(runs, key=SortedRun.merge_key)  # runs_to_merge counts runs in this order: smallest first
    if due:
        reasons.append(due)
        merged = len(runs)
    elif merged:
        reasons.append(f"merging the smallest {merged} of {len(runs)} sorted run(s) into the new run "
                       f"({sum(r.bytes for r in runs[:merged])} bytes): at most {spec.max_sorted_runs} per "
                       "partition, once every slot is taken")
    chosen = new | {f.path for r in runs[:merged] for f in r.files}
    if not chosen:
        return PartitionDecision(action="skip", reasons=(_skip_reason(layout_hash, len(adopted or {})),),
                                 **facts), []
    return (PartitionDecision(action="rewrite", reasons=tuple(reasons), **facts),
            [e for e in data if e.path in chosen])


def _runs_of(files: Sequence[_Entry], ours: dict[int, dict[str, str]], layout_hash: str) -> dict[str, str]:
    """Per file lakesort wrote under this layout (so sorted by its keys), the run that wrote it."""
    return {e.path: run for e in files for run, written in [_stamp(e, ours)]
            if run and written == layout_hash}


def _pack(label: str, files: list[_Entry], spec: TableSpec, reasons: Sequence[str], start: int,
          deletes: Mapping[str, tuple[DeleteFile, ...]] | None = None, table: Table | None = None, *,
          runs: Mapping[str, str] | None = None) -> list[RewriteGroup]:
    """Whole overlap components, in key order, packed into groups of at most max_group_size bytes; each group
    with the delete files that apply to its inputs, each input with its sorted run (`runs`)."""
    runs = runs or {}
    deletes = deletes or {}
    groups: list[list[_Entry]] = []
    size = 0
    for comp in _components(files):
        comp_bytes = sum(e.size for e in comp)
        if groups and size + comp_bytes <= spec.max_group_size:
            groups[-1].extend(comp)
            size += comp_bytes
        else:
            groups.append(list(comp))
            size = comp_bytes
    out = []
    for i, members in enumerate(groups):
        total = sum(e.size for e in members)
        out.append(RewriteGroup(
            group_id=start + i, partition=label,
            inputs=tuple(InputFile(path=e.path, size=e.size, rows=e.rows, lo=_jsonable(e.lo),
                                   hi=_jsonable(e.hi), ranges=e.ranges, spec_id=e.spec_id,
                                   partition_key=e.partition_key, sequence_number=e.sequence_number,
                                   sorted_run=runs.get(e.path))
                   for e in members),
            output_files=max(1, math.ceil(total / spec.target_file_size)), reasons=tuple(reasons),
            deletes=delete_inputs(members, deletes, table),
        ))
    return out


def _jsonable(value: Any) -> Any:
    """Bounds go into JSON plans for humans; exotic types become their string form."""
    if value is None or isinstance(value, (int, float, str, bool)):
        return value
    return str(value)
