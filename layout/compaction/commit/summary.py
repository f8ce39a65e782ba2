"""The snapshot summary properties lakesort writes on its commits: spelled once, written and parsed here.

A run's snapshot is found by its run id (and, for a run committed in parts, its part number) only, never by
its position in the history: another writer may have committed after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from layout.catalog import RUN_ID, SPEC_HASH
from layout.models import Frozen

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

__all__ = ["RunSummary", "run_snapshots"]

_PREFIX = "lakesort."
ROWS, INPUT_FILES, OUTPUT_FILES = f"{_PREFIX}rows", f"{_PREFIX}input-files", f"{_PREFIX}output-files"
INPUT_BYTES, OUTPUT_BYTES = f"{_PREFIX}input-bytes", f"{_PREFIX}output-bytes"
BASE_SNAPSHOT = f"{_PREFIX}base-snapshot-id"
PART, PARTS = f"{_PREFIX}part", f"{_PREFIX}parts"
CARRIED_DELETE_FILES, CARRIED_DELETE_ROWS = f"{_PREFIX}carried-delete-files", f"{_PREFIX}carried-deletes"
ATTEMPTS = f"{_PREFIX}commit-attempts"
DATA_SEQUENCE_NUMBER = f"{_PREFIX}data-sequence-number"


class RunSummary(Frozen):
    """What one commit of a run records in its snapshot's summary. `part` counts from 1; a run committed in
    one snapshot is part 1 of 1 (older runs wrote no part: they read as 1 of 1)."""

    run_id: str
    spec_hash: str
    rows: int = 0
    input_files: int = 0
    output_files: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    base_snapshot_id: int | None = None
    part: int = 1
    parts: int = 1
    carried_delete_files: int = 0
    carried_delete_rows: int = 0
    attempts: int = 1
    data_sequence_number: int | None = None

    def properties(self) -> dict[str, str]:
        props = {
            RUN_ID: self.run_id, SPEC_HASH: self.spec_hash, ROWS: str(self.rows),
            INPUT_FILES: str(self.input_files), OUTPUT_FILES: str(self.output_files),
            INPUT_BYTES: str(self.input_bytes), OUTPUT_BYTES: str(self.output_bytes),
            BASE_SNAPSHOT: str(self.base_snapshot_id), PART: str(self.part), PARTS: str(self.parts),
            ATTEMPTS: str(self.attempts),
        }
        if self.carried_delete_files:
            props |= {CARRIED_DELETE_FILES: str(self.carried_delete_files),
                      CARRIED_DELETE_ROWS: str(self.carried_delete_rows)}
        if self.data_sequence_number is not None:
            props[DATA_SEQUENCE_NUMBER] = str(self.data_sequence_number)
        return props

    @classmethod
    def parse(cls, props: Mapping[str, str]) -> RunSummary | None:
        """The summary of a lakesort commit; None for another writer's snapshot."""
        if RUN_ID not in props:
            return None

        def number(key: str, default: int = 0) -> int:
            raw = props.get(key)
            return int(raw) if raw not in (None, "", "None") else default

        base = props.get(BASE_SNAPSHOT)
        seq = props.get(DATA_SEQUENCE_NUMBER)
        return cls(
            run_id=props[RUN_ID], spec_hash=props.get(SPEC_HASH, ""), rows=number(ROWS),
            input_files=number(INPUT_FILES), output_files=number(OUTPUT_FILES),
            input_bytes=number(INPUT_BYTES), output_bytes=number(OUTPUT_BYTES),
            base_snapshot_id=int(base) if base not in (None, "", "None") else None,
            part=number(PART, 1), parts=number(PARTS, 1),
            carried_delete_files=number(CARRIED_DELETE_FILES),
            carried_delete_rows=number(CARRIED_DELETE_ROWS),
            attempts=number(ATTEMPTS, 1), data_sequence_number=int(seq) if seq else None,
        )


def run_snapshots(table: Table, run_id: str) -> dict[int, tuple[Snapshot, RunSummary]]:
    """The snapshots the run committed, by part number (never another writer's snapshot)."""
    found: dict[int, tuple[Snapshot, RunSummary]] = {}
    for snap in table.snapshots():
        if snap.summary is None:
            continue
        summary = RunSummary.parse(snap.summary.additional_properties)
        if summary is not None and summary.run_id == run_id:
            found.setdefault(summary.part, (snap, summary))
    return found
