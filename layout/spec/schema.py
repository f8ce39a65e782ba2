"""The JSON schema of table specs, published as `schemas/table-spec.schema.json` for editors.

Regenerate the file after changing a model of `layout.spec.models` (tests/spec/test_spec_schema.py checks it):

    python -m layout.spec --schema > schemas/table-spec.schema.json

The schema validates the YAML as written (pydantic's ``mode="validation"``): sizes may be strings like
``128MiB``. It is a little wider than `load_spec`, which also checks what a schema cannot say (a probe's
SQL, sizes against each other, compression levels per codec): an editor flags most mistakes, and never
a valid spec.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from layout.spec.models import TableSpec

__all__ = ["SCHEMA_DIALECT", "table_spec_schema", "table_spec_schema_json"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_TITLE = "lakesort table spec"
_DESCRIPTION = (
    "How lakesort lays out one Apache Iceberg table: sort order, file and row group sizes, Parquet "
    "writer settings, what the verify step checks and which queries to measure. One YAML file per "
    "table in dags/tables/. Unknown keys are errors. Sizes are a number of bytes or a string with a "
    "binary unit: 512KiB, 128MiB, 1.5GiB, 1TiB."
)


def table_spec_schema() -> dict[str, Any]:
    """The JSON schema (draft 2020-12) of a table spec file, generated from `TableSpec`; a fresh dict."""
    schema = TableSpec.model_json_schema(mode="validation")
    # Pydantic may share nested dicts with the models' annotations: the caller gets its own copy.
    return copy.deepcopy({"$schema": SCHEMA_DIALECT, **schema, "title": _TITLE, "description": _DESCRIPTION})


def table_spec_schema_json() -> str:
    """`table_spec_schema` as the published file's text: sorted keys, indent 2, ASCII, final newline."""
    return json.dumps(table_spec_schema(), indent=2, sort_keys=True) + "\n"
