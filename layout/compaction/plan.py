"""The rewrite plan: the frozen value the planner produces and the Spark job, verify and commit consume.

`layout.compaction.planning.planner` decides what to rewrite and returns a `RewritePlan`; the job
(jobs/compact.py) reads it from JSON in the Spark driver. Consumers depend on this module, never on the
planner: the job's driver imports it in 0.1 s where the planner (with pyiceberg's table, the table spec's
SQL parser and the admission checks) took 0.4-0.7 s, on the job's critical path before Spark starts.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from layout import transforms
from layout.models import Frozen, Strategy

__all__ = ["Action", "DeleteInput", "InputFile", "MergeRuleModel", "PartitionDecision", "RewriteGroup",
           "RewritePlan", "SortKeyModel"]

Action = Literal["rewrite", "skip", "refuse"]


class SortKeyModel(Frozen):
    column: str
    direction: Literal["asc", "desc"] = "asc"
    nulls: Literal["first", "last"] = "first"
    # An Iceberg transform of the column (`layout.transforms`): the job sorts by its values. Left out of the
    # dump when identity, so plans read and compare as before transforms existed.
    transform: str = transforms.IDENTITY

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        return transforms.without_identity(handler(self))

    @property
    def transformed(self) -> bool:
        return self.transform != transforms.IDENTITY


class MergeRuleModel(Frozen):
    """For keyed tables: one row per key survives (deduplicate: highest sequence; first-row: lowest)."""

    columns: tuple[str, ...]
    sequence: str
    merge: Literal["deduplicate", "first-row"]


class InputFile(Frozen):
    path: str  # exactly as the manifest records it (the job reads it through the table's FileIO)
    size: int
    rows: int  # the manifest's record_count: the job checks every file reads back this many rows
    lo: Any = None  # first sort key bounds from the manifest (None: unknown)
    hi: Any = None
    # Per sort key, its (lower, upper) bound from the manifest as an ordinal (`sort_prefix.bound_ordinal`);
    # None where unknown or the type has no ordinal. The job takes its sort prefix's ranges from them.
    ranges: tuple[tuple[int, int] | None, ...] = ()
    spec_id: int = 0  # the partition spec the file was written under
    # its partition values under that spec (`layout.compaction.executor.partitions`)
    partition_key: str = "[]"
    # Spark's own reader reads it as Iceberg does (`layout.compaction.executor.inputs.native_reason`), decided
    # by the prepare step from the footer: the job reads it natively instead of through pyiceberg in Python.
    spark_native: bool = False
    # Estimated bytes of its variable-length values once decoded
    # (`layout.compaction.executor.memory.value_bytes`, from the footer, by the prepare step; None before):
    # how large a write task's piece may be.
    value_bytes: int | None = None
    # its data sequence number: which delete files apply to it (`layout.read.deletes`)
    sequence_number: int = 0
    # The lakesort run that wrote it under the plan's layout (its snapshot summary's run id), so sorted by the
    # plan's keys; None for other writers' files and older layouts. A group of such files only is merged, not
    # sorted, when their page indexes agree (jobs/compaction/merge.py).
    sorted_run: str | None = None


class DeleteInput(Frozen):
    """A delete file that applies to inputs of a group: the job applies it to their rows by Iceberg's rules
    (`layout.read.deletes`), from these attributes alone."""

    path: str
    kind: Literal["position", "equality"]
    size: int
    rows: int  # its record_count: deleted positions, or equality keys
    sequence_number: int
    spec_id: int
    partition_key: str  # under its own spec, encoded as the inputs' (`layout.compaction.executor.partitions`)
    unpartitioned: bool = False  # an equality delete of an unpartitioned spec: applies in every partition
    equality_ids: tuple[int, ...] = ()
    # Equality deletes: the column of each id as the job's read schema (the table's current one) names it: a
    # top-level column, or a dotted path through structs.
    equality_columns: tuple[str, ...] = ()


class PartitionDecision(Frozen):
    partition: str  # Iceberg partition path, e.g. "l_shipdate_month=1995-03" ("" when unpartitioned)
    action: Action
    reasons: tuple[str, ...]
    files: int
    bytes: int
    rows: int
    small_files: int
    foreign_files: int  # not written by lakesort under this spec (adopted ones included)
    overlap_depth: int
    delete_files: int = 0  # distinct delete files that apply to the partition's data files
    delete_rows: int = 0  # their record counts: rows deleted by position, keys deleted by equality
    # lakesort's runs in the partition before the rewrite (`layout.compaction.planning.sorted_runs`)
    sorted_runs: int = 0
    # Foreign files kept as they are: they already meet the spec (`layout.compaction.planning.adoption`).
    adopted_files: int = 0


class RewriteGroup(Frozen):
    group_id: int
    partition: str
    inputs: tuple[InputFile, ...]
    output_files: int  # how many files the job should write: input bytes over the target size
    reasons: tuple[str, ...]
    deletes: tuple[DeleteInput, ...] = ()  # every delete file that applies to one of the inputs

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.inputs)

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.inputs)

    @property
    def delete_rows(self) -> int:
        """The delete files' record counts (an upper bound of the rows they delete here)."""
        return sum(d.rows for d in self.deletes)


class RewritePlan(Frozen):
    """Everything the compaction job and the commit need; `groups` is empty when there is nothing to do."""

    run_id: str
    table: str
    catalog: str | None
    table_location: str
    metadata_location: str  # the metadata planned against: executors read the inputs through it
    io_properties: dict[str, str] = Field(default_factory=dict)  # the FileIO's properties, secrets left out
    partition_spec_id: int = 0  # the current spec: outputs are partitioned by it
    snapshot_id: int | None  # the snapshot planned against: the commit refuses if inputs changed since
    # Its data sequence number: the outputs are committed at it (Java's `RewriteFiles.dataSequenceNumber`), so
    # a delete committed during the job still applies to them. None in plans written before it was recorded.
    sequence_number: int | None = None
    spec_hash: str
    strategy: Strategy  # linear, or a curve (zorder, hilbert: layout.curves) over the sort keys
    sort_keys: tuple[SortKeyModel, ...]
    target_file_size: int
    writer_options: dict[str, str]  # DataFrameWriter options for parquet-mr, from the spec
    keys: MergeRuleModel | None = None
    table_schema_json: str  # the table's current Iceberg schema: the job reads inputs with it
    forced: bool
    created_at: float
    partitions: tuple[PartitionDecision, ...]
    groups: tuple[RewriteGroup, ...]

    @property
    def input_bytes(self) -> int:
        return sum(g.bytes for g in self.groups)

    @property
    def input_rows(self) -> int:
        """The rows the input files hold, as planned (before deletes or a merge rule drop any)."""
        return sum(g.rows for g in self.groups)

    @property
    def has_deletes(self) -> bool:
        return any(g.deletes for g in self.groups)

    def to_json(self) -> str:
        return self.model_dump_json(indent=1)

    @classmethod
    def from_json(cls, text: str) -> RewritePlan:
        return cls.model_validate_json(text)
