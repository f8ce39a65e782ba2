"""Static HTML reports for data owners: one page per table and an index across tables.

    render_reports(out_dir, metrics, runs, specs, maintenance=..., clustering=...)   # pure rendering
    write_reports()                                 # load them from the catalog, render, return index.html

Input is exactly `layout.metrics.store`'s tables (`pruning_metrics`, `compaction_runs` and, optionally,
`maintenance_runs` and `clustering_metrics`) as pyarrow tables, plus the table specs (owner, probes).
Output goes to `<out_dir>/index.html` and
`<out_dir>/tables/<namespace.name>.html`: UTF-8 HTML5 that is also well-formed XML, with inline CSS and
inline SVG charts (`layout.report.charts`), no scripts and nothing fetched, so the pages read the same
offline, from a file share or attached to a mail. Output is deterministic for the same input and
`generated_at`.

The pages are jinja2 templates (`templates/`, autoescaped, an undefined name an error) over the values of
`layout.report.views`. The index: every table with its owner, last run, verification, headline, its owners'
probes' efficiency now and a sparkline of it over time. A table page: a headline (the newest run with `before`
and `after` rows; its probe whose bytes read changed most; what the efficiency means and the next step,
`layout.report.verdict`); what would help (the layout advisor's last advice, which the DAGs' last task keeps
recent: `layout.advise.schedule`); per probe, before vs after (bytes read, change, efficiency against a
perfectly clustered table, bytes wasted within the pages read, DataFusion's check, and on a merge-on-read
table the delete files read); per probe, bytes read and efficiency over time (small multiples); DataFusion's
bytes and rows next to lakesort's, probes more than 20% apart flagged; clustering health per sort key (overlap
depth over time, the depth histogram, the deepest partitions); files and average file size; storage over time
(bytes under the table location vs live data) and the last maintenance runs; the latest verification with its
findings grouped (`layout.report.findings`); the last runs, newest first; the latest measurement per probe.

GX Data Docs are linked when `<out_dir>/gx/index.html` (or GX's own site folder under it,
`gx/gx-data-docs/index.html`, where `layout.verify.expectations` builds it) exists.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from layout.advise import Advice, last_advice
from layout.catalog import load_catalog
from layout.errors import ConfigError
from layout.metrics.engine import TOLERANCE
from layout.registry import catalog_names, default_catalog
from layout.report import figures
from layout.report.formats import (
    DASH,
    format_count,
    format_duration,
    format_moment,
    format_percent,
    format_signed,
)
from layout.report.rows import (
    ClusteringRow,
    MaintenanceRun,
    Measurement,
    Run,
    read_clustering_rows,
    read_maintenance_rows,
    read_rows,
    typed_rows,
    utc,
)
from layout.report.verdict import verdict
from layout.report.views import TableView, table_views
from layout.settings import settings, variables
from layout.sizes import format_size
from layout.spec import load_specs

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

    from layout.spec import TableSpec

__all__ = ["environment", "render_reports", "table_page_name", "write_reports"]

log = logging.getLogger(__name__)

_GX_PAGES = ("gx/index.html", "gx/gx-data-docs/index.html")  # ours, then layout.verify.expectations' site
# The badge of a status (and of a finding's severity); others are "warn".
_STATUS_CLASS = {"committed": "ok", "passed": "ok", "done": "ok", "failed": "bad", "nothing-to-do": "muted",
                 "dry-run": "muted", "skipped": "muted", "deferred": "warn", "error": "bad", "info": "muted"}
_SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+")


def table_page_name(table: str) -> str:
    """`tables/<namespace.name>.html`, with a hash suffix when the name needs characters replaced."""
    if _SAFE_NAME.fullmatch(table) and not table.startswith("."):
        return f"{table}.html"
    digest = hashlib.sha256(table.encode()).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9._-]', '_', table).lstrip('.')}-{digest}.html"


def css_string(text: str) -> Markup:
    """`text` as a CSS string literal, safe in a <style> element of a page that is also XML: quotes and
    backslashes escaped, and `<`, `>` and `&` as CSS escapes (a <style> is raw text in HTML, so an entity
    would show as written)."""
    escaped = "".join(f"\\{ord(c):x} " if c in '<>&"\\' else c for c in text)
    return Markup(f'"{escaped}"')


@functools.cache
def environment() -> Environment:
    """The templates of `layout/report/templates`, every `{{ }}` HTML-escaped; an undefined name fails."""
    env = Environment(loader=PackageLoader("layout.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      keep_trailing_newline=True)
    env.filters.update(count=format_count, css_string=css_string, duration=format_duration,
                       moment=format_moment, percent=format_percent, size=format_size,
                       page_name=table_page_name, signed=format_signed)
    env.globals.update(DASH=DASH, STATUS_CLASS=_STATUS_CLASS, figures=figures, TOLERANCE=TOLERANCE,
                       verdict=verdict)
    return env


def _gx_page(out_dir: Path) -> str | None:
    """The GX Data Docs page under `out_dir`, when built."""
    return next((relative for relative in _GX_PAGES if (out_dir / relative).is_file()), None)


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)  # a reader (or a web server) never sees half a page


def _render(out_dir: Path, views: Sequence[TableView], generated: datetime) -> Path:
    """Write the pages of `views` and the index; remove the pages of tables no longer known."""
    env, gx = environment(), _gx_page(out_dir)
    pages = out_dir / "tables"
    pages.mkdir(parents=True, exist_ok=True)
    written = {table_page_name(view.table): view for view in views}
    table_page = env.get_template("table.html.j2")
    for name, view in written.items():
        _write(pages / name, table_page.render(view=view, up="../", gx=gx, generated=generated))
    for stale in sorted(pages.glob("*.html")):
        if stale.name not in written:
            stale.unlink()
    index = out_dir / "index.html"
    _write(index, env.get_template("index.html.j2").render(views=views, up="", gx=gx, generated=generated))
    return index


def render_reports(out_dir: Path, metrics: pa.Table, runs: pa.Table, specs: Sequence[TableSpec] = (), *,
                   maintenance: pa.Table | None = None, clustering: pa.Table | None = None,
                   generated_at: datetime | None = None) -> Path:
    """Write <out_dir>/index.html and one <out_dir>/tables/<namespace.name>.html per table (tables from
    specs ∪ metrics ∪ runs ∪ maintenance runs ∪ clustering rows); return the index path. Pages of tables
    no longer known are removed."""
    generated = utc(generated_at) or datetime.now(UTC)
    views = table_views(typed_rows(metrics, Measurement, "pruning metrics"),
                        typed_rows(runs, Run, "compaction runs"), specs,
                        typed_rows(maintenance, MaintenanceRun, "maintenance runs"),
                        typed_rows(clustering, ClusteringRow, "clustering metrics"))
    return _render(Path(out_dir), views, generated)


def _last_advice(catalogs: Sequence[Catalog], table: str) -> Advice | None:
    """The newest advice recorded for `table` in any of the catalogs (`lakesort advise`)."""
    found = [a for a in (last_advice(catalog, table) for catalog in catalogs) if a is not None]
    return max(found, key=lambda a: a.advised_at) if found else None


def _configured_catalogs() -> list[str]:
    """The catalogs the registry configures tables in beyond the specs' (`registry.catalog_names`: tables
    configured by properties, a namespace default or their own sort order live there too); none when the
    registry or pyiceberg's configuration cannot be read (the report goes on with the specs' catalogs)."""
    if not settings().tables_dir.is_dir():
        return []
    try:
        return catalog_names()
    except Exception as exc:  # noqa: BLE001 - the report still gets written
        log.warning("the registry's catalogs could not be listed (%s): reporting the specs' catalogs", exc)
        return []


def _default_specs() -> list[TableSpec]:
    """The specs in $LAKESORT_TABLES_DIR (an error when that is not a directory), else in its default
    (a warning when missing: the report then shows only the tables that have metrics)."""
    config = settings()
    directory = config.tables_dir
    if not directory.is_dir():
        if "tables_dir" in config.model_fields_set:
            raise ConfigError(f"no table specs: {variables()['tables_dir']}={directory} is not a directory")
        log.warning("no table specs in %s: reporting only the tables that have metrics", directory)
        return []
    return load_specs(directory)


def write_reports(out_dir: Path | None = None, *, catalog: Catalog | None = None,
                  specs: Sequence[TableSpec] | None = None) -> Path:
    """Load metrics and runs from `catalog` (default: each catalog the specs name), render, return the index.

    `out_dir` defaults to $LAKESORT_REPORT_DIR or `.lakesort/reports`; `specs` to the specs in
    $LAKESORT_TABLES_DIR or `dags/tables`."""
    out_dir = Path(out_dir or settings().report_dir)
    specs = list(_default_specs() if specs is None else specs)
    if catalog is not None:
        catalogs = [catalog]
    else:  # None (pyiceberg's default catalog) when no spec names one
        names: Sequence[str | None] = sorted({spec.catalog for spec in specs},
                                             key=lambda n: (n is not None, n or ""))
        configured = _configured_catalogs()
        if configured:  # every configured source's (a namespace default's too), the default one by its name
            names = sorted({spec.catalog or default_catalog() for spec in specs} | set(configured))
        catalogs = [load_catalog(name) for name in names or [None]]
    measurements, runs = read_rows(catalogs)
    views = table_views(measurements, runs, specs, read_maintenance_rows(catalogs),
                        read_clustering_rows(catalogs))
    views = [dataclasses.replace(view, advice=_last_advice(catalogs, view.table)) for view in views]
    index = _render(out_dir, views, datetime.now(UTC))
    log.info("wrote the lakesort report: %s", index)
    return index
