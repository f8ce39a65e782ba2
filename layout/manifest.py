"""The staged-output manifest: what the compaction job wrote, and what verify and commit check.

The Spark job writes one per job (JSON): per group the input's rows, the input's fingerprint over all
groups (computed by Spark executors in the pass that reads the input for the write), and per staged file
its size and footer row count and the rows and fingerprint Spark read back from storage after the write.
Every row's hash is salted with its group id (`layout.compaction.integrity.fingerprint.salted`), so one sum
over all groups tells a row in its group from the same row in another; the commit takes all groups or none.
The verify step compares them and proves the output against Iceberg's metadata; the commit checks that the
verified files are unchanged.
"""

from __future__ import annotations

from pydantic import Field

from layout.models import Frozen


class StagedFile(Frozen):
    path: str  # full URI as Iceberg will record it
    size: int
    rows: int
    # its partition values under the plan's spec (`layout.compaction.executor.partitions`)
    partition_key: str = "[]"
    # What Spark read back from the file in storage after the write (None: a manifest without read-back).
    read_back_rows: int | None = None
    read_back_hash_sum: str | None = None  # decimal string (exact), each row's hash salted with its group id


class StagedGroup(Frozen):
    group_id: int
    partition: str
    inputs: tuple[str, ...]
    input_rows: int  # rows read
    # rows the output must hold: input_rows less deleted_rows, or the merged input's for keyed tables
    expected_rows: int
    outputs: tuple[StagedFile, ...]
    seconds: float
    # Keyed tables: keys found twice in one partition, and null keys, in the staged files read back.
    duplicate_keys: int | None = None
    null_keys: int | None = None
    # Merge-on-read: rows the group's delete files deleted (by position, from the delete files alone; by
    # equality, by a semi-join), None without delete files. The output holds input_rows -
    # deleted_rows (keyed: at most).
    deleted_rows: int | None = None


class JobWarning(Frozen):
    """Something the job noticed in its input and worked around (`StagedManifest.warnings`)."""

    rule: str  # e.g. "manifest_bounds"
    column: str | None
    message: str


class StagedManifest(Frozen):
    run_id: str
    table: str
    staging_dir: str
    groups: tuple[StagedGroup, ...]
    # The (merged) input's fingerprint over all groups, rows salted with their group id: a decimal string.
    expected_hash_sum: str
    spark_version: str
    spark_master: str
    spark_conf: dict[str, str]
    writer_options: dict[str, str]
    seconds: float
    # the job's parts, in seconds (read and fingerprint, boundaries, write, read back)
    timings: dict[str, float] = Field(default_factory=dict)
    # What the job noticed in its input and worked around, by column (None: the whole input): a writer's
    # manifest bounds that miss values, which cost a second write. Verification reports each as a warning.
    warnings: tuple[JobWarning, ...] = ()

    def to_json(self) -> str:
        return self.model_dump_json(indent=1)

    @classmethod
    def from_json(cls, text: str) -> StagedManifest:
        return cls.model_validate_json(text)
