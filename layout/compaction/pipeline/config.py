"""A run's configuration, resolved once: the table's spec, where it was read from, and its hash.

A run resolves it at its start (`lakesort compact`, the DAG's first task, or `runs.prepare_table` when it
was given none) and carries it: in the DAGs' `TableRequest` (XCom) and in the `PreparedRun` (run.json), so
no later step (verify, commit, measure, record, maintain) looks the table up in the registry again.

The one re-read is `check_unchanged`, in verify and commit: the spec's own file, once (not every file of
the registry), and a run whose spec changed since its plan is refused (`SpecChanged`, exit status 2).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import model_validator

from layout.errors import ConfigError
from layout.models import Frozen
from layout.spec import TableSpec, load_spec

__all__ = ["RunConfig", "SpecChanged", "check_unchanged"]


class SpecChanged(ConfigError):
    """The table's spec changed between a run's plan and its verify or commit step: the run is refused."""


class RunConfig(Frozen):
    """The table's spec as the run resolved it, the file it came from and its `spec_hash` then."""

    spec: TableSpec
    spec_hash: str
    source: str  # the spec's file (or the label a spec given in code carries), for messages
    on_disk: bool  # `source` is a file: verify and commit re-read it (`check_unchanged`)

    @classmethod
    def of(cls, spec: TableSpec) -> RunConfig:
        return cls(spec=spec, spec_hash=spec.spec_hash, source=spec.source, on_disk=Path(spec.source).is_file())

    @model_validator(mode="after")
    def _restored(self) -> RunConfig:
        # TableSpec keeps its file in a private attribute, which JSON leaves out: back in, for its messages.
        self.spec._source = self.source
        if self.spec.spec_hash != self.spec_hash:
            raise ValueError(f"the spec of {self.spec.table} hashes to {self.spec.spec_hash}, not to the run's "
                             f"{self.spec_hash}: the run's file was edited; rerun the compaction")
        return self


def check_unchanged(config: RunConfig, *, table: str, run_id: str) -> None:
    """Raise `SpecChanged` naming the file when the spec there is no longer the one run `run_id` was planned
    with (another table's, unreadable, or another `spec_hash`). One file is read; nothing for a spec given
    in code. Fields outside the hash (owner, probes, verification bounds) may change: the run keeps its own."""
    if not config.on_disk:
        return
    try:
        now = load_spec(config.source)
    except ConfigError as exc:
        raise SpecChanged(f"{config.source} can no longer be read since run {run_id} was planned ({exc}): "
                          "nothing committed; fix the spec, then rerun the compaction") from None
    if now.table != table:
        raise SpecChanged(f"{config.source} is the spec of {now.table} now, not of {table}, since run {run_id} was "
                          "planned: nothing committed; rerun the compaction with the table's spec")
    if now.spec_hash != config.spec_hash:
        raise SpecChanged(f"{config.source} changed since run {run_id} was planned (spec hash {config.spec_hash} "
                          f"-> {now.spec_hash}): nothing committed; rerun the compaction to plan with the new spec")
