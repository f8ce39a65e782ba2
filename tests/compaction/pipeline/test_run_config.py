"""The table's configuration resolved once per run (layout.compaction.pipeline.config): the prepared run
carries the spec, its file and hash through JSON; verify and commit re-read that one file and refuse a spec
changed since the plan (SpecChanged, naming the file); an edit outside the hash, or a spec given in code,
passes; and over a whole `lakesort compact` the registry is read once, at the start (Spark)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from layout.compaction.integrity.staged import CommitRefused
from layout.compaction.pipeline import runs, steps
from layout.compaction.pipeline.config import RunConfig, SpecChanged, check_unchanged
from layout.compaction.pipeline.steps import PreparedRun
from layout.errors import ConfigError
from layout.registry import find_spec
from layout.spec import parse_spec
from layout.upkeep.cleanup import staging_root
from layout.upkeep.lease import LeaseOwner, read_lease

NIGHT = LeaseOwner.dag("lakesort_nightly", "n1")
SORTED_BY_K = "sort: {keys: [{column: k}]}"


def _prepared(events) -> PreparedRun:
    return runs.prepare_table(runs.TableRequest(table="t.events", trigger="nightly"), owner=NIGHT).prepared()


def _edit(registry: Path, old: str, new: str) -> Path:
    spec_file = registry / "events.yaml"
    text = spec_file.read_text()
    assert old in text
    spec_file.write_text(text.replace(old, new))
    return spec_file


def _staged_orphan(events, run_id: str) -> Path:
    """What a Spark job of the run leaves before verify: a staged file."""
    orphan = (
        Path(staging_root(events).removeprefix("file://")) / run_id / "lakesort_group=0" / "part-0.parquet"
    )
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"staged")
    return orphan


def test_the_prepared_run_carries_the_spec_through_json(events, registry):
    prepared = _prepared(events)
    spec = find_spec("t.events")
    assert prepared.spec == spec and prepared.config.spec_hash == spec.spec_hash
    loaded = PreparedRun.load(prepared.work_dir)  # as each later Airflow task reads it
    assert (loaded == prepared and loaded.spec.source == str(registry / "events.yaml")
            and loaded.config.on_disk)
    assert json.loads(prepared.path.read_text())["config"]["spec"]["table"] == "t.events"
    # A run file whose spec no longer hashes to the run's hash is refused where it is read.
    document = json.loads(prepared.path.read_text())
    document["config"]["spec"]["target_file_size"] = 2 << 20
    prepared.path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=rf"hashes to [0-9a-f]{{16}}, not to the run's {spec.spec_hash}"):
        PreparedRun.load(prepared.work_dir)


def test_verify_refuses_a_spec_changed_since_the_plan(events, registry, iceberg_catalog, tmp_path):
    from layout.metrics.measure import read_runs

    prepared = _prepared(events)
    orphan = _staged_orphan(events, prepared.run_id)
    spec_file = _edit(registry, "sort: {keys: [{column: d}, {column: k}]}", SORTED_BY_K)
    new_hash = find_spec("t.events").spec_hash
    message = (f"{spec_file} changed since run {prepared.run_id} was planned (spec hash "
               f"{prepared.config.spec_hash} -> {new_hash}): nothing committed; rerun the compaction to plan "
               "with the new spec")
    with pytest.raises(SpecChanged, match=re.escape(message)) as refused:
        steps.verify(prepared, verifier=lambda manifest: pytest.fail("verified against the changed spec"))
    assert isinstance(refused.value, ConfigError)  # the CLI's exit status 2
    assert not orphan.exists()  # the run is over: its staged files are gone
    (record,) = read_runs(iceberg_catalog, "t.events").to_pylist()
    assert (record["status"], record["verification"]) == ("failed", "skipped")  # refused before verifying
    assert record["error"] == f"verify: {message}"


def test_commit_refuses_a_spec_changed_since_the_plan(events, registry):
    prepared = _prepared(events)
    orphan = _staged_orphan(events, prepared.run_id)
    spec_file = _edit(registry, "target_file_size: 1MiB", "target_file_size: 2MiB")
    snapshot = events.current_snapshot().snapshot_id
    with pytest.raises(SpecChanged, match=rf"{re.escape(str(spec_file))} changed since "
                                          rf"run {prepared.run_id}"):
        steps.commit(prepared)
    assert not orphan.exists() and events.refresh().current_snapshot().snapshot_id == snapshot
    assert read_lease("t.events").same_run(NIGHT)  # the task (runs.commit_table) releases it, not the step


def test_an_edit_outside_the_hash_keeps_the_runs_spec(events, registry):
    """Owner, probes, verification bounds are not in the hash: the run goes on with the spec it carries (here
    as far as the missing Spark output)."""
    prepared = _prepared(events)
    _edit(registry, "email: test@example.com", "email: other@example.com")
    with pytest.raises(CommitRefused, match="wrote no manifest"):
        steps.verify(prepared, verifier=lambda manifest: [])
    assert prepared.spec.owner.email == "test@example.com"


def test_a_spec_read_from_no_file_is_not_reread_and_a_gone_file_refuses(events, registry):
    config = RunConfig.of(parse_spec({"table": "t.events", "owner": {"name": "T", "email": "t@example.com"}},
                                     source="test"))
    assert not config.on_disk and config.spec.source == "test"
    check_unchanged(config, table="t.events", run_id="r")  # nothing to read: nothing to compare
    on_disk = RunConfig.of(find_spec("t.events"))
    check_unchanged(on_disk, table="t.events", run_id="r")  # unchanged: passes
    _edit(registry, "table: t.events", "table: t.other")
    with pytest.raises(SpecChanged, match="is the spec of t.other now, not of t.events"):
        check_unchanged(on_disk, table="t.events", run_id="r")
    (registry / "events.yaml").unlink()
    with pytest.raises(SpecChanged, match=r"events.yaml can no longer be read since run r was planned"):
        check_unchanged(on_disk, table="t.events", run_id="r")


def _count(monkeypatch, name: str, original) -> list:
    """Every call of `original`, wherever a module of layout holds it as `name`."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("layout") and getattr(module, name, None) is original:
            monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.spark
def test_a_whole_run_reads_the_registry_once(events, registry, iceberg_catalog, spark, monkeypatch, capsys):
    """`lakesort compact` in-process (the job's own code on the test session's Spark, real verification,
    commit and measuring): one `find_resolution` (the command's: the spec with each key's source; `find_spec`
    is the same lookup without the sources) and, after it, one read of the spec's file in verify and
    one in commit, nothing else."""
    from lossless import in_process_submit, load_job

    import layout.cli.args
    import layout.cli.compact
    import layout.compaction.pipeline.driver
    import layout.registry
    import layout.spec
    from layout.cli import EXIT_OK, main
    from layout.metrics.measure import read_runs

    assert layout.cli.args.find_resolution is layout.registry.find_resolution  # loaded before counting
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", in_process_submit(spark, load_job()))
    lookups = _count(monkeypatch, "find_resolution", layout.registry.find_resolution)
    reads = _count(monkeypatch, "load_spec", layout.spec.load_spec)
    assert main(["compact", "t.events"]) == EXIT_OK, capsys.readouterr().err
    assert "t.events: rewrote 4 group(s)" in capsys.readouterr().out
    spec_file = str(registry / "events.yaml")
    assert lookups == ["t.events"]
    assert [str(p) for p in reads] == [spec_file] * 3  # the lookup's, verify's, commit's
    (record,) = read_runs(iceberg_catalog, "t.events").to_pylist()
    assert (record["status"], record["verification"]) == ("committed", "passed")
