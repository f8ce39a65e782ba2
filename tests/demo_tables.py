"""The demo table the compaction tests rewrite (TPC-H lineitem at scale 0.01: 83 month partitions of 3
small files), its spec, and what the tests read back from a table: its rows in a canonical order, its live
and staged files, its state before and after a run.

Shared by the compaction tests (tests/compaction/), the job's (tests/jobs/) and the metrics' (tests/metrics/);
the fixtures that build and restore the table (`pristine`, `demo_home`) and run the job in process
(`in_process_job`) are tests/conftest.py's.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from layout.demo import build_demo
from layout.io import resolve
from layout.parquet import ParquetFile
from layout.spec import parse_spec
from layout.upkeep.cleanup import staging_root

SPARK_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4", "spark.driver.memory": "1g"}
MONTHS = ["l_shipdate_month=1995-03", "l_shipdate_month=1995-04"]
# The demo's months hold ~30-45 KiB in 3 files: a 16 KiB target asks for ~3 files per month.
TARGET = 16 * 1024
OWNER = {"name": "Test Team", "email": "test@example.com"}
NAME_MAPPING = "schema.name-mapping.default"
# A table keyed by `id` with a sequence column (the keyed-table tests and the empty table's).
KEYED_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False),
                          pa.field("seq", pa.int64(), nullable=False), pa.field("payload", pa.string())])


def demo_spec(**overrides) -> object:
    doc = {
        "table": "demo.lineitem", "catalog": "lakesort", "owner": OWNER,
        "sort": {"keys": [{"column": "l_shipdate"}, {"column": "l_orderkey"}]},
        "target_file_size": TARGET, "max_group_size": "1MiB",
        # Small row groups and pages, so every file has several of each to check the order of.
        "writer": {"row_group_size": "8KiB", "page_size": "1KiB", "page_row_count_limit": 20},
    }
    doc.update(overrides)
    return parse_spec(doc, source="test-spec")


# ---- isolation, the demo table, reading it back ------------------------------------------------------


def isolate(mp: pytest.MonkeyPatch, root: Path) -> None:
    """The catalog is found through `root/.pyiceberg.yaml` only (as tests/test_demo.py does)."""
    mp.chdir(root)
    mp.setenv("HOME", str(root))
    mp.delenv("PYICEBERG_HOME", raising=False)
    mp.delenv("LAKESORT_SPARK_MASTER", raising=False)
    mp.setenv("LAKESORT_WORK_DIR", str(root / "work"))  # run files and table leases of this test only


def build_demo_at(root: Path, tpch: Path) -> None:
    """The demo table under `root/.lakesort`, from lineitem generated once into `tpch`
    (`generate_lineitem`)."""
    shutil.copytree(tpch, root / ".lakesort" / "tpch", dirs_exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, root)
        summary = build_demo(root / ".lakesort", scale=0.01, batches=3)
    assert summary.created and summary.rows == 60_175


# ---- a table read back -------------------------------------------------------------------------------


def readable(table):
    """The table as pyiceberg reads it: compacted files carry Iceberg field ids,
    so no name mapping is needed."""
    return table


def canonical(data: pa.Table) -> pa.Table:
    """pyiceberg returns string or large_string depending on the files read: compare values,
    not that choice."""
    return data.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_large_string(f.type) else f
                                for f in data.schema]))


def by_every_column(data: pa.Table) -> pa.Table:
    return data.sort_by([(c, "ascending") for c in data.column_names]).combine_chunks()


def sorted_rows(table, snapshot_id: int | None = None) -> pa.Table:
    table = readable(table)
    data = table.scan(snapshot_id=snapshot_id).to_arrow() if snapshot_id else table.scan().to_arrow()
    return by_every_column(canonical(data))


def month_filter(month: str):
    """The pyiceberg row filter of one `l_shipdate_month=YYYY-MM` partition."""
    from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

    year, number = map(int, month.split("=")[1].split("-"))
    following = f"{year + number // 12}-{number % 12 + 1:02d}-01"
    return And(GreaterThanOrEqual("l_shipdate", f"{year}-{number:02d}-01"), LessThan("l_shipdate", following))


def live_files(table) -> list:
    return [t.file for t in table.scan().plan_files()] if table.current_snapshot() else []


def partition_of(table, data_file) -> str:
    return table.spec().partition_to_path(data_file.partition, table.schema())


def staged_files(table) -> list[str]:
    from pyarrow import fs as pafs

    filesystem, root = resolve(staging_root(table))
    if filesystem.get_file_info(root).type == pafs.FileType.NotFound:
        return []
    return sorted(i.path for i in filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
                  if i.type == pafs.FileType.File)


def staged_parquet(table) -> list[str]:
    """The Parquet files under the staging root (Spark also leaves _SUCCESS and Hadoop .crc files there)."""
    return [p for p in staged_files(table) if p.endswith(".parquet") and not Path(p).name.startswith(".")]


def open_parquet(uri: str) -> ParquetFile:
    filesystem, path = resolve(uri)
    return ParquetFile.open(path, filesystem=filesystem)


@dataclass
class State:
    snapshot_id: int | None
    rows: pa.Table
    files: set[str]


def state(table) -> State:
    table = table.refresh()
    snap = table.current_snapshot()
    return State(snap.snapshot_id if snap else None, sorted_rows(table),
                 {f.file_path for f in live_files(table)})


def assert_unchanged(table, before: State) -> None:
    after = state(table)
    assert after.snapshot_id == before.snapshot_id
    assert after.files == before.files
    assert after.rows.equals(before.rows)
    assert staged_files(table) == [], "staged files were left behind"
