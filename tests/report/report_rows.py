"""Synthetic rows of the report's tables (the real schemas: pruning_metrics, compaction_runs,
clustering_metrics, maintenance_runs), rendering them, and reading the pages back; shared by the report's
tests in this folder (the `history` fixture is conftest.py's).
"""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa

from layout.metrics.maintenance import MaintenanceRecord
from layout.metrics.store import CLUSTERING_FIELDS, METRICS_FIELDS, RUNS_FIELDS, arrow_schema
from layout.report.render import render_reports, table_page_name
from layout.spec import parse_spec

T0 = datetime(2025, 3, 1, 2, 0, tzinfo=UTC)
GENERATED = datetime(2025, 4, 1, 12, 0, tzinfo=UTC)
MiB = 1 << 20
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


# --- synthetic rows -----------------------------------------------------------------------------------


def metric(table: str, probe: str, phase: str, run_id: str, at: datetime, selected: int, *,
           ideal: int | None = None, total: int = 64 * MiB, efficiency: float | None = None,
           **extra) -> dict:
    """One pruning_metrics row; figures not given are plausible and consistent."""
    ideal = selected // 4 if ideal is None else ideal
    clustered = extra.pop("bytes_clustered", ideal // 2)
    row = {
        "run_id": run_id, "phase": phase, "table": table, "snapshot_id": 7, "measured_at": at, "probe": probe,
        "probe_kind": "owner", "predicate": "k = 1", "columns": "", "files_total": 40,
        "files_selected": max(1, 40 * selected // total), "row_groups_total": 80, "row_groups_selected": 9,
        "pages_total": 4000, "pages_selected": 310, "pages_ideal": 120, "rows_total": 1_000_000,
        "rows_selected": 100_000, "rows_matching": 5_000, "bytes_total": total, "bytes_selected": selected,
        "bytes_ideal": ideal, "efficiency": efficiency if efficiency is not None else ideal / selected,
        "plan_cold_ms": 12.5, "plan_warm_ms": 1.25, "ideal_method": "exact", "pages_clustered": 10,
        "bytes_clustered": clustered,
        "efficiency_clustered": min(1.0, clustered / selected) if selected else 1.0,
    }
    return {**row, **extra}


def run(table: str, run_id: str, at: datetime, *, status: str = "committed", verification: str = "passed",
        findings: list[dict] | None = None, **extra) -> dict:
    """One compaction_runs row."""
    row = {
        "run_id": run_id, "table": table, "status": status, "trigger": "nightly", "started_at": at,
        "duration_s": 300.0, "snapshot_before": 1, "snapshot_after": 2, "partitions_rewritten": 3,
        "groups": 2,
        "files_before": 120, "files_after": 12, "files_removed": 110, "files_added": 2,
        "bytes_before": 96 * MiB, "bytes_after": 90 * MiB, "bytes_rewritten": 80 * MiB,
        "rows_rewritten": 1_000_000, "verification": verification, "findings": json.dumps(findings or []),
        "error": None,
    }
    return {**row, **extra}


def arrow(metrics: list[dict], runs: list[dict]) -> tuple[pa.Table, pa.Table]:
    return (pa.Table.from_pylist(metrics, schema=arrow_schema(METRICS_FIELDS)),
            pa.Table.from_pylist(runs, schema=arrow_schema(RUNS_FIELDS)))


def spec(table: str, probes: list[dict] | None = None, owner: str = "Sales Data", **extra):
    probes = probes if probes is not None else [{"name": "p1", "where": "k = 1"}]
    return parse_spec({"table": table, "owner": {"name": owner, "email": "sales-data@example.com"},
                       "probes": probes, **extra})


def clustered(table: str, key: str, partition: str, run_id: str, phase: str, at: datetime,
              depths: list[int]) -> dict:
    """One clustering_metrics row: a partition whose files have these overlap depths."""
    histogram: dict[str, int] = {}
    for d in depths:
        histogram[str(d)] = histogram.get(str(d), 0) + 1
    return {"run_id": run_id, "phase": phase, "table": table, "snapshot_id": 7, "measured_at": at,
            "sort_key": key, "partition_path": partition, "files": len(depths), "files_unbounded": 0,
            "constant_files": 0, "average_overlaps": sum(d - 1 for d in depths) / len(depths),
            "average_depth": sum(depths) / len(depths), "max_depth": max(depths),
            "depth_histogram": json.dumps(histogram), "rows": 1000, "bytes": 4 * MiB}


def maintained(table: str, run_id: str, at: datetime, *, status: str = "done", before: int, after: int,
               live: int, **extra) -> dict:
    """One maintenance_runs row."""
    row = MaintenanceRecord(run_id=run_id, table=table, status=status, trigger="nightly", started_at=at,
                            duration_s=60.0, snapshots_before=9, snapshots_expired=4, snapshots_after=5,
                            data_files=3, data_bytes=before - after, files_before=40, files_after=37,
                            bytes_before=before, bytes_after=after, live_bytes=live)
    return {**dataclasses.asdict(row), **extra}


# --- rendering, and reading the pages back ------------------------------------------------------------


def render(tmp_path: Path, metrics: list[dict], runs: list[dict], specs=(), out: str = "out",
           clustering: list[dict] | None = None) -> Path:
    table = pa.Table.from_pylist(clustering, schema=arrow_schema(CLUSTERING_FIELDS)) if clustering else None
    return render_reports(tmp_path / out, *arrow(metrics, runs), specs, clustering=table,
                          generated_at=GENERATED)


def page(index: Path, table: str) -> str:
    return (index.parent / "tables" / table_page_name(table)).read_text(encoding="utf-8")


def parse(html: str) -> ET.Element:
    """The page as XML (the report writes well-formed XHTML-compatible HTML5)."""
    assert html.startswith("<!DOCTYPE html>\n")
    return ET.fromstring(html.removeprefix("<!DOCTYPE html>\n"))


def text(element: ET.Element) -> str:
    return " ".join("".join(element.itertext()).split())


def table_rows(html: str, klass: str) -> list[list[str]]:
    """Body rows of the <table class=klass> as cell texts."""
    tables = [t for t in parse(html).iter("table") if t.get("class") == klass]
    assert len(tables) == 1, f"expected one table.{klass}"
    return [[text(td) for td in tr] for tr in tables[0].find("tbody")]


def row_of(rows: list[list[str]], first: str) -> list[str]:
    found = [r for r in rows if r[0] == first]
    assert len(found) == 1, f"no single row {first!r} in {rows}"
    return found[0]


class Balance(HTMLParser):
    """Checks with the HTML parser too that every non-void element is closed in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.svg_count = 0

    def handle_starttag(self, tag, attrs):
        self.svg_count += tag == "svg"
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.svg_count += tag == "svg"

    def handle_endtag(self, tag):
        open_tag = self.stack[-1] if self.stack else None
        assert open_tag == tag, f"</{tag}> closes <{open_tag}>"
        self.stack.pop()
