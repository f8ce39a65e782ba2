"""Measuring a merge-on-read table: a probe's cost counts the delete files a reader merges, before and after.

A pyiceberg table gets a position delete (tests/deletes_helpers.py); "after" is the table rewritten with the
deletes applied (pyiceberg's overwrite of what its scan reads), as a compaction that applies them leaves it:
the delete file is still in the metadata but applies to no live data file. Both measurements go to
`lakesort.pruning_metrics`, read back, and show in `lakesort measure`'s table and the report.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deletes_helpers import commit_deletes, position_delete_file, write_position_deletes

from layout.cli.measure import _measure_table
from layout.metrics import store
from layout.metrics.measure import measure_probe, read_metrics, record_measurements
from layout.metrics.probes import Probe
from layout.report.render import render_reports, table_page_name
from layout.report.rows import Measurement, typed_rows

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


@pytest.fixture
def table(iceberg_catalog):
    """`mor.events`: three files of 100 ids each, and a position delete of two rows of the first."""
    iceberg_catalog.create_namespace_if_not_exists("mor")
    table = iceberg_catalog.create_table("mor.events", schema=SCHEMA)
    paths = []
    for part in range(3):
        ids = range(part * 100, (part + 1) * 100)
        table.append(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]},
                              schema=SCHEMA))
        paths.append(next(p for p in table.refresh().inspect.data_files().column("file_path").to_pylist()
                          if p not in paths))
    deleted = write_position_deletes(table, [(paths[0], 3), (paths[0], 7)])
    return commit_deletes(table.refresh(), [position_delete_file(table, deleted)]), deleted[1]


def test_a_probe_records_the_delete_files_it_reads_before_and_after(iceberg_catalog, table, tmp_path):
    table, delete_size = table
    probes = [Probe("low", "id < 50"), Probe("high", "id >= 250")]
    before = [measure_probe("mor.events", p, run_id="r1", phase="before", engine=True, table=table)
              for p in probes]
    low, high = before
    assert (low.delete_files_selected, low.delete_bytes_selected) == (1, delete_size)
    assert (high.delete_files_selected, high.delete_bytes_selected) == (0, 0), "the delete applies elsewhere"
    assert (low.delete_files_total, low.delete_bytes_total) == (high.delete_files_total,
                                                                high.delete_bytes_total) \
        == (1, delete_size)
    assert low.rows_selected == 100 and low.rows_matching == 50, "the data file's rows, deleted ones included"
    assert low.engine_checked and not low.engine_differs, "DataFusion reads the same data files' rows"

    table.overwrite(table.scan().to_arrow())  # the deletes applied: new data files, the delete file dangling
    table = table.refresh()
    after = [measure_probe("mor.events", p, run_id="r1", phase="after", engine=True, table=table)
             for p in probes]
    assert all((m.delete_files_selected, m.delete_bytes_selected, m.delete_files_total) == (0, 0, 0)
               for m in after)
    assert after[0].rows_matching == 48

    record_measurements(iceberg_catalog, [*before, *after])
    rows = {(r["probe"], r["phase"]): r for r in read_metrics(iceberg_catalog, "mor.events").to_pylist()}
    assert (rows["low", "before"]["delete_files_selected"] == 1
            and rows["low", "after"]["delete_files_selected"] == 0)
    assert rows["low", "before"]["delete_bytes_selected"] == delete_size
    schema = iceberg_catalog.load_table(store.PRUNING_METRICS).schema()
    assert not any(schema.find_field(f"delete_{what}_{scope}").required
                   for what in ("files", "bytes") for scope in ("total", "selected"))

    lines = _measure_table(before)
    assert lines[0].split()[:3] == ["probe", "files", "deletes"]
    assert lines[1].split()[:3] == ["low", "1/3", "1/1"] and lines[2].split()[:3] == ["high", "1/3", "0/1"]
    assert "deletes" not in _measure_table(after)[0], "no delete files: no column"

    metrics = read_metrics(iceberg_catalog)
    assert len(typed_rows(metrics, Measurement, "pruning metrics")) == 4
    index = render_reports(tmp_path / "report", metrics, store.arrow_schema(store.RUNS_FIELDS).empty_table())
    html = (index.parent / "tables" / table_page_name("mor.events")).read_text(encoding="utf-8")
    assert "Delete files read" in html and "1 \u2192 0" in html
