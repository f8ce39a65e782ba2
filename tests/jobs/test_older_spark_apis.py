"""What stands in for the pyspark APIs newer than Spark 3.5 (jobs/compaction/spark_versions.py), run on this
session's Spark with the stand-ins forced: the same values as the APIs they stand in for. (The job on the
older Sparks themselves: tests/compaction/pipeline/test_spark_versions.py.)
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from lossless import job_part

from layout import curves

pytestmark = pytest.mark.spark

ROWS = [
    (1, 2.5, {"a": 1}, [1.0, math.nan]), (None, math.nan, None, None), (2**60 + 1, -0.0, {}, []),
    (-7, None, {"b": None}, [None]), (3, math.inf, {"c": 3}, [2.0]),
]
SCHEMA = "k long, x double, m map<string, int>, l array<double>"


def test_an_arrow_column_over_map_in_arrow_equals_the_arrow_udfs(spark):
    versions = job_part("spark_versions")
    df = spark.createDataFrame(ROWS, SCHEMA).repartition(2)
    bounds = [np.array([0, 5]), np.array([0.0, 3.0])]

    def index(*columns: pa.Array) -> pa.Array:
        return pa.array(curves.curve_index(columns, bounds, strategy="zorder", bits=2).view(np.int64))

    def rows(frame):
        return sorted(repr(r) for r in frame.collect())

    by_udf = versions.with_arrow_column(df, "z", index, ["k", "x"], versions.T.LongType(), use_udf=True)
    by_batches = versions.with_arrow_column(df, "z", index, ["k", "x"], versions.T.LongType(), use_udf=False)
    assert by_batches.schema == by_udf.schema
    assert rows(by_batches) == rows(by_udf)  # every column as it was (NaN, -0.0, nulls, maps), the same index


class _Before40:
    """A DataFrame as pyspark 3.5 has it: no toArrow."""

    def __init__(self, df):
        self.schema, self._collect_as_arrow = df.schema, df._collect_as_arrow


def test_to_arrow_without_to_arrow_collects_the_same_table(spark):
    versions = job_part("spark_versions")
    df = spark.createDataFrame(ROWS, SCHEMA)
    got, expected = versions.to_arrow(_Before40(df)), df.toArrow()
    assert got.schema == expected.schema
    assert repr(got.to_pylist()) == repr(expected.to_pylist())  # NaN is no equal of itself: compared as text
    empty = df.where("k > 1e30")
    assert versions.to_arrow(_Before40(empty)).schema.names == df.columns
    assert versions.to_arrow(_Before40(empty)).num_rows == 0
