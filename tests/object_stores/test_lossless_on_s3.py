"""The lossless suite's schema-evolution, partition-evolution and history cases, and the merge of sorted runs,
on S3 behind Iceberg's REST catalog: the same test bodies as tests/compaction/test_lossless.py and
test_merged_runs.py, given the session's REST catalog (`rest_iceberg_catalog`) instead of a SQL one.

Every file the job reads and writes goes through S3A and pyarrow's S3 filesystem with the credentials the
catalog vended for the table (the S3 front refuses any other key), the metadata through the REST server.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from lossless import in_process_submit, load_job

import layout.compaction.pipeline.driver

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _suite(name: str = "test_lossless"):
    """A module of tests/compaction (test_lossless.py by default),
    as pytest imported it or loaded here by path."""
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parents[1] / "compaction" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"lakesort_{name}_suite", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def job_here(spark, monkeypatch):
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", in_process_submit(spark, load_job()))


def _only_vended_key(object_store) -> None:
    log = object_store.log()
    assert log, "no request reached the S3 server"
    refused = [r for r in log if r["status"] == 403]
    assert not refused, f"{len(refused)} request(s) not signed with the vended key, e.g. {refused[0]}"
    # The job writes with S3A's magic committer: no file is renamed (a copy on S3).
    copies = [r["key"] for r in log if r["kind"] == "COPY"]
    assert not copies, f"{len(copies)} object(s) copied, e.g. {copies[0]}"


def test_schema_evolution_file_names_and_history_on_s3(rest_iceberg_catalog, job_here, tmp_path,
                                                       object_store):
    """Renames, swaps, drop and re-add, promotions, files added by path (any name, one without field ids);
    two compactions, then cleanup without grace: every snapshot of the history reads its own rows."""
    _suite().test_schema_evolution_and_file_names_are_lossless(rest_iceberg_catalog, None, tmp_path)
    table = rest_iceberg_catalog.load_table("t.evo")
    assert table.location().startswith("s3://")
    _only_vended_key(object_store)


def test_partition_evolution_on_s3(rest_iceberg_catalog, job_here, object_store):
    _suite().test_partition_evolution_rewrites_into_the_current_spec(rest_iceberg_catalog, None)
    _only_vended_key(object_store)


def test_sorted_runs_merged_on_s3(rest_iceberg_catalog, job_here, object_store, caplog, spark):
    """Two nights' sorted runs merged without a shuffle (tests/compaction/test_merged_runs.py): the driver
    reads the runs' page indexes through pyarrow's S3 filesystem and Spark their slices through S3A, with the
    vended key, and Spark writes each slice straight into its directory (no copy)."""
    spark.conf.set("spark.lakesort.compact.mergeMinBytes", "0")  # groups of KiBs: merged all the same
    try:
        table = _suite("test_merged_runs").merged_and_judged(rest_iceberg_catalog, "t.runs", False, caplog)
    finally:
        spark.conf.unset("spark.lakesort.compact.mergeMinBytes")
    assert table.location().startswith("s3://")
    _only_vended_key(object_store)
