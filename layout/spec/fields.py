"""The field types of a table spec: sizes, durations, column lists and the literals its keys take, each with
the JSON schema an editor validates against (`layout.spec.schema`). Validation widens what YAML allows
(``128MiB`` for bytes, one column for a list); the published schema says so,
and is never narrower than validation."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PlainSerializer, WithJsonSchema

from layout.durations import DURATION_PATTERN, format_duration_short, parse_duration
from layout.sizes import parse_size

Direction = Literal["asc", "desc"]
NullOrder = Literal["first", "last"]
Compression = Literal["zstd", "snappy", "gzip", "lz4_raw", "uncompressed"]
BoundaryOrder = Literal["ASCENDING", "DESCENDING", "UNORDERED"]
MergeMode = Literal["deduplicate", "first-row"]


# --- JSON schema of the types that validation widens ---------------------------------------------


def _size_schema(minimum: int) -> dict[str, Any]:
    """What `parse_size` accepts: bytes, or a decimal with a binary unit (case-insensitive, like parse_size).

    The schema is a little wider than the validator (``1.5B`` is no whole number of bytes): an editor must
    not flag a valid spec, and `load_spec` still refuses the rest.
    """
    positive = "(?=[0.]*[1-9])" if minimum > 0 else ""
    return {"anyOf": [
        {"type": "integer", "minimum": minimum, "description": "a number of bytes"},
        {
            "type": "string",
            "pattern": rf"^\s*{positive}\d+(\.\d+)?\s*([KkMmGgTt][Ii][Bb]|[Bb])?\s*$",
            "description": ("a number with a binary unit: B, KiB, MiB, GiB or TiB, e.g. 512KiB, 128MiB, "
                            "1.5GiB"),
        },
    ]}


def _column_schema() -> dict[str, Any]:
    return {"type": "string", "minLength": 1}


def _columns_schema(min_items: int = 0) -> dict[str, Any]:
    array: dict[str, Any] = {"type": "array", "items": _column_schema()}
    if min_items:
        array["minItems"] = min_items
    return {"anyOf": [array, {**_column_schema(), "description": "a single column"}]}


def _no_default(schema: dict[str, Any]) -> None:
    """For a field whose real default depends on another field (the description says which)."""
    schema.pop("default", None)


# --- field types ---------------------------------------------------------------------------------


def _column_list(value: object) -> object:
    # A single column written as a string is a common slip; reading it as one column is what was meant.
    return [value] if isinstance(value, str) else value


Size = Annotated[int, BeforeValidator(parse_size), Field(gt=0), WithJsonSchema(_size_schema(1))]
SizeOrZero = Annotated[int, BeforeValidator(parse_size), Field(ge=0), WithJsonSchema(_size_schema(0))]
Columns = Annotated[
    tuple[Annotated[str, Field(min_length=1)], ...],
    BeforeValidator(_column_list),
    WithJsonSchema(_columns_schema()),
]
NonEmpty = Annotated[str, Field(min_length=1)]
Duration = Annotated[
    dt.timedelta,
    BeforeValidator(parse_duration),
    # Dumped as written ("3d", not ISO 8601's "P3D"), so a dumped spec reads back.
    PlainSerializer(format_duration_short, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN,
                    "description": "a number with a unit: s, m, h, d or w, e.g. 36h, 3d, 2w"}),
]


def _columns_or_all(value: object) -> Literal["all"] | tuple[str, ...]:
    if value == "all":
        return "all"
    if isinstance(value, list | tuple) and all(isinstance(c, str) and c for c in value):
        return tuple(value)
    raise ValueError(f"expected 'all' or a list of column names, got {value!r}")
