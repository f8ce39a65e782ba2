"""Lay a sample out as the compaction would for one candidate, and plan every probe on it.

**How the sample is cut (the scaling rule).** A full rewrite (``lakesort compact --force``) gives each
partition `files_for` output files, as the rewrite planner does (its input bytes over
``target_file_size``, per group of at most ``max_group_size`` bytes), with equal rows each; parquet-mr
cuts a row group once its buffered bytes reach ``writer.row_group_size`` (rows per row group: that size
over the table's uncompressed bytes per row, measured from the footers the sample was read from), and a
page at ``writer.page_row_count_limit`` rows or ``writer.page_size`` bytes. The sample holds a fraction f
of each partition's rows, so it keeps **the same number of files per partition, row groups per file and
pages per column chunk**, each holding f times the rows: the target rows per file and row group, the
page row limit and the page byte size are all multiplied by f (dictionary pages too). A probe then
selects the same share of units (files, row groups, pages) of the sample as of the table, and its bytes,
times 1/f, estimate the table's. (Keeping the table's rows per page instead would give the sample f times
fewer pages per file, and a point lookup, which reads about one page whatever the layout, would be
overestimated 1/f times.) When f is so small that a page would hold under one row, pages hold one row
and point lookups are overestimated; `LayoutShape.pages_kept` is then False and the advisor warns.

**How rows are ordered.** Rows are sorted per partition as the job sorts them: linear by the keys
(direction and null order per key), a curve by `layout.curves.curve_index` over the keys (quantile
boundaries taken once over the whole sample, `2**bits` cells per key), min/max z-order by
`layout.curves.minmax_ranks` over each key's minimum and maximum in the sample. Files are cut at equal
row counts, moved to the end of a run of equal keys (equal keys share a file, as the job's boundaries
do); each file is sorted.

**How files are written.** pyarrow, with the spec's writer settings: compression and level, dictionary
(off for bloom-filtered columns, as the job writes them), statistics, the page index, page size and row
limit (scaled), bloom filters (their ndv scaled). Dictionary encoding follows parquet-mr's rule rather
than pyarrow's: parquet-mr keeps a column chunk's dictionary only when, on its first page, the
dictionary plus the encoded ids are smaller than the plain values (`FallbackValuesWriter`), while
pyarrow keeps it until the dictionary page is full; for unique strings pyarrow would put nearly all of
a chunk's bytes in a dictionary page that every lookup reads. So each file's dictionary columns are
decided on its first page (`dictionary_columns`). Only the columns some probe reads are written (a probe
without `columns` reads them all). The files go to a temporary directory (`layout.read.plan.plan`
takes paths) that is removed once the probes are planned.
"""

from __future__ import annotations

import itertools
import logging
import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from layout import curves
from layout.advise.candidates import Candidate
from layout.advise.sample import PartitionShare, Sample
from layout.expr.predicate import columns as predicate_columns
from layout.expr.sql import parse_where
from layout.read.cache import MetadataCache
from layout.read.plan import plan
from layout.spec import CURVES, Probe, TableSpec

__all__ = ["CandidateLayout", "LayoutShape", "Prediction", "files_for", "predict", "shape_of"]

log = logging.getLogger(__name__)

_CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "lz4_raw": "lz4", "uncompressed": "none"}
# parquet-mr's default dictionary page size (parquet.dictionary.page.size): beyond it a chunk falls back
# to plain encoding; scaled like the pages, so the sample falls back where the table would.
DICTIONARY_PAGE_BYTES = 1 << 20
# pyarrow checks the page size after each batch of values it encodes: batches no longer than a page.
WRITE_BATCH_ROWS = 1024
# Rows of each layout written a second time with the table's pages, to calibrate the bytes per page.
CALIBRATION_ROWS = 50_000


def files_for(partition_bytes: int, spec: TableSpec) -> int:
    """Output files a full rewrite gives a partition of `partition_bytes` input bytes: groups of at most
    max_group_size bytes, each ceil(group bytes / target_file_size) files (the rewrite planner's rule)."""
    target, group = spec.target_file_size, spec.max_group_size
    full, rest = divmod(partition_bytes, group)
    return max(1, full * math.ceil(group / target) + (math.ceil(rest / target) if rest else 0))


@dataclass(frozen=True, slots=True)
class LayoutShape:
    """How one partition of the sample is cut: `files`, rows per row group and per page (see the module)."""

    files: int
    row_group_rows: int
    page_rows: int
    page_bytes: int
    dictionary_bytes: int
    fraction: float
    pages_kept: bool  # False: pages would hold under one row at this sample fraction


def shape_of(share: PartitionShare, spec: TableSpec, uncompressed_bytes_per_row: float) -> LayoutShape:
    """The sample's cut for one partition (the scaling rule of the module docstring)."""
    files = min(files_for(share.bytes, spec), max(1, share.sample_rows))
    f = share.fraction or 1.0
    rows_per_file = share.rows / files
    # parquet-mr fills row groups to the buffered size and leaves the rest in the file's last one.
    table_group_rows = spec.writer.row_group_size / uncompressed_bytes_per_row if uncompressed_bytes_per_row \
        else rows_per_file
    sample_file_rows = share.sample_rows / files
    page_rows = spec.writer.page_row_count_limit * f
    return LayoutShape(
        files=files, row_group_rows=max(1, min(math.ceil(sample_file_rows), round(table_group_rows * f))),
        page_rows=max(1, round(page_rows)), page_bytes=max(1024, round(spec.writer.page_size * f)),
        dictionary_bytes=max(1024, round(DICTIONARY_PAGE_BYTES * f)), fraction=f, pages_kept=page_rows >= 1)


@dataclass(frozen=True, slots=True)
class Prediction:
    """One candidate's figures on the sample, scaled to the table (`bytes` per probe, `write_bytes`)."""

    candidate: Candidate
    bytes: dict[str, int]  # probe -> predicted bytes a reader fetches from the whole table
    write_bytes: int  # predicted bytes of the table rewritten this way (see `predict`)
    files: int  # files written for the sample
    seconds: float


@dataclass(frozen=True, slots=True)
class CandidateLayout:
    """What `predict` needs besides the candidate, computed once per advice run."""

    sample: Sample
    spec: TableSpec
    probes: tuple[Probe, ...]
    columns: tuple[str, ...]  # the columns written: every column some probe reads
    shapes: tuple[LayoutShape, ...]  # per partition of the sample
    boundaries: dict[tuple[str, int], np.ndarray]  # (curve key, bits) -> quantile boundaries over the sample

    @classmethod
    def prepare(cls, sample: Sample, spec: TableSpec, candidates: Sequence[Candidate]) -> CandidateLayout:
        probes = tuple(spec.probes)
        names = sample.data.column_names
        if any(p.columns is None for p in probes):
            columns = tuple(names)
        else:
            wanted = {c for p in probes for c in (p.columns or ())}
            wanted |= {c for p in probes for c in predicate_columns(parse_where(p.where))}
            wanted = {c.split(".")[0] for c in wanted}  # a struct's field: the whole struct column
            columns = tuple(c for c in names if c in wanted)
        shapes = tuple(shape_of(share, spec, sample.uncompressed_bytes_per_row)
                       for share in sample.partitions)
        keys = {(c, curves.curve_bits(len(cand.columns))) for cand in candidates
                if cand.strategy in CURVES and cand.scaling == "quantile" for c in cand.columns}
        boundaries = {(column, bits): curves.quantile_boundaries(sample.data.column(column), 1 << bits)
                      for column, bits in sorted(keys)}
        return cls(sample, spec, probes, columns, shapes, boundaries)


def _order(layout: CandidateLayout, candidate: Candidate) -> tuple[np.ndarray, np.ndarray]:
    """(row order: partition, then the candidate's key; a per-row tie key whose change starts a new run)."""
    data, part = layout.sample.data, layout.sample.partition
    if candidate.strategy == "linear":
        table = pa.table({"__part": part, **{k.column: data.column(k.column) for k in candidate.keys}})
        order = pc.sort_indices(table, sort_keys=[("__part", "ascending", "at_end")] + [
            (k.column, "descending" if k.direction == "desc" else "ascending",
             "at_start" if k.nulls == "first" else "at_end") for k in candidate.keys]).to_numpy()
        return order, _runs(table.take(pa.array(order)), [k.column for k in candidate.keys])
    columns = [data.column(c) for c in candidate.columns]
    bits = curves.curve_bits(len(columns))
    if candidate.scaling == "minmax":
        # The job's z-order scaled by min/max over its whole input, with 62 bits over the keys.
        bits = 62 // len(columns)
        index = curves.zorder_index([curves.minmax_ranks(c, None, None, bits) for c in columns], bits)
    else:
        index = curves.curve_index(columns, [layout.boundaries[c, bits] for c in candidate.columns],
                                   strategy=candidate.strategy, bits=bits)  # type: ignore[arg-type]
    order = np.lexsort((index, part))
    sorted_index = index[order]
    change = np.ones(len(order), dtype=bool)
    change[1:] = sorted_index[1:] != sorted_index[:-1]
    return order, change


def _runs(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """True where a row's key differs from the previous row's (nulls equal to nulls)."""
    n = table.num_rows
    change = np.ones(n, dtype=bool)
    if n < 2:
        return change
    differs = np.zeros(n - 1, dtype=bool)
    for name in ["__part", *columns]:
        col = table.column(name)
        head, tail = col.slice(0, n - 1), col.slice(1)
        ne = pc.fill_null(pc.not_equal(tail, head), False).to_numpy(zero_copy_only=False)
        nulls = pc.not_equal(pc.is_null(tail), pc.is_null(head)).to_numpy(zero_copy_only=False)
        differs |= ne | nulls
    change[1:] = differs
    return change


def _cuts(start: int, stop: int, files: int, change: np.ndarray) -> list[int]:
    """File boundaries in [start, stop): equal row counts, each moved to the next start of a key run."""
    run_starts = np.flatnonzero(change[start:stop]) + start
    cuts = [start]
    for i in range(1, files):
        wanted = start + round(i * (stop - start) / files)
        at = np.searchsorted(run_starts, wanted)
        cut = int(run_starts[at]) if at < len(run_starts) else stop
        if cut > cuts[-1] and cut < stop:
            cuts.append(cut)
    cuts.append(stop)
    return cuts


def _plain_bytes(values: pa.Array | pa.ChunkedArray) -> tuple[float, float]:
    """(plain-encoded bytes of the non-null values,
    bytes per distinct value's dictionary entry on average)."""
    t = values.type
    present = len(values) - values.null_count
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t):
        lengths = pc.binary_length(values)
        total = float(pc.sum(lengths).as_py() or 0) + 4 * present  # each value: 4-byte length + bytes
        return total, total / present if present else 0.0
    if pa.types.is_decimal(t):
        width = 8 if t.precision <= 18 else 16  # Spark writes decimal(p <= 18) as INT64
    else:
        width = max(1, t.bit_width // 8)
    return float(width * present), float(width)


def dictionary_columns(first_page: pa.Table, columns: Sequence[str]) -> list[str]:
    """The `columns` parquet-mr would dictionary-encode, judged on a chunk's first page: the dictionary
    (each distinct value once) plus the ids (bit-packed) must be smaller than the plain values.
    Booleans never get one."""
    keep = []
    rows = first_page.num_rows
    for name in columns:
        values = first_page.column(name)
        if pa.types.is_boolean(values.type) or pa.types.is_nested(values.type) or rows == 0:
            continue
        raw, per_value = _plain_bytes(values)
        distinct = pc.count_distinct(values, mode="only_valid").as_py() or 0
        if distinct == 0:
            keep.append(name)  # only nulls: nothing to encode either way
            continue
        ids = rows * max(1, math.ceil(math.log2(distinct))) / 8 if distinct > 1 else rows / 8
        unique_bytes = _plain_bytes(pc.unique(values).drop_null())[0] if per_value else 0.0
        if ids + unique_bytes < raw:
            keep.append(name)
    return keep


def _writer_options(layout: CandidateLayout, shape: LayoutShape) -> dict[str, Any]:
    w = layout.spec.writer
    bloom = {c: b for c, b in w.bloom_filters.items() if c in layout.columns}
    options = {
        "compression": _CODECS[w.compression], "use_dictionary": w.dictionary, "write_statistics": True,
        "write_page_index": True, "data_page_size": shape.page_bytes, "max_rows_per_page": shape.page_rows,
        "dictionary_pagesize_limit": shape.dictionary_bytes,
        "write_batch_size": max(1, min(WRITE_BATCH_ROWS, shape.page_rows)),
    }
    if w.compression_level is not None:
        options["compression_level"] = w.compression_level
    if bloom:
        options["bloom_filter_options"] = {c: {"ndv": max(1, round(b.ndv * shape.fraction)), "fpp": b.fpp}
                                           for c, b in bloom.items()}
    return options


@dataclass(slots=True)
class _Calibration:
    """Per column, compressed bytes of some of the layout's rows with the sample's pages and
    with the table's."""

    rows: int = 0
    scaled: dict[str, int] = field(default_factory=dict)
    table: dict[str, int] = field(default_factory=dict)

    def add(self, rows: pa.Table, options: dict[str, Any], row_group_rows: int, spec: TableSpec) -> None:
        table_pages = {**options, "data_page_size": spec.writer.page_size,
                       "max_rows_per_page": spec.writer.page_row_count_limit,
                       "dictionary_pagesize_limit": DICTIONARY_PAGE_BYTES,
                       "write_batch_size": min(WRITE_BATCH_ROWS, spec.writer.page_row_count_limit)}
        for sizes, opts in ((self.scaled, options), (self.table, table_pages)):
            for column, size in _column_bytes(rows, row_group_rows, opts).items():
                sizes[column] = sizes.get(column, 0) + size
        self.rows += rows.num_rows

    def factor(self, columns: Sequence[str]) -> float:
        """Table-page bytes over sample-page bytes for these columns together (1.0 without data)."""
        scaled = sum(self.scaled.get(c, 0) for c in columns)
        return sum(self.table.get(c, 0) for c in columns) / scaled if scaled else 1.0


def _column_bytes(rows: pa.Table, row_group_rows: int, options: dict[str, Any]) -> dict[str, int]:
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink, row_group_size=row_group_rows, **options)
    meta = pq.ParquetFile(pa.BufferReader(sink.getvalue())).metadata
    out: dict[str, int] = {}
    for rg in range(meta.num_row_groups):
        group = meta.row_group(rg)
        for c in range(group.num_columns):
            chunk = group.column(c)
            out[chunk.path_in_schema] = out.get(chunk.path_in_schema, 0) + chunk.total_compressed_size
    return out


def _write(layout: CandidateLayout, candidate: Candidate, directory: Path) -> tuple[int, int, _Calibration]:
    """The sample laid out as `candidate` under `directory`; (files, bytes written, page calibration)."""
    order, change = _order(layout, candidate)
    data = layout.sample.data.select(list(layout.columns))
    part_sorted = layout.sample.partition[order]
    bounds = np.searchsorted(part_sorted, np.arange(len(layout.shapes) + 1), side="left")
    # Calibrated on the largest partition: its files are the likeliest to show the table's compression.
    largest = int(np.argmax(np.diff(bounds))) if len(bounds) > 1 else -1
    calibration = _Calibration()
    files = written = 0
    bloom = set(layout.spec.writer.bloom_filters)
    for p, shape in enumerate(layout.shapes):
        start, stop = int(bounds[p]), int(bounds[p + 1])
        if start == stop:
            continue
        options = _writer_options(layout, shape)
        cuts = _cuts(start, stop, shape.files, change)
        for i, (a, b) in enumerate(itertools.pairwise(cuts)):
            rows = data.take(pa.array(order[a:b]))
            if layout.spec.writer.dictionary:
                encodable = [c for c in layout.columns if c not in bloom]
                options["use_dictionary"] = dictionary_columns(rows.slice(0, shape.page_rows), encodable)
            path = directory / f"p{p:05d}" / f"f{i:04d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(rows, path, row_group_size=shape.row_group_rows, **options)
            files += 1
            written += path.stat().st_size
            if p == largest and shape.fraction < 1 and calibration.rows < CALIBRATION_ROWS:
                calibration.add(rows, options, shape.row_group_rows, layout.spec)
    return files, written, calibration


def predict(layout: CandidateLayout, candidate: Candidate, *, work_dir: str | None = None) -> Prediction:
    """Lay the sample out as `candidate`, plan every probe on it, scale the bytes to the table.

    Bytes a probe reads: `layout.read.plan.plan`'s ``bytes_selected`` (compressed bytes of the selected
    pages of the probe's columns, dictionary pages included) on the sample, times table rows over sample
    rows, times the page calibration: the sample's pages hold f times the table's rows and compress a
    little worse (each page is compressed on its own), so some of the layout's rows (the largest
    partition's, up to `CALIBRATION_ROWS`) are written again with the table's page size and row limit,
    and the probe's columns' bytes with those over with the sample's pages correct the figure (about
    -15% at f = 1/4 on 12-byte strings; 1 when the sample is the whole table). Write cost: the bytes a
    full rewrite writes, predicted as the written columns' bytes scaled and calibrated the same way, plus
    the other columns' bytes as the table holds them now (their compression hardly depends on the order
    of the probed columns).
    """
    started = time.perf_counter()
    scale = layout.sample.scale
    with tempfile.TemporaryDirectory(prefix="lakesort-advise-", dir=work_dir) as tmp:
        files, written, calibration = _write(layout, candidate, Path(tmp))
        cache = MetadataCache()  # this layout's footers, shared by its probes, dropped with it
        predicted = {}
        for probe in layout.probes:
            result = plan(tmp, probe.where, probe.columns, cache=cache)
            read = set(predicate_columns(result.predicate)) | set(probe.columns or layout.columns)
            factor = calibration.factor([c for c in layout.columns if c in read])
            predicted[probe.name] = round(result.counts.bytes_selected * scale * factor)
    others = sum(b for c, b in layout.sample.column_bytes.items() if c not in layout.columns)
    seconds = time.perf_counter() - started
    log.debug("%s: %d file(s), %d bytes on the sample, in %.1fs", candidate.label, files, written, seconds)
    return Prediction(candidate, predicted,
                      round(written * scale * calibration.factor(layout.columns)) + others, files, seconds)
