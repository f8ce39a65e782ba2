"""The staged-output manifest: what the compaction job wrote, and what the commit must check.

The Spark job writes one per run (JSON) next to its staged files; the commit step re-reads the staged
files, recounts and re-fingerprints them, and commits only when they match the input's figures here.
"""

from __future__ import annotations

from layout.models import Frozen


class StagedFile(Frozen):
    path: str  # full URI as Iceberg will record it
    size: int
    rows: int
    partition_key: str = "[]"  # its partition values under the plan's spec (`layout.compaction.partitions`)


class StagedGroup(Frozen):
    group_id: int
    partition: str
    inputs: tuple[str, ...]
    input_rows: int  # rows read
    expected_rows: int  # rows the output must hold: input_rows, or the merged input's for keyed tables
    expected_hash_sum: str  # the (merged) input's fingerprint sum, as a decimal string (exact)
    outputs: tuple[StagedFile, ...]
    seconds: float


class StagedManifest(Frozen):
    run_id: str
    table: str
    staging_dir: str
    groups: tuple[StagedGroup, ...]
    spark_version: str
    spark_master: str
    spark_conf: dict[str, str]
    writer_options: dict[str, str]
    seconds: float

    def to_json(self) -> str:
        return self.model_dump_json(indent=1)

    @classmethod
    def from_json(cls, text: str) -> StagedManifest:
        return cls.model_validate_json(text)
