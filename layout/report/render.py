"""Static HTML reports for data owners: one page per table and an index across tables.

    render_reports(out_dir, metrics, runs, specs)   # pure rendering from the two metrics tables
    write_reports()                                 # load them from the catalog, render, return index.html

Input is exactly `layout.metrics.store`'s two tables (`pruning_metrics`, `compaction_runs`) as pyarrow
tables, plus the table specs (owner, probes). Output goes to `<out_dir>/index.html` and
`<out_dir>/tables/<namespace.name>.html`: UTF-8 HTML5 that is also well-formed XML, with inline CSS and
inline SVG charts (`layout.report.charts`), no scripts and nothing fetched, so the pages read the same
offline, from a file share or attached to a mail. Output is deterministic for the same input and
`generated_at`.

A table page: a headline (the newest run with `before` and `after` rows; its probe whose bytes read
changed most); per probe, before vs after from the latest run with both phases for it (bytes read,
change, efficiency = bytes_ideal / bytes_selected); over time, bytes_selected of the first `before` row
then of every `after` and `on-demand` row by measured_at; files and average file size from
files_before/bytes_before of the first run, then files_after/bytes_after of each committed run; the
latest verification with its findings; the last runs, newest first; the latest measurement per probe.

GX Data Docs are linked when `<out_dir>/gx/index.html` (or GX's own site folder under it,
`gx/gx-data-docs/index.html`, where `layout.verify.expectations` builds it) exists.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layout.errors import ConfigError, UsageError
from layout.report.charts import (
    DASH,
    STYLESHEET,
    Series,
    bar_chart,
    byte_unit,
    format_bytes,
    format_duration,
    format_percent,
    line_chart,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

    from layout.spec import TableSpec

__all__ = ["render_reports", "table_page_name", "write_reports"]

log = logging.getLogger(__name__)

LAST_RUNS = 20
_GX_PAGES = ("gx/index.html", "gx/gx-data-docs/index.html")  # ours, then layout.verify.expectations' site
_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
_STATUS_CLASS = {"committed": "ok", "passed": "ok", "failed": "bad", "nothing-to-do": "muted",
                 "dry-run": "muted", "skipped": "muted"}
_SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+")


def _count(n: int | None) -> str:
    return DASH if n is None else f"{n:,}"


def _when(moment: datetime | None) -> str:
    return DASH if moment is None else moment.strftime("%Y-%m-%d %H:%M UTC")


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _change_phrase(change: float | None) -> str:
    if change is None:
        return "cannot be compared (nothing was read before)"
    if change < 0:
        return f"reads {format_percent(-change)} fewer bytes"
    if change > 0:
        return f"reads {format_percent(change)} more bytes"
    return "reads the same bytes"


def _change_cell(change: float | None) -> str:
    if change is None:
        return '<td class="num muted">\u2013</td>'
    klass = "good" if change < 0 else "worse" if change > 0 else "muted"
    sign = "\u2212" if change < 0 else "+" if change > 0 else "\u00b1"
    return f'<td class="num {klass}">{sign}{format_percent(abs(change))}</td>'


def _badge(status: str | None) -> str:
    if not status:
        return '<span class="badge">none</span>'
    return f'<span class="badge {_STATUS_CLASS.get(status, "warn")}">{_e(status)}</span>'


# --- the data ----------------------------------------------------------------------------------------


def _utc(value: Any) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _rows(table: pa.Table | None, fields: Sequence[tuple[str, str, bool]], what: str) -> list[dict[str, Any]]:
    """The table as dicts with UTC datetimes; missing columns are a UsageError naming them."""
    if table is None:
        return []
    names = [name for name, _, _ in fields]
    missing = [name for name in names if name not in table.column_names]
    if missing:
        raise UsageError(f"{what}: missing column(s) {', '.join(missing)}; expected the schema of "
                         "layout.metrics.store")
    rows = table.select(names).to_pylist()
    for row in rows:
        for name, kind, _ in fields:
            if kind == "timestamptz":
                row[name] = _utc(row[name])
    return rows


def _findings(text: str | None) -> tuple[list[dict[str, Any]], str | None]:
    """Parsed findings, sorted by severity, rule and place; or ([], the raw text) when not a JSON list."""
    if not text or not text.strip():
        return [], None
    try:
        data = json.loads(text)
    except ValueError:
        return [], text
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        return [], text

    def key(f: dict[str, Any]) -> tuple:
        group = f.get("row_group") if isinstance(f.get("row_group"), int) else -1
        text = [str(f.get(k) or "") for k in ("rule", "path", "column", "diagnosis")]
        return _SEVERITY_ORDER.get(str(f.get("severity")), 3), text[:2], group, text[2:]

    return sorted(data, key=key), None


@dataclass
class ProbeView:
    name: str
    kind: str
    predicate: str | None
    columns: str | None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    latest: dict[str, Any] | None = None

    @property
    def change(self) -> float | None:
        """Relative change of bytes read, before to after (negative = fewer); None: nothing to compare."""
        if self.before is None or self.after is None or self.before["bytes_selected"] <= 0:
            return None
        return (self.after["bytes_selected"] - self.before["bytes_selected"]) / self.before["bytes_selected"]


@dataclass
class TableView:
    table: str
    spec: TableSpec | None
    probes: list[ProbeView]
    runs: list[dict[str, Any]]  # by started_at, oldest first

    @property
    def last_run(self) -> dict[str, Any] | None:
        return self.runs[-1] if self.runs else None

    @property
    def last_verification(self) -> str:
        """The latest run that verified anything (a nothing-to-do run verifies nothing, so it does not
        hide the state of the files a previous run wrote)."""
        verified = [r for r in self.runs if r["verification"] in ("passed", "failed")]
        return _badge(verified[-1]["verification"]) if verified else DASH

    @property
    def measured(self) -> bool:
        return any(p.latest is not None for p in self.probes)

    def last_pair(self) -> tuple[str, datetime, list[ProbeView]] | None:
        """The run of the newest before/after pair and the probes measured in it."""
        paired = [p for p in self.probes if p.after is not None]
        if not paired:
            return None
        newest = max(paired, key=lambda p: (p.after["measured_at"], p.after["run_id"]))
        run_id = newest.after["run_id"]
        return run_id, newest.after["measured_at"], [p for p in paired if p.after["run_id"] == run_id]

    def file_points(self) -> list[tuple[datetime, int, int]]:
        """(moment, files, bytes): before the first run, then after each committed run."""
        if not self.runs:
            return []
        first = self.runs[0]
        points = [(first["started_at"], first["files_before"], first["bytes_before"])]
        for run in self.runs:
            if run["status"] == "committed":
                end = run["started_at"] + timedelta(seconds=run["duration_s"] or 0.0)
                points.append((end, run["files_after"], run["bytes_after"]))
        return points

    def current_files(self) -> tuple[int, int | None] | None:
        """(files, average file size) as the last run left the table."""
        run = self.last_run
        if run is None:
            return None
        files, size = ((run["files_after"], run["bytes_after"]) if run["status"] == "committed"
                       else (run["files_before"], run["bytes_before"]))
        return files, size // files if files else None


def _probe_views(spec: TableSpec | None, rows: list[dict[str, Any]]) -> list[ProbeView]:
    views: dict[str, ProbeView] = {}
    for probe in spec.probes if spec is not None else ():
        columns = ", ".join(probe.columns) if probe.columns else None
        views[probe.name] = ProbeView(probe.name, "owner", probe.where, columns)
    by_probe: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_probe.setdefault(row["probe"], []).append(row)
    extra = []
    for name, measured in by_probe.items():
        measured.sort(key=lambda r: (r["measured_at"], r["run_id"], r["phase"]))
        latest = measured[-1]
        view = views.get(name)
        if view is None:
            columns = ", ".join(c.strip() for c in latest["columns"].split(",") if c.strip()) or None
            view = ProbeView(name, latest["probe_kind"], latest["predicate"], columns)
            extra.append(view)
        view.latest = latest
        phases: dict[str, dict[str, dict[str, Any]]] = {}
        for row in measured:
            phases.setdefault(row["run_id"], {})[row["phase"]] = row
        pairs = [(ph["after"], ph["before"]) for ph in phases.values() if "before" in ph and "after" in ph]
        if pairs:
            view.after, view.before = max(pairs, key=lambda pair: (pair[0]["measured_at"], pair[0]["run_id"]))
        befores = [r for r in measured if r["phase"] == "before"]
        view.history = befores[:1] + [r for r in measured if r["phase"] in ("after", "on-demand")]
    extra.sort(key=lambda v: (v.kind != "owner", v.name))
    return list(views.values()) + extra


def _table_views(metrics: list[dict], runs: list[dict], specs: Sequence[TableSpec]) -> list[TableView]:
    by_spec = {spec.table: spec for spec in specs}
    names = sorted(set(by_spec) | {r["table"] for r in metrics} | {r["table"] for r in runs})
    runs = sorted(runs, key=lambda r: (r["started_at"], r["run_id"]))
    return [TableView(name, by_spec.get(name),
                      _probe_views(by_spec.get(name), [r for r in metrics if r["table"] == name]),
                      [r for r in runs if r["table"] == name]) for name in names]


def table_page_name(table: str) -> str:
    """`tables/<namespace.name>.html`, with a hash suffix when the name needs characters replaced."""
    if _SAFE_NAME.fullmatch(table) and not table.startswith("."):
        return f"{table}.html"
    digest = hashlib.sha256(table.encode()).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9._-]', '_', table).lstrip('.')}-{digest}.html"


# --- pages -------------------------------------------------------------------------------------------


def _page(title: str, body: list[str]) -> str:
    # Well-formed XML as well as HTML5 (void elements self-closed), so tests can parse it strictly.
    head = ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8"/>\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1"/>\n'
            '<meta name="generator" content="lakesort"/>\n<link rel="icon" href="data:,"/>\n'
            f"<title>{_e(title)}</title>\n<style>{STYLESHEET}</style>\n</head>\n<body>")
    return "\n".join([head, *body, "</body>", "</html>", ""])


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = (),
           klass: str = "") -> str:
    """`rows` are already-rendered cells (`<td>` added unless a cell starts with `<td`)."""
    head = "".join(f'<th class="num">{_e(h)}</th>' if i in numeric else f"<th>{_e(h)}</th>"
                   for i, h in enumerate(headers))
    out = ['<div class="scroll">', f'<table class="{klass}">' if klass else "<table>",
           f"<thead><tr>{head}</tr></thead>", "<tbody>"]
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            if cell.startswith("<td"):
                cells.append(cell)
            else:
                cells.append(f'<td class="num">{cell}</td>' if i in numeric else f"<td>{cell}</td>")
        out.append(f"<tr>{''.join(cells)}</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def _figure(caption: str, svg: str) -> str:
    return f"<figure><figcaption>{_e(caption)}</figcaption>\n{svg}\n</figure>"


def _gx_link(out_dir: Path, from_dir: str) -> str:
    for relative in _GX_PAGES:
        if (out_dir / relative).is_file():
            return f'<a href="{_e(from_dir + relative)}">GX Data Docs</a> (Great Expectations results)'
    return "no Data Docs yet (they are built when a compaction is verified with Great Expectations)"


def _best(probes: Sequence[ProbeView]) -> ProbeView | None:
    """The probe whose bytes read fell most (or rose least), the owners' own probes first (they are the
    queries the owners run); None when none can be compared."""
    comparable = [p for p in probes if p.change is not None]
    owners = [p for p in comparable if p.kind == "owner"]
    return min(owners or comparable, key=lambda p: (p.change, p.name), default=None)


def _headline(view: TableView) -> str:
    pair = view.last_pair()
    if pair is None:
        if view.measured:
            return "Measured, but no compaction with a before and an after measurement yet."
        return "Not measured yet: probes are measured before and after each compaction."
    run_id, moment, probes = pair
    text = f"After the last compaction (run <code>{_e(run_id)}</code>, {_when(moment)}), "
    best = _best(probes)
    if best is None:
        return text + "no probe read any bytes before, so there is nothing to compare."
    before, after = (format_bytes(r["bytes_selected"]) for r in (best.before, best.after))
    text += f"probe <strong>{_e(best.name)}</strong> {_change_phrase(best.change)} ({before} \u2192 {after})."
    if len(probes) > 1:
        fewer, more = (sum(1 for p in probes if p.change is not None and test(p.change))
                       for test in (lambda c: c < 0, lambda c: c > 0))
        text += f" Of {len(probes)} probes measured then, {fewer} read fewer bytes and {more} read more."
    return text


def _owner(spec: TableSpec | None) -> str:
    if spec is None:
        return '<span class="muted">no table spec</span>'
    return f'{_e(spec.owner.name)} (<a href="mailto:{_e(spec.owner.email)}">{_e(spec.owner.email)}</a>)'


def _probes_section(view: TableView) -> list[str]:
    out = ["<h2>Probes: bytes read before vs after</h2>", (
        '<p class="note">Each probe is a query the owners run. <em>Bytes read</em> is what a '
        "page-index-aware reader fetches for it; <em>ideal</em> is what it would fetch reading only pages "
        "that hold matching rows; <em>efficiency</em> = ideal / read (100% is perfect). Before and after "
        "come from the latest compaction that measured the probe both ways.</p>")]
    if not view.probes:
        return [*out, ('<p class="empty">This table has no probes: add <code>probes</code> to its table spec '
                "to have them measured.</p>")]
    if not view.measured:
        out.append('<p class="empty">Registered but never measured: no pruning metrics are recorded for this '
                   "table yet. Probes are measured before and after each compaction.</p>")
    paired = [p for p in view.probes if p.after is not None]
    if paired:
        bars = [("before", [p.before["bytes_selected"] for p in paired]),
                ("after", [p.after["bytes_selected"] for p in paired])]
        caption = "Bytes read per probe, before and after the latest compaction"
        out.append(_figure(caption, bar_chart(
            [p.name for p in paired], bars, y_format=format_bytes, klass="bar-chart before-after",
            title=f"{view.table}: {caption}", y_unit=byte_unit(max(max(values) for _, values in bars)))))
    rows = []
    for p in view.probes:
        row = [f"<strong>{_e(p.name)}</strong>", _e(p.kind), f"<code>{_e(p.predicate)}</code>" if p.predicate
               else DASH, _e(p.columns) if p.columns else '<span class="muted">all</span>']
        if p.before is None or p.after is None:
            state = "not measured yet" if p.latest is None else "no before/after pair yet"
            rows.append([*row, f'<td colspan="6" class="muted">{state}</td>'])
            continue
        before, after = p.before, p.after
        rows.append([*row, format_bytes(before["bytes_selected"]), format_bytes(after["bytes_selected"]),
                     _change_cell(p.change),
                     f"{format_percent(before['efficiency'])} \u2192 {format_percent(after['efficiency'])}",
                     (f"{_count(before['files_selected'])} \u2192 {_count(after['files_selected'])}"
                     f" of {_count(after['files_total'])}"), f"<code>{_e(after['run_id'])}</code>"])
    out.append(_table(["Probe", "Kind", "Predicate", "Columns", "Bytes read before", "Bytes read after",
                       "Change", "Efficiency", "Files read", "Run"], rows, numeric=(4, 5, 6, 7, 8),
                      klass="probes"))
    return out


def _history_section(view: TableView) -> list[str]:
    measured = [p for p in view.probes if p.history]
    if not measured:
        return []
    out = ["<h2>Pruning over time</h2>", (
        '<p class="note">Bytes read at the first measurement before any compaction, then after each '
        "compaction and at each on-demand measurement; the dashed line is the ideal.</p>"),
        '<div class="charts">']

    def points(p: ProbeView, column: str) -> list[tuple[float, float]]:
        return [(r["measured_at"].timestamp(), r[column]) for r in p.history]

    for p in measured:
        out.append(_figure(f"Probe {p.name}: bytes read", line_chart(
            [Series("bytes read", points(p, "bytes_selected")),
             Series("ideal", points(p, "bytes_ideal"), dashed=True)],
            title=f"{view.table}, probe {p.name}: bytes read over time", y_format=format_bytes,
            y_unit=byte_unit(max(r["bytes_selected"] for r in p.history)), width=500, height=220,
            klass="line-chart probe-history")))
    out.append(_figure("Pruning efficiency (ideal / read), all probes", line_chart(
        [Series(p.name, points(p, "efficiency")) for p in measured], y_format=format_percent, y_max=1.0,
        title=f"{view.table}: pruning efficiency over time (ideal / read)", width=500, height=220,
        klass="line-chart efficiency")))
    return [*out, "</div>"]


def _files_section(view: TableView) -> list[str]:
    points = view.file_points()
    if not points:
        return ["<h2>Files</h2>", '<p class="empty">No compaction runs yet, so no file counts recorded.</p>']
    counts = [(m.timestamp(), float(files)) for m, files, _ in points]
    sizes = [(m.timestamp(), size / files) for m, files, size in points if files > 0]
    return ["<h2>Files</h2>", '<p class="note">Before the first run, then after each committed run.</p>',
            '<div class="charts">',
            _figure("Data files", line_chart(
                [Series("data files", counts)], title=f"{view.table}: data files over time",
                y_format=lambda v: f"{v:,.0f}", width=500, height=200, klass="line-chart files")),
            _figure("Average file size", line_chart(
                [Series("average file size", sizes)], title=f"{view.table}: average file size over time",
                y_format=format_bytes, y_unit=byte_unit(max((s for _, s in sizes), default=0.0)),
                width=500, height=200, klass="line-chart file-size")), "</div>"]


def _findings_table(findings: list[dict[str, Any]]) -> str:
    rows = []
    for f in findings:
        where = [str(f["path"]) if f.get("path") else "",
                 f"row group {f['row_group']}" if f.get("row_group") is not None else "",
                 f"column {f['column']}" if f.get("column") else ""]
        rows.append([_badge(str(f.get("severity") or "")), f"<code>{_e(f.get('rule') or '')}</code>",
                     _e(", ".join(w for w in where if w) or DASH),
                     *(_e(f.get(k) or "") for k in ("observed", "intended", "diagnosis"))])
    return _table(["Severity", "Rule", "Where", "Observed", "Intended", "Diagnosis"], rows, klass="findings")


def _verification_section(view: TableView) -> list[str]:
    out = ["<h2>Verification</h2>"]
    verified = [r for r in view.runs if r["verification"] in ("passed", "failed")]
    if not verified:
        return [*out, ('<p class="empty">No verified compaction yet: the rewritten files of each compaction '
                "are verified before they are committed.</p>")]
    latest = verified[-1]
    findings, raw = _findings(latest["findings"])
    out.append(f"<p>Latest verification: {_badge(latest['verification'])} in run <code>{_e(latest['run_id'])}"
               f"</code> ({_when(latest['started_at'])}), {len(findings)} finding(s).</p>")
    out.append(_findings_table(findings) if findings else "<p>No findings.</p>")
    if raw is not None:
        out.append(f'<p class="muted">Findings not readable as JSON: <code>{_e(raw)}</code></p>')
    shown = {r["run_id"] for r in view.runs[-LAST_RUNS:]}
    earlier = [r for r in reversed(verified[:-1]) if r["verification"] == "failed" and r["run_id"] in shown]
    out += ["<h3>Earlier failed verifications</h3>"] if earlier else []
    for run in earlier:
        found, raw = _findings(run["findings"])
        out += [(f"<details><summary>run <code>{_e(run['run_id'])}</code>, {_when(run['started_at'])}: "
                f"{len(found)} finding(s)</summary>"),
                _findings_table(found) if found else f"<p>{_e(raw or 'no findings recorded')}</p>",
                "</details>"]
    return out


def _runs_section(view: TableView) -> list[str]:
    if not view.runs:
        return ["<h2>Latest runs</h2>", '<p class="empty">No compaction runs yet.</p>']
    rows = []
    for run in view.runs[::-1][:LAST_RUNS]:
        error = run["error"] or ""
        short = error if len(error) <= 160 else error[:159] + "\u2026"
        rows.append([_when(run["started_at"]), f"<code>{_e(run['run_id'])}</code>", _e(run["trigger"]),
                     _badge(run["status"]), format_duration(run["duration_s"]),
                     f"{_count(run['files_before'])} \u2192 {_count(run['files_after'])}",
                     f"{format_bytes(run['bytes_before'])} \u2192 {format_bytes(run['bytes_after'])}",
                     format_bytes(run["bytes_rewritten"]), _count(run["rows_rewritten"]),
                     _badge(run["verification"]),
                     f'<span title="{_e(error)}">{_e(short)}</span>' if error else ""])
    out = ["<h2>Latest runs</h2>", _table(
        ["Started", "Run", "Trigger", "Status", "Duration", "Files", "Bytes", "Rewritten", "Rows rewritten",
         "Verification", "Error"], rows, numeric=(4, 5, 6, 7, 8), klass="runs")]
    if len(view.runs) > LAST_RUNS:
        out.append(f'<p class="muted">{len(view.runs) - LAST_RUNS} older run(s) not shown.</p>')
    return out


def _details_section(view: TableView) -> list[str]:
    rows = []
    for p in view.probes:
        if (r := p.latest) is None:
            continue

        def of(name: str, r: dict[str, Any] = r) -> str:
            return f"{_count(r[name + '_selected'])} / {_count(r[name + '_total'])}"

        rows.append([f"<strong>{_e(p.name)}</strong>", f"{_e(r['phase'])}, {_when(r['measured_at'])}",
                     of("files"), of("row_groups"), f"{of('pages')} (ideal {_count(r['pages_ideal'])})",
                     f"{of('rows')} ({_count(r['rows_matching'])} match)",
                     f"{format_bytes(r['bytes_selected'])} / {format_bytes(r['bytes_total'])}",
                     format_percent(r["efficiency"]), f"{r['plan_cold_ms']:.1f} / {r['plan_warm_ms']:.1f}"])
    if not rows:
        return []
    return ["<h2>Latest measurement per probe</h2>", (
        '<p class="note">Selected / total as a reader plans the probe now; planning time in '
        "milliseconds with a cold and a warm metadata cache.</p>"), _table(
        ["Probe", "Measured", "Files", "Row groups", "Pages", "Rows", "Bytes", "Efficiency",
         "Plan ms (cold / warm)"], rows, numeric=(2, 3, 4, 5, 6, 7, 8), klass="details")]


def _footer(out_dir: Path, up: str, generated: datetime) -> list[str]:
    return ["</main>", f"<footer><p>{_gx_link(out_dir, up)}</p>",
            f"<p>Generated by lakesort at {_when(generated)}.</p></footer>"]


def _table_page(view: TableView, out_dir: Path, generated: datetime) -> str:
    spec, run, current = view.spec, view.last_run, view.current_files()
    catalog = f" \u00b7 catalog <code>{_e(spec.catalog)}</code>" if spec and spec.catalog else ""
    cards = [("Last run", f"{_badge(run['status'])} {_when(run['started_at'])}" if run else "no runs yet"),
             ("Verification", view.last_verification),
             ("Data files", _count(current[0]) if current else DASH),
             ("Average file size", format_bytes(current[1]) if current else DASH),
             ("Probes", f"{sum(1 for p in view.probes if p.latest)} of {len(view.probes)} measured")]
    body = ["<header>", '<p><a href="../index.html">\u2190 all tables</a></p>', f"<h1>{_e(view.table)}</h1>",
            f"<p>Owner: {_owner(spec)}{catalog}</p>", "</header>", "<main>",
            f'<p class="headline">{_headline(view)}</p>', '<div class="cards">',
            *(f'<div class="card"><div class="label">{label}</div><div class="value">{value}</div></div>'
              for label, value in cards), "</div>"]
    for section in (_probes_section, _history_section, _files_section, _verification_section, _runs_section,
                    _details_section):
        body += section(view)
    return _page(f"{view.table} \u2013 lakesort report", body + _footer(out_dir, "../", generated))


def _index_page(views: list[TableView], out_dir: Path, generated: datetime) -> str:
    body = ["<header>", "<h1>lakesort: table layout reports</h1>",
            f'<p class="muted">{len(views)} table(s), generated at {_when(generated)}.</p>', "</header>",
            "<main>"]
    rows = []
    for view in views:
        run, pair, current = view.last_run, view.last_pair(), view.current_files()
        best = _best(pair[2]) if pair else None
        if best is not None:
            change = f"<td>{_e(best.name)} {_change_phrase(best.change)}</td>"
        else:
            state = "nothing to compare" if pair else "never measured" if not view.measured else "no pair yet"
            change = f'<td class="muted">{state}</td>'
        link = f'<a href="tables/{_e(table_page_name(view.table))}">{_e(view.table)}</a>'
        rows.append([link, _owner(view.spec),
                     f"{_badge(run['status'])} {_when(run['started_at'])}" if run else "no runs yet",
                     view.last_verification, change,
                     _count(current[0]) if current else DASH, format_bytes(current[1]) if current else DASH])
    if rows:
        body.append(_table(["Table", "Owner", "Last run", "Verification", "After the last compaction",
                            "Data files", "Average file size"], rows, numeric=(5, 6), klass="tables"))
    else:
        body.append('<p class="empty">No tables yet: add a table spec under <code>dags/tables/</code>, '
                    "or run a compaction to record metrics.</p>")
    return _page("lakesort: table layout reports", body + _footer(out_dir, "", generated))


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)  # a reader (or a web server) never sees half a page


def render_reports(out_dir: Path, metrics: pa.Table, runs: pa.Table, specs: Sequence[TableSpec] = (), *,
                   generated_at: datetime | None = None) -> Path:
    """Write <out_dir>/index.html and one <out_dir>/tables/<namespace.name>.html per table (tables from
    specs ∪ metrics ∪ runs); return the index path. Pages of tables no longer known are removed."""
    from layout.metrics.store import METRICS_FIELDS, RUNS_FIELDS

    out_dir = Path(out_dir)
    generated = _utc(generated_at) or datetime.now(UTC)
    views = _table_views(_rows(metrics, METRICS_FIELDS, "pruning metrics"),
                         _rows(runs, RUNS_FIELDS, "compaction runs"), specs)
    pages = out_dir / "tables"
    pages.mkdir(parents=True, exist_ok=True)
    written = {table_page_name(view.table): view for view in views}
    for name, view in written.items():
        _write(pages / name, _table_page(view, out_dir, generated))
    for stale in sorted(pages.glob("*.html")):
        if stale.name not in written:
            stale.unlink()
    index = out_dir / "index.html"
    _write(index, _index_page(views, out_dir, generated))
    return index


def _default_specs() -> list[TableSpec]:
    from layout.compaction.driver import TABLES_DIR
    from layout.spec import load_specs

    configured = os.environ.get("LAKESORT_TABLES_DIR")
    directory = Path(configured or TABLES_DIR)
    if not directory.is_dir():
        if configured:
            raise ConfigError(f"no table specs: LAKESORT_TABLES_DIR={directory} is not a directory")
        log.warning("no table specs in %s: reporting only the tables that have metrics", directory)
        return []
    return load_specs(directory)


def write_reports(out_dir: Path | None = None, *, catalog: Catalog | None = None,
                  specs: Sequence[TableSpec] | None = None) -> Path:
    """Load metrics and runs from `catalog` (default: each catalog the specs name), render, return the index.

    `out_dir` defaults to $LAKESORT_REPORT_DIR or `.lakesort/reports`; `specs` to the specs in
    $LAKESORT_TABLES_DIR or `dags/tables`."""
    import pyarrow as pa

    from layout.catalog import load_catalog
    from layout.compaction.driver import report_dir
    from layout.metrics import store

    out_dir = Path(out_dir or report_dir())
    specs = list(_default_specs() if specs is None else specs)
    if catalog is not None:
        catalogs = [catalog]
    else:  # None (pyiceberg's default catalog) when no spec names one
        names = sorted({spec.catalog for spec in specs}, key=lambda n: (n is not None, n or ""))
        catalogs = [load_catalog(name) for name in names or [None]]
    tables = {}
    for identifier, fields in ((store.PRUNING_METRICS, store.METRICS_FIELDS),
                               (store.COMPACTION_RUNS, store.RUNS_FIELDS)):
        rows = [row for cat in catalogs
                for row in _rows(store.read(cat, identifier, fields), fields, identifier)]
        tables[identifier] = pa.Table.from_pylist(rows, schema=store.arrow_schema(fields))
    index = render_reports(out_dir, tables[store.PRUNING_METRICS], tables[store.COMPACTION_RUNS], specs)
    log.info("wrote the lakesort report: %s", index)
    return index
