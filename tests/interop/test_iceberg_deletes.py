"""Merge-on-read tables written by Iceberg's own writers, compacted by lakesort with their deletes applied.

Each table is judged by `roundtrip.compact_and_judge` (Iceberg Spark's read of every retained snapshot before and
after, rows identical, floats by bits) and must come out with no delete file applying to a live data file.
"""

from __future__ import annotations

import pytest
from roundtrip import compact_and_judge, live_deletes, spec

pytestmark = pytest.mark.usefixtures("in_process_job")

MOR = ("'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
       "'write.merge.mode'='merge-on-read', 'format-version'='2'")


def _insert(bed, name: str, start: int, rows: int) -> None:
    bed.spark.sql(
        f"INSERT INTO {name} SELECT id, date_add(DATE '2024-01-01', CAST(id % 3 AS INT)) AS d, "
        f"concat('s', CAST(id % 11 AS STRING)) AS s, CASE WHEN id % 13 = 0 THEN double('NaN') ELSE id * 0.25 END AS x "
        f"FROM range({start}, {start + rows})")


@pytest.mark.parametrize("granularity", ["file", "partition"])
def test_spark_delete_update_merge_position_deletes(bed, granularity):
    name = bed.name(f"mor_{granularity}")
    sql = bed.spark.sql
    sql(f"CREATE TABLE {name} (id bigint, d date, s string, x double) USING iceberg PARTITIONED BY (d) "
        f"TBLPROPERTIES ({MOR}, 'write.delete.granularity'='{granularity}')")
    for b in range(3):
        _insert(bed, name, b * 200, 200)
    sql(f"DELETE FROM {name} WHERE id % 5 = 0")
    sql(f"UPDATE {name} SET s = 'updated' WHERE id % 7 = 0")
    sql(f"MERGE INTO {name} t USING (SELECT id FROM range(0, 900, 9)) u ON t.id = u.id "
        f"WHEN MATCHED AND t.id % 2 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET t.x = -1.0 "
        f"WHEN NOT MATCHED THEN INSERT (id, d, s, x) VALUES (u.id, DATE '2024-01-02', 'new', 2.5)")
    assert {r["content"] for r in live_deletes(bed, name)} == {1}

    judged = compact_and_judge(bed, name, spec(name, sort={"keys": [{"column": "id"}]}))

    assert live_deletes(bed, name) == [], "a delete file outlived the data files it applied to"
    groups = judged.result.plan.groups
    assert any(g.deletes for g in groups)
