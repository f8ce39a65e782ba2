"""Partition values as the plan, the Spark job and the commit pass them along: never guessed from footers.

A rewrite commits every output file with the partition values of the table's *current* partition spec.
For an input file written under that spec the values come from its manifest entry; for a file written
under an older spec (partition evolution) the job computes them per row with Iceberg's own transforms
(`Transform.pyarrow_transform`, the same code pyiceberg's writer uses), so rows of one old partition
split into the current spec's partitions.

Values travel as a *partition key*: JSON text of a list with one entry per partition field, each the
field's value in Iceberg's single-value binary serialization (hex) or null. It survives JSON and Spark
columns losslessly for every type (decimals, binary, uuid, dates as days, timestamps as micros), and
`decode` gives back the pyiceberg `Record` a `DataFile` needs. Directories name a key by `key_dir`, a
short digest: a key can be longer than a file name may be.
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.conversions import from_bytes, to_bytes
from pyiceberg.partitioning import PartitionFieldValue, PartitionKey
from pyiceberg.typedef import Record
from pyiceberg.types import PrimitiveType

if TYPE_CHECKING:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema

UNPARTITIONED = "[]"
# The columns the Spark job tags each row with, and the staged output's directories under the run's
# (`<GROUP>=<group id>/<PART>=<key_dir(key)>/`).
GROUP = "lakesort_group"  # no leading underscore: Spark's readers skip `_` directories
PART = "lakesort_part"  # the partition key's directory name (`key_dir`)
PART_KEY = "lakesort_part_key"  # the partition key itself (JSON), dropped before the write


def encode(values: Sequence[Any] | Record, spec: PartitionSpec, schema: Schema) -> str:
    """The key of a partition `Record` (values in Iceberg's internal representation)."""

    fields = spec.partition_type(schema).fields
    out = []
    for i, field in enumerate(fields):
        value = values[i]
        # A partition field's type (a transform's result) is a primitive type.
        out.append(None if value is None else to_bytes(cast(PrimitiveType, field.field_type), value).hex())
    return json.dumps(out, separators=(",", ":"))


def decode(key: str, spec: PartitionSpec, schema: Schema) -> Record:
    """The pyiceberg `Record` of a key, for `DataFile.partition`."""

    raw = json.loads(key)
    fields = spec.partition_type(schema).fields
    if len(raw) != len(fields):
        raise ValueError(f"partition key {key} has {len(raw)} value(s); the spec {spec.spec_id} has "
                         f"{len(fields)} field(s)")
    types = [cast(PrimitiveType, f.field_type) for f in fields]  # primitive, as in `encode`
    return Record(*[None if v is None else from_bytes(t, bytes.fromhex(v))
                    for t, v in zip(types, raw, strict=True)])


def key_dir(key: str) -> str:
    """A short, file-name-safe name for a key (the Spark job's output directory per partition)."""
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def label(key: str, spec: PartitionSpec, schema: Schema) -> str:
    """Iceberg's partition path of a key (`l_shipdate_month=1995-03`), for logs and reports."""
    return spec.partition_to_path(decode(key, spec, schema), schema) if spec.fields else ""


def split_by_partition(batch: pa.RecordBatch, spec: PartitionSpec,
                       schema: Schema) -> Iterator[tuple[str, pa.RecordBatch]]:
    """Rows of `batch` (columns named as in `schema`) split by the spec's partition values: (key, rows).

    As pyiceberg's writer does (`_determine_partitions`): the transforms over whole columns, the unique
    value tuples, one filter per tuple. A batch usually holds one or a few partitions.
    """


    if not spec.fields:
        yield UNPARTITIONED, batch
        return
    table = pa.Table.from_batches([batch])
    names = [f"__lakesort_p{i}" for i in range(len(spec.fields))]
    for field, name in zip(spec.fields, names, strict=True):
        source = schema.find_field(field.source_id)
        column = _column(table, schema.find_column_name(field.source_id))
        table = table.append_column(name, field.transform.pyarrow_transform(source.field_type)(column))
    for combo in table.select(names).group_by(names).aggregate([]).to_pylist():
        key = PartitionKey(
            field_values=[PartitionFieldValue(field=f, value=combo[n])
                          for f, n in zip(spec.fields, names, strict=True)],
            partition_spec=spec, schema=schema,
        )
        mask = functools.reduce(operator.and_, [
            pc.field(n) == combo[n] if combo[n] is not None else pc.field(n).is_null() for n in names])
        rows = table.filter(mask).drop_columns(names)
        for part in rows.to_batches():
            yield encode(key.partition, spec, schema), part


def _column(table: pa.Table, dotted: str | None) -> pa.ChunkedArray:
    """A (possibly nested struct) column by its dotted Iceberg name."""

    if dotted is None:
        raise ValueError("a partition source column is missing from the schema")
    parts = dotted.split(".")
    column = table.column(parts[0])
    for part in parts[1:]:
        column = pc.struct_field(column, part)
    return column
