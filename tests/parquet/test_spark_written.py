"""layout.parquet against files written by Spark 4.2 (parquet-mr 1.17) with several pages per row group.

Checks the page index the way `verify` relies on it: BoundaryOrder of sorted and unsorted columns,
the column index dropped for over-long values, offset-index row numbers, and typed statistics equal
to the true min/max of the data.
"""

from __future__ import annotations

import datetime
import itertools
import random
import string
from decimal import Decimal

import pytest
from writers import write_spark

from layout.parquet import BoundaryOrder, ParquetFile, PhysicalType

pytestmark = pytest.mark.spark

N_ROWS = 20_000
PAGE_ROWS = 1_000
COLUMNS = ("k", "r", "s", "d", "amt")
SCHEMA = "k long, r long, s string, d date, amt decimal(12,2)"
EPOCH = datetime.date(2020, 1, 1)


def _rows(n: int = N_ROWS, seed: int = 7) -> list[tuple]:
    """k = 0..n-1 (the sort key); r random with nulls; s, d, amt derived from r (nulls alike)."""
    rng = random.Random(seed)
    rows = []
    for k in range(n):
        if k % 101 == 13:
            rows.append((k, None, None, None, None))
            continue
        r = rng.randint(-(10**9), 10**9)
        rows.append(
            (
                k,
                r,
                f"s{r % 100_003:06d}",
                EPOCH + datetime.timedelta(days=r % 3650),
                Decimal(r % 10_000_000) / 100 - Decimal("50000.00"),
            )
        )
    return rows


@pytest.fixture(scope="module")
def data() -> list[tuple]:
    return _rows()


@pytest.fixture(scope="module")
def files(spark, data, tmp_path_factory):
    """The same data written sorted ascending (page row-count limit, or 4 KiB pages) and descending."""
    base = tmp_path_factory.mktemp("spark_written")
    df = spark.createDataFrame(data, SCHEMA).cache()
    by_rows = {"parquet.page.row.count.limit": PAGE_ROWS}
    out = {
        "asc": write_spark(spark, df, base / "asc", sort_by="k", options=by_rows),
        "asc_4k": write_spark(spark, df, base / "asc_4k", sort_by="k", options={"parquet.page.size": 4096}),
        # 64 KiB row groups: several row groups, each with several pages
        "asc_rg": write_spark(
            spark, df, base / "asc_rg", sort_by="k", options={**by_rows, "parquet.block.size": 65536}
        ),
        "desc": write_spark(spark, df, base / "desc", sort_by="k", descending=True, options=by_rows),
    }
    df.unpersist()
    return out


def _n_pages(pf: ParquetFile, rg: int, col: str) -> int:
    oi = pf.offset_index(rg, col)
    assert oi is not None, f"{pf.path}: no offset index for {col} in row group {rg}"
    return len(oi.page_locations)


@pytest.mark.parametrize("which", ["asc", "asc_4k", "asc_rg"])
def test_sorted_column_is_ascending_random_is_unordered(files, which):
    pf = ParquetFile.open(files[which])
    assert pf.num_rows == N_ROWS
    assert "parquet-mr" in pf.created_by
    assert _n_pages(pf, 0, "k") > 1 and _n_pages(pf, 0, "r") > 1
    for rg in range(pf.num_row_groups):
        assert pf.column_index(rg, "k").boundary_order is BoundaryOrder.ASCENDING
        if _n_pages(pf, rg, "r") > 1:  # (a one-page chunk is trivially ordered; a last row group may be)
            assert pf.column_index(rg, "r").boundary_order is BoundaryOrder.UNORDERED


def test_sorted_descending_is_descending(files):
    pf = ParquetFile.open(files["desc"])
    assert _n_pages(pf, 0, "k") > 1
    assert pf.column_index(0, "k").boundary_order is BoundaryOrder.DESCENDING
    assert pf.column_index(0, "r").boundary_order is BoundaryOrder.UNORDERED


def test_page_row_count_limit_takes_effect(files):
    pf = ParquetFile.open(files["asc"])
    assert pf.num_row_groups == 1
    for col in COLUMNS:
        assert _n_pages(pf, 0, col) == N_ROWS // PAGE_ROWS


def test_block_size_takes_effect(files):
    pf = ParquetFile.open(files["asc_rg"])
    assert pf.num_row_groups > 1
    # row groups follow each other in k order, each ascending on its own
    bounds = [(pf.statistics(rg, "k").min, pf.statistics(rg, "k").max) for rg in range(pf.num_row_groups)]
    assert bounds[0][0] == 0 and bounds[-1][1] == N_ROWS - 1
    assert all(hi < lo for (_, hi), (lo, _) in itertools.pairwise(bounds))


def _page_bounds(pf: ParquetFile, rg: int, col: str) -> list[tuple[int, int]]:
    """[first_row, end_row) of each page of the chunk, from the offset index."""
    firsts = [loc.first_row_index for loc in pf.offset_index(rg, col).page_locations]
    return list(zip(firsts, firsts[1:] + [pf.row_groups[rg].num_rows]))


@pytest.mark.parametrize("which", ["asc", "asc_4k", "asc_rg", "desc"])
def test_offset_index_first_row_index_agrees_with_row_counts(files, which):
    pf = ParquetFile.open(files[which])
    for rg in range(pf.num_row_groups):
        rg_rows = pf.row_groups[rg].num_rows
        for col in COLUMNS:
            locations = pf.offset_index(rg, col).page_locations
            firsts = [loc.first_row_index for loc in locations]
            assert firsts[0] == 0
            assert all(a < b for a, b in itertools.pairwise(firsts)), firsts
            assert firsts[-1] < rg_rows
            assert sum(end - start for start, end in _page_bounds(pf, rg, col)) == rg_rows
            # pages lie inside the chunk, in file order, without overlapping
            chunk = pf.metadata.row_groups[rg].columns[pf.column(col).index].meta_data
            start = chunk.dictionary_page_offset or chunk.data_page_offset
            start = min(start, chunk.data_page_offset)
            end = start + chunk.total_compressed_size
            for a, b in itertools.pairwise(locations):
                assert a.offset + a.compressed_page_size <= b.offset
            assert locations[0].offset >= start
            assert locations[-1].offset + locations[-1].compressed_page_size <= end
            ci = pf.column_index(rg, col)
            assert len(ci.null_pages) == len(locations) == len(ci.min_values) == len(ci.max_values)
        assert sum(rg.num_rows for rg in pf.row_groups) == pf.num_rows
    if which != "asc_4k":
        for rg in range(pf.num_row_groups):
            assert all(end - start <= PAGE_ROWS for start, end in _page_bounds(pf, rg, "k"))


def _sorted_rows(data, descending=False):
    return sorted(data, key=lambda row: row[0], reverse=descending)


@pytest.mark.parametrize("which", ["asc", "desc"])
def test_column_index_values_are_the_true_page_min_max(files, data, which):
    pf = ParquetFile.open(files[which])
    rows = _sorted_rows(data, descending=which == "desc")
    for j, col in enumerate(COLUMNS):
        ci = pf.column_index(0, col)
        for page, (start, end) in enumerate(_page_bounds(pf, 0, col)):
            values = [row[j] for row in rows[start:end] if row[j] is not None]
            assert ci.null_counts[page] == (end - start) - len(values)
            assert bool(ci.null_pages[page]) == (not values)
            if values:
                assert ci.min_values[page] == min(values), (col, page)
                assert ci.max_values[page] == max(values), (col, page)


def test_typed_statistics_equal_true_min_max(files, data):
    pf = ParquetFile.open(files["asc"])
    for j, col in enumerate(COLUMNS):
        values = [row[j] for row in data if row[j] is not None]
        stats = pf.statistics(0, col)
        assert stats is not None, col
        assert stats.min == min(values), col
        assert stats.max == max(values), col
        assert type(stats.min) is type(values[0]), col
        assert stats.null_count == len(data) - len(values), col
    assert isinstance(pf.statistics(0, "d").min, datetime.date)
    assert isinstance(pf.statistics(0, "amt").max, Decimal)


# --- over-long values: parquet-mr drops the column index of such a chunk ---------------------------

LONG = 10_000  # bytes per value: far over parquet-mr's 4096-byte average per page for min+max


@pytest.fixture(scope="module")
def long_rows() -> list[tuple]:
    rng = random.Random(11)
    return [
        (k, rng.randint(0, 10**6), "".join(rng.choices(string.ascii_letters, k=LONG))) for k in range(300)
    ]


def _write_long(spark, long_rows, out_dir, **extra):
    options = {"parquet.page.row.count.limit": 20, **extra}
    return write_spark(
        spark, long_rows, out_dir, sort_by="k", options=options, schema="k long, r long, text string"
    )


def test_long_values_drop_the_column_index_only_for_that_column(spark, long_rows, tmp_path):
    # With the default parquet.columnindex.truncate.length (64) parquet-mr truncates and keeps the
    # index (next test); a large truncate length keeps the full values and the index is dropped.
    path = _write_long(
        spark, long_rows, tmp_path / "long", **{"parquet.columnindex.truncate.length": 1_000_000}
    )
    pf = ParquetFile.open(path)
    assert _n_pages(pf, 0, "text") > 1
    assert pf.has_column_index(0, "text") is False
    assert pf.column_index(0, "text") is None
    # the offset index stays, and the other columns keep their column index
    assert pf.has_offset_index(0, "text") is True
    assert sum(end - start for start, end in _page_bounds(pf, 0, "text")) == len(long_rows)
    for col in ("k", "r"):
        assert pf.has_column_index(0, col) is True
        assert pf.column_index(0, col) is not None
    assert pf.column_index(0, "k").boundary_order is BoundaryOrder.ASCENDING
    # parquet-mr also leaves min/max of values over 4096 bytes out of the footer statistics
    stats = pf.statistics(0, "text")
    assert stats is None or (stats.min is None and stats.max is None)


def test_long_values_with_truncation_keep_truncated_bounds(spark, long_rows, tmp_path):
    # default parquet.columnindex.truncate.length (64) for the column index; the footer statistics are
    # only kept (truncated, inexact) when parquet.statistics.truncate.length is set
    path = _write_long(
        spark, long_rows, tmp_path / "long_default", **{"parquet.statistics.truncate.length": 64}
    )
    pf = ParquetFile.open(path)
    ci = pf.column_index(0, "text")
    assert pf.has_column_index(0, "text") is True and ci is not None
    for page, (start, end) in enumerate(_page_bounds(pf, 0, "text")):
        values = [row[2] for row in long_rows[start:end]]
        lo, hi = ci.min_values[page], ci.max_values[page]
        assert len(lo.encode()) <= 64 and len(hi.encode()) <= 64
        assert lo <= min(values) and hi >= max(values), page  # truncated bounds still bound the page
    stats = pf.statistics(0, "text")
    values = [row[2] for row in long_rows]
    assert len(stats.min) <= 64 and len(stats.max) <= 64
    assert stats.min <= min(values) and stats.max >= max(values)
    assert stats.min_exact is False and stats.max_exact is False


# --- bloom filters written by parquet-mr ---------------------------------------------------------

BLOOM_SCHEMA = "k long, i int, s string, d date, amt decimal(12,2), big decimal(22,2)"
BLOOM_COLUMNS = ("k", "i", "s", "d", "amt", "big")


def _bloom_row(v: int) -> tuple:
    """One row from an integer; distinct integers give distinct values in every column."""
    return (
        v * 7919,
        v * 13 - 50_000,
        f"name-{v}",
        EPOCH + datetime.timedelta(days=v - 20_000),
        Decimal(v * 3 - 10_000).scaleb(-2),
        Decimal(v * 10**15 + 1).scaleb(-2),
    )


def test_bloom_filters_written_by_parquet_mr(spark, tmp_path):
    """`parquet.bloom.filter.enabled#<col>` and `...expected.ndv#<col>` as DataFrameWriter options."""
    rng = random.Random(17)
    present_ints = rng.sample(range(40_000), 4_000)
    absent_ints = [v for v in range(40_000) if v not in set(present_ints)][:1_000]
    options = {"parquet.page.row.count.limit": PAGE_ROWS}
    for col in BLOOM_COLUMNS:
        options[f"parquet.bloom.filter.enabled#{col}"] = True
        options[f"parquet.bloom.filter.expected.ndv#{col}"] = len(present_ints)
    rows = [_bloom_row(v) for v in present_ints]
    path = write_spark(spark, rows, tmp_path / "bloom", options=options, schema=BLOOM_SCHEMA)
    pf = ParquetFile.open(path)
    assert pf.column("amt").type.physical_type is PhysicalType.INT64
    assert pf.column("big").type.physical_type is PhysicalType.FIXED_LEN_BYTE_ARRAY
    absent = [_bloom_row(v) for v in absent_ints]
    for j, col in enumerate(BLOOM_COLUMNS):
        assert pf.has_bloom_filter(0, col), col
        bloom = pf.bloom_filter(0, col)
        assert all(bloom.might_contain(row[j]) for row in rows), col
        false_positives = sum(bloom.might_contain(row[j]) for row in absent)
        assert false_positives <= 0.10 * len(absent), (col, false_positives)


@pytest.mark.parametrize("rows", [300, 40_000])
def test_the_spec_s_bloom_filters_are_sized_for_the_values_a_file_holds(spark, tmp_path, rows):
    """The spec's writer options make parquet-mr's adaptive bloom filters: a small file (a nightly run's) gets
    a filter of about 1 KiB, not the 128 KiB that ndv 100,000 asks for, and a full one still the 128 KiB; each
    holds every value written and tells most absent values apart at about the spec's fpp."""
    from layout.spec import parse_spec

    spec = parse_spec({"table": "t.x", "owner": {"name": "T", "email": "t@example.com"},
                       "writer": {"bloom_filters": {"k": {"ndv": 100_000, "fpp": 0.01}}}}, source="test")
    path = write_spark(spark, [(k * 7,) for k in range(rows)], tmp_path / "bloom", schema="k long",
                       options=spec.writer.spark_options())
    pf = ParquetFile.open(str(path))
    bloom = pf.bloom_filter(0, "k")
    size = pf.row_groups[0].columns[0].meta_data.bloom_filter_length
    assert size <= (2 * 1024 if rows == 300 else 128 * 1024 + 64), size
    assert all(bloom.might_contain(k * 7) for k in range(rows))
    absent = sum(bloom.might_contain(k * 7 + 3) for k in range(rows))
    assert absent <= 0.03 * rows + 3, absent
