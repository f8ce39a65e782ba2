"""The Spark driver JVM's class-data archive (AppCDS): the classes a compaction loads, stored once in the form
the JVM maps into memory, so that each job's JVM starts without parsing and verifying them from the jars.

A job's JVM spends seconds of CPU loading Spark's classes before its first task. TPC-H SF1 by month, on two
cores, alternating runs: the compaction job's start-up and stop (its wall time minus its own clock) took
8.5-10.4 s without an archive and 6.3-8.0 s with one (three runs each), of a 45-60 s job; the benchmark's
plain Spark sort 7.7-9.1 s and 5.0 s (two runs each). `lakesort spark-archive` (run by `make setup`) builds
the archive by running a small job (`jobs/warm_classes.py`) that does what a compaction does, with the JVM's
`-XX:ArchiveClassesAtExit`; every job then starts with `-XX:SharedArchiveFile` (`java_options`) while the
archive exists and LAKESORT_SPARK_CLASS_ARCHIVE is on.

The archive lives in this environment (`<venv>/share/lakesort/`), named for what it depends on: the Java
runtime and Spark's jars (those of $SPARK_HOME when it is set: the Spark the job runs on). Another Java or
Spark (a new lock, a new JDK, another SPARK_HOME) names another file, so a stale archive is never used, nor
one built for another Spark; the JVM checks it too, and starts without it (-Xshare:auto) when anything
differs, such as a cluster-mode driver on a machine without the file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from layout.errors import LakesortError
from layout.settings import settings

__all__ = ["ArchiveFailed", "archive_path", "build_archive", "java_options", "with_java_options"]

log = logging.getLogger(__name__)

ARCHIVE_DIR = Path(sys.prefix) / "share" / "lakesort"
WARM_JOB = Path(__file__).resolve().parents[3] / "jobs" / "warm_classes.py"
DRIVER_OPTIONS = "spark.driver.extraJavaOptions"


class ArchiveFailed(LakesortError):
    """Building the class archive failed (the jobs run as before, without it)."""


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def _spark_jars() -> Path | None:
    """The jars of the Spark the jobs run on: $SPARK_HOME's when it is set (the job's spark-submit is then
    its: `spark_home.spark_submit_binary`), else this environment's pyspark's. The archive is named for them,
    so an archive built for one Spark is never handed to another Spark's JVM."""
    home = os.environ.get("SPARK_HOME")
    if home:
        jars = Path(home).resolve() / "jars"
        return jars if jars.is_dir() else None
    # Found, not imported: `layout` never imports pyspark (tests/test_architecture.py).
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    jars = Path(spec.origin).parent / "jars"
    return jars if jars.is_dir() else None


def archive_path(directory: Path | None = None) -> Path | None:
    """Where the archive of this Java and these Spark jars is (or would be); None without Java or Spark."""
    java, jars = _java(), _spark_jars()
    if java is None or jars is None:
        return None
    key = hashlib.sha256()
    for path in [java, *sorted(jars.glob("*.jar"))]:
        stat = path.stat()
        key.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return (directory or ARCHIVE_DIR) / f"spark-classes-{key.hexdigest()[:16]}.jsa"


def java_options(directory: Path | None = None) -> str | None:
    """The driver JVM's options that start it from the archive; None when there is none or it is off."""
    if not settings().spark_class_archive:
        return None
    path = archive_path(directory)
    if path is None or not path.is_file():
        return None
    option = f"-XX:SharedArchiveFile={path}"
    # Spark splits the Java options as a shell would: a path with a space is quoted.
    return f'"{option}" -Xshare:auto' if " " in option else f"{option} -Xshare:auto"


def with_java_options(conf: Mapping[str, str], options: str | None) -> dict[str, str]:
    """`conf` with `options` added to the driver's Java options (after the user's own, which stay)."""
    merged = dict(conf)
    if options:
        merged[DRIVER_OPTIONS] = (f"{merged[DRIVER_OPTIONS]} {options}" if merged.get(DRIVER_OPTIONS)
                                  else options)
    return merged


def build_archive(*, spark_submit: str, directory: Path | None = None, force: bool = False) -> Path:
    """Build the archive by running `jobs/warm_classes.py` once with the JVM dumping the classes it loaded
    (about 40 s on two cores, most of it the dump). Written under a temporary name and renamed, so that a job
    never sees half an archive. `spark_submit`: the binary
    (`layout.compaction.pipeline.spark_home.spark_submit_binary`). Returns its path;
    raises ArchiveFailed with the log's tail."""
    path = archive_path(directory)
    if path is None:
        raise ArchiveFailed("no Java or no Spark to build a class archive for: run `make setup`")
    if path.is_file() and not force:
        log.info("Spark class archive up to date: %s", path)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    work = path.parent / f".warm-{uuid.uuid4().hex[:8]}"
    cmd = [spark_submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--conf", f"{DRIVER_OPTIONS}=-XX:ArchiveClassesAtExit={partial}", str(WARM_JOB), str(work)]
    started = time.perf_counter()
    log.info("building the Spark class archive: %s", " ".join(cmd))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              env={**os.environ, "PYSPARK_PYTHON": sys.executable,
                                   "PYSPARK_DRIVER_PYTHON": sys.executable})
        if done.returncode != 0 or not partial.is_file():
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
            raise ArchiveFailed(f"the class archive's job failed (exit {done.returncode}); jobs run without "
                                f"an archive. Its output ends:\n{tail}")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    for stale in path.parent.glob("spark-classes-*.jsa"):
        if stale != path:  # another Java or Spark's: never used again
            stale.unlink(missing_ok=True)
    log.info("Spark class archive built in %.1fs: %s (%.0f MiB)", time.perf_counter() - started, path,
             path.stat().st_size / 2**20)
    return path
