"""The lossless suite's proof, and the commit (tests/compaction/test_lossless.py compacts the tables): the
proof does not trust the job's reader (a column read as nulls, two columns swapped, rows of a file lost) nor
the staged files (one changed after the job): it refuses them, naming the column or the file, and nothing is
committed; a failure after the commit exits 1 and says what was committed; doubles holding NaN in several
row groups commit, with no bound rather than a wrong one.

The job runs on the test session's SparkSession (`in_process_submit`); the oracle is `tests/lossless.py`'s:
pyiceberg's read of the table before and after, by field id, floats bit for bit.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lossless import (
    OWNER,
    assert_same,
    by_field_id,
    committed,
    in_process_submit,
    job_part,
    load_job,
    rows_for,
    run,
    spec_for,
)
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

import layout.compaction.pipeline.commit
import layout.compaction.pipeline.driver
from layout.errors import UsageError

pytestmark = pytest.mark.spark


@pytest.fixture
def job_here(spark, monkeypatch):
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", in_process_submit(spark, load_job()))


# ---- the proof does not trust the reader ----------------------------------------------------------------


def _wrong_reader(monkeypatch, job, change):
    """Make the job's reader wrong in the driver (`change` rewrites the DataFrame it returns): the job's own
    fingerprint is then taken over the wrong rows and agrees with the output; only the proof can tell. (It
    reports no natively read file and no native scan, so neither the job's own per-file row check nor its
    count against the manifests stands in for the proof.)"""
    job_run = job_part("run")
    real = job_run.read_inputs

    def read_inputs(spark, plan, groups):
        got = real(spark, plan, groups)
        return dataclasses.replace(got, rows=change(got.rows), native={}, scan=None)

    monkeypatch.setattr(job_run, "read_inputs", read_inputs)


@pytest.mark.parametrize(("change", "named"), [
    (lambda df: df.withColumn("a", _lit_null("string")), r"column a \(field id 2\): null count"),
    (lambda df: df.selectExpr(*[{"a": "b AS a", "b": "a AS b"}.get(c, f"`{c}`") for c in df.columns]),
     r"column (a|b) \(field id [23]\): (lower|upper) bound"),
    (lambda df: df.where("id % 10 != 3"), r"rows"),
], ids=["column-read-as-nulls", "columns-swapped", "rows-of-a-file-lost"])
def test_the_proof_refuses_what_a_wrong_reader_wrote(iceberg_catalog, spark, monkeypatch, change, named):
    job = load_job()
    _wrong_reader(monkeypatch, job, change)
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", in_process_submit(spark, job))
    cat = iceberg_catalog
    cat.create_namespace("t")
    table = cat.create_table("t.proof", Schema(NestedField(1, "id", LongType(), required=True),
                                               NestedField(2, "a", StringType()),
                                               NestedField(3, "b", StringType())))
    for start in (0, 30):
        table.append(rows_for(table, start, 30))
    before = by_field_id(table)
    snapshot = table.current_snapshot().snapshot_id
    with pytest.raises(layout.compaction.pipeline.commit.CommitRefused, match=named):
        run("t.proof")
    table = table.refresh()
    assert table.current_snapshot().snapshot_id == snapshot
    assert_same(before, by_field_id(table))


def test_a_file_spark_reads_short_is_named_without_a_first_pass(iceberg_catalog, spark, monkeypatch):
    """Every file read by Spark's own reader, so the job runs no first pass and takes each file's rows from
    the manifests: a reader that loses some rows of one file makes the write's observed count differ from
    them, and a count per file names that file; nothing is committed, the table reads as before."""
    from layout.errors import InputError

    job = load_job()
    job_run = job_part("run")
    real = job_run.read_inputs

    def read_inputs(spark, plan, groups):
        got = real(spark, plan, groups)
        assert got.scan is not None and got.native, "the table's files are read by Spark's own reader"
        short = got.rows.where("id != 33")  # a row of the second file
        scan = dataclasses.replace(got.scan, rows=got.scan.rows.where("id != 33"))
        return dataclasses.replace(got, rows=short, scan=scan)

    monkeypatch.setattr(job_run, "read_inputs", read_inputs)
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", in_process_submit(spark, job))
    cat = iceberg_catalog
    cat.create_namespace("t")
    table = cat.create_table("t.short", Schema(NestedField(1, "id", LongType(), required=True),
                                               NestedField(2, "a", StringType())))
    table.append(rows_for(table, 0, 20))
    table.append(rows_for(table, 30, 30))  # ids 30..59: the file that reads short
    (second,) = [t.file.file_path for t in table.scan().plan_files() if t.file.record_count == 30]
    before = by_field_id(table)
    snapshot = table.current_snapshot().snapshot_id
    with pytest.raises(InputError, match=r"Spark read 29 rows of it, the manifest says 30") as raised:
        run("t.short")
    assert str(raised.value).startswith(second), raised.value
    table = table.refresh()
    assert table.current_snapshot().snapshot_id == snapshot
    assert_same(before, by_field_id(table))


def _lit_null(type_name: str):
    from pyspark.sql import functions as F

    return F.lit(None).cast(type_name)


def test_the_proof_names_the_column_of_a_tampered_staged_file(iceberg_catalog, spark, monkeypatch):
    """A staged file changed after the job (same row count, one value outside the input's range): the
    metadata proof, which reads only the footers and the manifests, refuses it naming the column."""
    from layout.compaction.integrity.staged import prove_staged
    from layout.compaction.planning.planner import plan_rewrite
    from layout.manifest import StagedManifest

    cat = iceberg_catalog
    cat.create_namespace("t")
    table = cat.create_table("t.tamper", Schema(NestedField(1, "id", LongType(), required=True),
                                                NestedField(2, "x", DoubleType())))
    for start in (0, 30):
        table.append(rows_for(table, start, 30))
    job = load_job()
    plan = plan_rewrite(table, spec_for("t.tamper"), force=True)
    staged = job.compact_groups(spark, plan, list(plan.groups))
    manifest = StagedManifest(run_id=plan.run_id, table=plan.table, staging_dir="",
                              groups=tuple(staged.groups), expected_hash_sum=str(staged.hash_sum),
                              spark_version="", spark_master="", spark_conf={}, writer_options={}, seconds=0)
    prove_staged(table, plan, manifest)  # untouched: the proof passes
    target = staged.groups[0].outputs[0].path.removeprefix("file://")
    data = pq.read_table(target)
    i = data.column_names.index("id")  # (x holds +-inf already: any double is inside its bounds)
    tampered = pa.concat_arrays([pa.array([10**15], pa.int64()), data.column(i).combine_chunks().slice(1)])
    pq.write_table(data.set_column(i, data.field(i), tampered), target)
    with pytest.raises(layout.compaction.pipeline.commit.CommitRefused,
                       match=r"column id \(field id 1\): upper bound"):
        prove_staged(table, plan, manifest)


def test_a_failure_after_the_commit_exits_1_and_says_what_was_committed(
    iceberg_catalog, job_here, monkeypatch, tmp_path, capsys
):
    """Measuring fails with a usage error after the commit: the table did change, so the exit status is 1
    (never 2, which means nothing happened), and the message says what was committed before what failed."""
    import yaml

    import layout.compaction.pipeline.steps
    from layout.cli import main

    cat = iceberg_catalog
    cat.create_namespace("t")
    table = cat.create_table("t.after", Schema(NestedField(1, "id", LongType(), required=True)))
    table.append(rows_for(table, 0, 10))
    table.append(rows_for(table, 10, 10))

    def broken_measure(*args, **kwargs):
        raise UsageError("probe `p`: no such column (simulated)")

    monkeypatch.setattr(layout.compaction.pipeline.steps, "measure", broken_measure)
    spec = tmp_path / "after.yaml"
    spec.write_text(yaml.safe_dump({"table": "t.after", "owner": OWNER,
                                    "sort": {"keys": [{"column": "id"}]}}))
    assert main(["compact", "t.after", "--spec", str(spec), "--force"]) == 1
    err = capsys.readouterr().err
    assert "committed snapshot" in err and "then measuring failed" in err
    assert committed(table)


def test_doubles_with_nan_in_several_row_groups_compact(iceberg_catalog, job_here):
    """parquet-mr records NaN as the max of a row group holding one: the committed bounds leave such a
    column out (never a finite bound that misses values), and the proof, which compares the same figures,
    lets the rewrite commit."""
    cat = iceberg_catalog
    cat.create_namespace("t")
    table = cat.create_table("t.nan", Schema(NestedField(1, "id", LongType(), required=True),
                                             NestedField(2, "x", DoubleType())))
    for start in (0, 3000):
        table.append(rows_for(table, start, 3000))
    before = by_field_id(table)
    run("t.nan", spec=spec_for("t.nan", writer={"row_group_size": "8KiB", "page_size": "1KiB"}))
    table = table.refresh()
    assert committed(table)
    assert_same(before, by_field_id(table))
    files = [t.file for t in table.scan().plan_files()]
    assert any(pq.ParquetFile(f.file_path.removeprefix("file://")).metadata.num_row_groups > 1 for f in files)
    # x holds NaN: no bound rather than a wrong one
    assert all(2 not in (f.upper_bounds or {}) for f in files)
