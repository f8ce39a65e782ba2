"""Merge-on-read tables written by Iceberg's own writers, compacted by lakesort with their deletes applied.

Each table is judged by `roundtrip.compact_and_judge` (Iceberg Spark's read of every retained snapshot before
and after, rows identical, floats by bits) and must come out with no delete file applying to a live data file.
"""

from __future__ import annotations

import pytest
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


def test_a_delete_committed_while_the_job_runs_never_comes_back(bed, monkeypatch):
    """Another writer deletes rows of the inputs while lakesort's job runs: the commit is refused (the deleted
    rows are in the staged files), the table keeps the other writer's delete, and the next run applies it."""
    from layout.compaction.pipeline.driver import compact
    from layout.errors import LakesortError

    name = bed.name("mor_race")
    _mor_table(bed, name)
    restore = _during_the_job(monkeypatch, lambda: bed.spark.sql(f"DELETE FROM {name} WHERE id IN (1, 2, 3)"))
    before = len(bed.spark.snapshots(name))
    table_spec = spec(name, sort={"keys": [{"column": "id"}]})

    with pytest.raises(LakesortError, match="applies to input"):
        compact(name, spec=table_spec, force=True)

    snapshots = bed.spark.snapshots(name)
    assert len(snapshots) == before + 1 and snapshots[-1]["operation"] != "replace"  # only the other writer's
    assert not bed.spark.sql(f"SELECT id FROM {name} WHERE id IN (1, 2, 3)"), "a deleted row came back"

    restore()
    compact_and_judge(bed, name, table_spec)
    assert not bed.spark.sql(f"SELECT id FROM {name} WHERE id IN (1, 2, 3)"), "a deleted row came back"
    assert live_deletes(bed, name) == []


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
