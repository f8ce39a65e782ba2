"""Shared pytest fixtures: one local SparkSession per test session, and the parquet-testing data."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# Where `parquet_testing` looks by default: a checkout of apache/parquet-testing beside the repo.
MIN_JAVA = 17

# Test modules import the writer helpers as `from writers import ...`, whatever pytest's import mode.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

pytest_plugins = ["tiers"]  # the tiers, the fast tier's guard and the suite's time budget (tests/tiers.py)


def _java_executable() -> str | None:
    """The `java` Spark will run: $JAVA_HOME/bin/java if JAVA_HOME is valid, else `java` on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("java")


def _java_major_version(java: str) -> int | None:
    """Major version from `java -version` (printed on stderr: `openjdk version "17.0.15" ...`)."""
    try:
        proc = subprocess.run([java, "-version"], check=False, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', proc.stderr + proc.stdout)
    if not match:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2):  # Java 8 and older: "1.8.0_412"
        major = int(match.group(2))
    return major


def _ensure_java_home(java: str) -> None:
    """Make JAVA_HOME unnecessary: if it is unset or invalid, derive it from the `java` on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return
    # /usr/bin/java is usually a chain of symlinks to <jdk>/bin/java.
    os.environ["JAVA_HOME"] = str(Path(java).resolve().parent.parent)


@pytest.fixture(scope="session")
def spark():
    """One SparkSession (local[2], no UI, UTC) for the whole test session; stopped at the end."""
    from pyspark.sql import SparkSession  # locked (the `pipeline` extra, which `make test` installs)

    # Java is a system package: without it the Spark tests skip on a developer's machine, but CI (env CI
    # set, as CI services do) installs it in .ci/run, so there a missing Java is a failure.
    missing_java = pytest.fail if os.environ.get("CI") else pytest.skip
    java = _java_executable()
    if java is None:
        missing_java(f"Spark tests need Java {MIN_JAVA}+: no `java` on PATH and no valid JAVA_HOME")
    major = _java_major_version(java)
    if major is None or major < MIN_JAVA:
        missing_java(f"Spark tests need Java {MIN_JAVA}+; `{java} -version` reports {major or 'unknown'}")
    _ensure_java_home(java)
    # Python workers must be this interpreter (the venv's), not whatever `python3` is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    builder = SparkSession.builder.master("local[2]")
    # The Python daemon a job on a local master runs (jobs/installed_pyspark.py): the in-process job's Python
    # tasks (pyiceberg's reader, stitching, curves) run in workers it forked, as they do under spark-submit.
    # (Not for speed: the session's workers are reused, and the lossless suite took as long either way.)
    if str(REPO_ROOT / "jobs") not in sys.path:
        sys.path.insert(0, str(REPO_ROOT / "jobs"))
    import installed_pyspark

    for key, value in installed_pyspark.daemon_conf("local[2]", {}).items():
        builder = builder.config(key, value)
    import object_store

    if object_store.missing() is None:  # the S3A connector, for the in-process jobs over the object-store bed
        builder = builder.config("spark.jars", object_store.s3a_jars())
    session = (
        builder
        .appName("lakesort-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
        # py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after pytest
        # closed the stream its capture handler writes to: a "--- Logging error ---" traceback otherwise.
        import logging

        logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def parquet_testing() -> Path:
    """The apache/parquet-testing checkout (env LAKESORT_PARQUET_TESTING overrides the default place)."""
    from writers import parquet_testing_dir

    override = os.environ.get("LAKESORT_PARQUET_TESTING")
    path = parquet_testing_dir()
    if not path.is_dir():
        shown = os.path.relpath(path, REPO_ROOT) if not override else str(path)
        pytest.skip(
            f"parquet-testing data not found at {shown}; set LAKESORT_PARQUET_TESTING "
            "or clone apache/parquet-testing beside the repo"
        )
    return path


@pytest.fixture
def iceberg_catalog(tmp_path, monkeypatch):
    """A SQLite Iceberg catalog under tmp_path, found (like `make demo`'s) through tmp_path/.pyiceberg.yaml,
    isolated from a developer's ~/.pyiceberg.yaml and the repository's demo catalog."""
    import pyiceberg.catalog
    from pyiceberg.utils.config import Config

    from layout.catalog import load_catalog, write_sql_catalog_config

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PYICEBERG_HOME", raising=False)
    # Run files and table leases of this test only.
    monkeypatch.setenv("LAKESORT_WORK_DIR", str(tmp_path / "work"))
    write_sql_catalog_config(tmp_path / ".lakesort", tmp_path)
    # pyiceberg reads its configuration once, at import: make it see this test's .pyiceberg.yaml.
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())
    return load_catalog()


# ---- Iceberg's own Spark implementation (tests/iceberg_bed.py, the test bed of `make testbed`) ----------


@pytest.fixture(scope="session")
def iceberg_spark(tmp_path_factory):
    """Iceberg Spark (4.1 with Iceberg's runtime) over one SQLite catalog for the whole session: started once
    (about 15 s). Tests share the catalog and keep apart by namespace (`bed`)."""
    import iceberg_bed

    from layout.catalog import write_sql_catalog_config

    why = iceberg_bed.missing()
    if why:
        # `make test` builds the bed: in CI a missing bed is a failure, on a developer's machine a skip.
        (pytest.fail if os.environ.get("CI") else pytest.skip)(why)
    java = _java_executable()
    if java:
        _ensure_java_home(java)
    home = tmp_path_factory.mktemp("iceberg-bed")
    write_sql_catalog_config(home, home)
    from pyiceberg.catalog.sql import SqlCatalog

    # pyiceberg creates the catalog's tables (its schema is the one Iceberg's JdbcCatalog calls V1).
    SqlCatalog(iceberg_bed.CATALOG, uri=f"sqlite:///{home / 'catalog.db'}",
               warehouse=f"file://{home / 'warehouse'}")
    bed = iceberg_bed.IcebergSpark(home / "catalog.db", f"file://{home / 'warehouse'}", scratch=home)
    try:
        yield bed
    finally:
        bed.close()


class Bed:
    """A test's view of the bed: Iceberg Spark, pyiceberg's catalog on the same file, the test's namespace."""

    def __init__(self, spark, catalog, namespace: str) -> None:
        self.spark, self.catalog, self.ns = spark, catalog, namespace

    def name(self, table: str) -> str:
        return f"{self.ns}.{table}"


@pytest.fixture
def bed(iceberg_spark, request, tmp_path, monkeypatch, registry):
    """pyiceberg's catalog pointed at the bed's catalog file (as `iceberg_catalog` does for a fresh one), the
    registry of `registry`, and a namespace of this test's own in both implementations."""
    import hashlib

    import pyiceberg.catalog
    from pyiceberg.utils.config import Config

    from layout.catalog import load_catalog, write_sql_catalog_config

    home = iceberg_spark.scratch
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PYICEBERG_HOME", raising=False)
    write_sql_catalog_config(home, tmp_path)
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())
    namespace = "t_" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:10]
    iceberg_spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    return Bed(iceberg_spark, load_catalog(), namespace)


# ---- a small partitioned table in the registry (the CLI, the run steps and the DAGs' tasks use it) ----

EVENTS_SPEC = """\
table: t.events
catalog: lakesort
owner: {name: Test Team, email: test@example.com}
sort: {keys: [{column: d}, {column: k}]}
target_file_size: 1MiB
small_file_size: 512KiB
"""


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """A table registry holding t.events' spec, with the work and report directories under tmp_path."""
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "events.yaml").write_text(EVENTS_SPEC)
    monkeypatch.setenv("LAKESORT_TABLES_DIR", str(tables))
    monkeypatch.setenv("LAKESORT_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setenv("LAKESORT_REPORT_DIR", str(tmp_path / "reports"))
    for name in ("SPARK_APPLICATION", "SPARK_PYTHON", "SPARK_CONF", "SHIP_LAYOUT"):
        monkeypatch.delenv(f"LAKESORT_{name}", raising=False)
    return tables


@pytest.fixture
def events(iceberg_catalog, registry):
    """t.events, partitioned by month of `d`, 1995-01-15..1995-04-15, in three appends (small files)."""
    import datetime as dt

    import pyarrow as pa
    from pyiceberg.transforms import MonthTransform

    iceberg_catalog.create_namespace("t")
    days = [dt.date(1995, 1, 15) + dt.timedelta(days=i) for i in range(91)]
    data = pa.table({"d": pa.array(days, pa.date32()), "k": pa.array(range(91), pa.int64()),
                     "v": pa.array([f"v{i}" for i in range(91)])})
    table = iceberg_catalog.create_table("t.events", schema=data.schema)
    with table.update_spec() as spec:
        spec.add_field("d", MonthTransform(), "d_month")
    for part in (data.slice(0, 30), data.slice(30, 30), data.slice(60)):
        table.append(part.cast(table.schema().as_arrow()))
    return table


# ---- the demo table the compaction tests rewrite (tests/demo_tables.py); the job run in process ------


@pytest.fixture(scope="session")
def tpch_cache(tmp_path_factory) -> Path:
    """lineitem at scale 0.01, generated once for every demo table of the session."""
    from layout.demo import generate_lineitem

    out = tmp_path_factory.mktemp("tpch")
    generate_lineitem(0.01, out)
    return out


@pytest.fixture(scope="session")
def pristine(tmp_path_factory, tpch_cache) -> Path:
    """The demo table, built once for the session (tests/compaction/ and tests/jobs/ restore it in place)."""
    from demo_tables import build_demo_at

    root = tmp_path_factory.mktemp("demo")
    build_demo_at(root, tpch_cache)
    shutil.copytree(root / ".lakesort", root / "pristine", ignore=shutil.ignore_patterns("tpch"))
    return root


@pytest.fixture
def demo_home(pristine, monkeypatch) -> Path:
    """The demo table as built, restored in place for this test; cwd and HOME point at its catalog.

    In place, because the SQLite catalog and the Iceberg metadata hold absolute paths: a copy elsewhere would
    still point at the original's files."""
    from demo_tables import isolate

    home = pristine / ".lakesort"
    for name in ("warehouse", "catalog.db"):
        target = home / name
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    shutil.copytree(pristine / "pristine", home, dirs_exist_ok=True)
    isolate(monkeypatch, pristine)
    return pristine


@pytest.fixture(scope="module")
def job():
    """The Spark job (jobs/compact.py), loaded as spark-submit would run it."""
    from lossless import load_job

    return load_job()


@pytest.fixture
def in_process_job(spark, job, monkeypatch) -> list:
    """`layout.compaction.pipeline.driver.submit` runs the job's own functions on the in-process session;
    returns the plans run (`RewritePlan`s)."""
    import layout.compaction.pipeline.driver
    from layout.compaction.planning.planner import RewritePlan

    runs: list[RewritePlan] = []

    def submit(plan_path, manifest_path, *, master, name, conf=None, work_dir, groups=None):
        plan = RewritePlan.from_json(Path(plan_path).read_text())
        chosen = [g for g in plan.groups if groups is None or g.group_id in groups]
        staged = job.compact_groups(spark, plan, chosen)
        job.write_manifest(spark, plan, staged, str(manifest_path), 0.0)
        runs.append(plan)

    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", submit)
    return runs


# ---- the object-store bed (tests/object_store.py): S3 behind a counting proxy, Iceberg's REST catalog ------


@pytest.fixture(scope="session")
def object_store(tmp_path_factory):
    """moto's S3 server behind testbed/s3_front.py, for the whole session (bucket `warehouse`)."""
    import object_store as bed

    why = bed.missing()
    if why:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(why)
    store = bed.start_object_store(tmp_path_factory.mktemp("object-store"))
    try:
        yield store
    finally:
        store.stop()


@pytest.fixture(scope="session")
def rest_catalog(object_store, tmp_path_factory):
    """Iceberg's REST catalog server over the session's S3, vending its credentials per table."""
    import object_store as bed

    java = _java_executable()
    if java:
        _ensure_java_home(java)
    catalog = bed.start_rest_catalog(object_store, tmp_path_factory.mktemp("rest-catalog"))
    try:
        yield catalog
    finally:
        catalog.stop()


@pytest.fixture
def on_rest(rest_catalog, object_store, registry, tmp_path, monkeypatch):
    """lakesort configured as a user of the REST catalog would configure it: pyiceberg's PYICEBERG_CATALOG__*
    variables (URI, S3 endpoint and region; no keys: the catalog vends them), Spark with the S3A jars, and no
    `.pyiceberg.yaml` anywhere it looks. The request log and faults are reset for the test."""
    import object_store as bed
    import pyiceberg.catalog
    from pyiceberg.utils.config import Config

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PYICEBERG_HOME", raising=False)
    for key in [k for k in os.environ if k.startswith(("PYICEBERG_CATALOG__", "AWS_"))]:
        monkeypatch.delenv(key)
    for key, value in rest_catalog.environment().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PYICEBERG_DEFAULT_CATALOG", bed.CATALOG)
    # A path opened without the table's settings would go to AWS itself: send it to the front instead (which
    # refuses it, unsigned by the vended key), so that such a bug fails here and nothing leaves 127.0.0.1.
    monkeypatch.setenv("AWS_ENDPOINT_URL", object_store.endpoint)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("LAKESORT_SPARK_CONF", f'{{"spark.jars": "{bed.s3a_jars()}"}}')
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())
    object_store.reset()
    return rest_catalog


@pytest.fixture
def rest_iceberg_catalog(on_rest, tmp_path, monkeypatch):
    """`iceberg_catalog`, but the session's REST catalog over S3: the tests written for the SQL catalog run on
    it unchanged. The namespaces a test creates are dropped after it (the catalog lives for the session)."""
    from layout.catalog import load_catalog

    monkeypatch.setenv("LAKESORT_WORK_DIR", str(tmp_path / "work"))
    catalog = load_catalog()
    before = {ns for ns in catalog.list_namespaces()}
    yield catalog
    for namespace in set(catalog.list_namespaces()) - before:
        for identifier in catalog.list_tables(namespace):
            catalog.drop_table(identifier)
        catalog.drop_namespace(namespace)
