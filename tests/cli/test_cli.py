"""The `lakesort` command line: help, exit codes, inspect output shapes."""

from __future__ import annotations

import json
import random
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from layout.cli import EXIT_OK, EXIT_USAGE, main


@pytest.fixture
def sorted_file(tmp_path):
    """A pyarrow file with a page index: `k` ascending, `r` shuffled, `s` strings with nulls."""
    n = 5_000
    shuffled = list(range(n))
    random.Random(7).shuffle(shuffled)
    table = pa.table(
        {
            "k": pa.array(range(n), pa.int64()),
            "r": pa.array(shuffled, pa.int32()),
            "s": pa.array([None if i % 10 == 0 else f"v{i:05d}" for i in range(n)]),
        }
    )
    path = tmp_path / "sorted.parquet"
    pq.write_table(
        table, path, write_page_index=True, data_page_size=1024, row_group_size=2_500, use_dictionary=False
    )
    return path


def test_help_lists_commands(capsys):
    assert main(["--help"]) == EXIT_OK
    out = capsys.readouterr().out
    for command in ("inspect", "demo"):
        assert command in out


def test_unknown_command_is_usage_error(capsys):
    assert main(["frobnicate"]) == EXIT_USAGE


def test_missing_path_is_input_error(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nope.parquet")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "nope.parquet" in err and "no such file" in err


def test_not_parquet_names_the_file(tmp_path, capsys):
    bad = tmp_path / "notes.parquet"
    bad.write_text("this is not parquet, just text long enough to have a footer-sized tail")
    assert main(["inspect", str(bad)]) == EXIT_USAGE
    assert "notes.parquet" in capsys.readouterr().err


def test_unknown_column_lists_valid_ones(sorted_file, capsys):
    assert main(["inspect", str(sorted_file), "--columns", "kk"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "kk" in err and "k" in err


def test_inspect_json_shape(sorted_file, capsys):
    assert main(["inspect", str(sorted_file), "--json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    (f,) = doc["files"]
    assert {"path", "num_rows", "created_by", "row_groups"} <= f.keys()
    assert f["num_rows"] == 5_000 and len(f["row_groups"]) == 2
    rg = f["row_groups"][0]
    assert {"index", "num_rows", "total_byte_size", "columns"} <= rg.keys()
    cols = {c["name"]: c for c in rg["columns"]}
    assert set(cols) == {"k", "r", "s"}
    k = cols["k"]
    assert {
        "name",
        "physical_type",
        "logical_type",
        "statistics",
        "has_column_index",
        "has_offset_index",
        "has_bloom_filter",
        "column_index",
        "offset_index",
    } <= k.keys()
    assert k["physical_type"] == "INT64"
    assert k["statistics"]["min"] == 0 and k["statistics"]["max"] == 2_499
    assert k["column_index"]["boundary_order"] == "ASCENDING"
    assert cols["r"]["column_index"]["boundary_order"] == "UNORDERED"
    pages = k["offset_index"]["page_locations"]
    assert len(pages) > 1 and pages[0]["first_row_index"] == 0
    assert len(k["column_index"]["min_values"]) == len(pages)
    assert {"offset", "compressed_page_size", "first_row_index"} == pages[0].keys()
    s = cols["s"]
    assert s["statistics"]["null_count"] == 250
    assert all(isinstance(v, str) for v in s["column_index"]["min_values"] if v is not None)


def test_inspect_columns_limits_output(sorted_file, capsys):
    assert main(["inspect", str(sorted_file), "--json", "--columns", "r"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in doc["files"][0]["row_groups"][0]["columns"]] == ["r"]


def test_inspect_text_reads_like_parquet_cli(sorted_file, capsys):
    assert main(["inspect", str(sorted_file), "--columns", "k"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "boundary order: ASCENDING" in out
    assert "first row index" in out and "page-0" in out


def test_inspect_directory_summary(sorted_file, tmp_path, capsys):
    pq.write_table(pa.table({"k": [1, 2], "r": [3, 4], "s": ["a", None]}), tmp_path / "sub.parquet")
    (tmp_path / "_temporary").mkdir()
    (tmp_path / "_temporary" / "part.parquet").write_text("half-written by a crashed job")
    assert main(["inspect", str(tmp_path), "--summary"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "2 files, 5002 rows" in out
    assert "ASCENDING 2" in out  # `k` is ascending in both row groups of sorted.parquet


def test_plan_text_reports_the_counts(sorted_file, capsys):
    """The text output of `lakesort plan`: a header naming the source, predicate and time, then one line per
    level with total, selected and skipped share, the same numbers as the JSON output."""
    assert main(["plan", str(sorted_file), "--where", "k = 345"]) == EXIT_OK
    text = capsys.readouterr().out
    assert main(["plan", str(sorted_file), "--where", "k = 345", "--json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    header, columns, *lines = text.splitlines()
    assert re.fullmatch(rf"plan for {re.escape(str(sorted_file))} where k = 345 \(\d+\.\d ms\)", header), (
        header
    )
    assert columns.split() == ["level", "total", "selected", "skipped"]
    table = {}
    for line in lines:
        *label, total, selected, skipped = line.split()
        table[" ".join(label)] = (int(total), int(selected), skipped)
    levels = {
        "files": "files",
        "row groups": "row_groups",
        "pages": "pages",
        "rows": "rows",
        "bytes": "bytes",
    }
    assert list(table) == list(levels)
    for label, key in levels.items():
        total, selected = doc[f"{key}_total"], doc[f"{key}_selected"]
        assert table[label] == (total, selected, f"{100 * (1 - selected / total):.1f}%"), label
    # Known without the JSON: one file; `k` ascending over two row groups of 2,500, so 345 is in the first
    # only, in one page of each of the three columns.
    assert table["files"] == (1, 1, "0.0%") and table["row groups"] == (2, 1, "50.0%")
    assert table["rows"][0] == 5_000 and 345 < table["rows"][1] < 2_500
    assert table["pages"][1] == 3 < table["pages"][0]
    assert 0 < table["bytes"][1] < table["bytes"][0]
