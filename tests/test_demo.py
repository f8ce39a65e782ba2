"""The demo warehouse: a real SQLite Iceberg catalog, found through a `.pyiceberg.yaml` in the working dir."""

from __future__ import annotations

import json

import pytest
from pyiceberg.transforms import MonthTransform

from layout.catalog import load_table
from layout.cli import EXIT_OK, main
from layout.demo import build_demo


@pytest.fixture
def demo_home(tmp_path, monkeypatch):
    # Isolate from a developer's own ~/.pyiceberg.yaml or the repository's demo config.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PYICEBERG_HOME", raising=False)
    return tmp_path / ".lakesort"


def test_demo_builds_small_unsorted_partitioned_table(demo_home, capsys):
    summary = build_demo(demo_home, scale=0.01, batches=4)
    assert summary.created and summary.snapshots == 4
    table = load_table("demo.lineitem")
    (field,) = table.spec().fields
    assert isinstance(field.transform, MonthTransform)
    assert table.schema().find_column_name(field.source_id) == "l_shipdate"
    # Every append wrote one small file per month it touched: many more files than months.
    files = list(table.scan().plan_files())
    months = {f.file.partition[0] for f in files}
    assert len(files) == summary.data_files and len(files) > 2 * len(months)
    assert summary.rows == table.scan().to_arrow().num_rows == 60_175

    # The CLI finds the catalog from the working directory's .pyiceberg.yaml, with no extra environment.
    assert main(["inspect", "demo.lineitem", "--json", "--columns", "l_shipdate"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["files"]) == len(files)
    assert sum(f["num_rows"] for f in doc["files"]) == summary.rows


def test_demo_is_idempotent(demo_home):
    first = build_demo(demo_home, scale=0.01, batches=2)
    again = build_demo(demo_home, scale=0.01, batches=2)
    assert not again.created and again.snapshots == first.snapshots


def test_unknown_table_names_the_namespace_tables(demo_home, capsys):
    build_demo(demo_home, scale=0.01, batches=1)
    assert main(["inspect", "demo.lineitems"]) == 2
    err = capsys.readouterr().err
    assert "demo.lineitems" in err and "demo.lineitem" in err
