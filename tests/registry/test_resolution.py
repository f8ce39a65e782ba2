"""A table's configuration from its sources: the precedence per key (against a brute-force oracle), the
property keys, the namespace defaults file and the errors that name the table, the key and the fix."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout.errors import ConfigError
from layout.registered import spec_files
from layout.registry import PROPERTY_OF, SPEC_KEYS
from layout.registry.defaults import Default, load_defaults
from layout.registry.keys import nest, parse_property
from layout.registry.resolution import resolve_layers
from layout.spec import SortKey, parse_spec

TABLE = "ns.t"
COLUMNS = ["c0", "c1", "c2", "c3", "c4", "c5"]
# Layers, highest precedence first: the spec, the properties, the later default entry, the earlier one, and
# the table's own sort order (which sets sort.keys only).
SPEC, PROPERTY, DEFAULT_LATER, DEFAULT_EARLIER, ORDER = range(5)
KINDS = {SPEC: "spec", PROPERTY: "property", DEFAULT_LATER: "default", DEFAULT_EARLIER: "default",
         ORDER: "sort-order"}
# Keys whose values do not constrain one another, with a value per layer that tells the layers apart.
VALUES = {
    "min_small_files": lambda layer: 2 + layer,
    "max_sorted_runs": lambda layer: 1 + layer,
    "retention.min_snapshots": lambda layer: 1 + layer,
    "writer.page_row_count_limit": lambda layer: 1000 * (layer + 1),
    "delete_ratio_threshold": lambda layer: [0.1, 0.2, 0.3, 0.4][layer],
    "owner.name": lambda layer: f"team{layer}",
    "sort.keys": lambda layer: [{"column": COLUMNS[layer]}],
}
_LAYER_KEYS = st.sets(st.sampled_from(sorted(VALUES)))


def _property_text(key: str, value: object) -> str:
    return ", ".join(k["column"] for k in value) if key == "sort.keys" else str(value)


def _sources(spec_keys, property_keys, later_keys, earlier_keys, ordered):
    spec = None
    if spec_keys is not None:  # a YAML spec always names its owner
        data = {k: VALUES[k](SPEC) for k in spec_keys | {"owner.name"}}
        data["owner.email"] = "t@example.com"
        spec = parse_spec({"table": TABLE, **nest(data)}, source="t.yaml")
    properties = {PROPERTY_OF[k]: _property_text(k, VALUES[k](PROPERTY)) for k in property_keys}
    properties["write.parquet.page-size-bytes"] = "65536"  # not lakesort's: read as the table's own
    defaults = (Default(index=0, match="ns.*", values={k: VALUES[k](DEFAULT_EARLIER) for k in earlier_keys},
                        source="_defaults.yaml"),
                Default(index=1, match="ns.t", values={k: VALUES[k](DEFAULT_LATER) for k in later_keys},
                        source="_defaults.yaml"))
    order = (SortKey(column=COLUMNS[ORDER]),) if ordered else ()
    return spec, properties, defaults, order


def _oracle(spec_keys, property_keys, later_keys, earlier_keys, ordered) -> dict[str, int | None]:
    """Per key, the layer that sets it: every layer tried in order of precedence, the first that has it."""
    has = {SPEC: (spec_keys | {"owner.name"}) if spec_keys is not None else set(), PROPERTY: property_keys,
           DEFAULT_LATER: later_keys, DEFAULT_EARLIER: earlier_keys,
           ORDER: {"sort.keys"} if ordered else set()}
    return {key: next((layer for layer in range(5) if key in has[layer]), None) for key in VALUES}


@settings(max_examples=150, deadline=None)
@given(spec_keys=st.none() | _LAYER_KEYS, property_keys=_LAYER_KEYS, later_keys=_LAYER_KEYS,
       earlier_keys=_LAYER_KEYS, ordered=st.booleans())
def test_each_key_comes_from_the_highest_source_that_sets_it(spec_keys, property_keys, later_keys,
                                                             earlier_keys, ordered):
    spec, properties, defaults, order = _sources(spec_keys, property_keys, later_keys, earlier_keys, ordered)
    resolution = resolve_layers(TABLE, spec=spec, properties=properties, defaults=defaults, sort_order=order,
                                write_properties={"write.parquet.page-size-bytes": "65536"}, columns=COLUMNS)
    expected = _oracle(spec_keys, property_keys, later_keys, earlier_keys, ordered)
    keys = resolution.keys()
    for key, layer in expected.items():
        source = keys[key]
        if layer is None:
            assert source.kind == "lakesort", key
            continue
        assert source.kind == KINDS[layer], (key, source)
        value = source.value
        if key == "sort.keys":
            assert [k["column"] for k in value] == [k["column"] for k in VALUES[key](layer)]
        else:
            assert value == VALUES[key](layer), key
    # The table's own write properties fill what no other source sets, once a source configures the table.
    if resolution.spec is not None:
        assert keys["writer.page_size"].kind == "write-property" and keys["writer.page_size"].value == 65536
    assert resolution.configured == (expected["sort.keys"] is not None)
    if spec is not None and not (property_keys or later_keys or earlier_keys):
        assert resolution.spec is spec  # a spec alone: its file, its hash, as before
    if resolution.spec is not None and expected["sort.keys"] == ORDER:
        assert resolution.spec.sort.keys == ()  # the run takes the table's order at its plan, as before


def test_every_spec_key_has_one_property_and_the_sort_reads_as_named():
    assert len(set(PROPERTY_OF.values())) == len(SPEC_KEYS) == len(PROPERTY_OF)
    assert (PROPERTY_OF["sort.keys"] == "lakesort.sort-keys"
            and PROPERTY_OF["sort.strategy"] == "lakesort.strategy")
    assert PROPERTY_OF["target_file_size"] == "lakesort.target-file-size"
    assert PROPERTY_OF["writer.row_group_size"] == "lakesort.writer.row-group-size"
    assert "table" not in PROPERTY_OF and "catalog" not in PROPERTY_OF


def test_the_docs_document_every_property():
    """The docs' Reference (docs/hooks/reference.py, generated from the code) names each key's property, and
    the onboarding guide says how a property is spelled."""
    root = Path(__file__).parents[2]
    path = root / "docs" / "hooks" / "reference.py"
    spec = importlib.util.spec_from_file_location("docs_reference_hook", path)
    assert spec and spec.loader
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    rows = {key: prop for key, _, _, prop, _ in hook.spec_rows()}
    for key, prop in PROPERTY_OF.items():
        assert rows.get(key) == prop, prop
    guide = (root / "docs" / "how-to" / "onboard-a-table.md").read_text(encoding="utf-8")
    assert "`lakesort.sort-keys`" in guide and "`lakesort.strategy`" in guide


def test_sort_keys_property_forms():
    assert parse_property(TABLE, "lakesort.sort-keys", "a, b desc, c asc nulls last") == ("sort.keys", [
        {"column": "a"}, {"column": "b", "direction": "desc"},
        {"column": "c", "direction": "asc", "nulls": "last"}])
    assert parse_property(TABLE, "lakesort.sort-keys", "[{column: a}]") == ("sort.keys", [{"column": "a"}])
    assert parse_property(TABLE, "lakesort.target-file-size", "256MiB") == ("target_file_size", "256MiB")
    with pytest.raises(ConfigError, match=r"ns.t: table property "
                                          r"lakesort.sort-keys='a sideways'.*fix: ALTER"):
        parse_property(TABLE, "lakesort.sort-keys", "a sideways")


def test_errors_name_the_table_the_key_and_the_fix():
    with pytest.raises(ConfigError) as error:
        resolve_layers(TABLE, properties={"lakesort.sort-keys": "c1, nope"}, columns=COLUMNS)
    assert re.search(r"ns.t: sort.keys: 'nope' is not a column of ns.t.*table property lakesort.sort-keys; "
                     r"fix: ALTER TABLE ns.t SET TBLPROPERTIES", str(error.value))
    with pytest.raises(ConfigError, match=r"did you mean 'lakesort.sort-keys'\?.*UNSET TBLPROPERTIES"):
        resolve_layers(TABLE, properties={"lakesort.sort-kyes": "c1"})
    with pytest.raises(ConfigError, match=r"ns.t: writer.compression: .*'brotli'.*set by table property "
                                          r"lakesort.writer.compression; fix: ALTER TABLE"):
        resolve_layers(TABLE,
                       properties={"lakesort.sort-keys": "c1", "lakesort.writer.compression": "brotli"})
    default = Default(index=2, match="ns.*", values={"target_file_size": "lots"}, source="_defaults.yaml")
    with pytest.raises(ConfigError, match=r"target_file_size: .*namespace default _defaults.yaml: "
                                          r"defaults\[2\] \(match 'ns.\*'\); fix: "
                                          r"change target_file_size in"):
        resolve_layers(TABLE, defaults=[default])


def test_no_sort_key_anywhere_is_not_configured_and_no_error():
    bare = resolve_layers(TABLE, properties={"owner": "x"}, sort_order=(), columns=COLUMNS)
    assert not bare.configured and bare.spec is None and "no sort key anywhere" in bare.reason
    owner_only = resolve_layers(TABLE, defaults=[Default(index=0, match="*", values={"owner.name": "Ops"},
                                                         source="_defaults.yaml")], sort_order=())
    assert not owner_only.configured and "set no sort.keys" in owner_only.reason
    transformed = resolve_layers(TABLE, sort_order=(SortKey(column="c0"),), sort_order_problem="bucket")
    assert not transformed.configured and transformed.reason == "bucket"


def test_the_defaults_file(tmp_path):
    assert load_defaults(tmp_path) == ()
    (tmp_path / "_defaults.yaml").write_text(
        "defaults:\n"
        "  - {match: '*', owner: {name: Ops, email: ops@example.com}}\n"
        "  - {match: 'sales.*', catalog: lake, sort: {keys: [{column: d}]}, target_file_size: 64MiB}\n")
    (tmp_path / "a.yaml").write_text("table: ns.a\n")
    first, second = load_defaults(tmp_path)
    assert first.values == {"owner.name": "Ops", "owner.email": "ops@example.com"}
    assert second.applies("sales.orders", "lake") and not second.applies("sales.orders", "other")
    assert not second.applies("salesx.orders", "lake")
    assert [p.name for p in spec_files(tmp_path)] == ["a.yaml"]  # the defaults are no table's spec
    (tmp_path / "_defaults.yaml").write_text("defaults:\n  - {match: 'x.*', target_file_sise: 1MiB}\n")
    with pytest.raises(ConfigError, match=r"_defaults.yaml: defaults\[0\]: target_file_sise: unknown key; "
                                          r"did you mean 'target_file_size'\?"):
        load_defaults(tmp_path)
    (tmp_path / "_defaults.yaml").write_text("defaults:\n  - {sort: {keys: [{column: d}]}}\n")
    with pytest.raises(ConfigError, match=r"defaults\[0\]: expected a mapping with `match: <pattern>`"):
        load_defaults(tmp_path)
