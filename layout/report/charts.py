"""The report's charts, hand-written SVG: a line chart over time, a horizontal grouped bar chart, a sparkline.

No plotting library and nothing fetched: each chart is one `<svg>` element, well-formed XML (it parses
with `xml.etree`), returned as `markupsafe.Markup` because every text in it (titles, legend, labels,
tooltips) is escaped here, so the templates inline it as it is. Colors come from one fixed palette in
series order, so the same input always gives the same bytes. Every point and bar carries a `<title>` (a
hover tooltip in browsers) with its exact value.

No two texts of a chart overlap, whatever the data: labels are laid out with measured widths
(`layout.report.svg.text_width`), axes keep only the ticks that fit (`layout.report.axes`), legends wrap,
and bar rows are taller than a line of text. Charts are at most 360 px wide, so that on a 400 px
screen they show at their own size (text at 11 px) and side by side on a wide one; a line of more
than MAX_CIRCLES points marks only its last.

    line_chart([Series("bytes read", [(t0, 1e6), (t1, 2e5)])], title="...", y_format=format_size)
    bar_chart(["probe_a"], [("before", [1e6]), ("after", [2e5])], title="...", y_format=format_size)
    sparkline([0.2, 0.5, 0.9], title="...")
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from markupsafe import Markup

from layout.report.axes import nice_ticks, time_ticks, value_ticks
from layout.report.formats import format_moment
from layout.report.svg import (
    AXIS,
    GRID,
    PALETTE,
    TEXT,
    attr,
    close,
    coord,
    legend,
    legend_height,
    open_svg,
    text_width,
    truncate,
)

__all__ = ["PALETTE", "Series", "bar_chart", "line_chart", "nice_ticks", "sparkline"]

BAR = 11  # bar thickness; bars are BAR_ROW apart, more than a line of text, so their labels never touch
BAR_ROW = 16
MAX_LABEL = 150  # pixels a bar chart's category labels take at most (longer ones are cut with an ellipsis)
MAX_CIRCLES = 60  # points a line marks with a dot (and a tooltip); beyond, only its last point


@dataclass(frozen=True)
class Series:
    """One line: `points` are (x, y); x is seconds since the epoch when the chart has a time axis."""

    name: str
    points: Sequence[tuple[float, float]]
    dashed: bool = False


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    y_format: Callable[[float], str],
    x_format: Callable[[float], str] | None = None,
    y_unit: float = 1.0,
    y_max: float | None = None,
    width: int = 340,
    height: int = 190,
    klass: str = "line-chart",
) -> Markup:
    """Lines over a time axis (x in epoch seconds); y from 0. Empty series are left out of the plot
    but keep their color and legend entry, so a series keeps its color across charts."""
    points = [p for s in series for p in s.points if math.isfinite(p[1])]
    x_format = x_format or (lambda x: format_moment(datetime.fromtimestamp(x, UTC)))
    top = 10 + legend_height([s.name for s in series], width - 20) + 8
    bottom = 26
    ticks = value_ticks(max(max((p[1] for p in points), default=0.0), y_max or 0.0), height - top - bottom,
                        unit=y_unit)
    y_hi = ticks[-1] or 1.0
    left = 12 + max(text_width(y_format(t)) for t in ticks)
    right = 14
    plot_w, plot_h = width - left - right, height - top - bottom
    out = open_svg(width, height, title, klass)
    out += legend([(s.name, s.dashed) for s in series], 10, 10 + 12, width - 20)
    if not points:
        out.append(f'<text x="{coord(width / 2)}" y="{coord(top + plot_h / 2)}" text-anchor="middle" '
                   f'fill="{AXIS}">no data yet</text>')
        return Markup(close(out))
    x_lo, x_hi = min(p[0] for p in points), max(p[0] for p in points)

    def sx(x: float) -> float:
        return left + (plot_w / 2 if x_hi == x_lo else (x - x_lo) / (x_hi - x_lo) * plot_w)

    def sy(y: float) -> float:
        return top + plot_h - (y / y_hi) * plot_h

    for tick in ticks:
        y = sy(tick)
        out.append(f'<line x1="{coord(left)}" y1="{coord(y)}" x2="{coord(left + plot_w)}" y2="{coord(y)}" '
                   f'stroke="{GRID}"/>')
        out.append(f'<text x="{coord(left - 6)}" y="{coord(y + 4)}" text-anchor="end" fill="{AXIS}">'
                   f"{attr(y_format(tick))}</text>")
    out.append(f'<line x1="{coord(left)}" y1="{coord(top + plot_h)}" x2="{coord(left + plot_w)}" '
               f'y2="{coord(top + plot_h)}" stroke="{AXIS}"/>')
    out.append(f'<line x1="{coord(left)}" y1="{coord(top)}" x2="{coord(left)}" y2="{coord(top + plot_h)}" '
               f'stroke="{AXIS}"/>')
    for x, label, anchor in time_ticks(x_lo, x_hi, plot_w):
        out.append(f'<line x1="{coord(left + x)}" y1="{coord(top + plot_h)}" x2="{coord(left + x)}" '
                   f'y2="{coord(top + plot_h + 4)}" stroke="{AXIS}"/>')
        out.append(f'<text x="{coord(left + x)}" y="{coord(top + plot_h + 17)}" text-anchor="{anchor}" '
                   f'fill="{AXIS}">{attr(label)}</text>')
    for index, line in enumerate(series):
        color = PALETTE[index % len(PALETTE)]
        pts = sorted(p for p in line.points if math.isfinite(p[1]))
        if not pts:
            continue
        dash = ' stroke-dasharray="5 4"' if line.dashed else ""
        if len(pts) > 1:
            coords = " ".join(f"{coord(sx(x))},{coord(sy(y))}" for x, y in pts)
            out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"'
                       f'{dash} stroke-linejoin="round"/>')
        for x, y in pts if len(pts) <= MAX_CIRCLES else pts[-1:]:
            out.append(f'<circle cx="{coord(sx(x))}" cy="{coord(sy(y))}" r="3" fill="{color}">'
                       f"<title>{attr(f'{line.name}: {y_format(y)} at {x_format(x)}')}</title></circle>")
    return Markup(close(out))


def bar_chart(
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    title: str,
    y_format: Callable[[float], str],
    y_unit: float = 1.0,
    width: int = 360,
    klass: str = "bar-chart",
) -> Markup:
    """Horizontal grouped bars: one group per category (label on the left), one bar per series, the
    value printed at the bar's end; None is a missing bar ("not measured")."""
    names = [name for name, _ in series]
    values = [v for _, vs in series for v in vs if v is not None and math.isfinite(v)]
    top = 10 + legend_height(names, width - 20) + 8
    # The value labels sit after their bars: the widest of them (or "not measured") fits on the right.
    missing = [name for name, vs in series
               if len(vs) < len(categories) or any(v is None or not math.isfinite(v) for v in vs)]
    right = 10 + max([text_width(y_format(v)) for v in values]
                     + [text_width(f"{n}: not measured") for n in missing] + [0.0])
    # The category labels get what the bars (at least 40 px) and their values leave, up to MAX_LABEL: a narrow
    # chart cuts them shorter rather than drawing past its right edge.
    shown = [truncate(c, max(min(MAX_LABEL, width - right - 40 - 12), 12.0)) for c in categories]
    left = 12 + max((text_width(c) for c in shown), default=0.0)
    group_h = BAR_ROW * max(len(series), 1) + 8
    bottom = top + group_h * max(len(categories), 1)
    height = int(bottom + 26)
    plot_w = max(width - left - right, 40.0)
    ticks = value_ticks(max(values, default=0.0), plot_w, unit=y_unit, across=True, fmt=y_format)
    x_hi = ticks[-1] or 1.0
    out = open_svg(width, height, title, klass)
    out += legend([(n, False) for n in names], 10, 10 + 12, width - 20)
    for tick in ticks:
        x = left + tick / x_hi * plot_w
        out.append(f'<line x1="{coord(x)}" y1="{coord(top)}" x2="{coord(x)}" '
                   f'y2="{coord(bottom)}" stroke="{GRID}"/>')
        out.append(f'<text x="{coord(x)}" y="{coord(bottom + 16)}" text-anchor="middle" fill="{AXIS}">'
                   f"{attr(y_format(tick))}</text>")
    out.append(f'<line x1="{coord(left)}" y1="{coord(top)}" x2="{coord(left)}" '
               f'y2="{coord(bottom)}" stroke="{AXIS}"/>')
    if not categories:
        out.append(f'<text x="{coord(width / 2)}" y="{coord(top + group_h / 2)}" text-anchor="middle" '
                   f'fill="{AXIS}">no data yet</text>')
    for row, category in enumerate(categories):
        y0 = top + row * group_h + 4
        middle = y0 + BAR_ROW * len(series) / 2
        out.append(f'<text x="{coord(left - 6)}" y="{coord(middle + 4)}" text-anchor="end" '
                   f'fill="{TEXT}"><title>{attr(category)}</title>{attr(shown[row])}</text>')
        for index, (name, vs) in enumerate(series):
            value = vs[row] if row < len(vs) else None
            y = y0 + index * BAR_ROW
            if value is None or not math.isfinite(value):
                out.append(f'<text x="{coord(left + 4)}" y="{coord(y + BAR - 1)}" fill="{AXIS}">'
                           f"{attr(name)}: not measured</text>")
                continue
            w = max(value / x_hi * plot_w, 1.0 if value > 0 else 0.0)
            color = PALETTE[index % len(PALETTE)]
            tip = attr(f"{category}, {name}: {y_format(value)}")
            out.append(f'<rect x="{coord(left)}" y="{coord(y)}" width="{coord(w)}" height="{BAR}" '
                       f'fill="{color}"><title>{tip}</title></rect>')
            out.append(f'<text x="{coord(left + w + 4)}" y="{coord(y + BAR - 1)}" fill="{TEXT}">'
                       f"{attr(y_format(value))}</text>")
    return Markup(close(out))


def sparkline(values: Sequence[float], *, title: str, y_max: float = 1.0, width: int = 120,
              height: int = 28) -> Markup:
    """A trend line without axes or text (the tooltip says what it is): values evenly spaced, 0 to `y_max`
    bottom to top, the last point marked."""
    out = [f'<svg class="spark" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
           f"<title>{attr(title)}</title>"]
    pts = [v for v in values if math.isfinite(v)]
    if pts:
        top = y_max or 1.0

        def sx(i: int) -> float:
            return 3 + (width - 6) * (i / (len(pts) - 1) if len(pts) > 1 else 0.5)

        def sy(v: float) -> float:
            return height - 3 - (height - 6) * min(max(v / top, 0.0), 1.0)

        out.append(f'<line x1="0" y1="{height - 3}" x2="{width}" y2="{height - 3}" stroke="{GRID}"/>')
        if len(pts) > 1:
            coords = " ".join(f"{coord(sx(i))},{coord(sy(v))}" for i, v in enumerate(pts))
            out.append(f'<polyline points="{coords}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.5"/>')
        out.append(f'<circle cx="{coord(sx(len(pts) - 1))}" cy="{coord(sy(pts[-1]))}" '
                   f'r="2.5" fill="{PALETTE[0]}"/>')
    return Markup(close(out))
