"""The job's Python processes import pyspark from the installed package, not from the zip of its sources that
Spark puts first on their PYTHONPATH.

spark-submit starts the driver's Python, and Spark starts its Python daemon (which forks the workers), with
$SPARK_HOME/python/lib/pyspark.zip and py4j's zip first on PYTHONPATH. The zips hold sources only, and Python
cannot cache bytecode inside a zip, so every one of those processes compiles what it imports of pyspark:
jobs/compact.py's imports took 0.92 s from the zip against 0.47 s from the installed package, and a Python
daemon's boot 0.70 s against 0.17 s (three runs each). When pyspark is installed as a package (pip, the lock
file), $SPARK_HOME is that package and the zips are its own sources, so leaving them out of sys.path changes
nothing but the compiling; when $SPARK_HOME is another Spark (a distribution beside a pip pyspark), or the
installed py4j is not the zip's version, the zip stays as Spark put it.

Two uses:
- `prefer_installed()` at the top of a driver script, before anything imports pyspark;
- this module as Spark's Python daemon (`daemon_conf`: `spark.python.daemon.module`, with this directory on
  the executors' PYTHONPATH), for local masters only: their executors run in the driver's JVM, on this
  machine, and find this file. It does the same, then runs pyspark's own daemon, which forks the workers (they
  inherit its sys.path).

Standard library only: it runs before pyspark is importable the fast way.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable  # no cost: importlib.metadata imports it anyway
from importlib import metadata
from importlib.machinery import PathFinder

DAEMON_MODULE = "installed_pyspark"
DAEMON_CONF = "spark.python.daemon.module"
EXECUTOR_PYTHONPATH = "spark.executorEnv.PYTHONPATH"


def prefer_installed() -> list[str]:
    """Drop Spark's zips of pyspark and py4j from sys.path where the installed packages are the same code
    (`spark_zips_to_drop`); returns the entries dropped. Nothing changes once pyspark is imported."""
    if "pyspark" in sys.modules:
        return []
    dropped = spark_zips_to_drop(sys.path, _installed)
    sys.path[:] = [p for p in sys.path if p not in dropped]
    return dropped


def spark_zips_to_drop(path: list[str],
                       installed: Callable[[str, list[str]], tuple[str, str] | None]) -> list[str]:
    """The entries of `path` that are Spark's zips of pyspark or py4j with the same code
    installed as a package:
    pyspark.zip under the installed pyspark's own directory (so $SPARK_HOME is that package), and py4j's
    `py4j-<version>-src.zip` where the installed py4j has that version. `installed(name, rest)` gives the
    package's directory and version as found on `rest` (the path without the zips), or None."""
    zips = [p for p in path if _zip_kind(p)]
    rest = [p for p in path if p not in zips]
    pyspark = installed("pyspark", rest)
    if pyspark is None:
        return []
    home = os.path.realpath(pyspark[0]) + os.sep
    py4j = installed("py4j", rest)
    same = {"pyspark"} | ({f"py4j-{py4j[1]}"} if py4j is not None else set())
    # Not under the installed pyspark: another Spark's sources, which belong to its JVM side.
    drop = [e for e in zips if _zip_kind(e) in same and os.path.realpath(e).startswith(home)]
    # py4j's zip alone would leave the installed pyspark with another py4j: both go, or neither
    return drop if any(_zip_kind(e) == "pyspark" for e in drop) else []


def _zip_kind(entry: str) -> str | None:
    """'pyspark' for Spark's pyspark.zip, 'py4j-<version>' for its py4j zip, else None."""
    name = os.path.basename(entry)
    if os.path.basename(os.path.dirname(entry)) != "lib":
        return None
    if name == "pyspark.zip":
        return "pyspark"
    if name.startswith("py4j-") and name.endswith("-src.zip"):
        return name.removesuffix("-src.zip")
    return None


def _installed(name: str, path: list[str]) -> tuple[str, str] | None:
    spec = PathFinder.find_spec(name, path)
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        version = metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
    return next(iter(spec.submodule_search_locations)), version


def daemon_conf(master: str, conf: dict[str, str]) -> dict[str, str]:
    """The Spark conf that makes this module the Python daemon, for a local `master` and unless `conf` names a
    daemon already; the executors' PYTHONPATH keeps what `conf` gives it and gets this directory after it."""
    if not master.startswith("local") or conf.get(DAEMON_CONF):
        return {}
    here = os.path.dirname(os.path.abspath(__file__))
    pythonpath = os.pathsep.join(p for p in (conf.get(EXECUTOR_PYTHONPATH), here) if p)
    return {DAEMON_CONF: DAEMON_MODULE, EXECUTOR_PYTHONPATH: pythonpath}


if __name__ == "__main__":  # Spark's Python daemon: `python -m installed_pyspark pyspark.worker`
    prefer_installed()
    from pyspark.daemon import manager

    manager()
