"""Literals as SQL text: the predicate tree prints them (`layout.expr`), the probes' SQL embeds them, and the
Spark job builds its SQL expressions with them (the job imports this, never `layout.expr`)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

# The Python values a literal of a predicate or a probe can hold.
LiteralValue = bool | int | float | Decimal | str | bytes | dt.date | dt.datetime | dt.time


def sql_literal(value: LiteralValue) -> str:
    """A literal as SQL text that `parse_where` reads back (floats come back as DECIMAL)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, bytes):
        return f"X'{value.hex().upper()}'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, dt.time):
        return f"TIME '{value.isoformat()}'"
    if isinstance(value, Decimal):
        return format(value, "f")
    return repr(value)
