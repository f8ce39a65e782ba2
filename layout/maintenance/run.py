"""One maintenance run of a table: expire snapshots by the retention, then delete the files nothing
retained references.

    with the table's lease held (`lease`, entered here):
      1. list every file under the table location (first: a file written after this is not considered);
      2. read the table (the known history: every snapshot's references, DELETED entries included),
         refuse a location that holds another table, and choose the snapshots to expire (`expire.to_expire`);
      3. expire them in one commit (a dry run computes the metadata that commit would write);
      4. collect the references of the retained table and sort the listing (`delete.sort_files`);
      5. re-read the table just before deleting: a commit that landed meanwhile (only a writer without the
         lease can make one) protects what it references; so does a retained reference by another path;
      6. delete, top-down (a dry run deletes nothing and reports what a real run would delete now).

The lease is the caller's (`layout.upkeep.maintain` takes the table lease, as every lakesort run
does): this package sits below `layout.upkeep` and holds whatever it is given for the whole run.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from layout.errors import UsageError
from layout.io import resolve
from layout.maintenance.delete import check_location, delete, list_files, sort_files
from layout.maintenance.expire import expire, expired_metadata, to_expire
from layout.maintenance.referenced import Manifests, References
from layout.maintenance.result import MaintenanceResult

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from layout.spec import Retention

__all__ = ["maintain"]

log = logging.getLogger(__name__)


def _root(table: Table, ident: str) -> tuple[object, str]:
    location = table.location()
    filesystem, root = resolve(location)
    # A location at the top of a filesystem or bucket would make every other table's files "orphans".
    path = root.strip("/")
    if not path or ("://" in location and not location.startswith("file:") and "/" not in path):
        raise UsageError(f"{ident}: the table location {location!r} is the root of its filesystem; "
                         "maintenance deletes unreferenced files under the location, so it refuses this one")
    return filesystem, root.rstrip("/")


def maintain(table: Table, retention: Retention, *, lease: AbstractContextManager[object], run_id: str,
             dry_run: bool = False, now: dt.datetime | None = None) -> MaintenanceResult:
    """Expire `table`'s snapshots by `retention` and delete what nothing retained references, holding
    `lease` (the table's lease) throughout. A dry run commits and deletes nothing and reports what a
    real run would do now. Raises `referenced.MaintenanceError` (nothing deleted) when the references
    cannot be read."""
    ident = ".".join(table.name())
    started_at = now or dt.datetime.now(dt.UTC)
    clock = time.perf_counter()
    filesystem, root = _root(table, ident)
    with lease:
        # 1. What is there.
        listing = list_files(filesystem, root)
        listed = time.perf_counter()

        # 2. The table before: its whole known history, and what the retention expires.
        table = table.refresh()
        manifests = Manifests(table.io)
        known = References(manifests, removed=True)
        known.add_metadata(table.metadata, table.metadata_location)
        check_location(listing, root=root, references=known)
        snapshots_before = len(table.metadata.snapshots)
        expired = to_expire(table.metadata, retention, started_at)
        read = time.perf_counter()

        # 3. Expire (a dry run: the metadata the commit would write, with no file of its own yet).
        if dry_run:
            after, after_location = (expired_metadata(table, expired),
                                     None if expired else table.metadata_location)
            read_location = table.metadata_location
        else:
            expire(table, expired)
            after, after_location = table.metadata, table.metadata_location
            read_location = after_location
        expired_at = time.perf_counter()

        # 4. The retained table's references, and the listing sorted by them.
        retained = References(manifests)
        retained.add_metadata(after, after_location)
        current = after.current_snapshot()
        live_bytes = retained.live_bytes(current)
        files = sort_files(listing, retained=retained, known=known,
                           cutoff=started_at - retention.orphan_grace)

        # 5. Just before deleting: whatever a commit since step 2 or 3 references is protected too.
        table = table.refresh()
        if table.metadata_location != read_location:
            retained.add_metadata(table.metadata, table.metadata_location)
            if late := files.protect(retained):
                log.warning("%s: %d file(s) were referenced by a commit that landed while maintenance ran (a "
                            "writer without the table's lease?): kept", ident, late)
        if aliases := files.keep_aliases(retained):
            log.warning("%s: kept %d unreferenced file(s) whose name a retained snapshot references under "
                        "another path (the metadata spells the "
                        "location differently?), e.g. %s", ident, len(aliases),
                        aliases[0])
        sorted_at = time.perf_counter()

        # 6. Delete.
        done = delete(filesystem, files.files(), table=ident, dry_run=dry_run)
    deleted = MaintenanceResult.tally(done)
    bytes_before = sum(i.size or 0 for i in listing)
    bytes_deleted = sum(d.bytes for d in deleted)
    files_deleted = sum(d.files for d in deleted)
    result = MaintenanceResult(
        table=ident, run_id=run_id, status="dry-run" if dry_run else "done", started_at=started_at,
        seconds=time.perf_counter() - clock, retention=retention, location=root,
        snapshot_id=current.snapshot_id if current else None, snapshots_before=snapshots_before,
        snapshots_expired=tuple(expired), snapshots_after=len(after.snapshots), deleted=deleted,
        kept_referenced=files.referenced, young_orphans=len(files.young_orphans),
        young_orphan_bytes=sum(i.size or 0 for i in files.young_orphans), kept_late=files.late,
        kept_aliased=files.aliased,
        files_before=len(listing), bytes_before=bytes_before, files_after=len(listing) - files_deleted,
        bytes_after=bytes_before - bytes_deleted, live_bytes=live_bytes)
    log.info("%s", result.summary())
    log.info("%s: listing %.2fs (%d files), reading the history %.2fs (%d manifest(s) in all), expiry %.2fs, "
             "references and sorting %.2fs, deleting %.2fs", ident, listed - clock, len(listing),
             read - listed, len(manifests), expired_at - read, sorted_at - expired_at,
             time.perf_counter() - sorted_at)
    return result
