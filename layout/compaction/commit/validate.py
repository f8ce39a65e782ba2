"""The commit's validation: a named step, run on the state an attempt is built on, before any manifest is
written. Its result is a frozen value the rest of the attempt takes; a conflict it cannot resolve is a
`CommitRefused` naming the file and the cause.

The plan read the table at a snapshot whose data sequence number is `plan_sequence` (S). The job applied
every delete file live there that applied to an input; the outputs are committed at S (Java's `RewriteFiles`
`dataSequenceNumber`, "use-starting-sequence-number"). A live delete file is classified by ITS sequence
number:
- <= S: the plan saw it; it applied to an input only if the plan applied it, and it does not apply to the
  outputs (an equality delete needs a data sequence number strictly lower; a position delete names paths the
  outputs do not have);
- > S: committed during the job (another writer):
  * an equality delete still applies to the outputs (S < its number): nothing to do;
  * a position delete on an input names rows of a file that is going away: those rows must be deleted in
    the outputs too, by position deletes carried onto them (`layout.compaction.commit.carry`).
Every input must still be live (a concurrent rewrite or delete of an input refuses the commit) and the
partition spec the outputs were written under must still be the table's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from layout.compaction.integrity.staged import CommitRefused

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pyiceberg.manifest import ManifestEntry

    from layout.compaction.commit.state import LiveDelete, TableState
    from layout.read.deletes import DataRef

__all__ = ["Validated", "classify", "validate"]


@dataclass(frozen=True, slots=True)
class Validated:
    """What an attempt may commit on its state."""

    inputs: tuple[ManifestEntry, ...]  # the inputs' live entries (their DataFiles and sequence numbers)
    to_carry: tuple[LiveDelete, ...]  # position deletes committed during the job that apply to an input
    concurrent_equality: tuple[LiveDelete, ...]  # equality deletes committed during the job (they apply on)
    concurrent: int  # delete files committed during the job, wherever they apply


def classify(deletes: Iterable[LiveDelete], inputs: Iterable[DataRef], *, plan_sequence: int
             ) -> tuple[tuple[LiveDelete, ...], tuple[LiveDelete, ...], int]:
    """(position deletes to carry, concurrent equality deletes applying to an input, concurrent count)."""
    refs = tuple(inputs)
    carry: list[LiveDelete] = []
    equality: list[LiveDelete] = []
    concurrent = 0
    for d in deletes:
        if d.rule.sequence_number <= plan_sequence:
            continue
        concurrent += 1
        if not any(d.rule.applies_to(ref) for ref in refs):
            continue
        (equality if d.rule.kind == "equality" else carry).append(d)
    by_path = sorted(carry, key=lambda d: d.path), sorted(equality, key=lambda d: d.path)
    return tuple(by_path[0]), tuple(by_path[1]), concurrent


def validate(state: TableState, *, table: str, inputs: frozenset[str], spec_id: int, plan_sequence: int
             ) -> Validated:
    """Validate an attempt's state (see the module's doc); raises CommitRefused."""
    if state.spec_id != spec_id:
        raise CommitRefused(f"{table}: the partition spec changed since planning (now {state.spec_id}, "
                            f"planned {spec_id}); nothing committed, the next run rewrites into the new spec")
    live = state.live_inputs()
    gone = sorted(inputs - live.keys())
    if gone:
        raise CommitRefused(f"{len(gone)} input file(s) are no longer in {table} (a concurrent commit "
                            f"rewrote or removed them), e.g. {gone[0]}; nothing committed, the next run "
                            "retries")
    refs = [ref for ref in state.data() if ref.path in inputs]
    carry, equality, concurrent = classify(state.deletes(), refs, plan_sequence=plan_sequence)
    return Validated(tuple(live[p] for p in sorted(inputs)), carry, equality, concurrent)
