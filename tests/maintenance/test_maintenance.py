"""Table maintenance (layout.maintenance, layout.upkeep.maintain, `lakesort expire`) on real pyiceberg SQL
catalogs: snapshots expire by the spec's retention, and exactly the files nothing retained references are
deleted (orphans only past the grace period); every retained snapshot reads as before; branch and tag heads,
the current metadata file and the metadata log are kept; a held lease refuses; a dry run deletes nothing
and counts the same; a commit landing meanwhile protects its files. A hypothesis property test checks
random histories against a brute-force oracle built from pyiceberg's own scan planning."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import itertools
import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, main
from layout.durations import format_duration_short, parse_duration
from layout.errors import ConfigError
from layout.io import resolve
from layout.maintenance import MaintenanceError, maintain
from layout.maintenance import run as run_module
from layout.maintenance.delete import DELETED_KINDS
from layout.metrics import store
from layout.metrics.maintenance import MaintenanceRecord, read_maintenance
from layout.report.render import write_reports
from layout.spec import Retention, parse_spec
from layout.upkeep.cleanup import staging_root
from layout.upkeep.lease import LeaseOwner, TableBusy, acquire_lease, read_lease, release_lease
from layout.upkeep.maintain import maintain_table, record_of

TABLE = "ns.events"
OWNER = {"name": "Events Team", "email": "events@example.com"}
DAY = 86_400
# The history most tests start from: appends, an overwrite (a delete and an append snapshot), a
# copy-on-write delete, more appends: data files that later snapshots drop, and files all of them share.
HISTORY = ("append", "append", "overwrite", "append", "delete", "append")


def spec_for(table: str = TABLE, **retention):
    return parse_spec({"table": table, "owner": OWNER, "retention": retention})


def rows(ids) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids], pa.string())})


def build(catalog, name: str = TABLE, history=HISTORY, properties: dict | None = None):
    """A table with `history` (ids from a counter, so every snapshot's rows differ)."""
    with contextlib.suppress(Exception):
        catalog.create_namespace(name.split(".")[0])
    table = catalog.create_table(name, schema=rows([]).schema, properties=properties or {})
    ids = itertools.count()
    for op in history:
        apply(table, op, ids)
    return table.refresh()


def apply(table, op: str, ids) -> None:
    if op == "append":
        table.append(rows(next(ids) for _ in range(5)))
    elif op == "overwrite":
        table.overwrite(rows(next(ids) for _ in range(3)))
    elif op == "delete" and table.current_snapshot() is not None:
        live = sorted(table.scan().to_arrow().column("id").to_pylist())
        if live:
            table.delete(f"id <= {live[len(live) // 2]}")


def reads(table) -> dict[int, list[int]]:
    """Every snapshot's ids, read through pyiceberg."""
    table = table.refresh()
    return {s.snapshot_id: sorted(table.scan(snapshot_id=s.snapshot_id).to_arrow().column("id").to_pylist())
            for s in table.metadata.snapshots}


def root_of(table) -> Path:
    return Path(resolve(table.location())[1])


def on_disk(table) -> set[str]:
    return {str(p) for p in root_of(table).rglob("*") if p.is_file()}


def referenced(table) -> set[str]:
    """The brute-force oracle: every file the table's current metadata reaches, through pyiceberg's own scan
    planning (not layout.maintenance's manifest reading): metadata files, manifest lists, manifests, and each
    snapshot's data and delete files."""
    table = table.refresh()

    def norm(location: str) -> str:
        return resolve(location)[1]

    metadata = table.metadata
    out = {norm(table.metadata_location)} | {norm(e.metadata_file) for e in metadata.metadata_log}
    out |= {norm(s.statistics_path) for s in (*metadata.statistics, *metadata.partition_statistics)}
    for snapshot in metadata.snapshots:
        out.add(norm(snapshot.manifest_list))
        out |= {norm(m.manifest_path) for m in snapshot.manifests(table.io)}
        for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files():
            out.add(norm(task.file.file_path))
            out |= {norm(d.file_path) for d in task.delete_files}
    return out


def age(path: Path, days: float) -> None:
    moment = time.time() - days * DAY
    os.utime(path, (moment, moment))


def orphan(table, relative: str, *, days: float = 0.0) -> Path:
    """A file no snapshot lists, `days` old."""
    path = root_of(table) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows(range(3)), path)
    age(path, days)
    return path


def run(table_id: str = TABLE, *, dry_run: bool = False, owner: LeaseOwner | None = None, **retention):
    return maintain_table(table_id, owner=owner or LeaseOwner.cli(), spec=spec_for(table_id, **retention),
                          dry_run=dry_run)


# ---- expiry and deletion ------------------------------------------------------------------------------


def test_retained_snapshots_read_completely_and_only_expired_files_go(iceberg_catalog):
    table = build(iceberg_catalog)
    before, disk = reads(table), on_disk(table)
    expired = len(before) - 3
    assert expired >= 5 and disk == referenced(table)  # nothing but the table's own files yet

    result = run(max_age="0s", min_snapshots=3)

    table = table.refresh()
    after = reads(table)
    assert len(after) == 3 and result.snapshots_after == 3 and len(result.snapshots_expired) == expired
    assert set(after) == set(before) - set(result.snapshots_expired)
    assert after == {s: before[s] for s in after}  # every retained snapshot reads exactly as before
    remaining = on_disk(table)
    assert remaining == referenced(table)  # the expired snapshots' files are gone, the rest stay
    gone = disk - remaining
    assert gone and gone <= disk  # all of them files of the history: no orphans here
    assert result.files_deleted == len(gone) and result.of("orphan").files == 0
    data = {p for p in gone if "/data/" in p}
    assert result.of("data").files == len(data) > 0  # the files the overwrite and the delete replaced
    assert result.of("manifest-list").files == expired  # one per expired snapshot
    assert (result.files_before, result.files_after) == (len(disk), len(disk) - len(gone))
    assert result.bytes_after == result.bytes_before - result.bytes_deleted
    live = sum(t.file.file_size_in_bytes for t in table.scan().plan_files())
    assert result.live_bytes == live and result.kept_referenced == len(disk) - len(gone)
    assert read_lease(TABLE) is None  # the lease was taken and released

    (row,) = read_maintenance(iceberg_catalog, TABLE).to_pylist()
    record = MaintenanceRecord(**row)
    assert (record.status, record.trigger, record.snapshots_expired) == ("done", "manual", expired)
    assert (record.data_files, record.manifest_list_files) == (result.of("data").files, expired)
    assert record.files_deleted == result.files_deleted and record.bytes_deleted == result.bytes_deleted
    assert (record.bytes_before, record.bytes_after, record.live_bytes) == (
        result.bytes_before, result.bytes_after, result.live_bytes)

    again = run(max_age="0s", min_snapshots=3)  # a rerun: nothing left to do
    assert again.snapshots_expired == () and again.files_deleted == 0 and reads(table) == after


def test_dry_run_deletes_nothing_and_counts_the_same(iceberg_catalog):
    table = build(iceberg_catalog)
    old, young = orphan(table, "data/old.parquet", days=4), orphan(table, "data/young.parquet", days=1)
    disk, location, history = on_disk(table), table.metadata_location, reads(table)

    dry = run(dry_run=True, max_age="0s", min_snapshots=2)
    assert (on_disk(table) == disk and table.refresh().metadata_location == location
            and reads(table) == history)
    assert dry.status == "dry-run" and dry.files_deleted > 0 and dry.of("orphan").files == 1

    real = run(max_age="0s", min_snapshots=2)
    same = ("snapshots_before", "snapshots_expired", "snapshots_after", "deleted", "kept_referenced",
            "young_orphans", "young_orphan_bytes", "files_before", "bytes_before", "files_after",
            "bytes_after", "live_bytes", "snapshot_id")
    assert dry.model_dump(include=set(same)) == real.model_dump(include=set(same))
    assert not old.exists() and young.exists()
    statuses = {r["run_id"]: r["status"] for r in read_maintenance(iceberg_catalog, TABLE).to_pylist()}
    assert statuses == {dry.run_id: "dry-run", real.run_id: "done"}


def test_orphans_wait_for_the_grace_period_and_a_live_runs_files_stay(iceberg_catalog):
    table = build(iceberg_catalog)
    history = reads(table)
    staging = Path(resolve(staging_root(table))[1])
    old = [orphan(table, "data/x=1/crashed-writer.parquet", days=4),
           orphan(table, "metadata/00077-failed-commit.metadata.json", days=4),  # a failed commit's metadata
           orphan(table, f"{staging.relative_to(root_of(table))}/dead-run/part-0.parquet", days=4)]
    young = [orphan(table, "data/x=1/just-written.parquet", days=2.9),
             orphan(table, f"{staging.relative_to(root_of(table))}/live-run/part-0.parquet")]
    hint = root_of(table) / "metadata" / "version-hint.text"  # found by name, never through the metadata
    hint.write_text("7")
    age(hint, 30)

    result = run(max_age="30d", orphan_grace="3d")  # nothing is that old: no snapshot expires

    assert result.snapshots_expired == () and reads(table) == history
    assert not any(p.exists() for p in old) and all(p.exists() for p in young) and hint.exists()
    assert result.of("orphan").files == len(old) and result.files_deleted == len(old)
    assert result.young_orphans == len(young)
    assert result.young_orphan_bytes == sum(p.stat().st_size for p in young)
    assert on_disk(table) == referenced(table) | {str(p) for p in young} | {str(hint)}


def test_a_held_lease_refuses_and_nothing_is_touched(iceberg_catalog, capsys):
    table = build(iceberg_catalog)
    orphan(table, "data/old.parquet", days=10)
    compaction = LeaseOwner.cli("compact-1")
    acquire_lease(TABLE, compaction)
    disk, location = on_disk(table), table.metadata_location
    for dry_run in (False, True):
        with pytest.raises(TableBusy, match="lakesort run compact-1 is working on this table") as caught:
            run(dry_run=dry_run, max_age="0s", min_snapshots=1)
        assert caught.value.holder.same_run(compaction)
    spec = Path("spec.yaml")
    spec.write_text(json.dumps({"table": TABLE, "owner": OWNER, "retention": {"max_age": "0s"}}))
    assert main(["expire", TABLE, "--spec", str(spec)]) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert "table busy, nothing expired or deleted" in err and "compact-1" in err
    assert on_disk(table) == disk and table.refresh().metadata_location == location
    assert read_lease(TABLE).same_run(compaction)  # still the compaction's
    assert read_maintenance(iceberg_catalog, TABLE).num_rows == 0  # a refused run records nothing
    release_lease(TABLE, compaction)
    assert run(max_age="0s", min_snapshots=1).files_deleted > 0


def test_old_metadata_files_beyond_previous_versions_max_go_the_current_and_the_log_stay(iceberg_catalog):
    table = build(iceberg_catalog, history=("append",) * 8,
                  properties={"write.metadata.previous-versions-max": "3"})
    metadata_dir = root_of(table) / "metadata"

    def versions() -> list[str]:
        return sorted(p.name.split("-")[0] for p in metadata_dir.glob("*.metadata.json"))

    assert versions() == [f"{v:05d}" for v in range(9)]  # create, then a version per append
    assert len(table.metadata.metadata_log) == 3

    result = run(max_age="30d")  # nothing expires: no commit, only the files that left the log go
    assert result.snapshots_expired == () and result.of("metadata").files == 5
    assert versions() == ["00005", "00006", "00007", "00008"]  # the log's three and the current one
    history = reads(table)
    reloaded = iceberg_catalog.load_table(TABLE)
    assert reloaded.metadata_location == table.metadata_location and reads(reloaded) == history

    result = run(max_age="0s", min_snapshots=2)  # the expiry commits version 9; version 5 leaves the log
    assert len(result.snapshots_expired) == 6 and result.of("metadata").files == 1
    assert versions() == ["00006", "00007", "00008", "00009"]
    table = iceberg_catalog.load_table(TABLE)
    kept = ({resolve(e.metadata_file)[1] for e in table.metadata.metadata_log}
            | {resolve(table.metadata_location)[1]})
    assert {str(p) for p in metadata_dir.glob("*.metadata.json")} == kept
    assert reads(table) == {s: history[s] for s in reads(table)}


def test_branch_and_tag_heads_are_protected(iceberg_catalog):
    table = build(iceberg_catalog, history=("append",) * 6)
    s = [snap.snapshot_id for snap in table.metadata.snapshots]
    table.manage_snapshots().create_tag(s[1], "v1").create_branch(s[2], "audit").commit()
    history = reads(table)

    dry = run(dry_run=True, max_age="0s", min_snapshots=2)  # main keeps s6, s5; audit s3, s2; the tag s2
    assert set(dry.snapshots_expired) == {s[0], s[3]}
    result = run(max_age="0s", min_snapshots=1)  # the heads only: main's, the branch's and the tag's
    assert set(result.snapshots_expired) == {s[0], s[3], s[4]}
    table = table.refresh()
    assert {snap.snapshot_id for snap in table.metadata.snapshots} == {s[1], s[2], s[5]}
    assert table.metadata.refs["v1"].snapshot_id == s[1] and table.metadata.refs["audit"].snapshot_id == s[2]
    assert reads(table) == {sid: history[sid] for sid in (s[1], s[2], s[5])}
    # Appends only: every data file and manifest is still some retained snapshot's;
    # the expired manifest lists go.
    assert result.files_deleted == result.of("manifest-list").files == 3
    assert on_disk(table) == referenced(table)


def test_a_commit_landing_meanwhile_protects_its_files(iceberg_catalog, monkeypatch):
    """A writer without the lease commits, between the expiry and the deletion, a snapshot that re-adds a
    data file only expired snapshots referenced: the re-read keeps it."""
    table = build(iceberg_catalog, history=("append", "overwrite", "append"))
    first = table.metadata.snapshots[0]
    (entry,) = [e for m in first.manifests(table.io) for e in m.fetch_manifest_entry(table.io)]
    readded = resolve(entry.data_file.file_path)[1]
    original = run_module.sort_files

    def sort_then_commit(*args, **kwargs):
        sorted_files = original(*args, **kwargs)
        assert readded in {i.path for i in sorted_files.doomed["data"]}  # doomed, until the commit below
        writer = iceberg_catalog.load_table(TABLE)
        with writer.transaction() as tx, tx.update_snapshot().fast_append() as append:
            append.append_data_file(entry.data_file)
        return sorted_files

    monkeypatch.setattr(run_module, "sort_files", sort_then_commit)
    result = run(max_age="0s", min_snapshots=2)
    assert result.kept_late == 1 and Path(readded).exists()
    table = table.refresh()
    assert (sorted(table.scan().to_arrow().column("id").to_pylist())
            == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
    assert on_disk(table) == referenced(table)


def test_a_file_named_like_a_retained_one_is_kept(iceberg_catalog):
    """The last guard against a path spelled two ways: an unreferenced file with the name of a file a retained
    snapshot references (here a copy elsewhere; in life,
    the same file through a symlink or another URI) stays."""
    table = build(iceberg_catalog)
    live = Path(resolve(next(iter(table.scan().plan_files())).file.file_path)[1])
    alias = root_of(table) / "data" / "elsewhere" / live.name
    alias.parent.mkdir(parents=True)
    alias.write_bytes(live.read_bytes())
    age(alias, 10)
    result = run(max_age="30d")
    assert alias.exists() and result.kept_aliased == 1 and result.of("orphan").files == 0


def test_a_location_holding_another_table_is_refused(iceberg_catalog):
    table = build(iceberg_catalog)
    inner = orphan(table, "data/inner/metadata/00000-other.metadata.json", days=30)
    disk, location = on_disk(table), table.metadata_location
    with pytest.raises(MaintenanceError, match="another table inside this table's location"):
        run(max_age="0s", min_snapshots=1)
    assert on_disk(table) == disk and inner.exists() and table.refresh().metadata_location == location
    assert read_maintenance(iceberg_catalog, TABLE).to_pylist()[0]["status"] == "failed"
    assert read_lease(TABLE) is None


def test_an_unreadable_manifest_list_deletes_nothing(iceberg_catalog):
    table = build(iceberg_catalog)
    victim = Path(resolve(table.metadata.snapshots[2].manifest_list)[1])
    victim.unlink()
    orphan(table, "data/old.parquet", days=10)
    disk = on_disk(table)
    with pytest.raises(MaintenanceError, match=r"cannot read the manifest list .* "
                                               r"nothing can be deleted safely"):
        run(max_age="0s", min_snapshots=1)
    assert on_disk(table) == disk


# ---- the command line ---------------------------------------------------------------------------------


def test_cli(iceberg_catalog, tmp_path, capsys):
    table = build(iceberg_catalog)
    spec = tmp_path / "events.yaml"
    spec.write_text(f"table: {TABLE}\nowner: {json.dumps(OWNER)}\nretention: {{max_age: "
                    "0s, min_snapshots: 2}\n")
    disk, n = on_disk(table), len(table.metadata.snapshots)
    assert main(["expire", TABLE, "--spec", str(spec), "--dry-run"]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"{TABLE}: would expire {n - 2} of {n} snapshot(s)" in out and "dry run, nothing changed" in out
    assert on_disk(table) == disk
    assert main(["expire", TABLE, "--spec", str(spec), "--json"]) == EXIT_OK
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "done" and len(result["snapshots_expired"]) == n - 2
    assert result["retention"] == {"max_age": "0s", "min_snapshots": 2, "orphan_grace": "3d"}
    assert main(["expire", TABLE, "--spec", str(spec)]) == EXIT_OK
    assert f"{TABLE}: expired 0 of 2 snapshot(s)" in capsys.readouterr().out

    # Bad input: exit 2, before anything is opened.
    assert main(["expire", "ns.other", "--spec", str(spec)]) == EXIT_USAGE
    assert f"is for table {TABLE}, not ns.other" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"table: {TABLE}\nowner: {json.dumps(OWNER)}\nretention: {{orphan_grace: 10m}}\n")
    assert main(["expire", TABLE, "--spec", str(bad)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "retention.orphan_grace" in err and "at least 1h" in err and "got 10m" in err
    bad.write_text(f"table: {TABLE}\nowner: {json.dumps(OWNER)}\nretention: {{max_age: 3}}\n")
    assert main(["expire", TABLE, "--spec", str(bad)]) == EXIT_USAGE
    assert "write 3h or 3d" in capsys.readouterr().err
    missing = tmp_path / "missing.yaml"
    missing.write_text(f"table: ns.missing\nowner: {json.dumps(OWNER)}\n")
    assert main(["expire", "ns.missing", "--spec", str(missing)]) == EXIT_USAGE
    assert "ns.missing" in capsys.readouterr().err and read_lease("ns.missing") is None


# ---- durations, the spec key, the record --------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [("36h", 36 * 3600), ("3d", 3 * DAY), (" 1.5 D ", 1.5 * DAY),
                                               ("90m", 5400), ("45s", 45), ("2w", 14 * DAY), ("0s", 0)])
def test_durations(text, seconds):
    assert parse_duration(text).total_seconds() == seconds
    assert parse_duration(format_duration_short(parse_duration(text))) == parse_duration(text)


@pytest.mark.parametrize(("value", "message"), [("3", "a duration like"), (3, "write 3h or 3d"),
                                                ("3 days", "unknown duration unit"),
                                                ("-1d", "a duration like"), (True, "a duration like"),
                                                ("3mo", "unknown duration unit")])
def test_bad_durations(value, message):
    with pytest.raises(ValueError, match=message):
        parse_duration(value)


def test_the_retention_spec_key():
    assert spec_for().retention == Retention() == Retention(max_age="3d", min_snapshots=5, orphan_grace="3d")
    custom = spec_for(max_age="36h", min_snapshots=1, orphan_grace="2h")
    assert custom.retention.max_age == dt.timedelta(hours=36)
    dumped = custom.model_dump(mode="json")
    assert dumped["retention"] == {"max_age": "36h", "min_snapshots": 1, "orphan_grace": "2h"}
    assert parse_spec(dumped).retention == custom.retention  # a dumped spec reads back
    assert custom.spec_hash == spec_for().spec_hash  # retention does not change the bytes written
    for bad, culprit in (({"min_snapshots": 0}, "retention.min_snapshots"),
                         ({"orphan_grace": "59m"}, "retention.orphan_grace"),
                         ({"max_age": "soon"}, "retention.max_age"), ({"keep": 1}, "keep")):
        with pytest.raises(ConfigError, match=culprit):
            spec_for(**bad)


def test_the_record_is_the_stores_schema(iceberg_catalog):
    assert ([f.name for f in dataclasses.fields(MaintenanceRecord)]
            == [n for n, _, _ in store.MAINTENANCE_FIELDS])
    assert ({f"{k.replace('-', '_')}_files" for k in DELETED_KINDS}
            <= {n for n, _, _ in store.MAINTENANCE_FIELDS})
    build(iceberg_catalog)
    result = run(max_age="0s", min_snapshots=1)
    record = record_of(result, "nightly")
    assert record.trigger == "nightly" and record.files_deleted == result.files_deleted
    assert record.orphan_grace_s == 3 * DAY and record.max_age_s == 0 and record.min_snapshots == 1


def test_the_report_shows_storage_over_time(iceberg_catalog, tmp_path):
    table = build(iceberg_catalog)
    run(max_age="30d")
    apply(table, "overwrite", itertools.count(100))
    run(max_age="0s", min_snapshots=1)
    index = write_reports(tmp_path / "reports", catalog=iceberg_catalog, specs=[spec_for()])
    html = (index.parent / "tables" / f"{TABLE}.html").read_text(encoding="utf-8")
    assert "<h2>Storage</h2>" in html and "storage over time (total vs live)" in html
    assert html.count('<td><span class="badge ok">done</span></td>') == 2


# ---- the property: what survives is exactly what the retained table references, plus young orphans ------

_REWRITES = st.sampled_from([("append",), ("overwrite",), ("delete",)])  # the ops that leave files behind
OPS = st.one_of(
    _REWRITES, _REWRITES, st.just(("tag",)),
    st.tuples(st.just("orphan"), st.booleans()),  # old (past the grace period) or young
    st.tuples(st.just("expire"), st.integers(1, 3), st.booleans()),  # min_snapshots, dry run
)
_tables = itertools.count()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=3, max_size=9))
def test_random_histories_keep_exactly_what_retained_snapshots_reference(iceberg_catalog, ops):
    name = f"prop.t{next(_tables)}"
    # A short metadata log, so that metadata files leave it (and are deleted) within a few commits.
    table = build(iceberg_catalog, name, history=("append",),
                  properties={"write.metadata.previous-versions-max": "2"})
    ids, seen, young, tags = itertools.count(100), reads(table), set(), itertools.count()
    for op in ops:
        if op[0] == "orphan":
            path = orphan(table, f"data/orphan-{next(ids)}.parquet", days=10 if op[1] else 0)
            if not op[1]:
                young.add(str(path))
        elif op[0] == "tag":
            table.manage_snapshots().create_tag(
                table.current_snapshot().snapshot_id, f"tag{next(tags)}"
            ).commit()
        elif op[0] == "expire":
            disk, location = on_disk(table), table.metadata_location
            retention = Retention(max_age="0s", min_snapshots=op[1], orphan_grace="3d")
            result = maintain(table, retention, lease=contextlib.nullcontext(), run_id="p", dry_run=op[2])
            table = table.refresh()
            if op[2]:
                assert on_disk(table) == disk and table.metadata_location == location
                continue
            # The oracle: exactly the retained table's files and the young orphans survive.
            assert on_disk(table) == referenced(table) | young
            assert result.files_after == len(disk) - result.files_deleted
            # Every retained snapshot reads as it did when it was committed.
            assert reads(table) == {s: seen[s] for s in reads(table)}
        else:
            apply(table, op[0], ids)
            seen = {**seen, **reads(table)}
