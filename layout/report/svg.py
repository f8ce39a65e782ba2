"""What every chart of the report is drawn with: escaping, coordinates, text widths, the frame and legend.

Text widths are what keeps labels apart, so they are measured, not guessed per character: each ASCII
character's advance width in DejaVu Sans (the sans-serif Chromium falls back to on Linux, and wider
than the system fonts of macOS and Windows), 1 em for anything else. A label laid out with these widths
takes at most that much room in any browser, so two labels placed apart by them never overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

__all__ = ["AXIS", "FONT_SIZE", "GRID", "PALETTE", "TEXT", "attr", "close", "coord", "legend",
           "legend_height", "open_svg", "text_width", "truncate"]

# Colorblind-safe (Okabe-Ito), in the order series get them.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000")
AXIS, GRID, TEXT = "#555555", "#e3e3e3", "#222222"
FONT_SIZE = 11
FONT = f'font-family="system-ui, sans-serif" font-size="{FONT_SIZE}"'
LINE = 16  # pixels between text rows: above the 12.8 px a line of 11 px DejaVu Sans takes

# Advance widths of DejaVu Sans in em, for the characters 32 (space) to 126 (~), from the font's hmtx table.
_ADVANCE = (
    0.318, 0.401, 0.46, 0.838, 0.636, 0.95, 0.78, 0.275, 0.39, 0.39, 0.5, 0.838, 0.318, 0.361, 0.318, 0.337,
    0.636, 0.636, 0.636, 0.636, 0.636, 0.636, 0.636, 0.636, 0.636, 0.636, 0.337, 0.337, 0.838, 0.838, 0.838,
    0.531, 1.0, 0.684, 0.686, 0.698, 0.77, 0.632, 0.575, 0.775, 0.752, 0.295, 0.295, 0.656, 0.557, 0.863,
    0.748, 0.787, 0.603, 0.787, 0.695, 0.635, 0.611, 0.732, 0.684, 0.989, 0.685, 0.611, 0.685, 0.39, 0.337,
    0.39, 0.838, 0.5, 0.5, 0.613, 0.635, 0.55, 0.635, 0.615, 0.352, 0.635, 0.634, 0.278, 0.278, 0.579, 0.278,
    0.974, 0.634, 0.612, 0.635, 0.635, 0.411, 0.521, 0.392, 0.634, 0.592, 0.818, 0.592, 0.592, 0.525, 0.636,
    0.337, 0.636, 0.838,
)


def text_width(text: str, size: float = FONT_SIZE) -> float:
    """Pixels `text` takes at `size` px in DejaVu Sans (an upper bound for the usual sans-serif fonts)."""
    return size * sum(_ADVANCE[ord(c) - 32] if 32 <= ord(c) <= 126 else 1.0 for c in text)


def truncate(text: str, width: float) -> str:
    """`text`, or as much of it as fits in `width` px followed by an ellipsis."""
    if text_width(text) <= width:
        return text
    while text and text_width(text + "\u2026") > width:
        text = text[:-1]
    return text + "\u2026"


def attr(value: object) -> str:
    """An attribute or text value, escaped for XML and HTML alike: what makes a chart `Markup`."""
    return escape(str(value), quote=True)


def coord(value: float) -> str:
    """A coordinate with at most one decimal, without trailing zeros (short and deterministic)."""
    return f"{value:.1f}".removesuffix(".0")


def open_svg(width: int, height: int, title: str, klass: str) -> list[str]:
    return [
        (f'<svg class="chart {klass}" role="img" width="{width}" height="{height}" '
         f'viewBox="0 0 {width} {height}" {FONT}>'),
        f"<title>{attr(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]


def close(out: list[str]) -> str:
    out.append("</svg>")
    return "\n".join(out)


def _name(name: str, width: float) -> str:
    """A legend name as drawn: cut to fit a row of its own (swatch and margins included)."""
    return truncate(name, max(width - 35, 20.0))


def _items(names: Sequence[str], width: float) -> list[tuple[float, int]]:
    """(x offset, row) of each legend item, wrapping at `width`: a 16 px swatch, 5 px, the name, 14 px."""
    placed, x, row = [], 0.0, 0
    for name in names:
        item = 21 + text_width(_name(name, width)) + 14
        if x > 0 and x + item > width:
            x, row = 0.0, row + 1
        placed.append((x, row))
        x += item
    return placed


def legend_height(names: Sequence[str], width: float) -> int:
    """Pixels the legend of `names` takes (0 without names)."""
    return LINE * (max((row for _, row in _items(names, width)), default=-1) + 1)


def legend(series: Sequence[tuple[str, bool]], x: float, y: float, width: float) -> list[str]:
    """Swatches and names in rows from (x, y) (the first row's baseline), wrapping at `width`."""
    out = []
    for index, ((name, dashed), (dx, row)) in enumerate(zip(series, _items([n for n, _ in series], width),
                                                           strict=True)):
        cx, cy = x + dx, y + row * LINE
        color = PALETTE[index % len(PALETTE)]
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        out.append(f'<line x1="{coord(cx)}" y1="{coord(cy - 4)}" x2="{coord(cx + 16)}" y2="{coord(cy - 4)}" '
                   f'stroke="{color}" stroke-width="2.5"{dash}/>')
        out.append(f'<text x="{coord(cx + 21)}" y="{coord(cy)}" '
                   f'fill="{TEXT}">{attr(_name(name, width))}</text>')
    return out
