"""Which Spark runs the compaction job, and whether lakesort supports it: its home, its `spark-submit`, its
version. Refused before any work (exit 2) when the job cannot run on it.

The job runs on the cluster's own Spark 3.5, 4.0, 4.1 or 4.2. `$SPARK_HOME` names that Spark, as it does for
`spark-submit` itself (both pyspark's pip-installed script and a distribution's honour it), so lakesort runs
`$SPARK_HOME/bin/spark-submit` when it is set and its own pyspark's (the virtualenv's, 4.2) when it is not.
The job's Python, driver and executors, stays lakesort's environment (`LAKESORT_SPARK_PYTHON`, else
`PYSPARK_PYTHON`, else this interpreter): pyarrow, pydantic, pyiceberg come from there, pyspark from the
Spark's own `python/lib/pyspark.zip`, which spark-submit puts first on the PYTHONPATH
(`jobs/installed_pyspark.py` keeps it there when it is another pyspark than the environment's).

The version is read from what the home holds, cheapest first: a distribution's `RELEASE` file, a pip
pyspark's `version.py`, the name of its `jars/spark-core_<scala>-<version>.jar`; only when none of these is
there (a wrapper script on PATH), from `spark-submit --version` (a JVM's start, about a second).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from layout.errors import InputError
from layout.models import Frozen

__all__ = ["SUPPORTED", "SparkInstall", "SparkUnsupported", "check_supported", "find_install",
           "parse_version", "refusal", "spark_submit_binary"]

# (major, minor) of the Sparks the job is tested on (tests/compaction/pipeline/test_spark_versions.py).
SUPPORTED = ((3, 5), (4, 0), (4, 1), (4, 2))
SUPPORTED_TEXT = ", ".join(f"{a}.{b}" for a, b in SUPPORTED)

# What each place says: `Spark 3.5.1 built for Hadoop 3.3.4`, `__version__: str = '4.2.0'`,
# `spark-core_2.13-4.0.5.jar`, spark-submit's banner `version 3.5.1`.
_PATTERNS = {
    "RELEASE": re.compile(r"\bSpark (\d+\.\d+[\w.+-]*)"),
    "version.py": re.compile(r"__version__[^=\n]*=\s*['\"](\d+\.\d+[^'\"]*)['\"]"),
    "jar": re.compile(r"^spark-core_\d+\.\d+-(\d+\.\d+[\w.+-]*?)\.jar$"),
    "--version": re.compile(r"\bversion (\d+\.\d+[\w.+-]*)"),
}


class SparkUnsupported(InputError):
    """The Spark that would run the job is one the job does not run on (or its version cannot be told)."""


class SparkInstall(Frozen):
    """The Spark a job would run on: its home (None: unknown, a wrapper script), the spark-submit that runs
    it, its version and where the version was read."""

    home: str | None
    spark_submit: str
    version: str
    source: str  # the file (or command) the version comes from

    @property
    def major_minor(self) -> tuple[int, int]:
        found = re.match(r"(\d+)\.(\d+)", self.version)
        assert found is not None  # every version read starts with major.minor (`_PATTERNS`)
        major, minor = found.groups()
        return int(major), int(minor)


def parse_version(kind: str, text: str) -> str | None:
    """The Spark version `text` states, read as a `kind` of place says it (`_PATTERNS`), or None."""
    found = _PATTERNS[kind].search(text.strip())
    return found.group(1) if found else None


def refusal(install: SparkInstall) -> str | None:
    """Why the job cannot run on `install`,
    naming the version found and the versions supported; None: it can."""
    if install.major_minor in SUPPORTED:
        return None
    where = f"Spark {install.version} (from {install.source})"
    if install.major_minor < SUPPORTED[0]:
        why = f"{where} is older than lakesort's compaction job supports"
    else:
        why = f"{where} is newer than lakesort's compaction job is tested on"
    return (f"{why}: it runs on Spark {SUPPORTED_TEXT}. Point SPARK_HOME at a Spark of those versions (or "
            "unset it: lakesort's own pyspark runs the job)")


def spark_submit_binary() -> str:
    """The spark-submit that runs the job: `$SPARK_HOME/bin/spark-submit` when SPARK_HOME is set (the Spark
    the user chose, as spark-submit itself would run it), else the one beside this interpreter (lakesort's
    own pyspark), else the one on PATH."""
    home = os.environ.get("SPARK_HOME")
    if home:
        candidate = Path(home) / "bin" / "spark-submit"
        if not candidate.is_file():
            raise InputError(f"SPARK_HOME={home} has no bin/spark-submit: point SPARK_HOME at a Spark "
                             f"({SUPPORTED_TEXT}), or unset it to run lakesort's own pyspark")
        return str(candidate)
    beside = Path(sys.executable).with_name("spark-submit")
    if beside.exists():
        return str(beside)
    found = shutil.which("spark-submit")
    if not found:
        raise InputError("spark-submit not found: run `make setup` (pyspark installs it in "
                         ".venv/bin) or set SPARK_HOME")
    return found


def find_install(spark_submit: str, spark_home: str | None = None) -> SparkInstall:
    """The Spark that `spark_submit` runs: `spark_home` ($SPARK_HOME) when given, as the script itself
    decides; else pip's script's (it sits beside `find_spark_home.py`) is the installed pyspark package, and a
    distribution's the directory above its `bin/`. Raises SparkUnsupported when no version can be read."""
    home = Path(spark_home) if spark_home else _home_of(Path(spark_submit))
    if home is not None:
        found = _version_in(home)
        if found is not None:
            return SparkInstall(home=str(home), spark_submit=spark_submit, version=found[0], source=found[1])
    try:
        done = subprocess.run([spark_submit, "--version"], capture_output=True, text=True,
                              timeout=120, check=False)
        version = parse_version("--version", done.stdout + done.stderr)
    except (OSError, subprocess.TimeoutExpired):
        version = None
    if version is None:
        raise SparkUnsupported(f"{spark_submit}: the Spark version cannot be told (no RELEASE file, pyspark "
                               f"version.py or spark-core jar under {home or 'its home'}, and `spark-submit "
                               f"--version` names none): set SPARK_HOME to a Spark {SUPPORTED_TEXT}")
    return SparkInstall(home=str(home) if home else None, spark_submit=spark_submit, version=version,
                        source=f"{spark_submit} --version")


def _home_of(spark_submit: Path) -> Path | None:
    real = spark_submit.resolve()
    if (real.parent / "find_spark_home.py").is_file():  # pip's script: the package of this environment
        spec = importlib.util.find_spec("pyspark")  # found, not imported (layout never imports pyspark)
        return Path(spec.origin).parent if spec is not None and spec.origin else None
    return real.parent.parent if real.parent.name == "bin" else None


def _version_in(home: Path) -> tuple[str, str] | None:
    """(version, the file it was read from) from what `home` holds, cheapest first; None:
    nothing there says."""
    for name, kind in (("RELEASE", "RELEASE"), ("version.py", "version.py")):
        path = home / name
        if path.is_file():
            version = parse_version(kind, path.read_text(errors="replace")[:4096])
            if version:
                return version, str(path)
    jars = home / "jars"
    if jars.is_dir():
        for jar in sorted(jars.glob("spark-core_*.jar")):
            version = parse_version("jar", jar.name)
            if version:
                return version, str(jar)
    return None


@functools.cache
def _checked(spark_submit: str, spark_home: str | None) -> SparkInstall:
    install = find_install(spark_submit, spark_home)
    reason = refusal(install)
    if reason:
        raise SparkUnsupported(reason)
    return install


def check_supported(spark_submit: str | None = None) -> SparkInstall:
    """The Spark the job would run on (`spark_submit`, default `spark_submit_binary()`, with $SPARK_HOME), or
    SparkUnsupported (exit 2) naming the version found and those supported. Cached per binary and home: the
    nightly DAG's prepare task asks once per table (giving the `spark-submit` on PATH:
    SparkSubmitOperator's)."""
    return _checked(spark_submit or spark_submit_binary(), os.environ.get("SPARK_HOME") or None)
