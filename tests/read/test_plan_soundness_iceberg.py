"""The plan's soundness property (tests/read/test_plan_soundness.py) on Iceberg tables: each file of a random
dataset is one append, pyiceberg writes the Parquet files and the manifests, and the plan of every random
predicate is checked against the oracle (tests/plan_soundness.py's `check_query`), with and without
`exact_totals`: the same selections either way, and exactly the files pyiceberg's own `plan_files` keeps
are opened.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from plan_soundness import SCHEMA, Case, Written, cases, check_query, read_row_groups

from layout.io import resolve
from layout.read.iceberg import snapshot_scan, to_iceberg

# -- the same property on an Iceberg table ---------------------------------------------------------


@pytest.fixture
def catalog(iceberg_catalog):
    iceberg_catalog.create_namespace_if_not_exists("sound")
    return iceberg_catalog


_table_numbers = iter(range(10**9))


@settings(deadline=None, max_examples=15,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_iceberg_plan_is_sound_and_exact(catalog, case: Case) -> None:
    """Each file of the dataset is one append; pyiceberg writes the Parquet files (no page index) and the
    manifests, whose bounds (strings truncated to 16 characters) prune files first."""
    dataset = case.dataset
    identifier = f"sound.t{next(_table_numbers)}"
    options = dataset.files[0]
    properties = {
        "write.parquet.row-group-limit": str(options.row_group_size),
        "write.parquet.page-size-bytes": str(options.data_page_size),
        "write.parquet.page-row-limit": str(options.max_rows_per_page),
    }
    table = catalog.create_table(identifier, schema=SCHEMA, properties=properties)
    rows = dataset.table()
    n_files = len(dataset.files)
    bounds = [round(k * rows.num_rows / n_files) for k in range(n_files + 1)]
    for k in range(n_files):
        if bounds[k + 1] > bounds[k]:
            table.append(rows.slice(bounds[k], bounds[k + 1] - bounds[k]))
    paths = [Path(resolve(task.file.file_path)[1]) for task in table.refresh().scan().plan_files()]
    if not paths:
        return
    written = Written(identifier, paths, [read_row_groups(p) for p in paths])
    for expr, columns in case.queries:
        exact = check_query(written, expr, columns, False, exact_totals=True)
        fast = check_query(written, expr, columns, False, footer_totals=False)
        where = f"where={expr}, columns={columns}"
        # The same plan: opening only the files the manifests keep changes no selection, and the manifests'
        # record counts and column sizes (pyiceberg's, from the footers) give the footers' totals.
        assert fast.files == exact.files and fast.predicate == exact.predicate, where
        footer_only = {"row_groups_total": exact.counts.row_groups_total,
                       "pages_total": exact.counts.pages_total}
        assert replace(fast.counts, **footer_only) == exact.counts, (
            f"{where}: {fast.counts} vs {exact.counts}")
        # Exactly the files pyiceberg's own plan_files keeps are opened, so the footer-only totals are
        # None exactly when it keeps fewer than all.
        kept = [t.file.file_path
                for t in table.scan(row_filter=to_iceberg(table, fast.predicate)).plan_files()]
        scan = snapshot_scan(table, fast.predicate, None, table.current_snapshot())
        assert {scan.files[i].path for i in scan.kept} == set(kept), f"{where}: not pyiceberg's files"
        assert {Path(fp.path).name for fp in fast.files} <= {Path(resolve(f)[1]).name for f in kept}, where
        assert (fast.counts.pages_total is None) == (len(kept) < len(paths)), f"{where}: {fast.counts}"
        event("manifests pruned a file" if len(kept) < len(paths) else "manifests kept every file")
