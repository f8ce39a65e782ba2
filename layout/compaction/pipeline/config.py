"""A run's configuration, resolved once: the table's spec, where it was read from, and its hash.

A run looks the spec up at its start (`lakesort compact`, the DAG's first task, or `runs.prepare_table` when
it was given none) and carries it: in the DAGs' `TableRequest` (XCom) and in the `PreparedRun` (run.json), so
no later step (verify, commit, measure, record, maintain) looks the table up in the registry again. The plan
(`steps.prepare`, the first step that loads the table) resolves it against the table once (`resolved`): the
table's write properties fill the writer settings the spec file does not set
(`layout.spec.table_properties`), and the hash is the resolved spec's, so a property change is a config
change. Until then the spec travels as its file set it (defaults left out),
so "set in the file" survives JSON.

The one re-read is `check_unchanged`, in verify and commit: the spec's own file, once (not every file of
the registry), and a run whose spec changed since its plan is refused (`SpecChanged`, exit status 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import SerializationInfo, field_serializer, model_validator

from layout.errors import ConfigError
from layout.models import Frozen
from layout.registry.resolution import Resolution, SourceKind
from layout.spec import TableSpec, load_spec
from layout.spec.table_properties import resolve_spec, write_properties

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["KeyOrigin", "RunConfig", "SpecChanged", "check_unchanged"]


class SpecChanged(ConfigError):
    """The table's spec changed between a run's plan and its verify or commit step: the run is refused."""


class KeyOrigin(Frozen):
    """Where one key of the run's configuration came from (`layout.registry.resolution.KeySource`)."""

    kind: SourceKind
    origin: str


class RunConfig(Frozen):
    """The table's spec as the run resolved it, the file it came from and its `spec_hash` then."""

    # as its file set it; once `resolved`, with the table's write properties where it is silent
    spec: TableSpec
    spec_hash: str
    source: str  # the spec's file (or the label a spec given in code carries), for messages
    on_disk: bool  # `source` is a file: verify and commit re-read it (`check_unchanged`)
    # The table's write properties the spec was resolved with (`write_properties`); None: not resolved yet.
    table_properties: dict[str, str] | None = None
    # Per key a source set, where it came from (the registry's resolution); None: not known (a spec given in
    # code or by `--spec`). The run's record keeps it (`steps.record`).
    sources: dict[str, KeyOrigin] | None = None

    @classmethod
    def of(cls, spec: TableSpec) -> RunConfig:
        return cls(spec=spec, spec_hash=spec.spec_hash, source=spec.source,
                   on_disk=Path(spec.source).is_file())

    @classmethod
    def of_resolution(cls, resolution: Resolution) -> RunConfig:
        """The run's configuration from the registry's resolution of the table:
        its spec and each key's source."""
        if resolution.spec is None:
            raise ConfigError(f"table {resolution.table!r} is not configured: {resolution.reason}")
        sources = {s.key: KeyOrigin(kind=s.kind, origin=s.origin) for s in resolution.sources}
        return cls.of(resolution.spec).model_copy(update={"sources": sources})

    def sources_json(self) -> str | None:
        """`sources` as the run's record keeps it: a JSON object, key -> {kind, origin};
        None when not known."""
        if self.sources is None:
            return None
        return json.dumps({k: v.model_dump() for k, v in sorted(self.sources.items())})

    def resolved(self, table: Table) -> RunConfig:
        """The configuration with the table's write properties in (`layout.spec.table_properties`); itself
        when already resolved: a run resolves once, at its plan. Raises `ConfigError` naming a property
        lakesort cannot honour."""
        if self.table_properties is not None:
            return self
        properties = write_properties(table.properties)
        spec = resolve_spec(self.spec, properties, columns=table.schema().column_names)
        return self.model_copy(update={"spec": spec, "spec_hash": spec.spec_hash,
                                       "table_properties": properties})

    @field_serializer("spec")
    def _as_set(self, spec: TableSpec, info: SerializationInfo) -> dict[str, Any]:
        # The settings the file (or the resolution) set, not the defaults: read back, the spec is the same
        # (defaults and derived values filled in again) and still tells a setting left to the table.
        return spec.model_dump(mode=info.mode, exclude_unset=True)

    @model_validator(mode="after")
    def _restored(self) -> RunConfig:
        # TableSpec keeps its file in a private attribute, which JSON leaves out: back in, for its messages.
        self.spec._source = self.source
        if self.spec.spec_hash != self.spec_hash:
            raise ValueError(f"the spec of {self.spec.table} hashes to {self.spec.spec_hash}, not to the "
                             f"run's {self.spec_hash}: the run's file was edited; rerun the compaction")
        return self


def check_unchanged(config: RunConfig, *, table: str, run_id: str) -> None:
    """Raise `SpecChanged` naming the file when the spec there is no longer the one run `run_id` was planned
    with (another table's, unreadable, or another `spec_hash`). One file is read; nothing for a spec given
    in code. Fields outside the hash (owner, probes, verification bounds) may change: the run keeps its own.
    The file is resolved with the table's write properties the run recorded,
    so only the file's edits count."""
    if not config.on_disk:
        return
    try:
        now = load_spec(config.source)
        if config.table_properties is not None:
            now = resolve_spec(now, config.table_properties)
    except ConfigError as exc:
        raise SpecChanged(f"{config.source} can no longer be read since run {run_id} was planned ({exc}): "
                          "nothing committed; fix the spec, then rerun the compaction") from None
    if now.table != table:
        raise SpecChanged(f"{config.source} is the spec of {now.table} now, not of {table}, since run "
                          f"{run_id} was planned: nothing committed; "
                          "rerun the compaction with the table's spec")
    if now.spec_hash != config.spec_hash:
        raise SpecChanged(f"{config.source} changed since run {run_id} was planned (spec hash "
                          f"{config.spec_hash} -> {now.spec_hash}): nothing committed; rerun the compaction "
                          "to plan with the new spec")
