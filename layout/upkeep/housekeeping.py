"""Housekeeping of lakesort's own tables (`lakesort.compaction_runs`, `lakesort.pruning_metrics`, ...).

Every record is a commit of a small file: a step of a run replaces its row (`layout.metrics.store.upsert`),
every measurement appends a few rows. A year of nightly runs over a hundred tables leaves hundreds of
thousands of snapshots and files, and every reader and writer of these tables then reads a metadata file
that lists them all. So, nightly (the DAGs' report task) or on demand (`lakesort housekeep`), each table of
the `lakesort` namespace:

1. has its rows rewritten into one file when it has more than MAX_FILES data files (one commit; the
   tables hold only figures, kilobytes to a few megabytes, so one process reads them whole);
2. is maintained like a registered table (`layout.maintenance.run.maintain`) with `own_retention()`: by
   default (OWN_RETENTION) snapshots older than a week expired (the newest 10 kept), then the files nothing
   retained references deleted, a file no snapshot ever listed only once it is a day old;
   $LAKESORT_HOUSEKEEPING_RETENTION changes any of these, as a JSON object of a spec's `retention` fields.

Writers of these tables take no lease: a commit that lands meanwhile makes the rewrite's commit fail
(pyiceberg's optimistic commit, then its validation that no rows were added since the scan; nothing is
lost, the table is skipped until the next night), and
maintenance keeps every file a commit since its listing references.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
from typing import TYPE_CHECKING

from pydantic import ValidationError
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchNamespaceError, ValidationException

from layout import storage
from layout.errors import ConfigError
from layout.io import live_data_files
from layout.maintenance.run import maintain
from layout.metrics.store import NAMESPACE
from layout.models import Frozen
from layout.settings import settings
from layout.spec import Retention

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["MAX_FILES", "OWN_RETENTION", "OwnTable", "housekeep", "own_retention"]

log = logging.getLogger(__name__)

OWN_RETENTION = Retention(max_age=dt.timedelta(days=7), min_snapshots=10, orphan_grace=dt.timedelta(days=1))
MAX_FILES = 8


def own_retention() -> Retention:
    """OWN_RETENTION with the fields $LAKESORT_HOUSEKEEPING_RETENTION gives; a field it cannot take is a
    ConfigError naming the variable, before any table is touched."""
    given = settings().housekeeping_retention
    try:
        return Retention.model_validate({**OWN_RETENTION.model_dump(), **given})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '?'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"$LAKESORT_HOUSEKEEPING_RETENTION={json.dumps(given)}: {problems}. It takes a "
                          "table spec's retention fields, max_age (a duration: 36h, 3d, 2w), min_snapshots "
                          "(at least 1) and orphan_grace (at least 1h); unset it for 7d, 10 and 1d") from None


class OwnTable(Frozen):
    """What housekeeping did to one of lakesort's tables."""

    table: str
    files_before: int
    files_after: int
    rewritten: bool  # its rows were written into one file
    snapshots_expired: int
    files_deleted: int
    bytes_deleted: int
    error: str | None = None  # why it was left as it was (a concurrent commit)

    def summary(self) -> str:
        if self.error:
            return f"{self.table}: left as it was: {self.error}"
        files = f"{self.files_before} -> {self.files_after} data file(s)" if self.rewritten else \
            f"{self.files_before} data file(s)"
        return (f"{self.table}: {files}, {self.snapshots_expired} snapshot(s) expired, {self.files_deleted} "
                f"file(s) deleted ({self.bytes_deleted} bytes)")


def housekeep(catalog: Catalog, *, dry_run: bool = False, now: dt.datetime | None = None) -> list[OwnTable]:
    """Rewrite and maintain every table of the `lakesort` namespace of `catalog` (none yet: nothing to do).
    A dry run rewrites, expires and deletes nothing, and reports what maintenance would do now."""
    retention = own_retention()
    try:
        identifiers = sorted(catalog.list_tables(NAMESPACE))
    except NoSuchNamespaceError:
        return []
    results = []
    for identifier in identifiers:
        name = ".".join(identifier)
        table = catalog.load_table(identifier)
        storage.configure(table.location(), table.io.properties)
        before = _data_files(table)
        rewritten = False
        if before > MAX_FILES and not dry_run:
            try:
                # One snapshot that replaces every file by one. A commit since the scan fails it: pyiceberg
                # retries on the new state and refuses, as rows were added that its scan did not read.
                table.overwrite(table.scan().to_arrow())
                rewritten = True
            except (CommitFailedException, ValidationException) as exc:
                result = OwnTable(table=name, files_before=before, files_after=before, rewritten=False,
                                  snapshots_expired=0, files_deleted=0, bytes_deleted=0,
                                  error=f"another writer committed while its rows were rewritten ({exc}); "
                                        "the next housekeeping retries")
                log.warning("%s", result.summary())
                results.append(result)
                continue
        done = maintain(table.refresh(), retention, lease=contextlib.nullcontext(), dry_run=dry_run, now=now,
                        run_id=f"housekeeping-{(now or dt.datetime.now(dt.UTC)):%Y%m%dT%H%M%SZ}")
        result = OwnTable(table=name, files_before=before, files_after=_data_files(table.refresh()),
                          rewritten=rewritten, snapshots_expired=len(done.snapshots_expired),
                          files_deleted=sum(d.files for d in done.deleted),
                          bytes_deleted=sum(d.bytes for d in done.deleted))
        log.debug("%s", result.summary())  # the caller shows it (maintenance logged its own figures)
        results.append(result)
    return results


def _data_files(table: Table) -> int:
    snapshot = table.current_snapshot()
    return 0 if snapshot is None else len(live_data_files(table))
