"""The charts of the pages, drawn from their views: which series each shows, in which unit and size.

The templates call these (as `figures.<name>(view, ...)`) and inline the SVG they return as it is:
`layout.report.charts` escapes every text it draws. A chart shows a few series at most: what varies per
probe or per sort key is drawn as small multiples (one small chart each, the same axes and colours),
never as one chart of many lines.
"""

from __future__ import annotations

from markupsafe import Markup

from layout.report.charts import Series, bar_chart, line_chart, sparkline
from layout.report.formats import format_percent
from layout.report.health import KeyHealth
from layout.report.views import ProbeView, TableView
from layout.sizes import byte_unit, format_size

__all__ = ["SMALL", "before_after", "data_files", "depth_histogram", "depth_over_time", "file_size",
           "probe_bytes", "probe_efficiency", "storage", "trend"]

SMALL = (340, 190)  # a small multiple: three side by side in a 1080 px page, one a row on a 400 px screen


def _over_time(probe: ProbeView, column: str) -> list[tuple[float, float]]:
    """(epoch seconds, the measurement's `column`) along the probe's history, where it was recorded."""
    return [(row.measured_at.timestamp(), float(value)) for row in probe.history
            if (value := getattr(row, column)) is not None]


def before_after(view: TableView, caption: str) -> Markup:
    """Bytes read per probe with a before and an after: one bar each."""
    paired = view.paired
    bars = [("before", [p.pair[0].bytes_selected for p in paired]),
            ("after", [p.pair[1].bytes_selected for p in paired])]
    return bar_chart([p.name for p in paired], bars, y_format=format_size, klass="bar-chart before-after",
                     title=f"{view.table}: {caption}",
                     y_unit=byte_unit(max(max(values) for _, values in bars)))


def probe_bytes(view: TableView, probe: ProbeView) -> Markup:
    """A probe's bytes read over time, and what a perfectly clustered table would read (dashed)."""
    return line_chart(
        [Series("bytes read", _over_time(probe, "bytes_selected")),
         Series("perfectly clustered", _over_time(probe, "bytes_clustered"), dashed=True)],
        title=f"{view.table}, probe {probe.name}: bytes read over time", y_format=format_size,
        y_unit=byte_unit(max(row.bytes_selected for row in probe.history)), width=SMALL[0], height=SMALL[1],
        klass="line-chart probe-history")


def probe_efficiency(view: TableView, probe: ProbeView) -> Markup:
    """A probe's efficiency over time: against a perfectly clustered table, and within the selected pages
    (dashed: the share of the bytes read in pages that hold a matching row)."""
    return line_chart(
        [Series("vs perfectly clustered", _over_time(probe, "efficiency_clustered")),
         Series("within pages read", _over_time(probe, "efficiency"), dashed=True)],
        title=f"{view.table}, probe {probe.name}: efficiency over time", y_format=format_percent, y_max=1.0,
        width=SMALL[0], height=SMALL[1], klass="line-chart efficiency")


def data_files(view: TableView) -> Markup:
    """Data files before the first run, then after each committed run."""
    counts = [(point.moment.timestamp(), float(point.files)) for point in view.file_points]
    return line_chart([Series("data files", counts)], title=f"{view.table}: data files over time",
                      y_format=lambda v: f"{v:,.0f}", width=SMALL[0], height=SMALL[1],
                      klass="line-chart files")


def file_size(view: TableView) -> Markup:
    """Average data file size at the same moments (where there are files)."""
    sizes = [(point.moment.timestamp(), point.bytes / point.files) for point in view.file_points
             if point.files > 0]
    return line_chart([Series("average file size", sizes)],
                      title=f"{view.table}: average file size over time", y_format=format_size,
                      y_unit=byte_unit(max((s for _, s in sizes), default=0.0)), width=SMALL[0],
                      height=SMALL[1], klass="line-chart file-size")


def storage(view: TableView) -> Markup:
    """Bytes under the table location and the live data, at each maintenance run (its start, and a real
    run's end): the gap is history and orphans that maintenance keeps or has yet to delete."""
    points = view.storage_points
    return line_chart(
        [Series("under the table location", [(p.moment.timestamp(), float(p.total)) for p in points]),
         Series("live data", [(p.moment.timestamp(), float(p.live)) for p in points], dashed=True)],
        title=f"{view.table}: storage over time (total vs live)", y_format=format_size,
        y_unit=byte_unit(max((p.total for p in points), default=0)), width=SMALL[0], height=SMALL[1],
        klass="line-chart storage")


def depth_over_time(view: TableView, key: KeyHealth) -> Markup:
    """A sort key's average and largest overlap depth at each measurement (1: no file overlaps another)."""
    return line_chart(
        [Series("average depth", [(p.moment.timestamp(), p.summary.average_depth) for p in key.points]),
         Series("max depth", [(p.moment.timestamp(), float(p.summary.max_depth)) for p in key.points],
                dashed=True)],
        title=f"{view.table}, sort key {key.sort_key}: overlap depth over time", y_format=lambda v: f"{v:g}",
        y_max=1.0, width=SMALL[0], height=SMALL[1], klass="line-chart depth")


def depth_histogram(view: TableView, key: KeyHealth) -> Markup:
    """Files per depth bucket at the latest measurement, next to the one before it."""
    latest, previous = key.latest, key.previous
    buckets = sorted({b for b, _ in latest.summary.histogram} | {b for b, _ in previous.summary.histogram}
                     if previous else {b for b, _ in latest.summary.histogram})
    series = [(f"{point.phase}, {point.moment:%m-%d %H:%M}", [float(dict(point.summary.histogram).get(b, 0))
                                                             for b in buckets])
              for point in (previous, latest) if point is not None]
    return bar_chart([f"depth {b}" for b in buckets], series, y_format=lambda v: f"{v:,.0f}", width=SMALL[0],
                     title=f"{view.table}, sort key {key.sort_key}: files per overlap depth",
                     klass="bar-chart depth-histogram")


def trend(view: TableView) -> Markup:
    """The index's sparkline: the table's headline efficiency at each measurement."""
    points = view.trend
    last = format_percent(points[-1].efficiency) if points else "none yet"
    return sparkline([p.efficiency for p in points],
                     title=f"{view.table}: efficiency of the owners' probes over {len(points)} "
                           f"measurement(s), now {last}")
