"""`advise(table)`: which layout would serve the owners' probes best, predicted before any rewrite.

1. Check what can be checked before any data is read (exit 2 in the CLI): the spec has probes, their
   columns exist, the sample size is positive, the table exists and holds rows.
2. The current layout: every probe planned on the table as it is (`layout.read.plan.plan` on the Iceberg
   table: measured, not simulated).
3. A bounded, seeded sample stratified over partitions (`layout.advise.sample`).
4. The candidates (`layout.advise.candidates`), each laid out from the sample as the compaction would and
   every probe planned on it (`layout.advise.simulate`), a few at a time (pyarrow sorts, encodes and
   compresses outside the GIL).
5. Ranked, with a recommendation (`layout.advise.result`), recorded in `lakesort.advice`
   (`layout.advise.history`) unless `record=False`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import logging
import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pyarrow.compute as pc

from layout.advise.candidates import MAX_CANDIDATES, Candidate, candidates, probe_columns
from layout.advise.history import record_advice
from layout.advise.result import Advice, ProbeWeight, Unranked, rank, recommend
from layout.advise.sample import DEFAULT_SAMPLE_ROWS, Sample, sample_table
from layout.advise.simulate import CandidateLayout, Prediction, predict, shape_of
from layout.catalog import load_catalog, load_table
from layout.errors import ConfigError, UsageError
from layout.expr.predicate import columns as predicate_columns
from layout.expr.sql import parse_where
from layout.read.plan import plan
from layout.spec import SortKey, TableSpec, resolve_sort_keys

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["advise"]

log = logging.getLogger(__name__)

# Candidates laid out at once: each holds a sorted copy of the sample's written columns.
MAX_WORKERS = 4


def _workers() -> int:
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


@contextlib.contextmanager
def _quiet_planning() -> Iterator[None]:
    """Every probe on every candidate is a plan, and each logs a line at INFO: dozens that say nothing the
    advice does not. Raised to WARNING while advising, restored after."""
    planner = logging.getLogger("layout.read.plan")
    level = planner.level
    if not planner.isEnabledFor(logging.DEBUG):  # -vv keeps them
        planner.setLevel(logging.WARNING)
    try:
        yield
    finally:
        planner.setLevel(level)


def check_probes(spec: TableSpec, columns: list[str] | None = None) -> None:
    """The spec has probes and every column they name is one of `columns` (UsageError otherwise)."""
    if not spec.probes:
        raise UsageError(
            f"{spec.source}: no probes: the advisor ranks layouts by the bytes the owners' queries read; add "
            f"`probes:` to the spec of {spec.table} (name, where and optionally columns and weight, as in "
            "dags/tables/demo_lineitem.yaml)")
    if columns is None:
        return
    known = set(columns)
    for index, probe in enumerate(spec.probes):
        named = set(predicate_columns(parse_where(probe.where))) | set(probe.columns or ())
        for column in sorted(named - known):
            close = difflib.get_close_matches(column, columns, n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise UsageError(f"{spec.source}: probes[{index}] ({probe.name}): {column!r} is not a column of "
                             f"{spec.table}{hint}")


def _spec_keys(spec: TableSpec, table: Table) -> tuple[SortKey, ...]:
    """The spec's sort keys as the compaction resolves them; none when it cannot (the table has no order)."""
    try:
        return resolve_sort_keys(spec, table)
    except ConfigError as error:
        log.info("the spec's own sort is not a candidate: %s", error)
        return ()


def _runs(sample: Sample, spec: TableSpec, columns: list[str]) -> dict[str, float]:
    """Per column, the sample's rows per distinct value, in pages of the candidates' layout (the largest
    partition's page rows: every partition's are about the same fraction of the spec's limit)."""
    if not sample.rows or not sample.partitions:
        return {}
    page_rows = shape_of(max(sample.partitions, key=lambda p: p.rows), spec,
                         sample.uncompressed_bytes_per_row).page_rows
    out = {}
    for column in columns:
        distinct = pc.count_distinct(sample.data.column(column), mode="all").as_py() or 1
        out[column] = sample.rows / distinct / page_rows
    return out


def _current(spec: TableSpec, sample: Sample) -> Unranked:
    """The current layout's entry: every probe planned on the table itself."""
    predicted = {}
    for probe in spec.probes:
        result = plan(spec.table, probe.where, probe.columns)
        predicted[probe.name] = result.counts.bytes_selected
    return Unranked(strategy="current", origin="table", label=f"current layout ({sample.table_files} files)",
                    predicted_bytes=predicted, write_bytes=sample.table_bytes)


def _entry(p: Prediction, spec: TableSpec) -> Unranked:
    c: Candidate = p.candidate
    # Sorted runs need a linear sort, an unkeyed table and room for more than one run
    # (the rewrite planner's rule).
    runs = c.incremental and spec.keys is None and spec.max_sorted_runs > 1
    return Unranked(strategy=c.strategy, sort_keys=c.keys, scaling=c.scaling, origin=c.origin, label=c.label,
                    predicted_bytes=p.bytes, write_bytes=p.write_bytes, incremental=runs)


def advise(table_name: str, *, spec: TableSpec, sample_rows: int = DEFAULT_SAMPLE_ROWS, seed: int = 0,
           record: bool = True, minmax: bool = False, max_candidates: int = MAX_CANDIDATES,
           work_dir: str | None = None) -> Advice:
    """Predict what each candidate layout would cost the spec's probes on `table_name` (module docstring).

    `minmax=True` adds z-orders scaled by min/max (the job's before quantile ranks) for comparison;
    `work_dir` is where the candidates' files are written while planned (default: the system's temp)."""
    started = time.perf_counter()
    if spec.table != table_name:
        raise UsageError(f"the spec {spec.source} is for {spec.table}, not {table_name}")
    if sample_rows < 1:
        raise UsageError(f"--sample must be a positive number of rows, got {sample_rows}")
    check_probes(spec)
    table = load_table(spec.table, spec.catalog)
    schema = table.schema()
    check_probes(spec, schema.column_names)
    spec_keys = _spec_keys(spec, table)
    with _quiet_planning():
        sample = sample_table(table, rows=sample_rows, seed=seed)
        chosen = candidates(spec, schema, spec_keys, runs=_runs(sample, spec, probe_columns(spec, schema)),
                            minmax=minmax, max_candidates=max_candidates)
        log.info("%s: %d candidate layout(s): %s", spec.table, len(chosen),
                 ", ".join(c.label for c in chosen))
        clock = time.perf_counter()
        current = _current(spec, sample)
        log.info("planned %d probe(s) on the current layout in %.1fs", len(spec.probes),
                 time.perf_counter() - clock)
        clock = time.perf_counter()
        layout = CandidateLayout.prepare(sample, spec, chosen)
        if not all(s.pages_kept for s in layout.shapes):
            log.warning("the sample holds too few rows to keep the table's pages per file (a page would hold "
                        "under one row): point lookups are overestimated; a larger --sample avoids it")
        with ThreadPoolExecutor(_workers()) as pool:
            predictions = []
            for done in pool.map(lambda c: predict(layout, c, work_dir=work_dir), chosen):
                predictions.append(done)
                log.info("%s: predicted in %.1fs", done.candidate.label, done.seconds)
        log.info("laid out and planned %d candidate(s) in %.1fs", len(chosen), time.perf_counter() - clock)
    probes = tuple(ProbeWeight(name=p.name, where=p.where, weight=p.weight) for p in spec.probes)
    ranked = rank([current, *(_entry(p, spec) for p in predictions)], probes)
    advice = Advice(
        run_id=f"advise-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}",
        table=spec.table, advised_at=dt.datetime.now(dt.UTC), sample_rows=sample.rows,
        table_rows=sample.table_rows, seed=seed, probes=probes, candidates=ranked,
        recommendation=recommend(ranked, table=spec.table, table_bytes=sample.table_bytes),
        seconds=time.perf_counter() - started)
    if record:
        written = record_advice(load_catalog(spec.catalog), advice, table_bytes=sample.table_bytes)
        log.info("recorded %d row(s) in lakesort.advice (run %s)", written, advice.run_id)
    log.info("%s: advised in %.1fs", spec.table, advice.seconds)
    return advice
