"""Engine-confirmed (`layout.metrics.engine`): DataFusion runs each probe over the files the plan selects, on
small local Iceberg tables, and reads what lakesort's model says; what it cannot check is recorded as "not
confirmed: <reason>" and never fails the measurement.

Matching rows are counted with pyarrow over pyiceberg's own read of the table, sharing no lakesort code.
"""

from __future__ import annotations

import dataclasses
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from layout.metrics import engine
from layout.metrics.measure import Measurement, measure_probe
from layout.metrics.probes import Probe
from layout.read.plan import plan


@pytest.fixture
def paged(iceberg_catalog, tmp_path):
    """t.paged: four Parquet files written by pyarrow with a page index and pages of 100 rows, sorted by
    `k` across files (two interleave: the page index has work to do), added without field ids."""
    iceberg_catalog.create_namespace("t")
    paths = []
    for i, keys in enumerate([range(2000), range(2000, 4000), range(1000, 5000, 2), range(6000, 6100)]):
        data = pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array([f"v{x % 97}" for x in keys]),
                         "x": pa.array([float(x) / 3 for x in keys])})
        path = tmp_path / f"paged-{i}.parquet"
        pq.write_table(data, path, row_group_size=1000, max_rows_per_page=100, write_page_index=True)
        paths.append(str(path))
    table = iceberg_catalog.create_table("t.paged", schema=pq.read_schema(paths[0]))
    table.add_files(paths)
    return table


def matching(table, where) -> int:
    data = table.scan().to_arrow()
    return pc.sum(where(data)).as_py() or 0


PROBES = [
    (Probe("point", "k = 1500"), lambda d: pc.equal(d["k"], 1500)),
    (Probe("range", "k BETWEEN 1950 AND 2210", ("v",)), lambda d: pc.and_(pc.greater_equal(d["k"], 1950),
                                                                          pc.less_equal(d["k"], 2210))),
    (Probe("strings", "v IN ('v3', 'v5')", ("k", "v")), lambda d: pc.is_in(d["v"], pa.array(["v3", "v5"]))),
    (Probe("none", "k > 100000"), lambda d: pc.greater(d["k"], 100000)),
]


@pytest.mark.parametrize("probe,where", PROBES, ids=[p.name for p, _ in PROBES])
def test_datafusion_reads_what_the_model_says(paged, probe, where):
    m = measure_probe("t.paged", probe, run_id="t", phase="on-demand", engine=True, table=paged)
    assert m.engine_status == "checked", m.engine_status
    assert (m.engine_files, m.engine_model_bytes, m.engine_model_rows) == (
        m.files_selected, m.bytes_selected, m.rows_selected)
    # the same pages of the same columns: DataFusion's bytes_scanned and rows after pruning are the model's
    assert (m.engine_bytes, m.engine_rows) == (m.bytes_selected, m.rows_selected), probe
    assert m.engine_rows_matching == matching(paged, where) == m.rows_matching
    assert m.engine_difference == 0 and not m.engine_differs and m.engine_ms is not None
    if probe.name == "range":
        assert m.rows_selected < 2 * 1000, "the page index pruned within row groups"


def test_over_the_budget_a_seeded_sample_of_files(paged, monkeypatch):
    monkeypatch.setenv("LAKESORT_ENGINE_CHECK_MAX_BYTES", "1")
    probe = Probe("all", "k >= 0", ("k",))
    m = measure_probe("t.paged", probe, run_id="t", phase="on-demand", engine=True, table=paged)
    assert m.engine_status == f"checked 1 of {m.files_selected} files" and m.engine_files == 1
    assert m.engine_bytes == m.engine_model_bytes < m.bytes_selected and m.engine_rows == m.engine_model_rows
    again = measure_probe("t.paged", probe, run_id="t", phase="on-demand", engine=True, table=paged)
    assert again.engine_model_bytes == m.engine_model_bytes, "the same plan, the same sample"


def test_what_cannot_be_checked_is_recorded_not_raised(paged, monkeypatch):
    probe = Probe("p", "k = 1500")

    def check(**kw) -> str:
        return measure_probe("t.paged", kw.pop("probe", probe), run_id="t", phase="on-demand", engine=True,
                             table=paged, **kw).engine_status

    # a column renamed after the files were written: files without field ids hold the old name (plans are
    # values: this one projects the new name, as a plan would once newer files hold it)
    with paged.update_schema() as update:
        update.rename_column("v", "value")
    renamed = dataclasses.replace(plan("t.paged", "k = 1500"), columns=("k", "value"))
    status = engine.check_probe(renamed, table=paged.refresh(), max_bytes=1 << 30).status
    assert status.startswith("not confirmed:") and "no column 'value'" in status and "by name" in status
    # DataFusion missing, or failing (an unknown setting stands for any error it raises)
    with monkeypatch.context() as mp:
        mp.setitem(sys.modules, "datafusion", None)
        assert "datafusion package is not installed" in check()
    with monkeypatch.context() as mp:
        mp.setattr(engine, "SETTINGS", {**engine.SETTINGS, "datafusion.no.such.setting": "1"})
        assert check().startswith("not confirmed: DataFusion could not run the probe: ")
    # files elsewhere than on the local filesystem, nested projections
    planned = plan("t.paged", "k = 1500")
    remote = dataclasses.replace(planned, files=tuple(dataclasses.replace(f, filesystem=object())
                                                      for f in planned.files))
    assert "local files only" in engine.check_probe(remote, table=paged, max_bytes=1 << 30).status
    nested = dataclasses.replace(planned, columns=("s.a",))
    assert "nested field" in engine.check_probe(nested, table=paged, max_bytes=1 << 30).status
    off = measure_probe("t.paged", probe, run_id="t", phase="on-demand")
    assert (off.engine_status, off.engine_bytes, off.engine_difference) == ("off", None, None)


def test_files_with_field_ids_under_an_old_name(events):
    """t.events (written by pyiceberg, with field ids), `v` renamed to `value`: the files hold field id 3 as
    `v`, which DataFusion cannot find by the new name; the measurement goes on."""
    planned = plan("t.events", "k >= 40", ["k"])
    with events.update_schema() as update:
        update.rename_column("v", "value")
    status = engine.check_probe(dataclasses.replace(planned, columns=("k", "value")), table=events.refresh(),
                                max_bytes=1 << 30).status
    assert status.startswith("not confirmed:") and "as 'v', its name before a rename" in status
    m = measure_probe("t.events", Probe("p", "k >= 40", ("k",)), run_id="t", phase="on-demand", engine=True,
                      table=events)
    assert m.engine_status == "checked" and m.rows_matching == 51, "columns not renamed are confirmed"


def test_a_probe_is_flagged_when_datafusion_and_the_model_differ():
    base = {"run_id": "r", "phase": "after", "table": "t.a", "snapshot_id": 1, "measured_at": None,
            "probe": "p", "probe_kind": "owner", "predicate": "k = 1", "columns": "", "files_total": 1,
            "files_selected": 1, "row_groups_total": 1, "row_groups_selected": 1, "pages_total": 1,
            "pages_selected": 1, "pages_ideal": 1, "rows_total": 10, "rows_selected": 10, "rows_matching": 1,
            "bytes_total": 100, "bytes_selected": 100, "bytes_ideal": 100, "efficiency": 1.0,
            "plan_cold_ms": 1.0, "plan_warm_ms": 1.0}
    row = Measurement(**base, engine_status="checked", engine_bytes=121, engine_model_bytes=100,
                      engine_rows=10, engine_model_rows=10)
    assert row.engine_difference == pytest.approx(0.21) and row.engine_differs
    assert not dataclasses.replace(row, engine_bytes=119).engine_differs
    assert dataclasses.replace(row, engine_rows=0, engine_bytes=100).engine_difference == 1.0
    assert dataclasses.replace(row, engine_model_bytes=0).engine_difference == float("inf")
    assert Measurement(**base).engine_difference is None and Measurement(**base).wasted_in_pages == 0.0
