"""The test bed itself: Iceberg Spark and pyiceberg see the same catalog and the same rows."""

from __future__ import annotations

import math

from iceberg_bed import assert_same_rows


def test_both_implementations_share_the_catalog(bed):
    t = bed.name("smoke")
    bed.spark.sql(f"CREATE TABLE {t} (id bigint, x double, ts timestamp) "
                  "USING iceberg PARTITIONED BY (days(ts))")
    bed.spark.sql(f"INSERT INTO {t} VALUES (1, 1.5, TIMESTAMP '2024-01-01 10:00:00'), (2, double('NaN'), "
                  "NULL), (3, -0.0, TIMESTAMP '2024-01-02 00:00:00')")
    table = bed.catalog.load_table(t)
    by_pyiceberg = table.scan().to_arrow()
    assert sorted(by_pyiceberg["id"].to_pylist()) == [1, 2, 3]
    by_spark = bed.spark.read(t)
    assert any(isinstance(v, float) and math.isnan(v) for v in by_spark["x"].to_pylist())
    assert_same_rows(by_spark, bed.spark.read(t, table.current_snapshot().snapshot_id), what=t)
