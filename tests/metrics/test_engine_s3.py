"""The engine check on S3 (`layout.metrics.engine`): DataFusion reads a table's files from the object store
through its own S3 store, with the endpoint, region and credentials the REST catalog vended for the table, and
confirms the probe; the proxy in front of the store sees DataFusion's requests signed with the vended key.

A tiny table through the REST catalog (pyiceberg create + append) on the test bed of tests/object_store.py.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from layout.catalog import load_catalog
from layout.metrics import engine
from layout.metrics.measure import measure_probe
from layout.metrics.probes import Probe
from layout.read.plan import plan


@pytest.fixture
def tiny(on_rest):
    """t_engine.tiny on S3: two appends (two data files) of `k` 0..3999 and a string column."""
    catalog = load_catalog()
    catalog.create_namespace_if_not_exists("t_engine")
    if catalog.table_exists("t_engine.tiny"):
        catalog.drop_table("t_engine.tiny")
    schema = pa.schema([pa.field("k", pa.int64()), pa.field("v", pa.string())])
    table = catalog.create_table("t_engine.tiny", schema=schema)
    for part in (range(2000), range(2000, 4000)):
        table.append(pa.table({"k": pa.array(part, pa.int64()), "v": [f"v{x % 7}" for x in part]},
                              schema=schema))
    return catalog.load_table("t_engine.tiny")


@pytest.mark.parametrize("probe,expected", [
    (Probe("point", "k = 1500"), 1),
    (Probe("range", "k BETWEEN 1990 AND 2009", ("k", "v")), 20),
    (Probe("strings", "v IN ('v3', 'v5')", ("v",)), sum(1 for x in range(4000) if x % 7 in (3, 5))),
])
def test_datafusion_confirms_a_probe_on_s3(tiny, object_store, probe, expected):
    object_store.reset()
    m = measure_probe("t_engine.tiny", probe, run_id="t", phase="on-demand", engine=True, table=tiny)
    assert m.engine_status == "checked", m.engine_status
    assert m.engine_files == m.files_selected >= 1
    assert m.engine_rows_matching == expected == m.rows_matching
    assert (m.engine_bytes, m.engine_rows) == (m.bytes_selected, m.rows_selected)
    assert not m.engine_differs
    log = object_store.log()
    data = [r for r in log if r["key"].endswith(".parquet")]
    assert data and all(r["status"] < 400 for r in data), "every read of a data file succeeded"
    assert {r["access_key"] for r in log} == {object_store.access_key}, "signed with the vended key only"
    assert object_store.secret_key not in repr(m)


def test_what_the_store_cannot_read_is_not_confirmed(tiny, object_store, monkeypatch):
    """A file on S3 that is not there (a DataFusion error) is recorded, never raised, and names no secret."""
    planned = plan("t_engine.tiny", "k = 1500")
    gone = dataclasses.replace(planned, files=tuple(dataclasses.replace(f, path=f.path + ".gone")
                                                    for f in planned.files))
    monkeypatch.setattr(engine, "_renamed", lambda *a, **k: None)  # straight to DataFusion
    status = engine.check_probe(gone, table=tiny, max_bytes=1 << 30).status
    assert status.startswith("not confirmed: DataFusion could not run the probe: "), status
    assert object_store.secret_key not in status
