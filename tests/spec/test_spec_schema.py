"""The published JSON schema of table specs: up to date, valid, documented, and in step with `load_spec`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from layout.errors import ConfigError
from layout.spec import load_spec, load_specs, parse_spec, table_spec_schema, table_spec_schema_json
from layout.spec.__main__ import main as spec_main

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "schemas" / "table-spec.schema.json"
# A file whose name starts with `_` is no table's spec: `_defaults.yaml` holds namespace defaults, checked
# against their own model below (`layout.registry.defaults`).
SPECS = sorted(p for p in (ROOT / "dags" / "tables").glob("*.yaml") if not p.name.startswith("_"))
DEFAULTS_FILES = sorted((ROOT / "dags" / "tables").glob("_*.yaml"))
REGENERATE = "python -m layout.spec --schema > schemas/table-spec.schema.json"
MODELINE = "# yaml-language-server: $schema=../../schemas/table-spec.schema.json"

MINIMAL = {"table": "sales.orders", "owner": {"name": "Sales Team", "email": "sales@example.com"}}


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads(PUBLISHED.read_text(encoding="utf-8")))


def schema_errors(validator: Draft202012Validator, document: object) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in validator.iter_errors(document)]


def test_published_schema_is_up_to_date():
    assert PUBLISHED.read_text(encoding="utf-8") == table_spec_schema_json(), (
        "schemas/table-spec.schema.json is out of date; regenerate it from the repository "
        f"root with: {REGENERATE}"
    )


def test_schema_is_a_valid_draft_2020_12_schema():
    schema = table_spec_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert "$id" not in schema and schema["title"] and schema["description"]
    assert table_spec_schema_json().endswith("}\n")
    # A fresh dict each time: a caller changing it cannot change the next one.
    schema["$defs"]["SortKey"]["properties"].clear()
    assert table_spec_schema()["$defs"]["SortKey"]["properties"]


def test_there_are_registered_specs():
    assert SPECS, "no dags/tables/*.yaml"


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_registered_specs_validate_and_load(path, validator):
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[0] == MODELINE, f"{path.name}: the first line must be {MODELINE!r}"
    assert schema_errors(validator, yaml.safe_load(text)) == []
    assert load_spec(path).table


def _docs_defaults() -> str:
    """The `_defaults.yaml` example of the docs' "Onboard a table" guide (its namespace default tab)."""
    text = (ROOT / "docs" / "how-to" / "onboard-a-table.md").read_text(encoding="utf-8")
    section = text[text.index('=== "A namespace default"'):]
    block = section[section.index("```yaml"):].split("\n", 1)[1]
    return textwrap.dedent(block[:block.index("```")])


@pytest.mark.parametrize("path", [*DEFAULTS_FILES, None], ids=lambda p: p.name if p else "docs example")
def test_namespace_defaults_load_as_defaults_not_as_specs(path, validator, tmp_path):
    """`_defaults.yaml` (the registry's, and the docs' example) is validated by its own model, and is none
    of the spec schema's business: the registry never reads it as a table's spec."""
    from layout.registry.defaults import DEFAULTS_FILE, load_defaults

    text = path.read_text(encoding="utf-8") if path is not None else _docs_defaults()
    (tmp_path / DEFAULTS_FILE).write_text(text)
    entries = load_defaults(tmp_path)
    assert entries and all(e.match and e.values for e in entries)
    assert schema_errors(validator, yaml.safe_load(text)), "a defaults file is not a table spec"
    assert load_specs(tmp_path) == []  # the spec loader skips it too


def with_(**changes: Any) -> dict[str, Any]:
    return {**MINIMAL, **changes}


VALID = {
    "minimal": MINIMAL,
    "sizes as strings and bytes": with_(
        target_file_size="8MiB", small_file_size=" 1.5 MiB ", max_group_size=1 << 30,
        writer={"row_group_size": "512kib", "page_size": "65536", "bloom_filters": {"id": {"ndv": 10}}},
        verify={"min_file_size": 0, "min_row_group_size": "0B", "max_file_size": "1TiB"},
    ),
    "single column as a string": with_(
        keys={"columns": "id", "sequence": "seq"}, probes=[{"name": "p", "where": "id = 1", "columns": "id"}],
    ),
    "explicit nulls": with_(
        catalog=None, small_file_size=None, keys=None,
        sort={"keys": [{"column": "a", "direction": "desc", "nulls": None}]},
        verify={"boundary_order": None, "max_file_size": None},
    ),
    "column index columns listed": with_(verify={"column_index_columns": ["a", "b"]}),
    "retention": with_(retention={"max_age": "36h", "min_snapshots": 2, "orphan_grace": " 1.5 D "}),
}


@pytest.mark.parametrize("document", VALID.values(), ids=VALID.keys())
def test_valid_specs_pass_the_schema_and_load(document, validator):
    assert schema_errors(validator, document) == []
    parse_spec(document)


INVALID = {
    "unknown key": (with_(trget_file_size="8MiB"), "trget_file_size"),
    "unknown nested key": (with_(writer={"bloom_filters": {"id": {"ndv": 10, "fp": 0.1}}}), "fp"),
    "decimal size unit": (with_(target_file_size="128MB"), "128MB"),
    "size without a number": (with_(writer={"page_size": "lots"}), "lots"),
    "zero size": (with_(target_file_size="0MiB"), "0MiB"),
    "negative size": (with_(target_file_size=-1), "-1"),
    "wrong type": (with_(min_small_files="two"), "two"),
    "boolean size": (with_(target_file_size=True), "True"),
    "mapping expected": (with_(owner="sales"), "sales"),
    "bad enum": (with_(sort={"keys": [{"column": "a", "direction": "up"}]}), "up"),
    "missing owner": ({"table": "sales.orders"}, "owner"),
    "table without namespace": (with_(table="orders"), "orders"),
    "bad email": (with_(owner={"name": "x", "email": "nobody"}), "nobody"),
    "empty key columns": (with_(keys={"columns": [], "sequence": "seq"}), "[]"),
    "duration without a unit": (with_(retention={"max_age": "3"}), "'3'"),
    "no snapshot kept": (with_(retention={"min_snapshots": 0}), "0"),
}


@pytest.mark.parametrize(("document", "culprit"), INVALID.values(), ids=INVALID.keys())
def test_invalid_specs_fail_the_schema_and_the_loader(document, culprit, validator):
    errors = schema_errors(validator, document)
    assert errors, "the schema accepts an invalid spec"
    assert any(culprit in error for error in errors), errors
    with pytest.raises(ConfigError):
        parse_spec(document)


def described(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """(model, field) of every property of the root and of every model in `$defs`."""
    models = {"TableSpec": schema, **schema["$defs"]}
    return [(name, field) for name, model in models.items() for field in model["properties"]]


def test_every_field_has_a_description():
    schema = table_spec_schema()
    fields = described(schema)
    assert len(fields) > 40 and set(schema["$defs"]) >= {"SortKey", "WriterSpec", "VerifySpec", "Probe"}
    models = {"TableSpec": schema, **schema["$defs"]}
    missing = [f"{model}.{field}" for model, field in fields
               if not models[model]["properties"][field].get("description", "").strip()]
    assert missing == [], f"fields without Field(description=...): {', '.join(missing)}"
    undocumented = [name for name, model in schema["$defs"].items() if not model.get("description")]
    assert undocumented == [], f"models without a docstring: {', '.join(undocumented)}"


def test_schema_command_prints_the_schema(capsys):
    assert spec_main(["--schema"]) == 0
    assert capsys.readouterr().out == table_spec_schema_json()
