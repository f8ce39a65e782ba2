"""lakesort_nightly: sort and compact every registered table, every night (DESIGN.md, "A nightly run").

Schedule: $LAKESORT_NIGHTLY_CRON (default `0 2 * * *`, UTC). Per table: plan, Spark (connection
$LAKESORT_SPARK_CONN_ID, pool $LAKESORT_POOL), verify, commit (an asset event through the alias
`lakesort-compacted`), measure; then maintenance of every table (expire snapshots by the spec's
retention, delete the files nothing retained references); then the report. A table's failure fails its
own tasks only.

Budget: $LAKESORT_NIGHTLY_BUDGET_BYTES (unset: unlimited). The `planned` task ranks the planned runs by
predicted benefit (the bytes the owners' probes would stop reading, weighted) over cost (the bytes to
rewrite) and keeps those the budget admits, most valuable first; the others are recorded as deferred, with
why, and the report's index shows it.
"""

from __future__ import annotations

import lakesort_common as common
from airflow.sdk import CronTriggerTimetable, dag, task


@dag(dag_id="lakesort_nightly", schedule=CronTriggerTimetable(common.SETTINGS.nightly_cron, timezone="UTC"),
     doc_md=__doc__, **common.DAG_ARGS)
def lakesort_nightly():
    @task
    def list_tables():
        from layout.compaction.pipeline.runs import nightly_requests
        # Each table's spec is resolved here, once for the DAG run; the later tasks carry it.
        return [request.model_dump(mode="json") for request in nightly_requests()]

    common.compaction(list_tables(), maintenance=True, budgeted=True)


lakesort_nightly()
