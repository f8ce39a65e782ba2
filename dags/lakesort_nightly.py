"""lakesort_nightly: sort and compact every registered table, every night (DESIGN.md, "A nightly run").

Schedule: $LAKESORT_NIGHTLY_CRON (default `0 2 * * *`, UTC). One task per table plans the rewrite; the
Spark jobs of all tables run through the Spark provider's SparkSubmitOperator (connection
$LAKESORT_SPARK_CONN_ID, pool `lakesort`, retried with exponential backoff); then per table: verify,
commit (an asset event for the table through the alias `lakesort-compacted`), measure; finally the report.
A table's failure fails its own tasks only. The task graph is built in lakesort_common.py.
"""

from __future__ import annotations

import lakesort_common as common
from airflow.sdk import CronTriggerTimetable, dag, task


@dag(
    dag_id="lakesort_nightly",
    schedule=CronTriggerTimetable(common.NIGHTLY_CRON, timezone="UTC"),
    start_date=common.START_DATE,
    catchup=False,
    max_active_runs=1,  # with the per-table lease: never two runs of one table (see lakesort_common)
    tags=common.TAGS,
    doc_md=__doc__,
)
def lakesort_nightly():
    @task
    def list_tables():
        return common.table_items("nightly")

    common.compaction(list_tables())


lakesort_nightly()
