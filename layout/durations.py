"""Durations: one parser (the table spec's retention) and one compact formatter (logs, CLI, reports).

A duration is a number with one unit: ``90s``, ``45m``, ``36h``, ``3d``, ``2w``, ``1.5d`` (units s, m, h,
d, w; case-insensitive; whitespace around the number is allowed). A bare number is refused: ``3`` could
be seconds, hours or days, and a retention period is where a wrong guess deletes files.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal

__all__ = ["format_duration_short", "parse_duration"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*")
# What the JSON schema of a spec accepts for a duration (the same grammar as the regex above).
DURATION_PATTERN = r"^\s*\d+(\.\d+)?\s*[SsMmHhDdWw]\s*$"


def parse_duration(value: object) -> dt.timedelta:
    """A timedelta from ``36h``, ``3d``, ... or a timedelta; ValueError says what is accepted."""
    if isinstance(value, dt.timedelta):
        if value < dt.timedelta(0):
            raise ValueError(f"a duration cannot be negative, got {value}")
        return value
    match = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        hint = ""
        if isinstance(value, int | float) and not isinstance(value, bool):
            hint = f"; a bare number has no unit: write {value}h or {value}d"
        raise ValueError(f"expected a duration like 36h, 3d or 2w, got {value!r}{hint}")
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise ValueError(f"unknown duration unit {unit!r} in {value!r}; units: s, m, h, d, w (e.g. 36h, 3d)")
    seconds = Decimal(number) * factor
    return dt.timedelta(seconds=float(seconds))


def format_duration_short(delta: dt.timedelta | float | None) -> str:
    """The largest unit that shows `delta` whole: ``3d``, ``36h``, ``90m``, ``45s``, ``1.5s``."""
    seconds = delta.total_seconds() if isinstance(delta, dt.timedelta) else delta
    if seconds is None or not math.isfinite(seconds):
        return "\u2013"
    for unit, factor in (("w", _UNITS["w"]), ("d", _UNITS["d"]), ("h", _UNITS["h"]), ("m", _UNITS["m"])):
        if seconds >= factor and seconds % factor == 0:
            return f"{int(seconds // factor)}{unit}"
    return f"{seconds:g}s"
