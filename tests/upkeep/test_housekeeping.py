"""Housekeeping of lakesort's own tables (`layout.upkeep.housekeeping`) on a real SQLite catalog: a record
per commit piles up files and snapshots; housekeeping rewrites them into one file and expires the old
snapshots without losing or changing a row (pyiceberg's read before and after), and a writer that commits
meanwhile makes it leave the table as it was."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from pyiceberg.table import Table

from layout.catalog import load_catalog
from layout.cli import EXIT_OK, main
from layout.metrics import store
from layout.upkeep import housekeeping
from layout.upkeep.housekeeping import MAX_FILES, housekeep

FIELDS = (("run_id", "string", True), ("table", "string", True), ("figure", "double", False))
RECORDS = "lakesort.test_records"


def _record(catalog, run: int) -> None:
    store.upsert(catalog, RECORDS, FIELDS, ("run_id", "table"),
                 [{"run_id": f"run-{run}", "table": "demo.t", "figure": run / 3}])


def _rows(catalog) -> pa.Table:
    return catalog.load_table(RECORDS).scan().to_arrow().sort_by("run_id")


def _files(table: Table) -> int:
    return sum(1 for _ in table.scan().plan_files())


def test_records_are_rewritten_into_one_file_and_old_snapshots_expire(iceberg_catalog, capsys):
    for run in range(MAX_FILES + 4):
        _record(iceberg_catalog, run)
    _record(iceberg_catalog, 3)  # a step of run 3 replaces its row
    table = iceberg_catalog.load_table(RECORDS)
    before, files, snapshots = _rows(iceberg_catalog), _files(table), len(table.metadata.snapshots)
    assert files > MAX_FILES and before.num_rows == MAX_FILES + 4

    assert housekeep(iceberg_catalog, dry_run=True)[0].files_after == files
    assert len(iceberg_catalog.load_table(RECORDS).metadata.snapshots) == snapshots

    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=8)
    [result] = housekeep(iceberg_catalog, now=later)
    table = iceberg_catalog.load_table(RECORDS)
    assert (result.rewritten
            and (result.files_before, result.files_after) == (files, 1) == (files, _files(table)))
    # The newest 10 stay (the rewrite's own among them); all the others were older than a week by `later`.
    assert len(table.metadata.snapshots) == housekeeping.OWN_RETENTION.min_snapshots
    assert result.snapshots_expired >= snapshots - housekeeping.OWN_RETENTION.min_snapshots
    assert result.files_deleted > 0 and result.error is None
    after = _rows(iceberg_catalog)
    assert after.equals(before)  # every row, every value (the doubles bit for bit)
    assert after.column("figure").to_pylist() == before.column("figure").to_pylist()

    [again] = housekeep(iceberg_catalog, now=later)
    assert not again.rewritten and again.files_after == 1 and again.snapshots_expired == 0

    assert main(["housekeep"]) == EXIT_OK
    assert f"{RECORDS}: 1 data file(s)" in capsys.readouterr().out


def test_a_writer_committing_meanwhile_leaves_the_table_as_it_was(iceberg_catalog, monkeypatch):
    for run in range(MAX_FILES + 1):
        _record(iceberg_catalog, run)
    real, raced = Table.overwrite, []

    def overwrite_after_another_writer(self, *args, **kwargs):
        # housekeeping's rewrite: another process's record lands between its scan and its commit
        if not raced:
            raced.append(True)
            _record(load_catalog(), 100)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Table, "overwrite", overwrite_after_another_writer)
    [result] = housekeep(iceberg_catalog)
    assert raced and result.error and "another writer committed" in result.error and not result.rewritten
    rows = _rows(iceberg_catalog)
    assert rows.num_rows == MAX_FILES + 2 and "run-100" in rows.column("run_id").to_pylist()
    assert main(["housekeep"]) == EXIT_OK  # the next housekeeping rewrites it, the other writer's row with it
    assert _files(iceberg_catalog.load_table(RECORDS)) == 1 and _rows(iceberg_catalog).equals(rows)


def test_no_lakesort_tables_yet_is_nothing_to_do(iceberg_catalog):
    assert housekeep(iceberg_catalog) == []


def test_the_retention_is_a_setting(iceberg_catalog, monkeypatch, capsys):
    """$LAKESORT_HOUSEKEEPING_RETENTION changes the fields it names (here: keep 3 snapshots, not 10); a value
    it cannot take is an error naming the variable and the fields, before any table is touched (exit 2)."""
    for run in range(6):
        _record(iceberg_catalog, run)
    snapshots = len(iceberg_catalog.load_table(RECORDS).metadata.snapshots)
    assert snapshots > 3
    monkeypatch.setenv("LAKESORT_HOUSEKEEPING_RETENTION", '{"min_snapshots": 3, "max_age": "2d"}')
    assert housekeeping.own_retention().model_dump() == {
        "max_age": dt.timedelta(days=2), "min_snapshots": 3,
        "orphan_grace": housekeeping.OWN_RETENTION.orphan_grace}
    before = _rows(iceberg_catalog)
    [result] = housekeep(iceberg_catalog, now=dt.datetime.now(dt.UTC) + dt.timedelta(days=3))
    table = iceberg_catalog.load_table(RECORDS)
    assert len(table.metadata.snapshots) == 3 and result.snapshots_expired == snapshots - 3
    assert _rows(iceberg_catalog).equals(before)

    monkeypatch.setenv("LAKESORT_HOUSEKEEPING_RETENTION", '{"min_snapshot": 3}')
    assert main(["housekeep"]) == 2
    err = capsys.readouterr().err
    assert "LAKESORT_HOUSEKEEPING_RETENTION" in err and "min_snapshot" in err and "min_snapshots" in err
    assert len(iceberg_catalog.load_table(RECORDS).metadata.snapshots) == 3
