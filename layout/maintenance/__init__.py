"""Table maintenance: expire snapshots by the table spec's retention, then delete every file under the
table location that nothing retained references (and orphans past a grace period).

    referenced  the files a table's snapshots and metadata reference (each manifest read once); also what
                `layout.upkeep.cleanup` protects in the staging area
    expire      which snapshots the retention expires, and expiring them with pyiceberg
    delete      listing the table location, sorting the files into kept and deleted, deleting top-down
    result      the frozen result of a run (`MaintenanceResult`)
    run         one run: list, read, expire, re-read, delete, under a lease the caller holds

The table lease lives in `layout.upkeep` (one run per table), whose `maintain_table` takes it and calls
`maintain` (`layout.upkeep.maintain`, for the CLI and the DAGs).

May import: layout.spec, layout.io and the ground floor (errors, models, sizes, durations), pyarrow and
pyiceberg. Never upkeep or compaction (above it), read, verify, metrics or report; never Spark or Airflow.
"""

from layout.maintenance.referenced import MaintenanceError, References
from layout.maintenance.result import Deleted, MaintenanceResult
from layout.maintenance.run import maintain

__all__ = ["Deleted", "MaintenanceError", "MaintenanceResult", "References", "maintain"]
