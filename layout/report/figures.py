"""The charts of a table page, drawn from its view: which series each shows, in which unit and size.

The templates call these (as `figures.<name>(view, ...)`) and inline the SVG they return as it is:
`layout.report.charts` escapes every text it draws.
"""

from __future__ import annotations

from markupsafe import Markup

from layout.report.charts import Series, bar_chart, line_chart
from layout.report.formats import format_percent
from layout.report.views import ProbeView, TableView
from layout.sizes import byte_unit, format_size

__all__ = ["before_after", "data_files", "efficiency", "file_size", "probe_bytes", "storage"]


def _over_time(probe: ProbeView, column: str) -> list[tuple[float, float]]:
    """(epoch seconds, the measurement's `column`) along the probe's history."""
    return [(row.measured_at.timestamp(), getattr(row, column)) for row in probe.history]


def before_after(view: TableView, caption: str) -> Markup:
    """Bytes read per probe with a before and an after: one bar each."""
    paired = view.paired
    bars = [("before", [p.before.bytes_selected for p in paired]),
            ("after", [p.after.bytes_selected for p in paired])]
    return bar_chart([p.name for p in paired], bars, y_format=format_size, klass="bar-chart before-after",
                     title=f"{view.table}: {caption}",
                     y_unit=byte_unit(max(max(values) for _, values in bars)))


def probe_bytes(view: TableView, probe: ProbeView) -> Markup:
    """A probe's bytes read over time, with the ideal dashed."""
    return line_chart(
        [Series("bytes read", _over_time(probe, "bytes_selected")),
         Series("ideal", _over_time(probe, "bytes_ideal"), dashed=True)],
        title=f"{view.table}, probe {probe.name}: bytes read over time", y_format=format_size,
        y_unit=byte_unit(max(row.bytes_selected for row in probe.history)), width=500, height=220,
        klass="line-chart probe-history")


def efficiency(view: TableView) -> Markup:
    """Pruning efficiency (ideal / read) over time, a line per probe with a history."""
    return line_chart(
        [Series(p.name, _over_time(p, "efficiency")) for p in view.with_history], y_format=format_percent,
        y_max=1.0, title=f"{view.table}: pruning efficiency over time (ideal / read)", width=500, height=220,
        klass="line-chart efficiency")


def data_files(view: TableView) -> Markup:
    """Data files before the first run, then after each committed run."""
    counts = [(point.moment.timestamp(), float(point.files)) for point in view.file_points]
    return line_chart([Series("data files", counts)], title=f"{view.table}: data files over time",
                      y_format=lambda v: f"{v:,.0f}", width=500, height=200, klass="line-chart files")


def file_size(view: TableView) -> Markup:
    """Average data file size at the same moments (where there are files)."""
    sizes = [(point.moment.timestamp(), point.bytes / point.files) for point in view.file_points
             if point.files > 0]
    return line_chart([Series("average file size", sizes)], title=f"{view.table}: average file size over time",
                      y_format=format_size, y_unit=byte_unit(max((s for _, s in sizes), default=0.0)),
                      width=500, height=200, klass="line-chart file-size")


def storage(view: TableView) -> Markup:
    """Bytes under the table location and the live data, at each maintenance run (its start, and a real
    run's end): the gap is history and orphans that maintenance keeps or has yet to delete."""
    points = view.storage_points
    return line_chart(
        [Series("under the table location", [(p.moment.timestamp(), float(p.total)) for p in points]),
         Series("live data", [(p.moment.timestamp(), float(p.live)) for p in points], dashed=True)],
        title=f"{view.table}: storage over time (total vs live)", y_format=format_size,
        y_unit=byte_unit(max((p.total for p in points), default=0)), width=500, height=220,
        klass="line-chart storage")
