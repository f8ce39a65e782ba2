"""A bounded, seeded sample of an Iceberg table, stratified over its partitions: what the advisor lays out.

Each partition gets a share of the sample rows proportional to its rows (largest remainders, so the
shares add up exactly and every partition keeps the table's fraction). Within a partition, files are
drawn at random with probability proportional to their rows (Efraimidis-Spirakis keys), and their row
groups in random order, until the partition's share is reached; only those row groups are read (pyarrow,
every column: the bytes of every column matter to the probes that read them). The rows of the last row
groups beyond the share are dropped at random, so the sample holds exactly its share of each partition.

It is a cluster sample: whole row groups. On a table of few, huge row groups the sample holds few
contiguous stretches of the current order; `Sample.row_groups_read` says how many were read, and the
advisor warns when a partition's share came from a single row group of many.

Columns are resolved by Iceberg field id (files without ids: by name) and cast to the table's current
schema; a column a file lacks reads as nulls. Delete files are not applied (the advisor predicts
layouts; a few deleted rows do not change them). A file's partition is its manifest entry's (files
under an older partition spec count as a partition of their own).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import schema_to_pyarrow

from layout.errors import InputError
from layout.io import live_data_files, resolve

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["DEFAULT_SAMPLE_ROWS", "PartitionShare", "Sample", "sample_table"]

log = logging.getLogger(__name__)

DEFAULT_SAMPLE_ROWS = 2_000_000
# Reading is I/O and decompression in pyarrow (the GIL released): a few files at a time.
READ_THREADS = 4
_FIELD_ID = b"PARQUET:field_id"


@dataclass(frozen=True, slots=True)
class PartitionShare:
    """One partition of the table and its share of the sample."""

    label: str  # the partition path, e.g. l_shipdate_month=1995-03; "" for an unpartitioned table
    rows: int  # the table's rows in it (manifest record counts)
    bytes: int  # its data files' bytes: the rewrite planner sizes output files by them
    sample_rows: int

    @property
    def fraction(self) -> float:
        return self.sample_rows / self.rows if self.rows else 0.0


@dataclass(frozen=True, slots=True)
class Sample:
    """The sampled rows and where they come from.

    `partition[i]` indexes `partitions` for row i of `data`. `uncompressed_bytes_per_row` is the footers'
    uncompressed row-group bytes over their rows, for the row groups read: how many rows fill the
    writer's buffered row group size. `column_bytes` is each column's compressed bytes in the table (the
    manifests' column sizes; columns without them are left out).
    """

    data: pa.Table
    partition: np.ndarray
    partitions: tuple[PartitionShare, ...]
    table_rows: int
    table_bytes: int
    table_files: int
    column_bytes: dict[str, int]
    uncompressed_bytes_per_row: float
    files_read: int
    row_groups_read: int
    seconds: float

    @property
    def rows(self) -> int:
        rows: int = self.data.num_rows
        return rows

    @property
    def scale(self) -> float:
        """Table rows per sample row: sample figures times this estimate the table's."""
        return self.table_rows / self.rows if self.rows else 0.0


@dataclass(slots=True)
class _File:
    path: str
    rows: int
    bytes: int


def _shares(rows: Sequence[int], wanted: int) -> list[int]:
    """`wanted` rows split over partitions proportionally to `rows` (largest remainders), each at most
    its partition's rows."""
    total = sum(rows)
    if total <= wanted:
        return list(rows)
    exact = [r * wanted / total for r in rows]
    out = [math.floor(e) for e in exact]
    rest = wanted - sum(out)
    for i in sorted(range(len(rows)), key=lambda i: (out[i] - exact[i], i))[:rest]:
        out[i] += 1
    return out


def _weighted_order(rng: np.random.Generator, weights: Sequence[int]) -> list[int]:
    """Indexes in a random order drawn without replacement, proportionally to `weights`
    (Efraimidis-Spirakis: sort by u ** (1 / w))."""
    w = np.maximum(np.asarray(weights, dtype=np.float64), 1e-9)
    keys = np.log(rng.random(len(w))) / w
    return list(np.argsort(-keys, kind="stable"))


def sample_table(table: Table, *, rows: int = DEFAULT_SAMPLE_ROWS, seed: int = 0) -> Sample:
    """At most `rows` rows of `table`'s current snapshot, stratified over its partitions
    (module docstring)."""
    if rows < 1:
        raise InputError(f"the sample needs at least 1 row, got {rows}")
    started = time.perf_counter()
    schema = table.schema()
    arrow_schema = schema_to_pyarrow(schema)
    specs = table.specs()
    by_label: dict[str, list[_File]] = {}
    column_bytes: dict[int, int] = {}
    for data in live_data_files(table):
        if data.record_count == 0:
            continue
        spec = specs[data.spec_id]
        label = spec.partition_to_path(data.partition, schema) if spec.fields else ""
        by_label.setdefault(label, []).append(_File(data.file_path, data.record_count,
                                                    data.file_size_in_bytes))
        for field_id, size in (data.column_sizes or {}).items():
            column_bytes[field_id] = column_bytes.get(field_id, 0) + size
    if not by_label:
        raise InputError(f"{'.'.join(table.name())}: the table holds no rows to sample; advise needs data")
    labels = sorted(by_label)
    totals = [sum(f.rows for f in by_label[label]) for label in labels]
    shares = _shares(totals, rows)
    rng = np.random.default_rng(seed)
    jobs: list[tuple[str, int, list[_File], int]] = []
    for label, share in zip(labels, shares, strict=True):
        if share:
            files = by_label[label]
            order = _weighted_order(rng, [f.rows for f in files])
            jobs.append((label, share, [files[i] for i in order], int(rng.integers(0, 2**63 - 1))))
    def read_partition(job: tuple[str, int, list[_File], int]) -> tuple[pa.Table, int, int, int, float]:
        return _sample_partition(*job, arrow_schema)  # (mypy cannot type this call in a lambda)

    with ThreadPoolExecutor(READ_THREADS) as pool:
        parts = list(pool.map(read_partition, jobs))
    tables = [p[0] for p in parts if p[0].num_rows]
    # One chunk per column: every candidate takes rows from it in a new order, and a take across hundreds
    # of chunks (one per row group read) is several times slower.
    data = pa.concat_tables(tables).combine_chunks() if tables else arrow_schema.empty_table()
    index = {label: i for i, label in enumerate(labels)}
    partition = (
        np.concatenate(
            [
                np.full(p[0].num_rows, index[job[0]], dtype=np.int32)
                for p, job in zip(parts, jobs, strict=True)
            ]
        )
        if parts
        else np.zeros(0, np.int32)
    )
    read_rows = sum(p[3] for p in parts)
    names = {f.field_id: f.name for f in schema.fields}
    sample = Sample(
        data=data, partition=partition,
        partitions=tuple(PartitionShare(label, total, sum(f.bytes for f in by_label[label]), share)
                         for label, total, share in zip(labels, totals, shares, strict=True)),
        table_rows=sum(totals), table_bytes=sum(f.bytes for fs in by_label.values() for f in fs),
        table_files=sum(len(fs) for fs in by_label.values()),
        column_bytes={names[i]: b for i, b in column_bytes.items() if i in names},
        uncompressed_bytes_per_row=sum(p[4] for p in parts) / read_rows if read_rows else 0.0,
        files_read=sum(p[1] for p in parts), row_groups_read=sum(p[2] for p in parts),
        seconds=time.perf_counter() - started)
    log.info("sampled %d of %d rows (%d partition(s)) from %d row group(s) of %d file(s) in %.1fs",
             sample.rows, sample.table_rows, len(jobs), sample.row_groups_read, sample.files_read,
             sample.seconds)
    return sample


def _sample_partition(label: str, share: int, files: list[_File], seed: int,
                      schema: pa.Schema) -> tuple[pa.Table, int, int, int, float]:
    """(rows, files read, row groups read, rows read, uncompressed bytes read) for one partition."""
    rng = np.random.default_rng(seed)
    pieces, got, groups, files_read, uncompressed, available = [], 0, 0, 0, 0.0, 0
    for f in files:
        if got >= share:
            break
        filesystem, path = resolve(f.path)
        try:
            reader = pq.ParquetFile(path, filesystem=filesystem)
        except (OSError, pa.ArrowException) as error:
            raise InputError(f"{f.path}: cannot read this data file of the table ({error})") from error
        meta = reader.metadata
        available += meta.num_row_groups
        chosen = []
        for rg in rng.permutation(meta.num_row_groups):
            if got >= share:
                break
            chosen.append(int(rg))
            got += meta.row_group(int(rg)).num_rows
            uncompressed += meta.row_group(int(rg)).total_byte_size
        if chosen:
            pieces.append(_read(reader, sorted(chosen), schema, f.path))
            groups += len(chosen)
            files_read += 1
    data = pa.concat_tables(pieces) if pieces else schema.empty_table()
    if data.num_rows > share:  # the last row groups overshoot: keep a uniform random subset
        keep = np.sort(rng.choice(data.num_rows, size=share, replace=False))
        data = data.take(pa.array(keep))
    if groups == 1 and available > 1:
        log.warning("partition %s: its sample share (%d rows) came from one row group of %d; a larger "
                    "--sample spreads it over more", label or "(unpartitioned)", share, available)
    return data, files_read, groups, got, uncompressed


def _read(reader: pq.ParquetFile, row_groups: list[int], schema: pa.Schema, path: str) -> pa.Table:
    """The row groups, as the table's current schema: columns by field id (by name without ids)."""
    file_schema = reader.schema_arrow
    by_id: dict[int, str] = {}
    for f in file_schema:
        if f.metadata and _FIELD_ID in f.metadata:
            by_id[int(f.metadata[_FIELD_ID])] = f.name
    names = set(file_schema.names)
    columns: dict[str, str] = {}  # table column -> file column
    for field in schema:
        field_id = int(field.metadata[_FIELD_ID]) if field.metadata and _FIELD_ID in field.metadata else None
        if by_id:
            found = by_id.get(field_id) if field_id is not None else None
        else:
            found = field.name if field.name in names else None
        if found is not None:
            columns[field.name] = found
    read = reader.read_row_groups(row_groups, columns=list(dict.fromkeys(columns.values())), use_threads=True)
    arrays: list[Any] = []
    for field in schema:
        if field.name in columns:
            column = read.column(columns[field.name])
            try:
                arrays.append(column.cast(field.type) if column.type != field.type else column)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise InputError(f"{path}: column {columns[field.name]!r} ({column.type}) does not read as "
                                 f"the table's {field.name} ({field.type}): {error}") from error
        else:
            arrays.append(pa.nulls(read.num_rows, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)
