"""layout.report.render: HTML pages from the metrics tables (synthetic rows with the real schemas,
report_rows.py), and write_reports against a real pyiceberg SQL catalog. The charts' own layout is
test_report_charts.py's."""

from __future__ import annotations

import dataclasses
import logging
import random
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import timedelta

import pyarrow as pa
import pytest
from report_rows import (
    GENERATED,
    T0,
    Balance,
    MiB,
    arrow,
    clustered,
    maintained,
    metric,
    page,
    parse,
    render,
    row_of,
    run,
    spec,
    table_rows,
    text,
)

from layout.advise import Advice, Recommendation
from layout.errors import ConfigError, UsageError
from layout.metrics.store import (
    COMPACTION_RUNS,
    MAINTENANCE_FIELDS,
    METRICS_FIELDS,
    METRICS_KEY,
    PRUNING_METRICS,
    RUNS_FIELDS,
    RUNS_KEY,
    arrow_schema,
    upsert,
)
from layout.report.findings import EXAMPLES, Verification, group_findings
from layout.report.render import render_reports, table_page_name, write_reports
from layout.report.rows import Measurement, Run
from layout.report.verdict import verdict
from layout.report.views import LAST_RUNS, TableView, table_views

# --- pages ----------------------------------------------------------------------------------------------


def test_index_lists_every_table_and_links_its_page(tmp_path, history):
    metrics, runs, specs = history
    extra_spec = spec("b.never_measured", owner="Team B")
    runs_only = run("c.runs_only", "r1", T0)
    index = render(tmp_path, metrics, [*runs, runs_only], [*specs, extra_spec])
    html = index.read_text(encoding="utf-8")
    links = [a.get("href") for a in parse(html).iter("a") if a.get("href", "").startswith("tables/")]
    assert links == ["tables/b.never_measured.html", "tables/c.runs_only.html", "tables/sales.orders.html"]
    for link in links:
        assert (index.parent / link).is_file()
    rows = table_rows(html, "tables")
    # Table, Efficiency, Trend, Last run, Verification, After the last compaction, Owner, files, size
    assert "p1 reads 88% fewer bytes" in row_of(rows, "sales.orders")[5]
    assert (row_of(rows, "b.never_measured")[1:6]
            == ["\u2013", "\u2013", "no runs yet", "\u2013", "never measured"])
    assert "Team B" in row_of(rows, "b.never_measured")[6]
    assert row_of(rows, "c.runs_only")[6] == "no table spec"


def test_probe_before_after_uses_latest_run_with_both_phases(tmp_path, history):
    html = page(render(tmp_path, *history), "sales.orders")
    rows = table_rows(html, "probes")
    p1 = row_of(rows, "p1")
    # n2 is the newest run with a before and an after for p1 (n3 has only a before; adhoc is on-demand)
    # efficiency against a perfectly clustered table (the synthetic rows' clustered bytes are half the ideal):
    # 3 of 24 MiB before (12.5%, rounded half to even), 0.5 of 3 MiB after; wasted in the pages read after:
    # 1 - 1/3; no DataFusion check
    assert p1[4:] == ["24.0 MiB", "3.00 MiB", "\u221288%", "12% \u2192 17%", "67%", "\u2013",
                      "15 \u2192 2 of 40", "n2"]
    p2 = row_of(rows, "p2")
    assert p2[3] == "k, v" and p2[4:7] == ["8.00 MiB", "10.0 MiB", "+25%"]
    assert p2[7] == "12% \u2192 12%" and p2[8] == "80%"  # efficiency before -> after; waste = 1 - 0.2
    headline = text(next(d for d in parse(html).iter("div") if d.get("class") == "headline"))
    assert "run n2" in headline and "probe p1 reads 88% fewer bytes (24.0 MiB \u2192 3.00 MiB)" in headline
    assert "Of 2 probes measured then, 1 read fewer bytes and 1 read more." in headline
    assert "Against a table perfectly clustered for it, it is now 17% efficient (before: 12%)." in headline
    # in words: what the table's efficiency means, and the next step (run n3 failed: fix it first)
    assert re.search(r"\d+% efficient \(the owners' probes, latest measurement\): readers fetch about [\d.]+ "
                     r"times the bytes a perfectly clustered table would need \((good|fair|poor): ", headline)
    assert "Next: The last compaction failed: fix what its error says" in headline
    assert "lakesort compact sales.orders" in headline
    details = row_of(table_rows(html, "details"), "p1")
    assert details[1].startswith("before, 2025-03-04")  # latest measurement of p1: n3's before
    assert "<title>sales.orders" in html and "<h1>sales.orders</h1>" in html
    assert 'href="mailto:sales-data@example.com"' in html


def test_runs_newest_first_with_durations_and_rewritten_bytes(tmp_path, history):
    html = page(render(tmp_path, *history), "sales.orders")
    rows = table_rows(html, "runs")
    assert [r[1] for r in rows] == ["n3", "n2", "n1"]
    assert [r[4] for r in rows] == ["2 h 03 min", "12 min 05 s", "1 min 05 s"]
    assert [r[7] for r in rows] == ["0 B", "12.0 MiB", "1.50 GiB"]
    assert rows[0][3] == "failed" and rows[0][10] == "verification failed: 1 layout error(s)"
    assert rows[1][5] == "12 \u2192 4"


def test_only_the_last_runs_are_listed(tmp_path):
    runs = [run("a.t", f"r{i:02d}", T0 + timedelta(hours=i)) for i in range(LAST_RUNS + 5)]
    random.Random(3).shuffle(runs)
    html = page(render(tmp_path, [], runs), "a.t")
    rows = table_rows(html, "runs")
    assert [r[1] for r in rows] == [f"r{i:02d}" for i in range(LAST_RUNS + 4, 4, -1)]
    assert "5 older run(s) not shown." in html


def test_failed_verification_shows_findings_with_diagnosis(tmp_path, history):
    html = page(render(tmp_path, *history), "sales.orders")
    section = html[html.index("<h2>Verification</h2>"):html.index("<h2>Latest runs</h2>")]
    assert "Latest verification:" in section and 'class="badge bad">failed<' in section and "n3" in section
    rows = table_rows(html, "findings")
    assert [r[0] for r in rows] == ["error", "warning"]  # errors first
    assert rows[0][1:] == ["column-index", "comment",
                           "column index dropped for comment; set column_index_truncate_length", "1",
                           "absent", "present", "s3://lake/a.parquet, row group 0, column comment"]
    assert rows[1][3] == "pages not sorted by k"
    assert "2 finding(s): 1 error, 1 warning in 2 group(s)." in text(ET.fromstring(f"<div>{section}</div>"))


def test_text_is_escaped(tmp_path):
    where = "name < 'b' AND note = '<script>alert(1)</script>'"
    owner = "R&D <data>"
    s = spec("a.t", [{"name": "odd", "where": where}], owner=owner)
    metrics = [metric("a.t", "odd", "before", "r<1>", T0, 8 * MiB, predicate=where),
               metric("a.t", "odd", "after", "r<1>", T0 + timedelta(minutes=5), MiB, predicate=where)]
    runs = [run("a.t", "r<1>", T0, status="failed", error="boom: <b>bad</b> & 'worse'")]
    index = render(tmp_path, metrics, runs, [s])
    html = page(index, "a.t")
    assert "<script>" not in html and "<b>bad</b>" not in html and "<data>" not in html
    # jinja2's autoescape (markupsafe) writes ' as &#39;
    assert "name &lt; &#39;b&#39; AND note = &#39;&lt;script&gt;alert(1)&lt;/script&gt;&#39;" in html
    assert "R&amp;D &lt;data&gt;" in html and "R&amp;D &lt;data&gt;" in index.read_text(encoding="utf-8")
    rows = table_rows(html, "probes")
    assert row_of(rows, "odd")[2] == where  # parses back to exactly the text
    assert row_of(table_rows(html, "runs"), "2025-03-01 02:00 UTC")[10] == "boom: <b>bad</b> & 'worse'"


def test_pages_are_wellformed_offline_and_have_svg_plots(tmp_path, history):
    index = render(tmp_path, *history)
    for html in (index.read_text(encoding="utf-8"), page(index, "sales.orders")):
        root = parse(html)  # the whole page is well-formed XML
        assert root.tag == "html" and root.get("lang") == "en"
        assert root.find("head/meta").get("charset") == "utf-8"
        checker = Balance()
        checker.feed(html)
        checker.close()
        assert checker.stack == []
        assert "http://" not in html and "https://" not in html
        for attr in re.findall(r'\b(?:src|href)="([^"]*)"', html):
            assert not re.match(r"[a-z][a-z0-9+.-]*://|//", attr, re.IGNORECASE), attr
            assert attr.startswith(("mailto:", "data:", "tables/", "../", "#")), attr
        assert "<script" not in html
    html = page(index, "sales.orders")
    svgs = re.findall(r"<svg\b.*?</svg>", html, re.DOTALL)
    # bar chart; a bytes and an efficiency chart per probe (small multiples); files and file size
    assert len(svgs) == 1 + 2 + 2 + 2
    for svg in svgs:
        element = ET.fromstring(svg)
        width, height = float(element.get("width")), float(element.get("height"))
        assert element.get("viewBox") == f"0 0 {element.get('width')} {element.get('height')}"
        assert width > 0 and height > 0 and element.find("title").text
        shapes = [e for e in element.iter() if e.tag in ("polyline", "circle", "rect")]
        assert len(shapes) > 1
        for e in element.iter("circle"):
            assert 0 <= float(e.get("cx")) <= width and 0 <= float(e.get("cy")) <= height
    bar = ET.fromstring(svgs[0])
    bars = {b.find("title").text: float(b.get("width"))
            for b in bar.iter("rect") if b.find("title") is not None}
    assert bars["p1, before: 24.0 MiB"] == pytest.approx(8 * bars["p1, after: 3.00 MiB"], rel=0.02)
    history_chart = ET.fromstring(next(s for s in svgs if "probe p1: bytes read over time" in s))
    tips = [c.find("title").text for c in history_chart.iter("circle")]
    # first before, then every after and on-demand, by time (ideal is the dashed series)
    assert [t.split(" at ")[0] for t in tips if t.startswith("bytes read")] == [
        "bytes read: 40.0 MiB", "bytes read: 20.0 MiB", "bytes read: 3.00 MiB", "bytes read: 4.00 MiB"]
    files_chart = ET.fromstring(next(s for s in svgs if "data files over time" in s))
    assert [c.find("title").text.split(" at ")[0] for c in files_chart.iter("circle")] == [
        # the first run's files before, then each committed run's files after
        "data files: 120", "data files: 12", "data files: 4"]


def test_empty_states(tmp_path):
    s = spec("a.registered", [{"name": "p1", "where": "k = 1"}])
    index = render(tmp_path, [], [], [s, spec("a.no_probes", [])])
    html = page(index, "a.registered")
    parse(html)
    assert "Registered but never measured" in html and "No compaction runs yet" in html
    assert "No verified compaction yet" in html and "<svg" not in html
    assert row_of(table_rows(html, "probes"), "p1")[4] == "not measured yet"
    assert "Not measured yet: probes are measured before and after each compaction." in html
    assert "This table has no probes" in page(index, "a.no_probes")
    empty = render_reports(tmp_path / "empty", *arrow([], []), [], generated_at=GENERATED)
    assert "No tables yet" in empty.read_text(encoding="utf-8")
    assert list((tmp_path / "empty" / "tables").iterdir()) == []


def test_storage_over_time_from_the_maintenance_runs(tmp_path):
    rows = [maintained("a.t", "m1", T0, before=300 * MiB, after=120 * MiB, live=100 * MiB),
            maintained("a.t", "m2", T0 + timedelta(days=1), status="dry-run", before=150 * MiB,
                       after=110 * MiB, live=100 * MiB),
            maintained("a.t", "m3", T0 + timedelta(days=2), status="failed", before=0, after=0, live=0,
                       error="cannot read the manifest list")]
    index = render_reports(tmp_path / "out", *arrow([], []), [spec("a.t")], generated_at=GENERATED,
                           maintenance=pa.Table.from_pylist(rows, schema=arrow_schema(MAINTENANCE_FIELDS)))
    html = page(index, "a.t")
    parse(html)
    chart = ET.fromstring(next(s for s in re.findall(r"<svg\b.*?</svg>", html, re.DOTALL)
                               if "storage over" in s))
    tips = [c.find("title").text.split(" at ")[0] for c in chart.iter("circle")]
    # the real run's start and end, the dry run's start; the failed run draws nothing
    assert [t for t in tips if t.startswith("under")] == [
        "under the table location: 300 MiB", "under the table location: 120 MiB",
        "under the table location: 150 MiB"]
    assert [t for t in tips if t.startswith("live")] == ["live data: 100 MiB"] * 3
    maintenance = table_rows(html, "maintenance")
    assert [r[1] for r in maintenance] == ["m3", "m2", "m1"]  # newest first
    assert row_of(maintenance, "2025-03-01 02:00 UTC")[2:9] == [
        "done", "4 of 9", "3", "180 MiB", "0", "300 MiB → 120 MiB", "100 MiB"]
    assert "cannot read the manifest list" in maintenance[0][9]
    assert "No maintenance runs yet" in page(render(tmp_path, [], [], [spec("a.t")], out="none"), "a.t")


def test_runs_without_metrics_and_metrics_without_pairs(tmp_path):
    metrics = [metric("a.t", "p1", "on-demand", "adhoc", T0, 2 * MiB)]
    runs = [run("a.t", "r1", T0, status="nothing-to-do", verification="skipped")]
    html = page(render(tmp_path, metrics, runs), "a.t")
    assert "Measured, but no compaction with a before and an after measurement yet." in html
    assert row_of(table_rows(html, "probes"), "p1")[4] == "no before/after pair yet"
    assert "No verified compaction yet" in html and "<svg" in html


def test_data_docs_link_only_when_built(tmp_path, history):
    index = render(tmp_path, *history)
    assert "no Data Docs yet" in index.read_text(encoding="utf-8")
    assert "gx/" not in index.read_text(encoding="utf-8") and "gx/" not in page(index, "sales.orders")
    (index.parent / "gx").mkdir()
    (index.parent / "gx" / "index.html").write_text("<html></html>")
    index = render(tmp_path, *history)
    assert '<a href="gx/index.html">GX Data Docs</a>' in index.read_text(encoding="utf-8")
    assert '<a href="../gx/index.html">GX Data Docs</a>' in page(index, "sales.orders")
    # where layout.verify.expectations builds the site
    other = tmp_path / "other"
    (other / "gx" / "gx-data-docs").mkdir(parents=True)
    (other / "gx" / "gx-data-docs" / "index.html").write_text("<html></html>")
    index = render(tmp_path, *history, out="other")
    assert '<a href="gx/gx-data-docs/index.html">GX Data Docs</a>' in index.read_text(encoding="utf-8")


def test_output_is_deterministic_and_stale_pages_go(tmp_path, history):
    metrics, runs, specs = history
    first = render(tmp_path, metrics, runs, specs, out="a")
    shuffled_metrics, shuffled_runs = metrics[:], runs[:]
    random.Random(1).shuffle(shuffled_metrics)
    random.Random(2).shuffle(shuffled_runs)
    second = render(tmp_path, shuffled_metrics, shuffled_runs, specs, out="b")
    for name in ("index.html", "tables/sales.orders.html"):
        assert (first.parent / name).read_bytes() == (second.parent / name).read_bytes()
    render(tmp_path, [], [run("z.other", "r1", T0)], out="a")
    assert sorted(p.name for p in (first.parent / "tables").iterdir()) == ["z.other.html"]


def test_page_names():
    assert table_page_name("db.sales.orders") == "db.sales.orders.html"
    odd = table_page_name("db.we/ird name")
    assert re.fullmatch(r"db\.we_ird_name-[0-9a-f]{8}\.html", odd)
    assert odd != table_page_name("db.we_ird_name")


def test_rows_have_the_columns_of_the_store():
    assert [f.name for f in dataclasses.fields(Measurement)] == [name for name, _, _ in METRICS_FIELDS]
    assert list(Run.model_fields) == [name for name, _, _ in RUNS_FIELDS]  # a frozen model (RunRecord)


def test_the_report_does_not_import_the_compaction():
    code = ("import sys, layout.report; "
            "print(sorted(m for m in sys.modules if m.startswith(('layout.compaction', "
            "'pyspark', 'airflow'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_wrong_schema_is_a_usage_error(tmp_path):
    metrics, runs = arrow([], [])
    with pytest.raises(UsageError, match="missing column.*bytes_selected"):
        render_reports(tmp_path, metrics.drop_columns(["bytes_selected"]), runs)


# --- write_reports on a real catalog ----------------------------------------------------------------------


def test_write_reports_reads_the_catalog(iceberg_catalog, tmp_path, history):
    metrics, runs, specs = history
    assert upsert(iceberg_catalog, PRUNING_METRICS, METRICS_FIELDS, METRICS_KEY, metrics) == len(metrics)
    assert upsert(iceberg_catalog, COMPACTION_RUNS, RUNS_FIELDS, RUNS_KEY, runs) == len(runs)
    index = write_reports(tmp_path / "reports", catalog=iceberg_catalog, specs=specs)
    assert index == tmp_path / "reports" / "index.html"
    html = page(index, "sales.orders")
    assert row_of(table_rows(html, "probes"), "p1")[4:7] == ["24.0 MiB", "3.00 MiB", "\u221288%"]
    assert [r[1] for r in table_rows(html, "runs")] == ["n3", "n2", "n1"]
    # the same pages as rendering the rows directly (apart from the generation time)
    direct = render(tmp_path, metrics, runs, specs, out="direct")
    strip = re.compile(r"generated at [^.<]*|Generated by lakesort at [^.<]*")
    assert strip.sub("", html) == strip.sub("", page(direct, "sales.orders"))


def test_write_reports_defaults(iceberg_catalog, tmp_path, monkeypatch, history):
    """Catalog from the specs' `catalog`, specs from LAKESORT_TABLES_DIR, output in LAKESORT_REPORT_DIR."""
    metrics, runs, _ = history
    upsert(iceberg_catalog, PRUNING_METRICS, METRICS_FIELDS, METRICS_KEY, metrics)
    upsert(iceberg_catalog, COMPACTION_RUNS, RUNS_FIELDS, RUNS_KEY, runs)
    specs_dir = tmp_path / "specs"
    specs_dir.mkdir()
    (specs_dir / "orders.yaml").write_text(
        "table: sales.orders\ncatalog: lakesort\nowner: {name: Sales Data, email: sales@example.com}\n"
        "probes:\n  - {name: p1, where: k = 1}\n  - {name: p3, where: k < 0}\n")
    monkeypatch.setenv("LAKESORT_TABLES_DIR", str(specs_dir))
    monkeypatch.setenv("LAKESORT_REPORT_DIR", str(tmp_path / "env-reports"))
    index = write_reports()
    assert index == tmp_path / "env-reports" / "index.html"
    rows = table_rows(page(index, "sales.orders"), "probes")
    assert [r[0] for r in rows] == ["p1", "p3", "p2"]  # spec order, then probes only in the metrics
    assert row_of(rows, "p3")[4] == "not measured yet"
    assert row_of(rows, "p2")[1:4] == ["owner", "k = 1", "k, v"]  # described by its latest measurement


def test_write_reports_without_table_specs(iceberg_catalog, tmp_path, monkeypatch, caplog, history):
    """LAKESORT_TABLES_DIR not a directory: an error naming it; unset with no dags/tables: a warning, and
    only the tables with metrics are reported."""
    metrics = history[0]
    upsert(iceberg_catalog, PRUNING_METRICS, METRICS_FIELDS, METRICS_KEY, metrics)
    monkeypatch.setenv("LAKESORT_TABLES_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=r"LAKESORT_TABLES_DIR=.*nowhere is not a directory"):
        write_reports(tmp_path / "r", catalog=iceberg_catalog)
    monkeypatch.delenv("LAKESORT_TABLES_DIR")
    assert not (tmp_path / "dags").exists()  # the default, relative to the working directory (tmp_path)
    with caplog.at_level(logging.WARNING, logger="layout.report.render"):
        index = write_reports(tmp_path / "r", catalog=iceberg_catalog)
    assert "no table specs in dags/tables" in caplog.text
    assert sorted(p.name for p in (index.parent / "tables").iterdir()) == ["sales.orders.html"]
    assert (row_of(table_rows(index.read_text(encoding="utf-8"), "tables"), "sales.orders")[6]
            == "no table spec")


def test_write_reports_before_anything_was_recorded(iceberg_catalog, tmp_path):
    index = write_reports(tmp_path / "r", catalog=iceberg_catalog, specs=[spec("a.t")])
    assert "Registered but never measured" in page(index, "a.t")


def test_a_nothing_to_do_run_keeps_the_last_verification(tmp_path):
    runs = [run("t.a", "r1", T0, verification="failed"),
            run("t.a", "r2", T0 + timedelta(days=1), verification="passed"),
            run("t.a", "r3", T0 + timedelta(days=2), status="nothing-to-do", verification="skipped")]
    index = render(tmp_path, [], runs, [spec("t.a")])
    assert row_of(table_rows(index.read_text(encoding="utf-8"), "tables"), "t.a")[3:5] == [
        "nothing-to-do 2025-03-03 02:00 UTC", "passed"]


# --- report v2: efficiency, engine check, clustering health, findings ------------------------------------


def test_findings_are_grouped_errors_first_with_counts_and_examples():
    """83 per-file infos of a run that wrote 83 files read as one line; a warning on 5 files shows 3 example
    places and how many more; errors come first; different observed values are counted."""
    infos = [{"rule": "pages", "severity": "info", "path": f"f{i}.parquet", "row_group": None, "column": None,
              "observed": f"{500 + i} rows per page", "intended": "at most 2000",
              "diagnosis": "for the record"}
             for i in range(83)]
    warnings = [{"rule": "boundary-order", "severity": "warning", "path": f"f{i}.parquet", "row_group": 0,
                 "column": "k", "observed": "UNORDERED", "intended": "ASCENDING",
                 "diagnosis": "pages not sorted"}
                for i in range(5)]
    errors = [{"rule": "column-index", "severity": "error", "path": "f1.parquet", "row_group": 0,
               "column": "c", "observed": "absent", "intended": "present", "diagnosis": "set truncation"}]
    record = Run(**run("t.a", "r1", T0, files_added=83, findings=infos + warnings + errors))
    verification = Verification.of(record)
    groups = verification.groups
    assert [(g.severity, g.rule, g.count, g.files) for g in groups] == [
        ("error", "column-index", 1, 1), ("warning", "boundary-order", 5, 5), ("info", "pages", 83, 83)]
    error, warning, info = groups
    assert warning.examples == ("f0.parquet, row group 0, column k", "f1.parquet, row group 0, column k",
                                "f2.parquet, row group 0, column k") and warning.more_places == 2
    assert (warning.observed, warning.intended) == ("UNORDERED", "ASCENDING")
    assert info.every_file == 83 and warning.every_file is None and error.every_file is None
    assert info.observed == "83 different values, e.g. 500 rows per page"  # the first, in the findings' order
    assert verification.counts == {"error": 1, "warning": 5, "info": 83}
    # the infos of only some of the files written are not "every file"
    partial = Verification.of(Run(**run("t.a", "r2", T0, files_added=90, findings=infos)))
    assert partial.groups[0].every_file is None and len(partial.groups[0].examples) == EXAMPLES
    assert group_findings((), 0) == ()


def test_page_shows_engine_check_clustering_and_grouped_findings(tmp_path):
    t = "sales.orders"
    engine = {"engine_status": "checked", "engine_files": 3, "engine_rows": 100, "engine_model_rows": 100,
              "engine_rows_matching": 7, "engine_ms": 40.0}
    metrics = [
        metric(t, "p1", "before", "n1", T0, 8 * MiB, engine_bytes=8 * MiB,
               engine_model_bytes=8 * MiB, **engine),
        metric(t, "p1", "after", "n1", T0 + timedelta(minutes=5), 2 * MiB, engine_bytes=3 * MiB,
               engine_model_bytes=2 * MiB, **engine),
        metric(t, "p2", "before", "n1", T0, 8 * MiB,
               engine_status="not confirmed: f.parquet stores k as 'key'"),
        metric(t, "p2", "after", "n1", T0 + timedelta(minutes=5), 4 * MiB, engine_status="off"),
    ]
    clustering = [clustered(t, key, f"m={month}", "n1", phase, T0 + timedelta(minutes=5 * (phase == "after")),
                            [4, 4, 4, 4] if phase == "before" else [1, 2, 2] if month == 3 else [1])
                  for key in ("k", "v") for month in range(1, 5) for phase in ("before", "after")]
    findings = [{"rule": "pages", "severity": "info", "path": f"f{i}.parquet", "diagnosis": "for the record",
                 "observed": "ok"} for i in range(4)]
    runs = [run(t, "n1", T0, files_added=4, findings=findings)]
    s = spec(t, [{"name": "p1", "where": "k = 1"}, {"name": "p2", "where": "k = 2"}],
             sort={"keys": [{"column": "v"}, {"column": "k"}]})
    html = page(render(tmp_path, metrics, runs, [s], clustering=clustering), t)
    parse(html)
    probes = table_rows(html, "probes")
    assert row_of(probes, "p1")[9].startswith("differs +50%") and row_of(probes, "p2")[9] == "off"
    assert 'class="flagged"' in html
    engine_rows = table_rows(html, "engine")
    assert ([r[:2] for r in engine_rows]
            == [["p1", "before"], ["p1", "after"], ["p2", "before"], ["p2", "after"]])
    assert engine_rows[1][3:9] == ["2.00 MiB", "3.00 MiB", "100", "100", "7", "differs +50%"]
    assert engine_rows[2][2] == "not confirmed: f.parquet stores k as 'key'" and engine_rows[3][2] == "off"
    # clustering: the spec's key order; the latest (after) summary; the overlapping partition listed
    keys = re.findall(r"<h3>Sort key <code>(\w+)</code></h3>", html)
    assert keys == ["v", "k"]
    assert (
        "Latest (after, 2025-03-01 02:05 UTC): 6 file(s) in 4 partition(s), average depth 1.33, max 2"
        in text(
            ET.fromstring(f"<div>{html[html.index('<h2>Clustering health') : html.index('<h2>Files')]}</div>")
        )
    )
    deepest = [[[text(td) for td in tr] for tr in table.find("tbody")] for table in parse(html).iter("table")
               if table.get("class") == "deepest"]
    assert deepest == [[["m=3", "3", "1.67", "2", "0.67", "1 at depth 1, 2 at depth 2"]]] * 2  # keys v and k
    svgs = re.findall(r"<svg\b.*?</svg>", html, re.DOTALL)
    assert (sum("overlap depth over time" in s for s in svgs) == 2
            and sum("files per overlap depth" in s for s in svgs) == 2)
    # findings: one line for every file the run wrote
    assert table_rows(html, "findings") == [["info", "pages", "\u2013", "for the record", "4", "ok", "\u2013",
                                             "every file this run wrote (4)"]]
    # cards and the index's efficiency and trend line
    index = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    row = row_of(table_rows(index, "tables"), t)
    # both probes' clustered bytes are an eighth of what they read after (12.5%, rounded half to even)
    assert row[1] == "12%" and '<svg class="spark"' in index
    assert "No layout advice yet" in html and TableView("a.t", None, (), ()).advice is None


def test_delete_files_read_before_and_after_only_where_a_probe_read_any(tmp_path, history):
    """A merge-on-read table: the probes table gains the delete files (and bytes) each probe read before and
    after, and a card the snapshot's delete files at the newest measurement; a table whose rows read none
    (zeros, or rows from before the delete columns) shows neither."""
    t = "sales.mor"
    deletes = {"delete_files_total": 6, "delete_bytes_total": 3 * MiB}
    metrics = [
        metric(t, "p1", "before", "n1", T0, 8 * MiB, delete_files_selected=4, delete_bytes_selected=2 * MiB,
               **deletes),
        metric(t, "p1", "after", "n1", T0 + timedelta(minutes=5), 2 * MiB, delete_files_selected=0,
               delete_bytes_selected=0, delete_files_total=0, delete_bytes_total=0),
        metric(t, "p2", "before", "n1", T0, 8 * MiB),  # no pair: the row spans the columns, the new one too
        metric(t, "p3", "on-demand", "m1", T0 + timedelta(days=1), 4 * MiB, delete_files_selected=1,
               delete_bytes_selected=MiB, **deletes),
    ]
    s = spec(t, [{"name": "p1", "where": "k = 1"}, {"name": "p2", "where": "k = 2"},
                 {"name": "p3", "where": "k = 3"}])
    index = render(tmp_path, [*history[0], *metrics], history[1], [*history[2], s])
    html = page(index, t)
    header = [text(th) for table in parse(html).iter("table") if table.get("class") == "probes"
              for th in table.find("thead").iter("th")]
    assert header[10:] == ["Files read", "Delete files read", "Run"]
    probes = table_rows(html, "probes")
    assert row_of(probes, "p1")[10:] == ["5 \u2192 1 of 40", "4 \u2192 0 (2.00 MiB \u2192 0 B)", "n1"]
    assert len(row_of(probes, "p2")) == 5 and 'colspan="9"' in html
    # the newest measurement (p3's, on demand) finds 6 delete files in its snapshot
    assert "Delete files to merge</div><div class=\"value\">6 (3.00 MiB)" in html
    assert "<em>Delete files read</em>" in html
    # the history's table has no delete files in any row (its rows predate the columns: None)
    plain = page(index, "sales.orders")
    assert "Delete files" not in plain and 'colspan="9"' not in plain
    zero = [metric("z.t", "p1", phase, "n1", T0, MiB, delete_files_selected=0, delete_bytes_selected=0,
                   delete_files_total=0, delete_bytes_total=0) for phase in ("before", "after")]
    assert "Delete files" not in page(render(tmp_path, zero, [], [spec("z.t")], out="zero"), "z.t")


# --- the figures' predicates, the last run, the headline's words (issue 55) ------------------------------


def _view(metrics: list[dict], runs: list[dict], specs=()) -> TableView:
    rows = [Measurement(**m) for m in metrics]
    return next(v for v in table_views(rows, [Run(**r) for r in runs], specs) if v.table == "t.x")


def test_each_figure_is_shown_with_the_predicate_it_was_measured_with(tmp_path):
    """A standard probe recorded with an old predicate by the compaction and another on demand (as before
    standard probes were kept per table), and an owner's probe whose `where` the spec changed since: the pair
    keeps its own predicate, the history charts one predicate, the latest row names its own."""
    old, new = "d BETWEEN 1 AND 5", "d BETWEEN 7 AND 9"
    metrics = [metric("t.x", "std_d_10pct", "before", "n1", T0, 40 * MiB, probe_kind="standard",
                      predicate=old),
               metric("t.x", "std_d_10pct", "after", "n1", T0 + timedelta(minutes=5), 8 * MiB,
                      probe_kind="standard", predicate=old),
               metric("t.x", "std_d_10pct", "on-demand", "m1", T0 + timedelta(days=1), 3 * MiB,
                      probe_kind="standard", predicate=new),
               metric("t.x", "p1", "before", "n1", T0, 40 * MiB, predicate="k = 1"),
               metric("t.x", "p1", "after", "n1", T0 + timedelta(minutes=5), 4 * MiB, predicate="k = 1")]
    specs = [spec("t.x", [{"name": "p1", "where": "k = 2"}])]
    view = _view(metrics, [run("t.x", "n1", T0)], specs)
    std = next(p for p in view.probes if p.name == "std_d_10pct")
    assert std.shown_predicate == old and std.latest_predicate_differs and std.other_predicates == 1
    assert {m.predicate for m in std.history} == {old}
    p1 = next(p for p in view.probes if p.name == "p1")
    assert p1.shown_predicate == "k = 1" and p1.spec_predicate_differs
    html = page(render(tmp_path, metrics, [run("t.x", "n1", T0)], specs), "t.x")
    rows = table_rows(html, "probes")
    cell = row_of(rows, "p1")[2]  # the predicate, then a line of its own about the spec's
    assert cell.startswith("k = 1") and cell.endswith("the spec now says k = 2: measured next time")
    assert row_of(rows, "std_d_10pct")[2] == old and row_of(rows, "std_d_10pct")[5] == "8.00 MiB"
    details = [r for r in table_rows(html, "details") if r[0].startswith("std_d_10pct")]
    assert details[0][0] == f"std_d_10pctmeasured with {new}" and details[0][6].startswith("3.00 MiB")
    assert "Not drawn: 1 measurement(s) of an earlier predicate." in html


def test_a_dry_run_never_stands_for_the_last_run(tmp_path):
    runs = [run("t.x", "n1", T0), run("t.x", "dry", T0 + timedelta(days=1), status="dry-run",
                                       verification="skipped", files_after=0, bytes_after=0)]
    view = _view([], runs)
    assert view.last_run.run_id == "n1" and view.current_files.files == 12
    index = render(tmp_path, [], runs, [spec("t.x")])
    assert row_of(table_rows(index.read_text(), "tables"), "t.x")[3].startswith("committed")
    cards = {text(c[0]): text(c[1]) for c in parse(page(index, "t.x")).iter("div")
             if c.get("class") == "card"}
    assert cards["Last run"].startswith("committed") and cards["Data files"] == "12"


def _advice(action: str, vs_current: float) -> Advice:
    rec = Recommendation(action=action, strategy="zorder", label="z-order(k, d)", total_bytes=1.0,
                         vs_current=vs_current, write_bytes=1, write_change=None, reason="r",
                         spec_snippet="sort: ...")
    return Advice(run_id="a1", table="t.x", advised_at=T0, sample_rows=1, table_rows=1, seed=0, probes=(),
                  candidates=(), recommendation=rec)


@pytest.mark.parametrize(("case", "grade", "step"), [
    ("good", "good", "Nothing to do"),
    ("poor", "poor", "See whether another sort order would read less"),
    ("change-spec", "poor", "Change the table's sort to z-order(k, d): the advisor predicts it reads 20%"),
    ("keep-spec", "poor", "Compact it with its own sort: the advisor predicts 50%"),
    ("dropped", "fair", "New data has diluted the layout (efficiency 50.0% after the last compaction, 20.0%"),
    ("failed", "good", "The last compaction failed"),
    ("never", None, "Measure it"),
])
def test_the_headline_says_what_the_efficiency_means_and_the_next_step(case, grade, step):
    clustered = {"good": 0.6, "poor": 0.05, "change-spec": 0.05, "keep-spec": 0.05, "dropped": 0.5,
                 "failed": 0.6}.get(case)
    metrics = [] if clustered is None else [
        metric("t.x", "p1", "before", "n1", T0, 10 * MiB, bytes_clustered=MiB),
        metric("t.x", "p1", "after", "n1", T0 + timedelta(minutes=5), 10 * MiB,
               bytes_clustered=int(clustered * 10 * MiB))]
    if case == "dropped":
        metrics.append(metric("t.x", "p1", "on-demand", "m1", T0 + timedelta(days=2), 10 * MiB,
                              bytes_clustered=2 * MiB))
    runs = [run("t.x", "n1", T0, status="failed" if case == "failed" else "committed")]
    view = _view(metrics, runs)
    if case in ("change-spec", "keep-spec"):
        view = dataclasses.replace(view, advice=_advice(case, 0.2 if case == "change-spec" else 0.5))
    said = verdict(view)
    assert said.grade == grade and said.step.startswith(step), said
    if grade is not None:
        assert said.meaning.startswith("readers fetch about ") and f"({grade}: " in said.meaning
