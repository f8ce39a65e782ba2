"""A table Iceberg Spark wrote, ordered by transforms (`WRITE ORDERED BY bucket(8, id), truncate(name, 3), ts
DESC NULLS LAST`), compacted by lakesort (issue #54): every retained snapshot reads back the same, each new
file follows the order by Iceberg's own computation of the transforms (`system.bucket`, `system.truncate` in
Iceberg Spark, over the file's rows in file order), and the files carry the table's sort order id. The order
then changes to `days(ts), id`, and the table is compacted again by it.
"""

from __future__ import annotations

import pytest
from roundtrip import compact_and_judge, live_files, spec

pytestmark = pytest.mark.usefixtures("in_process_job")


def _rows_in_file_order(bed, name: str, keys: str) -> dict[str, list[list]]:
    """Per live file lakesort wrote, Iceberg Spark's values of `keys` over its rows in file order."""
    rows = bed.spark.sql(f"SELECT _file, {keys} FROM {name} ORDER BY _file, _pos")
    files: dict[str, list[list]] = {}
    for row in rows:
        files.setdefault(row[0], []).append(row[1:])
    return files


class _Desc:
    """A value that compares in reverse (the bed hands timestamps as ISO text: no negation)."""

    def __init__(self, value) -> None:
        self.value = value

    def __lt__(self, other: _Desc) -> bool:
        return other.value < self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and other.value == self.value


def _sortable(value, *, desc: bool, nulls_last: bool):
    """A key comparable across rows: nulls where the order puts them, a descending value reversed."""
    if value is None:
        return (1, None) if nulls_last else (-1, None)
    return (0, _Desc(value) if desc else value)


def _assert_ordered(files: dict[str, list[list]], orders: list[tuple[bool, bool]], what: str) -> None:
    assert files, f"{what}: no file"
    for path, rows in files.items():
        keys = [tuple(_sortable(v, desc=d, nulls_last=n) for v, (d, n) in zip(row, orders)) for row in rows]
        broken = next((i for i in range(1, len(keys)) if keys[i] < keys[i - 1]), None)
        assert broken is None, f"{what}: {path} row {broken}: {rows[broken - 1]} before {rows[broken]}"


def test_a_table_ordered_by_transforms_compacts_in_that_order(bed):
    name = bed.name("transformed")
    sql = bed.spark.sql
    sql(f"CREATE TABLE {name} (id bigint, name string, ts timestamp) USING iceberg "
        "TBLPROPERTIES ('format-version'='2')")
    sql(f"ALTER TABLE {name} WRITE ORDERED BY bucket(8, id), truncate(name, 3), ts DESC NULLS LAST")
    for batch in range(2):  # small files, rows with negative ids, null names and times, unicode names
        sql(f"INSERT INTO {name} SELECT CASE WHEN id % 23 = 0 THEN NULL ELSE id * 7919 - 400000 END, "
            "CASE WHEN id % 11 = 0 THEN NULL WHEN id % 5 = 0 THEN concat('é😀', CAST(id % 7 AS STRING)) "
            "ELSE concat('n', CAST(id % 13 AS STRING), 'x') END, "
            "CASE WHEN id % 17 = 0 THEN NULL ELSE TIMESTAMP '1969-12-30 22:00:00' + "
            "make_interval(0, 0, 0, CAST(id % 5 AS INT), CAST(id % 29 AS INT), 0, 0) END "
            f"FROM range({batch * 1000}, {batch * 1000 + 1000})")

    compact_and_judge(bed, name, spec(name, target_file_size="8KiB"))

    order_id = bed.catalog.load_table(name).sort_order().order_id
    assert {f["sort_order_id"] for f in live_files(bed, name)} == {order_id}, (
        "lakesort's files carry the table's order")
    files = _rows_in_file_order(bed, name, "system.bucket(8, id), system.truncate(3, name), ts")
    assert len(files) > 1, "the rows cut into several files"
    _assert_ordered(files, [(False, False), (False, False), (True, True)],
                    "bucket(8, id), truncate(name, 3), ts DESC NULLS LAST")

    sql(f"ALTER TABLE {name} WRITE ORDERED BY days(ts), id")
    compact_and_judge(bed, name, spec(name, target_file_size="8KiB"))
    order_id = bed.catalog.load_table(name).sort_order().order_id
    assert {f["sort_order_id"] for f in live_files(bed, name)} == {order_id}
    files = _rows_in_file_order(bed, name, "system.days(ts), id")
    _assert_ordered(files, [(False, False), (False, False)], "days(ts), id")
