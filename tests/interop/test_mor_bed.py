"""The merge-on-read tables of `mor_tables`, as Iceberg Spark reads them: each reads as its expected rows
(computed in Python), and Iceberg's metadata tables list the delete files it was built to have.

`check_built` is the check; tests/interop/test_iceberg_deletes.py runs it on each table it compacts
(`COMPACTED`) before compacting, so those are not built twice: this file checks the others."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from iceberg_bed import assert_same_rows
from mor_tables import BUILDERS, COMPACTED

CONTENT = {1: "position", 2: "equality"}


@pytest.mark.parametrize("kind", sorted(set(BUILDERS) - set(COMPACTED)))
def test_merge_on_read_table(bed, kind):
    check_built(bed, BUILDERS[kind](bed), kind)


def check_built(bed, mor, kind: str) -> None:
    """`mor` (built by `BUILDERS[kind]`) reads as expected,
    with the delete files and data files it was built to have."""
    spark, name = bed.spark, mor.name

    read = spark.read(name)
    assert_same_rows(mor.expected_arrow(read.schema), read, what=name)

    deletes = spark.delete_files(name)
    assert {CONTENT[d["content"]] for d in deletes} == mor.deletes, deletes
    assert all((d["content"] == 2) == bool(d["equality_ids"]) for d in deletes), deletes
    partitioned = any(spec.fields for spec in bed.catalog.load_table(name).specs().values())
    files = spark.columns(f"SELECT content, spec_id{', partition' if partitioned else ''} FROM {name}.files")
    assert {f["content"] for f in files} == {0} | {c for c, kind in CONTENT.items() if kind in mor.deletes}
    assert sorted(f["content"] for f in files if f["content"]) == sorted(d["content"] for d in deletes)

    # Several data files per partition, and data files that lose no row as well as files that do.
    per_partition = Counter((f["spec_id"], json.dumps(f.get("partition"), sort_keys=True)) for f in files
                            if f["content"] == 0)
    assert max(per_partition.values()) >= 2, per_partition
    [[touched, data_files]] = spark.sql(f"SELECT count(DISTINCT _file) FILTER (WHERE _deleted), "
                                        f"count(DISTINCT _file) FROM {name}")
    assert data_files == sum(per_partition.values())
    assert 0 < touched < data_files, (touched, data_files)

    if kind.startswith("position_"):
        # The granularity: a delete file per data file, or per partition (some spanning several data files).
        spans = [n for (n,) in spark.sql(f"SELECT count(DISTINCT file_path) FROM {name}.position_deletes "
                                          f"GROUP BY delete_file_path")]
        assert (max(spans) == 1) == (kind == "position_file"), spans
        # File-scoped: the second DELETE replaced the delete files of the data files both touched (Iceberg
        # 1.12 keeps one per data file); partition-scoped: it only added more.
        replaced = [s for s in spark.snapshots(name) if "removed-position-delete-files" in s["summary"]]
        assert bool(replaced) == (kind == "position_file"), spark.snapshots(name)
