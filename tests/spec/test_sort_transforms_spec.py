"""Sort keys with Iceberg transforms in a spec (issue #54): their syntax, the hash of keys without one, the
column a file is ordered in (the BoundaryOrder expected), and a table's order that no source can replace."""

from __future__ import annotations

import pytest

from layout.registry.resolution import resolve_layers
from layout.spec import SortKey, SortSpec, order_column


def test_transform_syntax_and_dump():
    key = SortKey(column="id", transform="bucket(8)")
    assert key.transform == "bucket[8]" and key.label == "bucket[8](id)"
    assert "transform" not in SortKey(column="id").model_dump()  # identity: dumps and hashes as before
    with pytest.raises(ValueError, match="unknown transform 'void'"):
        SortKey(column="id", transform="void")
    with pytest.raises(ValueError, match="zorder interleaves the keys' own values.*strategy: linear"):
        SortSpec(strategy="zorder", keys=[{"column": "ts", "transform": "day"}, {"column": "id"}])
    assert len(SortSpec(keys=[{"column": "ts", "transform": "day"}, {"column": "ts"}]).keys) == 2


def test_the_column_a_file_is_ordered_in():
    day, ts = SortKey(column="ts", transform="day"), SortKey(column="ts")
    assert order_column([day, ts]) == ts  # ts ascends across the file
    assert order_column([day, SortKey(column="id")]) is None  # ts only day by day
    assert order_column([SortKey(column="id", transform="bucket[8]"), SortKey(column="id")]) is None
    assert order_column([day, SortKey(column="ts", direction="desc")]) is None
    assert order_column([SortKey(column="id")]) == SortKey(column="id")


def test_a_sort_order_lakesort_cannot_sort_by_is_the_reason_not_no_order():
    problem = "the sort order of ns.t (order id 1), field 0 sorts by void(id) ...; fix: set sort.keys"
    resolved = resolve_layers("ns.t", sort_order=(), sort_order_problem=problem)
    assert not resolved.configured and resolved.reason == problem
