"""A spec resolved against its table's write properties (layout.spec.table_properties): per setting, what the
spec file sets wins, then the table's property, then lakesort's default; derived settings follow the resolved
values; the hash covers them; a property lakesort cannot honour is refused naming the table,
property and fix."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from layout.errors import ConfigError
from layout.sizes import GiB, MiB
from layout.spec import parse_spec, resolve_spec
from layout.spec.table_properties import write_properties

BASE = {"table": "sales.orders", "owner": {"name": "Sales", "email": "sales@example.com"}}
COLUMNS = ("id", "customer", "day")

# setting -> (where the spec sets it, the table property, lakesort's default, a spec value, a property value)
SETTINGS = {
    "row_group_size": ("writer", "write.parquet.row-group-size-bytes", 128 * MiB, 4 * MiB, 8 * MiB),
    "page_size": ("writer", "write.parquet.page-size-bytes", 1 * MiB, 64 * 1024, 256 * 1024),
    "page_row_count_limit": ("writer", "write.parquet.page-row-limit", 20_000, 1_000, 5_000),
    "dictionary_page_size": ("writer", "write.parquet.dict-size-bytes", None, 512 * 1024, 2 * MiB),
    "compression": ("writer", "write.parquet.compression-codec", "zstd", "gzip", "snappy"),
    "target_file_size": ("top", "write.target-file-size-bytes", 128 * MiB, 32 * MiB, 64 * MiB),
}


def spec_with(writer: dict | None = None, **top):
    return parse_spec({**BASE, **top, **({"writer": writer} if writer is not None else {})},
                      source="orders.yaml")


def value_of(spec, setting: str):
    where = SETTINGS[setting][0]
    return getattr(spec.writer if where == "writer" else spec, setting)


@given(in_spec=st.sets(st.sampled_from(sorted(SETTINGS))),
       in_table=st.sets(st.sampled_from(sorted(SETTINGS))))
def test_the_spec_wins_then_the_table_then_the_default(in_spec, in_table):
    writer = {s: SETTINGS[s][3] for s in in_spec if SETTINGS[s][0] == "writer"}
    top = {s: SETTINGS[s][3] for s in in_spec if SETTINGS[s][0] == "top"}
    properties = {SETTINGS[s][1]: str(SETTINGS[s][4]) for s in in_table}
    resolved = resolve_spec(spec_with(writer, **top), properties, columns=COLUMNS)
    for setting, (_, _, default, spec_value, table_value) in SETTINGS.items():
        expected = spec_value if setting in in_spec else table_value if setting in in_table else default
        assert value_of(resolved, setting) == expected, setting


def test_a_setting_written_in_the_file_wins_even_at_its_default_value():
    spec = spec_with({"row_group_size": "128MiB", "compression": "zstd"})
    resolved = resolve_spec(spec, {"write.parquet.row-group-size-bytes": str(8 * MiB),
                                   "write.parquet.compression-codec": "gzip"})
    assert (resolved.writer.row_group_size, resolved.writer.compression) == (128 * MiB, "zstd")
    assert resolved is spec  # nothing the table gives applies: the spec as it was


def test_no_write_properties_leave_the_spec_and_its_hash_alone():
    spec = spec_with()
    assert resolve_spec(spec, {}) is spec
    unrelated = {"format-version": "2", "commit.retry.num-retries": "4",
                 "write.parquet.row-group-size-bytes": "1"}
    assert write_properties(unrelated) == {"write.parquet.row-group-size-bytes": "1"}


def test_the_hash_covers_the_resolved_values():
    spec = spec_with()
    small = resolve_spec(spec, {"write.parquet.page-row-limit": "1000"})
    other = resolve_spec(spec, {"write.parquet.page-row-limit": "2000"})
    assert len({spec.spec_hash, small.spec_hash, other.spec_hash}) == 3
    # The same values hash alike wherever they come from.
    assert small.spec_hash == spec_with({"page_row_count_limit": 1000}).spec_hash
    assert small.source == "orders.yaml"


def test_derived_settings_follow_the_resolved_sizes_unless_the_file_sets_them():
    properties = {"write.parquet.row-group-size-bytes": str(512 * MiB),
                  "write.target-file-size-bytes": str(2 * GiB)}
    resolved = resolve_spec(spec_with(), properties)
    assert resolved.verify.max_row_group_size == 1 * GiB and resolved.verify.max_file_size == 4 * GiB
    assert resolved.small_file_size == 3 * GiB // 2
    assert resolved.max_group_size == 2 * GiB  # its default (1GiB) grows to the table's larger target
    pinned = resolve_spec(spec_with(verify={"max_row_group_size": "300MiB"}, small_file_size="100MiB"),
                          properties)
    assert pinned.verify.max_row_group_size == 300 * MiB and pinned.small_file_size == 100 * MiB


def test_the_tables_level_goes_with_the_tables_codec():
    properties = {"write.parquet.compression-codec": "GZIP", "write.parquet.compression-level": "9"}
    assert resolve_spec(spec_with(), properties).writer.compression_level == 9
    # The spec chose another codec: the table's level is for gzip, not for it.
    other = resolve_spec(spec_with({"compression": "snappy"}), properties).writer
    assert (other.compression, other.compression_level) == ("snappy", None)
    # Iceberg's codec is zstd when the table names none: a level alone is zstd's.
    assert resolve_spec(spec_with(), {"write.parquet.compression-level": "19"}).writer.compression_level == 19
    assert resolve_spec(spec_with({"compression_level": 3}), properties).writer.compression_level == 3


def test_bloom_filter_properties_become_the_writers_filters():
    properties = {
        "write.parquet.bloom-filter-enabled.column.customer": "true",
        "write.parquet.bloom-filter-fpp.column.customer": "0.05",
        "write.parquet.bloom-filter-enabled.column.id": "TRUE",
        "write.parquet.bloom-filter-ndv.column.id": "5000",
        "write.parquet.bloom-filter-enabled.column.day": "false",
        "write.parquet.bloom-filter-max-bytes": str(64 * 1024),
    }
    resolved = resolve_spec(spec_with(), properties, columns=COLUMNS)
    blooms = resolved.writer.bloom_filters
    assert sorted(blooms) == ["customer", "id"] and resolved.verify.bloom_filter_columns == ("customer", "id")
    assert (blooms["id"].ndv, blooms["id"].fpp, blooms["customer"].fpp) == (5000, 0.01, 0.05)
    # Without an ndv, the filter is sized to fill max-bytes at its fpp, as Iceberg's writer sizes it.
    options = resolved.writer.spark_options()
    assert options["parquet.bloom.filter.max.bytes"] == str(64 * 1024)
    assert (options["parquet.bloom.filter.enabled#customer"] == "true"
            and "parquet.bloom.filter.enabled#day" not in options)
    # The spec's filters win whole.
    mine = resolve_spec(spec_with({"bloom_filters": {"day": {"ndv": 100}}}), properties, columns=COLUMNS)
    assert list(mine.writer.bloom_filters) == ["day"]


@pytest.mark.parametrize(("properties", "problem", "setting"), [
    ({"write.parquet.compression-codec": "brotli"}, "cannot write that codec", "writer.compression"),
    ({"write.parquet.compression-codec": "lz4"}, "cannot write that codec", "writer.compression"),
    ({"write.parquet.compression-level": "30"}, "zstd levels are 1 to 22, got 30",
     "writer.compression_level"),
    ({"write.parquet.compression-codec": "snappy", "write.parquet.compression-level": "3"}, "has no level",
     "writer.compression_level"),
    ({"write.parquet.compression-level": "high"}, "expected a whole number", "writer.compression_level"),
    ({"write.parquet.row-group-size-bytes": "128MB"}, "expected a positive whole number",
     "writer.row_group_size"),
    ({"write.parquet.page-row-limit": "0"}, "expected a positive whole number",
     "writer.page_row_count_limit"),
    ({"write.target-file-size-bytes": "-1"}, "expected a positive whole number", "target_file_size"),
    ({"write.parquet.bloom-filter-enabled.column.nope": "true"}, "'nope' is not a column of sales.orders",
     "writer.bloom_filters"),
    ({"write.parquet.bloom-filter-enabled.column.id": "yes"}, "expected true or false",
     "writer.bloom_filters"),
    ({"write.parquet.bloom-filter-enabled.column.id": "true",
      "write.parquet.bloom-filter-fpp.column.id": "1.5"},
     "expected a probability", "writer.bloom_filters"),
])
def test_a_property_lakesort_cannot_honour_is_refused_naming_it_and_the_fix(properties, problem, setting):
    with pytest.raises(ConfigError) as refused:
        resolve_spec(spec_with(), properties, columns=COLUMNS)
    message = str(refused.value)
    name = list(properties)[-1]  # the property refused: the last one given
    assert message.startswith(f"orders.yaml: the Iceberg table sales.orders has {name}=")
    assert problem in message and setting in message and "TBLPROPERTIES" in message


def test_a_spec_that_no_longer_fits_the_tables_values_is_refused():
    spec = spec_with(small_file_size="100MiB")
    with pytest.raises(ConfigError, match=r"orders\.yaml: sales\.orders: the spec and the table's write "
                                          r"properties \(write\.target-file-size-bytes=67108864\) do not go "
                                          r"together: small_file_size .* must not exceed target_file_size"):
        resolve_spec(spec, {"write.target-file-size-bytes": str(64 * MiB)})
