"""The report's charts, hand-written SVG: a line chart over time and a horizontal grouped bar chart.

No plotting library and nothing fetched: each chart is one `<svg>` element, well-formed XML (it parses
with `xml.etree`), returned as `markupsafe.Markup` because every text in it (titles, legend, labels,
tooltips) is escaped here, so the templates inline it as it is. Colors come from one fixed palette in
series order, so the same input always gives the same bytes. Every point and bar carries a `<title>` (a
hover tooltip in browsers) with its exact value.

    line_chart([Series("bytes read", [(t0, 1e6), (t1, 2e5)])], title="...", y_format=format_size)
    bar_chart(["probe_a"], [("before", [1e6]), ("after", [2e5])], title="...", y_format=format_size)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

from markupsafe import Markup

from layout.report.formats import format_moment

__all__ = ["PALETTE", "Series", "bar_chart", "line_chart", "nice_ticks", "time_ticks"]

# Colorblind-safe (Okabe-Ito), in the order series get them.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000")
_AXIS, _GRID, _TEXT = "#555555", "#e3e3e3", "#222222"
_CHAR_W = 6.6  # average glyph width of the 11px sans-serif labels, for layout estimates
_FONT = 'font-family="system-ui, sans-serif" font-size="11"'


@dataclass(frozen=True)
class Series:
    """One line: `points` are (x, y); x is seconds since the epoch when the chart has a time axis."""

    name: str
    points: Sequence[tuple[float, float]]
    dashed: bool = False


def _a(value: object) -> str:
    """An attribute or text value, escaped for XML and HTML alike: what makes a chart `Markup`."""
    return escape(str(value), quote=True)


def _n(value: float) -> str:
    """A coordinate with at most one decimal, without trailing zeros (short and deterministic)."""
    return f"{value:.1f}".removesuffix(".0")


def nice_ticks(high: float, *, count: int = 5, unit: float = 1.0) -> list[float]:
    """Ticks from 0 to at least `high` at a 1/2/2.5/5 x 10^k step (in multiples of `unit`)."""
    if not math.isfinite(high) or high <= 0:
        return [0.0, unit]
    raw = high / unit / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw) * unit
    ticks = [0.0]
    while ticks[-1] < high * (1 - 1e-9):
        ticks.append(round(ticks[-1] + step, 9))
    return ticks


def time_ticks(low: float, high: float, *, count: int = 5) -> list[tuple[float, str]]:
    """Evenly spaced ticks over [low, high] (epoch seconds) with UTC labels; one tick when the span is 0."""
    if high <= low:
        return [(low, _time_label(low, 0))]
    span = high - low
    ticks = [(low + span * i / (count - 1), "") for i in range(count)]
    labels: list[tuple[float, str]] = []
    for x, _ in ticks:
        label = _time_label(x, span)
        if not labels or labels[-1][1] != label:
            labels.append((x, label))
    return labels


def _time_label(x: float, span: float) -> str:
    moment = datetime.fromtimestamp(x, UTC)
    if span >= 2 * 86400:
        return moment.strftime("%Y-%m-%d")
    return moment.strftime("%m-%d %H:%M")


def _open(width: int, height: int, title: str, klass: str) -> list[str]:
    return [
        (f'<svg class="chart {klass}" role="img" width="{width}" height="{height}" '
         f'viewBox="0 0 {width} {height}" {_FONT}>'),
        f"<title>{_a(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]


def _legend(names: Sequence[tuple[str, bool]], x: float, y: float, width: float) -> list[str]:
    """Swatches and names in rows from (x, y), wrapping at `width`."""
    out: list[str] = []
    cx, cy = x, y
    for index, (name, dashed) in enumerate(names):
        item = 22 + len(name) * _CHAR_W + 14
        if cx > x and cx + item > x + width:
            cx, cy = x, cy + 16
        color = PALETTE[index % len(PALETTE)]
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        out.append(f'<line x1="{_n(cx)}" y1="{_n(cy - 4)}" x2="{_n(cx + 16)}" y2="{_n(cy - 4)}" '
                   f'stroke="{color}" stroke-width="2.5"{dash}/>')
        out.append(f'<text x="{_n(cx + 21)}" y="{_n(cy)}" fill="{_TEXT}">{_a(name)}</text>')
        cx += item
    return out


def _legend_rows(names: Sequence[str], width: float) -> int:
    rows, cx = 1, 0.0
    for name in names:
        item = 22 + len(name) * _CHAR_W + 14
        if cx > 0 and cx + item > width:
            rows, cx = rows + 1, 0.0
        cx += item
    return rows


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    y_format: Callable[[float], str],
    x_format: Callable[[float], str] | None = None,
    y_unit: float = 1.0,
    y_max: float | None = None,
    width: int = 640,
    height: int = 240,
    klass: str = "line-chart",
) -> Markup:
    """Lines over a time axis (x in epoch seconds); y from 0. Empty series are left out of the plot
    but keep their color and legend entry, so a probe keeps its color across charts."""
    points = [p for s in series for p in s.points if math.isfinite(p[1])]
    x_format = x_format or (lambda x: format_moment(datetime.fromtimestamp(x, UTC)))
    legend_h = 16 * _legend_rows([s.name for s in series], width - 20) + 6
    ticks = nice_ticks(max(max((p[1] for p in points), default=0.0), y_max or 0.0), unit=y_unit)
    y_hi = ticks[-1] or 1.0
    label_w = max(len(y_format(t)) for t in ticks)
    left, right, top, bottom = 14 + label_w * _CHAR_W, 18, 10 + legend_h, 26
    plot_w, plot_h = width - left - right, height - top - bottom
    out = _open(width, height, title, klass)
    out += _legend([(s.name, s.dashed) for s in series], 10, 16, width - 20)
    if not points:
        out.append(f'<text x="{_n(width / 2)}" y="{_n(top + plot_h / 2)}" text-anchor="middle" '
                   f'fill="{_AXIS}">no data yet</text>')
        out.append("</svg>")
        return Markup("\n".join(out))
    x_lo, x_hi = min(p[0] for p in points), max(p[0] for p in points)

    def sx(x: float) -> float:
        return left + (plot_w / 2 if x_hi == x_lo else (x - x_lo) / (x_hi - x_lo) * plot_w)

    def sy(y: float) -> float:
        return top + plot_h - (y / y_hi) * plot_h

    for tick in ticks:
        y = sy(tick)
        out.append(f'<line x1="{_n(left)}" y1="{_n(y)}" x2="{_n(left + plot_w)}" y2="{_n(y)}" '
                   f'stroke="{_GRID}"/>')
        out.append(f'<text x="{_n(left - 6)}" y="{_n(y + 4)}" text-anchor="end" fill="{_AXIS}">'
                   f"{_a(y_format(tick))}</text>")
    out.append(f'<line x1="{_n(left)}" y1="{_n(top + plot_h)}" x2="{_n(left + plot_w)}" '
               f'y2="{_n(top + plot_h)}" stroke="{_AXIS}"/>')
    out.append(f'<line x1="{_n(left)}" y1="{_n(top)}" x2="{_n(left)}" y2="{_n(top + plot_h)}" '
               f'stroke="{_AXIS}"/>')
    ticks_x = time_ticks(x_lo, x_hi)
    for index, (x, label) in enumerate(ticks_x):
        anchor = "middle"
        if len(ticks_x) > 1 and index == 0:
            anchor = "start"
        elif len(ticks_x) > 1 and index == len(ticks_x) - 1:
            anchor = "end"
        out.append(f'<line x1="{_n(sx(x))}" y1="{_n(top + plot_h)}" x2="{_n(sx(x))}" '
                   f'y2="{_n(top + plot_h + 4)}" stroke="{_AXIS}"/>')
        out.append(f'<text x="{_n(sx(x))}" y="{_n(top + plot_h + 17)}" text-anchor="{anchor}" '
                   f'fill="{_AXIS}">{_a(label)}</text>')
    for index, line in enumerate(series):
        color = PALETTE[index % len(PALETTE)]
        pts = sorted(p for p in line.points if math.isfinite(p[1]))
        if not pts:
            continue
        dash = ' stroke-dasharray="5 4"' if line.dashed else ""
        if len(pts) > 1:
            coords = " ".join(f"{_n(sx(x))},{_n(sy(y))}" for x, y in pts)
            out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"'
                       f'{dash} stroke-linejoin="round"/>')
        for x, y in pts:
            out.append(f'<circle cx="{_n(sx(x))}" cy="{_n(sy(y))}" r="3" fill="{color}">'
                       f"<title>{_a(f'{line.name}: {y_format(y)} at {x_format(x)}')}</title></circle>")
    out.append("</svg>")
    return Markup("\n".join(out))


def bar_chart(
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    title: str,
    y_format: Callable[[float], str],
    y_unit: float = 1.0,
    width: int = 640,
    klass: str = "bar-chart",
) -> Markup:
    """Horizontal grouped bars: one group per category (label on the left), one bar per series, the
    value printed at the bar's end; None is a missing bar ("not measured")."""
    bar_h, gap = 12, 10
    names = [name for name, _ in series]
    legend_h = 16 * _legend_rows(names, width - 20) + 6
    label_chars = min(max((len(c) for c in categories), default=4), 28)
    left, right, top = 14 + label_chars * _CHAR_W, 90, 10 + legend_h
    group_h = bar_h * max(len(series), 1) + gap
    height = int(top + group_h * max(len(categories), 1) + 24)
    plot_w = width - left - right
    values = [v for _, vs in series for v in vs if v is not None and math.isfinite(v)]
    ticks = nice_ticks(max(values, default=0.0), count=4, unit=y_unit)
    x_hi = ticks[-1] or 1.0
    out = _open(width, height, title, klass)
    out += _legend([(n, False) for n in names], 10, 16, width - 20)
    bottom = top + group_h * max(len(categories), 1)
    for tick in ticks:
        x = left + tick / x_hi * plot_w
        out.append(f'<line x1="{_n(x)}" y1="{_n(top)}" x2="{_n(x)}" y2="{_n(bottom)}" stroke="{_GRID}"/>')
        out.append(f'<text x="{_n(x)}" y="{_n(bottom + 15)}" text-anchor="middle" fill="{_AXIS}">'
                   f"{_a(y_format(tick))}</text>")
    out.append(f'<line x1="{_n(left)}" y1="{_n(top)}" x2="{_n(left)}" y2="{_n(bottom)}" stroke="{_AXIS}"/>')
    if not categories:
        out.append(f'<text x="{_n(width / 2)}" y="{_n(top + group_h / 2)}" text-anchor="middle" '
                   f'fill="{_AXIS}">no data yet</text>')
    for row, category in enumerate(categories):
        y0 = top + row * group_h + gap / 2
        shown = category if len(category) <= label_chars else category[: label_chars - 1] + "\u2026"
        out.append(f'<text x="{_n(left - 6)}" y="{_n(y0 + group_h / 2 - gap / 2 + 4)}" text-anchor="end" '
                   f'fill="{_TEXT}"><title>{_a(category)}</title>{_a(shown)}</text>')
        for index, (name, vs) in enumerate(series):
            value = vs[row] if row < len(vs) else None
            y = y0 + index * bar_h
            if value is None or not math.isfinite(value):
                out.append(f'<text x="{_n(left + 4)}" y="{_n(y + bar_h - 2)}" fill="{_AXIS}">'
                           f"{_a(name)}: not measured</text>")
                continue
            w = max(value / x_hi * plot_w, 1.0 if value > 0 else 0.0)
            color = PALETTE[index % len(PALETTE)]
            tip = _a(f"{category}, {name}: {y_format(value)}")
            out.append(f'<rect x="{_n(left)}" y="{_n(y)}" width="{_n(w)}" height="{bar_h - 2}" '
                       f'fill="{color}"><title>{tip}</title></rect>')
            out.append(f'<text x="{_n(left + w + 4)}" y="{_n(y + bar_h - 3)}" fill="{_TEXT}">'
                       f"{_a(y_format(value))}</text>")
    out.append("</svg>")
    return Markup("\n".join(out))
