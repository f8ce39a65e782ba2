"""How the DAGs' tasks end on a step's error (`runs.verdict`: fail at once, skip, or retried), and the commit
task's OpenLineage datasets (`runs.lineage`), decided in the pipeline; the DAGs only raise Airflow's
exceptions and wrap the datasets (dags/lakesort_common.py, tests/dags/test_common.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from layout import lineage as lineage_module
from layout.compaction.pipeline import runs
from layout.compaction.pipeline.spark_home import SparkUnsupported
from layout.errors import ConfigError, LakesortError
from layout.upkeep.lease import LeaseOwner, TableBusy

BUSY = TableBusy("t.events: lakesort_nightly run n1 is working on this table", table="t.events",
                 path=Path("x"))


@pytest.mark.parametrize(("step", "exc", "trigger", "expected"), [
    ("prepare", SparkUnsupported("Spark 3.4.1 is not supported"), "nightly",
     ("fail", "Spark 3.4.1 is not supported")),
    ("prepare", BUSY, "nightly", ("skip", f"{BUSY}: skipped")),
    ("prepare", BUSY, "backfill", ("fail", f"{BUSY}: trigger again when it has finished")),
    ("prepare", runs.SpecChanged("edited"), "nightly", None),  # the first read: no run to outlive
    ("verify", runs.SparkJobsFailed("job 0 failed"), None, ("fail", "job 0 failed")),
    ("verify", runs.SpecChanged("spec changed"), None, ("fail", "spec changed")),
    ("verify", SparkUnsupported("x"), None, None),
    ("commit", runs.SpecChanged("spec changed"), None, ("fail", "spec changed")),
    ("commit", runs.SparkJobsFailed("x"), None, None),
    ("commit", BUSY, None, None),
    ("maintain", BUSY, "nightly", ("skip", f"{BUSY}: skipped")),
    ("maintain", BUSY, "backfill", ("skip", f"{BUSY}: skipped")),  # tomorrow night's maintenance catches up
    ("maintain", runs.SpecChanged("x"), "nightly", None),
    ("prepare", ConfigError("broken.yaml: target_file_size"), "nightly", None),  # retried, as any other
    ("commit", OSError("catalog unreachable"), None, None),
    ("verify", LakesortError("rows differ"), None, None),
])
def test_verdict(step, exc, trigger, expected):
    assert runs.verdict(step, exc, trigger=trigger) == expected


def test_lineage_of_a_committed_run(monkeypatch):
    """The table read and written, with what was rewritten: read, the rows as planned (before deletes dropped
    some; a payload without them: the rows written); none before a result (a failed commit)."""
    pytest.importorskip("openlineage.client")
    monkeypatch.setattr(lineage_module, "_catalog_config", lambda catalog: (
        "lakesort", {"type": "sql", "uri": "sqlite:////x/catalog.db", "warehouse": "file:///x/warehouse"}))
    committed = runs.CommittedRun(
        table="t.events", owner=LeaseOwner.dag("lakesort_nightly", "r"), catalog=None, run_id="r1",
        work_dir="w", trigger="nightly", snapshot_id=7, partitions=("p",), files_removed=12, files_added=3,
        rows=91, bytes_removed=5000, bytes_added=4000, rows_read=96)
    (source,), (target,) = runs.lineage(committed.model_dump(mode="json"))
    assert (
        (source.namespace, source.name)
        == (target.namespace, target.name)
        == ("file:///x/warehouse", "t.events")
    )
    written = target.outputFacets["outputStatistics"]
    assert (written.rowCount, written.size, written.fileCount) == (91, 4000, 3)
    read = source.inputFacets["inputStatistics"]
    assert (read.rowCount, read.size, read.fileCount) == (96, 5000, 12)
    older = committed.model_copy(update={"rows_read": None, "bytes_removed": 0})  # an older payload
    (source,), _ = older.lineage()
    read = source.inputFacets["inputStatistics"]
    assert (read.rowCount, read.size, read.fileCount) == (91, None, 12)
    assert runs.lineage(None) == runs.lineage({}) == ([], [])
