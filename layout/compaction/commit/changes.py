"""What one commit attempt changes: Java's `rewriteFiles(dataToReplace, deletesToReplace, dataToAdd,
deletesToAdd)` and the data sequence number of the added data files, as one frozen value per attempt.

The delete files to remove are those that apply to no live data file once the inputs go. The outputs are live
data files at the plan's sequence number, so an equality delete committed during the job applies to them and
stays; a position delete never names an output (they were written after it), so for position deletes the
outputs do not count: a carried position delete (its rows now deleted by a file on the outputs) dangles once
its inputs go, unless it also names other live files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from layout.read.deletes import DataRef, DeleteFile, DeleteIndex

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyiceberg.manifest import DataFile, ManifestEntry

    from layout.compaction.commit.state import LiveDelete, TableState

__all__ = ["Changes", "changes_of", "dangling"]


@dataclass(frozen=True, slots=True)
class Changes:
    remove_data: tuple[ManifestEntry, ...]  # the inputs' live entries
    remove_deletes: tuple[LiveDelete, ...]  # delete files that apply to no live data file afterwards
    add_data: tuple[DataFile, ...]  # the outputs
    add_deletes: tuple[DataFile, ...]  # position deletes carried onto the outputs
    data_sequence_number: int  # of the added data files: the plan's snapshot's

    @property
    def removed_paths(self) -> frozenset[str]:
        data = {e.data_file.file_path for e in self.remove_data}
        return frozenset(data | {d.path for d in self.remove_deletes})


def dangling(deletes: Sequence[DeleteFile], remaining: Sequence[DataRef], outputs: Sequence[DataRef]
             ) -> tuple[DeleteFile, ...]:
    """The delete files applying to none of `remaining` (live data files kept) and, equality deletes only,
    to none of `outputs`."""
    index = DeleteIndex(deletes)
    used = {d.path for ref in remaining for d in index.for_file(ref)}
    used |= {d.path for ref in outputs for d in index.for_file(ref) if d.kind == "equality"}
    return tuple(d for d in deletes if d.path not in used)


def changes_of(state: TableState, inputs: Sequence[ManifestEntry], *, outputs: Sequence[DataFile],
               outputs_partition: Sequence[DataRef], carried: Sequence[DataFile], data_sequence_number: int
               ) -> Changes:
    """The changes of an attempt on `state`. `outputs_partition`: the outputs as the rule sees them (their
    spec, encoded partition and `data_sequence_number`)."""
    gone = {e.data_file.file_path for e in inputs}
    live = state.deletes()
    remaining = [ref for ref in state.data() if ref.path not in gone]
    dead = {d.path for d in dangling([d.rule for d in live], remaining, outputs_partition)}
    return Changes(tuple(inputs), tuple(d for d in live if d.path in dead), tuple(outputs), tuple(carried),
                   data_sequence_number)
