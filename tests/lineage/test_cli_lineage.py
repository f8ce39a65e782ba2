"""`lakesort compact`'s OpenLineage events (`layout.lineage`), written by openlineage-python's own file
transport, configured the standard way (OPENLINEAGE__TRANSPORT__* variables).

One real run (spark-submit, Spark local) on one partition of the small t.events table (February: 28 rows in
two files, rewritten into one): START before Spark and COMPLETE after the
commit, one OpenLineage run whose id is derived from lakesort's, the table as input and output with the rows,
bytes and files read and written and its schema. The Spark job runs openlineage-spark's listener (the test
bed's jar, `make testbed`), with its own file transport: its application's events name lakesort's run as their
parent, and every event of the job names it as the root.
A run whose Spark job fails emits START and FAIL with the error, and the table stays as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

import layout.compaction.pipeline.driver
from layout import lineage
from layout.catalog import RUN_ID
from layout.cli import EXIT_FAILURE, EXIT_OK, main
from layout.compaction.pipeline.submit import CompactionFailed

pytest.importorskip("openlineage.client", reason="the lineage extra is not installed")

REPO = Path(__file__).resolve().parents[2]
BED_JARS = REPO / ".testbed" / "openlineage"
FEBRUARY = "d_month=1995-02"


@pytest.fixture
def file_transport(tmp_path, monkeypatch):
    """openlineage-python's file transport to one JSON-lines file; the process's client built anew for it."""
    path = tmp_path / "openlineage.jsonl"
    for key in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "file")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__LOG_FILE_PATH", str(path))
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__APPEND", "true")
    lineage._client.cache_clear()
    yield path
    lineage._client.cache_clear()


def read_events(path: Path) -> list[dict]:
    return ([json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists()
            else [])


def spark_listener(tmp_path, monkeypatch) -> Path | None:
    """openlineage-spark's listener in the job's conf ($LAKESORT_SPARK_CONF), its events to a file; None (and
    the Spark half of the test skipped, or failed under CI) without the test bed's jar."""
    jars = sorted(BED_JARS.glob("openlineage-spark_*.jar"))
    if not jars:
        if os.environ.get("CI"):
            pytest.fail("openlineage-spark is not in the test bed: run `make testbed`")
        return None
    events = tmp_path / "spark-openlineage"
    monkeypatch.setenv("LAKESORT_SPARK_CONF", json.dumps({
        "spark.jars": str(jars[0]), "spark.extraListeners": lineage.SPARK_LISTENER,
        "spark.openlineage.transport.type": "file", "spark.openlineage.transport.location": str(events),
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}))
    return events


@pytest.mark.spark
def test_a_compaction_emits_start_and_complete(events, file_transport, tmp_path, monkeypatch):
    java = shutil.which("java") or Path(os.environ.get("JAVA_HOME", "/nonexistent"), "bin", "java").exists()
    if not (Path(sys.executable).parent / "spark-submit").exists() or not java:
        (pytest.fail if os.environ.get("CI") else pytest.skip)("a real compaction "
                                                               "needs spark-submit and Java")
    spark_events = spark_listener(tmp_path, monkeypatch)
    assert main(["compact", "t.events", "--partition", FEBRUARY, "--force", "--no-record", "-q"]) == EXIT_OK

    snapshot = events.refresh().current_snapshot()
    run_id = snapshot.summary.additional_properties[RUN_ID]
    sent = read_events(file_transport)
    assert [e["eventType"] for e in sent] == ["START", "COMPLETE"]
    start, complete = sent
    for event in sent:
        assert event["run"]["runId"] == lineage.run_uuid(run_id)
        assert event["job"] == {**event["job"], "namespace": "lakesort", "name": "compact.t.events"}
        (source,), (target,) = event["inputs"], event["outputs"]
        assert (source["name"], target["name"]) == ("t.events", "t.events")
        # The SQL catalog's tables are named by its warehouse location.
        assert (source["namespace"] == target["namespace"]
                == f"file://{(tmp_path / '.lakesort').resolve()}/warehouse")
    read_at_start = start["inputs"][0]["inputFacets"]["inputStatistics"]
    assert (read_at_start["rowCount"], read_at_start["fileCount"]) == (28, 2) and read_at_start["size"] > 0
    assert "outputStatistics" not in start["outputs"][0].get("outputFacets", {})

    (source,), (target,) = complete["inputs"], complete["outputs"]
    written = target["outputFacets"]["outputStatistics"]
    added = int(snapshot.summary.additional_properties["added-files-size"])  # the commit's, as Iceberg counts
    assert written == {**written, "rowCount": 28, "fileCount": 1, "size": added}
    assert source["inputFacets"]["inputStatistics"] == {
        **source["inputFacets"]["inputStatistics"], "rowCount": 28, "fileCount": 2,
        "size": read_at_start["size"]}
    assert [f["name"] for f in target["facets"]["schema"]["fields"]] == ["d", "k", "v"]
    assert target["facets"]["catalog"]["framework"] == "iceberg"

    if spark_events is None:
        return
    # openlineage-spark's own events: the application's and its actions', each a child of lakesort's run.
    spark_sent = [json.loads(line) for f in sorted(spark_events.parent.glob(f"{spark_events.name}*"))
                  for line in f.read_text().splitlines() if line.strip()]
    assert spark_sent, "openlineage-spark wrote no events"
    ours = {"run": {"runId": lineage.run_uuid(run_id)},
            "job": {"namespace": "lakesort", "name": "compact.t.events"}}
    shown = [(e["eventType"], e["job"]["name"], e["run"]["facets"].get("parent")) for e in spark_sent]
    parents = [e["run"]["facets"]["parent"] for e in spark_sent if "parent" in e["run"].get("facets", {})]
    # the application's
    assert any(p["run"] == ours["run"] and p["job"] == ours["job"] for p in parents), shown
    for facet in parents:  # an action's parent is the application's run; the root is lakesort's run
        root = facet.get("root", {"run": facet["run"], "job": facet["job"]})
        assert (root["run"], root["job"]) == (ours["run"], ours["job"]), shown


def test_a_failed_run_emits_fail(events, file_transport, monkeypatch, capsys):
    """The real prepare step, a Spark job that fails (spark-submit replaced): START,
    then FAIL with the error."""
    def failing_spark(*args, **kwargs):
        raise CompactionFailed("the Spark job failed (exit 1): java.lang.OutOfMemoryError: Java heap space")

    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", failing_spark)
    before = events.current_snapshot().snapshot_id
    assert main(["compact", "t.events", "--force", "--no-record", "-q"]) == EXIT_FAILURE
    assert events.refresh().current_snapshot().snapshot_id == before

    sent = read_events(file_transport)
    assert [e["eventType"] for e in sent] == ["START", "FAIL"]
    assert sent[0]["run"]["runId"] == sent[1]["run"]["runId"]
    error = sent[1]["run"]["facets"]["errorMessage"]
    assert error["message"].startswith("the Spark job failed (exit 1): java.lang.OutOfMemoryError")
    assert error["programmingLanguage"] == "python"


def test_a_dry_run_emits_nothing(events, file_transport):
    assert main(["compact", "t.events", "--force", "--dry-run"]) == EXIT_OK
    assert read_events(file_transport) == []
