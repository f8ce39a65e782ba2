"""lakesort's output as Iceberg's Java implementation sees it: its statistics, its procedures, its streams.

- The per-file statistics lakesort commits agree with what Iceberg records for the same files (imported into
  a scratch table by Iceberg's `add_files`, under the same metrics modes).
- Iceberg's `rewrite_manifests`, `expire_snapshots`, `remove_orphan_files` and `rewrite_data_files` run on
  lakesort's output; `rewrite_data_files` with its defaults finds nothing to do there.
- Iceberg's compaction and lakesort's follow each other either way and the rows stay the same.
- A Structured Streaming query over the table keeps running across lakesort's commit.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from iceberg_bed import assert_same_rows
from roundtrip import compact_and_judge, live_files, spec

pytestmark = pytest.mark.usefixtures("in_process_job")

PROPERTIES = {
    "write.parquet.compression-codec": "zstd",
    "write.target-file-size-bytes": str(256 * 1024),
    "write.parquet.row-group-size-bytes": str(64 * 1024),
    "write.parquet.page-size-bytes": str(8 * 1024),
    "write.metadata.metrics.default": "truncate(16)",
    "write.metadata.metrics.column.note": "counts",
    "write.metadata.metrics.column.x": "none",
    "write.metadata.metrics.column.id": "full",
}
# What the files table says of one file, compared field by field.
STATISTICS = ("record_count", "column_sizes", "value_counts", "null_value_counts", "nan_value_counts",
              "lower_bounds", "upper_bounds", "split_offsets")


def _properties(props: dict[str, str]) -> str:
    return ", ".join(f"'{k}'='{v}'" for k, v in props.items())


def _fill(bed, name: str, batches: int, rows: int) -> None:
    for b in range(batches):
        start = b * rows
        bed.spark.sql(
            f"INSERT INTO {name} SELECT id, CASE WHEN id % 13 = 0 THEN double('NaN') ELSE id / 3.0 END AS x, "
            "CASE WHEN id % 11 = 0 THEN NULL ELSE concat('a-rather-long-string-value-', CAST(id AS STRING)) "
            "END AS s, repeat('n', CAST(id % 40 AS INT)) AS note, "
            "TIMESTAMP '2024-05-01 00:00:00' + make_interval(0, 0, 0, CAST(id % 3 AS INT), CAST(id % 24 AS "
            f"INT), 0, 0) AS ts FROM range({start}, {start + rows})")


def _starting_position(row_group) -> int:
    """parquet-java's BlockMetaData.getStartingPos: the first column chunk's dictionary page, else its first
    data page (what Iceberg's writers record as a split offset)."""
    first = row_group.column(0)
    return first.dictionary_page_offset if first.has_dictionary_page else first.data_page_offset


def _table(bed, name: str, **extra: str) -> None:
    bed.spark.sql(f"CREATE TABLE {name} (id bigint, x double, s string, note string, ts timestamp) USING "
                  f"iceberg PARTITIONED BY (days(ts)) TBLPROPERTIES ({_properties({**PROPERTIES, **extra})})")


def test_statistics_agree_with_icebergs_and_procedures_run_on_lakesorts_output(bed, tmp_path):
    name = bed.name("stats")
    _table(bed, name)
    _fill(bed, name, 4, 150)
    compact_and_judge(bed, name, spec(name, sort={"keys": [{"column": "id"}]}))
    ours = {Path(f["file_path"]).name: f for f in live_files(bed, name)}
    assert all("/lakesort-staging/" in f["file_path"] for f in ours.values())
    # The spec is silent on the writer: the table's write.parquet.* properties apply.
    for f in ours.values():
        footer = pq.ParquetFile(f["file_path"].removeprefix("file:")).metadata
        assert {footer.row_group(0).column(i).compression for i in range(footer.num_columns)} == {"ZSTD"}

    # The same files, imported by Iceberg into a scratch table under the same metrics modes.
    scratch = bed.name("stats_scratch")
    bed.spark.sql(f"CREATE TABLE {scratch} (id bigint, x double, s string, note string, ts timestamp) USING "
                  f"iceberg TBLPROPERTIES ({_properties(PROPERTIES)})")
    imported = tmp_path / "import"
    imported.mkdir()
    for f in ours.values():
        shutil.copyfile(f["file_path"].removeprefix("file:"), imported / Path(f["file_path"]).name)
    bed.spark.call("add_files", table=scratch, source_table=f"`parquet`.`{imported}`")
    theirs = {Path(f["file_path"]).name: f for f in live_files(bed, scratch)}
    assert theirs.keys() == ours.keys()
    differences = [f"{file}: {field}: lakesort {ours[file][field]!r}, Iceberg {theirs[file][field]!r}"
                   for file in ours for field in STATISTICS if ours[file][field] != theirs[file][field]
                   # add_files (Iceberg 1.12) records no split offsets; Iceberg's writers record the row
                   # groups' starting positions, as lakesort does (checked against the footer below).
                   and not (field == "split_offsets" and theirs[file][field] is None)]
    assert not differences, "\n".join(differences)
    for file, f in ours.items():
        footer = pq.ParquetFile(imported / file).metadata
        assert (f["split_offsets"]
                == [_starting_position(footer.row_group(i)) for i in range(footer.num_row_groups)])

    # Partition tuples: Iceberg's own days() of every row of each file.
    days = {Path(r["f"]).name: (r["lo"], r["hi"]) for r in bed.spark.columns(
        f"SELECT _file AS f, min(lakesort.system.days(ts)) AS lo, max(lakesort.system.days(ts)) AS hi "
        f"FROM {name} GROUP BY _file")}
    for file, f in ours.items():
        assert days[file][0] == days[file][1] == f["partition"]["ts_day"], file

    # Iceberg's procedures on lakesort's output, each followed by a read-back.
    before = bed.spark.read(name)
    found = bed.spark.call("rewrite_data_files", table=name)
    assert found[0]["rewritten_data_files_count"] == 0, f"Iceberg's rewrite_data_files found work: {found}"
    bed.spark.call("rewrite_manifests", table=name)
    assert_same_rows(before, bed.spark.read(name), what="after rewrite_manifests")
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    bed.spark.sql(f"CALL lakesort.system.expire_snapshots(table => '{name}', older_than => TIMESTAMP "
                  f"'{now}', retain_last => 1)")
    assert len(bed.spark.snapshots(name)) == 1
    # Its shortest interval is 24 hours (a safety check of the procedure): it lists every file and finds none
    # old enough; what matters is that it runs on lakesort's layout and that the table reads the same after.
    bed.spark.call("remove_orphan_files", table=name)
    assert_same_rows(before, bed.spark.read(name), what="after expire_snapshots and remove_orphan_files")


def test_icebergs_compaction_then_lakesorts_and_the_other_way_round(bed):
    name = bed.name("both_ways")
    _table(bed, name)
    _fill(bed, name, 5, 80)
    original = bed.spark.read(name)
    done = bed.spark.call("rewrite_data_files", table=name, strategy="sort", sort_order="s DESC NULLS LAST",
                          options={"rewrite-all": "true"})
    assert done[0]["rewritten_data_files_count"] > 0
    assert bed.spark.snapshots(name)[-1]["operation"] == "replace"
    compact_and_judge(bed, name, spec(name, sort={"keys": [{"column": "id"}]}))
    done = bed.spark.call("rewrite_data_files", table=name, options={"rewrite-all": "true"})
    assert done[0]["rewritten_data_files_count"] > 0
    assert_same_rows(original, bed.spark.read(name), what="after Iceberg's, "
                                                          "lakesort's and Iceberg's compactions")


def test_a_streaming_query_keeps_running_across_lakesorts_commit(bed):
    """Iceberg's streaming source with its default options stops at an `overwrite` snapshot and skips a
    `replace`: every appended row arrives once, none twice, and the query is still running."""
    name = bed.name("streamed")
    sql = bed.spark.sql
    sql(f"CREATE TABLE {name} (id bigint, x double, s string, note string, ts timestamp) USING iceberg "
        f"PARTITIONED BY (days(ts))")
    _fill(bed, name, 3, 50)
    query = "lakesort_stream_" + bed.ns
    bed.spark.stream(query, name)
    assert bed.spark.poll(query) == {"active": True, "error": None}

    compact_and_judge(bed, name, spec(name, sort={"keys": [{"column": "id"}]}))
    sql(f"INSERT INTO {name} SELECT id, 0.5, 'after', '', TIMESTAMP '2024-05-02 "
        "00:00:00' FROM range(1000, 1040)")
    state = bed.spark.poll(query)
    received = [row[0] for row in sql(f"SELECT id FROM {query}")]
    bed.spark.stop_stream(query)

    assert state == {"active": True, "error": None}, f"the stream stopped at lakesort's commit: {state}"
    assert len(received) == len(set(received)), "a row arrived twice"
    assert sorted(received) == [*range(150), *range(1000, 1040)]
