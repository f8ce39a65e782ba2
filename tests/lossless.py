"""Helpers of the lossless suite: tables built with pyiceberg, compacted through the real pipeline, and the
oracle: pyiceberg's read of the table before and after, compared by field id, floats bit for bit.

The oracle never looks at what Spark read: it is pyiceberg's scan of the committed table.
"""

from __future__ import annotations

import importlib.util
import math
import struct
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
OWNER = {"name": "Test Team", "email": "test@example.com"}


def load_job():
    spec = importlib.util.spec_from_file_location("lakesort_job_compact", REPO / "jobs" / "compact.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def in_process_submit(spark, job):
    """A stand-in for `layout.compact.submit` running the job's own functions on the test's session."""
    from layout.rewrite import RewritePlan

    def submit(plan_path, manifest_path, *, master, name, conf=None, work_dir, groups=None):
        plan = RewritePlan.from_json(Path(plan_path).read_text())
        staged = job.compact_groups(spark, plan, [g for g in plan.groups if groups is None or g.group_id in groups])
        job.write_manifest(spark, plan, staged, str(manifest_path), 0.0)

    return submit


def _canonical(value: Any) -> Any:
    """A value in a form where equality means identity: floats by their bits (NaN payloads, -0.0)."""
    if isinstance(value, float):
        return ("f64", struct.pack("<d", value))
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        # Maps come back as lists of (key, value) tuples.
        return tuple(_canonical(v) for v in value)
    if isinstance(value, tuple):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, Decimal):
        return ("dec", value.as_tuple())
    return value


def by_field_id(table, snapshot_id: int | None = None) -> dict[int, list[Any]]:
    """pyiceberg's read of a snapshot: field id -> the column's values in canonical form, rows in a canonical
    order (sorted by the whole row's canonical form, so no sort key is needed)."""
    scan = table.scan(snapshot_id=snapshot_id) if snapshot_id is not None else table.scan()
    data = scan.to_arrow()
    schema = table.schema() if snapshot_id is None else table.schemas()[table.snapshot_by_id(snapshot_id).schema_id]
    ids = [schema.find_field(name).field_id for name in data.column_names]
    columns = [[_canonical(v) for v in _pylist(data.column(i))] for i in range(data.num_columns)]
    rows = sorted(zip(*columns), key=repr) if columns else []
    return {fid: [r[i] for r in rows] for i, fid in enumerate(ids)}


def _pylist(column: pa.ChunkedArray) -> list[Any]:
    t = column.type
    if pa.types.is_floating(t):
        # to_pylist keeps NaN payloads and -0.0 as Python floats: compared by bits above.
        return column.to_pylist()
    return column.to_pylist()


def assert_same(before: dict[int, list[Any]], after: dict[int, list[Any]]) -> None:
    assert before.keys() == after.keys(), f"field ids differ: {sorted(before)} vs {sorted(after)}"
    for fid, b in before.items():
        a = after[fid]
        assert len(b) == len(a), f"field {fid}: {len(b)} rows before, {len(a)} after"
        if b != a:
            diff = next(i for i, (x, y) in enumerate(zip(b, a)) if x != y)
            raise AssertionError(f"field {fid}: row {diff} differs: {b[diff]!r} before, {a[diff]!r} after")


def floats(n: int) -> Iterable[float]:
    special = [math.nan, -0.0, 0.0, math.inf, -math.inf, 1e-310, -1.5]
    return [special[i % len(special)] if i % 3 == 0 else i * 0.25 for i in range(n)]
