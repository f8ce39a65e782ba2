"""The tasks of a DAG run that span all its tables (each table's own steps are `runs`'s): which planned runs
go on to Spark (`admitted`, the DAGs' `planned`), and the run's last task (`close`, the DAGs' `report`, after
every other task, failed or not): the table leases the run still holds, the housekeeping of lakesort's own
tables, the advice of the tables due for it (`layout.advise.schedule`: at most weekly a table, or when its
layout's health dropped), the owners' reports."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from layout.advise.schedule import advise_due
from layout.catalog import load_catalog
from layout.compaction.pipeline.nightly_budget import within_budget
from layout.compaction.pipeline.runs import PlannedTable, to_compact
from layout.registry import catalog_names, nightly_specs
from layout.settings import settings
from layout.upkeep.housekeeping import housekeep
from layout.upkeep.lease import LeaseOwner, sweep_leases

__all__ = ["admitted", "advice", "close", "housekeeping"]

log = logging.getLogger(__name__)


def admitted(prepared: Iterable[Mapping[str, Any] | None], *, budgeted: bool) -> list[PlannedTable]:
    """The runs with Spark work among `prepare_table`'s payloads (None: a table whose prepare failed);
    `budgeted` (the nightly): those the night's budget ($LAKESORT_NIGHTLY_BUDGET_BYTES) admits, most valuable
    first, the deferred ones recorded and their leases released (`nightly_budget.within_budget`)."""
    results = [PlannedTable.model_validate(p) for p in prepared if p]
    if budgeted:
        return within_budget(results, budget_bytes=settings().nightly_budget_bytes)
    return to_compact(results)


def close(owner: LeaseOwner, *, dry_run: bool, write_reports: Callable[[], Path]) -> str | None:
    """Release the leases `owner`'s run still holds (of tables whose tasks stopped early: upstream_failed);
    then, unless a dry run (the report is left as it was: None), `housekeeping`, the `advice` that is due and
    the reports: `write_reports` (`layout.report.render.write_reports`, which the pipeline does not import),
    whose index is returned."""
    if swept := sweep_leases(owner):
        log.info("released %d table lease(s) left by failed tasks of this run", swept)
    if dry_run:
        log.info("dry run: the report is left as it was")
        return None
    housekeeping()
    advice()
    index = write_reports()
    log.info("lakesort report: %s", Path(index).resolve())
    return str(index)


def housekeeping() -> None:
    """lakesort's own tables in each catalog the registry configures tables in (`registry.catalog_names`),
    compacted and expired (`lakesort housekeep`); a failure is logged, never fails the report."""
    try:
        # Every source's: pyiceberg's default catalog, and each one a spec or a namespace default names.
        catalogs = catalog_names()
    except Exception as exc:  # noqa: BLE001 - the report still gets written
        log.warning("housekeeping: the registry could not be read: %s", exc)
        return
    for name in catalogs:
        try:
            for result in housekeep(load_catalog(name)):
                log.info("housekeeping: %s", result.summary())
        except Exception as exc:  # noqa: BLE001 - the report still gets written
            log.warning("housekeeping of lakesort's tables in catalog %s failed: %s",
                        name or "(default)", exc)


def advice() -> dict[str, str]:
    """The layout advisor on every configured table whose advice is due (`layout.advise.schedule`), recorded
    for the report's "What would help"; table -> why. A failure is logged, never fails the report."""
    try:
        specs = nightly_specs()
    except Exception as exc:  # noqa: BLE001 - the report still gets written
        log.warning("advice: the registry could not be read: %s", exc)
        return {}
    advised = advise_due(specs)
    if advised:
        log.info("advised %d table(s): %s", len(advised),
                 ", ".join(f"{table} ({why})" for table, why in advised.items()))
    return advised
