"""Reading a rewrite's delete files inside Spark executors, as Iceberg defines their rows.

The job applies deletes in Spark (`jobs/compaction/deletes.py`): it joins the input's rows with the rows of
the delete files, so no process ever holds a table's deletes. What an executor does here is
read one delete file:

- a position delete file: its `file_path` and `pos` columns, found by their reserved field ids (names as the
  spec gives them where a writer left the ids out), every row; extra columns (`row`) are never read;
- an equality delete file: its equality columns by field id, through pyiceberg's reader (`ArrowScan`: field
  ids, type promotion, the table's name mapping, identity-partition projection), as the job's read schema
  types them, so that they compare with the data rows' values; a nested equality field comes out as a
  top-level column of its own.

Each file must read back its manifest's `record_count`, or the task fails naming the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.manifest import POSITIONAL_DELETE_SCHEMA, DataFile, DataFileContent, FileFormat
from pyiceberg.table import FileScanTask

from layout.compaction.executor import partitions as partitioning
from layout.compaction.executor.inputs import InputSource, metadata_of
from layout.errors import InputError

# The reserved field ids of a position delete file's columns (Iceberg spec, "Reserved Field IDs").
PATH_FIELD_ID = POSITIONAL_DELETE_SCHEMA.find_field("file_path").field_id
POS_FIELD_ID = POSITIONAL_DELETE_SCHEMA.find_field("pos").field_id


def position_batches(source: InputSource, files: Iterator[pa.RecordBatch],
                     out: pa.Schema) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` body: for each position delete file (a row of `files`: `del`, `path`, `record_count`),
    its rows as `out`: the file's `del`, then each row's data file path and position."""
    _, io = metadata_of(source)
    for chunk in files:
        for row in chunk.to_pylist():
            path, index = row["path"], row["del"]
            read = 0
            try:
                with io.new_input(path).open() as stream:
                    parquet = pq.ParquetFile(stream)
                    columns = _position_columns(parquet.schema_arrow, path)
                    for batch in parquet.iter_batches(columns=columns, batch_size=65536):
                        n = batch.num_rows
                        read += n
                        yield pa.RecordBatch.from_arrays(
                            [pa.repeat(pa.scalar(index, pa.int32()), n), batch.column(0).cast(pa.string()),
                             batch.column(1).cast(pa.int64())], schema=out)
            except InputError:
                raise
            except Exception as exc:
                raise InputError(f"{path}: cannot read this position delete file: {type(exc).__name__}: "
                                 f"{exc}; the table is unchanged") from exc
            _check_count(path, read, row["record_count"])


def _position_columns(schema: pa.Schema, path: str) -> list[str]:
    """The names of the `file_path` and `pos` columns: by their reserved field ids,
    else by the spec's names."""
    by_id: dict[int, str] = {}
    for f in schema:
        raw = (f.metadata or {}).get(b"PARQUET:field_id")
        if raw is not None:
            by_id[int(raw)] = f.name
    names = [by_id.get(PATH_FIELD_ID, "file_path"), by_id.get(POS_FIELD_ID, "pos")]
    missing = [n for n in names if n not in schema.names]
    if missing:
        raise InputError(f"{path}: a position delete file without column {missing[0]} (field ids "
                         f"{PATH_FIELD_ID}, {POS_FIELD_ID}); the table is unchanged")
    return names


def equality_batches(source: InputSource, files: Iterator[pa.RecordBatch], columns: tuple[str, ...],
                     target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` body: for each equality delete file (a row of `files`: `del`, `path`, `spec_id`,
    `partition`, `record_count`, `size`), its equality columns (`columns`, dotted paths of the read schema) as
    `target`'s fields after the file's `del`."""
    # pyiceberg's Arrow I/O costs about 0.5 s to import: only in the executors that read a delete file.
    from pyiceberg.io.pyarrow import ArrowScan

    metadata, io = metadata_of(source)
    projected = source.schema.select(*columns)
    for chunk in files:
        for row in chunk.to_pylist():
            spec = metadata.specs()[row["spec_id"]]
            # The delete file read as the data file it is laid out like: its columns by field id.
            task = DataFile.from_args(
                content=DataFileContent.DATA, file_path=row["path"], file_format=FileFormat.PARQUET,
                partition=partitioning.decode(row["partition"], spec, source.schema),
                record_count=row["record_count"], file_size_in_bytes=row["size"])
            task.spec_id = row["spec_id"]
            read = 0
            try:
                for batch in ArrowScan(metadata, io, projected, AlwaysTrue()).to_record_batches(
                    [FileScanTask(task)]
                ):
                    n = batch.num_rows
                    read += n
                    arrays: list[Any] = [pa.repeat(pa.scalar(row["del"], pa.int32()), n)]
                    arrays += [_column(batch, name).cast(field.type)
                               for name, field in zip(columns, list(target)[1:], strict=True)]
                    yield pa.RecordBatch.from_arrays(arrays, schema=target)
            except InputError:
                raise
            except Exception as exc:
                raise InputError(f"{row['path']}: cannot read this equality delete file as Iceberg does: "
                                 f"{type(exc).__name__}: {exc}; the table is unchanged") from exc
            _check_count(row["path"], read, row["record_count"])


def _column(batch: pa.RecordBatch, dotted: str) -> pa.Array:
    first, *rest = dotted.split(".")
    array = batch.column(first)
    for name in rest:  # a struct member: null where any enclosing struct is null, as Iceberg reads it
        array = pc.struct_field(array, name)
    return array


def _check_count(path: str, read: int, expected: int) -> None:
    if read != expected:
        raise InputError(f"{path}: read {read} rows of this delete file, the manifest says {expected}; the "
                         "table is unchanged")

