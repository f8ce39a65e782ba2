"""A compaction writes with the table's own write properties where the spec is silent, and with the spec where
it is not: the committed files' footers show the codec, row group sizes, page row limits and bloom filter the
table asks for; the plan carries the resolved settings and the run their hash; verification expects them; a
data file records the table's sort order id only when its rows follow that order. The job runs in process
(`in_process_job`); planning, verification and the commit are the real ones."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table.sorting import NullOrder
from pyiceberg.transforms import IdentityTransform

from layout.compaction.pipeline.config import RunConfig
from layout.compaction.pipeline.driver import compact
from layout.compaction.planning.planner import plan_rewrite
from layout.parquet import ParquetFile
from layout.spec import SortKey, load_spec, resolve_for_table, written_sort_order_id

OWNER = "owner: {name: Test Team, email: test@example.com}"
ROWS = 40_000
PROPERTIES = {
    "write.parquet.compression-codec": "zstd",
    "write.parquet.row-group-size-bytes": str(16 * 1024),
    "write.parquet.page-row-limit": "1000",
    "write.parquet.bloom-filter-enabled.column.customer": "true",
    "write.parquet.bloom-filter-ndv.column.customer": "4000",
    "write.target-file-size-bytes": str(96 * 1024),
}


def _table(catalog, name: str):
    """40,000 rows in four appends (small files), sorted by `k` in the table's own sort order."""
    catalog.create_namespace_if_not_exists("t")
    data = pa.table({
        "k": pa.array(range(ROWS), pa.int64()),
        "customer": pa.array([f"customer-{i * 7919 % 4000:05d}" for i in range(ROWS)]),
        "v": pa.array([i * 0.5 for i in range(ROWS)], pa.float64()),
    })
    table = catalog.create_table(f"t.{name}", schema=data.schema, properties=PROPERTIES)
    with table.update_sort_order() as order:
        # Iceberg's default for asc (pyiceberg's is last)
        order.asc("k", IdentityTransform(), NullOrder.NULLS_FIRST)
    for i in range(4):  # shuffled slices, so the files overlap in k
        table.append(data.take(list(range(i, ROWS, 4))).cast(table.schema().as_arrow()))
    return table.refresh()


def _spec(registry, name: str, extra: str = "") -> str:
    path = registry / f"{name}.yaml"
    path.write_text(f"table: t.{name}\ncatalog: lakesort\n{OWNER}\n{extra}")
    return str(path)


def _footers(table) -> list[tuple[object, pq.FileMetaData, ParquetFile]]:
    files = [task.file for task in table.refresh().scan().plan_files()]
    out = []
    for f in files:
        path = f.file_path.removeprefix("file://")
        out.append((f, pq.read_metadata(path), ParquetFile.open(path)))
    return out


def _page_rows(pf: ParquetFile, rg: int, column: str) -> list[int]:
    locations = pf.offset_index(rg, column).page_locations
    starts = [p.first_row_index for p in locations] + [pf.metadata.row_groups[rg].num_rows]
    return [b - a for a, b in itertools.pairwise(starts)]


@pytest.mark.spark
def test_a_spec_silent_on_the_writer_writes_with_the_tables_properties(
    iceberg_catalog, registry, in_process_job
):
    table = _table(iceberg_catalog, "props")
    spec = load_spec(_spec(registry, "props"))
    result = compact("t.props", spec=spec)
    assert result.snapshot_id is not None
    (plan,) = in_process_job
    assert plan.target_file_size == 96 * 1024
    assert plan.writer_options["parquet.block.size"] == str(16 * 1024)
    assert plan.writer_options["parquet.page.row.count.limit"] == "1000"
    assert plan.writer_options["compression"] == "zstd"
    assert plan.writer_options["parquet.bloom.filter.enabled#customer"] == "true"
    # The run's hash is the resolved spec's: not the file's alone.
    resolved = resolve_for_table(spec, table)
    assert resolved.spec_hash != spec.spec_hash
    assert table.refresh().current_snapshot().summary["lakesort.spec-hash"] == plan.spec_hash

    footers = _footers(table)
    assert len(footers) == sum(g.output_files for g in plan.groups) > 1  # the table's target file size
    assert sum(m.num_rows for _, m, _ in footers) == ROWS
    for data_file, metadata, pf in footers:
        assert data_file.sort_order_id == table.sort_order().order_id == 1  # rows in the table's order
        assert metadata.num_row_groups > 1  # 16 KiB row groups, where lakesort's default is 128 MiB
        for rg in range(metadata.num_row_groups):
            for c in range(metadata.num_columns):
                assert metadata.row_group(rg).column(c).compression == "ZSTD"
            assert max(_page_rows(pf, rg, "k")) <= 1000
            assert pf.has_bloom_filter(rg, "customer") and not pf.has_bloom_filter(rg, "k")
            assert pf.bloom_filter(rg, "customer") is not None
    # Verification (the real one, which passed) expected the table's settings: its bounds come from them.
    assert resolved.verify.max_row_group_size == 2 * 16 * 1024
    assert resolved.verify.bloom_filter_columns == ("customer",)

    # A property changed since is a config change: the next plan's hash is the one the same edit of the spec
    # file would give (what the planner then does with the files written under the old one is its policy).
    with table.transaction() as tx:
        tx.set_properties({"write.parquet.page-row-limit": "2000"})
    table = table.refresh()
    again = plan_rewrite(table, RunConfig.of(spec).resolved(table).spec)
    edited = load_spec(_spec(registry, "props", "writer: {page_row_count_limit: 2000}\n"))
    assert again.spec_hash != plan.spec_hash
    assert again.spec_hash == plan_rewrite(table, resolve_for_table(edited, table)).spec_hash


@pytest.mark.spark
def test_a_setting_the_spec_sets_wins_over_the_tables(iceberg_catalog, registry, in_process_job):
    table = _table(iceberg_catalog, "mine")
    # The spec's keys are the table's order: the files still record its id.
    spec = load_spec(_spec(registry, "mine", "sort: {keys: [{column: k}]}\nwriter: {page_row_count_limit: "
                                             "300, compression: gzip}\nverify: {max_file_size: 1MiB}\n"))
    compact("t.mine", spec=spec)
    (plan,) = in_process_job
    assert plan.writer_options["parquet.page.row.count.limit"] == "300"
    assert plan.writer_options["parquet.block.size"] == str(16 * 1024)  # the rest still the table's
    for data_file, metadata, pf in _footers(table):
        assert data_file.sort_order_id == 1
        for rg in range(metadata.num_row_groups):
            assert metadata.row_group(rg).column(0).compression == "GZIP"
            assert max(_page_rows(pf, rg, "k")) <= 300
            assert pf.has_bloom_filter(rg, "customer")


def test_the_sort_order_id_only_for_rows_in_the_tables_order(iceberg_catalog):
    table = _table(iceberg_catalog, "ordered")
    k, customer = SortKey(column="k"), SortKey(column="customer")
    assert written_sort_order_id(table, "linear", [k]) == 1
    assert written_sort_order_id(table, "linear", [SortKey(column="k", direction="desc")]) is None
    assert written_sort_order_id(table, "linear", [SortKey(column="k", nulls="last")]) is None
    assert written_sort_order_id(table, "linear", [k, customer]) is None
    assert written_sort_order_id(table, "zorder", [k, customer]) is None
    iceberg_catalog.create_table("t.unsorted", schema=table.schema())
    assert written_sort_order_id(iceberg_catalog.load_table("t.unsorted"), "linear", [k]) is None
