"""The admission tests' tables: real pyiceberg tables in a SQLite catalog under tmp_path."""

from __future__ import annotations

import pytest
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import SortOrder
from pyiceberg.types import LongType, NestedField


@pytest.fixture
def make_table(iceberg_catalog):
    """Create `demo.<name>` with the given top-level fields (an `id` long comes first unless given)."""
    iceberg_catalog.create_namespace("demo")

    def make(*fields: NestedField, name: str = "t", sort_order: SortOrder | None = None,
             with_id: bool = True):
        head = [NestedField(10_000, "id", LongType(), required=False)] if with_id else []
        kwargs = {"sort_order": sort_order} if sort_order is not None else {}
        return iceberg_catalog.create_table(f"demo.{name}", Schema(*head, *fields), **kwargs)

    return make
