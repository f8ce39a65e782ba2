"""The advice kept for the report: the Iceberg table `lakesort.advice` in the table's own catalog.

One row per candidate per advice run (the current layout included): run_id, table, advised_at
(timestamptz), rank, strategy (current | linear | zorder | hilbert), keys (comma-separated columns),
sort_keys (JSON list of {column, direction, nulls}), scaling (quantile | minmax, null for linear and
current), origin (table | spec | probes), label, predicted_bytes (JSON object: probe -> bytes), total_bytes
(double, the probes' bytes weighted), vs_current (double, null when the current layout reads nothing),
write_bytes, incremental (1 | 0, null for the current layout), recommended (1 for the recommended row),
sample_rows, table_rows, table_bytes, seed, probes (JSON list of {name, where, weight}), seconds (double).
A rerun of the same run id replaces its rows (`layout.metrics.store.upsert`). Written and read with the
metrics tables' helpers, so it evolves as they do (new columns nullable, appended).

`last_advice(catalog, table)` rebuilds the newest run's `Advice`; the recommendation is derived again from
the ranked candidates by the same rule (`layout.advise.result.recommend`).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from layout.advise.result import Advice, CandidateAdvice, ProbeWeight, recommend
from layout.metrics import store
from layout.spec import SortKey

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["ADVICE", "ADVICE_FIELDS", "ADVICE_KEY", "last_advice", "record_advice"]

ADVICE = f"{store.NAMESPACE}.advice"
_LONG, _DOUBLE, _STRING, _TS = "long", "double", "string", "timestamptz"
ADVICE_FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("run_id", _STRING, True), ("table", _STRING, True), ("advised_at", _TS, True), ("rank", _LONG, True),
    ("strategy", _STRING, True), ("keys", _STRING, True), ("sort_keys", _STRING, True),
    ("scaling", _STRING, False), ("origin", _STRING, True), ("label", _STRING, True),
    ("predicted_bytes", _STRING, True), ("total_bytes", _DOUBLE, True), ("vs_current", _DOUBLE, False),
    ("write_bytes", _LONG, True), ("incremental", _LONG, False), ("recommended", _LONG, True),
    ("sample_rows", _LONG, True), ("table_rows", _LONG, True), ("table_bytes", _LONG, True),
    ("seed", _LONG, True), ("probes", _STRING, True), ("seconds", _DOUBLE, True),
)
ADVICE_KEY = ("run_id", "table")


def record_advice(catalog: Catalog, advice: Advice, *, table_bytes: int) -> int:
    """Replace the rows of the same run and append these, in one snapshot; returns the rows written."""
    chosen = advice.recommendation
    probes = json.dumps([p.model_dump() for p in advice.probes])
    rows = []
    for c in advice.candidates:
        recommended = chosen is not None and c.strategy == chosen.strategy and c.sort_keys == chosen.sort_keys
        rows.append({
            "run_id": advice.run_id, "table": advice.table, "advised_at": advice.advised_at, "rank": c.rank,
            "strategy": c.strategy, "keys": ",".join(c.keys),
            "sort_keys": json.dumps([k.model_dump() for k in c.sort_keys]), "scaling": c.scaling,
            "origin": c.origin, "label": c.label,
            "predicted_bytes": json.dumps(c.predicted_bytes, sort_keys=True), "total_bytes": c.total_bytes,
            "vs_current": c.vs_current, "write_bytes": c.write_bytes,
            "incremental": None if c.incremental is None else int(c.incremental),
            "recommended": int(recommended), "sample_rows": advice.sample_rows,
            "table_rows": advice.table_rows, "table_bytes": table_bytes, "seed": advice.seed,
            "probes": probes, "seconds": advice.seconds,
        })
    return store.upsert(catalog, ADVICE, ADVICE_FIELDS, ADVICE_KEY, rows)


def last_advice(catalog: Catalog, table: str) -> Advice | None:
    """The newest advice recorded for `table` (by advised_at, then run id), or None when there is none."""
    rows: list[dict[str, Any]] = store.read(catalog, ADVICE, ADVICE_FIELDS, table).to_pylist()
    if not rows:
        return None
    newest = max(rows, key=lambda r: (r["advised_at"], r["run_id"]))
    run = sorted((r for r in rows if r["run_id"] == newest["run_id"]), key=lambda r: r["rank"])
    candidates = tuple(
        CandidateAdvice(
            rank=r["rank"],
            strategy=r["strategy"],
            sort_keys=tuple(SortKey(**k) for k in json.loads(r["sort_keys"])),
            scaling=r["scaling"],
            origin=r["origin"],
            label=r["label"],
            predicted_bytes=json.loads(r["predicted_bytes"]),
            total_bytes=r["total_bytes"],
            vs_current=r["vs_current"],
            write_bytes=r["write_bytes"],
            incremental=None if r["incremental"] is None else bool(r["incremental"]),
        )
        for r in run
    )
    first = run[0]
    advised_at = first["advised_at"]
    if advised_at.tzinfo is None:
        advised_at = advised_at.replace(tzinfo=dt.UTC)
    return Advice(
        run_id=first["run_id"], table=table, advised_at=advised_at, sample_rows=first["sample_rows"],
        table_rows=first["table_rows"], seed=first["seed"],
        probes=tuple(ProbeWeight(**p) for p in json.loads(first["probes"])), candidates=candidates,
        recommendation=recommend(candidates, table=table, table_bytes=first["table_bytes"]),
        seconds=first["seconds"])
