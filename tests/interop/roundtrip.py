"""One lakesort compaction of a table Iceberg Spark wrote, judged by Iceberg Spark (and pyiceberg).

`compact_and_judge` reads the table with Iceberg Spark at its current snapshot and at every retained one,
compacts it through lakesort's real pipeline (the job on the test's Spark session, lakesort's own layout
verification), then reads every one of those snapshots again and the new one: the rows must be the same
multisets, floats by bits. pyiceberg's read by field id must agree too, and Iceberg's metadata tables load.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from iceberg_bed import assert_same_rows
from lossless import OWNER, assert_same, by_field_id

METADATA_TABLES = ("files", "manifests", "partitions", "snapshots", "entries", "history", "all_data_files")


def spec(name: str, **extra: Any):
    """A spec for `name`: silent on sort keys unless given (the table's own sort order applies then)."""
    from layout.spec import parse_spec

    doc: dict[str, Any] = {"table": name, "owner": OWNER, "target_file_size": "1MiB"}
    doc.update(extra)
    return parse_spec(doc, source="test")


@dataclass(frozen=True)
class Judged:
    result: Any  # the driver's CompactResult
    before: int  # the snapshot compacted
    after: int  # the snapshot lakesort committed


def compact_and_judge(bed, name: str, table_spec=None, *, force: bool = True,
                      measure: bool = False) -> Judged:
    from layout.compaction.pipeline.driver import compact

    spark = bed.spark
    snapshots = [s["snapshot_id"] for s in spark.snapshots(name)]
    assert snapshots, f"{name} has no snapshot"
    before = {sid: spark.read(name, sid) for sid in snapshots}
    current = bed.catalog.load_table(name)
    # pyiceberg 0.12 reads position deletes but refuses equality deletes:
    # then only Iceberg Spark judges before.
    by_pyiceberg = None if _has_equality_deletes(spark, name) else by_field_id(current)
    assert_same_rows(before[snapshots[-1]], spark.read(name), what=f"{name}: Iceberg Spark's current read")

    result = compact(name, spec=table_spec or spec(name), force=force, measure=measure)
    assert result.plan is not None and result.plan.groups, f"lakesort planned nothing for {name}"

    after_snapshots = spark.snapshots(name)
    added = [s for s in after_snapshots if s["snapshot_id"] not in snapshots]
    assert len(added) == 1, f"lakesort committed {len(added)} snapshot(s) to {name}: {after_snapshots}"
    new = added[0]
    assert new["operation"] == "replace", f"lakesort's commit to {name} is a {new['operation']!r} snapshot"
    assert_same_rows(before[snapshots[-1]], spark.read(name), what=f"{name} after lakesort's commit")
    for sid in snapshots:  # every retained snapshot still reads as it did
        assert_same_rows(before[sid], spark.read(name, sid), what=f"{name} at snapshot {sid}")
    if by_pyiceberg is not None:
        assert_same(by_pyiceberg, by_field_id(bed.catalog.load_table(name)))
    # lakesort removed them all: pyiceberg reads the rows Spark does
    elif not _has_equality_deletes(spark, name):
        assert_same_rows(before[snapshots[-1]], by_field_id_as_spark(bed, name),
                         what=f"{name}: pyiceberg's read after")
    for meta in METADATA_TABLES:
        spark.sql(f"SELECT count(*) FROM {name}.{meta}")
    return Judged(result, snapshots[-1], new["snapshot_id"])


def _has_equality_deletes(spark, name: str) -> bool:
    return bool(spark.sql(f"SELECT 1 FROM {name}.delete_files WHERE content = 2 LIMIT 1"))


def by_field_id_as_spark(bed, name: str):
    """pyiceberg's read of the table, in the column types Iceberg Spark's read has (for
    `assert_same_rows`)."""
    data = bed.catalog.load_table(name).scan().to_arrow()
    return data.cast(bed.spark.read(name, columns="*").schema) if data.num_rows else data


def live_deletes(bed, name: str) -> list[dict[str, Any]]:
    """The table's live delete files as Iceberg's `delete_files` metadata table lists them."""
    return bed.spark.columns("SELECT file_path, content, record_count, "
                             f"equality_ids FROM {name}.delete_files")


def live_files(bed, name: str) -> list[dict[str, Any]]:
    """The table's live data files as Iceberg's `files` metadata table lists them."""
    partition = ", partition" if bed.catalog.load_table(name).spec().fields else ""
    return bed.spark.columns(
        "SELECT file_path, record_count, file_size_in_bytes, column_sizes, value_counts, null_value_counts, "
        "nan_value_counts, lower_bounds, upper_bounds, split_offsets, sort_order_id, "
        f"spec_id{partition} FROM {name}.files")
