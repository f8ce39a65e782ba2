"""Keyed tables: upserts across snapshots (some later snapshots carry a lower sequence: late, stale data)
compacted to one row per key, by the highest sequence (`deduplicate`) or the lowest (`first-row`). The job
runs in process (`in_process_job`); planning, the checks and the commit are the real ones.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from demo_tables import KEYED_SCHEMA, NAME_MAPPING, OWNER, readable

from layout.catalog import load_catalog
from layout.compaction.pipeline.driver import compact
from layout.compaction.planning.planner import RUN_ID
from layout.spec import parse_spec

pytestmark = pytest.mark.spark


def _keyed_batches() -> list[pa.Table]:
    """Upserts across snapshots; for some ids a later snapshot carries a *lower* seq (late, stale data), so
    "highest seq" and "latest snapshot" differ."""
    def batch(ids, seq, tag):
        return pa.Table.from_pylist([{"id": i, "seq": seq(i), "payload": f"{tag}-{i}"} for i in ids],
                                    KEYED_SCHEMA)

    return [
        batch(range(60), lambda i: 10, "a"),
        batch(range(30), lambda i: 20, "b"),
        batch(range(20, 40), lambda i: 5 if i % 2 else 30, "c"),  # odd ids: stale (seq 5 < 10/20)
        batch(range(55, 70), lambda i: 1, "d"),  # 55..59 stale, 60..69 new
    ]


def _keyed_table(name: str):
    catalog = load_catalog()
    catalog.create_namespace_if_not_exists("keyed")
    table = catalog.create_table(f"keyed.{name}", schema=KEYED_SCHEMA)
    for b in _keyed_batches():
        table.append(b)
    return table.refresh()


def _expected_merge(pick) -> dict[int, tuple[int, str]]:
    best: dict[int, dict] = {}
    for b in _keyed_batches():
        for row in b.to_pylist():
            cur = best.get(row["id"])
            if cur is None or pick(row["seq"], cur["seq"]):
                best[row["id"]] = row
    return {i: (r["seq"], r["payload"]) for i, r in best.items()}


@pytest.mark.parametrize(("merge", "pick"), [
    ("deduplicate", lambda new, cur: new > cur),
    ("first-row", lambda new, cur: new < cur),
])
def test_keyed_table_keeps_one_row_per_key(demo_home, in_process_job, merge, pick):
    table = _keyed_table(merge.replace("-", "_"))
    spec = parse_spec({
        "table": f"keyed.{merge.replace('-', '_')}", "catalog": "lakesort", "owner": OWNER,
        "sort": {"keys": [{"column": "id"}]}, "target_file_size": "64KiB",
        "keys": {"columns": ["id"], "sequence": "seq", "merge": merge},
    }, source="keyed-spec")
    rows_before = table.scan().to_arrow().num_rows
    assert NAME_MAPPING not in table.properties
    result = compact(spec.table, spec=spec)
    table = table.refresh()
    got = readable(table).scan().to_arrow().to_pylist()
    expected = _expected_merge(pick)
    assert rows_before == 60 + 30 + 20 + 15 > len(expected) == 70
    assert result.rows == len(got) == len(expected)
    assert {r["id"]: (r["seq"], r["payload"]) for r in got} == expected
    assert table.current_snapshot().summary.additional_properties[RUN_ID] == result.plan.run_id
    # Spot checks against hand-derived answers.
    survivors = {r["id"]: r["payload"] for r in got}
    if merge == "deduplicate":
        assert (survivors[0], survivors[21], survivors[22], survivors[57]) == ("b-0", "b-21", "c-22", "a-57")
    else:
        assert (survivors[0], survivors[21], survivors[22], survivors[57]) == ("a-0", "c-21", "a-22", "d-57")
