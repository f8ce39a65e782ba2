"""Clustering health per sort key and partition, from the files' key bounds: how deeply files overlap.

In the spirit of Snowflake's SYSTEM$CLUSTERING_INFORMATION, for each sort key and partition of a
snapshot: the files, how many other files each overlaps on average (`average_overlaps`), each file's
depth (the most files that pairwise overlap and include it: 1 for a file that overlaps nothing) on
average and at most (`average_depth`, `max_depth`: the files a point lookup may have to read), and a
histogram of the depths (`depth_histogram`: exact buckets 1..16, then powers of two, 32 holding 17..32).
The overlap relation and its depths are `layout.read.overlap`'s, the rewrite planner's and the layout
rules' own: ranges that only touch at one key do not overlap, a file without bounds overlaps all.

Nothing reads data. The bounds are the Iceberg manifests' lower/upper bounds of the key's field id
(what pyiceberg and Spark record; strings may be truncated there, which only widens them); a file whose
entry has none (a metrics mode of `counts` or `none`, a column added after the file was written) falls
back to its footer's row-group statistics, for at most `FOOTER_FALLBACK_FILES` files per key (beyond,
and where the footer has none either, the file counts as unbounded: `files_unbounded` says how many).
One pass over the snapshot's data manifests serves every key. Rows go to `lakesort.clustering_metrics`
(schema in `layout.metrics.store`), one per (run, table, phase, sort key, partition), recorded with each
measurement.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import ManifestContent
from pyiceberg.types import PrimitiveType
from pyiceberg.utils.concurrent import ExecutorFactory

from layout.errors import InputError
from layout.io import resolve
from layout.metrics import store
from layout.parquet import ParquetFile
from layout.read.iceberg import snapshot_of
from layout.read.overlap import overlap_counts, overlap_depths

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = ["FOOTER_FALLBACK_FILES", "ClusteringRecord", "FileSpan", "Health", "KeySummary", "depth_bucket",
           "health", "key_spans", "measure_clustering", "read_clustering", "record_clustering", "summarize"]

log = logging.getLogger(__name__)

# Footers opened for files whose manifest entry lacks a key's bounds, per key and measurement: metadata
# reads only, but a table written without column metrics would otherwise open every footer each night.
FOOTER_FALLBACK_FILES = 256
EPOCH = dt.date(1970, 1, 1)
EPOCH_TS = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

Phase = Literal["before", "after", "on-demand"]


@dataclass(frozen=True, slots=True)
class FileSpan:
    """One data file's key range in its partition (None bounds: unknown, overlaps every file)."""

    partition: str  # the partition path, e.g. l_shipdate_month=1995-03; "" for an unpartitioned table
    lo: Any
    hi: Any
    rows: int
    bytes: int


@dataclass(frozen=True, slots=True)
class Health:
    """How the files of one partition overlap in one key."""

    files: int
    files_unbounded: int
    constant_files: int  # files holding one key value (lo == hi): Snowflake's constant micro-partitions
    average_overlaps: float
    average_depth: float
    max_depth: int
    histogram: tuple[tuple[int, int], ...]  # (depth bucket, files), buckets ascending


def depth_bucket(depth: int) -> int:
    """Snowflake's histogram buckets: each depth up to 16, then the next power of two (17..32 -> 32)."""
    return depth if depth <= 16 else 1 << (depth - 1).bit_length()


def health(spans: Sequence[tuple[Any, Any]]) -> Health:
    """The overlap figures of files with these (lo, hi) key bounds (None: unknown)."""
    if not spans:
        return Health(0, 0, 0, 0.0, 0.0, 0, ())
    depths = overlap_depths(spans)
    counts = overlap_counts(spans)
    histogram = Counter(depth_bucket(d) for d in depths)
    return Health(
        files=len(spans), files_unbounded=sum(1 for lo, hi in spans if lo is None or hi is None),
        constant_files=sum(1 for lo, hi in spans if lo is not None and lo == hi),
        average_overlaps=sum(counts) / len(spans), average_depth=sum(depths) / len(spans),
        max_depth=max(depths), histogram=tuple(sorted(histogram.items())))


@dataclass(frozen=True, slots=True)
class ClusteringRecord:
    """One sort key in one partition of one snapshot: the row of `lakesort.clustering_metrics`."""

    run_id: str
    phase: Phase
    table: str
    snapshot_id: int | None
    measured_at: dt.datetime
    sort_key: str
    partition_path: str  # "" for an unpartitioned table
    files: int
    files_unbounded: int
    constant_files: int
    average_overlaps: float
    average_depth: float
    max_depth: int
    depth_histogram: str  # JSON object, depth bucket -> files: {"1": 80, "2": 3}
    rows: int
    bytes: int

    @property
    def histogram(self) -> tuple[tuple[int, int], ...]:
        """(depth bucket, files), buckets ascending; () when the recorded JSON is unreadable."""
        try:
            data = json.loads(self.depth_histogram or "{}")
            return tuple(sorted((int(k), int(v)) for k, v in data.items()))
        except (ValueError, TypeError, AttributeError):
            return ()


@dataclass(frozen=True, slots=True)
class KeySummary:
    """One sort key over every partition of one measurement: averages weighted by files, the largest
    depth, the histograms summed, and the partitions by average depth, deepest first."""

    sort_key: str
    partitions: int
    files: int
    files_unbounded: int
    average_overlaps: float
    average_depth: float
    max_depth: int
    histogram: tuple[tuple[int, int], ...]
    deepest: tuple[ClusteringRecord, ...]


def summarize(rows: Iterable[ClusteringRecord]) -> tuple[KeySummary, ...]:
    """Per sort key (in order of first appearance), the figures of the whole table from its partitions'."""
    by_key: dict[str, list[ClusteringRecord]] = {}
    for row in rows:
        by_key.setdefault(row.sort_key, []).append(row)
    out = []
    for key, parts in by_key.items():
        files = sum(r.files for r in parts)
        histogram: Counter[int] = Counter()
        for r in parts:
            histogram.update(dict(r.histogram))
        out.append(KeySummary(
            sort_key=key, partitions=len(parts), files=files,
            files_unbounded=sum(r.files_unbounded for r in parts),
            average_overlaps=sum(r.average_overlaps * r.files for r in parts) / files if files else 0.0,
            average_depth=sum(r.average_depth * r.files for r in parts) / files if files else 0.0,
            max_depth=max((r.max_depth for r in parts), default=0),
            histogram=tuple(sorted(histogram.items())),
            deepest=tuple(sorted(parts, key=lambda r: (-r.average_depth, -r.max_depth, r.partition_path)))))
    return tuple(out)


def _histogram_json(histogram: Iterable[tuple[int, int]]) -> str:
    return json.dumps({str(bucket): files for bucket, files in histogram})


def key_spans(table: Table, columns: Sequence[str],
              snapshot_id: int | None = None) -> dict[str, list[FileSpan]]:
    """Per column: every live data file of the snapshot with its partition and its bounds of the column.

    One pass over the data manifests (pyiceberg's reader, in its thread pool, as planning reads them);
    a file without manifest bounds for a column gets its footer's (see the module docstring)."""
    snapshot = snapshot_of(table, snapshot_id)
    out: dict[str, list[FileSpan]] = {c: [] for c in columns}
    if snapshot is None:
        return out
    schema, specs, io = table.schema(), table.specs(), table.io
    fields = {}
    for column in columns:
        try:
            fields[column] = schema.find_field(column)
        except ValueError:
            raise InputError(f"{'.'.join(table.name())}: sort key {column!r} is not a column of the table "
                             "schema; fix sort.keys in its table spec") from None
    manifests = [m for m in snapshot.manifests(io) if m.content == ManifestContent.DATA]
    reads = ExecutorFactory.get_or_create().map(lambda m: m.fetch_manifest_entry(io, discard_deleted=True),
                                                manifests)
    missing: dict[str, list[int]] = defaultdict(list)
    paths: list[str] = []
    for entries in reads:
        for entry in entries:
            data = entry.data_file
            if data.record_count == 0:
                continue  # planning leaves empty files out (pyiceberg's include_empty_files=false)
            spec = specs[data.spec_id]
            partition = spec.partition_to_path(data.partition, schema) if spec.fields else ""
            paths.append(data.file_path)
            for column, field in fields.items():
                lower = (data.lower_bounds or {}).get(field.field_id)
                upper = (data.upper_bounds or {}).get(field.field_id)
                lo = hi = None
                if lower is not None and upper is not None:
                    kind = cast(PrimitiveType, field.field_type)  # a sort key: a primitive column
                    lo, hi = from_bytes(kind, lower), from_bytes(kind, upper)
                else:
                    missing[column].append(len(out[column]))
                out[column].append(FileSpan(partition, _comparable(lo), _comparable(hi), data.record_count,
                                            data.file_size_in_bytes))
    for column, positions in missing.items():
        _from_footers(out[column], positions, [paths[i] for i in positions], column)
    return out


def _from_footers(spans: list[FileSpan], positions: Sequence[int], paths: Sequence[str], column: str) -> None:
    """Fill in the bounds of the spans at `positions` from their files' footers (a bounded number)."""
    if len(positions) > FOOTER_FALLBACK_FILES:
        log.warning("%d file(s) have no manifest bounds for %s; reading the footers of the first %d, the "
                    "others count as overlapping every file", len(positions), column, FOOTER_FALLBACK_FILES)
    for position, path in list(zip(positions, paths, strict=True))[:FOOTER_FALLBACK_FILES]:
        filesystem, local = resolve(path)
        try:
            pf = ParquetFile.open(local, filesystem=filesystem)
        except InputError as error:
            log.warning("%s: no footer bounds for %s (%s); it counts as overlapping every file", path,
                        column, error)
            continue
        if not pf.has_column(column) or pf.num_row_groups == 0:
            continue
        lo = hi = None
        for rg in range(pf.num_row_groups):
            stats = pf.statistics(rg, column)
            if stats is None or stats.min is None or stats.max is None:
                if stats is not None and stats.null_count == pf.row_groups[rg].num_rows:
                    continue  # only nulls: no key values in this row group
                lo = hi = None
                break
            low, high = _comparable(stats.min), _comparable(stats.max)
            lo = low if lo is None or low < lo else lo
            hi = high if hi is None or high > hi else hi
        spans[position] = FileSpan(spans[position].partition, lo, hi, spans[position].rows,
                                   spans[position].bytes)


def _comparable(value: Any) -> Any:
    """One domain for manifest and footer bounds: days for dates, microseconds for times and timestamps
    (pyiceberg decodes manifest bounds to these already; footers decode to date and datetime values)."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        delta = aware - EPOCH_TS
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, dt.date):
        return (value - EPOCH).days
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def measure_clustering(table: Table, keys: Sequence[str], *, snapshot_id: int, run_id: str, phase: Phase,
                       measured_at: dt.datetime) -> list[ClusteringRecord]:
    """The clustering health of each key in each partition of the snapshot, as rows to record."""
    name = ".".join(table.name())
    rows = []
    for key, spans in key_spans(table, keys, snapshot_id).items():
        by_partition: defaultdict[str, list[FileSpan]] = defaultdict(list)
        for span in spans:
            by_partition[span.partition].append(span)
        for partition in sorted(by_partition):
            files = by_partition[partition]
            h = health([(f.lo, f.hi) for f in files])
            rows.append(ClusteringRecord(
                run_id=run_id, phase=phase, table=name, snapshot_id=snapshot_id, measured_at=measured_at,
                sort_key=key, partition_path=partition, files=h.files, files_unbounded=h.files_unbounded,
                constant_files=h.constant_files, average_overlaps=h.average_overlaps,
                average_depth=h.average_depth, max_depth=h.max_depth,
                depth_histogram=_histogram_json(h.histogram), rows=sum(f.rows for f in files),
                bytes=sum(f.bytes for f in files)))
    return rows


def record_clustering(catalog: Catalog, rows: Sequence[ClusteringRecord]) -> int:
    """Replace the rows of the same measurements (run, table, phase) and append these, in one snapshot."""
    return store.upsert(catalog, store.CLUSTERING_METRICS, store.CLUSTERING_FIELDS, store.CLUSTERING_KEY,
                        [asdict(r) for r in rows])


def read_clustering(catalog: Catalog, table: str | None = None) -> pa.Table:
    return store.read(catalog, store.CLUSTERING_METRICS, store.CLUSTERING_FIELDS, table)
