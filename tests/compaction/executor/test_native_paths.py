"""Which paths Spark's own reader reads exactly as the manifest names them (`inputs.native_reason`)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from layout.compaction.executor.inputs import native_reason

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
FOOTER = schema_to_pyarrow(SCHEMA)


@pytest.mark.parametrize("path", [
    "/tmp/t/data/00000-1-a.parquet",
    "file:///tmp/t/data/00000-1-a.parquet",
    "file:/tmp/t/data/x=1/00000-1-a.parquet",  # as Iceberg's Java writers name local files (Hadoop's Path)
    "s3://bucket/t/data/ts_day=2024-03-01/00001-4-2efabe41-0-00010.parquet",
])
def test_plain_paths_are_read_natively(path):
    assert native_reason(path, FOOTER, SCHEMA) is None


@pytest.mark.parametrize("path", [
    "/tmp/t/data/_hidden.parquet", "/tmp/t/data/.hidden.parquet", "/tmp/t/data/a%20b.parquet",
    "/tmp/t/data/a:b.parquet", "file:tmp/relative.parquet",
])
def test_paths_spark_would_misread_go_through_pyiceberg(path):
    assert native_reason(path, FOOTER, SCHEMA) == "its path needs pyiceberg's reader"


def test_the_footer_decides_the_rest():
    assert native_reason("/tmp/a.parquet", pa.schema([pa.field("id", pa.int64())]), SCHEMA) is not None
