"""Tiny partitioned tables in the REST catalog for the object-store fault tests,
and the oracle's view of them.

A table is made through the REST catalog with pyiceberg appends: a few small files in three monthly
partitions, a few hundred rows each, so a compaction through `spark-submit` and S3A stays well under a minute
on moto. The oracle is tests/lossless.py's: pyiceberg's own read, by field id, floats by their bits, of the
current snapshot and of every snapshot in the history.
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass

import pyarrow as pa
from lossless import assert_same, by_field_id

from layout.spec import TableSpec, parse_spec

NAMESPACE = "faults"
OWNER = {"name": "Test Team", "email": "test@example.com"}
MONTHS = ("1995-01", "1995-02", "1995-03")
ROWS_PER_APPEND = 400
_names = itertools.count()


def new_name(label: str) -> str:
    """A table name of this session's own (the REST catalog lives for the whole session)."""
    return f"{NAMESPACE}.{label}_{next(_names)}_{dt.datetime.now().strftime('%H%M%S%f')}"


def spec_of(name: str) -> TableSpec:
    return parse_spec({"table": name, "owner": OWNER, "sort": {"keys": [{"column": "d"}, {"column": "k"}]},
                       "target_file_size": "1MiB", "small_file_size": "512KiB",
                       "retention": {"max_age": "0s", "min_snapshots": 1, "orphan_grace": "1h"}},
                      source="test")


def rows(start: int, n: int) -> pa.Table:
    """Rows spread over the three months; a float column with NaN, -0.0 and infinities (compared by bits)."""
    specials = [float("nan"), -0.0, 0.0, float("inf"), float("-inf"), 1e-310]
    ks = range(start, start + n)
    return pa.table({
        "d": pa.array([dt.date(1995, 1, 1) + dt.timedelta(days=(k * 37) % 90) for k in ks], pa.date32()),
        "k": pa.array(list(ks), pa.int64()),
        "x": pa.array([specials[k % 6] if k % 5 == 0 else k * 0.25 for k in ks], pa.float64()),
        "v": pa.array([None if k % 13 == 0 else f"v{k}-" + "x" * (k % 17) for k in ks], pa.string()),
    })


def create_table(catalog, name: str, appends: int = 3):
    """`name` partitioned by month of `d`, `appends` pyiceberg appends (one small file per partition each)."""
    from pyiceberg.transforms import MonthTransform

    namespace = name.rpartition(".")[0]
    catalog.create_namespace_if_not_exists(namespace)
    data = rows(0, 1)
    table = catalog.create_table(name, schema=data.schema)
    with table.update_spec() as spec:
        spec.add_field("d", MonthTransform(), "d_month")
    for i in range(appends):
        table.append(rows(i * ROWS_PER_APPEND, ROWS_PER_APPEND).cast(table.schema().as_arrow()))
    return table


@dataclass(frozen=True)
class Snap:
    """What the oracle saw of a table: the current snapshot, its rows by field id, every snapshot's rows."""

    snapshot_id: int
    files: frozenset[str]
    rows: dict
    history: dict  # snapshot id -> rows by field id


def snap(table) -> Snap:
    table = table.refresh()
    history = {s.snapshot_id: by_field_id(table, s.snapshot_id) for s in table.snapshots()}
    files = frozenset(t.file.file_path for t in table.scan().plan_files())
    current = table.current_snapshot().snapshot_id
    return Snap(current, files, history[current], history)


def assert_history_readable(before: Snap, after: Snap) -> None:
    """Every snapshot the table had before is still there and reads the same rows
    (no snapshot expired here)."""
    for snapshot_id, rows in before.history.items():
        assert snapshot_id in after.history, f"snapshot {snapshot_id} is gone from the history"
        assert_same(rows, after.history[snapshot_id])


def assert_unchanged(before: Snap, after: Snap) -> None:
    assert (after.snapshot_id, after.files) == (before.snapshot_id, before.files), "the table changed"
    assert after.history.keys() == before.history.keys()
    assert_history_readable(before, after)
