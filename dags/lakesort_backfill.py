"""lakesort_backfill: compact chosen partitions of one table on demand, e.g. after a backfill rewrote them.

Manual only. Params: `table` (a registered table, picked from those the registry names when the DAG is
parsed; the first task, `check_request`, reads its spec and refuses a table that has none), `partitions`
(paths such as `l_shipdate_month=1995-03`) or a date range `from`/`to` (the partitions holding those days),
`force` (rewrite even if compacted), `dry_run` (plan only: the plan goes to the `prepare` task's log and
XCom). Neither partitions nor dates: every partition. Then the same steps as lakesort_nightly.

    airflow dags trigger lakesort_backfill --conf '{"table": "demo.lineitem", "from": "1995-03-01"}'
"""

from __future__ import annotations

import lakesort_common as common
from airflow.sdk import Param, dag, task

from layout.registered import table_names

# Iceberg's namespace.name (the spec's `table`): checked when the run is triggered, with the registry's tables
# offered (their names only: parsing validates no spec, and lists no catalog); a table configured by its
# lakesort.* properties, a namespace default or its own sort order is typed in. Whether it is configured, and
# how, the first task resolves (`layout.registry.find_spec`).
_TABLE = r"^[^.\s]+(\.[^.\s]+)+$"
_TABLES = table_names(common.tables_dir())


@dag(
    dag_id="lakesort_backfill", schedule=None, doc_md=__doc__, **common.DAG_ARGS,
    params={
        "table": Param(_TABLES[0] if len(_TABLES) == 1 else None, type="string", pattern=_TABLE,
                       title="Table",
                       description="A configured table, as namespace.name: one of dags/tables/*.yaml, or one "
                                   "configured by lakesort.* properties, "
                                   "a namespace default or its sort order",
                       **({"examples": _TABLES} if _TABLES else {})),
        "partitions": Param([], type="array", items={"type": "string", "minLength": 1}, uniqueItems=True,
                            title="Partitions",
                            description="Partition paths, e.g. l_shipdate_month=1995-03; "
                                        "empty: a date range or all"),
        "from": Param(None, type=["null", "string"], format="date", title="From (date)",
                      description="First day of a date range (instead of partitions)"),
        "to": Param(None, type=["null", "string"], format="date", title="To (date)",
                    description="Last day of the date range, inclusive"),
        "force": Param(False, type="boolean", title="Force",
                       description="Rewrite the partitions even if compacted"),
        "dry_run": Param(False, type="boolean", title="Dry run",
                         description="Plan only: show the plan in the log and XCom, change nothing"),
    },
)
def lakesort_backfill():
    @task
    def check_request(params=None):
        from layout.compaction.pipeline.runs import backfill_request
        return [backfill_request(params).model_dump(mode="json")]

    common.compaction(check_request())


lakesort_backfill()
