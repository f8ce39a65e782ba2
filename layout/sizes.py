"""Byte sizes: one parser (specs, settings) and one formatter (reports, `lakesort inspect`, logs).

Sizes use binary units only: ``512KiB``, ``128MiB``, ``1.5GiB``, ``1TiB``; ``MB`` and friends are refused
with a hint, because 1MB is 10^6 in SI but 2^20 to many tools.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

__all__ = ["GiB", "KiB", "MiB", "TiB", "byte_unit", "format_size", "parse_size"]

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
_UNITS = {"b": 1, "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB}
_SHOWN = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")
DASH = "\u2013"  # a missing size


def parse_size(value: object) -> int:
    """Bytes from an int or a string with a binary unit (``128MiB``); ValueError says what is accepted."""
    if isinstance(value, bool):
        # ValueError, not TypeError: pydantic turns only ValueError into a validation error with a path.
        raise ValueError(f"expected a size like 128MiB or a number of bytes, got {value!r}")  # noqa: TRY004
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    match = _SIZE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"expected a size like 512KiB, 128MiB or 1GiB, or a number of bytes, got {value!r}")
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower() or "b")
    if factor is None:
        hint = ""
        if unit.lower() in ("kb", "mb", "gb", "tb", "k", "m", "g", "t"):
            binary = f"{unit[0].upper()}iB"
            hint = f"; sizes use binary units: write {number}{binary} (1 KiB = 1024 bytes)"
        raise ValueError(f"unknown size unit {unit!r} in {value!r}{hint}; units: B, KiB, MiB, GiB, TiB")
    try:
        total = Decimal(number) * factor
    except InvalidOperation:  # pragma: no cover - the regex admits only decimals
        raise ValueError(f"not a number in {value!r}") from None
    if total != total.to_integral_value():
        raise ValueError(f"{value!r} is not a whole number of bytes")
    return int(total)


def format_size(n: float | None) -> str:
    """Binary units, three significant digits: ``512 B``, ``1.50 KiB``, ``12.3 MiB``, ``240 GiB``."""
    if n is None or not math.isfinite(n):
        return DASH
    value, index = float(n), 0
    while abs(value) >= 1024 and index < len(_SHOWN) - 1:
        value, index = value / 1024, index + 1
    if index == 0:
        return f"{int(value)} B"
    digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return f"{value:.{digits}f} {_SHOWN[index]}"


def byte_unit(high: float) -> float:
    """The binary unit (1, 1024, 1024^2, ...) `format_size` shows `high` in: axis ticks step in it."""
    unit = 1.0
    while high >= 1024 * unit and unit < 1024.0**5:
        unit *= 1024
    return unit
