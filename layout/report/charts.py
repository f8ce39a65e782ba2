"""The look of the HTML reports: hand-written SVG charts (a line chart over time, a horizontal bar chart),
the number formats their labels and the pages share, and the pages' stylesheet.

No plotting library and nothing fetched: each chart is one `<svg>` element as a string, well-formed
XML (it parses with `xml.etree`), inlined in the page. Colors come from one fixed palette in series
order, so the same input always gives the same bytes. Every point and bar carries a `<title>` (a
hover tooltip in browsers) with its exact value.

    line_chart([Series("bytes read", [(t0, 1e6), (t1, 2e5)])], title="...", y_format=format_bytes)
    bar_chart(["probe_a"], [("before", [1e6]), ("after", [2e5])], title="...", y_format=format_bytes)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

__all__ = ["PALETTE", "STYLESHEET", "Series", "bar_chart", "byte_unit", "format_bytes", "format_duration",
           "format_percent", "line_chart", "nice_ticks", "time_ticks"]

# Colorblind-safe (Okabe-Ito), in the order series get them.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000")
_AXIS, _GRID, _TEXT = "#555555", "#e3e3e3", "#222222"
_CHAR_W = 6.6  # average glyph width of the 11px sans-serif labels, for layout estimates
_FONT = 'font-family="system-ui, sans-serif" font-size="11"'
# The stylesheet of the report pages (inlined in each page's <style>): no `<` or `&`, so pages stay XML.
STYLESHEET = """
:root { --fg: #1d2330; --muted: #5b6473; --line: #d8dce3; --bg: #f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header, main, footer { max-width: 1080px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 18px; } a { color: #0b5cad; }
h1 { font-size: 1.6em; margin: 0.2em 0; word-break: break-all; } h3 { font-size: 1em; }
h2 { font-size: 1.2em; margin: 1.6em 0 0.5em; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
.muted, .note { color: var(--muted); } .note { font-size: 0.9em; max-width: 80ch; }
.headline { font-size: 1.15em; background: #fff; border-left: 4px solid #0072b2; padding: 10px 14px; }
.empty { background: #fff; border: 1px dashed var(--line); padding: 12px 14px; color: var(--muted); }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; }
.card .label { color: var(--muted); font-size: 0.85em; } .card .value { font-size: 1.15em; font-weight: 600; }
.scroll { overflow-x: auto; margin: 6px 0 12px; }
table { border-collapse: collapse; background: #fff; width: 100%; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eef0f4; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; } td.num { white-space: nowrap; }
code { font: 0.9em ui-monospace, Menlo, monospace; overflow-wrap: break-word; }
.badge { padding: 0 7px; border-radius: 9px; font-size: 0.85em; font-weight: 600; background: #e7e9ee;
  white-space: nowrap; }
.badge.ok { background: #dcf2e3; color: #15603a; } .badge.bad { background: #fbe0de; color: #9b1c13; }
.badge.warn { background: #fdf0d2; color: #7a5200; }
.good { color: #15603a; font-weight: 600; } .worse { color: #9b1c13; font-weight: 600; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; } figure { margin: 0; }
figcaption { font-size: 0.9em; font-weight: 600; margin-bottom: 4px; }
svg.chart { display: block; max-width: 100%; height: auto; border: 1px solid var(--line); }
footer { margin-top: 30px; padding-bottom: 24px; color: var(--muted); font-size: 0.85em; }
"""

DASH = "\u2013"  # shown for a missing value


def format_bytes(n: float | None) -> str:
    """Binary units, three significant digits: ``512 B``, ``1.50 KiB``, ``12.3 MiB``, ``240 GiB``."""
    if n is None or not math.isfinite(n):
        return DASH
    value, units, index = float(n), ("B", "KiB", "MiB", "GiB", "TiB", "PiB"), 0
    while abs(value) >= 1024 and index < len(units) - 1:
        value, index = value / 1024, index + 1
    if index == 0:
        return f"{int(value)} B"
    digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return f"{value:.{digits}f} {units[index]}"


def format_duration(seconds: float | None) -> str:
    """``0.8 s``, ``42 s``, ``12 min 05 s``, ``2 h 03 min``."""
    if seconds is None or not math.isfinite(seconds):
        return DASH
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def format_percent(fraction: float | None) -> str:
    """A fraction as a percentage: one decimal below 10% (``4.5%``), none above (``87%``)."""
    if fraction is None or not math.isfinite(fraction):
        return DASH
    value = fraction * 100
    return f"{value:.1f}%" if abs(value) < 10 else f"{value:.0f}%"


def byte_unit(high: float) -> float:
    """The binary unit (1, 1024, 1024^2, ...) `format_bytes` shows `high` in: axis ticks step in it."""
    unit = 1.0
    while high >= 1024 * unit and unit < 1024.0**5:
        unit *= 1024
    return unit



@dataclass(frozen=True)
class Series:
    """One line: `points` are (x, y); x is seconds since the epoch when the chart has a time axis."""

    name: str
    points: Sequence[tuple[float, float]]
    dashed: bool = False


def _a(value: object) -> str:
    """An attribute or text value, escaped for XML and HTML alike."""
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
) -> str:
    """Lines over a time axis (x in epoch seconds); y from 0. Empty series are left out of the plot
    but keep their color and legend entry, so a probe keeps its color across charts."""
    points = [p for s in series for p in s.points if math.isfinite(p[1])]
    x_format = x_format or (lambda x: datetime.fromtimestamp(x, UTC).strftime("%Y-%m-%d %H:%M UTC"))
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
        return "\n".join(out)
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
    return "\n".join(out)


def bar_chart(
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    title: str,
    y_format: Callable[[float], str],
    y_unit: float = 1.0,
    width: int = 640,
    klass: str = "bar-chart",
) -> str:
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
    return "\n".join(out)
