"""The task graph of a lakesort compaction, shared by the DAGs; each task calls `layout.compaction.pipeline`.

    prepare (mapped per table) -> planned (nightly: ranked, within the budget) -> spark_jobs
    -> compact (SparkSubmitOperator, mapped per job)
    -> table.verify -> table.commit -> table.measure (a mapped group per table)
    [-> maintain (mapped per table: expire snapshots, delete unreferenced files)] -> report -> check_tables

A table's failure stops only its own tasks; Spark jobs are mapped outside the per-table group (Airflow 3.3
cannot map over an upstream's output inside one). Parse time imports only airflow and `layout.settings`
(the backfill: `layout.registered` too, the tables' names); the rest is imported inside the tasks.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import shutil
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.decorators.python import _PythonDecoratedOperator
from airflow.sdk import Asset, AssetAlias, get_current_context, task, task_group
from airflow.sdk.bases.decorator import task_decorator_factory
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from layout.settings import default_tables_dir, settings

DAGS_DIR = Path(__file__).resolve().parent
# The registry: $LAKESORT_TABLES_DIR, else dags/tables beside this file (set for the tasks too).
tables_dir = functools.partial(default_tables_dir, DAGS_DIR / "tables")
tables_dir()  # when parsed: by the DAG processor, and by each task's process before it runs the task
SETTINGS = settings()
ASSET_ALIAS = "lakesort-compacted"
DAG_ARGS = {"start_date": dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "catchup": False, "tags": ["lakesort"],
            "max_active_runs": 1}  # with the per-table lease: never two runs of one table
_LABEL = "{{ lakesort_table }}"  # mapped tasks are labelled with their table in the UI


def label(table: str) -> str:
    get_current_context()["lakesort_table"] = table
    return table


def read(model, payload: dict):
    """An XCom payload as its `runs` model; labels the task with the payload's table."""
    label((value := model.model_validate(payload)).table)
    return value


def owner():
    """This DAG run as a table lease's owner."""
    from layout.upkeep.lease import LeaseOwner
    return LeaseOwner.dag((context := get_current_context())["dag"].dag_id, context["run_id"])


@contextlib.contextmanager
def outcome(step: str, trigger: str | None = None):
    """A step's error as the pipeline judges it (`runs.verdict`): fail at once, skip, or raised (retried)."""
    from layout.compaction.pipeline.runs import verdict
    try:
        yield
    except Exception as exc:
        if (judged := verdict(step, exc, trigger=trigger)) is None:
            raise
        raise {"fail": AirflowFailException, "skip": AirflowSkipException}[judged[0]](judged[1]) from None


@task(map_index_template=_LABEL)
def prepare(item: dict):  # no `-> dict`: TaskFlow would push every key as an XCom of its own
    from layout.compaction.pipeline import runs
    request = read(runs.TableRequest, item)
    with outcome("prepare", request.trigger):  # the Spark tasks run the `spark-submit` on PATH
        done = runs.prepare_table(request, owner=owner(), spark_submit=shutil.which("spark-submit"))
    return done.model_dump(mode="json")


@task(trigger_rule="all_done")
def planned(prepared, budgeted: bool = False) -> list[dict]:
    """The runs with Spark work; `budgeted` (the nightly): those the night's budget admits (`dag_run`)."""
    from layout.compaction.pipeline.dag_run import admitted
    # One slice request (iterating probes past the end, logging "XCom not found"); a failed prepare is None.
    return [r.model_dump(mode="json") for r in admitted(prepared[:], budgeted=budgeted)]


@task
def spark_jobs(tables) -> list[dict]:
    from layout.compaction.pipeline import runs
    return runs.spark_jobs(runs.PlannedTable.model_validate(t) for t in tables)


class _CommitTask(_PythonDecoratedOperator):
    """@task whose result is also its lineage (`runs.lineage`), for the OpenLineage provider's listener."""

    def execute(self, context):
        self._committed = super().execute(context)  # the listener runs in this process, after execute
        return self._committed

    def get_openlineage_facets_on_complete(self, task_instance):
        from airflow.providers.openlineage.extractors import OperatorLineage

        from layout.compaction.pipeline.runs import lineage
        inputs, outputs = lineage(getattr(self, "_committed", None))
        return OperatorLineage(inputs=inputs, outputs=outputs)


commit_task = functools.partial(task_decorator_factory, decorated_operator_class=_CommitTask)


@task_group(group_id="table")
def finish(run):
    @task(trigger_rule="all_done", map_index_template=_LABEL)  # after failed Spark jobs too: abandons the run
    def verify(run: dict):
        from layout.compaction.pipeline import runs
        with outcome("verify"):
            return runs.verify_table(read(runs.PlannedTable, run)).model_dump(mode="json")

    @commit_task(outlets=[AssetAlias(ASSET_ALIAS)], map_index_template=_LABEL)
    def commit(run: dict):
        from layout.compaction.pipeline import runs
        with outcome("commit"):
            done = runs.commit_table(read(runs.VerifiedRun, run))
        events = get_current_context()["outlet_events"][AssetAlias(ASSET_ALIAS)]
        events.add(Asset(done.asset_uri()), extra=done.event_extra())
        return done.model_dump(mode="json")

    @task(map_index_template=_LABEL)
    def measure(run: dict):
        from layout.compaction.pipeline import runs
        return runs.measure_table(read(runs.CommittedRun, run)).model_dump(mode="json")

    measure(commit(verify(run)))


@task(trigger_rule="all_done", map_index_template=_LABEL)  # after every table's compaction, failed or not
def maintain(item: dict):
    from layout.compaction.pipeline import runs
    with outcome("maintain"):
        return runs.maintain_table(read(runs.TableRequest, item), owner=owner()).model_dump(mode="json")


@task(trigger_rule="all_done")
def report() -> str | None:
    """The leases this run left, lakesort's own tables, the reports (not a dry run): `dag_run.close`."""
    from layout.compaction.pipeline.dag_run import close
    from layout.report.render import write_reports
    return close(owner(), dry_run=bool(get_current_context()["params"].get("dry_run")),
                 write_reports=write_reports)


@task(trigger_rule="one_failed")
def check_tables() -> None:
    """Runs only when a task failed: fails the DAG run (the report task before it succeeds regardless)."""
    raise AirflowFailException("some lakesort tasks failed (the other tables completed): see their logs")


def compaction(items, *, maintenance: bool = False, budgeted: bool = False) -> None:
    """The steps of DESIGN.md for the tables of `items` (an XComArg of TableRequests) in the current DAG;
    `maintenance`: each table's, after every compaction; `budgeted`: within the night's budget."""
    runs = planned(prepare.expand(item=items), budgeted=budgeted)
    compact = SparkSubmitOperator.partial(
        task_id="compact", conn_id=SETTINGS.spark_conn_id, pool=SETTINGS.pool, retries=SETTINGS.spark_retries,
        max_active_tis_per_dagrun=SETTINGS.spark_parallelism, retry_exponential_backoff=2.0,
        retry_delay=dt.timedelta(seconds=SETTINGS.spark_retry_delay),
        max_retry_delay=dt.timedelta(minutes=30), map_index_template="{{ task.name }}",
    ).expand_kwargs(spark_jobs(runs))
    finished, done = finish.expand(run=runs), report()
    compact >> finished
    (finished >> maintain.expand(item=items) if maintenance else finished) >> done
    watch_failures(compact.dag)


def watch_failures(dag) -> None:
    """`check_tables` downstream of every task: the DAG run fails when any task failed."""
    watcher = check_tables().operator
    watcher.set_upstream([t for t in dag.tasks if t is not watcher])
