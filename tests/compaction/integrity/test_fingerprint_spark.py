"""The content fingerprint against Spark: Spark's own xxhash64 agrees row by row with our pyarrow
reimplementation on every type, nested types and random nested tables, salted or not; the files Spark writes
fingerprint as Spark reads them (INT96 and INT64 timestamps); and Spark's fingerprint of TPC-H lineitem is
`fingerprint_files`'.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fingerprint_cases import (
    DATA_COLUMNS,
    NESTED_COLUMNS,
    NESTED_SPARK_TYPES,
    SPARK_TYPES,
    all_types_table,
    nested_table,
    nested_tables,
    write_parquet,
)
from hypothesis import HealthCheck, given, settings

from layout.compaction.integrity.fingerprint import (
    SPARK_CONF,
    Fingerprint,
    fingerprint_files,
    fingerprint_table,
    row_hashes,
    salted,
    spark_fingerprint_expr,
    spark_row_hash_expr,
)


def _spark_fingerprint(df, columns: list[str]) -> Fingerprint:
    row = df.selectExpr("count(*) AS n", f"{spark_fingerprint_expr(columns)} AS s").collect()[0]
    return Fingerprint.from_spark(row["n"], row["s"])


@pytest.mark.spark
def test_spark_agrees_row_by_row_on_every_type(spark, tmp_path):
    table = all_types_table()
    path = write_parquet(table, tmp_path / "all" / "part-0.parquet")
    df = spark.read.parquet(str(path.parent))
    assert {f.name: f.dataType.simpleString() for f in df.schema.fields if f.name != "id"} == SPARK_TYPES

    # The whole row, and each column alone (so that a mismatch names its type), in one Spark query.
    exprs = [f"{spark_row_hash_expr(DATA_COLUMNS)} AS row"]
    exprs += [f"{spark_row_hash_expr([c])} AS `h_{c}`" for c in DATA_COLUMNS]
    rows = df.selectExpr("id", *exprs).orderBy("id").collect()
    assert [r["row"] for r in rows] == row_hashes(table, DATA_COLUMNS).tolist()
    for c in DATA_COLUMNS:
        assert [r[f"h_{c}"] for r in rows] == row_hashes(table, [c]).tolist(), c

    assert _spark_fingerprint(df, DATA_COLUMNS) == fingerprint_table(table, DATA_COLUMNS)
    assert _spark_fingerprint(df, DATA_COLUMNS) == fingerprint_files([path], columns=DATA_COLUMNS)

    # Salted with a group id (an INT column, as the compaction job salts each row with its group).
    for salt in (0, 7, -3, 2**31 - 1):
        salted_sql = spark_row_hash_expr(DATA_COLUMNS, salt=f"CAST({salt} AS INT)")
        got = [r["h"] for r in df.selectExpr("id", f"{salted_sql} AS h").orderBy("id").collect()]
        assert got == salted(row_hashes(table, DATA_COLUMNS), salt).tolist(), salt
        expected = Fingerprint(len(got), sum(got))
        assert fingerprint_table(table, DATA_COLUMNS, salt=salt) == expected
        assert fingerprint_files([path], columns=DATA_COLUMNS, salt=salt) == expected
    assert fingerprint_table(table, DATA_COLUMNS, salt=1) != fingerprint_table(table, DATA_COLUMNS, salt=2)


@pytest.fixture
def spark_job(spark):
    """The session with the settings the job needs for maps and times (`SPARK_CONF`), restored after."""
    before = {k: spark.conf.get(k, None) for k in SPARK_CONF}
    for k, v in SPARK_CONF.items():
        spark.conf.set(k, v)
    try:
        yield spark
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


@pytest.mark.spark
def test_spark_refuses_a_hash_over_maps_without_the_legacy_conf(spark):
    from pyspark.errors import AnalysisException

    key = "spark.sql.legacy.allowHashOnMapType"
    before = spark.conf.get(key)  # the shared session: a job run in process earlier sets it to true
    spark.conf.set(key, "false")
    try:
        for expr in ("xxhash64(map('a', 1))", "xxhash64(named_struct('s', array(map('a', 1))))"):
            with pytest.raises(AnalysisException,
                               match=r"HASH_MAP_TYPE.*spark\.sql\.legacy\.allowHashOnMapType"):
                spark.sql(f"SELECT {expr}").collect()
    finally:
        spark.conf.set(key, before)


@pytest.mark.spark
def test_spark_agrees_row_by_row_on_nested_types(spark_job, tmp_path):
    spark = spark_job
    table = nested_table()
    path = write_parquet(table, tmp_path / "nested" / "part-0.parquet")
    df = spark.read.parquet(str(path.parent))
    assert ({f.name: f.dataType.simpleString() for f in df.schema.fields if f.name != "id"}
            == NESTED_SPARK_TYPES)

    exprs = [f"{spark_row_hash_expr(NESTED_COLUMNS)} AS row", "xxhash64(map_entries(m)) AS entries"]
    exprs += [f"{spark_row_hash_expr([c])} AS `h_{c}`" for c in NESTED_COLUMNS]
    rows = df.selectExpr("id", *exprs).orderBy("id").collect()
    for c in NESTED_COLUMNS:
        assert [r[f"h_{c}"] for r in rows] == row_hashes(table, [c]).tolist(), c
    assert [r["row"] for r in rows] == row_hashes(table, NESTED_COLUMNS).tolist()
    assert [r["entries"] for r in rows] == row_hashes(table, ["m"]).tolist()  # a map hashes as its entries
    expected = _spark_fingerprint(df, NESTED_COLUMNS)
    assert (expected == fingerprint_table(table, NESTED_COLUMNS)
            == fingerprint_files([path], columns=NESTED_COLUMNS))

    # What the commit step reads: the files Spark writes (its own list and map layout).
    out = tmp_path / "written"
    df.repartition(3).write.parquet(str(out))
    files = sorted(out.glob("*.parquet"))
    assert len(files) > 1
    assert fingerprint_files(files, columns=NESTED_COLUMNS) == expected


@pytest.mark.spark
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(table=nested_tables(max_rows=12))
def test_spark_agrees_row_by_row_on_random_nested_tables(spark_job, tmp_path_factory, table):
    columns = table.column_names[1:]
    path = write_parquet(table, tmp_path_factory.mktemp("random") / "part-0.parquet")
    rows = (spark_job.read.parquet(str(path.parent))
            .selectExpr("id", f"{spark_row_hash_expr(columns)} AS h").orderBy("id").collect())
    assert [r["h"] for r in rows] == row_hashes(table, columns).tolist(), table.schema


@pytest.mark.spark
def test_files_spark_writes_fingerprint_as_spark_reads_them(spark, tmp_path):
    """The commit step re-reads what Spark wrote: INT96 and INT64 timestamps, int-backed decimals."""
    table = all_types_table()
    df = spark.read.parquet(str(write_parquet(table, tmp_path / "src" / "part-0.parquet").parent))
    expected = _spark_fingerprint(df, DATA_COLUMNS)
    for ts_type in ("INT96", "TIMESTAMP_MICROS", "TIMESTAMP_MILLIS"):
        out = tmp_path / ts_type
        spark.conf.set("spark.sql.parquet.outputTimestampType", ts_type)
        try:
            df.repartition(3).write.parquet(str(out))
        finally:
            spark.conf.unset("spark.sql.parquet.outputTimestampType")
        files = sorted(out.glob("*.parquet"))
        written = spark.read.parquet(str(out))
        if ts_type == "TIMESTAMP_MILLIS":  # millis truncate the micros: compare with what Spark reads back
            expected_here = _spark_fingerprint(written, DATA_COLUMNS)
            assert expected_here != expected
        else:
            expected_here = expected
            assert _spark_fingerprint(written, DATA_COLUMNS) == expected
        assert fingerprint_files(files, columns=DATA_COLUMNS) == expected_here, ts_type
        assert fingerprint_files(files, columns=["id", *DATA_COLUMNS]) == _spark_fingerprint(
            written, ["id", *DATA_COLUMNS])


@pytest.mark.spark
def test_int96_sub_micro_nanos_truncate_as_spark_reads_them(spark, tmp_path):
    # pyarrow can write INT96 with nanoseconds Spark cannot hold; both sides read them as micros.
    ts = pa.array([1_700_000_000_123_456_789, -1_999, 1_001, None], pa.timestamp("ns"))
    path = tmp_path / "int96" / "part-0.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"t": ts}), path, use_deprecated_int96_timestamps=True)
    df = spark.read.parquet(str(path.parent))
    assert _spark_fingerprint(df, ["t"]) == fingerprint_files([path])


@pytest.mark.spark
def test_tpch_lineitem_spark_equals_fingerprint_files(spark, lineitem_dir):
    files = sorted(lineitem_dir.glob("*.parquet"))
    df = spark.read.parquet(str(lineitem_dir))
    columns = df.columns
    ours = fingerprint_files(files, columns=columns)
    assert ours.rows > 50_000
    assert _spark_fingerprint(df, columns) == ours
    assert fingerprint_files(files) == ours
