"""Merge-on-read tables written by Iceberg's own writers, compacted by lakesort with their deletes applied.

Each table is judged by `roundtrip.compact_and_judge` (Iceberg Spark's read of every retained snapshot before
and after, rows identical, floats by bits) and must come out with no delete file applying to a live data file.
"""

from __future__ import annotations

import pytest
from iceberg_bed import assert_same_rows
from mor_tables import BUILDERS, COMPACTED
from roundtrip import compact_and_judge, live_deletes, spec
from test_mor_bed import check_built

pytestmark = pytest.mark.usefixtures("in_process_job")

MOR = ("'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
       "'write.merge.mode'='merge-on-read', 'format-version'='2'")


def _insert(bed, name: str, start: int, rows: int) -> None:
    bed.spark.sql(
        f"INSERT INTO {name} SELECT id, date_add(DATE '2024-01-01', CAST(id % 3 AS INT)) AS d, "
        "concat('s', CAST(id % 11 AS STRING)) AS s, CASE WHEN id % 13 = 0 THEN double('NaN') ELSE id * 0.25 "
        f"END AS x FROM range({start}, {start + rows})")


# Each kind of merge-on-read table (`mor_tables.COMPACTED`), compacted whole: position deletes file-scoped
# (UPDATE, MERGE INTO) and partition-scoped (a DELETE on the unpartitioned table); equality deletes with NULL
# keys and keys inserted again; equality deletes under three partition specs (a global one among them); an
# unpartitioned table with global deletes of both kinds; both kinds on the same data files.
@pytest.mark.parametrize("kind", COMPACTED)
def test_a_merge_on_read_table_compacts_with_its_deletes_applied(bed, kind):
    table = BUILDERS[kind](bed)
    name = table.name
    check_built(bed, table, kind)  # as built: the expected rows, the delete files it was built to have
    kinds = {r["content"] for r in live_deletes(bed, name)}

    judged = compact_and_judge(bed, name, spec(name, sort={"keys": [{"column": "id"}]}))

    assert live_deletes(bed, name) == [], "a delete file outlived the data files it applied to"
    groups = judged.result.plan.groups
    assert sum(len(g.deletes) for g in groups) >= len(kinds)
    assert judged.result.delete_files_removed > 0


def _mor_table(bed, name: str) -> None:
    bed.spark.sql(f"CREATE TABLE {name} (id bigint, d date, s string, x double) USING iceberg PARTITIONED BY "
                  f"(d) TBLPROPERTIES ({MOR})")
    for b in range(2):
        _insert(bed, name, b * 150, 150)
    bed.spark.sql(f"DELETE FROM {name} WHERE id % 4 = 0")


def _during_the_job(monkeypatch, action):
    """Run `action` (another writer's commit) once the job has staged its files, before verify and commit;
    returns what puts the plain in-process job back."""
    from layout.compaction.pipeline import driver

    staged = driver.submit  # the in-process job (`in_process_job`)

    def submit(*args, **kwargs):
        staged(*args, **kwargs)
        action()

    monkeypatch.setattr(driver, "submit", submit)
    return lambda: monkeypatch.setattr(driver, "submit", staged)


def _seen_after(bed, name: str, action):
    """`action`, then Iceberg Spark's read of the table and the snapshots (the state lakesort must keep)."""
    seen: dict = {}

    def run():
        action()
        seen["rows"] = bed.spark.read(name)
        seen["snapshots"] = [s["snapshot_id"] for s in bed.spark.snapshots(name)]
        seen["reads"] = {sid: bed.spark.read(name, sid) for sid in seen["snapshots"]}

    return seen, run


def _judge_after(bed, name: str, seen: dict) -> None:
    """The table reads as it did after the other writer's commit; every snapshot before reads the same."""
    assert_same_rows(seen["rows"], bed.spark.read(name), what=f"{name} after lakesort's commit")
    for sid, rows in seen["reads"].items():
        assert_same_rows(rows, bed.spark.read(name, sid), what=f"{name} at snapshot {sid}")
    added = [s for s in bed.spark.snapshots(name) if s["snapshot_id"] not in seen["snapshots"]]
    assert [s["operation"] for s in added] == ["replace"], added


def test_a_position_delete_committed_while_the_job_runs_is_carried_onto_the_new_files(bed, monkeypatch):
    """Another writer deletes rows of the inputs (file-scoped position deletes) while lakesort's job runs:
    the commit goes through on its first attempt with those rows deleted in the new files (carried position
    deletes in the same snapshot), and no deleted row comes back."""
    from layout.compaction.pipeline.driver import compact

    name = bed.name("mor_race")
    _mor_table(bed, name)
    seen, action = _seen_after(bed, name, lambda: bed.spark.sql(f"DELETE FROM {name} WHERE id IN (1, 2, 3)"))
    _during_the_job(monkeypatch, action)

    result = compact(name, spec=spec(name, sort={"keys": [{"column": "id"}]}), force=True)

    assert result.snapshot_id is not None
    assert [a.outcome for a in result.attempts] == ["committed"]
    assert result.delete_files_carried >= 1
    assert not bed.spark.sql(f"SELECT id FROM {name} WHERE id IN (1, 2, 3)"), "a deleted row came back"
    _judge_after(bed, name, seen)
    # the carried deletes are position deletes on the new files; the other writer's (on inputs) are gone
    contents = {r["content"] for r in live_deletes(bed, name)}
    assert contents == {1}


def test_an_equality_delete_committed_while_the_job_runs_applies_to_the_new_files(bed, monkeypatch):
    """An equality delete committed (by Iceberg's Java writer) while the job runs: the outputs are committed
    at the plan's data sequence number, so the delete applies to them; the commit goes through on its first
    attempt and Iceberg Spark reads none of the deleted rows."""
    from layout.compaction.pipeline.driver import compact

    name = bed.name("mor_eq_race")
    _mor_table(bed, name)
    keys = [[5], [8], [11], [None]]  # ids of d=2024-01-03 (id % 3 == 2), a NULL key deleting nothing
    seen, action = _seen_after(bed, name, lambda: bed.spark.equality_delete(
        name, ["id"], keys, partition={"d": "2024-01-03"}))
    _during_the_job(monkeypatch, action)

    result = compact(name, spec=spec(name, sort={"keys": [{"column": "id"}]}), force=True)

    assert result.snapshot_id is not None and [a.outcome for a in result.attempts] == ["committed"]
    assert result.delete_files_carried == 0
    assert not bed.spark.sql(f"SELECT id FROM {name} WHERE id IN (5, 8, 11)"), "a deleted row came back"
    _judge_after(bed, name, seen)
    # the concurrent equality delete still applies to the new files: it stays live
    assert [r["content"] for r in live_deletes(bed, name)] == [2]


def test_an_equality_delete_at_the_planned_snapshot_applies_once(bed):
    """An equality delete committed at the very snapshot the plan reads: the job applies it, and the outputs
    (at that snapshot's sequence number) are beyond its reach: it does not apply twice, it leaves with its
    data files (no live delete file), and the rows read the same."""
    name = bed.name("mor_eq_at_plan")
    _mor_table(bed, name)
    bed.spark.equality_delete(name, ["id"], [[5], [11]], partition={"d": "2024-01-03"})

    judged = compact_and_judge(bed, name, spec(name, sort={"keys": [{"column": "id"}]}))

    assert judged.result.plan.sequence_number == bed.catalog.load_table(name).snapshot_by_id(
        judged.result.plan.snapshot_id).sequence_number
    assert live_deletes(bed, name) == []
    assert not bed.spark.sql(f"SELECT id FROM {name} WHERE id IN (5, 11)"), "a deleted row came back"


def test_the_plans_snapshot_expired_during_the_job(bed, monkeypatch):
    """Another actor expires the snapshot the plan read while the job runs (apache/iceberg#17202: Java fails
    or reports success with no commit): the plan recorded its sequence number, so lakesort commits, correctly,
    and says so."""
    from layout.compaction.pipeline.driver import compact

    name = bed.name("mor_expired")
    _mor_table(bed, name)

    def expire():
        bed.spark.sql(f"INSERT INTO {name} VALUES (100000, DATE '2024-01-01', 'n', 1.0)")
        current = bed.spark.snapshots(name)[-1]["snapshot_id"]
        ids = [s["snapshot_id"] for s in bed.spark.snapshots(name) if s["snapshot_id"] != current]
        bed.spark.sql(f"CALL lakesort.system.expire_snapshots(table => '{name}', "
                      f"snapshot_ids => array({', '.join(map(str, ids))}))")

    seen, action = _seen_after(bed, name, expire)
    _during_the_job(monkeypatch, action)

    result = compact(name, spec=spec(name, sort={"keys": [{"column": "id"}]}), force=True)

    assert result.snapshot_id is not None and result.files_removed > 0
    assert bed.catalog.load_table(name).snapshot_by_id(result.plan.snapshot_id) is None  # it did expire
    _judge_after(bed, name, seen)


def test_a_delete_elsewhere_while_the_job_runs_lets_the_commit_through(bed, monkeypatch):
    """A delete committed meanwhile in a partition the run does not rewrite applies to no input: the commit
    goes through, and the other writer's delete file stays with the data files it applies to."""
    from layout.compaction.pipeline.driver import compact

    name = bed.name("mor_elsewhere")
    _mor_table(bed, name)
    _during_the_job(monkeypatch, lambda: bed.spark.sql(f"DELETE FROM {name} WHERE d = DATE "
                                                       "'2024-01-03' AND id < 50"))
    expected = bed.spark.sql(
        f"SELECT count(*) FROM {name} WHERE NOT (d = DATE '2024-01-03' AND id < 50)")[0][0]

    result = compact(name, spec=spec(name, sort={"keys": [{"column": "id"}]}), partitions=["d=2024-01-01"],
                     force=True)

    assert result.snapshot_id is not None and result.delete_files_removed > 0
    assert bed.spark.sql(f"SELECT count(*) FROM {name}")[0][0] == expected
    assert {r["content"] for r in live_deletes(bed, name)} == {1}  # the other partitions' deletes stay


def test_a_format_v3_table_with_deletion_vectors_is_refused_before_spark(bed, tmp_path, capsys):
    """Iceberg Spark writes deletion vectors into a v3 table; pyiceberg 0.12 cannot write v3 metadata, so
    lakesort refuses the table with exit 2 before any work, naming the format version and the reason."""
    import yaml

    from layout.cli import main

    name = bed.name("v3")
    bed.spark.sql(f"CREATE TABLE {name} (id bigint, s string) USING iceberg "
                  "TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read')")
    bed.spark.sql(f"INSERT INTO {name} SELECT id, CAST(id AS STRING) FROM range(0, 100)")
    bed.spark.sql(f"DELETE FROM {name} WHERE id % 3 = 0")
    snapshots = len(bed.spark.snapshots(name))
    spec_file = tmp_path / "v3.yaml"
    spec_file.write_text(yaml.safe_dump({"table": name, "owner": {"name": "T", "email": "t@example.com"},
                                         "sort": {"keys": [{"column": "id"}]}}))

    for command in ("plan-rewrite", "compact"):
        assert main([command, name, "--spec", str(spec_file), "--force"]) == 2
        err = capsys.readouterr().err
        assert "format version 3" in err and "iceberg-python#1551" in err
    assert len(bed.spark.snapshots(name)) == snapshots
