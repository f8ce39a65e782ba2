"""Delete files for pyiceberg tables in tests: pyiceberg 0.12 reads position deletes but writes none.

    path = write_position_deletes(table, [(data_path, 3), (data_path, 7)])   # a Parquet delete file
    commit_deletes(table, [position_delete_file(table, path)])               # one "delete" snapshot

A position delete file holds `file_path` (string, field id 2147483546) and `pos` (long, 2147483545),
sorted by both (the spec's order); its entry records the bounds of `file_path`, as Iceberg's writers do,
so a delete that names one data file is file-scoped. An equality delete file holds the equality columns
with the table's field ids. `commit_deletes` commits them as Iceberg's RowDelta does with deletes only: a
snapshot of operation "delete" whose new manifest is a delete manifest (content 1); pyiceberg's own
`ManifestWriterV2` writes data manifests only: lakesort's commit has a subclass for delete manifests, used
here. pyiceberg's scan applies the position deletes written here (a test checks it), which is how these
helpers are known to be right.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestWriter,
)
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import Record
from pyiceberg.types import StringType

from layout.compaction.commit.delete_manifests import DeleteManifestWriter
from layout.io import resolve
from layout.read.deletes import PATH_FIELD_ID, POS_FIELD_ID

__all__ = ["commit_deletes", "equality_delete_file", "position_delete_file", "write_equality_deletes",
           "write_position_deletes"]

_POSITION_SCHEMA = pa.schema([
    pa.field("file_path", pa.string(), nullable=False,
             metadata={b"PARQUET:field_id": str(PATH_FIELD_ID).encode()}),
    pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_FIELD_ID).encode()}),
])


def _new_path(table: Table, stem: str) -> str:
    return f"{table.location().rstrip('/')}/data/{stem}-{uuid.uuid4().hex}.parquet"


def _write(table: Table, data: pa.Table, stem: str) -> tuple[str, int]:
    location = _new_path(table, stem)
    filesystem, path = resolve(location)
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    pq.write_table(data, path, filesystem=filesystem)
    return location, filesystem.get_file_info(path).size


def write_position_deletes(table: Table,
                           positions: Sequence[tuple[str, int]]) -> tuple[str, int, int, str, str]:
    """A position delete file under the table's data directory: (location, size, rows, lowest path,
    highest path). `positions` are (data file path as the manifest records it, row position)."""
    rows = sorted(positions)
    data = pa.table({"file_path": [p for p, _ in rows], "pos": [n for _, n in rows]}, schema=_POSITION_SCHEMA)
    location, size = _write(table, data, "pos-deletes")
    return location, size, len(rows), rows[0][0], rows[-1][0]


def position_delete_file(table: Table, written: tuple[str, int, int, str, str], *,
                         partition: Sequence[Any] = (), spec_id: int | None = None,
                         bounds: bool = True) -> DataFile:
    """The manifest entry's file of a position delete file `write_position_deletes` wrote. `bounds=False`
    leaves the `file_path` bounds out (a delete a reader must check against every data file of its
    partition)."""
    location, size, rows, lo, hi = written
    kind = StringType()
    df = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES, file_path=location, file_format=FileFormat.PARQUET,
        partition=Record(*partition), record_count=rows, file_size_in_bytes=size,
        lower_bounds={PATH_FIELD_ID: to_bytes(kind, lo)} if bounds else None,
        upper_bounds={PATH_FIELD_ID: to_bytes(kind, hi)} if bounds else None,
    )
    df.spec_id = table.spec().spec_id if spec_id is None else spec_id
    return df


def write_equality_deletes(table: Table, values: pa.Table) -> tuple[str, int, int]:
    """An equality delete file of `values` (columns named as the table's, field ids from its schema):
    (location, size, rows)."""
    schema = table.schema()
    fields = [pa.field(name, values.schema.field(name).type,
                       metadata={b"PARQUET:field_id": str(schema.find_field(name).field_id).encode()})
              for name in values.column_names]
    location, size = _write(table, values.cast(pa.schema(fields)), "eq-deletes")
    return location, size, values.num_rows


def equality_delete_file(table: Table, written: tuple[str, int, int], columns: Sequence[str], *,
                         partition: Sequence[Any] = (), spec_id: int | None = None) -> DataFile:
    location, size, rows = written
    df = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES, file_path=location, file_format=FileFormat.PARQUET,
        partition=Record(*partition), record_count=rows, file_size_in_bytes=size,
        equality_ids=[table.schema().find_field(c).field_id for c in columns],
    )
    df.spec_id = table.spec().spec_id if spec_id is None else spec_id
    return df


class _AppendDeletes(_FastAppendFiles):
    """A fast append whose added manifest is a delete manifest (what RowDelta commits with deletes only),
    written under the delete files' own partition spec (pyiceberg's names the table's current one)."""

    spec_id: int

    def new_manifest_writer(self, spec: Any) -> ManifestWriter:
        return DeleteManifestWriter(self.spec(self.spec_id), self.schema(), self.new_manifest_output(),
                                     self._snapshot_id, self._compression)


def commit_deletes(table: Table, files: Sequence[DataFile]) -> Table:
    """Commit delete files (all under one partition spec) as one "delete" snapshot; the table refreshed."""
    specs = {f.spec_id for f in files}
    assert len(specs) == 1, "one snapshot's added manifest holds one partition spec's files"
    with table.transaction() as tx:
        producer = _AppendDeletes(operation=Operation.DELETE, transaction=tx, io=table.io)
        producer.spec_id = specs.pop()
        for f in files:
            producer.append_data_file(f)
        producer.commit()
    return table.refresh()
