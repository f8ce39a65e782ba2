"""Fixtures of the DAG tests: an Airflow home (SQLite) and a small lake (helpers in dag_harness.py).

The lake is a SQLite Iceberg catalog in a temporary directory with two registered tables:
`demo.lineitem` (TPC-H lineitem at scale 0.01, three months of it, appended in four shuffled batches:
the layout the demo builds, on 3 partitions instead of 83 so that the Spark job takes seconds) and
`demo.broken` (one month in two files, one of them truncated: a corrupt input).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

for _extra in (Path(__file__).resolve().parent, Path(__file__).resolve().parents[2] / "dags"):
    if str(_extra) not in sys.path:  # dag_harness (tests) and lakesort_common (DAG files, helper tests)
        sys.path.insert(0, str(_extra))

# Airflow imported in this process (the DagBag and hook tests) must not touch ~/airflow: a private home.
if "airflow" not in sys.modules:
    os.environ["AIRFLOW_HOME"] = _PRIVATE_HOME = tempfile.mkdtemp(prefix="lakesort-airflow-tests-")
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    atexit.register(shutil.rmtree, _PRIVATE_HOME, ignore_errors=True)

from dag_harness import (
    BROKEN_MONTH,
    DAGS,
    MONTHS,
    VENV_BIN,
    Lake,
    airflow_env,
    create_table,
    java_available,
    lineitem,
)


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory) -> Path:
    """An initialised Airflow home (SQLite metadata DB, the `lakesort` pool), once per test session."""
    home = tmp_path_factory.mktemp("airflow")
    env = airflow_env(home)
    for cmd in (["db", "migrate"], ["pools", "set", "lakesort", "2", "lakesort Spark jobs"]):
        done = subprocess.run([str(VENV_BIN / "airflow"), *cmd], env=env, cwd=home, capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, (
            f"airflow {' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return home


@pytest.fixture(scope="session")
def lake(tmp_path_factory) -> Lake:
    from pyiceberg.catalog import load_catalog

    from layout.catalog import write_sql_catalog_config

    root = tmp_path_factory.mktemp("lake")
    write_sql_catalog_config(root / "home", root)  # root/.pyiceberg.yaml, for the airflow subprocesses
    home = (root / "home").resolve()
    catalog = load_catalog("lakesort", type="sql", uri=f"sqlite:///{home / 'catalog.db'}",
                           warehouse=f"file://{home / 'warehouse'}")
    catalog.create_namespace("demo")
    table = create_table(catalog, "demo.lineitem", lineitem(root, MONTHS), batches=4, seed=42)
    rows = table.scan().to_arrow()
    broken = create_table(catalog, "demo.broken", lineitem(root, (BROKEN_MONTH,)), batches=2, seed=7)
    victim = min(t.file.file_path for t in broken.scan().plan_files())
    path = Path(victim.removeprefix("file://"))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a torn write: no footer any more

    tables = root / "tables"
    tables.mkdir()
    spec = (DAGS / "tables" / "demo_lineitem.yaml").read_text()
    (tables / "demo_lineitem.yaml").write_text(spec)
    (tables / "demo_broken.yaml").write_text(spec.replace("table: demo.lineitem", "table: demo.broken", 1))
    return Lake(root, catalog, rows, victim)


@pytest.fixture(scope="session")
def spark_available():
    # pyspark is locked (the `pipeline` extra, which `make test` installs): its spark-submit must be there.
    assert (VENV_BIN / "spark-submit").exists(), "spark-submit is not installed beside this Python (pyspark)"
    # Java is a system package: a developer's machine without it skips these tests; CI (env CI set) installs
    # it in .ci/run, so there a missing Java fails them.
    if not java_available():
        (pytest.fail if os.environ.get("CI") else pytest.skip)(
            "the end-to-end DAG tests run Spark: they need Java 17+")
