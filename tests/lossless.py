"""Helpers of the lossless suite: tables built with pyiceberg, compacted through the real pipeline, and the
oracle: pyiceberg's read of the table before and after, compared by field id, floats bit for bit.

The oracle never looks at what Spark read: it is pyiceberg's scan of the committed table.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import math
import struct
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
T0 = dt.datetime(2024, 2, 27, 22, 0, 0)
OWNER = {"name": "Test Team", "email": "test@example.com"}


def load_job():
    spec = importlib.util.spec_from_file_location("lakesort_job_compact", REPO / "jobs" / "compact.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def job_part(name: str):
    """A module of the job's own package (jobs/compaction), importable once the job is loaded (`load_job`)."""
    load_job()
    return importlib.import_module(f"compaction.{name}")


def in_process_submit(spark, job):
    """A stand-in for `layout.compaction.pipeline.driver.submit` running the job's own functions on
    the test's session."""
    from layout.compaction.plan import RewritePlan

    def submit(plan_path, manifest_path, *, master, name, conf=None, work_dir, groups=None):
        plan = RewritePlan.from_json(Path(plan_path).read_text())
        staged = job.compact_groups(spark, plan,
                                    [g for g in plan.groups if groups is None or g.group_id in groups])
        job.write_manifest(spark, plan, staged, str(manifest_path), 0.0)

    return submit


def spec_for(name: str, **extra):
    from layout.spec import parse_spec

    doc = {"table": name, "owner": OWNER, "sort": {"keys": [{"column": "id"}]}, "target_file_size": "1MiB"}
    doc.update(extra)
    return parse_spec(doc, source="test")


def run(name: str, **kw):
    """Compact through the real pipeline (forced unless told), layout verification replaced by nothing."""
    from layout.compaction.pipeline.driver import compact

    return compact(name, spec=kw.pop("spec", None) or spec_for(name), force=kw.pop("force", True),
                   verify=lambda manifest: None, **kw)


def committed(table) -> bool:
    """Whether the table's current snapshot is a lakesort compaction's commit (its summary names the run)."""
    from layout.compaction.planning.planner import RUN_ID

    snap = table.refresh().current_snapshot()
    return snap is not None and RUN_ID in snap.summary.additional_properties


def rows_for(table, start: int, n: int) -> pa.Table:
    """Rows for the table's current schema: values derived from the row number, every column filled."""
    arrow = table.schema().as_arrow()
    return pa.Table.from_pylist([_row(arrow, i) for i in range(start, start + n)], schema=arrow)


def _value(t: pa.DataType, i: int, name: str, nullable: bool = True):
    if i % 11 == 5 and name != "id" and nullable:
        return None
    if pa.types.is_boolean(t):
        return i % 2 == 0
    if pa.types.is_integer(t):
        return i * 7 % 1000 if name != "id" else i
    if pa.types.is_floating(t):
        return list(floats(i + 1))[i]
    if pa.types.is_decimal(t):
        return Decimal(i * 37 - 500).scaleb(-t.scale)
    if pa.types.is_date(t):
        return dt.date(2024, 1, 1) + dt.timedelta(days=i * 3)
    if pa.types.is_timestamp(t):
        value = T0 + dt.timedelta(hours=i * 5, microseconds=i)
        return value.replace(tzinfo=dt.UTC) if t.tz else value
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return f"{name}-{i}-" + "é" * (i % 3) + "x" * (i % 20)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return bytes([i % 256, 0, 255]) * (i % 4)
    if pa.types.is_struct(t):
        return {f.name: _value(f.type, i + k, f.name, f.nullable) for k, f in enumerate(t)}
    if pa.types.is_map(t):
        return [(f"k{j}", _value(t.item_type, i + j, "v", t.item_field.nullable)) for j in range(i % 3)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return ([_value(t.value_type, i + j, "e", t.value_field.nullable) for j in range(i % 4)] if i % 5
                else None)
    raise AssertionError(f"no test value for {t}")


def _row(arrow: pa.Schema, i: int) -> dict:
    out = {}
    for f in arrow:
        out[f.name] = _value(f.type, i, f.name, f.nullable)
    return out


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
    schema = (table.schema() if snapshot_id is None
              else table.schemas()[table.snapshot_by_id(snapshot_id).schema_id])
    ids = [schema.find_field(name).field_id for name in data.column_names]
    # to_pylist keeps NaN payloads and -0.0 as Python floats: `_canonical` compares their bits.
    columns = [[_canonical(v) for v in data.column(i).to_pylist()] for i in range(data.num_columns)]
    rows = sorted(zip(*columns), key=repr) if columns else []
    return {fid: [r[i] for r in rows] for i, fid in enumerate(ids)}


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
