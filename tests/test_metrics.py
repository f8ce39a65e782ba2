"""Pruning metrics: probes measured before and after a compaction made by the pipeline, recorded in Iceberg.

The compaction runs the job's own functions on the shared in-process Spark session (as the compaction
tests' `in_process_job`); measuring, recording and the checks are the real code. The ideal and the
matching row counts are checked against brute force (pyiceberg reading the whole snapshot), and a
property test checks the ideal against the selection on random files and predicates.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_compaction import _build_demo, _isolate, _load_job, demo_spec

import layout.compact
from layout import metrics_store, pipeline
from layout.catalog import load_catalog, load_table
from layout.cli import EXIT_OK, EXIT_USAGE, main
from layout.compact import compact
from layout.demo import generate_lineitem
from layout.metrics import (
    Probe,
    _sql_literal,
    measure,
    measure_probe,
    read_metrics,
    read_runs,
    standard_probes,
)

pytestmark = pytest.mark.spark

PROBES = [
    {"name": "ship_week", "where": "l_shipdate BETWEEN DATE '1995-03-06' AND DATE '1995-03-12'"},
    {"name": "ship_day_prices", "where": "l_shipdate = DATE '1995-04-17'", "columns": ["l_extendedprice"]},
    {"name": "order_lookup", "where": "l_orderkey = 4242"},
]


@pytest.fixture(scope="module")
def compacted(tmp_path_factory, spark):
    """A demo table compacted by `compact(..., measure=True)`; returns (root, spec, result, prepared run)."""
    tpch = tmp_path_factory.mktemp("tpch")
    generate_lineitem(0.01, tpch)
    root = tmp_path_factory.mktemp("metrics")
    _build_demo(root, tpch)
    job = _load_job()
    # One sort key: four standard probes (each measured cold and warm, before and after) keep this module quick.
    spec = demo_spec(probes=PROBES, sort={"keys": [{"column": "l_shipdate"}]})

    def submit(plan_path, manifest_path, *, master, name, conf=None, work_dir, groups=None):
        plan = layout.compact.RewritePlan.from_json(Path(plan_path).read_text())
        wanted = [g for g in plan.groups if groups is None or g.group_id in groups]
        job.write_manifest(spark, plan, job.compact_groups(spark, plan, wanted), str(manifest_path), 0.0)

    with pytest.MonkeyPatch.context() as mp:
        _isolate(mp, root)
        mp.setattr(layout.compact, "submit", submit)
        result = compact("demo.lineitem", spec=spec, work_dir=root / "work", measure=True)
    assert not result.nothing_to_do
    return root, spec, result, pipeline.PreparedRun.load(root / "work")


@pytest.fixture
def catalog(compacted, monkeypatch):
    _isolate(monkeypatch, compacted[0])
    return load_catalog()


def _rows(catalog, run_id: str) -> list[dict]:
    return [r for r in read_metrics(catalog, "demo.lineitem").to_pylist() if r["run_id"] == run_id]


def _by_phase(rows: list[dict]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for r in rows:
        out.setdefault(r["phase"], {})[r["probe"]] = r
    return out


def test_sort_key_probes_read_fewer_bytes_after_compaction(compacted, catalog):
    """Point lookups and narrow ranges on the sort key (up to 1% of the rows) read fewer bytes after. The 10%
    range spans whole monthly partitions, which partition pruning already skipped before; it is checked to
    select no more files after (its bytes may grow: this test's spec writes tiny pages)."""
    _, _, result, prepared = compacted
    phases = _by_phase(_rows(catalog, prepared.run_id))
    assert set(phases) == {"before", "after"}
    assert phases["before"].keys() == phases["after"].keys(), "the same probes before and after"
    sort_key_probes = ["ship_week", "ship_day_prices", *[p for p in phases["after"] if p.startswith("std_l_shipdate")]]
    assert len(sort_key_probes) == 6, "two owner probes and four standard ones on the first sort key"
    for name in sort_key_probes:
        before, after = phases["before"][name], phases["after"][name]
        assert after["snapshot_id"] == result.snapshot_id != before["snapshot_id"]
        if name.endswith("10pct"):
            assert after["files_selected"] <= before["files_selected"], name
            continue
        assert after["bytes_selected"] < before["bytes_selected"], f"{name}: no fewer bytes after compaction"
        assert after["rows_selected"] < before["rows_selected"], name


def test_ideal_is_never_larger_than_selected_and_matches_brute_force(compacted, catalog):
    _, _, _, prepared = compacted
    table = load_table("demo.lineitem")
    for row in _rows(catalog, prepared.run_id):
        assert row["bytes_ideal"] <= row["bytes_selected"] <= row["bytes_total"], row["probe"]
        assert row["pages_ideal"] <= row["pages_selected"] <= row["pages_total"], row["probe"]
        assert 0.0 <= row["efficiency"] <= 1.0
        assert row["rows_matching"] <= row["rows_selected"] <= row["rows_total"]
        if row["probe"] == "ship_week":  # brute force: the whole snapshot, filtered by pyarrow
            data = table.scan(snapshot_id=row["snapshot_id"]).to_arrow()
            lo, hi = pa.scalar(dt.date(1995, 3, 6)), pa.scalar(dt.date(1995, 3, 12))
            mask = pc.and_(pc.greater_equal(data["l_shipdate"], lo), pc.less_equal(data["l_shipdate"], hi))
            assert row["rows_matching"] == pc.sum(mask).as_py() > 0


def test_metrics_rows_read_back_through_pyiceberg_and_duckdb(compacted, catalog):
    import duckdb

    _, _, _, prepared = compacted
    rows = _rows(catalog, prepared.run_id)
    n_probes = len({r["probe"] for r in rows})
    assert len(rows) == 2 * n_probes and n_probes == 3 + 4
    metrics = catalog.load_table(metrics_store.PRUNING_METRICS)
    paths = [t.file.file_path.removeprefix("file://") for t in metrics.scan().plan_files()]
    con = duckdb.connect()
    got = con.execute("SELECT count(*), sum(bytes_selected) FROM read_parquet($paths) WHERE run_id = $run",
                      {"paths": paths, "run": prepared.run_id}).fetchone()
    assert got == (len(rows), sum(r["bytes_selected"] for r in rows))
    runs = [r for r in read_runs(catalog, "demo.lineitem").to_pylist() if r["run_id"] == prepared.run_id]
    assert len(runs) == 1
    run = runs[0]
    assert run["status"] == "committed" and run["verification"] == "passed"
    assert run["files_after"] < run["files_before"] and run["bytes_rewritten"] > 0
    assert isinstance(json.loads(run["findings"]), list)


def test_rerunning_a_measurement_does_not_duplicate_rows(compacted, catalog):
    _, spec, result, prepared = compacted
    count = len(read_metrics(catalog))
    pipeline.measure(prepared, result.snapshot_id, spec=spec)  # a retried Airflow task
    assert len(read_metrics(catalog)) == count
    first = measure("demo.lineitem", spec=spec)  # on demand: run id measure-<snapshot>
    assert {m.run_id for m in first} == {f"measure-{result.snapshot_id}"}
    measure("demo.lineitem", spec=spec)
    assert len(read_metrics(catalog)) == count + len(first)


def test_standard_probes_are_seeded_and_sampled_from_the_data(compacted, catalog):
    table = load_table("demo.lineitem")
    first = standard_probes(table, ["l_shipdate", "l_orderkey"])
    assert first == standard_probes(table, ["l_shipdate", "l_orderkey"]), "same data, same probes"
    assert [p.name for p in first[:4]] == ["std_l_shipdate_point", "std_l_shipdate_0_1pct", "std_l_shipdate_1pct",
                                          "std_l_shipdate_10pct"]
    rows = {p.name: measure_probe("demo.lineitem", p, run_id="t", phase="on-demand") for p in first
            if p.name in ("std_l_orderkey_1pct", "std_l_orderkey_10pct")}
    total = rows["std_l_orderkey_10pct"].rows_total
    # ~0.1% / 1% / 10% of the rows; keys repeat (an order has up to 7 lines), so allow slack.
    for name, fraction in (("1pct", 0.01), ("10pct", 0.1)):
        assert fraction / 3 <= rows[f"std_l_orderkey_{name}"].rows_matching / total <= fraction * 3, name


def test_measure_cli_prints_and_refuses_an_unknown_snapshot(compacted, catalog, capsys):
    _, spec, _, _ = compacted
    spec_file = Path("spec.yaml")
    spec_file.write_text(json.dumps(spec.model_dump(mode="json", exclude_none=True)))
    assert main(["-q", "measure", "demo.lineitem", "--spec", str(spec_file), "--no-record"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "ship_week" in out and "std_l_shipdate_point" in out
    assert main(["-q", "measure", "demo.lineitem", "--spec", str(spec_file), "--snapshot", "12345"]) == EXIT_USAGE
    assert "no snapshot 12345" in capsys.readouterr().err


def test_sql_literals_for_standard_probes():
    from decimal import Decimal

    assert _sql_literal(dt.date(1995, 3, 6)) == "DATE '1995-03-06'"
    assert _sql_literal(dt.datetime(2020, 1, 2, 3, 4, 5)) == "TIMESTAMP '2020-01-02 03:04:05'"
    assert _sql_literal("it's") == "'it''s'"
    assert _sql_literal(Decimal("1.50")) == "1.50" and _sql_literal(7) == "7"
    assert _sql_literal(float("nan")) is None and _sql_literal(True) is None and _sql_literal(b"x") is None


# ---- property: on any files and predicate, ideal <= selected and the matching rows are exact ----------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.integers(-50, 50) | st.none(), min_size=1, max_size=400),
       lo=st.integers(-60, 60), width=st.integers(0, 40), sort=st.booleans())
def test_ideal_bounds_selection_on_random_files(tmp_path_factory, values, lo, width, sort):
    directory = tmp_path_factory.mktemp("prop")
    data = pa.table({"k": pa.array(sorted(values, key=lambda v: (v is None, v or 0)) if sort else values,
                                   pa.int64()),
                     "v": pa.array(range(len(values)), pa.int64())})
    pq.write_table(data, directory / "a.parquet", row_group_size=64, data_page_size=1,
                   write_page_index=True, write_batch_size=16)
    where = f"k BETWEEN {lo} AND {lo + width}"
    m = measure_probe(str(directory), Probe("p", where), run_id="t", phase="on-demand")
    truth = sum(1 for v in values if v is not None and lo <= v <= lo + width)
    assert m.rows_matching == truth
    assert m.bytes_ideal <= m.bytes_selected and m.pages_ideal <= m.pages_selected
    assert (m.bytes_ideal == 0) == (truth == 0)
