"""Pruning metrics: probes measured before and after a compaction made by the pipeline, recorded in Iceberg.

The compaction runs the job's own functions on the shared in-process Spark session (as the compaction
tests' `in_process_job`); measuring, recording and the checks are the real code.

The exact ideal (pages and bytes holding a matching row) and the matching rows are checked against a
brute force that shares no code with lakesort (`BruteForce`): every row of every data file read by
pyarrow, the predicate evaluated in plain Python, and rows mapped to pages by walking each column
chunk's page headers (decoded with thriftpy2: pyarrow exposes no page locations). On the property test's
files the page row boundaries are also known by construction (pyarrow's `max_rows_per_page`), which the
walk must reproduce. Beyond its row-group budget the ideal is a ratio estimate from a seeded sample:
evaluating every row group gives the exact figures (property), the same snapshot and probe give the same
sample, estimates never exceed the selection, and on generated tables they stay within the standard
error they report (`within_tolerance`). The standard probes read a bounded number of row groups.
"""

from __future__ import annotations

import bisect
import datetime as dt
import io
import itertools
import json
import math
import random
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import thriftpy2
from hypothesis import HealthCheck, event, given, settings, target
from hypothesis import strategies as st
from lossless import load_job
from test_compaction import _build_demo, _isolate, demo_spec
from thriftpy2.protocol import TCompactProtocol

import layout.compaction.pipeline.driver
from layout.catalog import load_catalog, load_table
from layout.cli import EXIT_OK, EXIT_USAGE, main
from layout.compaction.pipeline import steps as pipeline
from layout.compaction.pipeline.driver import compact
from layout.demo import generate_lineitem
from layout.errors import UsageError
from layout.metrics import store as metrics_store
from layout.metrics.clustered import ColumnRate, clustered_read
from layout.metrics.clustering import ClusteringRecord, read_clustering, summarize
from layout.metrics.ideal import IDEAL_ROW_GROUPS, Ideal, estimate, ideal
from layout.metrics.measure import measure, measure_probe, read_metrics, read_runs
from layout.metrics.probes import SAMPLE_ROW_GROUPS, Probe, _probe_literal, standard_probes
from layout.read.plan import plan
from layout.report.rows import Measurement, typed_rows

pytestmark = pytest.mark.spark

PROBES = [
    {"name": "ship_week", "where": "l_shipdate BETWEEN DATE '1995-03-06' AND DATE '1995-03-12'"},
    {"name": "ship_day_prices", "where": "l_shipdate = DATE '1995-04-17'", "columns": ["l_extendedprice"]},
    {"name": "order_lookup", "where": "l_orderkey = 4242"},
]


@pytest.fixture(scope="module")
def compacted(tmp_path_factory, spark):
    """A demo table compacted by `compact(..., measure=True)`; returns (root, spec, result, prepared run)."""
    tpch = tmp_path_factory.mktemp("tpch")
    generate_lineitem(0.01, tpch)
    root = tmp_path_factory.mktemp("metrics")
    _build_demo(root, tpch)
    job = load_job()
    # One sort key: four standard probes (each measured cold and warm, before and after) keep this module quick.
    spec = demo_spec(probes=PROBES, sort={"keys": [{"column": "l_shipdate"}]})

    def submit(plan_path, manifest_path, *, master, name, conf=None, work_dir, groups=None):
        plan = layout.compaction.pipeline.driver.RewritePlan.from_json(Path(plan_path).read_text())
        wanted = [g for g in plan.groups if groups is None or g.group_id in groups]
        job.write_manifest(spark, plan, job.compact_groups(spark, plan, wanted), str(manifest_path), 0.0)

    with pytest.MonkeyPatch.context() as mp:
        _isolate(mp, root)
        mp.setattr(layout.compaction.pipeline.driver, "submit", submit)
        result = compact("demo.lineitem", spec=spec, work_dir=root / "work", measure=True)
    assert not result.nothing_to_do
    return root, spec, result, pipeline.PreparedRun.load(root / "work")


@pytest.fixture
def catalog(compacted, monkeypatch):
    _isolate(monkeypatch, compacted[0])
    return load_catalog()


# ---- the brute-force oracle: no lakesort code ---------------------------------------------------------

# The page header fields the oracle needs (parquet.thrift's field ids; thriftpy2 skips the others).
_PAGE_HEADER_IDL = """
struct DataPageHeader { 1: optional i32 num_values }
struct DataPageHeaderV2 { 1: optional i32 num_values  2: optional i32 num_nulls  3: optional i32 num_rows }
struct PageHeader {
  1: optional i32 type
  2: optional i32 uncompressed_page_size
  3: optional i32 compressed_page_size
  5: optional DataPageHeader data_page_header
  8: optional DataPageHeaderV2 data_page_header_v2
}
"""
_THRIFT = thriftpy2.load_fp(io.StringIO(_PAGE_HEADER_IDL), module_name="test_metrics_page_header_thrift")
DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 2, 3


class _Cursor:
    """A thriftpy2 transport over bytes that tells how far it has read."""

    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = data, pos

    def read(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        assert len(out) == n, "a page header runs past the end of the file"
        self.pos += n
        return out


def walk_pages(data: bytes, chunk: pq.ColumnChunkMetaData) -> tuple[int, list[tuple[int, int]]]:
    """(dictionary page bytes, [(rows, bytes) per data page]) of one flat column chunk, from its page
    headers; a page's bytes include its header (as the offset index's `compressed_page_size`)."""
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    end = start + chunk.total_compressed_size
    cursor, dictionary, pages = _Cursor(data, start), 0, []
    while cursor.pos < end:
        at = cursor.pos
        header = _THRIFT.PageHeader()
        header.read(TCompactProtocol(cursor))
        size = cursor.pos - at + header.compressed_page_size
        if header.type == DICTIONARY_PAGE:
            assert not pages, "a dictionary page after a data page"
            dictionary += size
        elif header.type == DATA_PAGE:
            pages.append((header.data_page_header.num_values, size))  # flat column: values are rows
        elif header.type == DATA_PAGE_V2:
            pages.append((header.data_page_header_v2.num_rows, size))
        else:
            raise AssertionError(f"unexpected page type {header.type} at byte {at}")
        cursor.pos = at + size
    assert cursor.pos == end, "the pages do not add up to the chunk's total_compressed_size"
    return dictionary, pages


class BruteForce:
    """What the ideal reader fetches, found without lakesort: every row of every file read by pyarrow,
    the predicate evaluated in Python per row, rows mapped to pages by the chunks' page headers.

    Counting follows `layout.read.plan`'s documented rules: the pages of the predicate and projected columns
    (all columns when the projection is None), bytes as page sizes plus the dictionary page a reader also
    fetches; a chunk without an offset index (or of a repeated column) is one page, read whole.
    `page_rows`: the rows per page the files were written with, which the page headers must show.
    """

    def __init__(self, page_rows: int | None = None) -> None:
        self.page_rows = page_rows
        self._files: dict[str, tuple[bytes, pq.FileMetaData]] = {}
        self._values: dict[tuple[str, tuple[str, ...]], list[dict[str, Any]]] = {}
        self._pages: dict[tuple[str, int, int], tuple[int, list[tuple[int, int]]]] = {}

    def _file(self, path: str) -> tuple[bytes, pq.FileMetaData]:
        if path not in self._files:
            self._files[path] = (Path(path).read_bytes(), pq.ParquetFile(path).metadata)
        return self._files[path]

    def _rows(self, path: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
        if (path, columns) not in self._values:  # whole columns, every row group
            self._values[path, columns] = pq.ParquetFile(path).read(columns=list(columns)).to_pylist()
        return self._values[path, columns]

    def chunk(self, path: str, rg: int, col: int) -> tuple[int, list[tuple[int, int]]] | None:
        """(dictionary bytes, [(rows, bytes) per data page]); None: read whole (no offset index, repeated)."""
        data, meta = self._file(path)
        chunk = meta.row_group(rg).column(col)
        if not chunk.has_offset_index or meta.schema.column(col).max_repetition_level > 0:
            return None
        if (path, rg, col) not in self._pages:
            dictionary, pages = walk_pages(data, chunk)
            num_rows = meta.row_group(rg).num_rows
            rows = [n for n, _ in pages]
            assert sum(rows) == num_rows, f"{path} rg {rg} col {col}: pages hold {sum(rows)} of {num_rows} rows"
            if self.page_rows is not None:
                by_construction = [min(self.page_rows, num_rows - k) for k in range(0, num_rows, self.page_rows)]
                assert rows == by_construction, f"{path} rg {rg} col {col}: pages of {rows} rows"
            self._pages[path, rg, col] = (dictionary, pages)
        return self._pages[path, rg, col]

    def _needed(self, meta: pq.FileMetaData, predicate_columns: Sequence[str],
                projection: Sequence[str] | None) -> list[int]:
        names = [meta.schema.column(i).path for i in range(meta.num_columns)]
        wanted = set(predicate_columns) | set(names if projection is None else projection)
        return [i for i, name in enumerate(names) if name in wanted]

    def ideal(self, paths: Sequence[str], predicate_columns: Sequence[str],
              match: Callable[[dict[str, Any]], bool | None],
              projection: Sequence[str] | None) -> tuple[int, int, int]:
        """(pages, bytes, rows): the pages holding a row where `match` is True, their bytes, the rows."""
        pages = nbytes = rows = 0
        for path in paths:
            _, meta = self._file(path)
            values = self._rows(path, tuple(sorted(set(predicate_columns))))
            needed = self._needed(meta, predicate_columns, projection)
            first = 0
            for rg in range(meta.num_row_groups):
                num_rows = meta.row_group(rg).num_rows
                hits = [r for r in range(num_rows) if match(values[first + r]) is True]
                first += num_rows
                if not hits:
                    continue
                rows += len(hits)
                for col in needed:
                    walked = self.chunk(path, rg, col)
                    if walked is None:
                        pages, nbytes = pages + 1, nbytes + meta.row_group(rg).column(col).total_compressed_size
                        continue
                    dictionary, data_pages = walked
                    ends = list(itertools.accumulate(n for n, _ in data_pages))
                    holding = {bisect.bisect_right(ends, r) for r in hits}  # pages with a matching row
                    pages += len(holding)
                    nbytes += dictionary + sum(data_pages[p][1] for p in holding)
            assert first == len(values) == meta.num_rows, path
        return pages, nbytes, rows

    def rates(self, units: Sequence[tuple[str, int]], predicate_columns: Sequence[str],
              projection: Sequence[str] | None) -> list[ColumnRate]:
        """Per counted column, over the (path, row group) units: rows, pages (a chunk without an offset
        index is one) and compressed bytes."""
        sums: dict[str, list[int]] = {}
        for path, rg in units:
            _, meta = self._file(path)
            for col in self._needed(meta, predicate_columns, projection):
                walked = self.chunk(path, rg, col)
                total = sums.setdefault(meta.schema.column(col).path, [0, 0, 0])
                total[0] += meta.row_group(rg).num_rows
                total[1] += 1 if walked is None else len(walked[1])
                total[2] += meta.row_group(rg).column(col).total_compressed_size
        return [ColumnRate(name, *figures) for name, figures in sorted(sums.items())]

    def totals(self, paths: Sequence[str], predicate_columns: Sequence[str],
               projection: Sequence[str] | None) -> tuple[int, int]:
        """(pages, bytes) of the counted columns over whole files."""
        pages = nbytes = 0
        for path in paths:
            _, meta = self._file(path)
            for rg in range(meta.num_row_groups):
                for col in self._needed(meta, predicate_columns, projection):
                    walked = self.chunk(path, rg, col)
                    pages += 1 if walked is None else len(walked[1])
                    nbytes += meta.row_group(rg).column(col).total_compressed_size
        return pages, nbytes


def _literal(text: str) -> Any:
    """A literal of the standard probes' SQL: DATE '...', an integer or a decimal."""
    if m := re.fullmatch(r"DATE '(\d{4}-\d{2}-\d{2})'", text):
        return dt.date.fromisoformat(m.group(1))
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d+", text):
        return Decimal(text)
    raise AssertionError(f"the oracle does not read the literal {text!r}")


def probe_oracle(where: str) -> tuple[list[str], Callable[[dict[str, Any]], bool | None]]:
    """The column and a Python predicate for `col = lit` and `col BETWEEN lo AND hi` (the probes here)."""
    if m := re.fullmatch(r"(\w+) = (.+)", where):
        column, value = m.group(1), _literal(m.group(2))
        return [column], lambda row: None if row[column] is None else row[column] == value
    if m := re.fullmatch(r"(\w+) BETWEEN (.+) AND (.+)", where):
        column, lo, hi = m.group(1), _literal(m.group(2)), _literal(m.group(3))
        return [column], lambda row: None if row[column] is None else lo <= row[column] <= hi
    raise AssertionError(f"the oracle does not read the probe {where!r}")


def snapshot_paths(table, snapshot_id: int) -> list[str]:
    """The data files of a snapshot, by pyiceberg (which applies no delete files here: there are none)."""
    tasks = list(table.scan(snapshot_id=snapshot_id).plan_files())
    assert all(not t.delete_files for t in tasks)
    return [t.file.file_path.removeprefix("file://") for t in tasks]


SAMPLED = re.compile(r"sampled (\d+) of (\d+) row groups(?: \(s\.e\. of efficiency (\d+\.\d{3})\)|, none "
                     r"matching \(efficiency likely below (\d+\.\d{3})\))")


def within_tolerance(estimated: float, exact: float, method: str) -> bool:
    """The tolerance stated for a sampled ideal: within 4 of its reported standard errors (plus their
    rounding) and 3/k for matches in row groups the k sampled ones missed (the rule of three: the
    matching row groups are then likely under 3/k of them); when no sampled row group matched, the
    estimate is 0 and the exact efficiency below the bound it reports, with the same slack."""
    m = SAMPLED.fullmatch(method)
    assert m, method
    k = int(m.group(1))
    if m.group(4) is not None:
        return estimated == 0 and exact <= float(m.group(4)) + 3 / k
    return abs(estimated - exact) <= 4 * (float(m.group(3)) + 0.0005) + 3 / k


def _rows(catalog, run_id: str) -> list[dict]:
    return [r for r in read_metrics(catalog, "demo.lineitem").to_pylist() if r["run_id"] == run_id]


def _by_phase(rows: list[dict]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for r in rows:
        out.setdefault(r["phase"], {})[r["probe"]] = r
    return out


def test_sort_key_probes_read_fewer_bytes_after_compaction(compacted, catalog):
    """Point lookups and narrow ranges on the sort key (up to 1% of the rows) read fewer bytes after. The 10%
    range spans whole monthly partitions, which partition pruning already skipped before; it is checked to
    select no more files after (its bytes may grow: this test's spec writes tiny pages)."""
    _, _, result, prepared = compacted
    phases = _by_phase(_rows(catalog, prepared.run_id))
    assert set(phases) == {"before", "after"}
    assert phases["before"].keys() == phases["after"].keys(), "the same probes before and after"
    sort_key_probes = ["ship_week", "ship_day_prices", *[p for p in phases["after"] if p.startswith("std_l_shipdate")]]
    assert len(sort_key_probes) == 6, "two owner probes and four standard ones on the first sort key"
    for name in sort_key_probes:
        before, after = phases["before"][name], phases["after"][name]
        assert after["snapshot_id"] == result.snapshot_id != before["snapshot_id"]
        if name.endswith("10pct"):
            assert after["files_selected"] <= before["files_selected"], name
            continue
        assert after["bytes_selected"] < before["bytes_selected"], f"{name}: no fewer bytes after compaction"
        assert after["rows_selected"] < before["rows_selected"], name


def test_ideal_is_never_larger_than_selected_and_matches_brute_force(compacted, catalog):
    """Every recorded probe, before and after, and a probe off the sort key (whose pages the column index
    cannot pick exactly, so the ideal is below the selection): the ideal pages, bytes and matching rows
    equal the brute force's."""
    _, _, result, prepared = compacted
    table = load_table("demo.lineitem")
    brute = BruteForce()
    rows = _rows(catalog, prepared.run_id)
    assert len(rows) == 14
    snapshots = {r["snapshot_id"] for r in rows}
    assert len(snapshots) == 2
    off_key = Probe("off_key", "l_suppkey BETWEEN 10 AND 12")
    rows += [measure_probe("demo.lineitem", off_key, snapshot_id=s, run_id="t", phase="on-demand").to_row()
             for s in sorted(snapshots)]
    sampled = 0
    for row in rows:
        assert row["bytes_ideal"] <= row["bytes_selected"] <= row["bytes_total"], row["probe"]
        # pages_total: None when planning opened only the files the manifests keep (layout.read.plan)
        assert row["pages_ideal"] <= row["pages_selected"] <= (row["pages_total"] or math.inf), row["probe"]
        assert 0.0 <= row["efficiency"] <= 1.0
        assert row["rows_matching"] <= row["rows_selected"] <= row["rows_total"]
        columns, match = probe_oracle(row["predicate"])
        projection = row["columns"].split(",") if row["columns"] else None
        paths = snapshot_paths(table, row["snapshot_id"])
        if row["ideal_method"] != "exact":  # over the budget: the exact figures, and the estimate near them
            sampled += 1
            assert row["row_groups_selected"] > IDEAL_ROW_GROUPS, row["ideal_method"]
            exact = measure_probe("demo.lineitem", Probe(row["probe"], row["predicate"], projection),
                                  snapshot_id=row["snapshot_id"], run_id="t", phase="on-demand",
                                  ideal_row_groups=None).to_row()
            assert exact["ideal_method"] == "exact"
            assert within_tolerance(row["efficiency"], exact["efficiency"], row["ideal_method"]), (row, exact)
            row = exact
        pages, nbytes, matching = brute.ideal(paths, columns, match, projection)
        where = f"{row['phase']} {row['probe']} ({row['predicate']}) on snapshot {row['snapshot_id']}"
        if row["engine_status"] != "off":  # recorded rows: DataFusion ran them over every selected file
            assert row["engine_status"] == "checked", (where, row["engine_status"])
            assert (row["engine_model_bytes"], row["engine_model_rows"]) == (row["bytes_selected"], row["rows_selected"])
            assert row["engine_rows"] == row["rows_selected"] and row["engine_rows_matching"] == matching, where
            # bytes: DataFusion also reads the bloom filters this spec writes, which lakesort's figures leave out
            assert abs(row["engine_bytes"] - row["bytes_selected"]) <= 0.2 * row["bytes_selected"], where
        assert (row["pages_ideal"], row["bytes_ideal"], row["rows_matching"]) == (pages, nbytes, matching), where
        assert row["efficiency"] == pytest.approx(nbytes / row["bytes_selected"] if row["bytes_selected"] else 1.0)
        pages_total, bytes_total = brute.totals(paths, columns, projection)
        assert row["bytes_total"] == bytes_total and row["pages_total"] in (None, pages_total), where
        if row["probe"] == "ship_week":  # and the rows by pyiceberg's own reader, filtered by pyarrow
            data = table.scan(snapshot_id=row["snapshot_id"]).to_arrow()
            lo, hi = pa.scalar(dt.date(1995, 3, 6)), pa.scalar(dt.date(1995, 3, 12))
            mask = pc.and_(pc.greater_equal(data["l_shipdate"], lo), pc.less_equal(data["l_shipdate"], hi))
            assert row["rows_matching"] == pc.sum(mask).as_py() > 0
    assert sampled, "the unsorted snapshot's probes off the partition column select more than the budget"
    after = next(r for r in rows if r["probe"] == "off_key" and r["snapshot_id"] == result.snapshot_id)
    assert 0 < after["pages_ideal"] < after["pages_selected"], "the off-key probe must leave slack to measure"


def test_clustering_is_recorded_before_and_after_from_the_bounds(compacted, catalog):
    """Each measurement records the sort key's overlap depth per partition: before, the appends overlap in
    every month they touched; after, each partition is one sorted run of disjoint files (depth 1). Per
    partition of the snapshot before, the depths are the brute force's over bounds read by pyarrow from
    the footers (the manifests' are what lakesort reads)."""
    from test_clustering import brute_depths

    _, _, _, prepared = compacted
    rows = [ClusteringRecord(**r) for r in read_clustering(catalog, "demo.lineitem").to_pylist()
            if r["run_id"] == prepared.run_id]
    (before,) = summarize(r for r in rows if r.phase == "before")
    (after,) = summarize(r for r in rows if r.phase == "after")
    assert before.sort_key == after.sort_key == "l_shipdate" and before.partitions == after.partitions
    assert after.max_depth == 1 and after.histogram == ((1, after.files),) and after.average_overlaps == 0
    assert before.average_depth > 1 and before.files > after.files
    snapshot = next(r.snapshot_id for r in rows if r.phase == "before")
    table = load_table("demo.lineitem")
    spans: dict[str, list] = {}
    for task in table.scan(snapshot_id=snapshot).plan_files():
        meta = pq.ParquetFile(task.file.file_path.removeprefix("file://")).metadata
        col = meta.schema.names.index("l_shipdate")
        stats = [meta.row_group(i).column(col).statistics for i in range(meta.num_row_groups)]
        partition = table.specs()[task.file.spec_id].partition_to_path(task.file.partition, table.schema())
        spans.setdefault(partition, []).append((min(s.min for s in stats), max(s.max for s in stats)))
    recorded = {r.partition_path: r for r in rows if r.phase == "before"}
    assert set(recorded) == set(spans)
    for partition, bounds in spans.items():
        depths = brute_depths(bounds) if len(bounds) <= 10 else None
        got = recorded[partition]
        assert got.files == len(bounds), partition
        if depths is not None:
            assert (got.max_depth, got.average_depth) == (max(depths), pytest.approx(sum(depths) / len(depths)))


def test_metrics_rows_read_back_through_pyiceberg_and_duckdb(compacted, catalog):
    import duckdb

    _, _, _, prepared = compacted
    rows = _rows(catalog, prepared.run_id)
    n_probes = len({r["probe"] for r in rows})
    assert len(rows) == 2 * n_probes and n_probes == 3 + 4
    metrics = catalog.load_table(metrics_store.PRUNING_METRICS)
    paths = [t.file.file_path.removeprefix("file://") for t in metrics.scan().plan_files()]
    con = duckdb.connect()
    got = con.execute("SELECT count(*), sum(bytes_selected) FROM read_parquet($paths) WHERE run_id = $run",
                      {"paths": paths, "run": prepared.run_id}).fetchone()
    assert got == (len(rows), sum(r["bytes_selected"] for r in rows))
    methods = [m for (m,) in con.execute("SELECT ideal_method FROM read_parquet($paths) WHERE run_id = $run",
                                         {"paths": paths, "run": prepared.run_id}).fetchall()]
    assert sorted(methods) == sorted(r["ideal_method"] for r in rows)
    assert all(m == "exact" or SAMPLED.fullmatch(m) for m in methods), methods
    runs = [r for r in read_runs(catalog, "demo.lineitem").to_pylist() if r["run_id"] == prepared.run_id]
    assert len(runs) == 1
    run = runs[0]
    assert run["status"] == "committed" and run["verification"] == "passed"
    assert run["files_after"] < run["files_before"] and run["bytes_rewritten"] > 0
    assert isinstance(json.loads(run["findings"]), list)


def test_rerunning_a_measurement_does_not_duplicate_rows(compacted, catalog):
    _, spec, result, prepared = compacted
    count = len(read_metrics(catalog))
    pipeline.measure(prepared, result.snapshot_id, spec=spec)  # a retried Airflow task
    assert len(read_metrics(catalog)) == count
    first = measure("demo.lineitem", spec=spec)  # on demand: run id measure-<snapshot>
    assert {m.run_id for m in first} == {f"measure-{result.snapshot_id}"}
    measure("demo.lineitem", spec=spec)
    assert len(read_metrics(catalog)) == count + len(first)


def test_standard_probes_are_seeded_and_sampled_from_the_data(compacted, catalog, monkeypatch):
    """The same data gives the same probes, about the fractions of the rows they are named after, drawn
    from a bounded number of row groups (never whole files)."""
    table = load_table("demo.lineitem")
    read_row_group, reads = pq.ParquetFile.read_row_group, []

    def counted(self, i, *args, **kwargs):
        reads.append(i)
        return read_row_group(self, i, *args, **kwargs)

    with monkeypatch.context() as mp:
        mp.setattr(pq.ParquetFile, "read_row_group", counted)
        mp.setattr(pq, "read_table", None)  # whole files: not any more
        first = standard_probes(table, ["l_shipdate", "l_orderkey"])
    assert 0 < len(reads) <= 2 * SAMPLE_ROW_GROUPS, "one column of at most SAMPLE_ROW_GROUPS row groups per key"
    assert first == standard_probes(table, ["l_shipdate", "l_orderkey"]), "same data, same probes"
    assert [p.name for p in first[:4]] == ["std_l_shipdate_point", "std_l_shipdate_0_1pct", "std_l_shipdate_1pct",
                                          "std_l_shipdate_10pct"]
    rows = {p.name: measure_probe("demo.lineitem", p, run_id="t", phase="on-demand") for p in first
            if p.name in ("std_l_orderkey_1pct", "std_l_orderkey_10pct")}
    total = rows["std_l_orderkey_10pct"].rows_total
    # ~0.1% / 1% / 10% of the rows; keys repeat (an order has up to 7 lines), so allow slack.
    for name, fraction in (("1pct", 0.01), ("10pct", 0.1)):
        assert fraction / 3 <= rows[f"std_l_orderkey_{name}"].rows_matching / total <= fraction * 3, name


def test_measure_cli_prints_and_refuses_an_unknown_snapshot(compacted, catalog, capsys):
    _, spec, _, _ = compacted
    spec_file = Path("spec.yaml")
    spec_file.write_text(json.dumps(spec.model_dump(mode="json", exclude_none=True)))
    assert main(["-q", "measure", "demo.lineitem", "--spec", str(spec_file), "--no-record"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "ship_week" in out and "std_l_shipdate_point" in out
    header = next(line for line in out.splitlines() if line.strip().startswith("probe"))
    assert header.split() == ["probe", "files", "pages", "bytes", "selected", "in", "pages", "clustered", "eff.",
                              "waste", "DataFusion", "plan", "ms"]
    assert re.search(r"clustering by l_shipdate: \d+ partition\(s\), \d+ file\(s\), average depth 1\.00, max 1", out)
    assert main(["-q", "measure", "demo.lineitem", "--spec", str(spec_file), "--no-record", "--no-engine",
                 "--json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert {m["engine_status"] for m in doc["measurements"]} == {"off"}
    assert {c["sort_key"] for c in doc["clustering"]} == {"l_shipdate"}
    assert main(["-q", "measure", "demo.lineitem", "--spec", str(spec_file), "--snapshot", "12345"]) == EXIT_USAGE
    assert "no snapshot 12345" in capsys.readouterr().err


def test_sql_literals_for_standard_probes():
    """Standard probes render values with the one SQL-literal renderer (`layout.expr.predicate.sql_literal`),
    so a sampled string with a quote reads back as itself (a `''` escape read back as CONCAT)."""
    from decimal import Decimal

    from layout.expr.sql import parse_where

    assert _probe_literal(dt.date(1995, 3, 6)) == "DATE '1995-03-06'"
    assert _probe_literal(dt.datetime(2020, 1, 2, 3, 4, 5)) == "TIMESTAMP '2020-01-02 03:04:05'"
    quoted = _probe_literal("it's")
    assert parse_where(f"c = {quoted}").literal == "it's"
    assert _probe_literal(Decimal("1.50")) == "1.50" and _probe_literal(7) == "7"
    assert _probe_literal(float("nan")) is None and _probe_literal(True) is None and _probe_literal(b"x") is None


# ---- property: on any files and predicate, the ideal and the matching rows are exact ---------------

# (SQL, predicate columns, the predicate in Python) from (lo, hi, s): NULL compares as unknown (None).
PREDICATES: dict[str, Callable[[int, int, str], tuple[str, list[str], Callable[[dict], bool | None]]]] = {
    "between": lambda lo, hi, s: (
        f"k BETWEEN {lo} AND {hi}", ["k"],
        lambda r: None if r["k"] is None else lo <= r["k"] <= hi),
    "not_between": lambda lo, hi, s: (
        f"NOT (k BETWEEN {lo} AND {hi})", ["k"],
        lambda r: None if r["k"] is None else not lo <= r["k"] <= hi),
    "in": lambda lo, hi, s: (
        f"k IN ({lo}, {hi}, {lo + 7})", ["k"],
        lambda r: None if r["k"] is None else r["k"] in (lo, hi, lo + 7)),
    "or_string": lambda lo, hi, s: (
        f"k BETWEEN {lo} AND {hi} OR s = '{s}'", ["k", "s"],
        lambda r: (r["k"] is not None and lo <= r["k"] <= hi) or r["s"] == s),
    "is_null": lambda lo, hi, s: ("k IS NULL", ["k"], lambda r: r["k"] is None),
}
STRINGS = ("a", "bb", "c" * 30, "d" * 200)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(num_rows=st.integers(1, 400), seed=st.integers(0, 2**32 - 1), null_fraction=st.sampled_from([0, 0.1, 0.5]),
       lo=st.integers(-60, 60), width=st.integers(0, 40), sort=st.booleans(),
       strings=st.lists(st.sampled_from(STRINGS), min_size=1, max_size=8), shape=st.sampled_from(sorted(PREDICATES)),
       projection=st.sampled_from([None, ("v",), ("s",), ("k",)]), n_files=st.integers(1, 2),
       row_group_size=st.integers(1, 150) | st.just(1000), page_rows=st.integers(1, 6) | st.integers(1, 40),
       dictionary=st.sampled_from([True, False, ["s"]]), page_version=st.sampled_from(["1.0", "2.0"]),
       budget=st.integers(1, 12))
def test_ideal_is_exact_on_random_files(tmp_path_factory, num_rows, seed, null_fraction, lo, width, sort, strings,
                                        shape, projection, n_files, row_group_size, page_rows, dictionary,
                                        page_version, budget):
    directory = tmp_path_factory.mktemp("prop")
    rng = random.Random(seed)
    values = [None if rng.random() < null_fraction else rng.randint(-50, 50) for _ in range(num_rows)]
    keys = sorted(values, key=lambda v: (v is None, v or 0)) if sort else values
    data = pa.table({"k": pa.array(keys, pa.int64()),
                     "v": pa.array(range(len(values)), pa.int64()),
                     "s": pa.array([strings[i % len(strings)] for i in range(len(values))], pa.string())})
    # Page row boundaries known by construction: at most `page_rows` rows a page, pages far below 1 MiB.
    bounds = [round(f * len(values) / n_files) for f in range(n_files + 1)]
    paths = []
    for f in range(n_files):
        path = str(directory / f"part-{f}.parquet")
        pq.write_table(data.slice(bounds[f], bounds[f + 1] - bounds[f]), path, row_group_size=row_group_size,
                       max_rows_per_page=page_rows, data_page_size=1 << 20, write_page_index=True,
                       use_dictionary=dictionary, data_page_version=page_version)
        paths.append(path)
    where, columns, match = PREDICATES[shape](lo, lo + width, strings[0])
    m = measure_probe(str(directory), Probe("p", where, projection), run_id="t", phase="on-demand",
                      ideal_row_groups=None)
    assert m.ideal_method == "exact"

    brute = BruteForce(page_rows)
    pages, nbytes, matching = brute.ideal(paths, columns, match, projection)
    assert m.rows_matching == matching, where
    assert (m.pages_ideal, m.bytes_ideal) == (pages, nbytes), f"{where}, columns {projection}"
    assert m.efficiency == (nbytes / m.bytes_selected if m.bytes_selected else 1.0)
    assert (m.pages_total, m.bytes_total) == brute.totals(paths, columns, projection)
    assert m.bytes_ideal <= m.bytes_selected and m.pages_ideal <= m.pages_selected
    assert (m.bytes_ideal == 0) == (matching == 0)
    event("ideal < selected" if m.pages_ideal < m.pages_selected else "ideal = selected")
    target(m.pages_selected - m.pages_ideal)  # steer towards selected pages without a match
    planned = plan(str(directory), where, projection, cache=False)
    check_sampled(planned, Ideal(pages, nbytes, matching, "exact"), budget)
    # The clustered ideal scales the columns' rows, pages and bytes of the selected row groups (the oracle's,
    # from the page headers) to the matching rows (its formula is checked in tests/metrics/test_clustered.py).
    rates = brute.rates([(f.path, rg.index) for f in planned.files for rg in f.row_groups], columns, projection)
    expected = clustered_read(matching, m.rows_total, rates)
    assert (m.pages_clustered, m.bytes_clustered) == (expected.pages, expected.bytes), where
    assert m.efficiency_clustered == (min(1.0, expected.bytes / m.bytes_selected) if m.bytes_selected else 1.0)


def check_sampled(planned, exact: Ideal, budget: int) -> None:
    """Under the budget the ideal is exact; over it, a deterministic sample of `budget` row groups whose
    estimates stay within the selection; estimating from every row group gives the exact figures."""
    units = [(f, rg) for f in planned.files for rg in f.row_groups]
    c = planned.counts
    assert estimate(planned, units, len(units)) == exact, "the ratio estimate over every row group is exact"
    got = ideal(planned, row_groups=budget)
    if len(units) <= budget:
        assert got == exact
        return
    event("sampled")
    assert got == ideal(planned, row_groups=budget), "the same plan, the same sample"
    m = SAMPLED.fullmatch(got.method)
    assert m and (int(m.group(1)), int(m.group(2))) == (budget, len(units)), got.method
    assert got.pages <= c.pages_selected and got.bytes <= c.bytes_selected and got.rows <= c.rows_selected
    assert (got.rows == 0) == (got.bytes == 0) == (got.pages == 0) == (m.group(4) is not None), got
    if exact.rows == 0:
        assert got == Ideal(0, 0, 0, got.method), "no match anywhere: none in the sample"


# ---- a sampled ideal against the exact one on generated tables ---------------------------------------------

def _generated(directory: Path, *, sort: bool, seed: int = 7) -> Path:
    """One file of 400 row groups of 50 rows (pages of 10): keys uniform in [0, 10000), or sorted."""
    rng = random.Random(seed)
    keys = [rng.randrange(10_000) for _ in range(20_000)]
    data = pa.table({"k": pa.array(sorted(keys) if sort else keys, pa.int64()),
                     "v": pa.array(range(len(keys)), pa.int64())})
    pq.write_table(data, directory / "part-0.parquet", row_group_size=50, max_rows_per_page=10,
                   write_page_index=True)
    return directory


@pytest.mark.parametrize("sort", [False, True], ids=["scattered", "sorted"])
@pytest.mark.parametrize("where", ["k BETWEEN 1000 AND 1999", "k BETWEEN 5000 AND 5099", "k IN (17, 4242, 9000)",
                                   "NOT (k BETWEEN 2000 AND 7999)"])
def test_a_sampled_ideal_is_near_the_exact_one(tmp_path, sort, where):
    """Over the budget (40 of 400 row groups where all are selected), the estimate is deterministic and
    within the tolerance stated by `within_tolerance` of the exact figures; rows matching within the same
    relative error as the efficiency."""
    directory = _generated(tmp_path, sort=sort)
    planned = plan(str(directory), where, cache=False)
    exact = ideal(planned, row_groups=None)
    got = ideal(planned, row_groups=40)
    assert exact.method == "exact"
    assert got == ideal(plan(str(directory), where, cache=False), row_groups=40), "deterministic"
    with pytest.raises(UsageError, match="budget must be at least 1"):
        ideal(planned, row_groups=0)
    c = planned.counts
    if c.row_groups_selected <= 40:  # the column index pruned the sorted table below the budget
        assert got == exact
        return
    assert SAMPLED.fullmatch(got.method), got.method
    assert within_tolerance(got.bytes / c.bytes_selected, exact.bytes / c.bytes_selected, got.method), (got, exact)
    assert within_tolerance(got.rows / c.rows_selected, exact.rows / c.rows_selected, got.method), (got, exact)


def test_a_metrics_table_from_before_ideal_method_stays_readable_and_grows_the_column(iceberg_catalog, tmp_path):
    """A pruning_metrics table written without `ideal_method` and the columns added after it (the clustered
    ideal, the engine check), its totals required, reads back with nulls in the new columns (the report's
    typed rows too); the next write adds them, nullable and last in their order, makes the totals
    nullable (planning an Iceberg table may leave them unknown) and keeps the old rows."""
    directory = tmp_path / "data"
    directory.mkdir()
    row = measure_probe(str(_generated(directory, sort=False)), Probe("p", "k = 17"), run_id="old",
                        phase="on-demand", engine=True).to_row()
    totals = ("row_groups_total", "pages_total")
    names = [name for name, _, _ in metrics_store.METRICS_FIELDS]
    added = names[names.index("ideal_method"):]
    assert added[:4] == ["ideal_method", "pages_clustered", "bytes_clustered", "efficiency_clustered"]
    old_fields = [(name, kind, required or name in totals) for name, kind, required in metrics_store.METRICS_FIELDS
                  if name not in added]
    old_row = {k: v for k, v in row.items() if k not in added}
    metrics_store.upsert(iceberg_catalog, metrics_store.PRUNING_METRICS, old_fields, metrics_store.METRICS_KEY,
                         [old_row])
    table = iceberg_catalog.load_table(metrics_store.PRUNING_METRICS)
    assert not set(added) & {f.name for f in table.schema().fields}
    got = read_metrics(iceberg_catalog)
    assert all(got.column(name).to_pylist() == [None] for name in added)
    typed = typed_rows(got, Measurement, "pruning metrics")
    assert [(m.ideal_method, m.bytes_clustered, m.engine_status, m.engine_difference) for m in typed] == [
        (None, None, None, None)]

    new_row = {**row, "run_id": "new", "row_groups_total": None, "pages_total": None}
    metrics_store.upsert(iceberg_catalog, metrics_store.PRUNING_METRICS, metrics_store.METRICS_FIELDS,
                         metrics_store.METRICS_KEY, [new_row])
    schema = iceberg_catalog.load_table(metrics_store.PRUNING_METRICS).schema()
    assert [(f.name, f.required) for f in schema.fields[-len(added):]] == [(name, False) for name in added]
    assert not any(schema.find_field(name).required for name in totals)
    got = {r["run_id"]: (r["ideal_method"], r["pages_total"], r["engine_status"], r["bytes_clustered"])
           for r in read_metrics(iceberg_catalog).to_pylist()}
    assert got == {"old": (None, row["pages_total"], None, None),
                   "new": ("exact", None, "checked", row["bytes_clustered"])}
    assert row["ideal_method"] == "exact" and row["engine_bytes"] == row["bytes_selected"]
