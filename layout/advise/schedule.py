"""The advisor on a schedule: each DAG run's last task (`layout.compaction.pipeline.dag_run.close`) advises
the tables whose advice is due, so the report's "What would help" holds a recent prediction without anyone
running `lakesort advise`.

Advising samples the table and lays out every candidate (seconds to minutes a table), so it is budgeted: a
table is advised when

- it has owners' probes (the advisor ranks layouts by them) and was never advised;
- its probes changed since its last advice (the advice answered other queries);
- its last advice is `EVERY` old (a week): at most once a week otherwise;
- or its layout's health dropped since its last advice: the headline efficiency of its owners' probes
  (`layout.metrics.trend`) fell by more than `layout.metrics.trend.DROP` from the newest measurement at or
  before the advice to the latest one. The next advice's own measurement is then the reference, so a drop
  triggers one advice, not one a night.

A table that cannot be advised is logged and skipped (the report goes on; the next run tries again).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from layout.advise.history import last_advice
from layout.advise.result import Advice
from layout.advise.run import advise
from layout.catalog import load_catalog
from layout.metrics import store
from layout.metrics.measure import Measurement
from layout.metrics.trend import dropped, efficiency_trend

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from layout.spec import TableSpec

__all__ = ["EVERY", "advice_due", "advise_due"]

log = logging.getLogger(__name__)

EVERY = dt.timedelta(days=7)


def _measurements(catalog: Catalog, table: str) -> list[Measurement]:
    rows = store.read(catalog, store.PRUNING_METRICS, store.METRICS_FIELDS, table).to_pylist()
    for row in rows:  # timestamps as the report reads them: in UTC
        stamp = row["measured_at"]
        row["measured_at"] = stamp.replace(tzinfo=dt.UTC) if stamp.tzinfo is None else stamp
    return [Measurement(**row) for row in rows]


def advice_due(catalog: Catalog, spec: TableSpec, now: dt.datetime) -> str | None:
    """Why `spec`'s table is due for advice at `now` (module docstring), or None when it is not."""
    if not spec.probes:
        return None
    last = last_advice(catalog, spec.table)
    if last is None:
        return "never advised"
    asked = {(p.name, p.where, p.weight) for p in spec.probes}
    if {(p.name, p.where, p.weight) for p in last.probes} != asked:
        return "its probes changed since the last advice"
    age = now - last.advised_at
    if age >= EVERY:
        return f"last advised {age.days} day(s) ago"
    drop = dropped(efficiency_trend(_measurements(catalog, spec.table)), since=last.advised_at)
    if drop is not None:
        return (f"the owners' probes' efficiency fell from {drop.then.efficiency:.1%} to "
                f"{drop.now.efficiency:.1%} since the last advice")
    return None


def advise_due(specs: Mapping[str, TableSpec | None], *, now: dt.datetime | None = None,
               run: Callable[[TableSpec], Advice] | None = None) -> dict[str, str]:
    """Advise each table of `specs` (name -> its resolved spec; None: its spec did not load) whose advice is
    due, recorded for the report; returns table -> why it was advised. `run`: the advisor (default:
    `layout.advise.advise` with its default sample)."""
    now = now or dt.datetime.now(dt.UTC)
    advised: dict[str, str] = {}
    for table, spec in sorted(specs.items()):
        if spec is None or not spec.probes:  # not advisable: no catalog loaded for it
            continue
        try:
            reason = advice_due(load_catalog(spec.catalog), spec, now)
            if reason is None:
                continue
            log.info("%s: advising (%s)", table, reason)
            advice = run(spec) if run is not None else advise(table, spec=spec)
        except Exception as exc:  # noqa: BLE001 - one table's advice never stops the others or the report
            log.warning("%s: the scheduled advice failed (the next run tries again): %s", table, exc)
            continue
        advised[table] = reason
        recommended = advice.recommendation
        log.info("%s: advised: %s", table, recommended.label if recommended else "no recommendation")
    return advised
