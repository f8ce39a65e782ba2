"""Table specs: loading, error messages that name file and key, the layout hash, Spark options, sort keys."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import NullOrder, SortDirection, SortField, SortOrder
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.types import DateType, LongType, NestedField, StringType

from layout.errors import ConfigError
from layout.sizes import MiB, parse_size
from layout.spec import (
    SortKey,
    intended_boundary_orders,
    load_spec,
    load_specs,
    resolve_sort_keys,
)

DEMO_SPEC = Path(__file__).resolve().parents[2] / "dags" / "tables" / "demo_lineitem.yaml"

MINIMAL = """\
table: sales.orders
owner: {name: Sales Team, email: sales@example.com}
"""


def write(directory: Path, text: str, name: str = "orders.yaml") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def minimal_and(extra: str) -> str:
    """The minimal spec plus `extra` (an indented triple-quoted block)."""
    return MINIMAL + textwrap.dedent(extra)


def error_of(directory: Path, text: str) -> str:
    path = write(directory, text)
    with pytest.raises(ConfigError) as caught:
        load_spec(path)
    message = str(caught.value)
    # Every line of every error names the file.
    assert all(line.startswith(f"{path}:") for line in message.splitlines()), message
    return message


# --- loading ----------------------------------------------------------------------------------------


def test_demo_spec_loads_with_its_settings():
    spec = load_spec(DEMO_SPEC)
    assert (spec.table, spec.catalog) == ("demo.lineitem", "lakesort")
    assert spec.sort.strategy == "linear"
    assert [(k.column, k.direction, k.nulls) for k in spec.sort.keys] == [
        ("l_shipdate", "asc", "first"), ("l_orderkey", "asc", "first"),
    ]
    assert spec.target_file_size == 8 * MiB and spec.small_file_size == 4 * MiB
    assert spec.writer.page_row_count_limit == 2000 and spec.writer.compression == "zstd"
    assert set(spec.writer.bloom_filters) == {"l_orderkey"}
    assert spec.verify.bloom_filter_columns == ("l_orderkey",)
    assert ({p.name for p in spec.probes}
            == {"ship_date_point", "ship_date_week", "order_lookup", "ship_modes"})
    assert load_specs(DEMO_SPEC.parent)[0].table == "demo.lineitem"


def test_minimal_spec_gets_documented_defaults(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL))
    assert spec.catalog is None and spec.sort.keys == () and spec.keys is None and spec.probes == ()
    assert spec.target_file_size == 128 * MiB
    assert spec.small_file_size == 96 * MiB  # 0.75 x target
    assert spec.min_small_files == 2 and spec.max_group_size == 1024 * MiB
    assert spec.verify.column_index_columns == "all"
    assert spec.verify.max_file_size == 256 * MiB and spec.verify.min_file_size == 0
    assert spec.verify.max_row_group_size == 2 * spec.writer.row_group_size
    assert spec.verify.bloom_filter_columns == ()


def test_nulls_default_follows_direction(tmp_path):
    spec = load_spec(write(tmp_path, minimal_and("""\
        sort:
          keys: [{column: a}, {column: b, direction: desc}, {column: c, direction: desc, nulls: first}]
        """)))
    assert [k.nulls for k in spec.sort.keys] == ["first", "last", "first"]


@pytest.mark.parametrize(("text", "size"), [
    ("512KiB", 512 * 1024), ("128MiB", 128 * MiB), ("1GiB", 1024 * MiB), ("1.5GiB", 1536 * MiB),
    ("4096", 4096), (4096, 4096), ("100B", 100),
])
def test_sizes_accept_binary_units(text, size):
    assert parse_size(text) == size


def test_load_specs_sorted_and_duplicates_name_both_files(tmp_path):
    write(tmp_path, MINIMAL, "b.yaml")
    write(tmp_path, MINIMAL.replace("sales.orders", "sales.items"), "a.yml")
    (tmp_path / "notes.txt").write_text("not a spec")
    assert [s.table for s in load_specs(tmp_path)] == ["sales.items", "sales.orders"]

    write(tmp_path, MINIMAL, "c.yaml")
    with pytest.raises(ConfigError) as caught:
        load_specs(tmp_path)
    message = str(caught.value)
    assert "c.yaml" in message and "b.yaml" in message and "sales.orders" in message


# --- errors name the file and the key ---------------------------------------------------------------


def test_unknown_key_at_top_level_suggests_the_close_one(tmp_path):
    message = error_of(tmp_path, MINIMAL + "trget_file_size: 8MiB\n")
    assert "trget_file_size: unknown key" in message and "'target_file_size'" in message


def test_unknown_nested_key_lists_valid_keys(tmp_path):
    message = error_of(tmp_path, MINIMAL + "writer:\n  bloom_filters:\n    id: {ndv: 10, fp: 0.1}\n")
    assert "writer.bloom_filters.id.fp: unknown key" in message and "ndv, fpp" in message


def test_bad_enum_lists_valid_values(tmp_path):
    message = error_of(tmp_path, MINIMAL + "sort:\n  keys:\n    - {column: a, direction: up}\n")
    assert message.endswith("orders.yaml: sort.keys[0].direction: expected one of 'asc', 'desc', got 'up'")


def test_several_errors_one_per_line(tmp_path):
    message = error_of(tmp_path, MINIMAL + "sort: {strategy: spiral}\nwriter: {compression: brotli}\n")
    lines = message.splitlines()
    assert len(lines) == 2
    assert "sort.strategy: expected one of 'linear', 'zorder', 'hilbert', got 'spiral'" in lines[0]
    assert ("writer.compression: expected one of 'zstd', 'snappy', 'gzip', 'lz4_raw', 'uncompressed'"
            in lines[1])


def test_decimal_size_units_are_refused_with_a_hint(tmp_path):
    message = error_of(tmp_path, MINIMAL + "target_file_size: 128MB\n")
    assert "target_file_size:" in message and "128MiB" in message


def test_bad_size_string(tmp_path):
    message = error_of(tmp_path, MINIMAL + "writer: {page_size: lots}\n")
    assert "writer.page_size:" in message and "'lots'" in message


def test_negative_numbers(tmp_path):
    message = error_of(tmp_path, MINIMAL + "target_file_size: -1\nwriter: {page_row_count_limit: -5}\n")
    assert "target_file_size: input should be greater than 0, got -1" in message
    assert "writer.page_row_count_limit: input should be greater than 0, got -5" in message


def test_bad_fpp(tmp_path):
    message = error_of(tmp_path, MINIMAL + "writer:\n  bloom_filters:\n    id: {ndv: 10, fpp: 1.5}\n")
    assert "writer.bloom_filters.id.fpp:" in message and "1.5" in message


def test_compression_level_only_for_zstd_and_gzip(tmp_path):
    message = error_of(tmp_path, MINIMAL + "writer: {compression: snappy, compression_level: 3}\n")
    assert "writer.compression_level: compression 'snappy' has no level" in message
    message = error_of(tmp_path, MINIMAL + "writer: {compression: zstd, compression_level: 40}\n")
    assert "writer.compression_level: zstd levels are 1 to 22, got 40" in message


def test_duplicate_probe_names(tmp_path):
    message = error_of(tmp_path, minimal_and("""\
        probes:
          - {name: by_id, where: "id = 1"}
          - {name: by_id, where: "id = 2"}
        """))
    assert "probes: duplicate probe name 'by_id' (probes[0] and probes[1])" in message


def test_unparsable_probe_names_the_probe_and_the_parser_message(tmp_path):
    message = error_of(tmp_path, minimal_and("""\
        probes:
          - {name: ok, where: "id = 1"}
          - {name: broken, where: "id = = 2"}
        """))
    assert len(message.splitlines()) == 1
    assert "probes[1].where: probe 'broken': cannot parse the predicate 'id = = 2'" in message


def test_zorder_needs_two_keys(tmp_path):
    message = error_of(tmp_path, MINIMAL + "sort: {strategy: zorder, keys: [{column: a}]}\n")
    assert "sort: zorder interleaves at least 2 columns, got 1" in message


def test_hilbert_takes_two_to_four_keys(tmp_path):
    message = error_of(tmp_path, MINIMAL + "sort: {strategy: hilbert, keys: [{column: a}]}\n")
    assert "sort: hilbert interleaves at least 2 columns, got 1" in message
    five = ", ".join(f"{{column: c{i}}}" for i in range(5))
    message = error_of(tmp_path, MINIMAL + f"sort: {{strategy: hilbert, keys: [{five}]}}\n")
    assert (
        "sort: hilbert takes at most 4 columns, got 5 (c0, c1, c2, c3, c4); drop keys or use strategy: zorder"
        in message
    )
    spec = load_spec(write(tmp_path,
                           MINIMAL + "sort: {strategy: hilbert, keys: [{column: a}, {column: b}]}\n"))
    assert spec.sort.is_curve and spec.sort.strategy == "hilbert"
    assert not load_spec(write(tmp_path, MINIMAL)).sort.is_curve


def test_probe_weight_defaults_to_one_and_must_be_positive(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL + "probes: [{name: a, where: 'x = 1'}, {name: b, where: 'x = "
                                               "2', weight: 2.5}]\n"))
    assert [p.weight for p in spec.probes] == [1.0, 2.5]
    message = error_of(tmp_path, MINIMAL + "probes: [{name: a, where: 'x = 1', weight: 0}]\n")
    assert "probes[0].weight" in message and "greater than 0" in message


def test_invalid_merge_mode(tmp_path):
    message = error_of(tmp_path, MINIMAL + "keys: {columns: [id], sequence: seq, merge: last}\n")
    assert "keys.merge: expected one of 'deduplicate', 'first-row', got 'last'" in message


def test_missing_required_key_and_bad_email(tmp_path):
    message = error_of(tmp_path, "table: sales.orders\n")
    assert "owner: required key is missing" in message
    message = error_of(tmp_path, "table: sales.orders\nowner: {name: x, email: nobody}\n")
    assert "owner.email:" in message


def test_yaml_errors_name_the_line(tmp_path):
    message = error_of(tmp_path, MINIMAL + "sort:\n  keys: [{column: a}\n")
    assert "orders.yaml:5:" in message and "invalid YAML" in message
    message = error_of(tmp_path, MINIMAL + "target_file_size: 1MiB\ntarget_file_size: 2MiB\n")
    assert "duplicate key 'target_file_size'" in message


# --- spec_hash --------------------------------------------------------------------------------------

HASHED = MINIMAL + """\
sort:
  keys: [{column: a}, {column: b, direction: desc}]
target_file_size: 64MiB
writer: {compression: zstd, bloom_filters: {a: {ndv: 100}}}
"""


def hash_of(tmp_path: Path, text: str) -> str:
    return load_spec(write(tmp_path, text, "hashed.yaml")).spec_hash


def test_spec_hash_ignores_key_order_and_formatting(tmp_path):
    first = hash_of(tmp_path, HASHED)
    reordered = yaml.safe_load(HASHED)
    reordered = dict(reversed(list(reordered.items())))
    reordered["target_file_size"] = 64 * MiB  # the same size, spelled in bytes
    reordered["sort"]["keys"][0]["nulls"] = "first"  # the default, spelled out
    same = hash_of(tmp_path, yaml.safe_dump(reordered, default_flow_style=False, sort_keys=False))
    assert len(first) == 16 and same == first


def test_spec_hash_changes_with_the_layout(tmp_path):
    first = hash_of(tmp_path, HASHED)
    assert hash_of(tmp_path, HASHED.replace("compression: zstd", "compression: snappy")) != first
    assert hash_of(tmp_path, HASHED.replace("{column: b, direction: desc}", "{column: b}")) != first


def test_spec_hash_is_the_same_for_what_writes_the_same(tmp_path):
    """An unset dictionary page size writes parquet-mr's default, 1 MiB: set to that (as a table's
    write.parquet.dict-size-bytes fills it in where the spec is silent), the layout is the same."""
    first = hash_of(tmp_path, HASHED)
    with_default = HASHED.replace("compression: zstd,", "compression: zstd, dictionary_page_size: 1MiB,")
    assert with_default != HASHED and hash_of(tmp_path, with_default) == first
    assert (
        hash_of(tmp_path, with_default.replace("dictionary_page_size: 1MiB", "dictionary_page_size: 2MiB"))
        != first
    )


def test_spec_hash_ignores_owner_and_probes(tmp_path):
    first = hash_of(tmp_path, HASHED)
    other_owner = HASHED.replace("Sales Team, email: sales@", "Finance, email: fin@")
    assert hash_of(tmp_path, other_owner) == first
    assert hash_of(tmp_path, HASHED + "probes: [{name: p, where: 'a = 1'}]\n") == first


# --- Spark writer options ---------------------------------------------------------------------------


def test_spark_options():
    options = load_spec(DEMO_SPEC).writer.spark_options()
    assert options == {
        "compression": "zstd",
        "parquet.compression.codec.zstd.level": "3",
        "parquet.block.size": str(4 * MiB),
        "parquet.page.size": str(1 * MiB),
        "parquet.page.row.count.limit": "2000",
        "parquet.columnindex.truncate.length": "64",
        "parquet.enable.dictionary": "true",
        "parquet.dictionary.page.size": str(1 * MiB),  # parquet-mr's default, passed so no cluster's applies
        # Adaptive filters: the smallest of 5 candidates (16 KiB, the size for ndv 10,000 at fpp 0.01, down
        # to 1 KiB) that holds the values a file holds.
        "parquet.bloom.filter.adaptive.enabled": "true",
        "parquet.bloom.filter.max.bytes": "16384",
        "parquet.bloom.filter.enabled#l_orderkey": "true",
        "parquet.bloom.filter.candidates.number#l_orderkey": "5",
        "parquet.bloom.filter.fpp#l_orderkey": "0.01",
        # parquet-mr writes no bloom filter for an all-dictionary chunk: off for bloom-filtered columns.
        "parquet.enable.dictionary#l_orderkey": "false",
    }


def test_spark_options_uncompressed_and_gzip_level(tmp_path):
    spec = load_spec(write(tmp_path,
                           MINIMAL + "writer: {compression: uncompressed, statistics_truncate_length: 32}\n"))
    options = spec.writer.spark_options()
    assert options["compression"] == "none" and options["parquet.statistics.truncate.length"] == "32"
    spec = load_spec(
        write(tmp_path, MINIMAL + "writer: {compression: gzip, compression_level: 9, dictionary: false}\n")
    )
    options = spec.writer.spark_options()
    assert options["zlib.compress.level"] == "BEST_COMPRESSION"
    assert options["parquet.enable.dictionary"] == "false"


# --- sort keys from the Iceberg table ---------------------------------------------------------------


@pytest.fixture
def catalog(iceberg_catalog):
    iceberg_catalog.create_namespace_if_not_exists("sales")
    return iceberg_catalog


SCHEMA = Schema(
    NestedField(1, "order_id", LongType(), required=False),
    NestedField(2, "order_date", DateType(), required=False),
    NestedField(3, "region", StringType(), required=False),
)


def test_resolve_sort_keys_from_the_table_sort_order(catalog, tmp_path):
    order = SortOrder(
        SortField(source_id=2, transform=IdentityTransform(), direction=SortDirection.DESC,
                  null_order=NullOrder.NULLS_LAST),
        SortField(source_id=1, transform=IdentityTransform(), direction=SortDirection.ASC,
                  null_order=NullOrder.NULLS_FIRST),
    )
    table = catalog.create_table("sales.orders", schema=SCHEMA, sort_order=order)
    spec = load_spec(write(tmp_path, MINIMAL))
    keys = resolve_sort_keys(spec, table)
    assert keys == (
        SortKey(column="order_date", direction="desc", nulls="last"),
        SortKey(column="order_id", direction="asc", nulls="first"),
    )
    assert intended_boundary_orders(spec, keys) == {"order_date": "DESCENDING"}

    # The spec's own keys win over the table's.
    spec = load_spec(write(tmp_path, MINIMAL + "sort: {keys: [{column: region}]}\n"))
    assert [k.column for k in resolve_sort_keys(spec, table)] == ["region"]


def test_resolve_sort_keys_needs_a_sort_somewhere(catalog, tmp_path):
    table = catalog.create_table("sales.orders", schema=SCHEMA)
    path = write(tmp_path, MINIMAL)
    with pytest.raises(ConfigError, match="no sort keys") as caught:
        resolve_sort_keys(load_spec(path), table)
    assert str(caught.value).startswith(f"{path}: sort:")


def test_resolve_sort_keys_rejects_unknown_columns_with_close_matches(catalog, tmp_path):
    table = catalog.create_table("sales.orders", schema=SCHEMA)
    path = write(tmp_path, MINIMAL + "sort: {keys: [{column: order_id}, {column: order_dat}]}\n")
    with pytest.raises(ConfigError) as caught:
        resolve_sort_keys(load_spec(path), table)
    message = str(caught.value)
    assert message.startswith(f"{path}: sort.keys[1].column: 'order_dat' is not a column of sales.orders")
    assert "'order_date'" in message


def test_resolve_sort_keys_takes_transforms_and_refuses_void(catalog, tmp_path):
    """A bucket order is sorted by (issue #54); a void one is refused naming the field and the fix."""
    from pyiceberg.transforms import VoidTransform

    order = SortOrder(SortField(source_id=1, transform=BucketTransform(16)))
    table = catalog.create_table("sales.orders", schema=SCHEMA, sort_order=order)
    keys = resolve_sort_keys(load_spec(write(tmp_path, MINIMAL)), table)
    assert [(k.column, k.transform) for k in keys] == [("order_id", "bucket[16]")]
    void = catalog.create_table("sales.void", schema=SCHEMA,
                                sort_order=SortOrder(SortField(source_id=1, transform=VoidTransform())))
    with pytest.raises(ConfigError, match=r"field 0 sorts by void\(order_id\).*fix: set sort.keys"):
        resolve_sort_keys(load_spec(write(tmp_path, MINIMAL)), void)


def test_boundary_orders_derived_or_given(tmp_path):
    keys = (SortKey(column="a"), SortKey(column="b", direction="desc"))
    spec = load_spec(write(tmp_path, MINIMAL))
    assert intended_boundary_orders(spec, keys) == {"a": "ASCENDING"}
    zorder = load_spec(write(tmp_path, MINIMAL + "sort: {strategy: zorder}\n"))
    assert intended_boundary_orders(zorder, keys) == {}
    hilbert = load_spec(write(tmp_path, MINIMAL + "sort: {strategy: hilbert}\n"))
    assert intended_boundary_orders(hilbert, keys) == {}
    given = load_spec(write(tmp_path, MINIMAL + "verify: {boundary_order: {b: UNORDERED}}\n"))
    assert intended_boundary_orders(given, keys) == {"b": "UNORDERED"}
