"""lakesort_report: measure every configured table's current snapshot, then rebuild the reports. On demand.

The probes go to `lakesort.pruning_metrics` with phase `on-demand`, the HTML reports to
$LAKESORT_REPORT_DIR. A table that cannot be measured fails its own task; the report is rebuilt
regardless and the DAG run then fails.
"""

from __future__ import annotations

import lakesort_common as common
from airflow.sdk import dag, task


@dag(dag_id="lakesort_report", schedule=None, doc_md=__doc__, **common.DAG_ARGS)
def lakesort_report():
    @task
    def list_tables():
        # Every configured table, as the nightly compacts them; a broken spec's table fails its own task.
        from layout.registry import nightly_specs
        return list(nightly_specs(common.tables_dir()))

    @task(map_index_template="{{ lakesort_table }}")
    def measure(table):
        from layout.compaction.pipeline.runs import measure_current
        return measure_current(common.label(table)).model_dump(mode="json")

    done = common.report()
    measure.expand(table=list_tables()) >> done
    common.watch_failures(done.operator.dag)


lakesort_report()
