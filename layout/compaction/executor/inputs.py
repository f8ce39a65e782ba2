"""Reading a rewrite's planned input files as Iceberg defines their rows, inside Spark executors.

Spark's Parquet source cannot read an Iceberg table's files faithfully: it resolves columns by name
(after a rename the old files read as nulls, swapped names swap values, a dropped-and-re-added column
brings the old values back), it has no name mapping for files without field ids, no identity-partition
projection for files that lack the partition column, and its file listing skips names starting with
`_` or `.` even when they are given explicitly. So the job hands Spark only the *list* of planned files
and each executor reads its files with pyiceberg's own reader (`ArrowScan`): field ids, the table's
name mapping, type promotion, partition projection, exactly as pyiceberg reads the table. Every file's
row count as read must equal its manifest `record_count`, or the task fails naming the file.

Rows go back to Spark through `mapInArrow` tagged with their rewrite group and the partition key of
the table's current spec (`layout.compaction.executor.partitions`): from the manifest for files under the
current spec, computed per row for files under an older one.

That costs a trip through Python per row batch (at TPC-H SF1 about a third of the job). A file for which
name and field id resolution cannot differ is read by Spark's own vectorized reader instead (`native_reason`
is None): written under the current partition spec, every column of the current schema present at every
level with the same name, field id and type (no promotion, no name mapping, no projected partition
column), and a path Spark lists and parses as written. The prepare step decides from the footer it opens
anyway (`InputFile.spark_native`). Either way the metadata proof checks the output by field id against
Iceberg's statistics, trusting neither reader.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg import types as it
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io import load_file_io
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import FileScanTask

from layout import storage
from layout.compaction.executor import partitions as partitioning
from layout.errors import InputError

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table.metadata import TableMetadata

GROUP, PART, PART_KEY = partitioning.GROUP, partitioning.PART, partitioning.PART_KEY



# Paths Spark reads exactly as given: its listing skips names starting with `_` or `.`, and Hadoop's Path
# decodes `%` escapes and splits on `:`; anything outside this set goes through pyiceberg's reader. A scheme
# is followed by `//` (s3://bucket/...) or, as Hadoop writes local paths, by one slash: Iceberg's Java writers
# name local files `file:/tmp/...`, which went through pyiceberg's reader before.
_PLAIN_PATH = re.compile(r"^([a-z][a-z0-9+.-]*:(?=/))?[A-Za-z0-9/._=+-]+$")


def native_reason(path: str, file_schema: pa.Schema, table_schema: Schema) -> str | None:
    """Why Spark's own Parquet reader could read this file differently from Iceberg (None: it cannot, the
    job may read it natively). `file_schema` is the footer's, with its field ids."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if not _PLAIN_PATH.match(path) or name.startswith(("_", ".")):
        return "its path needs pyiceberg's reader"
    nested = [f.name for f in table_schema.fields
              if not f.field_type.is_primitive and _has_required(f.field_type)]
    if nested:
        # Spark reads every column as nullable; the job restores REQUIRED only for top-level primitives.
        return f"column {nested[0]} has required nested fields"
    try:
        from pyiceberg.io.pyarrow import pyarrow_to_schema  # see read_file

        written = pyarrow_to_schema(file_schema)
    except Exception:  # noqa: BLE001 - no field ids (name mapping) or a type Iceberg has no name for
        return "its columns carry no Iceberg field ids (or a type without an Iceberg equivalent)"
    return _struct_reason(table_schema.as_struct(), written.as_struct(), "")


def _has_required(t: it.IcebergType) -> bool:
    if isinstance(t, it.StructType):
        return any(f.required or _has_required(f.field_type) for f in t.fields)
    if isinstance(t, it.ListType):
        return t.element_required or _has_required(t.element_type)
    if isinstance(t, it.MapType):
        return t.value_required or _has_required(t.key_type) or _has_required(t.value_type)
    return False


def _struct_reason(wanted: it.StructType, written: it.StructType, prefix: str) -> str | None:
    if len(written.fields) != len(wanted.fields):
        return f"{prefix or 'the file'} has {len(written.fields)} column(s), the schema {len(wanted.fields)}"
    for want, got in zip(wanted.fields, written.fields, strict=True):
        if (want.name, want.field_id) != (got.name, got.field_id):
            return (f"column {prefix}{got.name} (id {got.field_id}) "
                    f"is {want.name} (id {want.field_id}) in the schema")
        reason = _type_reason(want.field_type, got.field_type, f"{prefix}{want.name}")
        if reason:
            return reason
    return None


def _type_reason(want: it.IcebergType, got: it.IcebergType, where: str) -> str | None:
    if isinstance(want, it.StructType) and isinstance(got, it.StructType):
        return _struct_reason(want, got, f"{where}.")
    if isinstance(want, it.ListType) and isinstance(got, it.ListType):
        if want.element_id != got.element_id:
            return f"{where}: list element ids differ"
        return _type_reason(want.element_type, got.element_type, f"{where}.element")
    if isinstance(want, it.MapType) and isinstance(got, it.MapType):
        if (want.key_id, want.value_id) != (got.key_id, got.value_id):
            return f"{where}: map key/value ids differ"
        return (_type_reason(want.key_type, got.key_type, f"{where}.key")
                or _type_reason(want.value_type, got.value_type, f"{where}.value"))
    if want != got:
        return f"{where} is {got} in the file, {want} in the schema (a promotion)"
    return None


def shareable_io_properties(properties: dict[str, str]) -> dict[str, str]:
    """The FileIO properties an executor needs (endpoint, region, ...), without secrets."""
    return storage.public(properties)


@dataclass(frozen=True, slots=True)
class InputSource:
    """What an executor needs to read the planned files: the table metadata they were planned against, and the
    schema rows are read into (the table's current schema at planning, decoded once by the job's driver and
    pickled with this value: no executor decodes the plan's JSON)."""

    metadata_location: str
    io_properties: dict[str, str]
    schema: Schema


_lock = threading.Lock()
_loaded: dict[str, tuple[TableMetadata, FileIO]] = {}


def metadata_of(source: InputSource) -> tuple[TableMetadata, FileIO]:
    """Table metadata and FileIO, loaded once per Python worker (every file of a run shares them)."""

    with _lock:
        if source.metadata_location not in _loaded:
            io = load_file_io(source.io_properties, source.metadata_location)
            metadata = FromInputFile.table_metadata(io.new_input(source.metadata_location))
            _loaded[source.metadata_location] = (metadata, io)
        return _loaded[source.metadata_location]


def read_file(source: InputSource, schema: Schema, row: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    """The rows of one planned file, in `schema`; its count must equal the manifest's `record_count`."""

    metadata, io = metadata_of(source)
    spec = metadata.specs()[row["spec_id"]]
    data_file = DataFile.from_args(
        content=DataFileContent.DATA, file_path=row["path"], file_format=FileFormat.PARQUET,
        # Partition source columns cannot be dropped from a schema, so the read schema types every spec.
        partition=partitioning.decode(row["partition"], spec, schema),
        record_count=row["record_count"], file_size_in_bytes=row["size"],
    )
    data_file.spec_id = row["spec_id"]
    # Imported here: pyiceberg's Arrow I/O (with pyarrow.dataset and pandas) costs about 0.5 s to import, and
    # the job's driver, which imports this module for its names, never reads a file through it.
    from pyiceberg.io.pyarrow import ArrowScan

    scan = ArrowScan(metadata, io, schema, AlwaysTrue())
    rows = 0
    try:
        for batch in scan.to_record_batches([FileScanTask(data_file)]):
            rows += batch.num_rows
            yield batch
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"{row['path']}: cannot read this input file as Iceberg does: {type(exc).__name__}: "
                         f"{exc}; the table is unchanged") from exc
    if rows != row["record_count"]:
        raise InputError(f"{row['path']}: read {rows} rows, the manifest says {row['record_count']}: the "
                         "file does not hold the rows Iceberg recorded for it; nothing is committed")


def tagged_batches(source: InputSource, files: Iterator[pa.RecordBatch], target: pa.Schema,
                   current_spec_id: int, *,
                   positions: tuple[str, str] | None = None) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` body: for each planned file (one row of `files`), its rows cast to `target` (the
    table's columns as Spark declares them) plus the group id, the partition key and its directory name.
    `positions`: the names of two more columns, the file's index in the job (`file_index` of its row) and
    each row's position in the file, which deletes need (`jobs/compaction/deletes.py`)."""

    schema = source.schema
    extra = (GROUP, PART, PART_KEY, *(positions or ()))
    columns = pa.schema([f for f in target if f.name not in extra])
    metadata, _ = metadata_of(source)
    current = metadata.specs()[current_spec_id]
    for chunk in files:
        for row in chunk.to_pylist():
            # Without a filter and without deletes, pyiceberg's reader yields a file's rows in file order: the
            # running count is each row's position (the job checks the count against the manifest's).
            position = 0
            for batch in read_file(source, schema, row):
                if positions is not None:
                    batch = batch.append_column(
                        _POSITION, pa.array(range(position, position + batch.num_rows), pa.int64())
                    )
                    position += batch.num_rows
                parts: Iterable[tuple[str, pa.RecordBatch]]
                if row["spec_id"] == current_spec_id:
                    parts = [(row["partition"], batch)]
                else:  # written under an older spec: the current spec's values, row by row
                    parts = partitioning.split_by_partition(batch, current, schema)
                for key, rows in parts:
                    n = rows.num_rows
                    arrays = [rows.column(f.name).cast(f.type) for f in columns]
                    arrays += [pa.repeat(pa.scalar(row["group_id"], pa.int32()), n),
                               pa.repeat(pa.scalar(partitioning.key_dir(key), pa.string()), n),
                               pa.repeat(pa.scalar(key, pa.string()), n)]
                    if positions is not None:
                        arrays += [pa.repeat(pa.scalar(row["file_index"], pa.int32()), n),
                                   rows.column(_POSITION)]
                    yield pa.RecordBatch.from_arrays(arrays, schema=target)


_POSITION = "__lakesort_position"  # a row's position, carried through `split_by_partition`
