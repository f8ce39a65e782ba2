"""`layout.read.plan` on small files with a known layout: what a page-index-aware reader skips, and why.

Each test writes a file whose pages and row groups are known (asserted first, so a change in pyarrow's
writer shows up as a clear precondition failure), plans one predicate, and checks the selection.
Assertion messages follow pyiceberg's style: "Should skip: ..." / "Should read: ...".
"""

from __future__ import annotations

import json
import math
import random
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField

import layout.read.plan as lp
from layout.errors import UsageError
from layout.expr.bind import Kind, bind, schema_kinds, to_arrow_filter
from layout.expr.predicate import (
    And,
    Eq,
    Expr,
    Gt,
    GtEq,
    In,
    IsNaN,
    IsNull,
    Lt,
    Not,
    NotEq,
    NotIn,
    NotNull,
    Or,
)
from layout.expr.sql import parse_where
from layout.io import resolve
from layout.parquet import BoundaryOrder, ParquetFile
from layout.read.cache import MetadataCache
from layout.read.scan import read_batches, read_table
from layout.read.selection import RowSelection

N = 1000
PAGE_ROWS = 100


# -- helpers ---------------------------------------------------------------------------------------


def write(table: pa.Table, path: Path, **kw) -> Path:
    options = {"write_page_index": True, "row_group_size": table.num_rows, "max_rows_per_page": PAGE_ROWS}
    options.update(kw)
    pq.write_table(table, path, **options)
    return path


def page_starts(path: Path, column: str, rg: int = 0) -> list[int]:
    return [p.first_row_index for p in ParquetFile.open(path).offset_index(rg, column).page_locations]


def only_file(plan):
    (file_plan,) = plan.files
    return file_plan


def selection_of(plan, rg: int = 0) -> RowSelection:
    """The selection of row group `rg` of the plan's only file (empty when the row group is left out)."""
    if not plan.files:
        return RowSelection.none()
    groups = {g.index: g for g in only_file(plan).row_groups}
    return groups[rg].selection if rg in groups else RowSelection.none()


def expected_rows(path_or_table, where: Expr, columns=None) -> pa.Table:
    table = pq.read_table(path_or_table) if isinstance(path_or_table, (str, Path)) else path_or_table
    result = table.filter(to_arrow_filter(bind(where, schema_kinds(table.schema))))
    return result.select(columns) if columns is not None else result


def assert_same_rows(actual: pa.Table, expected: pa.Table) -> None:
    assert actual.schema.names == expected.schema.names
    assert actual.num_rows == expected.num_rows, f"read {actual.num_rows} rows, {expected.num_rows} match"
    assert actual.combine_chunks().equals(expected.combine_chunks())


@pytest.fixture
def sorted_file(tmp_path) -> Path:
    """`k` = 0..999 sorted ascending, one row group of ten pages of 100 rows; `v` = k mod 7, unsorted."""
    table = pa.table({"k": pa.array(range(N), pa.int64()),
                      "v": pa.array([i % 7 for i in range(N)], pa.int32())})
    path = write(table, tmp_path / "sorted.parquet")
    assert page_starts(path, "k") == list(range(0, N, PAGE_ROWS))
    assert ParquetFile.open(path).column_index(0, "k").boundary_order == BoundaryOrder.ASCENDING
    return path


# -- pages -----------------------------------------------------------------------------------------


def test_point_lookup_on_sorted_column_reads_one_page(sorted_file):
    plan = lp.plan(str(sorted_file), Eq("k", 345), cache=False)
    assert selection_of(plan) == RowSelection(((300, 400),)), (
        "Should read: only the page [300, 400) can hold k = 345; should skip the nine other pages")
    counts = plan.counts
    assert (counts.files_total, counts.files_selected) == (1, 1)
    assert (counts.row_groups_total, counts.row_groups_selected) == (1, 1)
    assert (counts.rows_total, counts.rows_selected) == (N, PAGE_ROWS)
    assert counts.pages_selected < counts.pages_total
    assert counts.bytes_selected < counts.bytes_total
    assert read_table(plan).column("k").to_pylist() == [345]


def test_point_lookup_as_sql_text_is_the_same_plan(sorted_file):
    from_sql = lp.plan(str(sorted_file), "k = 345", cache=False)
    from_tree = lp.plan(str(sorted_file), Eq("k", 345), cache=False)
    assert selection_of(from_sql) == selection_of(from_tree)
    assert from_sql.counts == from_tree.counts


def test_range_reads_a_contiguous_run_of_pages(sorted_file):
    plan = lp.plan(str(sorted_file), "k BETWEEN 250 AND 419", cache=False)
    assert selection_of(plan) == RowSelection(((200, 500),)), (
        "Should read: pages [200, 300), [300, 400), [400, 500) as one run; should skip the others")
    assert read_table(plan).column("k").to_pylist() == list(range(250, 420))


def test_point_lookup_on_descending_column(tmp_path):
    table = pa.table({"k": pa.array(range(N - 1, -1, -1), pa.int64())})
    path = write(table, tmp_path / "desc.parquet")
    assert ParquetFile.open(path).column_index(0, "k").boundary_order == BoundaryOrder.DESCENDING
    plan = lp.plan(str(path), Eq("k", 345), cache=False)
    # k = 345 is row 654, in the page [600, 700)
    assert selection_of(plan) == RowSelection(((600, 700),)), "Should read: only the page holding 345"
    assert read_table(plan).column("k").to_pylist() == [345]


def test_is_null_on_column_without_nulls_skips_everything(sorted_file):
    plan = lp.plan(str(sorted_file), IsNull("k"), cache=False)
    assert plan.counts.rows_selected == 0, "Should skip: `k` has no nulls (null_count = 0 everywhere)"
    assert plan.counts.row_groups_selected == 0 and plan.counts.files_selected == 0
    assert plan.counts.rows_total == N
    result = read_table(plan)
    assert result.num_rows == 0 and result.schema.names == ["k", "v"]


def test_is_not_null_on_column_without_nulls_needs_no_filter(sorted_file):
    plan = lp.plan(str(sorted_file), NotNull("k"), cache=False)
    (group,) = only_file(plan).row_groups
    assert group.selection == RowSelection.all(N), "Should read: every row is not null"
    assert group.all_match, "null_count = 0: every row matches, no exact filter needed"


def test_nulls_only_pages(tmp_path):
    """Pages 2 and 3 are all null (null_pages); IS NULL reads only them, k = 5 never does."""
    values = [None if 200 <= i < 400 else i for i in range(N)]
    path = write(pa.table({"k": pa.array(values, pa.int64())}), tmp_path / "nulls.parquet")
    assert ParquetFile.open(path).column_index(0, "k").null_pages[2:4] == [True, True]
    assert selection_of(lp.plan(str(path), IsNull("k"), cache=False)) == RowSelection(((200, 400),)), (
        "Should read: only the all-null pages can hold nulls")
    assert selection_of(lp.plan(str(path), Eq("k", 250), cache=False)) == RowSelection(), (
        "Should skip: 250 falls in the null pages, which hold no value")


def test_row_group_excluded_by_its_statistics_is_skipped(tmp_path):
    table = pa.table({"k": pa.array(range(N), pa.int64())})
    path = write(table, tmp_path / "groups.parquet", row_group_size=250, write_page_index=False)
    assert ParquetFile.open(path).num_row_groups == 4
    plan = lp.plan(str(path), Eq("k", 600), cache=False)
    assert plan.counts.row_groups_total == 4
    assert plan.counts.row_groups_selected == 1, "Should skip: row groups 0, 1, 3 (min/max exclude 600)"
    assert plan.counts.rows_selected == 250, "Should read: the whole row group 2 (no page index)"
    groups = {g.index: g.selection for g in only_file(plan).row_groups if g.selection}
    assert groups == {2: RowSelection.all(250)}
    assert read_table(plan).column("k").to_pylist() == [600]


# -- AND / OR across columns with different page boundaries ----------------------------------------


@pytest.fixture
def two_layouts(tmp_path) -> Path:
    """`a` (int32) in pages of 100 rows; `s` (104-byte strings) in pages of 20 rows, both ascending."""
    table = pa.table({
        "a": pa.array(range(N), pa.int32()),
        "s": pa.array([f"{i:04d}" + "x" * 100 for i in range(N)], pa.string()),
    })
    path = write(table, tmp_path / "two.parquet", data_page_size=2000, use_dictionary=False,
                 write_batch_size=10)
    assert page_starts(path, "a") == list(range(0, N, 100))
    assert page_starts(path, "s") == list(range(0, N, 20)), "precondition: 20-row string pages"
    return path


def test_and_across_columns_intersects_row_ranges(two_layouts):
    only_a = selection_of(lp.plan(str(two_layouts), GtEq("a", 150), cache=False))
    only_s = selection_of(lp.plan(str(two_layouts), Lt("s", "0310"), cache=False))
    assert only_a == RowSelection(((100, N),))
    assert only_s == RowSelection(((0, 320),)), "pages of `s` up to the one holding '0309x...'"
    plan = lp.plan(str(two_layouts), And(GtEq("a", 150), Lt("s", "0310")), cache=False)
    assert selection_of(plan) == RowSelection(((100, 320),)), (
        "Should read: rows where both columns' pages might match; should skip [0, 100) by `a` "
        "and [320, 1000) by `s`")
    assert read_table(plan).column("a").to_pylist() == list(range(150, 310))


def test_or_across_columns_unions_row_ranges(two_layouts):
    plan = lp.plan(str(two_layouts), Or(Lt("a", 50), GtEq("s", "0975")), cache=False)
    assert selection_of(plan) == RowSelection(((0, 100), (960, N))), (
        "Should read: the first page of `a` and the last string pages; should skip everything between")
    assert read_table(plan).column("a").to_pylist() == [*range(50), *range(975, N)]


def test_or_with_an_unprunable_side_reads_everything(two_layouts):
    plan = lp.plan(str(two_layouts), Or(Eq("a", 5), NotEq("s", "zzz")), cache=False)
    assert selection_of(plan) == RowSelection.all(N), "Should read: `s <> 'zzz'` might match on every page"


def test_projection_and_exact_rows(two_layouts):
    where = And(GtEq("a", 150), Lt("s", "0310"))
    plan = lp.plan(str(two_layouts), where, ["s"], cache=False)
    assert_same_rows(read_table(plan), expected_rows(two_layouts, where, ["s"]))
    batches = list(read_batches(plan))
    assert sum(b.num_rows for b in batches) == 160
    assert all(b.schema.names == ["s"] for b in batches)


# -- bloom filters ---------------------------------------------------------------------------------


def test_bloom_filter_skips_row_group_for_absent_value_inside_min_max(tmp_path):
    """Even ids only, shuffled: every page spans nearly [0, 1998], so only the bloom filter can tell
    that the odd 1001 is absent."""
    ids = list(range(0, 2 * N, 2))
    random.Random(7).shuffle(ids)
    table = pa.table({"id": pa.array(ids, pa.int64())})
    with_bloom = write(table, tmp_path / "bloom.parquet",
                       bloom_filter_options={"id": {"ndv": N, "fpp": 0.01}})
    without = write(table, tmp_path / "plain.parquet")
    pf = ParquetFile.open(with_bloom)
    assert not pf.bloom_filter(0, "id").might_contain(1001), "precondition: no false positive for 1001"
    ci = pf.column_index(0, "id")
    assert all(lo < 1001 < hi for lo, hi in zip(ci.min_values, ci.max_values, strict=True))

    plan = lp.plan(str(with_bloom), Eq("id", 1001), cache=False)
    assert plan.counts.row_groups_selected == 0, "Should skip: the bloom filter proves 1001 absent"
    assert plan.counts.rows_selected == 0 and read_table(plan).num_rows == 0

    control = lp.plan(str(without), Eq("id", 1001), cache=False)
    assert control.counts.row_groups_selected == 1, (
        "Should read: without a bloom filter min/max cannot rule it out")

    present = lp.plan(str(with_bloom), In("id", [1001, 1000]), cache=False)
    assert present.counts.row_groups_selected == 1, "Should read: 1000 is present"
    assert read_table(present).column("id").to_pylist() == [1000]


def test_bloom_filter_probes_both_zeros(tmp_path):
    """-0.0 = 0.0, but their PLAIN bytes (what the bloom filter hashes) differ."""
    table = pa.table({"f": pa.array([-0.0, 1.5, 2.5, -3.0] * 10, pa.float64())})
    path = write(table, tmp_path / "zeros.parquet", bloom_filter_options={"f": {"ndv": 10, "fpp": 0.01}})
    plan = lp.plan(str(path), Eq("f", 0.0), cache=False)
    assert plan.counts.rows_selected > 0, "Should read: -0.0 = 0.0"
    assert read_table(plan).num_rows == 10


# -- files without a page index, NaN, decimals ----------------------------------------------------


def test_file_without_page_index_works_at_row_group_granularity(tmp_path):
    table = pa.table({"k": pa.array(range(N), pa.int64())})
    path = write(table, tmp_path / "nopi.parquet", write_page_index=False, row_group_size=500)
    pf = ParquetFile.open(path)
    assert pf.column_index(0, "k") is None and pf.offset_index(0, "k") is None
    plan = lp.plan(str(path), Eq("k", 345), cache=False)
    groups = {g.index: g.selection for g in only_file(plan).row_groups if g.selection}
    assert groups == {0: RowSelection.all(500)}, (
        "Should read: all of row group 0 (no page index); should skip row group 1 by its statistics")
    assert read_table(plan).column("k").to_pylist() == [345]


def test_nan_rows_never_compare_but_isnan_finds_them(tmp_path):
    """A page of [NaN, 1.0, ...] has min = max = 1.0 (NaN is left out of statistics): `f = 1.0` must
    not call that page all-matching, and isnan(f) must still read it."""
    values = [math.nan if i % 50 == 0 else 1.0 for i in range(N)]
    path = write(pa.table({"f": pa.array(values, pa.float64())}), tmp_path / "nan.parquet")
    ci = ParquetFile.open(path).column_index(0, "f")
    assert ci is not None and ci.min_values[0] == ci.max_values[0] == 1.0
    eq = lp.plan(str(path), Eq("f", 1.0), cache=False)
    assert read_table(eq).num_rows == N - 20
    assert not any(g.all_match for g in only_file(eq).row_groups), "NaN rows do not match f = 1.0"
    nan = lp.plan(str(path), IsNaN("f"), cache=False)
    assert read_table(nan).num_rows == 20, "Should read: the NaN rows are in pages whose min = max = 1.0"
    ne = lp.plan(str(path), NotEq("f", 1.0), cache=False)
    assert read_table(ne).num_rows == 0, "NaN <> 1.0 is unknown, not true"


def test_decimal_literal_finer_than_the_column_is_not_rounded(tmp_path):
    table = pa.table({"dec": pa.array([Decimal(i).scaleb(-1) for i in range(N)], pa.decimal128(10, 2))})
    path = write(table, tmp_path / "dec.parquet")
    plan = lp.plan(str(path), "dec < 1.005", cache=False)
    assert read_table(plan).column("dec").to_pylist()[-1] == Decimal("1.00"), "Should read: 1.00 < 1.005"
    assert read_table(lp.plan(str(path), "dec = 1.005", cache=False)).num_rows == 0


def test_decimal_in_literal_finer_than_the_column(tmp_path):
    """Arrow's is_in would cast the column to the literals' type (decimal(4, 3)),
    where 123.45 does not fit."""
    values = [Decimal("123.45"), Decimal("1.00"), Decimal("1.01")] * 10
    path = write(pa.table({"dec": pa.array(values, pa.decimal128(10, 2))}), tmp_path / "dec.parquet")
    plan = lp.plan(str(path), In("dec", [Decimal("1.005"), Decimal("1.01")]), cache=False)
    assert read_table(plan).column("dec").to_pylist() == [Decimal("1.01")] * 10


# -- found by tests/read/test_plan_soundness.py ----------------------------------------------------------


def test_not_in_empty_list_is_true_for_every_row(tmp_path):
    """`k NOT IN ()` is NOT (k IN ()) = NOT FALSE: true even for a null k (as `to_arrow_filter` says);
    the all-null pages must not be skipped."""
    values = [None if 200 <= i < 400 else i for i in range(N)]
    path = write(pa.table({"k": pa.array(values, pa.int64())}), tmp_path / "nulls.parquet")
    for where in (NotIn("k", []), Not(In("k", []))):
        plan = lp.plan(str(path), where, cache=False)
        assert plan.counts.rows_selected == N, f"Should read: every row matches {where}"
        assert read_table(plan).num_rows == N == expected_rows(path, where).num_rows


def test_many_sparse_row_groups_are_read_in_plan_order(tmp_path):
    """pyarrow's `make_fragment(row_groups=[0, 2, ..., 32])` yields them as 0, 32, 2, 4, ... (hash order):
    the reader must not line up its row selections with the requested order."""
    table = pa.table({"k": pa.array(range(160), pa.int64()), "v": pa.array([f"v{i}" for i in range(160)])})
    path = write(table, tmp_path / "sparse.parquet", row_group_size=4, max_rows_per_page=2)
    # one key in each of the 17 row groups 0, 2, ..., 32: in the first page of groups 0, 4, 8, ...,
    # in the second page of the others
    keys = [4 * g + (0 if g % 4 == 0 else 2) for g in range(0, 34, 2)]
    plan = lp.plan(str(path), In("k", keys), cache=False)
    assert plan.counts.row_groups_selected == 17
    result = read_table(plan)
    assert result.column("k").to_pylist() == keys, "Should read: every key, in row-group order"
    assert result.column("v").to_pylist() == [f"v{k}" for k in keys], "each row's columns stay together"


def test_file_whose_row_groups_are_all_skipped_is_not_counted_as_selected(tmp_path):
    table = pa.table({"k": pa.array([*range(100), *range(200, 300)], pa.int64())})
    path = write(table, tmp_path / "gap.parquet", row_group_size=100)
    plan = lp.plan(str(path), Eq("k", 150), cache=False)
    assert plan.counts.row_groups_selected == 0, "Should skip: both row groups' min/max exclude 150"
    assert plan.files == ()
    assert plan.counts.files_selected == len(plan.files) == 0, (
        "Should skip: the file's statistics merged span 150, but no row group of it is read")


# -- all_match, directories, cache ----------------------------------------------------------------


def test_all_match_when_statistics_prove_every_row_matches(sorted_file):
    plan = lp.plan(str(sorted_file), GtEq("k", 0), cache=False)
    (group,) = only_file(plan).row_groups
    assert group.all_match and group.selection == RowSelection.all(N), "min(k) = 0: every row has k >= 0"
    partial = lp.plan(str(sorted_file), Eq("k", 345), cache=False)
    assert not only_file(partial).row_groups[0].all_match, "the page [300, 400) holds other keys too"


def test_directory_of_files_prunes_whole_files(tmp_path):
    root = tmp_path / "dir"
    root.mkdir()
    for part in range(3):
        table = pa.table({"k": pa.array(range(part * N, (part + 1) * N), pa.int64())})
        write(table, root / f"part-{part}.parquet")
    plan = lp.plan(str(root), In("k", [5, 2500]), cache=False)
    assert plan.counts.files_total == 3
    assert plan.counts.files_selected == 2, "Should skip: part-1 holds neither 5 nor 2500"
    assert read_table(plan).column("k").to_pylist() == [5, 2500]
    doc = plan.to_json()
    assert {Path(item["path"]).name for item in doc["selection"]} == {"part-0.parquet", "part-2.parquet"}


def test_cached_plan_equals_uncached(sorted_file):
    cache = MetadataCache()
    first = lp.plan(str(sorted_file), Eq("k", 345), cache=cache)
    again = lp.plan(str(sorted_file), Eq("k", 345), cache=cache)
    cold = lp.plan(str(sorted_file), Eq("k", 345), cache=False)
    assert selection_of(first) == selection_of(again) == selection_of(cold)
    assert first.counts == again.counts == cold.counts
    assert cache.stats().hits > 0, "Should hit: the second plan reads the footer and page index from memory"


def test_plan_without_where_selects_everything(sorted_file):
    plan = lp.plan(str(sorted_file), None, ["k"], cache=False)
    assert plan.counts.rows_selected == N and plan.counts.pages_selected == plan.counts.pages_total
    assert only_file(plan).row_groups[0].all_match
    assert_same_rows(read_table(plan), pq.read_table(sorted_file, columns=["k"]))


# -- bad input -------------------------------------------------------------------------------------


def test_unknown_column_names_the_column(sorted_file):
    with pytest.raises(UsageError, match="nosuch"):
        lp.plan(str(sorted_file), "nosuch = 1", cache=False)
    with pytest.raises(UsageError, match="nosuch"):
        lp.plan(str(sorted_file), Eq("nosuch", 1), cache=False)


def test_unknown_projected_column_names_the_column(sorted_file):
    with pytest.raises(UsageError, match="nosuch"):
        lp.plan(str(sorted_file), "k = 1", ["k", "nosuch"], cache=False)


# -- CLI -------------------------------------------------------------------------------------------

JSON_KEYS = {"files_total", "files_selected", "row_groups_total", "row_groups_selected", "pages_total",
             "pages_selected", "rows_total", "rows_selected", "bytes_total", "bytes_selected", "plan_ms",
             "selection"}


def test_cli_plan_json(sorted_file, capsys):
    from layout.cli import main

    assert main(["plan", str(sorted_file), "--where", "k = 345", "--columns", "k", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert JSON_KEYS <= set(doc), f"missing keys: {sorted(JSON_KEYS - set(doc))}"
    assert doc["rows_total"] == N and doc["rows_selected"] == PAGE_ROWS
    (item,) = doc["selection"]
    assert Path(item["path"]).name == sorted_file.name
    assert item["row_group"] == 0 and item["ranges"] == [[300, 400]]


@pytest.mark.parametrize(("where", "mentions"), [("nosuch = 1", "nosuch"), ("k = = 1", "k = = 1")])
def test_cli_plan_bad_predicate_exits_2(sorted_file, capsys, where, mentions):
    from layout.cli import main

    assert main(["plan", str(sorted_file), "--where", where]) == 2
    assert mentions in capsys.readouterr().err


def test_cli_plan_bad_column_exits_2(sorted_file, capsys):
    from layout.cli import main

    assert main(["plan", str(sorted_file), "--where", "k = 1", "--columns", "k,nosuch", "--json"]) == 2
    assert "nosuch" in capsys.readouterr().err


# -- Iceberg ---------------------------------------------------------------------------------------


@pytest.fixture
def iceberg_catalog(iceberg_catalog):
    iceberg_catalog.create_namespace_if_not_exists("plans")
    return iceberg_catalog


@pytest.fixture
def iceberg_table(iceberg_catalog):
    """`plans.events`: three appends, three files of disjoint ids."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    table = iceberg_catalog.create_table("plans.events", schema=schema)
    for part in range(3):
        ids = range(part * 100, (part + 1) * 100)
        table.append(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]},
                              schema=schema))
    table = table.refresh()
    assert len(list(table.scan().plan_files())) == 3
    return table


def test_iceberg_source_prunes_files(iceberg_table):
    plan = lp.plan("plans.events", "id = 150", cache=False)
    assert plan.counts.files_total == 3
    assert plan.counts.files_selected == 1, "Should skip: two of the three files cannot hold id 150"
    assert plan.counts.files_selected < plan.counts.files_total
    ours = read_table(plan)
    theirs = iceberg_table.scan(row_filter="id = 150").to_arrow()
    assert ours.column("id").to_pylist() == theirs.column("id").to_pylist() == [150]
    assert ours.column("name").to_pylist() == theirs.column("name").to_pylist()


def test_iceberg_source_range_matches_pyiceberg_scan(iceberg_table):
    plan = lp.plan("plans.events", "id >= 95 AND id < 205", ["id", "name"], cache=False)
    assert plan.counts.files_selected == 3
    ours = read_table(plan).sort_by("id")
    theirs = iceberg_table.scan(row_filter="id >= 95 AND id < 205", selected_fields=("id", "name")).to_arrow()
    theirs = theirs.sort_by("id")
    assert ours.num_rows == theirs.num_rows == 110
    assert ours.column("id").to_pylist() == theirs.column("id").to_pylist()
    assert ours.column("name").to_pylist() == theirs.column("name").to_pylist()
    assert pc.all(pc.equal(ours.column("id"), theirs.column("id"))).as_py()


@pytest.mark.parametrize("where",
                         [Lt("dec", 1.004), "dec < 1004e-3", Gt("dec", 1.006), NotIn("dec", [1.004])],
                         ids=["lt", "lt-sql", "gt", "not-in"])
def test_iceberg_float_literal_on_decimal_column_is_not_rounded(iceberg_catalog, where):
    """A float literal on a DECIMAL(10, 2) column means its exact value (layout.expr.bind: Decimal(repr(x))):
    1.00 < 1.004 and 1.01 > 1.006. pyiceberg would round the float to the column's scale (ROUND_HALF_UP:
    `dec < 1.00`, `dec > 1.01`), so file pruning must not hand it the unbound literal."""
    schema = pa.schema([pa.field("dec", pa.decimal128(10, 2))])
    table = iceberg_catalog.create_table("plans.prices", schema=schema)
    for value in ("1.00", "1.01"):
        table.append(pa.table({"dec": pa.array([Decimal(value)] * 3, pa.decimal128(10, 2))}, schema=schema))
    plan = lp.plan("plans.prices", where, cache=False)
    full = pa.concat_tables(pq.read_table(resolve(t.file.file_path)[1])
                            for t in table.refresh().scan().plan_files())
    expected = expected_rows(full, parse_where(where) if isinstance(where, str) else where)
    assert expected.num_rows >= 3
    assert plan.counts.files_selected >= 1, f"Should read: the file holding {expected.column('dec')[0]}"
    assert read_table(plan).column("dec").to_pylist() == expected.column("dec").to_pylist()


def test_iceberg_totals_come_from_the_manifests(iceberg_table):
    """Files the manifests rule out are not opened: their files, rows and bytes come from the manifest
    entries (record counts, column sizes), and the counts only footers hold are unknown (None)."""
    plan = lp.plan("plans.events", "id = 150", ["name"], cache=False)
    entries = [t.file for t in iceberg_table.scan().plan_files()]
    ids = {f.name: f.field_id for f in iceberg_table.schema().fields}
    assert plan.counts.files_total == len(entries) == 3
    assert plan.counts.rows_total == sum(f.record_count for f in entries) == 300
    needed = (ids["id"], ids["name"])  # the predicate's column and the projection
    assert plan.counts.bytes_total == sum(f.column_sizes[i] for f in entries for i in needed)
    assert plan.counts.row_groups_total is None and plan.counts.pages_total is None
    assert plan.counts.row_groups_selected == 1 and plan.counts.pages_selected >= 2
    exact = lp.plan("plans.events", "id = 150", ["name"], cache=False, exact_totals=True)
    assert exact.counts.row_groups_total == 3 and exact.counts.pages_total >= 6
    assert exact.counts.bytes_total == plan.counts.bytes_total, "column sizes are the footers' chunk sizes"
    doc = plan.to_json()
    assert doc["pages_total"] is None and doc["bytes_total"] == plan.counts.bytes_total


def test_iceberg_file_without_a_column_size_is_opened_for_its_totals(iceberg_catalog):
    """A column added after the first appends has no size in the older files' entries: those files are
    opened (only for their footers' totals), so the bytes stay exact."""
    schema = pa.schema([pa.field("id", pa.int64())])
    table = iceberg_catalog.create_table("plans.evolving", schema=schema)
    for part in range(2):
        table.append(pa.table({"id": pa.array(range(part * 100, (part + 1) * 100), pa.int64())}))
    with table.update_schema() as update:
        update.add_column("extra", LongType())
    table = table.refresh()
    wide = pa.schema([pa.field("id", pa.int64()), pa.field("extra", pa.int64())])
    table.append(pa.table({"id": pa.array(range(200, 300), pa.int64()),
                           "extra": pa.array(range(100), pa.int64())},
                          schema=wide))
    plan = lp.plan("plans.evolving", "id = 250", cache=False)  # the new file binds: every column, `extra` too
    exact = lp.plan("plans.evolving", "id = 250", cache=False, exact_totals=True)
    assert plan.counts.files_selected == 1 and plan.files == exact.files
    assert plan.counts == exact.counts, "both old files were opened: every total is the footers'"
    assert read_table(plan).column("extra").to_pylist() == [50]


def test_iceberg_binding_by_the_schema_is_checked_against_the_footer(iceberg_table, monkeypatch, caplog):
    """Manifests prune before any footer is read, with the predicate bound by the table's schema; when the
    footer binds it otherwise, the manifests prune again with the footer's binding, as the pages are."""
    honest = lp.plan("plans.events", "id = 150", cache=False)
    monkeypatch.setattr(lp, "iceberg_kinds", lambda table: {"id": Kind.FLOAT, "name": Kind.STRING})
    with caplog.at_level("INFO", logger=lp.__name__):
        misled = lp.plan("plans.events", "id = 150", cache=False)
    assert "pruning again" in caplog.text
    assert misled.predicate == honest.predicate and misled.files == honest.files
    assert misled.counts == honest.counts
    # the schema binds nothing: keep all, then prune
    monkeypatch.setattr(lp, "iceberg_kinds", lambda table: {})
    assert lp.plan("plans.events", "id = 150", cache=False).counts == honest.counts
    with pytest.raises(UsageError, match="nosuch"):
        lp.plan("plans.events", "nosuch = 1", cache=False)


def test_iceberg_partitioned_table_prunes_by_partition_and_counts_every_partition(iceberg_catalog):
    """Partition values prune (pyiceberg's partition evaluator);
    the files of the other partitions still count."""
    iceberg_schema = Schema(NestedField(1, "day", LongType(), required=False),
                            NestedField(2, "id", LongType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000,
                                        transform=IdentityTransform(), name="day"))
    table = iceberg_catalog.create_table("plans.days", schema=iceberg_schema, partition_spec=spec)
    arrow = pa.schema([pa.field("day", pa.int64()), pa.field("id", pa.int64())])
    for day in range(4):
        table.append(pa.table({"day": [day] * 50, "id": list(range(50))}, schema=arrow))
    plan = lp.plan("plans.days", "day = 2 AND id < 10", cache=False)
    assert (plan.counts.files_selected, plan.counts.files_total, plan.counts.rows_total) == (1, 4, 200)
    assert plan.counts.pages_total is None
    assert sorted(read_table(plan).column("id").to_pylist()) == list(range(10))
