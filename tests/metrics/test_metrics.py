"""Pruning metrics: probes measured before and after a compaction made by the pipeline, recorded in Iceberg.

The compaction runs the job's own functions on the shared in-process Spark session (as the compaction
tests' `in_process_job`); measuring, recording and the checks are the real code. The run measures with the
spec it carries (a retried measure step too: the same rows, replaced).

The exact ideal (pages and bytes holding a matching row) and the matching rows are checked against the
brute force of tests/metrics/pruning_oracle.py, which shares no code with lakesort; beyond its row-group
budget the recorded ideal is an estimate within the tolerance it states (the ideal's own tests are
tests/metrics/test_ideal.py). The standard probes read a bounded number of row groups, and a metrics table
from before the later columns stays readable.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from demo_tables import build_demo_at, demo_spec, isolate
from lossless import load_job
from pruning_oracle import (
    SAMPLED,
    BruteForce,
    generated_table,
    probe_oracle,
    snapshot_paths,
    within_tolerance,
)

import layout.compaction.pipeline.driver
from layout.catalog import load_catalog, load_table
from layout.cli import EXIT_OK, EXIT_USAGE, main
from layout.compaction.pipeline import steps as pipeline
from layout.compaction.pipeline.driver import compact
from layout.metrics import store as metrics_store
from layout.metrics.clustering import ClusteringRecord, read_clustering, summarize
from layout.metrics.ideal import IDEAL_ROW_GROUPS
from layout.metrics.measure import measure, measure_probe, read_metrics, read_runs
from layout.metrics.probes import SAMPLE_ROW_GROUPS, Probe, _probe_literal, standard_probes
from layout.report.render import table_page_name, write_reports
from layout.report.rows import Measurement, typed_rows
from layout.sizes import format_size

pytestmark = pytest.mark.spark

PROBES = [
    {"name": "ship_week", "where": "l_shipdate BETWEEN DATE '1995-03-06' AND DATE '1995-03-12'"},
    {"name": "ship_day_prices", "where": "l_shipdate = DATE '1995-04-17'", "columns": ["l_extendedprice"]},
    {"name": "order_lookup", "where": "l_orderkey = 4242"},
]


@pytest.fixture(scope="module")
def compacted(tmp_path_factory, tpch_cache, spark):
    """A demo table compacted by `compact(..., measure=True)`; returns (root, spec, result, prepared run)."""
    root = tmp_path_factory.mktemp("metrics")
    build_demo_at(root, tpch_cache)
    job = load_job()
    # One sort key: four standard probes (each measured cold and warm,
    # before and after) keep this module quick.
    spec = demo_spec(probes=PROBES, sort={"keys": [{"column": "l_shipdate"}]})

    def submit(plan_path, manifest_path, *, master, name, conf=None, work_dir, groups=None):
        plan = layout.compaction.pipeline.driver.RewritePlan.from_json(Path(plan_path).read_text())
        wanted = [g for g in plan.groups if groups is None or g.group_id in groups]
        job.write_manifest(spark, plan, job.compact_groups(spark, plan, wanted), str(manifest_path), 0.0)

    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, root)
        mp.setattr(layout.compaction.pipeline.driver, "submit", submit)
        result = compact("demo.lineitem", spec=spec, work_dir=root / "work", measure=True)
    assert not result.nothing_to_do
    return root, spec, result, pipeline.PreparedRun.load(root / "work")


@pytest.fixture
def catalog(compacted, monkeypatch):
    isolate(monkeypatch, compacted[0])
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
    sort_key_probes = ["ship_week", "ship_day_prices",
                       *[p for p in phases["after"] if p.startswith("std_l_shipdate")]]
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
    """Every recorded probe, before and after, and a probe off the sort key (whose pages the column index
    cannot pick exactly, so the ideal is below the selection): the ideal pages, bytes and matching rows
    equal the brute force's."""
    _, _, result, prepared = compacted
    table = load_table("demo.lineitem")
    brute = BruteForce()
    rows = _rows(catalog, prepared.run_id)
    assert len(rows) == 14
    snapshots = {r["snapshot_id"] for r in rows}
    assert len(snapshots) == 2
    off_key = Probe("off_key", "l_suppkey BETWEEN 10 AND 12")
    rows += [measure_probe("demo.lineitem", off_key, snapshot_id=s, run_id="t", phase="on-demand").to_row()
             for s in sorted(snapshots)]
    sampled = 0
    for row in rows:
        assert row["bytes_ideal"] <= row["bytes_selected"] <= row["bytes_total"], row["probe"]
        # pages_total: None when planning opened only the files the manifests keep (layout.read.plan)
        assert row["pages_ideal"] <= row["pages_selected"] <= (row["pages_total"] or math.inf), row["probe"]
        assert 0.0 <= row["efficiency"] <= 1.0
        assert row["rows_matching"] <= row["rows_selected"] <= row["rows_total"]
        columns, match = probe_oracle(row["predicate"])
        projection = row["columns"].split(",") if row["columns"] else None
        paths = snapshot_paths(table, row["snapshot_id"])
        if row["ideal_method"] != "exact":  # over the budget: the exact figures, and the estimate near them
            sampled += 1
            assert row["row_groups_selected"] > IDEAL_ROW_GROUPS, row["ideal_method"]
            exact = measure_probe("demo.lineitem", Probe(row["probe"], row["predicate"], projection),
                                  snapshot_id=row["snapshot_id"], run_id="t", phase="on-demand",
                                  ideal_row_groups=None).to_row()
            assert exact["ideal_method"] == "exact"
            assert within_tolerance(row["efficiency"], exact["efficiency"], row["ideal_method"]), (row, exact)
            row = exact
        pages, nbytes, matching = brute.ideal(paths, columns, match, projection)
        where = f"{row['phase']} {row['probe']} ({row['predicate']}) on snapshot {row['snapshot_id']}"
        if row["engine_status"] != "off":  # recorded rows: DataFusion ran them over every selected file
            assert row["engine_status"] == "checked", (where, row["engine_status"])
            assert (row["engine_model_bytes"], row["engine_model_rows"]) == (row["bytes_selected"],
                                                                             row["rows_selected"])
            assert (row["engine_rows"] == row["rows_selected"]
                    and row["engine_rows_matching"] == matching), where
            # bytes: DataFusion also reads the bloom filters this spec writes,
            # which lakesort's figures leave out
            assert abs(row["engine_bytes"] - row["bytes_selected"]) <= 0.2 * row["bytes_selected"], where
        assert ((row["pages_ideal"], row["bytes_ideal"], row["rows_matching"])
                == (pages, nbytes, matching)), where
        assert (row["efficiency"]
                == pytest.approx(nbytes / row["bytes_selected"] if row["bytes_selected"] else 1.0))
        pages_total, bytes_total = brute.totals(paths, columns, projection)
        assert row["bytes_total"] == bytes_total and row["pages_total"] in (None, pages_total), where
        if row["probe"] == "ship_week":  # and the rows by pyiceberg's own reader, filtered by pyarrow
            data = table.scan(snapshot_id=row["snapshot_id"]).to_arrow()
            lo, hi = pa.scalar(dt.date(1995, 3, 6)), pa.scalar(dt.date(1995, 3, 12))
            mask = pc.and_(pc.greater_equal(data["l_shipdate"], lo), pc.less_equal(data["l_shipdate"], hi))
            assert row["rows_matching"] == pc.sum(mask).as_py() > 0
    assert sampled, "the unsorted snapshot's probes off the partition column select more than the budget"
    after = next(r for r in rows if r["probe"] == "off_key" and r["snapshot_id"] == result.snapshot_id)
    assert 0 < after["pages_ideal"] < after["pages_selected"], "the off-key probe must leave slack to measure"


def test_clustering_is_recorded_before_and_after_from_the_bounds(compacted, catalog):
    """Each measurement records the sort key's overlap depth per partition: before, the appends overlap in
    every month they touched; after, each partition is one sorted run of disjoint files (depth 1). Per
    partition of the snapshot before, the depths are the brute force's over bounds read by pyarrow from
    the footers (the manifests' are what lakesort reads)."""
    from test_clustering import brute_depths

    _, _, _, prepared = compacted
    rows = [ClusteringRecord(**r) for r in read_clustering(catalog, "demo.lineitem").to_pylist()
            if r["run_id"] == prepared.run_id]
    (before,) = summarize(r for r in rows if r.phase == "before")
    (after,) = summarize(r for r in rows if r.phase == "after")
    assert before.sort_key == after.sort_key == "l_shipdate" and before.partitions == after.partitions
    assert after.max_depth == 1 and after.histogram == ((1, after.files),) and after.average_overlaps == 0
    assert before.average_depth > 1 and before.files > after.files
    snapshot = next(r.snapshot_id for r in rows if r.phase == "before")
    table = load_table("demo.lineitem")
    spans: dict[str, list] = {}
    for task in table.scan(snapshot_id=snapshot).plan_files():
        meta = pq.ParquetFile(task.file.file_path.removeprefix("file://")).metadata
        col = meta.schema.names.index("l_shipdate")
        stats = [meta.row_group(i).column(col).statistics for i in range(meta.num_row_groups)]
        partition = table.specs()[task.file.spec_id].partition_to_path(task.file.partition, table.schema())
        spans.setdefault(partition, []).append((min(s.min for s in stats), max(s.max for s in stats)))
    recorded = {r.partition_path: r for r in rows if r.phase == "before"}
    assert set(recorded) == set(spans)
    for partition, bounds in spans.items():
        depths = brute_depths(bounds) if len(bounds) <= 10 else None
        got = recorded[partition]
        assert got.files == len(bounds), partition
        if depths is not None:
            assert (got.max_depth, got.average_depth) == (max(depths),
                                                          pytest.approx(sum(depths) / len(depths)))


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
    methods = [m for (m,) in con.execute("SELECT ideal_method FROM read_parquet($paths) WHERE run_id = $run",
                                         {"paths": paths, "run": prepared.run_id}).fetchall()]
    assert sorted(methods) == sorted(r["ideal_method"] for r in rows)
    assert all(m == "exact" or SAMPLED.fullmatch(m) for m in methods), methods
    runs = [r for r in read_runs(catalog, "demo.lineitem").to_pylist() if r["run_id"] == prepared.run_id]
    assert len(runs) == 1
    run = runs[0]
    assert run["status"] == "committed" and run["verification"] == "passed"
    assert run["files_after"] < run["files_before"] and run["bytes_rewritten"] > 0
    assert isinstance(json.loads(run["findings"]), list)


def test_rerunning_a_measurement_does_not_duplicate_rows(compacted, catalog):
    _, spec, result, prepared = compacted
    count = len(read_metrics(catalog))
    assert prepared.spec == spec  # the run carries its spec: a retried step measures with the same probes
    pipeline.measure(prepared, result.snapshot_id)  # a retried Airflow task
    assert len(read_metrics(catalog)) == count
    first = measure("demo.lineitem", spec=spec)  # on demand: run id measure-<snapshot>
    assert {m.run_id for m in first} == {f"measure-{result.snapshot_id}"}
    measure("demo.lineitem", spec=spec)
    assert len(read_metrics(catalog)) == count + len(first)


def test_standard_probes_are_seeded_and_sampled_from_the_data(compacted, catalog, monkeypatch):
    """The same data gives the same probes, about the fractions of the rows they are named after, drawn
    from a bounded number of row groups (never whole files)."""
    table = load_table("demo.lineitem")
    read_row_group, reads = pq.ParquetFile.read_row_group, []

    def counted(self, i, *args, **kwargs):
        reads.append(i)
        return read_row_group(self, i, *args, **kwargs)

    with monkeypatch.context() as mp:
        mp.setattr(pq.ParquetFile, "read_row_group", counted)
        mp.setattr(pq, "read_table", None)  # whole files: not any more
        first = standard_probes(table, ["l_shipdate", "l_orderkey"])
    assert 0 < len(reads) <= 2 * SAMPLE_ROW_GROUPS, (
        "one column of at most SAMPLE_ROW_GROUPS row groups per key")
    assert first == standard_probes(table, ["l_shipdate", "l_orderkey"]), "same data, same probes"
    assert [p.name for p in first[:4]] == ["std_l_shipdate_point", "std_l_shipdate_0_1pct",
                                           "std_l_shipdate_1pct", "std_l_shipdate_10pct"]
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
    header = next(line for line in out.splitlines() if line.strip().startswith("probe"))
    assert header.split() == ["probe", "files", "pages", "bytes", "selected", "in", "pages", "clustered",
                              "eff.", "waste", "DataFusion", "plan", "ms"]
    assert re.search(
        r"clustering by l_shipdate: \d+ partition\(s\), \d+ file\(s\), average depth 1\.00, max 1", out
    )
    assert main(["-q", "measure", "demo.lineitem", "--spec", str(spec_file), "--no-record", "--no-engine",
                 "--json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert {m["engine_status"] for m in doc["measurements"]} == {"off"}
    assert {c["sort_key"] for c in doc["clustering"]} == {"l_shipdate"}
    assert (main(["-q", "measure", "demo.lineitem", "--spec", str(spec_file), "--snapshot", "12345"])
            == EXIT_USAGE)
    assert "no snapshot 12345" in capsys.readouterr().err


def test_sql_literals_for_standard_probes():
    """Standard probes render values with the one SQL-literal renderer (`layout.expr.predicate.sql_literal`),
    so a sampled string with a quote reads back as itself (a `''` escape read back as CONCAT)."""
    from decimal import Decimal

    from layout.expr.sql import parse_where

    assert _probe_literal(dt.date(1995, 3, 6)) == "DATE '1995-03-06'"
    assert _probe_literal(dt.datetime(2020, 1, 2, 3, 4, 5)) == "TIMESTAMP '2020-01-02 03:04:05'"
    quoted = _probe_literal("it's")
    assert parse_where(f"c = {quoted}").literal == "it's"
    assert _probe_literal(Decimal("1.50")) == "1.50" and _probe_literal(7) == "7"
    assert (_probe_literal(float("nan")) is None and _probe_literal(True) is None
            and _probe_literal(b"x") is None)



def test_a_metrics_table_from_before_ideal_method_stays_readable_and_grows_the_column(
    iceberg_catalog, tmp_path
):
    """A pruning_metrics table written without `ideal_method` and the columns added after it (the clustered
    ideal, the engine check), its totals required, reads back with nulls in the new columns (the report's
    typed rows too); the next write adds them, nullable and last in their order, makes the totals
    nullable (planning an Iceberg table may leave them unknown) and keeps the old rows."""
    directory = tmp_path / "data"
    directory.mkdir()
    row = measure_probe(str(generated_table(directory, sort=False)), Probe("p", "k = 17"), run_id="old",
                        phase="on-demand", engine=True).to_row()
    totals = ("row_groups_total", "pages_total")
    names = [name for name, _, _ in metrics_store.METRICS_FIELDS]
    added = names[names.index("ideal_method"):]
    assert added[:4] == ["ideal_method", "pages_clustered", "bytes_clustered", "efficiency_clustered"]
    old_fields = [(name, kind, required or name in totals)
                  for name, kind, required in metrics_store.METRICS_FIELDS if name not in added]
    old_row = {k: v for k, v in row.items() if k not in added}
    metrics_store.upsert(iceberg_catalog, metrics_store.PRUNING_METRICS, old_fields,
                         metrics_store.METRICS_KEY, [old_row])
    table = iceberg_catalog.load_table(metrics_store.PRUNING_METRICS)
    assert not set(added) & {f.name for f in table.schema().fields}
    got = read_metrics(iceberg_catalog)
    assert all(got.column(name).to_pylist() == [None] for name in added)
    typed = typed_rows(got, Measurement, "pruning metrics")
    assert [(m.ideal_method, m.bytes_clustered, m.engine_status, m.engine_difference) for m in typed] == [
        (None, None, None, None)]

    new_row = {**row, "run_id": "new", "row_groups_total": None, "pages_total": None}
    metrics_store.upsert(iceberg_catalog, metrics_store.PRUNING_METRICS, metrics_store.METRICS_FIELDS,
                         metrics_store.METRICS_KEY, [new_row])
    schema = iceberg_catalog.load_table(metrics_store.PRUNING_METRICS).schema()
    assert [(f.name, f.required) for f in schema.fields[-len(added):]] == [(name, False) for name in added]
    assert not any(schema.find_field(name).required for name in totals)
    got = {r["run_id"]: (r["ideal_method"], r["pages_total"], r["engine_status"], r["bytes_clustered"])
           for r in read_metrics(iceberg_catalog).to_pylist()}
    assert got == {"old": (None, row["pages_total"], None, None),
                   "new": ("exact", None, "checked", row["bytes_clustered"])}
    assert row["ideal_method"] == "exact" and row["engine_bytes"] == row["bytes_selected"]


def _cells(page: ET.Element, klass: str) -> list[list[str]]:
    table = next(t for t in page.iter("table") if t.get("class") == klass)
    return [[" ".join("".join(td.itertext()).split()) for td in tr] for tr in table.find("tbody")]


def test_report_after_measuring_twice_and_a_dry_run(compacted, catalog):
    """Issue 55's report: a compaction (before and after), `lakesort measure` twice on the snapshot it wrote,
    then `lakesort compact --dry-run`. The standard probes are the table's, measured with one predicate each
    every time; the report shows each figure beside the predicate it was measured with, and the last run is
    the committed compaction, not the dry run. The compaction left no sidecar file in the table location."""
    root, spec, _, prepared = compacted
    compaction = _by_phase(_rows(catalog, prepared.run_id))
    first = {m.probe: m for m in measure("demo.lineitem", spec=spec, engine=False)}
    second = {m.probe: m for m in measure("demo.lineitem", spec=spec, engine=False)}
    standard = sorted(p for p in first if p.startswith("std_"))
    assert standard == sorted(p for p in compaction["after"] if p.startswith("std_")) and len(standard) == 4
    for name in standard:  # the same query every time: before and after the compaction, and on demand
        predicates = {compaction["before"][name]["predicate"], compaction["after"][name]["predicate"],
                      first[name].predicate, second[name].predicate}
        assert len(predicates) == 1, f"{name} measured with {predicates}"
        assert first[name].bytes_selected == second[name].bytes_selected == compaction["after"][name][
            "bytes_selected"], f"{name}: one snapshot, one predicate, one figure"

    dry = compact("demo.lineitem", spec=spec, work_dir=root / "work-dry", dry_run=True, force=True)
    assert dry.dry_run
    statuses = {r["run_id"]: r["status"] for r in read_runs(catalog, "demo.lineitem").to_pylist()}
    assert statuses[prepared.run_id] == "committed" and "dry-run" in statuses.values()

    index = write_reports(root / "report", catalog=catalog, specs=[spec])
    page = ET.fromstring((index.parent / "tables" / table_page_name("demo.lineitem")).read_text()
                         .removeprefix("<!DOCTYPE html>\n"))
    recorded = {r["probe"]: r for r in _rows(catalog, prepared.run_id) if r["phase"] == "after"}
    probes = _cells(page, "probes")
    assert {row[0] for row in probes} == set(recorded)
    for row in probes:  # probe, kind, predicate, columns, before, after, ..., run
        after = recorded[row[0]]
        assert row[2] == after["predicate"], row
        assert row[5] == format_size(after["bytes_selected"]) and row[-1] == prepared.run_id, row
    for row in _cells(page, "details"):  # the latest measurement: the second on-demand one, same predicates
        assert row[1].startswith("on-demand") and "measured with" not in row[0], row
    tiles = {" ".join("".join(d.find("div").itertext()).split()): " ".join("".join(d[1].itertext()).split())
             for d in page.iter("div") if d.get("class") == "card"}
    assert tiles["Last run"].startswith("committed"), tiles
    headline = " ".join("".join(next(d for d in page.iter("div") if d.get("class") == "headline").itertext())
                        .split())
    assert re.search(r"\d+(\.\d)?% efficient .*: readers fetch", headline) and "Next: " in headline
    index_rows = _cells(ET.fromstring(index.read_text().removeprefix("<!DOCTYPE html>\n")), "tables")
    assert row_last_run(index_rows, "demo.lineitem").startswith("committed")
    newest = _cells(page, "runs")[0]
    assert newest[3] == "dry-run", "the runs table lists the dry run, newest first"

    location = load_table("demo.lineitem").location().removeprefix("file://")
    sidecars = [p for p in Path(location).rglob("*") if p.name == "_SUCCESS" or p.name.endswith(".crc")]
    assert sidecars == [], f"sidecar files in the table location: {sidecars[:5]}"


def row_last_run(rows: list[list[str]], table: str) -> str:
    return next(r for r in rows if r[0] == table)[3]
