"""A compaction run as the DAGs' tasks take it (layout.compaction.pipeline.runs, .dates,
.submit), without Airflow:
backfill requests and date ranges, the prepare step's statuses and the table lease, a failed Spark job
abandoning the run, the XCom payloads surviving JSON, and one Spark job description for both callers."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import types
from pathlib import Path

import pytest

import layout.compaction.pipeline.submit
from layout.compaction.pipeline import runs
from layout.compaction.pipeline.config import RunConfig
from layout.compaction.pipeline.steps import PreparedRun
from layout.compaction.pipeline.submit import (
    BASE_CONF,
    JOB,
    LOCAL_CONF,
    describe_job,
    job_arguments,
    operator_kwargs,
    submit,
)
from layout.compaction.planning.dates import DateRange, date_range, partitions_for_dates
from layout.errors import ConfigError, LakesortError, UsageError
from layout.registry import find_resolution, find_spec
from layout.upkeep.lease import LeaseOwner, TableBusy, acquire_lease, read_lease

NIGHT = LeaseOwner.dag("lakesort_nightly", "n1")


def lease_file(tmp_path) -> Path:
    return tmp_path / "work" / "t.events" / "lease.json"


# ---- requests and date ranges (no table opened) -------------------------------------------------------


def test_date_range_checks():
    assert date_range(None, None) is None and date_range("", None, partitions=["a=1"]) is None
    assert (date_range("1995-02-01", "1995-02-28")
            == DateRange(first=dt.date(1995, 2, 1), last=dt.date(1995, 2, 28)))
    assert str(date_range("1995-02-01", "1995-02-01")) == "1995-02-01..1995-02-01"
    for args, kwargs, message in (
        (("1995-02-01", "1995-02-02"), {"partitions": ["d_month=1995-02"]},
         "either `partitions` or a date range"),
        (("1995-02-01", None), {}, "needs both `from` and `to`: add `to`"),
        ((None, "1995-02-01"), {}, "add `from`"),
        (("1995-03-01", "1995-02-01"), {}, r"`from` \(1995-03-01\) is after `to` \(1995-02-01\)"),
        (("03/01/1995", "1995-04-01"), {}, "'03/01/1995' is not a date: write it as YYYY-MM-DD"),
        (("1995-03-01", "1995-02-01"), {"names": ("--from", "--to", "--partition")},
         "--from .* is after --to"),
    ):
        with pytest.raises(UsageError, match=message):
            date_range(*args, **kwargs)


def test_backfill_request(registry):
    request = runs.backfill_request({"table": "t.events", "partitions": ["d_month=1995-02"], "force": True,
                                     "from": None, "to": None, "dry_run": False})
    # The DAG run's one lookup: the request carries the spec (its file,
    # and each key's source) to the later tasks.
    config = RunConfig.of_resolution(find_resolution("t.events"))
    assert config.source == str(registry / "events.yaml") and config.on_disk
    assert (config.sources["sort.keys"].model_dump()
            == {"kind": "spec", "origin": str(registry / "events.yaml")})
    assert request == runs.TableRequest(table="t.events", trigger="backfill", config=config,
                                        partitions=("d_month=1995-02",), force=True)
    assert (runs.TableRequest.model_validate(json.loads(json.dumps(request.model_dump(mode="json"))))
            == request)
    request = runs.backfill_request({"table": "t.events", "from": "1995-02-01", "to": "1995-02-28",
                                     "dry_run": True, "partitions": []})
    assert (request.partitions, str(request.dates), request.dry_run) == (None, "1995-02-01..1995-02-28", True)
    assert request.describe() == "t.events: the partitions of 1995-02-01..1995-02-28, dry run"
    with pytest.raises(ConfigError, match=r"no spec for table 't.nope' .*specs exist for: t.events"):
        runs.backfill_request({"table": "t.nope"})
    with pytest.raises(UsageError, match="not both"):
        runs.backfill_request({"table": "t.events", "partitions": ["d_month=1995-02"], "from": "1995-02-01",
                               "to": "1995-02-02"})


def test_date_range_to_partitions(events):
    spec = find_spec("t.events")

    def covered(first: str, last: str) -> list[str]:
        return partitions_for_dates(spec, dates=date_range(first, last))

    assert covered("1995-01-31", "1995-03-01") == ["d_month=1995-01", "d_month=1995-02", "d_month=1995-03"]
    assert covered("1995-02-10", "1995-02-10") == ["d_month=1995-02"]
    assert covered("1994-01-01", "1994-12-31") == []  # no rows then
    with events.update_spec() as update:  # two partition fields: the range cannot be mapped
        update.add_identity("k")
    with pytest.raises(UsageError, match="give the partitions instead"):
        covered("1995-01-01", "1995-01-31")


# ---- the prepare step and the lease ---------------------------------------------------------------------


def test_prepare_takes_the_lease_and_plans(events, tmp_path):
    planned = runs.prepare_table(runs.TableRequest(table="t.events", trigger="nightly"), owner=NIGHT)
    assert planned.status == "planned" and planned.jobs and planned.plan is None
    assert planned.partitions == ("d_month=1995-01", "d_month=1995-02", "d_month=1995-03", "d_month=1995-04")
    assert read_lease("t.events").same_run(NIGHT)
    # The payload through JSON (as XCom stores it) is the same value.
    assert (runs.PlannedTable.model_validate(json.loads(json.dumps(planned.model_dump(mode="json"))))
            == planned)
    assert planned.prepared() == PreparedRun.load(planned.work_dir)

    backfill = LeaseOwner.dag("lakesort_backfill", "b1")
    with pytest.raises(TableBusy, match="lakesort_nightly run n1 is working on this table"):
        runs.prepare_table(runs.TableRequest(table="t.events", trigger="backfill"), owner=backfill)
    assert read_lease("t.events").same_run(NIGHT)  # the holder's lease is untouched


def test_dry_run_takes_no_lease_and_shows_the_plan(events, tmp_path, iceberg_catalog):
    from layout.metrics.measure import read_runs

    acquire_lease("t.events", NIGHT)  # a compaction is running: a dry run only reads, beside it
    request = runs.TableRequest(table="t.events", trigger="backfill",
                                dates=date_range("1995-02-10", "1995-03-05"), force=True, dry_run=True)
    planned = runs.prepare_table(request, owner=LeaseOwner.dag("lakesort_backfill", "b1"))
    assert planned.status == "dry-run" and planned.jobs == () and read_lease("t.events").same_run(NIGHT)
    view = planned.plan
    assert [(p.partition, p.action) for p in view.partitions] == [("d_month=1995-02", "rewrite"),
                                                                    ("d_month=1995-03", "rewrite")]
    assert view.forced and {g.partition for g in view.groups} == {"d_month=1995-02", "d_month=1995-03"}
    assert runs.PlannedTable.model_validate(planned.model_dump(mode="json")) == planned
    (record,) = [r for r in read_runs(iceberg_catalog, "t.events").to_pylist()
                 if r["run_id"] == planned.run_id]
    assert record["status"] == "dry-run"


def test_nothing_to_do_releases_the_lease(events, tmp_path):
    request = runs.TableRequest(table="t.events", trigger="backfill",
                                dates=date_range("1994-01-01", "1994-01-31"))
    planned = runs.prepare_table(request, owner=NIGHT)
    assert (planned.status, planned.run_id, planned.jobs) == ("nothing-to-do", None, ())
    assert planned.summary == "t.events: nothing to do (no partition holds rows of 1994-01-01..1994-01-31)"
    assert not lease_file(tmp_path).exists()


def test_a_failed_prepare_releases_the_lease(events, tmp_path):
    with events.update_spec() as update:
        update.add_identity("k")
    request = runs.TableRequest(table="t.events", trigger="backfill",
                                dates=date_range("1995-01-01", "1995-01-31"))
    with pytest.raises(UsageError):
        runs.prepare_table(request, owner=NIGHT)
    assert not lease_file(tmp_path).exists()


def test_failed_spark_job_abandons_the_run(events, iceberg_catalog, tmp_path):
    """`verify_table` finds a job without a manifest: staged files removed, the run recorded as failed."""
    from layout.metrics.measure import read_runs
    from layout.upkeep.cleanup import staging_root

    planned = runs.prepare_table(runs.TableRequest(table="t.events", trigger="nightly"), owner=NIGHT)
    prepared = planned.prepared()
    # What a Spark job that died half-way leaves: a staged file, no manifest.
    orphan = (
        Path(staging_root(events).removeprefix("file://"))
        / prepared.run_id
        / "lakesort_group=0"
        / "part-0.parquet"
    )
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"half")
    with pytest.raises(runs.SparkJobsFailed, match=r"Spark job\(s\) \[0\] failed: run abandoned"):
        runs.verify_table(planned)
    assert not orphan.exists()
    assert not lease_file(tmp_path).exists()
    (record,) = read_runs(iceberg_catalog, "t.events").to_pylist()
    assert record["status"] == "failed" and record["error"].startswith("spark: job(s) 0 failed")


def test_payload_models_refuse_unknown_fields():
    payload = runs.TableRequest(table="t.events", trigger="nightly").model_dump(mode="json")
    assert payload == {"table": "t.events", "trigger": "nightly", "config": None, "partitions": None,
                       "dates": None, "force": False, "dry_run": False}
    with pytest.raises(ValueError, match="tabel"):
        runs.TableRequest.model_validate({**payload, "tabel": "x"})
    with pytest.raises(ValueError, match="either partitions or a date range"):
        runs.TableRequest.model_validate({**payload, "partitions": ["a=1"], "dates": {"first": "1995-01-01",
                                                                                     "last": "1995-01-02"}})
    committed = runs.CommittedRun(table="t.events", owner=NIGHT, catalog=None, run_id="r", work_dir="w",
                                  trigger="nightly", snapshot_id=7, partitions=("a=1",), files_removed=4,
                                  files_added=1, rows=10)
    assert committed.asset_uri() == "iceberg://default/t.events"
    assert committed.event_extra() == {"table": "t.events", "run_id": "r", "trigger": "nightly",
                                       "snapshot_id": 7, "partitions": ["a=1"], "files_removed": 4,
                                       "files_added": 1, "rows": 10}
    with pytest.raises(LakesortError, match="no run was prepared"):
        runs.PlannedTable(table="t", owner=NIGHT, status="nothing-to-do", summary="s").prepared()


def test_a_run_record_checks_its_literals_and_a_step_names_its_outcome():
    """The row of lakesort.compaction_runs is a frozen model in the store's column order: a status, trigger or
    verification it does not know is refused where the row is made (a step) or read back (the report); the
    outcome a step records names fields of the row only."""
    from pydantic import ValidationError

    from layout.metrics.runs import RunOutcome, RunRecord
    from layout.metrics.store import RUNS_FIELDS

    row = {"run_id": "r", "table": "t.events", "status": "committed", "trigger": "nightly",
           "started_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "duration_s": 1.0}
    assert RunRecord(**row).verification == "skipped"
    for field, bad in (("status", "done"), ("trigger", "weekly"), ("verification", "ok")):
        with pytest.raises(ValidationError, match=field):
            RunRecord(**{**row, "verification": "passed", field: bad})
    with pytest.raises(ValidationError, match="file_added"):
        RunOutcome(status="committed", file_added=1)
    assert list(RunRecord.model_fields) == [name for name, _, _ in RUNS_FIELDS]
    assert set(RunOutcome.model_fields) < set(RunRecord.model_fields)


# ---- one Spark job description for `lakesort compact` and the DAGs --------------------------------------


def test_the_description_follows_the_settings(events, tmp_path, monkeypatch):
    # its option: tests/compaction/pipeline/test_class_archive.py
    monkeypatch.setenv("LAKESORT_SPARK_CLASS_ARCHIVE", "false")
    planned = runs.prepare_table(runs.TableRequest(table="t.events", trigger="nightly"), owner=NIGHT)
    prepared = planned.prepared()
    (kwargs,) = operator_kwargs(prepared)
    job = prepared.jobs[0]
    assert kwargs == {
        "application": str(JOB),
        "application_args": job_arguments(prepared.plan_path, job.manifest_path, job.group_ids),
        "name": f"lakesort-compact t.events {prepared.run_id} job 0", "conf": BASE_CONF,
        "env_vars": {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable},
        "py_files": str(Path(prepared.work_dir) / "layout.zip")}
    assert Path(kwargs["py_files"]).is_file()

    monkeypatch.setenv("LAKESORT_SPARK_APPLICATION", "local:///opt/lakesort/jobs/compact.py")
    monkeypatch.setenv("LAKESORT_SPARK_PYTHON", "/opt/venv/bin/python")
    monkeypatch.setenv("LAKESORT_SPARK_CONF", '{"spark.executor.memory": "4g"}')
    monkeypatch.setenv("LAKESORT_SHIP_LAYOUT", "installed")
    (kwargs,) = operator_kwargs(prepared)
    assert kwargs["application"] == "local:///opt/lakesort/jobs/compact.py" and "py_files" not in kwargs
    assert kwargs["conf"] == {**BASE_CONF, "spark.executor.memory": "4g"}
    assert (kwargs["env_vars"]
            == {"PYSPARK_PYTHON": "/opt/venv/bin/python", "PYSPARK_DRIVER_PYTHON": "/opt/venv/bin/python"})


def test_submit_runs_the_description(tmp_path, monkeypatch, registry):
    """`lakesort compact`'s spark-submit is the description's command, with its environment."""
    monkeypatch.setenv("LAKESORT_SPARK_CONF", '{"spark.ui.enabled": "false"}')
    monkeypatch.setenv("LAKESORT_SPARK_CLASS_ARCHIVE", "false")
    seen = {}

    def run(cmd, *, stdout, stderr, env, check):
        seen.update(cmd=cmd, env=env)
        return types.SimpleNamespace(returncode=0)

    monkeypatch.setattr(layout.compaction.pipeline.submit, "subprocess",
                        types.SimpleNamespace(run=run, STDOUT=-2))
    monkeypatch.setattr(layout.compaction.pipeline.submit, "spark_submit_binary", lambda: "spark-submit")
    submit(tmp_path / "plan.json", tmp_path / "manifest-0.json", master="local[2]", name="lakesort-compact-t",
           conf={"spark.driver.memory": "1g"}, work_dir=tmp_path, groups=(0, 1))
    description = describe_job(plan_path=tmp_path / "plan.json", manifest_path=tmp_path / "manifest-0.json",
                               groups=(0, 1), name="lakesort-compact-t", work_dir=tmp_path,
                               conf={"spark.driver.memory": "1g"}, master="local[2]")
    assert seen["cmd"] == description.command(binary="spark-submit", master="local[2]")
    assert seen["cmd"][:3] == ["spark-submit", "--master", "local[2]"]
    # a local master: the driver and its UI on the loopback interface only
    assert description.conf == {**BASE_CONF, **LOCAL_CONF, "spark.ui.enabled": "false",
                                "spark.driver.memory": "1g"}
    assert seen["env"]["SPARK_LOCAL_IP"] == "127.0.0.1" or "SPARK_LOCAL_IP" in os.environ
    assert seen["cmd"][-7:] == [str(JOB), "--plan", str(tmp_path / "plan.json"), "--manifest",
                                str(tmp_path / "manifest-0.json"), "--groups", "0,1"]
    assert seen["env"]["PYSPARK_PYTHON"] == description.env_vars["PYSPARK_PYTHON"] == sys.executable
    assert description.py_files == str(tmp_path / "layout.zip") and (tmp_path / "layout.zip").is_file()
