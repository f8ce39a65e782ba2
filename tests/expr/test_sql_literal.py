"""The one SQL-literal renderer (`layout.expr.predicate.sql_literal`) reads back through the one parser.

Predicates print with it (`str(expr)`), standard probes are written with it, and `parse_where` reads
both: for any value, parsing the rendered literal gives the value back (floats compare as decimals,
which is how the parser reads them). Quotes and backslashes are the cases a hand-written escape gets
wrong: `'it''s'` (SQL's doubled quote) is read by sqlglot's Spark dialect as CONCAT, not as a literal.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from layout.expr.sql import parse_where
from layout.literals import sql_literal


def _read_back(value):
    return parse_where(f"c = {sql_literal(value)}").literal


@pytest.mark.parametrize("text", ["it's", "''", "\\'", "a\\b", "x\\", "'", "\\", "%_", "O'Brien's \"quote\"",
                                  "tab\there", "new\nline", "ünïcødé ✓", ""])
def test_strings_with_quotes_and_backslashes_read_back(text):
    assert _read_back(text) == text


@given(st.text())
def test_any_string_reads_back(text):
    assert _read_back(text) == text


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_integers_read_back(value):
    assert _read_back(value) == value


@given(st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-10**12, max_value=10**12))
def test_decimals_read_back(value):
    assert _read_back(value) == value


@given(st.dates(min_value=dt.date(1, 1, 1)))
def test_dates_read_back(value):
    assert _read_back(value) == value


@given(st.datetimes(min_value=dt.datetime(1900, 1, 1)))
def test_timestamps_read_back(value):
    assert _read_back(value) == value


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_read_back_as_their_decimal(value):
    assert Decimal(str(_read_back(value))) == Decimal(repr(value))


def test_booleans_and_bytes():
    assert _read_back(True) is True and _read_back(False) is False
    assert sql_literal(b"\x00'\xff") == "X'0027FF'"
