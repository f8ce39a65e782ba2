"""How the report writes numbers and moments: the filters of its templates and the labels of its charts.

Byte sizes are `layout.sizes.format_size` (one formatter for reports, `lakesort inspect` and logs). Every
format shows a missing value (None, NaN) as DASH.
"""

from __future__ import annotations

import math
from datetime import datetime

__all__ = ["DASH", "format_count", "format_duration", "format_moment", "format_percent", "format_signed"]

DASH = "\u2013"  # shown for a missing value, as layout.sizes shows a missing size


def format_count(n: int | None) -> str:
    """``1,234,567``."""
    return DASH if n is None else f"{n:,}"


def format_moment(moment: datetime | None) -> str:
    """``2025-03-01 02:00 UTC`` (the moment is in UTC already)."""
    return DASH if moment is None else moment.strftime("%Y-%m-%d %H:%M UTC")


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


def format_signed(fraction: float | None) -> str:
    """A relative difference with its sign (``+4.6%``, ``−1.2%``, ``±0%``); infinite: ``+∞``."""
    if fraction is None or math.isnan(fraction):
        return DASH
    if math.isinf(fraction):
        return "+∞" if fraction > 0 else "−∞"
    if fraction == 0:
        return "±0%"
    return ("+" if fraction > 0 else "−") + format_percent(abs(fraction))
