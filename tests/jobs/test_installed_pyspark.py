"""The job's Python processes import the installed pyspark, not Spark's zip of its sources
(jobs/installed_pyspark):
which zips go (pure logic), the daemon's conf, and a real spark-submit of the job's own session whose driver
and Python workers import pyspark from the installed package and still run their tasks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

from layout.compaction.pipeline.submit import JOB, spark_submit_binary

# jobs/ is not a package: spark-submit puts the job's directory on sys.path, and so does this test.
if str(JOB.parent) not in sys.path:
    sys.path.insert(0, str(JOB.parent))
import installed_pyspark

SITE = "/venv/lib/python3.11/site-packages"
HOME = f"{SITE}/pyspark"
ZIP = f"{HOME}/python/lib/pyspark.zip"
PY4J = f"{HOME}/python/lib/py4j-0.10.9.9-src.zip"


def installed_as(packages: dict[str, tuple[str, str]]):
    return lambda name, rest: packages.get(name) if SITE in rest else None


def test_the_zips_go_when_the_installed_packages_are_their_code():
    path = [ZIP, PY4J, "/jobs", SITE]
    same = installed_as({"pyspark": (HOME, "4.2.0"), "py4j": (f"{SITE}/py4j", "0.10.9.9")})
    assert installed_pyspark.spark_zips_to_drop(path, same) == [ZIP, PY4J]


def test_the_zips_stay_for_another_spark_or_another_py4j_or_none_installed():
    other_home = ["/opt/spark/python/lib/pyspark.zip", "/opt/spark/python/lib/py4j-0.10.9.9-src.zip", SITE]
    same = installed_as({"pyspark": (HOME, "4.2.0"), "py4j": (f"{SITE}/py4j", "0.10.9.9")})
    assert installed_pyspark.spark_zips_to_drop(other_home, same) == [], "another Spark's sources stay"
    older_py4j = installed_as({"pyspark": (HOME, "4.2.0"), "py4j": (f"{SITE}/py4j", "0.10.9.7")})
    assert installed_pyspark.spark_zips_to_drop([ZIP, PY4J, SITE], older_py4j) == [ZIP], "py4j's zip stays"
    assert installed_pyspark.spark_zips_to_drop([ZIP, PY4J, SITE], installed_as({})) == [], (
        "nothing installed")
    no_py4j = installed_as({"pyspark": (HOME, "4.2.0")})
    assert installed_pyspark.spark_zips_to_drop([ZIP, PY4J, SITE], no_py4j) == [ZIP]
    # Entries that are not Spark's zips (the job's directory, a --py-files zip) are never touched.
    assert installed_pyspark.spark_zips_to_drop(["/work/layout.zip", "/jobs", SITE], same) == []


def test_the_daemon_is_set_for_local_masters_only_and_never_over_the_users():
    conf = installed_pyspark.daemon_conf("local[*]", {})
    assert conf == {"spark.python.daemon.module": "installed_pyspark",
                    "spark.executorEnv.PYTHONPATH": str(JOB.parent)}
    assert installed_pyspark.daemon_conf("local[2]", {"spark.executorEnv.PYTHONPATH": "/mine"}) == {
        "spark.python.daemon.module": "installed_pyspark",
        "spark.executorEnv.PYTHONPATH": os.pathsep.join(["/mine", str(JOB.parent)])}
    assert installed_pyspark.daemon_conf("spark://127.0.0.1:7077", {}) == {}
    assert installed_pyspark.daemon_conf("yarn", {}) == {}
    assert installed_pyspark.daemon_conf("local[*]", {"spark.python.daemon.module": "coverage_daemon"}) == {}


SCRIPT = '''
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("lakesort_job", sys.argv[1])
job = importlib.util.module_from_spec(spec)
spec.loader.exec_module(job)  # its first lines prefer the installed pyspark
import pyspark

spark = job.spark_session("lakesort-test-installed-pyspark")

def where(x):
    import pyspark
    return pyspark.__file__, x * x

got = spark.sparkContext.parallelize(range(8), 2).map(where).collect()
print("RESULT " + json.dumps({"driver": pyspark.__file__, "workers": [w for w, _ in got],
                              "squares": [s for _, s in got],
                              "daemon": spark.sparkContext.getConf().get("spark.python.daemon.module")}))
spark.stop()
'''


def test_the_jobs_driver_and_workers_import_the_installed_pyspark(spark, tmp_path):
    """A real spark-submit, as the job is submitted: jobs/compact.py's session; Spark puts pyspark.zip first
    on the PYTHONPATH of both the driver's Python and the workers'."""
    script = tmp_path / "where.py"
    script.write_text(SCRIPT)
    done = subprocess.run([spark_submit_binary(), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                           str(script), str(JOB)], capture_output=True, text=True, check=False, cwd=tmp_path,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable,
                               "PYSPARK_DRIVER_PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    got = json.loads(line.removeprefix("RESULT "))
    installed = find_spec("pyspark").origin
    assert got["daemon"] == "installed_pyspark"
    assert got["driver"] == installed, got
    assert set(got["workers"]) == {installed}, got
    assert got["squares"] == [x * x for x in range(8)]
    assert Path(installed).parent.joinpath("python", "lib", "pyspark.zip").is_file(), (
        "the zip Spark puts first")


def test_the_test_sessions_workers_are_forked_by_the_same_daemon(spark):
    """tests/conftest.py's session runs the job's daemon too, so the in-process job's Python tasks run as
    under spark-submit."""

    def where(_):
        import pyspark

        return pyspark.__file__

    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == "installed_pyspark"
    assert (set(spark.sparkContext.parallelize(range(4), 2).map(where).collect())
            == {find_spec("pyspark").origin})
