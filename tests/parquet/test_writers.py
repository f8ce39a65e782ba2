"""layout.parquet against files from other writers: pyarrow (Arrow C++) with page index and bloom
filters, and tpchgen-cli (parquet-rs); plus the pyspark / Spark JVM version pin."""

from __future__ import annotations

import datetime
import itertools
import random
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from writers import write_pyarrow, write_tpchgen

from layout.parquet import BoundaryOrder, ParquetFile

N_ROWS = 5_000
N_ABSENT = 1_000
BLOOM_COLUMNS = ("i64", "s", "d", "dec", "fixed")
EPOCH = datetime.date(1970, 1, 1)


def _present_values(seed: int = 3) -> dict[str, list]:
    rng = random.Random(seed)
    ints = rng.sample(range(-(10**12), 10**12), N_ROWS)
    return {
        "i64": ints,
        "s": [f"key-{v:x}" for v in ints],
        # even day numbers only, so odd ones are certainly absent
        "d": [EPOCH + datetime.timedelta(days=2 * (v % 40_000) - 40_000) for v in ints],
        # negative and positive, an even number of thousandths only: odd ones are certainly absent
        "dec": [Decimal(2 * (v % 10**9) - 10**9).scaleb(-3) for v in ints],
        "fixed": [rng.randbytes(16) for _ in ints],
    }


def _absent_values(present: dict[str, list], seed: int = 5) -> dict[str, list]:
    rng = random.Random(seed)
    seen_ints = set(present["i64"])
    seen_fixed = set(present["fixed"])
    ints = [v for v in (rng.randrange(-(10**12), 10**12) for _ in range(2 * N_ABSENT)) if v not in seen_ints]
    fixed = [v for v in (rng.randbytes(16) for _ in range(2 * N_ABSENT)) if v not in seen_fixed]
    return {
        "i64": ints[:N_ABSENT],
        "s": [f"absent-{v:x}" for v in ints[:N_ABSENT]],
        "d": [EPOCH + datetime.timedelta(days=2 * k + 1 - 40_000) for k in range(N_ABSENT)],
        "dec": [Decimal(2 * k + 1 - 10**9).scaleb(-3) for k in rng.sample(range(10**9), N_ABSENT)],
        "fixed": fixed[:N_ABSENT],
    }


@pytest.fixture(scope="module")
def present() -> dict[str, list]:
    return _present_values()


@pytest.fixture(scope="module", params=[False, True], ids=["decimal_as_flba", "decimal_as_int64"])
def pyarrow_file(request, present, tmp_path_factory):
    """pyarrow 26 writes bloom filters itself (`bloom_filter_options`): no need to go through Spark."""
    table = pa.table(
        {
            "i64": pa.array(present["i64"], pa.int64()),
            "s": pa.array(present["s"], pa.string()),
            "d": pa.array(present["d"], pa.date32()),
            "dec": pa.array(present["dec"], pa.decimal128(18, 3)),
            "fixed": pa.array(present["fixed"], pa.binary(16)),
            "no_bloom": pa.array(range(N_ROWS), pa.int64()),
        }
    )
    return write_pyarrow(
        table,
        tmp_path_factory.mktemp("pyarrow") / "bloom.parquet",
        write_page_index=True,
        max_rows_per_page=500,
        row_group_size=N_ROWS,
        store_decimal_as_integer=request.param,
        bloom_filter_options={name: {"ndv": N_ROWS, "fpp": 0.01} for name in BLOOM_COLUMNS},
    )


def test_pyarrow_file_stores_decimals_as_parametrized(pyarrow_file, request):
    schema = pq.ParquetFile(pyarrow_file).schema
    physical = schema.column(schema.names.index("dec")).physical_type
    as_int = request.node.callspec.params["pyarrow_file"]
    assert physical == ("INT64" if as_int else "FIXED_LEN_BYTE_ARRAY")
    assert schema.column(schema.names.index("fixed")).physical_type == "FIXED_LEN_BYTE_ARRAY"


@pytest.mark.parametrize("column", BLOOM_COLUMNS)
def test_bloom_filter_contains_every_present_value(pyarrow_file, present, column):
    pf = ParquetFile.open(pyarrow_file)
    assert pf.has_bloom_filter(0, column)
    bloom = pf.bloom_filter(0, column)
    assert bloom is not None
    missing = [v for v in present[column] if not bloom.might_contain(v)]
    assert missing == [], f"{column}: {len(missing)} present values reported absent, e.g. {missing[:3]}"


@pytest.mark.parametrize("column", BLOOM_COLUMNS)
def test_bloom_filter_rejects_most_absent_values(pyarrow_file, present, column):
    absent = _absent_values(present)[column]
    assert len(absent) == N_ABSENT and not set(absent) & set(present[column])
    bloom = ParquetFile.open(pyarrow_file).bloom_filter(0, column)
    false_positives = sum(bloom.might_contain(v) for v in absent)
    assert false_positives <= 0.10 * N_ABSENT, f"{column}: {false_positives}/{N_ABSENT} false positives"


def test_no_bloom_filter_where_none_was_written(pyarrow_file):
    pf = ParquetFile.open(pyarrow_file)
    assert pf.has_bloom_filter(0, "no_bloom") is False
    assert pf.bloom_filter(0, "no_bloom") is None


def test_pyarrow_page_index_presence_agrees_with_pyarrow(pyarrow_file):
    pf = ParquetFile.open(pyarrow_file)
    md = pq.ParquetFile(pyarrow_file).metadata
    for rg in range(md.num_row_groups):
        for j in range(md.num_columns):
            chunk = md.row_group(rg).column(j)
            assert pf.has_column_index(rg, j) == chunk.has_column_index
            assert pf.has_offset_index(rg, j) == chunk.has_offset_index
            locations = pf.offset_index(rg, j).page_locations
            assert len(locations) == N_ROWS // 500
            assert [loc.first_row_index for loc in locations] == list(range(0, N_ROWS, 500))


# --- tpchgen-cli (parquet-rs) --------------------------------------------------------------------


@pytest.fixture(scope="module")
def lineitem(tmp_path_factory):
    # 3 MB row groups: at scale factor 0.01 (60,175 rows) parquet-rs 60 writes 2 row groups of 2 pages
    # per column chunk (its data page row limit is 20,000)
    return write_tpchgen("lineitem", tmp_path_factory.mktemp("tpch"), 0.01, row_group_bytes="3MB")


def test_tpchgen_lineitem_opens(lineitem):
    pf = ParquetFile.open(lineitem)
    md = pq.ParquetFile(lineitem).metadata
    assert "parquet-rs" in pf.created_by
    assert pf.num_rows == md.num_rows == 60_175
    assert pf.num_row_groups == md.num_row_groups > 1
    assert [c.name for c in pf.columns] == [md.schema.column(j).name for j in range(md.num_columns)]
    assert sum(rg.num_rows for rg in pf.row_groups) == pf.num_rows


def test_tpchgen_statistics_agree_with_pyarrow(lineitem):
    pf = ParquetFile.open(lineitem)
    md = pq.ParquetFile(lineitem).metadata
    checked = 0
    for rg in range(md.num_row_groups):
        for j in range(md.num_columns):
            expected = md.row_group(rg).column(j).statistics
            ours = pf.statistics(rg, j)
            name = md.schema.column(j).name
            if expected is None or not expected.has_min_max:
                continue
            assert ours is not None, (rg, name)
            assert ours.min == expected.min, (rg, name)
            assert ours.max == expected.max, (rg, name)
            assert type(ours.min) is type(expected.min), (rg, name)
            if expected.has_null_count:
                assert ours.null_count == expected.null_count, (rg, name)
            checked += 1
    assert checked == md.num_row_groups * md.num_columns


def test_tpchgen_page_index_is_consistent(lineitem):
    pf = ParquetFile.open(lineitem)
    md = pq.ParquetFile(lineitem).metadata
    for rg in range(pf.num_row_groups):
        rg_rows = pf.row_groups[rg].num_rows
        for j in range(len(pf.columns)):
            chunk = md.row_group(rg).column(j)
            assert pf.has_offset_index(rg, j) == chunk.has_offset_index
            assert pf.has_column_index(rg, j) == chunk.has_column_index
            if not chunk.has_offset_index:
                continue
            locations = pf.offset_index(rg, j).page_locations
            firsts = [loc.first_row_index for loc in locations]
            assert firsts[0] == 0 and firsts == sorted(set(firsts)) and firsts[-1] < rg_rows
            for a, b in itertools.pairwise(locations):
                assert a.offset + a.compressed_page_size <= b.offset
            if not chunk.has_column_index:
                continue
            ci = pf.column_index(rg, j)
            assert len(ci.null_pages) == len(ci.min_values) == len(ci.max_values) == len(locations)
            assert not any(ci.null_pages)  # TPC-H columns are NOT NULL
            if ci.null_counts is not None:
                assert sum(ci.null_counts) == 0
            # the pages' bounds span exactly the chunk's statistics (no truncation at these widths)
            stats = chunk.statistics
            assert min(ci.min_values) == stats.min, (rg, j)
            assert max(ci.max_values) == stats.max, (rg, j)
            for lo, hi in zip(ci.min_values, ci.max_values):
                assert lo <= hi
    # lineitem is generated in l_orderkey order, so each chunk's pages ascend
    for rg in range(pf.num_row_groups):
        assert len(pf.offset_index(rg, "l_orderkey").page_locations) > 1
        assert pf.column_index(rg, "l_orderkey").boundary_order is BoundaryOrder.ASCENDING


# --- pyspark-client vs pyspark ------------------------------------------------------------------


@pytest.mark.spark
def test_spark_version(spark):
    import pyspark

    # pyspark-client overwrites pyspark's Python files: both are pinned to 4.2.0 so Python and JVM agree
    assert pyspark.__version__ == spark.version
    assert spark.version.startswith("4.2.")


# --- floating-point zero --------------------------------------------------------------------------


@pytest.mark.parametrize("arrow_type", [pa.float64(), pa.float32()], ids=["double", "float"])
@pytest.mark.parametrize(("stored", "probe"), [(-0.0, 0.0), (0.0, -0.0)], ids=["stored_-0", "stored_+0"])
def test_bloom_filter_treats_both_zeros_as_equal(tmp_path, arrow_type, stored, probe):
    """0.0 == -0.0, so a filter holding one must not say the other is absent (pruning must stay sound:
    `WHERE x = 0.0` matches a row holding -0.0). Writers hash the PLAIN bytes, which differ for the
    two zeros, so the reader has to probe both."""
    values = [stored, 1.5, 2.5]
    path = write_pyarrow(
        pa.table({"x": pa.array(values, arrow_type)}), tmp_path, bloom_filter_options={"x": True}
    )
    bloom = ParquetFile.open(path).bloom_filter(0, "x")
    assert bloom.might_contain(stored)
    assert bloom.might_contain(probe), f"might_contain({probe!r}) is False although {stored!r} is stored"
