"""The task graph of a lakesort compaction, shared by the DAGs; each step is a `layout.compaction.pipeline.runs` call.

    prepare (mapped per table) -> planned (nightly: ranked, within the budget) -> spark_jobs
    -> compact (SparkSubmitOperator, mapped per job)
    -> table.verify -> table.commit -> table.measure (a mapped group per table)
    [-> maintain (mapped per table: expire snapshots, delete unreferenced files)] -> report -> check_tables

A table's failure stops only its own tasks. Spark jobs are mapped outside the per-table group (Airflow 3.3
cannot map over an upstream's output inside a mapped group). XCom payloads: `runs` models as JSON; the
table's spec is read from the registry (`layout.registry`) by the first task and travels in them. Parse
time imports only airflow, `layout.settings` and `layout.registered` (the registered tables' names, for the
backfill DAG's choice of table), and validates no table spec; the rest is imported inside the tasks.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import shutil
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.decorators.python import _PythonDecoratedOperator
from airflow.sdk import Asset, AssetAlias, get_current_context, task, task_group
from airflow.sdk.bases.decorator import task_decorator_factory
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from layout.registered import table_names
from layout.settings import settings

log = logging.getLogger("lakesort.dags")
DAGS_DIR = Path(__file__).resolve().parent


def tables_dir() -> Path:
    """`settings().tables_dir`, defaulting to dags/tables beside this file (set for the tasks too)."""
    if "tables_dir" not in settings().model_fields_set:  # $LAKESORT_TABLES_DIR unset or empty
        os.environ["LAKESORT_TABLES_DIR"] = str(DAGS_DIR / "tables")
    return settings().tables_dir


tables_dir()  # when parsed: by the DAG processor, and by each task's process before it runs the task
SETTINGS = settings()
ASSET_ALIAS, TAGS, START_DATE = "lakesort-compacted", ["lakesort"], dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
_LABEL = "{{ lakesort_table }}"  # mapped tasks are labelled with their table in the UI


def registered_tables() -> list[str]:
    """The registry's table ids, cheaply (`layout.registered`: each file's `table` key, nothing validated), also
    when Airflow parses the DAG files: a broken spec is listed or skipped here, and reported by the task that
    reads it."""
    return table_names(tables_dir())


def label(table: str) -> str:
    get_current_context()["lakesort_table"] = table
    return table


def read(model, payload: dict):
    """An XCom payload as its `runs` model; labels the task with the payload's table."""
    value = model.model_validate(payload)
    label(value.table)
    return value


def owner():
    """This DAG run as a table lease's owner."""
    from layout.upkeep.lease import LeaseOwner
    context = get_current_context()
    return LeaseOwner.dag(context["dag"].dag_id, context["run_id"])


@task(map_index_template=_LABEL)
def prepare(item: dict):  # no `-> dict`: TaskFlow would push every key as an XCom of its own
    from layout.compaction.pipeline import runs
    from layout.compaction.pipeline.spark_home import SparkUnsupported
    from layout.upkeep import lease
    request = read(runs.TableRequest, item)
    try:
        # The Spark tasks run the `spark-submit` on PATH (SparkSubmitHook): a Spark the job does not run on is
        # refused here, before the table's lease and the plan.
        return runs.prepare_table(request, owner=owner(), spark_submit=shutil.which("spark-submit")).model_dump(
            mode="json")
    except SparkUnsupported as exc:  # a retry cannot help
        raise AirflowFailException(str(exc)) from None
    except lease.TableBusy as exc:
        if request.trigger == "nightly":  # tonight's work waits for tomorrow; the other run carries on
            raise AirflowSkipException(f"{exc}: skipped") from None
        raise AirflowFailException(f"{exc}: trigger again when it has finished") from None


@task(trigger_rule="all_done")
def planned(prepared, budgeted: bool = False) -> list[dict]:
    """The runs with Spark work; `budgeted` (the nightly): those the night's budget admits, most valuable first
    (the deferred ones recorded, their leases released: `layout.compaction.pipeline.nightly_budget`)."""
    from layout.compaction.pipeline import runs
    from layout.compaction.pipeline.nightly_budget import within_budget
    # One slice request (iterating probes past the end, logging "XCom not found"); a failed prepare is None.
    results = [runs.PlannedTable.model_validate(p) for p in prepared[:] if p]
    kept = (within_budget(results, budget_bytes=settings().nightly_budget_bytes) if budgeted
            else runs.to_compact(results))
    return [r.model_dump(mode="json") for r in kept]


@task
def spark_jobs(tables) -> list[dict]:
    from layout.compaction.pipeline import runs
    return runs.spark_jobs(runs.PlannedTable.model_validate(t) for t in tables)


class _CommitTask(_PythonDecoratedOperator):
    """@task whose result, a `runs.CommittedRun`, is also its OpenLineage lineage: the table read and written,
    with rows, bytes and files (`layout.lineage.datasets`). The Airflow OpenLineage provider's listener (the
    `lineage` extra) asks for it when the task completes; without the provider nothing calls it."""

    def execute(self, context):
        self._committed = super().execute(context)  # the listener runs in this process, after execute
        return self._committed

    def get_openlineage_facets_on_complete(self, task_instance):
        from airflow.providers.openlineage.extractors import OperatorLineage

        from layout.compaction.pipeline.runs import CommittedRun
        from layout.lineage import Counts, datasets
        payload = getattr(self, "_committed", None)
        if not payload:
            return OperatorLineage()
        run = CommittedRun.model_validate(payload)
        inputs, outputs = datasets(
            table=run.table, catalog=run.catalog,
            read=Counts(rows=run.rows if run.rows_read is None else run.rows_read, bytes=run.bytes_removed or None,
                        files=run.files_removed),
            written=Counts(rows=run.rows, bytes=run.bytes_added or None, files=run.files_added))
        return OperatorLineage(inputs=inputs, outputs=outputs)


commit_task = functools.partial(task_decorator_factory, decorated_operator_class=_CommitTask)


@task_group(group_id="table")
def finish(run):
    @task(trigger_rule="all_done", map_index_template=_LABEL)  # after failed Spark jobs too: abandons the run
    def verify(run: dict):
        from layout.compaction.pipeline import runs
        try:
            return runs.verify_table(read(runs.PlannedTable, run)).model_dump(mode="json")
        except (runs.SparkJobsFailed, runs.SpecChanged) as exc:  # a retry cannot help: fail at once
            raise AirflowFailException(str(exc)) from None

    @commit_task(outlets=[AssetAlias(ASSET_ALIAS)], map_index_template=_LABEL)
    def commit(run: dict):
        from layout.compaction.pipeline import runs
        try:
            done = runs.commit_table(read(runs.VerifiedRun, run))
        except runs.SpecChanged as exc:  # the run is over: a retry cannot help
            raise AirflowFailException(str(exc)) from None
        get_current_context()["outlet_events"][AssetAlias(ASSET_ALIAS)].add(Asset(done.asset_uri()),
                                                                            extra=done.event_extra())
        return done.model_dump(mode="json")

    @task(map_index_template=_LABEL)
    def measure(run: dict):
        from layout.compaction.pipeline import runs
        return runs.measure_table(read(runs.CommittedRun, run)).model_dump(mode="json")

    measure(commit(verify(run)))


@task(trigger_rule="all_done", map_index_template=_LABEL)  # after every table's compaction, failed or not
def maintain(item: dict):
    from layout.compaction.pipeline import runs
    from layout.upkeep import lease
    request = read(runs.TableRequest, item)
    try:
        return runs.maintain_table(request, owner=owner()).model_dump(mode="json")
    except lease.TableBusy as exc:  # another run works on the table: tomorrow night's maintenance catches up
        raise AirflowSkipException(f"{exc}: skipped") from None


@task(trigger_rule="all_done")
def report() -> str | None:
    from layout.upkeep.lease import sweep_leases
    if swept := sweep_leases(owner()):  # the leases of tables whose tasks stopped early (upstream_failed)
        log.info("released %d table lease(s) left by failed tasks of this run", swept)
    if get_current_context()["params"].get("dry_run"):
        log.info("dry run: the report is left as it was")
        return None
    housekeeping()
    from layout.report.render import write_reports
    index = write_reports()
    log.info("lakesort report: %s", Path(index).resolve())
    return str(index)


def housekeeping() -> None:
    """lakesort's own tables in each catalog the registry configures tables in (`registry.catalog_names`),
    compacted and expired (`lakesort housekeep`); a failure is logged, never fails the report."""
    from layout.catalog import load_catalog
    from layout.registry import catalog_names
    from layout.upkeep.housekeeping import housekeep
    try:
        # Every source's: pyiceberg's default catalog, and each one a spec or a namespace default names.
        catalogs = catalog_names()
    except Exception as exc:  # noqa: BLE001 - the report still gets written
        log.warning("housekeeping: the registry could not be read: %s", exc)
        return
    for name in catalogs:
        try:
            for result in housekeep(load_catalog(name)):
                log.info("housekeeping: %s", result.summary())
        except Exception as exc:  # noqa: BLE001 - the report still gets written
            log.warning("housekeeping of lakesort's tables in catalog %s failed: %s", name or "(default)", exc)


@task(trigger_rule="one_failed")
def check_tables() -> None:
    """Runs only when a task failed: fails the DAG run (the report task before it succeeds regardless)."""
    raise AirflowFailException("some lakesort tasks failed (the other tables completed): see the failed tasks' logs")


def compaction(items, *, maintenance: bool = False, budgeted: bool = False) -> None:
    """The steps of DESIGN.md for the tables of `items` (an XComArg of TableRequests), in the current DAG;
    with `maintenance`, each table's maintenance once every compaction is done, before the report; `budgeted`,
    the runs the night's budget admits ($LAKESORT_NIGHTLY_BUDGET_BYTES), most valuable first."""
    runs = planned(prepare.expand(item=items), budgeted=budgeted)
    compact = SparkSubmitOperator.partial(
        task_id="compact", conn_id=SETTINGS.spark_conn_id, pool=SETTINGS.pool, retries=SETTINGS.spark_retries,
        max_active_tis_per_dagrun=SETTINGS.spark_parallelism, retry_exponential_backoff=2.0,
        retry_delay=dt.timedelta(seconds=SETTINGS.spark_retry_delay), max_retry_delay=dt.timedelta(minutes=30),
        map_index_template="{{ task.name }}",
    ).expand_kwargs(spark_jobs(runs))
    finished, done = finish.expand(run=runs), report()
    compact >> finished
    if maintenance:
        finished >> maintain.expand(item=items) >> done
    else:
        finished >> done
    watch_failures(compact.dag)


def watch_failures(dag) -> None:
    """`check_tables` downstream of every task: the DAG run fails when any task failed."""
    watcher = check_tables().operator
    for t in dag.tasks:
        if t is not watcher:
            t >> watcher
