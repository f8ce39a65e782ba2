"""Which snapshots a table's retention expires, and expiring them with pyiceberg.

A snapshot is kept when any of these holds (Iceberg's own rules, with the table spec's `retention` as the
table-wide setting and a ref's own settings, where it has them, keeping more, never less):

- it is the head of a branch or a tag (pyiceberg's `expire_snapshots` refuses those anyway);
- it is one of the newest `min_snapshots` of a branch's ancestry (the head counts; the main branch too);
- it is younger than `max_age`.

Every other snapshot is expired: removed from the metadata with pyiceberg's
`table.maintenance.expire_snapshots().by_ids(...)`, one commit. That removes snapshots from the metadata
only; the files they alone referenced stay until `layout.maintenance.delete` removes them. A dry run
computes the metadata the commit would write (`expired_metadata`) without writing it.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.update import RemoveSnapshotsUpdate, update_table_metadata

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata

    from layout.spec import Retention

__all__ = ["expire", "expired_metadata", "to_expire"]

log = logging.getLogger(__name__)


def _ms(delta: dt.timedelta) -> int:
    return int(delta.total_seconds() * 1000)


def to_expire(metadata: TableMetadata, retention: Retention, now: dt.datetime) -> list[int]:
    """The ids of the snapshots `retention` expires at `now`, oldest first."""
    now_ms = int(now.timestamp() * 1000)
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    keep = {ref.snapshot_id for ref in metadata.refs.values()}  # branch and tag heads
    keep.update(s.snapshot_id for s in metadata.snapshots
                if s.timestamp_ms >= now_ms - _ms(retention.max_age))
    for ref in metadata.refs.values():
        if ref.snapshot_ref_type != SnapshotRefType.BRANCH:
            continue  # a tag keeps its snapshot only, not its history
        count = max(retention.min_snapshots, ref.min_snapshots_to_keep or 0)
        oldest_ms = now_ms - max(_ms(retention.max_age), ref.max_snapshot_age_ms or 0)
        snapshot, depth, seen = by_id.get(ref.snapshot_id), 0, set()
        while snapshot is not None and snapshot.snapshot_id not in seen:  # `seen`: a corrupt parent cycle
            seen.add(snapshot.snapshot_id)
            if depth < count or snapshot.timestamp_ms >= oldest_ms:
                keep.add(snapshot.snapshot_id)
            depth += 1
            snapshot = (by_id.get(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id is not None
                        else None)
    expired = [s for s in metadata.snapshots if s.snapshot_id not in keep]
    return [s.snapshot_id for s in sorted(expired, key=lambda s: (s.timestamp_ms, s.snapshot_id))]


def expired_metadata(table: Table, snapshot_ids: list[int]) -> TableMetadata:
    """The metadata expiring `snapshot_ids` would commit (snapshots, refs, snapshot log, statistics and the
    metadata log trimmed to write.metadata.previous-versions-max), computed by pyiceberg, written nowhere."""
    if not snapshot_ids:
        return table.metadata
    return update_table_metadata(table.metadata, (RemoveSnapshotsUpdate(snapshot_ids=snapshot_ids),),
                                 metadata_location=table.metadata_location)


def expire(table: Table, snapshot_ids: list[int]) -> None:
    """Expire `snapshot_ids` in one commit (nothing to commit for none);
    `table` then holds the new metadata."""
    if not snapshot_ids:
        return
    table.maintenance.expire_snapshots().by_ids(snapshot_ids).commit()
    log.info("%s: expired %d snapshot(s), metadata now %s", ".".join(table.name()), len(snapshot_ids),
             table.metadata_location)
