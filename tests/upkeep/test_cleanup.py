"""Cleanup of the staging area (layout.upkeep.cleanup): only files no retained snapshot references, past the
grace period, under the table's lease. Every snapshot of the history stays readable with the same rows, true
orphans go, fresh ones stay; a held lease refuses; a dry run deletes nothing; and a writer committing
staged files (under the lease) while cleanup runs again and again with no grace loses nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from layout.cli import EXIT_FAILURE, EXIT_OK, main
from layout.errors import UsageError
from layout.io import resolve
from layout.upkeep.cleanup import cleanup, staging_root
from layout.upkeep.lease import LeaseOwner, TableBusy, acquire_lease, read_lease, release_lease

TABLE = "ns.events"
OLD = time.time() - 48 * 3600  # older than the default grace period (24 h)


def _old(*paths: Path) -> None:
    for p in paths:
        os.utime(p, (OLD, OLD))


def _stage(table, run: str, name: str, ids, *, uri: bool = True) -> tuple[str, Path]:
    """Write a Parquet file of `ids` under the staging root, as a Spark job would: (path for Iceberg,
    local path)."""
    location = f"{staging_root(table)}/{run}/{name}"
    local = Path(resolve(location)[1])
    local.parent.mkdir(parents=True, exist_ok=True)
    ids = list(ids)
    data = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids])})
    pq.write_table(data.cast(table.schema().as_arrow()), local)
    return (location if uri else str(local)), local


def _commit(table, add: list[str], remove: list[str] = ()):
    """One overwrite snapshot: remove `remove`, add `add` (as lakesort's commit does)."""
    from pyiceberg.io.pyarrow import parquet_files_to_data_files

    table = table.refresh()
    live = {t.file.file_path: t.file for t in table.scan().plan_files()}
    new = list(parquet_files_to_data_files(io=table.io, table_metadata=table.metadata, file_paths=iter(add)))
    with table.transaction() as tx, tx.update_snapshot().overwrite() as overwrite:
        for path in remove:
            overwrite.delete_data_file(live[path])
        for df in new:
            overwrite.append_data_file(df)
    return table.refresh()


def _history(table) -> dict[int, list[int]]:
    """Every snapshot's rows (sorted ids), read through Iceberg."""
    return {s.snapshot_id: sorted(table.scan(snapshot_id=s.snapshot_id).to_arrow().column("id").to_pylist())
            for s in table.refresh().metadata.snapshots}


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LAKESORT_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.delenv("LAKESORT_CLEANUP_GRACE_HOURS", raising=False)
    monkeypatch.delenv("LAKESORT_LEASE_TTL_HOURS", raising=False)
    return tmp_path / "work"


@pytest.fixture
def staged(iceberg_catalog, work):
    """ns.events with five snapshots, four of them committing staged files that later ones remove:

        s1 append (data/, not staged)    s2 +A (r1)    s3 -A +B (r2)    s4 -B +C1 +C2 (r3, plain paths)
        s5 +D (r4)

    plus orphans: old ones (a file beside B in r2; a dead run's file and _SUCCESS marker, with old
    directories) and a fresh one (a run in progress). A, B and C1 are old too: age never makes a
    referenced file deletable."""
    iceberg_catalog.create_namespace("ns")
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    table = iceberg_catalog.create_table(TABLE, schema=schema)
    table.append(pa.table({"id": pa.array(range(10), pa.int64()), "v": [f"v{i}" for i in range(10)]}))
    a, a_local = _stage(table, "r1", "a.parquet", range(10, 20))
    table = _commit(table, [a])
    b, b_local = _stage(table, "r2", "b.parquet", reversed(range(10, 20)))
    table = _commit(table, [b], [a])
    c1, c1_local = _stage(table, "r3", "c1.parquet", range(10, 15), uri=False)
    c2, c2_local = _stage(table, "r3", "c2.parquet", range(15, 20), uri=False)
    table = _commit(table, [c1, c2], [b])
    d, d_local = _stage(table, "r4", "d.parquet", range(20, 25))
    table = _commit(table, [d])
    _, old_orphan = _stage(table, "r2", "orphan.parquet", range(3))
    _, dead = _stage(table, "dead-run", "group=0/part-0.parquet", range(3))
    marker = dead.parent.parent / "_SUCCESS"
    marker.write_text("")
    _, fresh = _stage(table, "running", "part-0.parquet", range(3))
    _old(a_local, b_local, c1_local, old_orphan, dead, marker, dead.parent, dead.parent.parent)
    root = Path(resolve(staging_root(table))[1])
    return {"table": table, "root": root, "referenced": [a_local, b_local, c1_local, c2_local, d_local],
            "old_orphans": [old_orphan, dead, marker], "fresh": fresh, "dead_run": dead.parent.parent}


def test_cleanup_keeps_every_snapshot_readable_and_removes_old_orphans(staged):
    table = staged["table"]
    before = _history(table)
    assert len(before) == 5 and len(set(map(tuple, before.values()))) == 3  # rewrites keep the rows
    size = sum(p.stat().st_size for p in staged["old_orphans"])
    result = cleanup(table)
    assert sorted(result.deleted) == sorted(str(p) for p in staged["old_orphans"])
    assert (result.kept_referenced, result.kept_fresh, result.snapshots) == (5, 1, 5)
    assert result.bytes_deleted == size and result.dirs_removed == 2  # dead-run/group=0 and dead-run
    assert not any(p.exists() for p in staged["old_orphans"]) and not staged["dead_run"].exists()
    assert all(p.exists() for p in staged["referenced"]) and staged["fresh"].exists()
    assert _history(table) == before  # time travel and rollback still work
    assert read_lease(TABLE) is None  # cleanup released its lease
    again = cleanup(table)
    assert again.deleted == () and again.kept_referenced == 5


def test_a_file_is_referenced_only_while_a_snapshot_holds_it_live(staged):
    """Expire s2, the only snapshot where A is live (s3's manifests still list A, as DELETED): A goes."""
    table = staged["table"]
    s2 = table.metadata.snapshots[1]
    table.maintenance.expire_snapshots().by_id(s2.snapshot_id).commit()
    before = _history(table)
    result = cleanup(table.refresh())
    a_local = staged["referenced"][0]
    assert str(a_local) in result.deleted and not a_local.exists()
    assert result.kept_referenced == 4 and all(p.exists() for p in staged["referenced"][1:])
    assert _history(table) == before


def test_grace_period_and_dry_run(staged, monkeypatch):
    table = staged["table"]
    files = sorted(p for p in staged["root"].rglob("*") if p.is_file())
    dry = cleanup(table, dry_run=True)
    assert sorted(dry.deleted) == sorted(str(p) for p in staged["old_orphans"]) and dry.dry_run
    assert sorted(p for p in staged["root"].rglob("*") if p.is_file()) == files  # nothing deleted
    assert dry.dirs_removed == 0 and staged["dead_run"].exists()
    monkeypatch.setenv("LAKESORT_CLEANUP_GRACE_HOURS", "100")  # everything is younger than that
    assert cleanup(table, dry_run=True).deleted == ()
    zero = cleanup(table, grace_hours=0, dry_run=True)  # explicit beats the environment
    assert sorted(zero.deleted) == sorted(str(p) for p in [*staged["old_orphans"], staged["fresh"]])
    with pytest.raises(UsageError, match=">= 0"):
        cleanup(table, grace_hours=-1)
    removed = cleanup(table, grace_hours=0)
    assert sorted(removed.deleted) == sorted(zero.deleted) and not staged["fresh"].exists()
    assert all(p.exists() for p in staged["referenced"])


def test_refuses_while_another_run_holds_the_lease(staged, capsys):
    table = staged["table"]
    compaction = LeaseOwner.cli("compact-1")
    acquire_lease(TABLE, compaction)
    files = sorted(p for p in staged["root"].rglob("*") if p.is_file())
    for dry_run in (False, True):
        with pytest.raises(TableBusy, match="lakesort run compact-1") as caught:
            cleanup(table, grace_hours=0, dry_run=dry_run)
        assert caught.value.holder.same_run(compaction)
    assert main(["cleanup", TABLE, "--grace-hours", "0"]) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert "table busy, nothing deleted" in err and "lakesort run compact-1 is working on this table" in err
    assert sorted(p for p in staged["root"].rglob("*") if p.is_file()) == files
    assert read_lease(TABLE).same_run(compaction)  # still the compaction's
    release_lease(TABLE, compaction)
    # A dead run's lease (older than the TTL) does not block cleanup for ever.
    dead = LeaseOwner(kind="cli", run_id="dead", acquired_at=compaction.acquired_at.replace(year=2000))
    acquire_lease(TABLE, dead)
    assert cleanup(table).removed == len(staged["old_orphans"])


def test_cli(staged, capsys):
    assert main(["cleanup", TABLE, "--dry-run"]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"would remove {len(staged['old_orphans'])} orphaned staged file(s)" in out
    assert "kept 5 referenced by one of 5 snapshot(s) and 1 younger than 24h" in out
    assert all(p.exists() for p in staged["old_orphans"])
    assert main(["cleanup", TABLE]) == EXIT_OK
    assert f"removed {len(staged['old_orphans'])} orphaned staged file(s)" in capsys.readouterr().out
    assert main(["cleanup", TABLE, "--grace-hours", "0"]) == EXIT_OK
    assert "removed 1 orphaned staged file(s)" in capsys.readouterr().out
    assert main(["cleanup", TABLE, "--grace-hours", "soon"]) == 2
    assert main(["cleanup", TABLE, "--grace-hours", "-1"]) == 2


# ---- a real race ----------------------------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path

    import pyarrow as pa, pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import parquet_files_to_data_files

    from layout.catalog import load_table
    from layout.upkeep.cleanup import staging_root
    from layout.io import resolve
    from layout.upkeep.lease import LeaseOwner, TableBusy, table_lease

    table_id, commits, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    table = load_table(table_id)
    history, previous, rows = [], None, {}

    def write(table, run, ids):
        location = f"{staging_root(table)}/{run}/part-0.parquet"
        local = Path(resolve(location)[1])
        local.parent.mkdir(parents=True, exist_ok=True)
        data = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids])})
        pq.write_table(data.cast(table.schema().as_arrow()), local)
        return location

    def commit(i):
        global table, previous  # rows: the ids of each committed staged file (the base rows stay)
        owner = LeaseOwner.cli(f"writer-{i}")
        with table_lease(table_id, owner):  # as every compaction does, from staging to commit
            table = table.refresh()
            live = {t.file.file_path: t.file for t in table.scan().plan_files()}
            new = write(table, owner.run_id, list(range(i * 10, i * 10 + 10)))
            if i % 3 == 2:
                write(table, owner.run_id + "-crashed", [0])  # a crashed run's leftover: never committed
            time.sleep(0.03)  # staged, not yet committed: the window cleanup must not touch
            files = list(parquet_files_to_data_files(io=table.io, table_metadata=table.metadata,
                                                     file_paths=iter([new])))
            with table.transaction() as tx, tx.update_snapshot().overwrite() as overwrite:
                if previous is not None and i % 2 == 0:  # older snapshots keep what this one removes
                    overwrite.delete_data_file(live[previous])
                for df in files:
                    overwrite.append_data_file(df)
            table = table.refresh()
            if previous is not None and i % 2 == 0:
                del rows[previous]
            rows[new] = list(range(i * 10, i * 10 + 10))
            history.append([table.current_snapshot().snapshot_id, sorted(sum(rows.values(), []))])
            previous = new

    busy = 0
    for i in range(commits):
        while True:
            try:
                commit(i)
                break
            except TableBusy:  # cleanup holds the lease: wait for it
                busy += 1
                time.sleep(0.002)
        time.sleep(0.01)
    print(busy, file=sys.stderr)
    out.write_text(json.dumps(history))
""")


def test_cleanup_racing_a_committing_writer_loses_nothing(staged, tmp_path):
    table = staged["table"]
    before = _history(table)
    out = tmp_path / "writer.json"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, TABLE, "12", str(out)], cwd=tmp_path,
                              env=os.environ.copy(), stderr=subprocess.PIPE, text=True)
    runs = busy = deleted = 0
    deadline = time.monotonic() + 60
    while writer.poll() is None and time.monotonic() < deadline:
        try:
            deleted += cleanup(table, grace_hours=0).removed
            runs += 1
        except TableBusy:
            busy += 1
        time.sleep(0.05)  # room for the writer (both only poll the lease: no queue)
    _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err[-3000:]
    writer_waits = int(err.strip().splitlines()[-1])
    final = cleanup(table, grace_hours=0)
    # They did interleave: cleanup ran several times, and at least one side found the other holding the
    # lease (which side depends on the scheduler, so neither alone is asserted).
    assert runs >= 3 and busy + writer_waits >= 1, (runs, busy, writer_waits)
    history = json.loads(out.read_text())
    assert len(history) == 12
    after = _history(table)
    base = before[table.metadata.snapshots[4].snapshot_id]  # the fixture's last snapshot: the writer's base
    for snapshot, rows in history:
        assert after[snapshot] == sorted(base + rows)  # every snapshot the writer made reads as committed
    for snapshot, rows in before.items():
        assert after[snapshot] == rows
    # The crashed runs' leftovers (i = 2, 5, 8, 11), the old orphans and the fixture's fresh one (no grace).
    assert deleted + final.removed == 4 + len(staged["old_orphans"]) + 1
    assert not list(staged["root"].rglob("*-crashed"))
    referenced = {p for s in after for p in _live_paths(table, s)}
    on_disk = {str(p) for p in staged["root"].rglob("*") if p.is_file()}
    assert on_disk == {p for p in referenced if p.startswith(str(staged["root"]))}


def _live_paths(table, snapshot_id: int) -> set[str]:
    return {resolve(t.file.file_path)[1] for t in table.scan(snapshot_id=snapshot_id).plan_files()}
