"""lakesort_nightly under `airflow dags test` on S3 behind Iceberg's REST catalog, then every CLI command.

The table lives in the object-store bed (tests/object_store.py): its files on moto's S3 behind the counting
front, its metadata through Iceberg's REST catalog server, which vends the S3 credentials with each table.
lakesort is configured as a user would configure it for such a catalog: the catalog's URI and the S3 endpoint
and region in pyiceberg's variables, Spark with the S3A jars, and no keys anywhere. The front refuses every
request signed with another key, so a passing run proves that the vended credentials reached the planner, the
Spark driver and its executors (S3A and pyarrow), verification, the commit, maintenance and measurement.

Then the secret is searched for in everything the run wrote down: the `airflow dags test` output and task
logs, Airflow's database (XComs, rendered fields), the work directory (plans, staged-output manifests, run
files, spark-submit logs), the reports, and lakesort's own tables in the catalog.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from dag_harness import MONTHS, VENV_BIN, Lake, create_table, lineitem, run_dag

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TABLE = "s3night.lineitem"
SPEC = Path(__file__).resolve().parents[2] / "dags" / "tables" / "demo_lineitem.yaml"


@pytest.fixture(scope="module")
def s3_lake(rest_catalog, object_store, tmp_path_factory) -> Lake:
    """The DAG tests' lake (three months of lineitem in four appends), created through the REST catalog."""
    from pyiceberg.catalog import load_catalog

    root = tmp_path_factory.mktemp("s3-lake")
    catalog = load_catalog("lakesort", **rest_catalog.properties())
    catalog.create_namespace_if_not_exists("s3night")
    table = create_table(catalog, TABLE, lineitem(root, MONTHS), batches=4, seed=42)
    assert table.location().startswith("s3://warehouse/")
    tables = root / "tables"
    tables.mkdir()
    (tables / "s3night_lineitem.yaml").write_text(
        SPEC.read_text().replace("table: demo.lineitem", f"table: {TABLE}", 1)
    )
    return Lake(root, catalog, table.scan().to_arrow(), "")


def _env(rest_catalog, object_store) -> dict[str, str]:
    """What a user sets: the catalog (pyiceberg's variables) and the S3A jars; no `.pyiceberg.yaml`."""
    import object_store as bed
    from dag_harness import airflow_env

    base = json.loads(airflow_env(Path("."))["LAKESORT_SPARK_CONF"])
    return {**rest_catalog.environment(), "PYICEBERG_DEFAULT_CATALOG": bed.CATALOG,
            "LAKESORT_SPARK_CONF": json.dumps({**base, "spark.jars": bed.s3a_jars()}),
            # A path opened without the table's settings would go to AWS:
            # to the front instead, which refuses it.
            "AWS_ENDPOINT_URL": object_store.endpoint, "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture(scope="module")
def nightly(airflow_home, s3_lake, rest_catalog, object_store, spark_available):
    object_store.reset()
    before = s3_lake.table(TABLE)
    run = run_dag(airflow_home, s3_lake, "lakesort_nightly",
                  env=_env(rest_catalog, object_store), timeout=900)
    print(f"lakesort_nightly on S3: {run.seconds:.1f}s, requests {dict(object_store.counts())}")
    return run, before, object_store.log()


def _rows(table):
    from lossless import by_field_id

    return by_field_id(table)


def test_the_nightly_dag_compacts_a_table_on_s3(nightly, s3_lake):
    from lossless import assert_same, by_field_id

    run, before, log = nightly
    assert run.returncode == 0, run.output[-4000:]
    for task_id in ("list_tables", "planned", "spark_jobs", "report"):
        assert run.state_of(task_id) == "success", (task_id, run.tasks)
    assert run.state_of("prepare", TABLE) == "success", run.tasks
    assert set(run.states("compact").values()) == {"success"}
    for step in ("table.verify", "table.commit", "table.measure"):
        assert run.states(step) == {TABLE: "success"}, step
    assert run.states("maintain") == {TABLE: "success"}

    table = s3_lake.table(TABLE)
    snapshot = table.current_snapshot()
    assert snapshot.snapshot_id != before.current_snapshot().snapshot_id
    assert "lakesort.run-id" in snapshot.summary.additional_properties
    assert_same(by_field_id(before), by_field_id(table))
    for old in before.snapshots():  # every snapshot of the history still reads, with its own rows
        assert_same(by_field_id(before, old.snapshot_id), by_field_id(table, old.snapshot_id))
    files = [t.file.file_path for t in table.scan().plan_files()]
    assert len(files) == 3 and all(f.startswith(f"{table.location()}/data/lakesort-staging/") for f in files)

    # Every request signed with the key the catalog vended; the job wrote and read through S3A.
    assert not [r for r in log if r["status"] == 403]
    assert ({r["access_key"] for r in log}
            == {s3_lake.catalog.load_table(TABLE).io.properties["s3.access-key-id"]})
    assert not [r["key"] for r in log if r["kind"] == "COPY"], "files renamed (copied): no magic committer"
    staged = [r for r in log if "/lakesort-staging/" in r["key"]]
    assert any(r["kind"] == "PUT" for r in staged) and any(r["kind"] == "GET" for r in staged)


def _everything_written(run, s3_lake, airflow_home) -> dict[str, bytes]:
    """Every place a run writes something down, by name: outputs, logs, Airflow's DB, run files, reports."""
    found = {"airflow dags test output": run.output.encode()}
    for root in (airflow_home, s3_lake.root):
        for path in Path(root).rglob("*"):
            if path.is_file() and path.stat().st_size < 200_000_000:
                found[str(path)] = path.read_bytes()
    return found


def test_no_secret_is_written_down(nightly, s3_lake, airflow_home, object_store):
    run, _, _ = nightly
    written = _everything_written(run, s3_lake, airflow_home)
    assert any("spark-submit" in name or b"spark-submit" in data for name, data in written.items())
    assert any(name.endswith("plan.json") for name in written), "no plan was written: nothing searched"
    for secret in (object_store.secret_key, object_store.session_token):
        leaks = [name for name, data in written.items() if secret.encode() in data]
        assert not leaks, f"a vended secret is written in: {leaks}"
    # lakesort's own tables (runs, metrics, maintenance) in the catalog: their rows as pyiceberg reads them.
    catalog = s3_lake.catalog
    for identifier in catalog.list_tables("lakesort"):
        text = catalog.load_table(identifier).scan().to_arrow().to_pandas().to_json()
        assert object_store.secret_key not in text and object_store.session_token not in text, identifier


CLI = [
    ["inspect", TABLE, "--summary"],
    ["plan", TABLE, "--where", "l_shipdate = DATE '1995-06-15'"],
    ["plan-rewrite", TABLE],
    ["verify", TABLE],
    ["measure", TABLE, "--no-record"],
    ["advise", TABLE, "--no-record", "--sample", "20000"],
    ["cleanup", TABLE, "--dry-run"],
    ["expire", TABLE, "--dry-run"],
    ["housekeep", "--dry-run"],
    ["report"],
]


def test_every_cli_command_on_s3(nightly, s3_lake, rest_catalog, object_store, tmp_path):
    """Each command a user runs against the table, configured only by the catalog's variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYICEBERG_", "LAKESORT_", "AWS_"))}
    env.update(_env(rest_catalog, object_store))
    env.update({"LAKESORT_TABLES_DIR": str(s3_lake.root / "tables"),
                "LAKESORT_WORK_DIR": str(tmp_path / "work"), "LAKESORT_REPORT_DIR": str(tmp_path / "reports"),
                "HOME": str(tmp_path)})
    outputs, data_gets = {}, {}
    for args in CLI:
        object_store.reset()
        done = subprocess.run([str(VENV_BIN / "lakesort"), *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=600, check=False)
        outputs[" ".join(args)] = done.stdout + done.stderr
        assert done.returncode in (0, 1), (
            f"lakesort {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
        for secret in (object_store.secret_key, object_store.session_token):
            assert secret not in done.stdout + done.stderr, args
        gets = Counter(r["key"] for r in object_store.log()
                       if r["kind"] == "GET" and r["key"].endswith(".parquet"))
        data_gets[args[0]] = max(gets.values(), default=0)
    # The layout rules read a file's footer, then its page indexes and bloom filters in one coalesced read.
    assert data_gets["verify"] <= 2, data_gets
    assert not [r for r in object_store.log() if r["status"] == 403]
