"""HTML reports for data owners: how each table's layout serves the queries its owners run.

The package owns the reports end to end: `rows` (the metrics tables of `layout.metrics.store` as
typed rows), `views` (what a page shows per table and probe, from the rows and the table specs), with
`findings` (verification findings grouped for reading), `health` (clustering health per sort key over
time) and `trend` (a table's headline efficiency over time), `templates/` (the pages: jinja2,
autoescaped), `svg`, `axes`, `charts` and `figures` (inline SVG charts whose labels never overlap),
`formats` (how numbers and moments read) and `render` (the template environment and writing the pages;
`write_reports` is the entry point of the CLI and the DAGs).

It may import `layout.metrics` (its store and record types), `layout.read` and the ground floor
(`layout.errors`, `layout.settings`, `layout.sizes`, `layout.models`, `layout.catalog`, `layout.spec`); never
`layout.compaction`, and never Spark or Airflow: a report is rendered wherever the metrics can be read.
"""

from layout.report.render import write_reports

__all__ = ["write_reports"]
