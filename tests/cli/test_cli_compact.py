"""`lakesort compact` and `plan-rewrite` with a date range (--from/--to), --dry-run, and a busy table:
usage errors exit 2 before anything is opened, a range without partitions is "nothing to do" (exit 0),
a table held by another run exits 1 naming it, a spec edited while the run works on it exits 2 naming the
file. `compact` and `--dry-run` take one path, the driver's, which prepares as the DAGs do. Spark is never
started here: the driver's Spark half (or the Spark job) is replaced where a test would get that far."""

from __future__ import annotations

import re

import pytest

import layout.cli.args
import layout.cli.compact
import layout.cli.plan_rewrite
import layout.compaction.pipeline.driver
from layout.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, main
from layout.compaction.pipeline.driver import CompactResult
from layout.upkeep.lease import LeaseOwner, acquire_lease, read_lease


@pytest.fixture
def driver(monkeypatch):
    """Stands in for the Spark half of the one-process driver, after the real prepare step: records the runs
    it was given (`PreparedRun`s) and commits nothing."""
    calls = []

    def spark_half(planned, **kwargs):
        calls.append(planned.prepared())
        return CompactResult(planned, planned.prepared().plan())

    monkeypatch.setattr(layout.compaction.pipeline.driver, "_compact", spark_half)
    return calls


def _nothing_opened(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("opened something before the usage error")

    # Each where the commands look it up: the spec and the partitions in layout.cli.args,
    # the rest in the command.
    for module, names in ((layout.cli.compact, ("table_config", "compact")),
                          (layout.cli.plan_rewrite, ("table_spec", "load_table")),
                          (layout.cli.args, ("partitions_for_dates",))):
        for name in names:
            monkeypatch.setattr(module, name, refuse)


@pytest.mark.parametrize("command", ["compact", "plan-rewrite"])
@pytest.mark.parametrize(("args", "message"), [
    (["--from", "1995-02-01"], "a date range needs both --from and --to: add --to"),
    (["--to", "1995-02-01"], "a date range needs both --from and --to: add --from"),
    (["--from", "1995-03-01", "--to", "1995-02-01"],
     r"--from \(1995-03-01\) is after --to \(1995-02-01\): swap them"),
    (["--from", "1995-02-01", "--to", "1995-02-28", "--partition", "d_month=1995-02"],
     r"give either --partition or a date range \(--from/--to\), not both"),
    (["--from", "1.2.1995", "--to", "1995-02-28"], "--from '1.2.1995' is not a date: write it as YYYY-MM-DD"),
])
def test_bad_date_ranges_exit_2_before_anything_is_opened(command, args, message, monkeypatch, capsys):
    _nothing_opened(monkeypatch)
    assert main([command, "t.events", *args]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"lakesort {command}: error: ") and err.count("\n") == 1, err
    assert re.search(message, err), err


def test_a_date_range_compacts_its_partitions(events, driver, capsys):
    assert main(["compact", "t.events", "--from", "1995-01-31", "--to", "1995-03-01", "--force"]) == EXIT_OK
    (prepared,) = driver
    assert prepared.partitions == ("d_month=1995-01", "d_month=1995-02", "d_month=1995-03")
    assert prepared.plan().forced and prepared.trigger == "manual" and not prepared.dry_run
    assert read_lease("t.events") is None  # the driver released it


def test_a_range_without_partitions_is_nothing_to_do(events, driver, capsys):
    assert main(["compact", "t.events", "--from", "1994-01-01", "--to", "1994-12-31"]) == EXIT_OK
    assert (capsys.readouterr().out
            == "t.events: nothing to do (no partition holds rows of 1994-01-01..1994-12-31)\n")
    assert driver == []
    assert main(["plan-rewrite", "t.events", "--from", "1994-01-01", "--to", "1994-01-31"]) == EXIT_OK
    assert "nothing to do" in capsys.readouterr().out


def test_plan_rewrite_with_a_date_range(events, capsys):
    assert main(["plan-rewrite", "t.events", "--from", "1995-02-10", "--to", "1995-02-11"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("d_month=1995-02: ") and "d_month=1995-01" not in out


def test_a_table_not_partitioned_by_date_takes_partitions(events, driver, capsys):
    with events.update_spec() as update:
        update.add_identity("k")
    assert main(["compact", "t.events", "--from", "1995-01-01", "--to", "1995-01-31"]) == EXIT_USAGE
    assert ("2 partition fields: a date range maps onto one date partition field only"
            in capsys.readouterr().err)
    assert driver == [] and read_lease("t.events") is None


def test_dry_run_plans_records_and_changes_nothing(events, iceberg_catalog, tmp_path, capsys):
    from layout.metrics.measure import read_runs

    snapshot = events.current_snapshot().snapshot_id
    holder = LeaseOwner.cli()
    acquire_lease("t.events", holder)  # a compaction runs: a dry run only reads, so it may run beside it
    assert (
        main(["compact", "t.events", "--dry-run", "--from", "1995-02-10", "--to", "1995-03-05", "--force"])
        == EXIT_OK
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("t.events: would rewrite 2 of 2 partition(s) (d_month=1995-02, d_month=1995-03)")
    assert (out[1].startswith("  d_month=1995-02: rewrite - forced")
            and out[-1].startswith("dry run, nothing changed"))
    assert read_lease("t.events").same_run(holder)
    assert events.refresh().current_snapshot().snapshot_id == snapshot
    assert [r["status"] for r in read_runs(iceberg_catalog, "t.events").to_pylist()] == ["dry-run"]


def test_compact_and_dry_run_prepare_through_one_path(events, driver, monkeypatch, capsys):
    """Both go through the driver to the DAGs' prepare step (`runs.prepare_table`), with the spec the command
    resolved; only the real run goes on to the Spark half."""
    seen = []
    prepare = layout.compaction.pipeline.driver.prepare_table

    def spy(request, **kwargs):
        seen.append(request)
        return prepare(request, **kwargs)

    monkeypatch.setattr(layout.compaction.pipeline.driver, "prepare_table", spy)
    assert main(["compact", "t.events", "--dry-run"]) == EXIT_OK
    assert capsys.readouterr().out.splitlines()[-1].startswith("dry run, nothing changed; plan: ")
    assert driver == []
    assert main(["compact", "t.events"]) == EXIT_OK
    assert [r.dry_run for r in seen] == [True, False] and len(driver) == 1
    assert {r.config.source for r in seen} == {str(layout.cli.args.find_spec("t.events").source)}
    # Found in the registry: the run carries where each key came from (the spec file here), for its record.
    for r in seen:
        assert r.config.sources and "spec" in {o.kind for o in r.config.sources.values()}
        assert r.config.sources["sort.keys"].kind == "spec"


def test_a_spec_edited_while_the_run_works_exits_2_naming_the_file(
    events, registry, iceberg_catalog, monkeypatch, capsys
):
    """The spec's file is edited while the Spark job runs (here the job only edits it): verify re-reads that
    file, finds another hash and refuses. Exit 2, nothing committed,
    the run recorded as failed, lease released."""
    from layout.metrics.measure import read_runs

    spec_file = registry / "events.yaml"

    def submit(plan_path, manifest_path, **kwargs):
        spec_file.write_text(spec_file.read_text().replace("target_file_size: 1MiB",
                                                           "target_file_size: 2MiB"))

    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", submit)
    snapshot = events.current_snapshot().snapshot_id
    assert main(["compact", "t.events", "--no-record"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert re.fullmatch(rf"lakesort compact: error: {re.escape(str(spec_file))} changed since run \S+ was "
                        r"planned \(spec hash [0-9a-f]{16} -> [0-9a-f]{16}\): nothing committed; rerun the "
                        r"compaction to plan with the new spec\n", err), err
    assert events.refresh().current_snapshot().snapshot_id == snapshot and read_lease("t.events") is None
    (record,) = read_runs(iceberg_catalog, "t.events").to_pylist()
    assert (record["status"], record["verification"]) == ("failed", "skipped")
    assert record["error"].startswith(f"verify: {spec_file} changed since run {record['run_id']} was planned")


def test_a_busy_table_exits_1_naming_the_holder(registry, capsys):
    holder = LeaseOwner.dag("lakesort_nightly", "scheduled__2026-01-01")
    acquire_lease("t.events", holder)
    assert main(["compact", "t.events"]) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert err.startswith("lakesort compact: table busy, nothing done: t.events: lakesort_nightly run "
                          "scheduled__2026-01-01 is working on this table"), err
    assert "wait for it to finish" in err
    assert read_lease("t.events").same_run(holder)
