"""`layout.settings` (every LAKESORT_* variable) and `layout.sizes`
(the one byte-size parser and formatter)."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from layout.errors import ConfigError
from layout.settings import Settings, settings, variables
from layout.sizes import GiB, KiB, MiB, byte_unit, format_size, parse_size


def test_defaults_when_unset_or_empty():
    empty = settings({})
    assert empty == settings({"LAKESORT_WORK_KEEP_DAYS": "  ", "LAKESORT_POOL": ""})
    assert (empty.tables_dir, empty.report_dir) == (Path("dags/tables"), Path(".lakesort/reports"))
    assert (empty.lease_ttl_hours, empty.cleanup_grace_hours, empty.spark_master) == (12.0, 24.0, "local[*]")
    assert (empty.cache_max_bytes, empty.cache_max_entry_bytes) == (256 * MiB, 16 * MiB)


def test_values_are_read_and_typed():
    s = settings({"LAKESORT_CACHE_MAX_BYTES": "1GiB", "LAKESORT_CACHE_ENABLED": " 0 ",
                  "LAKESORT_SPARK_CONF": '{"spark.executor.memory": "4g", "spark.x": 2}',
                  "LAKESORT_CACHE_EXPIRE_SECONDS": "inf", "LAKESORT_WORK_DIR": "/srv/work", "OTHER": "x"})
    assert s.cache_max_bytes == GiB and s.cache_enabled is False and math.isinf(s.cache_expire_seconds)
    assert s.spark_conf == {"spark.executor.memory": "4g", "spark.x": "2"}
    assert s.work_dir == Path("/srv/work")


@pytest.mark.parametrize(("var", "value", "says"), [
    ("LAKESORT_CACHE_MAX_BYTES", "12MB", "write 12MiB"),
    ("LAKESORT_CACHE_MAX_BYTES", "0", "greater than 0"),
    ("LAKESORT_CACHE_ENABLED", "yes", "true, false, 1 or 0"),
    ("LAKESORT_LEASE_TTL_HOURS", "soon", "number"),
    ("LAKESORT_SPARK_CONF", "[1]", "JSON object"),
    ("LAKESORT_SPARK_CONF", "{oops", "not JSON"),
    ("LAKESORT_SHIP_LAYOUT", "ftp", "'zip' or 'installed'"),
    ("LAKESORT_SPARK_RETRIES", "-1", "greater than or equal to 0"),
])
def test_a_bad_value_names_the_variable_the_value_and_the_fix(var, value, says):
    with pytest.raises(ConfigError) as info:
        settings({var: value})
    message = str(info.value)
    assert f"${var}={value!r}" in message and says in message and "unset it for the default" in message


def test_every_setting_is_documented_and_named_lakesort():
    for name, var in variables().items():
        assert re.fullmatch(r"LAKESORT_[A-Z_]+", var)
        assert len(Settings.model_fields[name].description or "") > 20, f"{var} needs a description"


def test_importing_settings_stays_light():
    """The DAG files read settings when Airflow parses them: no pyarrow, pyiceberg or numpy on the way."""
    code = ("import sys, layout.settings; heavy = [m for m in ('pyarrow', 'pyiceberg', 'numpy', 'sqlglot') "
            "if m in sys.modules]; print(','.join(heavy))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.stdout.strip() == "", f"layout.settings imported {done.stdout.strip()}"


@pytest.mark.parametrize(("text", "size"), [("512KiB", 512 * KiB), ("128MiB", 128 * MiB),
                                            ("1.5GiB", 3 * GiB // 2), (" 7 ", 7), ("3B", 3), (4096, 4096)])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize(("text", "says"), [("1MB", "write 1MiB"), ("1.5B", "whole number"), ("lots", "like"),
                                            (True, "size like")])
def test_parse_size_refuses_with_a_hint(text, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_size(text)


@given(st.integers(min_value=0, max_value=2**60))
def test_format_size_reads_back_within_its_precision(n):
    shown = format_size(n)
    number, unit = shown.split()
    factor = {"B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": GiB * 1024, "PiB": GiB * 1024**2}[unit]
    assert abs(float(number) * factor - n) <= 0.005 * n + 1
    assert byte_unit(n) == (factor if n else 1)


def test_format_size_examples():
    assert [format_size(v) for v in (512, 1536, 12.3 * MiB, 240 * GiB, None, math.nan)] == \
        ["512 B", "1.50 KiB", "12.3 MiB", "240 GiB", "\u2013", "\u2013"]
