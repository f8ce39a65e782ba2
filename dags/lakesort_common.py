"""What the lakesort DAGs share: configuration, the per-table task bodies and the task graph of a compaction.

The DAG files (lakesort_nightly.py, lakesort_backfill.py, lakesort_report.py) only pick which tables and
which options; the steps are `layout.compaction.steps`'s (see its docstring and DESIGN.md, "A nightly run"):

    prepare (one task per table, mapped)      plan; nothing to do or dry run: record the run, stop here
    planned                                   the tables that have Spark work (a failed prepare drops out)
    spark_jobs                                one set of spark-submit arguments per Spark job, all tables
    compact (SparkSubmitOperator, mapped)     one Spark application per job, pool `lakesort`, retried
    table.verify / .commit / .measure         per table (a mapped task group): each table depends only on
                                              its own earlier tasks, so one table's failure stops no other
    report                                    rebuild the HTML reports (runs whatever failed before)
    check_tables                              fails the DAG run if any table failed (all else succeeded)

Why Spark jobs are mapped outside the per-table group: Airflow cannot map a task over an upstream's
output inside a mapped task group ("operator expansion in an expanded task group is not yet supported",
Airflow 3.3), so the jobs of all tables are one flat list, and `verify` (trigger rule all_done) checks its
own jobs' manifests: a job that failed (after its retries) leaves none, and the run is abandoned (staged
files removed, the failure recorded) instead of verified.

Parse time: this module imports the standard library, yaml and `airflow.sdk` only. `layout` (pydantic,
pyarrow, pyiceberg) and the Spark provider are imported inside the task functions or the graph builder.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset, AssetAlias, get_current_context, task, task_group

log = logging.getLogger("lakesort.dags")

DAGS_DIR = Path(__file__).resolve().parent


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


# ---- configuration (environment variables, read when the DAG files are parsed) ------------------------

SPARK_CONN_ID = _env("LAKESORT_SPARK_CONN_ID", "spark_default")
NIGHTLY_CRON = _env("LAKESORT_NIGHTLY_CRON", "0 2 * * *")  # UTC
# One pool for the Spark step of every lakesort DAG: nightly and backfill runs share the cluster's slots.
POOL = _env("LAKESORT_POOL", "lakesort")
SPARK_RETRIES = int(_env("LAKESORT_SPARK_RETRIES", "2"))
SPARK_RETRY_DELAY = dt.timedelta(seconds=float(_env("LAKESORT_SPARK_RETRY_DELAY", "60")))
SPARK_MAX_RETRY_DELAY = dt.timedelta(minutes=30)
# Spark applications of one DAG run at a time (the pool bounds them across runs and DAGs).
SPARK_PARALLELISM = int(_env("LAKESORT_SPARK_PARALLELISM", "2"))
# A table lease older than this is taken to be left by a dead run and broken (see acquire_lease).
LEASE_TTL = dt.timedelta(hours=float(_env("LAKESORT_LEASE_TTL_HOURS", "12")))
ASSET_ALIAS = "lakesort-compacted"
START_DATE = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
TAGS = ["lakesort"]


def tables_dir() -> Path:
    """The table registry: $LAKESORT_TABLES_DIR, else dags/tables beside this file (never the CWD's)."""
    configured = os.environ.get("LAKESORT_TABLES_DIR")
    return Path(configured) if configured else DAGS_DIR / "tables"


def registered_tables() -> list[str]:
    """Table ids of the registry, cheaply (the `table:` key of each YAML; a broken file is skipped here
    and reported by the task that needs it)."""
    import yaml

    tables = []
    for path in sorted(tables_dir().glob("*.y*ml")):
        try:
            doc = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            log.warning("table spec %s unreadable: %s", path, exc)
            continue
        if isinstance(doc, dict) and isinstance(doc.get("table"), str):
            tables.append(doc["table"])
    return sorted(set(tables))


def task_env() -> None:
    """Make `layout`'s defaults independent of the task's working directory (layout reads the registry
    from $LAKESORT_TABLES_DIR, default `dags/tables` relative to the CWD)."""
    os.environ.setdefault("LAKESORT_TABLES_DIR", str(tables_dir()))


def find_spec(table: str):
    from layout.compaction.driver import find_spec as _find

    task_env()
    return _find(table, tables_dir())


# ---- one run per table at a time ------------------------------------------------------------------------


class TableBusy(Exception):
    """Another run holds the table's lease: `layout.compaction.lease.TableBusy`, raised again as this class because
    the DAG files import no `layout` when they are parsed."""


def _owner(context) -> dict[str, str]:
    return {"dag_id": context["dag"].dag_id, "run_id": context["run_id"], "host": socket.gethostname(),
            "acquired_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}


def _lease_owner(owner: dict[str, Any]):
    """The DAG run's owner record (a dict: it travels through XCom) as a `layout.compaction.lease.LeaseOwner`."""
    from layout.compaction.lease import LeaseOwner

    return LeaseOwner.model_validate({"kind": "dag", **owner})


def acquire_lease(table: str, owner: dict[str, str]) -> None:
    """Take the table's lease (`layout.compaction.lease`, shared with the CLI), so a nightly and a backfill run
    (different DAGs: max_active_runs cannot see each other) never work on one table at once.

    The same DAG run takes it again (a retried task). A lease older than LAKESORT_LEASE_TTL_HOURS is a
    dead run's and is broken. The work root must be shared by every worker, as the run files already are.
    """
    from layout.compaction import lease
    try:
        lease.acquire_lease(table, _lease_owner(owner), ttl=LEASE_TTL)
    except lease.TableBusy as exc:
        raise TableBusy(str(exc)) from exc


def release_lease(table: str, owner: dict[str, str]) -> None:
    from layout.compaction.lease import release_lease as release

    release(table, _lease_owner(owner))


def sweep_leases(owner: dict[str, str]) -> int:
    """Release every lease this DAG run still holds (the last task's job: a table whose tasks stopped
    early, for example upstream_failed, released nothing)."""
    from layout.compaction.lease import sweep_leases as sweep

    return sweep(_lease_owner(owner))


# ---- backfill requests ----------------------------------------------------------------------------------


def partitions_for_dates(spec, date_from: str, date_to: str) -> list[str]:
    """The table's existing partitions that hold rows of days in [date_from, date_to], as partition paths
    (`l_shipdate_month=1995-03`): each day (or hour) of the range through the partition transform.

    Only for a table partitioned by one field, a year/month/day/hour or identity transform of a date or
    timestamp column; any other table takes explicit `partitions`.
    """
    from pyiceberg.transforms import HourTransform, IdentityTransform, TimeTransform
    from pyiceberg.typedef import Record
    from pyiceberg.types import DateType, TimestampType, TimestamptzType

    from layout.catalog import load_table

    first, last = dt.date.fromisoformat(date_from), dt.date.fromisoformat(date_to)
    table = load_table(spec.table, spec.catalog)
    pspec, schema = table.spec(), table.schema()
    if len(pspec.fields) != 1:
        raise ValueError(f"{spec.table} has {len(pspec.fields)} partition fields: a date range maps onto one "
                         "date partition field only; give `partitions` instead")
    field = pspec.fields[0]
    source = schema.find_field(field.source_id).field_type
    dated = isinstance(field.transform, TimeTransform | IdentityTransform) and isinstance(
        source, DateType | TimestampType | TimestamptzType)
    if not dated:
        raise ValueError(f"{spec.table} is partitioned by {field.transform} of a {source} column: a date range "
                         "maps onto date partitions only; give `partitions` instead")
    transform = field.transform.transform(source)
    step = dt.timedelta(hours=1) if isinstance(field.transform, HourTransform) else dt.timedelta(days=1)
    epoch = dt.datetime(1970, 1, 1)
    moment, end = dt.datetime.combine(first, dt.time()), dt.datetime.combine(last, dt.time(23, 59, 59))
    wanted: set[str] = set()
    while moment <= end:
        delta = moment - epoch
        value = delta.days if isinstance(source, DateType) else delta // dt.timedelta(microseconds=1)
        wanted.add(pspec.partition_to_path(Record(transform(value)), schema))
        moment += step
    if table.current_snapshot() is None:
        return []
    existing = {pspec.partition_to_path(Record(*p.values()), schema)
                for p in table.inspect.partitions().column("partition").to_pylist()}
    return sorted(wanted & existing)


def check_request(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The backfill's params checked together (the JSON schema checks each on its own)."""
    table = params.get("table")
    known = registered_tables()
    if table not in known:
        raise ValueError(f"table {table!r} is not registered in {tables_dir()} (registered: {', '.join(known)})")
    partitions = list(params.get("partitions") or [])
    date_from, date_to = params.get("from") or None, params.get("to") or None
    if partitions and (date_from or date_to):
        raise ValueError("give either partitions or a date range (from/to), not both")
    if bool(date_from) != bool(date_to):
        raise ValueError("a date range needs both `from` and `to`")
    if date_from and dt.date.fromisoformat(date_from) > dt.date.fromisoformat(date_to):
        raise ValueError(f"`from` ({date_from}) is after `to` ({date_to})")
    what = (f"partitions {', '.join(partitions)}" if partitions else
            f"the partitions of {date_from}..{date_to}" if date_from else "every partition")
    log.info("backfill of %s: %s%s%s", table, what, ", forced" if params.get("force") else "",
             ", dry run" if params.get("dry_run") else "")
    return [{"table": table, "trigger": "backfill", "partitions": partitions or None, "from": date_from,
             "to": date_to, "force": bool(params.get("force")), "dry_run": bool(params.get("dry_run"))}]


# ---- task bodies ----------------------------------------------------------------------------------------


def _plan_view(prepared) -> dict[str, Any]:
    """The plan as a dry run shows it (task log and XCom): decisions per partition and the groups."""
    plan = prepared.plan()
    return {
        "table": prepared.table, "run_id": prepared.run_id, "summary": prepared.summary(),
        "plan_path": prepared.plan_path, "forced": plan.forced, "input_bytes": plan.input_bytes,
        "partitions": [{"partition": d.partition, "action": d.action, "reasons": list(d.reasons), "files": d.files,
                        "bytes": d.bytes, "rows": d.rows} for d in plan.partitions],
        "groups": [{"group_id": g.group_id, "partition": g.partition, "input_files": len(g.inputs),
                    "bytes": g.bytes, "rows": g.rows, "output_files": g.output_files} for g in plan.groups],
        "spark_jobs": [{"job_id": j.job_id, "groups": list(j.group_ids), "input_bytes": j.input_bytes}
                       for j in prepared.jobs],
    }


def prepare_table(item: dict[str, Any], context) -> dict[str, Any]:
    """Plan one table (and take its lease); stop here when there is nothing to do or for a dry run."""
    from layout.compaction import steps as pipeline
    from layout.compaction.driver import layout_zip

    table = item["table"]
    context["lakesort_table"] = table  # the map index's label in the UI
    owner = _owner(context)
    result: dict[str, Any] = {"table": table, "owner": owner}
    try:
        if not item.get("dry_run"):  # a dry run only reads: it may run beside a compaction of the table
            acquire_lease(table, owner)
    except TableBusy as exc:
        from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

        if item["trigger"] == "nightly":  # tonight's work waits for tomorrow; the other run carries on
            raise AirflowSkipException(f"{exc}: skipped") from None
        raise AirflowFailException(f"{exc}: trigger again when it has finished") from None
    try:
        spec = find_spec(table)
        partitions = item.get("partitions")
        if item.get("from"):
            partitions = partitions_for_dates(spec, item["from"], item["to"])
            log.info("%s: %s..%s covers %s", table, item["from"], item["to"], ", ".join(partitions) or "no partition")
            if not partitions:
                log.info("%s: nothing to do (no partition holds rows of %s..%s)", table, item["from"], item["to"])
                release_lease(table, owner)
                return {**result, "status": "nothing-to-do", "jobs": []}
        prepared = pipeline.prepare(table, spec=spec, partitions=partitions, force=bool(item.get("force")),
                                    trigger=item["trigger"], dry_run=bool(item.get("dry_run")))
        result.update(run_id=prepared.run_id, work_dir=prepared.work_dir, summary=prepared.summary(),
                      partitions=list(prepared.partitions))
        if prepared.dry_run:
            pipeline.record(prepared, "dry-run")
            view = _plan_view(prepared)
            log.info("dry run, nothing changes: %s", prepared.summary())
            for g in view["groups"]:
                log.info("  group %d (%s): %d file(s), %d bytes, %d rows -> %d file(s)", g["group_id"],
                         g["partition"], g["input_files"], g["bytes"], g["rows"], g["output_files"])
            log.info("  plan: %s", prepared.plan_path)
            release_lease(table, owner)
            return {**result, "status": "dry-run", "jobs": [], "plan": view}
        if prepared.nothing_to_do:
            pipeline.record(prepared, "nothing-to-do")  # prepare logged "<table>: nothing to do (N partition(s) checked)"
            release_lease(table, owner)
            return {**result, "status": "nothing-to-do", "jobs": []}
        # `layout` reaches the executors as a zip per run, unless the cluster's image has it installed.
        shipped = None if _env("LAKESORT_SHIP_LAYOUT", "zip") == "installed" else str(layout_zip(Path(prepared.work_dir)))
        jobs = [{"job_id": j.job_id, "groups": list(j.group_ids), "manifest": j.manifest_path} for j in prepared.jobs]
        return {**result, "status": "planned", "jobs": jobs, "py_files": shipped, "trigger": item["trigger"]}
    except BaseException as exc:
        log.error("%s: prepare failed: %s", table, exc)  # a corrupt input: the error names the file
        release_lease(table, owner)
        raise


def spark_job_kwargs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The SparkSubmitOperator arguments of every job of every planned run."""
    import shutil

    from layout.compaction import steps as pipeline
    from layout.compaction.driver import JOB

    application = os.environ.get("LAKESORT_SPARK_APPLICATION") or str(JOB)
    # Executors run the driver's interpreter unless told otherwise (a cluster: the image's Python).
    python = os.environ.get("LAKESORT_SPARK_PYTHON") or os.environ.get("PYSPARK_PYTHON") or sys.executable
    conf = {"spark.sql.session.timeZone": "UTC", **json.loads(os.environ.get("LAKESORT_SPARK_CONF") or "{}")}
    if not shutil.which("spark-submit"):
        log.warning("spark-submit is not on this worker's PATH: the Spark tasks will fail (put the venv's bin "
                    "directory, %s, or $SPARK_HOME/bin on PATH)", Path(sys.executable).parent)
    out = []
    for run in runs:
        prepared = pipeline.PreparedRun.load(run["work_dir"])
        for job in prepared.jobs:
            kwargs = {
                "application": application,
                "application_args": pipeline.job_arguments(prepared, job),
                "name": f"lakesort-compact {prepared.table} {prepared.run_id} job {job.job_id}",
                "conf": conf,
                "env_vars": {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python},
            }
            if run.get("py_files"):
                kwargs["py_files"] = run["py_files"]
            out.append(kwargs)
    log.info("%d Spark job(s) for %d table(s)", len(out), len(runs))
    return out


def verify_run(run: dict[str, Any], context) -> dict[str, Any]:
    """Abandon the run if one of its Spark jobs failed, else verify the staged output."""
    from airflow.sdk.exceptions import AirflowFailException

    from layout.compaction import steps as pipeline
    table = run["table"]
    context["lakesort_table"] = table
    prepared = pipeline.PreparedRun.load(run["work_dir"])
    try:
        failed = [j.job_id for j in prepared.jobs if not Path(j.manifest_path).exists()]
        if failed:
            pipeline.abandon(prepared, f"spark: job(s) {', '.join(map(str, failed))} failed (no manifest)")
            raise AirflowFailException(
                f"{table} run {prepared.run_id}: Spark job(s) {failed} failed: run abandoned, staged files "
                "removed, table unchanged (see the `compact` task logs)")
        outcome = pipeline.verify(prepared, spec=find_spec(table))
    except BaseException:
        release_lease(table, run["owner"])
        raise
    return {**run, "verification": outcome["status"], "warnings": len(outcome["findings"])}


def asset_uri(catalog: str | None, table: str) -> str:
    return f"iceberg://{catalog or 'default'}/{table}"


def commit_run(run: dict[str, Any], context) -> dict[str, Any]:
    """Commit the verified output; emit the "table compacted" asset event."""
    from layout.compaction import steps as pipeline
    table = run["table"]
    context["lakesort_table"] = table
    prepared = pipeline.PreparedRun.load(run["work_dir"])
    try:
        result = pipeline.commit(prepared)
    except BaseException:
        release_lease(table, run["owner"])
        raise
    uri = asset_uri(prepared.catalog, table)
    context["outlet_events"][AssetAlias(ASSET_ALIAS)].add(Asset(uri), extra={
        "table": table, "run_id": prepared.run_id, "trigger": prepared.trigger, "snapshot_id": result.snapshot_id,
        "partitions": list(prepared.partitions), "files_removed": result.files_removed,
        "files_added": result.files_added, "rows": result.rows})
    log.info("%s: committed snapshot %s: %d file(s) -> %d file(s), %d rows, %d partition(s); asset event %s",
             table, result.snapshot_id, result.files_removed, result.files_added, result.rows,
             len(prepared.partitions), uri)
    return {**run, "snapshot_id": result.snapshot_id, "files_removed": result.files_removed,
            "files_added": result.files_added, "rows": result.rows}


def measure_run(run: dict[str, Any], context) -> dict[str, Any]:
    """The probes on the snapshot before and after the commit (rows in lakesort.pruning_metrics)."""
    from layout.compaction import steps as pipeline
    table = run["table"]
    context["lakesort_table"] = table
    try:
        prepared = pipeline.PreparedRun.load(run["work_dir"])
        figures = pipeline.measure(prepared, run["snapshot_id"], spec=find_spec(table))
    finally:
        release_lease(table, run["owner"])
    before, after = figures.get("bytes_selected_before"), figures.get("bytes_selected_after")
    if before:
        log.info("%s: the owners' probes select %d bytes before and %d after (%.0f%% less), %d probe(s) measured",
                 table, before, after, 100 * (1 - after / before), figures["probes"])
    return {"table": table, "run_id": run["run_id"], **figures}


def measure_current(table: str, context) -> dict[str, Any]:
    """`lakesort_report`: the probes on the table's current snapshot."""
    from layout.metrics.measure import measure

    context["lakesort_table"] = table
    rows = measure(table, spec=find_spec(table))
    owner = [m for m in rows if m.probe_kind == "owner"]
    log.info("%s: %d probe(s) measured on snapshot %s; the owners' probes select %d bytes", table, len(rows),
             rows[0].snapshot_id if rows else None, sum(m.bytes_selected for m in owner))
    return {"table": table, "snapshot_id": rows[0].snapshot_id if rows else None, "probes": len(rows),
            "bytes_selected": sum(m.bytes_selected for m in owner)}


def write_report() -> str | None:
    """Rebuild the HTML reports ($LAKESORT_REPORT_DIR); the report module may not be there yet."""
    task_env()
    try:
        from layout.report.render import write_reports
    except ImportError as exc:
        log.warning("no report written: layout.report.render.write_reports is not available (%s)", exc)
        return None
    index = write_reports()
    log.info("lakesort report: %s", Path(index).resolve())
    return str(index)


# ---- the task graph -------------------------------------------------------------------------------------

_LABEL = "{{ lakesort_table }}"


@task(map_index_template=_LABEL)
def prepare(item: dict[str, Any]) -> dict[str, Any]:
    return prepare_table(item, get_current_context())


@task(trigger_rule="all_done")
def planned(prepared) -> list[dict[str, Any]]:
    """The runs with Spark work; a failed or skipped prepare has no value and drops out here."""
    runs = []
    for run in prepared[:]:  # one slice request (iterating probes past the end and logs "XCom not found")
        if run and run.get("status") == "planned":
            runs.append(run)
        elif run:
            log.info("%s", run.get("summary") or f"{run['table']}: {run['status']}")
    log.info("%d table(s) to compact: %s", len(runs), ", ".join(r["table"] for r in runs) or "none")
    return runs


@task
def spark_jobs(runs) -> list[dict[str, Any]]:
    return spark_job_kwargs(list(runs))


@task_group(group_id="table")
def finish(run):
    @task(trigger_rule="all_done", map_index_template=_LABEL)  # runs after failed Spark jobs too: abandons
    def verify(run):
        return verify_run(run, get_current_context())

    @task(outlets=[AssetAlias(ASSET_ALIAS)], map_index_template=_LABEL)
    def commit(run):
        return commit_run(run, get_current_context())

    @task(map_index_template=_LABEL)
    def measure(run):
        return measure_run(run, get_current_context())

    measure(commit(verify(run)))


@task(trigger_rule="all_done")
def report() -> str | None:
    context = get_current_context()
    swept = sweep_leases(_owner(context))
    if swept:
        log.info("released %d table lease(s) left by failed tasks of this run", swept)
    if context["params"].get("dry_run"):
        log.info("dry run: the report is left as it was")
        return None
    return write_report()


@task(trigger_rule="one_failed")
def check_tables() -> None:
    """Only runs when a task failed: fails the DAG run (the report task before it succeeds regardless)."""
    from airflow.sdk.exceptions import AirflowFailException

    raise AirflowFailException("some lakesort tasks failed (the other tables completed): see the failed tasks' logs")


def compaction(items) -> None:
    """The steps of DESIGN.md for the tables of `items` (an XComArg: one dict per table), in the current DAG."""
    prepared = prepare.expand(item=items)
    runs = planned(prepared)
    compact = SparkSubmitOperator.partial(
        task_id="compact", conn_id=SPARK_CONN_ID, pool=POOL, max_active_tis_per_dagrun=SPARK_PARALLELISM,
        retries=SPARK_RETRIES, retry_delay=SPARK_RETRY_DELAY, retry_exponential_backoff=2.0,
        max_retry_delay=SPARK_MAX_RETRY_DELAY, map_index_template="{{ task.name }}",
    ).expand_kwargs(spark_jobs(runs))
    tables = finish.expand(run=runs)
    compact >> tables
    tables >> report()
    watch_failures(compact.dag)


def watch_failures(dag) -> None:
    """`check_tables` downstream of every task: the DAG run fails when any task failed."""
    watcher = check_tables().operator
    for t in dag.tasks:
        if t is not watcher:
            t >> watcher


def table_items(trigger: str) -> list[dict[str, Any]]:
    tables = registered_tables()
    log.info("%d registered table(s) in %s: %s", len(tables), tables_dir(), ", ".join(tables) or "none")
    return [{"table": t, "trigger": trigger} for t in tables]
