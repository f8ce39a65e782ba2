"""Hand-built Iceberg schemas and specs for the admission tests (test_admission.py: the table's types and
names; test_admission_spec.py: the spec's column references); `make_table` is the folder's conftest's."""

from __future__ import annotations

from pyiceberg.types import ListType, MapType, NestedField, StructType

from layout.spec import parse_spec

OWNER = {"name": "team", "email": "team@example.com"}


class Ids:
    """Field ids for hand-built schemas: every NestedField and list/map child needs a unique one."""

    def __init__(self) -> None:
        self.last = 0

    def __call__(self) -> int:
        self.last += 1
        return self.last


def field(ids: Ids, name: str, field_type, required: bool = False) -> NestedField:
    return NestedField(ids(), name, field_type, required=required)


def struct(ids: Ids, **fields) -> StructType:
    return StructType(*(field(ids, n, t) for n, t in fields.items()))


def list_of(ids: Ids, element) -> ListType:
    return ListType(ids(), element, element_required=False)


def map_of(ids: Ids, key, value) -> MapType:
    return MapType(ids(), key, ids(), value, value_required=False)


def spec_of(table: str = "demo.t", **overrides):
    doc = {"table": table, "owner": OWNER, "sort": {"keys": [{"column": "id"}]}}
    doc.update(overrides)
    return parse_spec(doc, source="test-spec")


def lines_about(problems: list[str], needle: str) -> list[str]:
    return [p for p in problems if needle in p]
