"""The demo warehouse: TPC-H `lineitem` ingested into Iceberg the way a streaming ingest leaves it.

Many small unsorted appends, partitioned by month of `l_shipdate`: exactly the layout lakesort exists to fix.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.transforms import MonthTransform

from layout.catalog import DEFAULT_CATALOG, load_catalog, write_sql_catalog_config
from layout.errors import InputError, UsageError

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

DEMO_TABLE = "demo.lineitem"


@dataclass(frozen=True)
class DemoSummary:
    table: str
    rows: int
    data_files: int
    snapshots: int
    seconds: float
    created: bool


def tpchgen_binary() -> str:
    """The `tpchgen-cli` installed beside this Python (the dev environment), or on PATH."""
    beside = Path(sys.executable).with_name("tpchgen-cli")
    found = str(beside) if beside.exists() else shutil.which("tpchgen-cli")
    if not found:
        raise InputError("tpchgen-cli not found; run `make setup` (it installs the dev environment in .venv)")
    return found


def generate_lineitem(scale: float, out_dir: Path) -> Path:
    """Generate `lineitem` at `scale` with tpchgen-cli (parquet-rs), cached per scale factor."""
    target = out_dir / f"sf={scale:g}" / "lineitem.parquet"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    cmd = [tpchgen_binary(), "parquet", "-s", f"{scale:g}", "--tables=lineitem", "-o", str(target.parent)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not target.exists():
        raise InputError(f"tpchgen-cli failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    log.info("generated TPC-H lineitem sf=%g in %.1fs -> %s", scale, time.perf_counter() - started, target)
    return target


def build_demo(
    home: Path, *, scale: float = 0.05, batches: int = 12, seed: int = 42, replace: bool = False,
    config_dir: Path | None = None,
) -> DemoSummary:
    """Create `demo.lineitem` in the embedded SQLite catalog under `home`, unless it exists already."""

    if scale <= 0 or batches < 1:
        raise UsageError("demo needs a positive scale factor and at least one batch "
                         f"(got {scale}, {batches})")
    started = time.perf_counter()
    if os.environ.get(f"PYICEBERG_CATALOG__{DEFAULT_CATALOG.upper()}__URI"):
        # A deployment configures the catalog (docker/compose.yaml): use it, write no SQLite config beside it.
        log.info("using the catalog %r configured by PYICEBERG_CATALOG__%s__* variables", DEFAULT_CATALOG,
                 DEFAULT_CATALOG.upper())
    else:
        write_sql_catalog_config(home, config_dir or Path.cwd())
    catalog = load_catalog()
    catalog.create_namespace_if_not_exists("demo")
    try:
        existing = catalog.load_table(DEMO_TABLE)
    except NoSuchTableError:
        existing = None
    if existing is not None and not replace and existing.current_snapshot() is not None:
        log.info("%s exists already; pass --replace to rebuild it", DEMO_TABLE)
        return _summary(existing, started, created=False)
    if existing is not None:
        catalog.purge_table(DEMO_TABLE)

    source = pq.read_table(generate_lineitem(scale, home / "tpch"))
    source = source.cast(pa.schema([_plain(f) for f in source.schema]))
    table = catalog.create_table(DEMO_TABLE, schema=source.schema)
    with table.update_spec() as spec:
        spec.add_field("l_shipdate", MonthTransform(), "l_shipdate_month")

    # A streaming ingest lands rows in arrival order, not sort order: shuffle, then append in batches.
    order = np.random.default_rng(seed).permutation(source.num_rows)
    shuffled = source.take(pa.array(order)).cast(table.schema().as_arrow())
    bounds = np.linspace(0, shuffled.num_rows, batches + 1).astype(int)
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds), start=1):
        t0 = time.perf_counter()
        table.append(shuffled.slice(lo, hi - lo))
        log.info("append %d/%d: %d rows in %.1fs", i, batches, hi - lo, time.perf_counter() - t0)
    return _summary(table.refresh(), started, created=True)


def _plain(field: pa.Field) -> pa.Field:
    """Iceberg has no string_view: store tpchgen's views as plain strings."""

    if pa.types.is_string_view(field.type):
        return field.with_type(pa.string())
    return field


def _summary(table: Table, started: float, *, created: bool) -> DemoSummary:
    snapshot = table.current_snapshot()
    summary = snapshot.summary if snapshot else None
    records = summary["total-records"] if summary and "total-records" in summary else None
    data_files = summary["total-data-files"] if summary and "total-data-files" in summary else None
    rows = int(records) if records is not None else 0
    files = int(data_files) if data_files is not None else 0
    return DemoSummary(
        table=DEMO_TABLE, rows=rows, data_files=files, snapshots=len(table.snapshots()),
        seconds=time.perf_counter() - started, created=created,
    )
