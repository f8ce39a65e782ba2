"""A table sorted by a double holding NaN compacts: parquet-mr writes no column index for a chunk holding NaN,
so the job starts a row group where the NaN rows begin, verification reports the row groups that hold them
(a warning, not a refusal), and the run commits without losing a row (floats compared bit for bit).

The real pipeline (planning, the job's own code on the test session's Spark, the proof, the layout rules and
GX, the commit), with small row groups so that a partition's file holds many.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from lossless import OWNER, assert_same, by_field_id, in_process_submit, load_job
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField

import layout.compaction.pipeline.driver
from layout.compaction.pipeline.driver import compact
from layout.compaction.planning.planner import RUN_ID
from layout.spec import parse_spec
from layout.verify.rules import verify_source

pytestmark = pytest.mark.spark

ROWS = 12_000


@pytest.fixture
def job_here(spark, monkeypatch):
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", in_process_submit(spark, load_job()))


def _rows(schema: pa.Schema, start: int) -> pa.Table:
    """Every 9th x is NaN, every 13th null, the others spread over +-1000 with both zeros. (One NaN payload:
    parquet-mr writes every NaN as Java's canonical one, whatever the job does.)"""
    xs = []
    for i in range(start, start + ROWS):
        if i % 9 == 4:
            xs.append(math.nan)
        elif i % 13 == 5:
            xs.append(None)
        else:
            xs.append(-0.0 if i % 1000 == 7 else ((i * 7919) % 20_001 - 10_000) / 10)
    return pa.table({"id": pa.array(range(start, start + ROWS), pa.int64()), "x": pa.array(xs, pa.float64())},
                    schema=schema)


@pytest.mark.parametrize(("direction", "nulls"), [("asc", "last"), ("desc", "last")])
def test_a_double_sort_key_with_nan_compacts_and_only_nan_row_groups_lose_the_column_index(
        iceberg_catalog, job_here, direction, nulls):
    cat = iceberg_catalog
    cat.create_namespace("t")
    name = f"t.nan_{direction}"
    table = cat.create_table(name, Schema(NestedField(1, "id", LongType(), required=True),
                                          NestedField(2, "x", DoubleType())))
    for start in (0, ROWS):
        table.append(_rows(table.schema().as_arrow(), start))
    before = by_field_id(table)
    spec = parse_spec({"table": name, "owner": OWNER, "target_file_size": "1MiB",
                       "sort": {"keys": [{"column": "x", "direction": direction, "nulls": nulls}]},
                       "writer": {"row_group_size": "16KiB", "page_size": "2KiB"}}, source="test")

    compact(name, spec=spec, force=True)  # the real verification: the layout rules and GX

    table = table.refresh()
    assert RUN_ID in table.current_snapshot().summary.additional_properties, "the run did not commit"
    assert_same(before, by_field_id(table))
    indexed, lost = 0, 0
    for task in table.scan().plan_files():
        path = task.file.file_path.removeprefix("file://")
        meta = pq.ParquetFile(path).metadata
        assert meta.num_row_groups > 1
        x = meta.schema.names.index("x")
        for rg in range(meta.num_row_groups):
            values = pq.ParquetFile(path).read_row_group(rg, columns=["x"]).column(0)
            nan = pc.sum(pc.is_nan(values).cast("int64")).as_py() or 0
            has_index = meta.row_group(rg).column(x).has_column_index
            assert has_index == (nan == 0), f"{path} row group {rg}: {nan} NaN, column index {has_index}"
            # the NaN row groups hold NaN (and nulls beside them) only: no number lost its index
            assert nan == 0 or pc.count(values, mode="only_valid").as_py() == nan
            indexed, lost = indexed + has_index, lost + (not has_index)
    assert lost >= 1 and indexed > 3 * lost

    report = verify_source(name, spec)
    assert report.ok
    [finding] = [f for f in report.findings if f.rule == "nan_column_index"]
    assert (finding.severity, finding.column) == ("warning", "x")
    assert "only row group(s)" in finding.diagnosis and "first sort key `x`" in finding.diagnosis
    assert f"sort {'last' if direction == 'asc' else 'first'} for `x` {direction}" in finding.diagnosis
    assert "cannot prune" in finding.diagnosis
