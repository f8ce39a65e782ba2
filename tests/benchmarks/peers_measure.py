"""What bench_peers.py measures of each tool's output: Spark's I/O from its event log, the owners' probes'
bytes (lakesort's model and DataFusion), and lakesort verify's findings on the files the tool left live.

Each tool's live output files are hard-linked into a directory of their own (`link_outputs`), one
sub-directory per partition, so that lakesort plans and verifies plain files the same way whichever tool wrote
them: the planner opens every footer of the directory (no Iceberg manifests, which Delta's output has not),
and DataFusion reads exactly those files.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ENGINE_MAX_BYTES = 1 << 40  # DataFusion reads every selected file (no sampling: the bytes are compared)


@dataclass(frozen=True)
class SparkIO:
    """Sums over a Spark application's finished tasks (SparkListenerTaskEnd in its event log)."""

    read: int
    shuffle_written: int
    written: int
    tasks: int


@dataclass(frozen=True)
class ProbeBytes:
    name: str
    where: str
    model: int  # lakesort's plan: compressed bytes of the pages a page-index-aware reader fetches
    engine: int | None  # DataFusion's bytes_scanned over the files the plan selects (None: not confirmed)
    engine_status: str


@dataclass(frozen=True)
class LayoutFindings:
    """lakesort verify's findings on a tool's output
    (errors and warnings by rule) and the facts behind them."""

    errors: tuple[tuple[str, int], ...]
    warnings: tuple[tuple[str, int], ...]
    chunks: int
    column_index_share: float  # of all column chunks
    offset_index_share: float
    boundary_orders: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]  # per key: BoundaryOrder -> chunks
    rows_per_page: float  # median of the chunks' mean rows per page (the keys' chunks)
    pages_per_chunk: float  # mean, the keys' chunks
    row_groups: int
    file_sizes: tuple[int, ...]

    def text(self) -> str:
        def rules(items: tuple[tuple[str, int], ...]) -> str:
            return ", ".join(f"{rule} {n}" for rule, n in items) or "none"

        orders = "; ".join(f"{key} " + ", ".join(f"{order} {n}" for order, n in counts)
                           for key, counts in self.boundary_orders)
        return (f"errors: {rules(self.errors)}; warnings: {rules(self.warnings)}; column index "
                f"{self.column_index_share:.0%} / offset index {self.offset_index_share:.0%} of "
                f"{self.chunks} chunks; BoundaryOrder {orders}; {self.row_groups} row groups; keys' pages "
                f"{self.pages_per_chunk:.0f} a chunk, {self.rows_per_page:,.0f} rows a page")


# --- Spark's event log -----------------------------------------------------------------------------------


def event_log_conf(directory: Path) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": directory.as_uri(),
            "spark.eventLog.compress": "false"}


def spark_io(directory: Path) -> SparkIO | None:
    """Input, shuffle and output bytes of every application logged in `directory` (None: no log there)."""
    read = shuffle = written = tasks = 0
    logs = [p for p in directory.rglob("*") if p.is_file()] if directory.exists() else []
    for path in logs:
        with open(path, errors="replace") as lines:
            for line in lines:
                if '"SparkListenerTaskEnd"' not in line:  # the only event that carries task metrics
                    continue
                metrics = json.loads(line).get("Task Metrics") or {}
                read += metrics.get("Input Metrics", {}).get("Bytes Read", 0)
                shuffle += metrics.get("Shuffle Write Metrics", {}).get("Shuffle Bytes Written", 0)
                written += metrics.get("Output Metrics", {}).get("Bytes Written", 0)
                tasks += 1
    return SparkIO(read, shuffle, written, tasks) if logs else None


# --- the output files --------------------------------------------------------------------------------------


def link_outputs(files: list[str], directory: Path) -> dict[str, str]:
    """Hard-link `files` into `directory`, each under a sub-directory named after its own (its partition, for
    Hive-style layouts); the links' paths -> their partition."""
    partitions = {}
    for i, source in enumerate(sorted(files)):
        source_path = Path(source.removeprefix("file://").removeprefix("file:"))
        partition = source_path.parent.name
        target = directory / partition / f"{i:05d}-{source_path.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(source_path, target)
        partitions[str(target)] = partition
    return partitions


def probe_bytes(directory: Path, probes: list[tuple[str, str]]) -> list[ProbeBytes]:
    """Each probe (name, WHERE) planned by lakesort over the directory's files (every column projected, as
    the owners' probes in bench_compact do) and run by DataFusion over the files the plan selects."""
    from layout.metrics.engine import check_probe
    from layout.read.plan import plan

    out = []
    for name, where in probes:
        planned = plan(str(directory), where, None, cache=False)
        checked = check_probe(planned, table=None, max_bytes=ENGINE_MAX_BYTES)
        out.append(ProbeBytes(name, where, planned.counts.bytes_selected, checked.bytes, checked.status))
    return out


@dataclass(frozen=True)
class ProbeDraws:
    """One probe family (a day, a week, an order, 1% of the orders) drawn `len(values)` times with one seed,
    so every tool is asked the same draws: lakesort's model's bytes per draw. A single draw compares where
    pages happen to end (a day of SF10 is about 24,000 rows over pages of 20,000: two pages or three by luck);
    the mean over the draws compares the layouts."""

    name: str
    values: tuple[int, ...]

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values) if self.values else 0.0


def draws_for(scale: float, count: int, seed: int = 38) -> list[tuple[str, list[str]]]:
    """`count` draws of each key probe family over TPC-H's domains: ship dates 1992-01-02 .. 1998-12-01,
    order keys the first 8 of every 32 up to 6M x SF."""
    import datetime as dt
    import random

    rng = random.Random(seed)
    first, days = dt.date(1992, 1, 2), (dt.date(1998, 12, 1) - dt.date(1992, 1, 2)).days
    orders = int(6_000_000 * scale) // 32
    span = int(60_000 * scale)

    def day(offset: int) -> str:
        return (first + dt.timedelta(days=offset)).isoformat()

    day_draws = [rng.randrange(days) for _ in range(count)]
    week_draws = [rng.randrange(days - 6) for _ in range(count)]
    order_draws = [rng.randrange(orders) * 32 + 1 + rng.randrange(8) for _ in range(count)]
    range_draws = [rng.randrange(orders - span // 32) * 32 + 1 for _ in range(count)]
    return [("a day", [f"l_shipdate = DATE '{day(d)}'" for d in day_draws]),
            ("a week", [f"l_shipdate BETWEEN DATE '{day(d)}' AND DATE '{day(d + 6)}'" for d in week_draws]),
            ("an order", [f"l_orderkey = {k}" for k in order_draws]),
            ("1% of orders", [f"l_orderkey BETWEEN {k} AND {k + span}" for k in range_draws])]


def probe_draws(directory: Path, families: list[tuple[str, list[str]]]) -> list[ProbeDraws]:
    """Each family's draws planned by lakesort's model over the directory's files (every column projected),
    with one metadata cache for the directory: footers and page indexes are read once, not per draw."""
    from layout.read.cache import MetadataCache
    from layout.read.plan import plan

    cache = MetadataCache()
    return [ProbeDraws(name, tuple(plan(str(directory), where, None, cache=cache).counts.bytes_selected
                                   for where in wheres))
            for name, wheres in families]


def findings(partitions: dict[str, str], spec, keys: tuple[str, ...]) -> LayoutFindings:
    """lakesort verify (`layout.verify.rules.verify_files`) with the spec the tool was asked to meet, and the
    layout facts of the same files (indexes present, each key's BoundaryOrder, pages)."""
    import statistics

    import pyarrow.compute as pc

    from layout.verify.facts import layout_facts
    from layout.verify.rules import verify_files

    paths = sorted(partitions)
    report = verify_files(paths, spec, partitions=partitions)
    errors = Counter(f.rule for f in report.findings if f.severity == "error")
    warnings = Counter(f.rule for f in report.findings if f.severity == "warning")
    facts = layout_facts(paths, partitions=partitions)
    chunks = facts.num_rows
    orders = []
    rows_per_page, pages = [], []
    for key in keys:
        mine = facts.filter(pc.equal(facts["column"], key))
        orders.append((key,
                       tuple(sorted(Counter(str(o) for o in mine["boundary_order"].to_pylist()).items()))))
        for n_rows, n_pages in zip(mine["num_rows"].to_pylist(), mine["pages"].to_pylist(), strict=True):
            if n_pages:
                rows_per_page.append(n_rows / n_pages)
                pages.append(n_pages)
    sizes = {p: s for p, s in zip(facts["path"].to_pylist(), facts["file_size"].to_pylist(), strict=True)}
    return LayoutFindings(
        errors=tuple(sorted(errors.items())), warnings=tuple(sorted(warnings.items())), chunks=chunks,
        column_index_share=sum(facts["has_column_index"].to_pylist()) / chunks if chunks else 0.0,
        offset_index_share=sum(facts["has_offset_index"].to_pylist()) / chunks if chunks else 0.0,
        boundary_orders=tuple(orders),
        rows_per_page=statistics.median(rows_per_page) if rows_per_page else 0.0,
        pages_per_chunk=statistics.mean(pages) if pages else 0.0,
        row_groups=report.row_groups, file_sizes=tuple(sorted(sizes.values())))
