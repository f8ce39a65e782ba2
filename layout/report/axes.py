"""Axis ticks that fit: as many labels as the room allows, none overlapping, at any number of points.

Values get ticks at 1/2/2.5/5 x 10^k steps (`nice_ticks`); how many is chosen from the room: on a
vertical axis a label per `MIN_ROW` pixels, on a horizontal one by the labels' measured widths
(`layout.report.svg.text_width`). Time axes spread their ticks evenly over the span, the first label
starting at the axis's left end and the last ending at its right end, and keep only as many as fit
side by side with `GAP` pixels between them; whatever is left over is dropped (`thin`), so a hundred
points draw the same few labels as five.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from layout.report.svg import text_width

__all__ = ["GAP", "MIN_ROW", "Label", "nice_ticks", "thin", "time_ticks", "value_ticks"]

GAP = 12  # pixels between two labels of an axis, at least
MIN_ROW = 22  # pixels per label on a vertical axis, at least
MAX_TICKS = 6

Label = tuple[float, str, str]  # (x, text, text-anchor: start | middle | end)


def nice_ticks(high: float, *, count: int = 5, unit: float = 1.0) -> list[float]:
    """Ticks from 0 to at least `high` at a 1/2/2.5/5 x 10^k step (in multiples of `unit`)."""
    if not math.isfinite(high) or high <= 1e-12 * unit:  # nothing (or nothing a label could show) above 0
        return [0.0, unit]
    raw = high / unit / max(count - 1, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw) * unit
    # Multiples of the step (not a running sum, which rounding could stall), at 12 significant digits.
    steps = max(1, math.ceil(high / step * (1 - 1e-9)))
    return [float(f"{i * step:.12g}") for i in range(steps + 1)]


def value_ticks(high: float, room: float, *, unit: float = 1.0, across: bool = False,
                fmt: Callable[[float], str] = str) -> list[float]:
    """`nice_ticks` with as many ticks as `room` pixels hold: one per MIN_ROW on a vertical axis, or (with
    `across`, a horizontal axis of centred labels) as many as fit side by side, measured with `fmt`."""
    count = max(2, min(5, int(room // MIN_ROW) + 1))
    while True:
        ticks = nice_ticks(high, count=count, unit=unit)
        if not across or count == 2 or _fits_centred(ticks, room, fmt):
            return ticks
        count -= 1


def _fits_centred(ticks: Sequence[float], room: float, fmt: Callable[[float], str]) -> bool:
    top = ticks[-1] or 1.0
    spans = [(t / top * room, text_width(fmt(t))) for t in ticks]
    return all(b[0] - b[1] / 2 - (a[0] + a[1] / 2) >= GAP for a, b in itertools.pairwise(spans))


def time_ticks(low: float, high: float, room: float) -> list[Label]:
    """Labels for a time axis `room` pixels wide over [low, high] (epoch seconds): evenly spread (see
    `_time_label` for their precision); at least one, none overlapping."""
    if high <= low:
        return [(room / 2, _time_label(low, 0), "middle")]
    span = high - low
    widest = max(text_width(_time_label(low, span)), text_width(_time_label(high, span)))
    # First and last anchored at the ends, the others centred: neighbours need 1.5 labels and a gap apart.
    count = min(MAX_TICKS, int(room // (1.5 * widest + GAP)) + 1)
    if count < 2:
        count = 2 if room >= 2 * widest + GAP else 1
    labels = []
    for i in range(count):
        x = room * i / (count - 1) if count > 1 else 0.0
        anchor = "start" if i == 0 else "end" if i == count - 1 else "middle"
        labels.append((x, _time_label(low + span * (x / room), span), anchor))
    return thin(labels)


def thin(labels: Sequence[Label]) -> list[Label]:
    """`labels` (by x) without repeats and without any that would overlap the one kept before it (GAP
    apart), the last kept in preference to the one before it."""
    kept: list[Label] = []
    for label in labels:
        if kept and kept[-1][1] == label[1]:
            continue
        while kept and _box(label)[0] - _box(kept[-1])[1] < GAP:
            if label is labels[-1] and len(kept) > 1:
                kept.pop()  # make room for the last label (the end of the axis) by dropping its neighbour
            else:
                break
        if kept and _box(label)[0] - _box(kept[-1])[1] < GAP:
            continue
        kept.append(label)
    return kept


def _box(label: Label) -> tuple[float, float]:
    x, text, anchor = label
    w = text_width(text)
    return {"start": (x, x + w), "end": (x - w, x), "middle": (x - w / 2, x + w / 2)}[anchor]


def _time_label(x: float, span: float) -> str:
    """A date over two days or more, month-day and minute over an hour, the time to the second below (a
    compaction's before and after are a minute or so apart)."""
    moment = datetime.fromtimestamp(x, UTC)
    if span >= 2 * 86400:
        return moment.strftime("%Y-%m-%d")
    if span >= 3600:
        return moment.strftime("%m-%d %H:%M")
    return moment.strftime("%H:%M:%S")
