"""layout.delete_rule: Iceberg's rule of which delete applies to which data file, on values and on columns.

The brute-force oracle is the spec's sentence, case by case; the Spark case evaluates the very same function
on columns over every combination and must agree with it on values (the job's joins use it on columns).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from layout.delete_rule import applies


def _spec(kind: str, data_seq: int, delete_seq: int, same_partition: bool, delete_global: bool) -> bool:
    if not (same_partition or delete_global):
        return False
    if kind == "position":
        return data_seq <= delete_seq
    return data_seq < delete_seq


@given(st.sampled_from(["position", "equality"]), st.integers(0, 5), st.integers(0, 5), st.booleans(),
       st.booleans())
def test_the_rule_on_values_is_the_specs(kind, data_seq, delete_seq, same_partition, delete_global):
    delete_global = delete_global and kind == "equality"  # only an equality delete is global
    assert applies(kind, data_sequence=data_seq, delete_sequence=delete_seq, same_partition=same_partition,
                   delete_global=delete_global) == _spec(kind, data_seq, delete_seq, same_partition,
                                                         delete_global)


def test_a_delete_at_the_data_files_own_sequence_number():
    # Equal sequence numbers: a position delete committed with the data applies, an equality delete does not
    # (that is how an equality delete committed at the rewrite's starting sequence number misses its outputs).
    common = {"data_sequence": 7, "delete_sequence": 7, "same_partition": True, "delete_global": False}
    assert applies("position", **common)
    assert not applies("equality", **common)


@pytest.mark.spark
def test_the_rule_on_spark_columns_is_the_rule_on_values(spark):
    from pyspark.sql import functions as F

    cases = [(kind, d, e, p, g and kind == "equality")
             for kind, d, e, p, g in itertools.product(["position", "equality"], range(3), range(3),
                                                        [True, False], [True, False])]
    frame = spark.createDataFrame(cases, "kind string, d int, e int, p boolean, g boolean")
    on_columns = {
        kind: {tuple(r[:4]): r[4] for r in frame.where(F.col("kind") == kind).select(
            "d", "e", "p", "g", applies(kind, data_sequence=F.col("d"), delete_sequence=F.col("e"),
                                        same_partition=F.col("p"), delete_global=F.col("g")).alias("a"),
        ).collect()}
        for kind in ("position", "equality")}
    for kind, d, e, p, g in cases:
        assert on_columns[kind][(d, e, p, g)] == _spec(kind, d, e, p, g), (kind, d, e, p, g)
