"""Faults in a compaction run: the table stays as it was, the staged output is removed, and a rerun succeeds.

The job killed mid-write (the real `spark-submit`, SIGKILLed), an exception just before the commit, steps
retried after the commit, concurrent commits (before the commit and racing it), staged output changed after
the job wrote it (checked before the commit; `lakesort cleanup` removes what is left), and staged output
failing verification. Only the kill goes through `spark-submit` (about a minute on 2 cores); the others run
the *same job code* (`jobs/compact.py`'s `compact_groups` + `write_manifest`) on the session's in-process
SparkSession, through `layout.compaction.pipeline.driver.compact` with only `submit` replaced
(`in_process_job`); planning, staging, the checks and the commit are the real ones. (Races found by running
steps concurrently are tests/compaction/pipeline/test_races.py's.)
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import types
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from demo_tables import (
    MONTHS,
    SPARK_CONF,
    State,
    assert_unchanged,
    demo_spec,
    live_files,
    partition_of,
    sorted_rows,
    staged_files,
    staged_parquet,
    state,
)
from lossless import job_part

import layout.compaction.pipeline.driver
import layout.compaction.pipeline.submit
from layout.catalog import load_catalog, load_table
from layout.cli import EXIT_OK, main
from layout.compaction.integrity.staged import CommitRefused, check_staged, prove_staged, staged_columns
from layout.compaction.pipeline.commit import commit_rewrite
from layout.compaction.pipeline.driver import compact
from layout.compaction.pipeline.submit import CompactionFailed
from layout.compaction.planning.planner import RUN_ID, RewritePlan, plan_rewrite
from layout.io import resolve
from layout.manifest import StagedManifest
from layout.upkeep.cleanup import delete_staged, staging_root

pytestmark = pytest.mark.spark


class _KillMidWrite:
    """Stands in for `subprocess` in layout.compaction.pipeline.driver: starts the real spark-submit, watches
    the run's staging directory, and SIGKILLs the whole process group (spark-submit, the JVM, its Python
    workers) as soon as the first file appears there: the job dies mid-write,
    as on a lost driver or an OOM kill."""

    def __init__(self) -> None:
        self.killed_with: list[str] = []

    def run(self, cmd, *, stdout, stderr, env, check):
        plan = RewritePlan.from_json(Path(cmd[cmd.index("--plan") + 1]).read_text())
        filesystem, run_dir = resolve(
            f"{plan.table_location.rstrip('/')}/data/lakesort-staging/{plan.run_id}"
        )
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, env=env, start_new_session=True)
        from pyarrow import fs as pafs

        try:
            deadline = time.monotonic() + 300
            while proc.poll() is None and time.monotonic() < deadline:
                if filesystem.get_file_info(run_dir).type == pafs.FileType.Directory:
                    found = [
                        i.path
                        for i in filesystem.get_file_info(pafs.FileSelector(run_dir, recursive=True))
                        if i.type == pafs.FileType.File
                    ]
                    if found:
                        self.killed_with = found
                        break
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        return subprocess.CompletedProcess(cmd, proc.returncode)


def test_fault_job_killed_mid_write(demo_home, spark, job, monkeypatch):
    """The real spark-submit, SIGKILLed once its first staged file exists: CompactionFailed, the table as it
    was, the partial staging output deleted; then a rerun commits."""
    table = load_table("demo.lineitem")
    before = state(table)
    killer = _KillMidWrite()
    monkeypatch.setattr(layout.compaction.pipeline.submit, "subprocess",
                        types.SimpleNamespace(run=killer.run, STDOUT=subprocess.STDOUT))
    with pytest.raises(CompactionFailed, match=r"exit -9"):
        compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS, spark_conf=SPARK_CONF,
                work_dir=demo_home / "work")
    assert killer.killed_with, "the job finished before a staged file appeared: nothing was killed mid-write"
    assert_unchanged(table, before)
    monkeypatch.setattr(layout.compaction.pipeline.submit, "subprocess", subprocess)
    _rerun_succeeds(table, before, spark, job, monkeypatch)


def _rerun_succeeds(table, before: State, spark, job, monkeypatch, rows: pa.Table | None = None):
    def submit(plan_path, manifest_path, *, master, name, conf=None, work_dir, groups=None):
        plan = RewritePlan.from_json(Path(plan_path).read_text())
        job.write_manifest(spark, plan, job.compact_groups(spark, plan, list(plan.groups)),
                           str(manifest_path), 0.0)

    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", submit)
    result = compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS)
    table = table.refresh()
    assert result.snapshot_id == table.current_snapshot().snapshot_id != before.snapshot_id
    assert sorted_rows(table).equals(before.rows if rows is None else rows)
    assert table.current_snapshot().summary.additional_properties[RUN_ID] == result.plan.run_id
    return result


def test_fault_exception_just_before_commit(demo_home, in_process_job):
    table = load_table("demo.lineitem")
    before = state(table)
    seen = []

    def verify(manifest):
        seen.append(manifest)
        outputs = {resolve(f.path)[1] for g in manifest.groups for f in g.outputs}
        # Every output the manifest names is on storage, under the staging root, when verify runs.
        assert outputs and outputs <= set(staged_parquet(table)), "verify runs while the staged files exist"
        assert all(Path(p).is_file() and Path(p).stat().st_size > 0 for p in outputs)
        raise RuntimeError("verification says no")

    with pytest.raises(RuntimeError, match="verification says no"):
        compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS, verify=verify)
    assert len(seen) == 1 and sum(len(g.outputs) for g in seen[0].groups) > 0
    assert_unchanged(table, before)
    # A rerun from this state is the plain run the other tests make (after the kill,
    # after a concurrent commit).


def test_steps_retried_after_the_commit_keep_the_committed_files(demo_home, in_process_job):
    """An Airflow retry of verify, commit or the Spark task after the commit went through (its worker died
    before reporting success): each is a no-op. Before, the retried step failed (its inputs were gone) and its
    failure path deleted the run's staged files, which were the table's files by then."""
    from layout.compaction.pipeline import steps
    from layout.upkeep.cleanup import delete_staged

    table = load_table("demo.lineitem")
    before = state(table)
    result = compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS, work_dir=demo_home / "work",
                     verify=lambda manifest: None)
    committed = state(table)
    assert committed.snapshot_id == result.snapshot_id != before.snapshot_id
    prepared = steps.PreparedRun.load(demo_home / "work")
    assert steps.verify(prepared, verifier=lambda manifest: pytest.fail("a committed run was verified again")
                        ).status == "passed"
    again = steps.commit(prepared)
    assert (again.snapshot_id, again.files_removed, again.files_added, again.rows) == (
        result.snapshot_id, result.files_removed, result.files_added, result.rows)
    assert steps.abandon(prepared, "spark: a retried job found its output there") == 0
    # only what no snapshot references (Spark's _SUCCESS and .crc files)
    delete_staged(table, prepared.run_id)
    assert all(Path(resolve(path)[1]).is_file() for path in committed.files)
    after = state(table)  # reads every live file
    assert (after.snapshot_id, after.files) == (committed.snapshot_id, committed.files)
    assert after.rows.equals(before.rows)


def _remove_one_file(path: str) -> int:
    """A concurrent writer's commit (its own catalog connection) that removes one data file; its row count."""
    other = load_catalog().load_table("demo.lineitem")
    victim = next(f for f in live_files(other) if f.file_path == path)
    with other.transaction() as tx, tx.update_snapshot().overwrite() as overwrite:
        overwrite.delete_data_file(victim)
    return victim.record_count


def test_fault_concurrent_commit_removes_an_input_before_the_commit(demo_home, in_process_job, spark, job,
                                                                    monkeypatch, capsys):
    """Another writer removes one planned input while the staged output is being verified: the commit sees the
    input gone and refuses (CommitRefused); the table keeps the other writer's state;
    a rerun then succeeds."""
    table = load_table("demo.lineitem")
    before = state(table)
    removed = []

    def verify(manifest):
        removed.append(manifest.groups[0].inputs[0])
        _remove_one_file(removed[0])

    with pytest.raises(CommitRefused, match="no longer in"):
        compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS, verify=verify)
    table = table.refresh()
    concurrent = state(table)
    assert concurrent.snapshot_id != before.snapshot_id
    assert concurrent.files == before.files - {removed[0]}
    assert table.current_snapshot().summary.additional_properties.get(RUN_ID) is None
    assert staged_files(table) == []
    result = _rerun_succeeds(table, concurrent, spark, job, monkeypatch, rows=concurrent.rows)
    # The committed outputs live under the staging root: `lakesort cleanup` must leave every one of them.
    committed = staged_parquet(table)
    assert set(committed) == {resolve(f.file_path)[1] for f in live_files(table.refresh())
                              if "lakesort-staging" in f.file_path}
    assert len(committed) == result.files_added
    litter = len(staged_files(table)) - len(committed)  # _SUCCESS and .crc files: referenced by nothing
    assert main(["cleanup", "demo.lineitem", "--grace-hours", "0"]) == EXIT_OK
    assert f"removed {litter} orphaned" in capsys.readouterr().out
    assert staged_files(table) == committed
    assert sorted_rows(table).equals(concurrent.rows)


def test_fault_concurrent_commit_races_the_commit_itself(demo_home, in_process_job, monkeypatch):
    """Another writer removes one of the planned inputs after the commit's own input check, while the
    overwrite is being built: the catalog must refuse the lakesort snapshot (pyiceberg's
    CommitFailedException: the branch moved), or the removed rows would come back through the staged output;
    the staged files are removed. pyiceberg 0.12 retries the commit, re-validates, and raises
    ValidationException ("Data files were concurrently deleted"): not a LakesortError,
    but a clean refusal all the same."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    import layout.compaction.pipeline.commit

    table = load_table("demo.lineitem")
    before = state(table)
    real = layout.compaction.pipeline.commit.output_data_files
    raced = []

    def racing(*args, **kwargs):
        if not raced:
            other = load_catalog().load_table("demo.lineitem")
            raced.append(next(f.file_path for f in live_files(other) if partition_of(other, f) == MONTHS[0]))
            _remove_one_file(raced[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(layout.compaction.pipeline.commit, "output_data_files", racing)
    with pytest.raises((CommitFailedException, CommitRefused, ValidationException)):
        compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS)
    monkeypatch.setattr(layout.compaction.pipeline.commit, "output_data_files", real)
    concurrent = state(table)
    assert concurrent.files == before.files - {raced[0]}
    assert table.refresh().current_snapshot().summary.additional_properties.get(RUN_ID) is None
    assert staged_files(table) == []


def _stage(table, spec, spark, job, work: Path, **plan_kwargs) -> tuple[RewritePlan, StagedManifest]:
    """Plan and run the job (in process) without committing: the staged files stay."""
    plan = plan_rewrite(table, spec, **plan_kwargs)
    assert plan.groups
    work.mkdir(parents=True, exist_ok=True)
    job.write_manifest(spark, plan, job.compact_groups(spark, plan, list(plan.groups)),
                       str(work / "m.json"), 0.0)
    return plan, StagedManifest.from_json((work / "m.json").read_text())


def _drop_checksum(local: str) -> None:
    """Hadoop's local file system keeps a `.<name>.crc` beside each file and would refuse the changed bytes
    itself; object stores keep none: the checks below must not rely on it."""
    Path(local).with_name(f".{Path(local).name}.crc").unlink(missing_ok=True)


def _tamper_rows(path: str) -> None:
    """Drop the last row of a staged file."""
    filesystem, local = resolve(path)
    _drop_checksum(local)
    data = pq.read_table(local, filesystem=filesystem)
    pq.write_table(data.slice(0, data.num_rows - 1), local, filesystem=filesystem)


def _tamper_value(path: str) -> None:
    """Same rows, one value changed (the first row's l_comment): only the fingerprint can tell."""
    filesystem, local = resolve(path)
    _drop_checksum(local)
    data = pq.read_table(local, filesystem=filesystem)
    i = data.column_names.index("l_comment")
    column = data.column(i).combine_chunks()
    changed = pa.concat_arrays([pa.array(["tampered"], column.type), column.slice(1)])
    pq.write_table(data.set_column(i, data.field(i), changed), local, filesystem=filesystem)


def _tamper_delete(path: str) -> None:
    filesystem, local = resolve(path)
    _drop_checksum(local)
    filesystem.delete_file(local)


def _swap_first_rows(one: str, other: str) -> None:
    """Swap the first rows of two staged files of different groups: every group keeps its row count and the
    rows over all groups are the same; only the hash salted with each row's group can tell."""
    tables = {}
    for path in (one, other):
        filesystem, local = resolve(path)
        _drop_checksum(local)
        tables[path] = (filesystem, local, pq.read_table(local, filesystem=filesystem))
    (fs1, local1, a), (fs2, local2, b) = tables[one], tables[other]
    pq.write_table(pa.concat_tables([b.slice(0, 1), a.slice(1)]), local1, filesystem=fs1)
    pq.write_table(pa.concat_tables([a.slice(0, 1), b.slice(1)]), local2, filesystem=fs2)


TAMPERING = [
    (_tamper_value, r"content fingerprint of the staged files .* differs"),
    (_tamper_rows, r"staged files hold \d+ rows, the input \d+"),
    (_tamper_delete, r"staged files hold \d+ rows, the input \d+"),
]


def _read_back_again(job, spark, plan, manifest: StagedManifest) -> StagedManifest:
    """The manifest as the job's tail (read-back, then footers) would write it for the staged files as they
    are now: what the job reports when its write went wrong."""
    checked = job_part("readback").read_back(spark, job_part("job_plan").JobPlan.of(plan),
                                             job_part("write").staging_dir(plan))

    def now(f):
        filesystem, local = resolve(f.path)
        part_dir, group_dir = Path(local).parent.name, Path(local).parent.parent.name
        rows, hash_sum = checked[int(group_dir.split("=", 1)[1]), part_dir.split("=", 1)[1], Path(local).name]
        return f.model_copy(update={"size": filesystem.get_file_info(local).size,
                                    "rows": pq.read_metadata(local).num_rows, "read_back_rows": rows,
                                    "read_back_hash_sum": str(hash_sum)})

    groups = tuple(g.model_copy(update={"outputs": tuple(now(f) for f in g.outputs
                                                         if Path(resolve(f.path)[1]).exists())})
                   for g in manifest.groups)
    return manifest.model_copy(update={"groups": groups})


def _verify_and_commit(table, plan: RewritePlan, manifest: StagedManifest):
    """As the pipeline does it: the verify step's checks of the staged output (`check_staged`, `prove_staged`;
    a refusal removes the staged files), then `commit_rewrite` of the output that passed them."""
    try:
        check_staged(manifest, staged_columns(plan))
        prove_staged(table, plan, manifest)
    except BaseException:
        delete_staged(table, plan.run_id)
        raise
    return commit_rewrite(table, plan, manifest)


def test_staged_output_is_checked_before_commit_and_cleanup_removes_leftovers(demo_home, spark, job, capsys):
    """One real job run (not committed). A write that went wrong, each time on a fresh copy of its staged
    files: a value changed (same row count: only the fingerprint tells), a row dropped, a file deleted, rows
    swapped between groups (only the group salt tells), then read back by the job's own read-back ->
    CommitRefused naming what differs, nothing committed, the staged files removed. A file changed after it
    was verified: the commit refuses it by its size. Spark's read-back figures wrong: the recheck outside
    Spark refuses. Finally the untouched staged files are left behind as a crashed run would, and
    `lakesort cleanup TABLE` removes them and nothing else."""
    table = load_table("demo.lineitem")
    before = state(table)
    plan, manifest = _stage(table, demo_spec(), spark, job, demo_home / "work", partitions=MONTHS)
    columns = [f.name for f in table.schema().fields]
    check_staged(manifest, columns, recheck="all")  # untouched, the output passes
    run_dir = Path(resolve(f"{staging_root(table)}/{plan.run_id}")[1])
    saved = demo_home / "saved-staging"
    shutil.copytree(run_dir, saved)
    for tamper, message in TAMPERING:
        if not run_dir.exists():
            shutil.copytree(saved, run_dir)
        tamper(manifest.groups[0].outputs[0].path)
        with pytest.raises(CommitRefused, match=message):
            _verify_and_commit(table, plan, _read_back_again(job, spark, plan, manifest))
        assert_unchanged(table, before)
        assert not run_dir.exists()

    shutil.copytree(saved, run_dir)
    assert len(manifest.groups) == 2
    _swap_first_rows(manifest.groups[0].outputs[0].path, manifest.groups[1].outputs[0].path)
    with pytest.raises(CommitRefused, match=r"content fingerprint of the staged files .* differs"):
        _verify_and_commit(table, plan, _read_back_again(job, spark, plan, manifest))
    assert_unchanged(table, before)

    shutil.copytree(saved, run_dir)
    _tamper_rows(manifest.groups[0].outputs[0].path)
    with pytest.raises(CommitRefused, match=r"has \d+ bytes, \d+ when it was verified"):
        # verified as it was: the commit confirms the files are unchanged
        commit_rewrite(table, plan, manifest)
    assert_unchanged(table, before)

    shutil.copytree(saved, run_dir)
    first = manifest.groups[0].outputs[0]
    wrong = first.model_copy(update={"read_back_hash_sum": str(int(first.read_back_hash_sum) + 1)})
    group = manifest.groups[0].model_copy(update={"outputs": (wrong, *manifest.groups[0].outputs[1:])})
    lied = manifest.model_copy(update={"groups": (group, *manifest.groups[1:]),
                                       "expected_hash_sum": str(int(manifest.expected_hash_sum) + 1)})
    with pytest.raises(CommitRefused, match="re-read outside Spark"):
        check_staged(lied, columns, recheck="all")
    check_staged(lied, columns, recheck="none")  # without the second reader, nothing else could tell

    orphans = staged_files(table)
    assert {resolve(f.path)[1] for g in manifest.groups for f in g.outputs} <= set(orphans)
    assert main(["cleanup", "demo.lineitem", "--grace-hours", "0"]) == EXIT_OK
    assert f"removed {len(orphans)} orphaned staged file(s)" in capsys.readouterr().out
    after = state(table)
    assert staged_files(table) == [] and not run_dir.exists()
    assert after.snapshot_id == before.snapshot_id and after.files == before.files
    assert all(Path(resolve(p)[1]).is_file() for p in after.files), "cleanup removed a live data file"
    assert after.rows.equals(before.rows)


def test_staged_output_failing_verification_is_not_committed(demo_home, in_process_job, monkeypatch):
    """The default verifier (layout rules, then the GX suites) refuses a layout the spec does not intend:
    here the spec wants `l_shipdate` DESCENDING pages while the sort is ascending. Nothing is committed,
    the staged files are removed, and the failing expectation is visible in the Data Docs."""
    from layout.verify.rules import VerificationFailed

    monkeypatch.setenv("LAKESORT_REPORT_DIR", str(demo_home / "reports"))
    table = load_table("demo.lineitem")
    before = state(table)
    spec = demo_spec(verify={"boundary_order": {"l_shipdate": "DESCENDING"}})
    with pytest.raises(VerificationFailed) as info:
        compact("demo.lineitem", spec=spec, partitions=MONTHS)
    assert ("boundary_order" in str(info.value)
            or any(f.rule == "boundary_order" for f in info.value.report.findings))
    assert_unchanged(table, before)
    docs = demo_home / "reports" / "gx" / "gx-data-docs"
    html = "\n".join(p.read_text(errors="replace") for p in docs.rglob("*.html"))
    assert "boundary_order" in html and "DESCENDING" in html, "the failing expectation shows in the Data Docs"
