"""`lakesort compact`: plan the rewrite, run the Spark job, commit. The whole step from a terminal.

The Spark job runs through `spark-submit` (pyspark's own, beside this Python, or $SPARK_HOME's), in
local mode by default and on a cluster with `--master spark://host:7077` (or YARN, Kubernetes). The
`layout` package travels to executors as a `--py-files` zip, so a cluster needs only the same Python
dependencies (the locked environment), not this repository.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from layout.compaction.planner import RewritePlan
from layout.errors import ConfigError, InputError, LakesortError

if TYPE_CHECKING:
    from layout.compaction.steps import Trigger

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "jobs" / "compact.py"
TABLES_DIR = Path("dags") / "tables"


class CompactionFailed(LakesortError):
    """The Spark job failed; the table is unchanged and its staged files were removed."""


class FailedAfterCommit(LakesortError):
    """The rewrite was committed, then a later step (measuring) failed: exit 1, never 2, whatever the cause,
    because the table did change. The message says what was committed and what failed."""


@dataclass(frozen=True, slots=True)
class CompactResult:
    plan: RewritePlan
    snapshot_id: int | None
    files_before: int
    files_after: int
    files_removed: int
    files_added: int
    rows: int
    seconds: float

    @property
    def nothing_to_do(self) -> bool:
        return not self.plan.groups


def find_spec(table: str, tables_dir: Path | None = None):
    """The spec of `table` among `dags/tables/*.yaml` (or LAKESORT_TABLES_DIR).

    Each file is loaded on its own: a broken spec of another table is logged and does not stop this one.
    """
    from layout.spec import load_spec

    directory = tables_dir or Path(os.environ.get("LAKESORT_TABLES_DIR", TABLES_DIR))
    if not directory.is_dir():
        raise ConfigError(f"no table specs: {directory} is not a directory (pass --spec, or set LAKESORT_TABLES_DIR)")
    found, broken, known = [], [], []
    for path in sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()):
        try:
            spec = load_spec(path)
        except LakesortError as exc:
            broken.append(exc)
            continue
        known.append(spec.table)
        if spec.table == table:
            found.append(spec)
    if len(found) > 1:
        raise ConfigError(f"{found[1].source}: table: {table!r} is already specified in {found[0].source}; "
                          "keep one spec per table")
    if found:
        for exc in broken:
            log.warning("ignoring a broken table spec (it is not %s's): %s", table, exc)
        return found[0]
    if broken:
        raise ConfigError(f"no valid spec for table {table!r} in {directory}; broken spec(s), one may be "
                          "this table's:\n" + "\n".join(str(e) for e in broken))
    raise ConfigError(f"no spec for table {table!r} in {directory} (specs exist for: {', '.join(known) or 'none'}); "
                      f"add {directory}/<name>.yaml or pass --spec")


def spark_submit_binary() -> str:
    for candidate in (Path(sys.executable).with_name("spark-submit"),
                      Path(os.environ.get("SPARK_HOME", "/nonexistent")) / "bin" / "spark-submit"):
        if candidate.exists():
            return str(candidate)
    found = shutil.which("spark-submit")
    if not found:
        raise InputError("spark-submit not found: run `make setup` (pyspark installs it in .venv/bin) or set SPARK_HOME")
    return found


def layout_zip(directory: Path) -> Path:
    """The `layout` package as a zip for `--py-files`, so executors on a cluster can import it."""
    target = directory / "layout.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in (REPO / "layout").rglob("*.py"):
            zf.write(path, path.relative_to(REPO))
    return target


def submit(plan_path: Path, manifest_path: Path, *, master: str, name: str,
           conf: Mapping[str, str] | None = None, work_dir: Path, groups: Sequence[int] | None = None) -> None:
    """Run the compaction job with spark-submit; raise CompactionFailed with the log tail on failure."""
    cmd = [spark_submit_binary(), "--master", master, "--name", name, "--py-files", str(layout_zip(work_dir)),
           "--conf", "spark.sql.session.timeZone=UTC"]
    for key, value in (conf or {}).items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += [str(JOB), "--plan", str(plan_path), "--manifest", str(manifest_path)]
    if groups is not None:
        cmd += ["--groups", ",".join(str(g) for g in groups)]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    log.info("spark-submit --master %s %s", master, JOB.relative_to(REPO))
    started = time.perf_counter()
    log_path = work_dir / "spark-submit.log"
    with open(log_path, "w") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode != 0:
        raise CompactionFailed(f"the Spark job failed (exit {done.returncode}, log {log_path}):\n"
                               + _failure_summary(log_path.read_text(errors="replace")))
    log.info("Spark job finished in %.1fs", time.perf_counter() - started)


def check_inputs(plan: RewritePlan) -> None:
    """Open every input file's footer before any Spark work: a corrupt or missing file fails here, named,
    instead of deep inside an executor (about a millisecond per file). Files are opened through the
    table's FileIO with their paths exactly as the manifests record them, as the executors will."""
    import pyarrow.parquet as pq
    from pyiceberg.io import load_file_io

    from layout.errors import ParquetError

    io = load_file_io(dict(plan.io_properties), plan.metadata_location)
    for group in plan.groups:
        for f in group.inputs:
            try:
                with io.new_input(f.path).open() as stream:
                    rows = pq.read_metadata(stream).num_rows
            except FileNotFoundError as exc:
                raise ParquetError(f.path, "input file not found", hint="the table references a file that is "
                                   "gone; restore it or remove it from the table") from exc
            except Exception as exc:
                raise ParquetError(f.path, f"cannot read the Parquet footer ({exc})",
                                   hint="the file is corrupt or not Parquet; nothing was rewritten") from exc
            if rows != f.rows:
                raise ParquetError(f.path, f"the footer holds {rows} rows, the table's manifest {f.rows}",
                                   hint="the file changed after it was committed; nothing was rewritten")


def _failure_summary(log: str) -> str:
    """The lines that say what went wrong (exceptions and their causes), then the log's last lines."""
    lines = log.splitlines()
    causes = [ln.strip() for ln in lines if ("Exception" in ln or "Error" in ln) and not ln.lstrip().startswith("at ")]
    seen = list(dict.fromkeys(causes))[:8]
    return "\n".join([*seen, "...", *lines[-10:]])


def compact(
    table_id: str, *, spec=None, partitions: Sequence[str] | None = None, force: bool = False,
    master: str | None = None, spark_conf: Mapping[str, str] | None = None, work_dir: Path | None = None,
    verify=None, measure: bool = False, trigger: Trigger = "manual",
) -> CompactResult:
    """Plan, rewrite on Spark, verify and commit one table (`layout.compaction.steps`'s steps in one process);
    with `measure`, also measure the probes before and after. Nothing to do finishes fast and says so.

    `verify(manifest)` replaces the layout rules and GX (tests); it may raise to refuse the commit.
    The whole run holds the table's lease (`layout.compaction.lease`), the one the DAGs and `lakesort cleanup` take:
    another run on the table makes it fail with `TableBusy` before any work.
    """
    from layout.compaction.lease import LeaseOwner, table_lease

    spec = spec or find_spec(table_id)
    with table_lease(spec.table, LeaseOwner.cli()):
        return _compact(spec, partitions=partitions, force=force, master=master, spark_conf=spark_conf,
                        work_dir=work_dir, verify=verify, measure=measure, trigger=trigger)


def _compact(spec, *, partitions, force, master, spark_conf, work_dir, verify, measure, trigger) -> CompactResult:
    from layout.catalog import load_table
    from layout.compaction import steps as pipeline

    started = time.perf_counter()
    prepared = pipeline.prepare(spec.table, spec=spec, partitions=partitions, force=force, trigger=trigger,
                                work_dir=work_dir)
    plan = prepared.plan()
    if prepared.nothing_to_do:
        pipeline.record(prepared, "nothing-to-do")
        return CompactResult(plan, None, prepared.files_before, prepared.files_before, 0, 0, 0,
                             time.perf_counter() - started)
    master = master or os.environ.get("LAKESORT_SPARK_MASTER", "local[*]")
    try:
        for job in prepared.jobs:
            submit(Path(prepared.plan_path), Path(job.manifest_path), master=master,
                   name=f"lakesort-compact-{spec.table}", conf=spark_conf, work_dir=Path(prepared.work_dir),
                   groups=job.group_ids)
    except BaseException as exc:
        pipeline.abandon(prepared, f"spark: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        raise
    pipeline.verify(prepared, spec=spec, verifier=verify)
    result = pipeline.commit(prepared)
    if measure:
        try:
            pipeline.measure(prepared, result.snapshot_id, spec=spec)
        except Exception as exc:
            raise FailedAfterCommit(
                f"{spec.table}: committed snapshot {result.snapshot_id} ({result.files_removed} files -> "
                f"{result.files_added} files, {result.rows} rows); then measuring failed: {exc}. The table is "
                f"compacted; measure it again with `lakesort measure {spec.table}`") from exc
    files_after, _ = pipeline.live_totals(load_table(spec.table, spec.catalog))
    return CompactResult(plan, result.snapshot_id, prepared.files_before, files_after, result.files_removed,
                         result.files_added, result.rows, time.perf_counter() - started)


def report_dir() -> Path:
    """Where reports and GX Data Docs go: $LAKESORT_REPORT_DIR, default `.lakesort/reports`."""
    return Path(os.environ.get("LAKESORT_REPORT_DIR", ".lakesort/reports"))
