"""The report tests' `history`: synthetic rows of one table over several runs
(tests/report/report_rows.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from report_rows import T0, MiB, metric, run, spec


@pytest.fixture
def history():
    """Table sales.orders: two probes over three nightly runs plus an on-demand measurement, a failed
    compaction with only a `before`, and a failed verification in run n2."""
    t = "sales.orders"
    metrics = [
        metric(t, "p1", "before", "n1", T0, 40 * MiB),
        metric(t, "p1", "after", "n1", T0 + timedelta(minutes=20), 20 * MiB),
        metric(t, "p1", "before", "n2", T0 + timedelta(days=1), 24 * MiB),
        metric(t, "p1", "after", "n2", T0 + timedelta(days=1, minutes=20), 3 * MiB, ideal=MiB,
               efficiency=1 / 3, files_selected=2),
        metric(t, "p1", "on-demand", "adhoc", T0 + timedelta(days=2), 4 * MiB),
        # run n3 failed: a `before` without an `after`, newer than n2: n2 stays the before/after pair
        metric(t, "p1", "before", "n3", T0 + timedelta(days=3), 5 * MiB),
        metric(t, "p2", "before", "n2", T0 + timedelta(days=1), 8 * MiB, efficiency=0.25, columns="k,v"),
        metric(t, "p2", "after", "n2", T0 + timedelta(days=1, minutes=20), 10 * MiB, efficiency=0.2,
               columns="k,v"),
    ]
    findings = [
        {"rule": "boundary-order", "severity": "warning", "path": "s3://lake/b.parquet", "row_group": 1,
         "column": "k", "observed": "UNORDERED", "intended": "ASCENDING",
         "diagnosis": "pages not sorted by k"},
        {"rule": "column-index", "severity": "error", "path": "s3://lake/a.parquet", "row_group": 0,
         "column": "comment", "observed": "absent", "intended": "present",
         "diagnosis": "column index dropped for comment; set column_index_truncate_length"},
    ]
    runs = [
        run(t, "n1", T0, duration_s=65.0, bytes_rewritten=int(1.5 * 1024 * MiB)),
        run(t, "n2", T0 + timedelta(days=1), duration_s=725.0, bytes_rewritten=12 * MiB, files_before=12,
            files_after=4, bytes_before=90 * MiB, bytes_after=88 * MiB),
        run(t, "n3", T0 + timedelta(days=3), status="failed", verification="failed", findings=findings,
            duration_s=7384.0, bytes_rewritten=0, error="verification failed: 1 layout error(s)"),
    ]
    specs = [spec(t, [{"name": "p1", "where": "k = 1"},
                      {"name": "p2", "where": "k > 5", "columns": ["k", "v"]}])]
    return metrics, runs, specs
