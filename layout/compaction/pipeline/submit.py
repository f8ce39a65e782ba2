"""How a compaction's Spark job is submitted: the job file, its arguments, the `layout` zip, spark-submit.

One description (`SparkSubmission`) serves both callers, so they cannot drift apart: `lakesort compact`
runs `spark-submit` itself (`submit`), the DAGs hand the same description to Airflow's
SparkSubmitOperator (`operator_kwargs`). Both take the job file, Spark conf, executor Python and how
`layout` is shipped from `layout.settings`. The Spark job runs in local mode by default and on a cluster
with `--master spark://host:7077` (or YARN, Kubernetes). The `layout` package travels to executors as a
`--py-files` zip (`LAKESORT_SHIP_LAYOUT=zip`), so a cluster needs only the same Python dependencies (the
locked environment), not this repository; with `installed` the cluster's image has it. The Spark is
$SPARK_HOME's when it is set, else lakesort's own pyspark (`layout.compaction.pipeline.spark_home`, which
also refuses a Spark the job does not run on).

When the Spark conf runs openlineage-spark's listener (`spark.extraListeners`), the job's own OpenLineage
events are given a parent: `lakesort compact`'s run (`layout.lineage`: the parent and root confs, here), or in
a DAG the `compact` task (the Airflow OpenLineage provider's injection,
which SparkSubmitOperator does when asked).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from layout.compaction.pipeline.class_archive import java_options, with_java_options
from layout.compaction.pipeline.spark_home import spark_submit_binary
from layout.errors import LakesortError
from layout.lineage import ParentJob, spark_listener_enabled, spark_parent_conf
from layout.models import Frozen
from layout.settings import settings

if TYPE_CHECKING:
    from layout.compaction.pipeline.steps import PreparedRun

__all__ = ["BASE_CONF", "JOB", "LOCAL_CONF", "PROGRESS_CONF", "CompactionFailed", "SparkSubmission",
           "describe_job", "is_local", "job_arguments", "layout_zip", "operator_kwargs",
           "spark_submit_binary", "submit", "with_lineage_parent"]

log = logging.getLogger(__name__)
# The job logs its progress through this logger (`jobs/compaction/progress.py`'s LOGGER, the same name);
# `submit` relays those lines through a logger of the same name here.
PROGRESS_LOGGER = "lakesort.progress"
PROGRESS_CONF = "spark.lakesort.progress.interval"  # seconds between the job's progress lines; "0": none
_PROGRESS_MARKER = f" INFO {PROGRESS_LOGGER}: ".encode()
progress_log = logging.getLogger(PROGRESS_LOGGER)
RELAY_WAIT_SECONDS = 10.0

REPO = Path(__file__).resolve().parents[3]
JOB = REPO / "jobs" / "compact.py"
# Every job runs in UTC: timestamps are written as instants, and date partitions must not shift.
BASE_CONF = {"spark.sql.session.timeZone": "UTC"}
# A local master (`lakesort compact`'s default) serves nobody else: its driver, block manager and UI listen on
# the loopback interface only, not on every interface with no authentication. $LAKESORT_SPARK_CONF or the
# caller's conf may still say otherwise. Spark's UI binds to $SPARK_LOCAL_IP (no property names its address).
LOCAL_CONF = {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
LOCAL_ENV = {"SPARK_LOCAL_IP": "127.0.0.1"}
LAYOUT_ZIP = "layout.zip"


class CompactionFailed(LakesortError):
    """The Spark job failed; the table is unchanged and its staged files were removed."""


class SparkSubmission(Frozen):
    """One `spark-submit` of jobs/compact.py, as SparkSubmitOperator's arguments name its parts."""

    application: str  # the job file as the Spark driver sees it
    application_args: tuple[str, ...]
    name: str  # the Spark application's name (the UI, the cluster's logs, the mapped task's label)
    conf: dict[str, str]
    # PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON: one environment on driver and executors
    env_vars: dict[str, str]
    py_files: str | None = None  # the `layout` zip, unless the cluster has `layout` installed

    def operator_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of Airflow's SparkSubmitOperator (mapped: one dict per Spark application)."""
        kwargs: dict[str, Any] = {"application": self.application,
                                  "application_args": list(self.application_args), "name": self.name,
                                  "conf": dict(self.conf), "env_vars": dict(self.env_vars)}
        if self.py_files:
            kwargs["py_files"] = self.py_files
        if spark_listener_enabled(self.conf):
            # The provider's own injection (its `spark_inject_parent_job_info`, per operator): the parent is
            # the Airflow task, the root its DAG run. Without the provider, the operator only logs a warning.
            kwargs["openlineage_inject_parent_job_info"] = True
        return kwargs

    def command(self, *, binary: str, master: str) -> list[str]:
        """The spark-submit command line, in the order SparkSubmitHook builds it."""
        cmd = [binary, "--master", master]
        for key, value in self.conf.items():
            cmd += ["--conf", f"{key}={value}"]
        if self.py_files:
            cmd += ["--py-files", self.py_files]
        return [*cmd, "--name", self.name, self.application, *self.application_args]


def job_arguments(plan_path: str | Path, manifest_path: str | Path,
                  groups: Sequence[int] | None = None) -> list[str]:
    """The arguments of `jobs/compact.py` for one job (all the plan's groups when `groups` is None)."""
    args = ["--plan", str(plan_path), "--manifest", str(manifest_path)]
    if groups is not None:
        args += ["--groups", ",".join(str(g) for g in groups)]
    return args


def executor_python() -> str:
    """The Python of the job's driver and executors: $LAKESORT_SPARK_PYTHON, else $PYSPARK_PYTHON, else this
    interpreter (executors run the submitter's Python unless told otherwise; a cluster: the image's)."""
    return settings().spark_python or os.environ.get("PYSPARK_PYTHON") or sys.executable


def is_local(master: str | None) -> bool:
    """True for Spark's local masters (`local`, `local[4]`, `local[*, 2]`): nothing else connects to the
    driver."""
    return master is not None and (master == "local" or master.startswith("local["))


def describe_job(*, plan_path: str | Path, manifest_path: str | Path, groups: Sequence[int] | None, name: str,
                 work_dir: str | Path, conf: Mapping[str, str] | None = None,
                 master: str | None = None) -> SparkSubmission:
    """The one description of a Spark job; `conf` adds to (and overrides) BASE_CONF and $LAKESORT_SPARK_CONF.
    The driver's Java options get the class archive's
    (`layout.compaction.pipeline.class_archive`), when there is one. On a local `master`, LOCAL_CONF and
    LOCAL_ENV come first (the loopback interface only); None: the master is not known here (the DAGs' comes
    from their Spark connection).

    With LAKESORT_SHIP_LAYOUT=zip the run's `layout.zip` in `work_dir` is built when it is not there yet.
    """
    config = settings()
    python = executor_python()
    py_files = None
    if config.ship_layout == "zip":
        shipped = Path(work_dir) / LAYOUT_ZIP
        py_files = str(shipped if shipped.is_file() else layout_zip(Path(work_dir)))
    local = is_local(master)
    base = {**BASE_CONF, **(LOCAL_CONF if local else {})}
    # a SPARK_LOCAL_IP of the caller's own is kept
    env = {**({k: v for k, v in LOCAL_ENV.items() if k not in os.environ} if local else {}),
           "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    return SparkSubmission(
        application=config.spark_application or str(JOB),
        application_args=tuple(job_arguments(plan_path, manifest_path, groups)),
        name=name, conf=with_java_options({**base, **config.spark_conf, **(conf or {})}, java_options()),
        env_vars=env, py_files=py_files,
    )


def with_lineage_parent(conf: Mapping[str, str] | None, parent: ParentJob) -> Mapping[str, str] | None:
    """`conf` (a job's extra conf, as `describe_job` takes it) with openlineage-spark's parent and root run
    confs naming `parent`, when the job's whole conf runs openlineage-spark's listener and names no parent
    itself (as the Airflow provider's injection does); otherwise `conf` as it is."""
    merged = {**BASE_CONF, **settings().spark_conf, **(conf or {})}
    if not spark_listener_enabled(merged) or any(k.startswith("spark.openlineage.parent") for k in merged):
        return conf
    return {**spark_parent_conf(parent), **(conf or {})}


def operator_kwargs(prepared: PreparedRun) -> list[dict[str, Any]]:
    """SparkSubmitOperator's arguments for every Spark job of a prepared run
    (what the DAGs' `compact` maps)."""
    if not shutil.which("spark-submit"):
        log.warning("spark-submit is not on this worker's PATH: the Spark tasks will fail (put the venv's "
                    "bin directory, %s, or $SPARK_HOME/bin on PATH)", Path(sys.executable).parent)
    return [describe_job(plan_path=prepared.plan_path, manifest_path=job.manifest_path, groups=job.group_ids,
                         name=f"lakesort-compact {prepared.table} {prepared.run_id} job {job.job_id}",
                         work_dir=prepared.work_dir).operator_kwargs()
            for job in prepared.jobs]


def layout_zip(directory: Path) -> Path:
    """The `layout` package as a zip for `--py-files`, so executors on a cluster can import it."""
    target = directory / LAYOUT_ZIP
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in (REPO / "layout").rglob("*.py"):
            zf.write(path, path.relative_to(REPO))
    return target


def submit(plan_path: Path, manifest_path: Path, *, master: str, name: str,
           conf: Mapping[str, str] | None = None, work_dir: Path,
           groups: Sequence[int] | None = None) -> None:
    """Run the compaction job with spark-submit (as `describe_job` describes it); raise CompactionFailed with
    the log tail on failure."""
    if settings().ship_layout == "zip":
        layout_zip(work_dir)  # fresh for this job: a reused work directory may hold an older zip
    job = describe_job(plan_path=plan_path, manifest_path=manifest_path, groups=groups, name=name,
                       work_dir=work_dir, conf=conf, master=master)
    cmd = job.command(binary=spark_submit_binary(), master=master)
    log.info("spark-submit --master %s %s", master, job.application)
    started = time.perf_counter()
    log_path = work_dir / "spark-submit.log"
    with open(log_path, "wb") as out:
        returncode = _run_relaying(cmd, out, env={**os.environ, **job.env_vars})
    if returncode != 0:
        raise CompactionFailed(f"the Spark job failed (exit {returncode}, log {log_path}):\n"
                               + failure_summary(log_path.read_text(errors="replace")))
    log.info("Spark job finished in %.1fs", time.perf_counter() - started)


def _run_relaying(cmd: Sequence[str], out: BinaryIO, *, env: Mapping[str, str]) -> int:
    """Run spark-submit with its output going to `out` as it comes, and the job's progress lines
    (`jobs/compaction/progress.py`) also to this process's log: `lakesort compact` shows them on stderr unless
    -q. The Airflow task needs none of this: SparkSubmitOperator logs every line spark-submit prints.

    Through a pipe read by a thread, so that spark-submit is still run by `subprocess.run` (which kills it
    when this process is interrupted)."""
    read_fd, write_fd = os.pipe()
    relay = threading.Thread(target=_relay, args=(os.fdopen(read_fd, "rb"), out), name="spark-submit-output",
                             daemon=True)
    relay.start()
    try:
        with os.fdopen(write_fd, "wb") as write_end:
            done = subprocess.run(cmd, stdout=write_end, stderr=subprocess.STDOUT, env=dict(env), check=False)
    finally:
        # The pipe ends once spark-submit and what it started have exited; a process left behind holding it
        # does not hold up the run.
        relay.join(timeout=RELAY_WAIT_SECONDS)
    return done.returncode


def _relay(stream: BinaryIO, out: BinaryIO) -> None:
    with stream:
        try:
            for raw in stream:  # lines as bytes, written as they came
                out.write(raw)
                line = progress_message(raw)
                if line is not None:
                    out.flush()
                    progress_log.info("%s", line)
        except ValueError:  # `out` closed: the run went on after RELAY_WAIT_SECONDS without the rest
            return


def progress_message(raw: bytes) -> str | None:
    """The message of one of the job's progress lines (logged as `<time> INFO lakesort.progress: <message>`),
    None for any other line."""
    _, marker, message = raw.partition(_PROGRESS_MARKER)
    return message.decode("utf-8", errors="replace").strip() if marker else None


def failure_summary(log_text: str) -> str:
    """The lines that say what went wrong (exceptions and their causes), then the log's last lines."""
    lines = log_text.splitlines()
    causes = [ln.strip() for ln in lines
              if ("Exception" in ln or "Error" in ln) and not ln.lstrip().startswith("at ")]
    seen = list(dict.fromkeys(causes))[:8]
    return "\n".join([*seen, "...", *lines[-10:]])
