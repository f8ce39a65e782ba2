"""Write Parquet test files with each writer we care about: Spark (parquet-mr), pyarrow (Arrow C++)
and tpchgen-cli (parquet-rs).

Every function writes into a directory the caller owns (usually a pytest `tmp_path`) and returns the
path of the Parquet file it wrote.

Spark / parquet-mr writer options, checked on Spark 4.2.0 / parquet-mr 1.17.0 (the tests in
tests/parquet/test_spark_written.py assert on each one marked [tested]):

* Options given to `DataFrameWriter.option(...)` are copied into the Hadoop configuration of that one
  write job, so parquet-mr's own keys work there and do not leak into other tests sharing the
  SparkSession. That is what `write_spark` does. (`spark.conf.set("parquet.page.row.count.limit", ...)`
  also reaches the write job, since SQL conf entries are copied into the job's Hadoop conf, but it is
  session-wide.)
* `parquet.page.row.count.limit` (default 20,000) [tested]: a page is closed after this many rows;
  exact at 1,000 (20,000 rows -> 20 pages). It is only checked at parquet-mr's size-check points, so a
  very small limit (20) with big values gives somewhat larger pages.
* `parquet.page.size` (bytes, default 1 MiB) [tested]: a page is closed when its encoded size reaches
  it (checked every `parquet.page.size.row.check.min` rows, default 100, so pages overshoot; with
  dictionary encoding a page holds small dictionary ids). 4096 gives dozens of pages for 20,000 rows.
* `parquet.block.size` (bytes, default 128 MiB) [tested]: row group size.
* `parquet.columnindex.truncate.length` (default 64) [tested]: BYTE_ARRAY min/max in the column index
  are truncated to this many bytes (inexact bounds that still bound the page). parquet-mr drops a
  chunk's column index (writes none; the offset index stays) when the stored per-page min+max exceed
  4096 bytes per page on average. So with the default, ~10 KB strings keep a truncated column index,
  and with a large truncate length (1,000,000) they get none.
* `parquet.statistics.truncate.length` (default: none) [tested]: the same for the footer's chunk
  statistics. Without it parquet-mr leaves min/max over 4096 bytes out of the footer (the Statistics
  struct has no min/max); with 64 it writes truncated, inexact min/max.
* `parquet.bloom.filter.enabled#<column>` = true and `parquet.bloom.filter.expected.ndv#<column>`
  [tested]: per-column bloom filters. `parquet.bloom.filter.fpp#<column>` is accepted too (a lower fpp
  gives a bigger filter).
* Spark writes timestamps as INT96 by default (`spark.sql.parquet.outputTimestampType`), and parquet-mr
  writes no column index for INT96 columns.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def parquet_testing_dir() -> Path:
    """Where apache/parquet-testing is: $LAKESORT_PARQUET_TESTING, else ../shared/testdata/ beside the repo.
    (A plain function: test modules parametrize over its files at collection time.)"""
    override = os.environ.get("LAKESORT_PARQUET_TESTING")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[1].parent / "shared" / "testdata" / "parquet-testing"


def write_spark(
    spark,
    df_or_rows,
    path,
    *,
    sort_by: str | Iterable[str] | None = None,
    descending: bool = False,
    options: Mapping[str, Any] | None = None,
    schema=None,
) -> Path:
    """Write one Parquet file with Spark into the directory `path` and return the file's path.

    `df_or_rows` is a Spark DataFrame, or rows (tuples, dicts or `Row`s) given to
    `spark.createDataFrame(rows, schema)`. The data goes through a single partition so the directory
    holds exactly one `part-*.parquet` file; with `sort_by` the rows are sorted by those columns
    (descending if `descending`) inside that partition. `options` are DataFrameWriter options, such as
    parquet-mr keys (`parquet.page.row.count.limit`, `parquet.bloom.filter.enabled#k`, ...).
    """
    out_dir = Path(path)
    df = df_or_rows
    if not hasattr(df_or_rows, "write"):
        df = spark.createDataFrame(list(df_or_rows), schema)
    df = df.repartition(1)
    if sort_by is not None:
        from pyspark.sql import functions as F

        names = [sort_by] if isinstance(sort_by, str) else list(sort_by)
        cols = [F.col(n).desc() if descending else F.col(n).asc() for n in names]
        df = df.sortWithinPartitions(*cols)
    writer = df.write.mode("overwrite")
    for key, value in (options or {}).items():
        writer = writer.option(key, str(value).lower() if isinstance(value, bool) else str(value))
    writer.parquet(str(out_dir))
    files = sorted(out_dir.glob("part-*.parquet"))
    if len(files) != 1:
        raise AssertionError(f"expected one Parquet file in {out_dir}, found {[f.name for f in files]}")
    return files[0]


def write_pyarrow(table: pa.Table, path, **kw) -> Path:
    """Write `table` with `pyarrow.parquet.write_table(table, path, **kw)`; return the file's path.

    `path` may be a directory (the file is then `<path>/data.parquet`) or a file path.
    Useful keywords: `write_page_index=True`, `data_page_size`, `max_rows_per_page`,
    `row_group_size`, `bloom_filter_options={"col": {"ndv": n, "fpp": 0.01}}`.
    """
    target = Path(path)
    if target.is_dir() or target.suffix != ".parquet":
        target.mkdir(parents=True, exist_ok=True)
        target = target / "data.parquet"
    pq.write_table(table, target, **kw)
    return target


def tpchgen_cli() -> Path:
    """The tpchgen-cli binary installed beside this interpreter (in the venv's bin dir)."""
    binary = Path(sys.executable).parent / "tpchgen-cli"
    if not binary.exists():
        raise FileNotFoundError(f"tpchgen-cli not found beside {sys.executable}; run `uv sync`")
    return binary


def write_tpchgen(table_name: str, out_dir, scale_factor: float = 0.01, **flags: Any) -> Path:
    """Generate one TPC-H table as one Parquet file with tpchgen-cli (parquet-rs); return its path.

    Extra `flags` become tpchgen-cli parquet options, e.g. `compression="ZSTD(1)"`,
    `row_group_bytes="1MB"`.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(tpchgen_cli()),
        "parquet",
        f"--scale-factor={scale_factor}",
        f"--tables={table_name}",
        f"--output-dir={out}",
        "--overwrite",
        "--quiet",
    ]
    for key, value in flags.items():
        cmd.append(f"--{key.replace('_', '-')}={value}")
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)
    target = out / f"{table_name}.parquet"
    if not target.exists():
        raise FileNotFoundError(f"tpchgen-cli did not write {target}")
    return target
