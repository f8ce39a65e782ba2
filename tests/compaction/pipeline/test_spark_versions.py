"""The compaction job on each Spark it supports (3.5, 4.0, 4.1, 4.2), and the refusal of the others.

Each supported Spark compacts one small table through the real `lakesort compact` path (the driver's
`compact`, one `spark-submit` of that Spark's own `bin/`, local master, layout verification and commit):
partitioned by year, with a renamed column, an added column and two widened types, so that both of the job's
readers run (Spark's own for the files written under the current schema, pyiceberg's in the executors for the
older ones). The oracle is pyiceberg's read of the table before and after, by field id, floats by their bits.

The other Sparks come from the test bed (`make testbed`: `.testbed/spark-X.Y`, pyspark from pip, which is a
whole Spark); 4.2 is lakesort's own (.venv). Without the test bed these tests skip, except in CI (env CI set),
where `make test` builds it and its absence is a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest
from lossless import assert_same, by_field_id, rows_for, spec_for
from pyiceberg.schema import Schema
from pyiceberg.transforms import YearTransform
from pyiceberg.types import (
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

from layout.compaction.pipeline.class_archive import archive_path, java_options
from layout.compaction.pipeline.driver import compact
from layout.compaction.pipeline.runs import TableRequest, prepare_table
from layout.compaction.pipeline.spark_home import (
    SUPPORTED,
    SparkInstall,
    SparkUnsupported,
    find_install,
    parse_version,
    refusal,
    spark_submit_binary,
)
from layout.errors import InputError
from layout.manifest import StagedManifest
from layout.upkeep.lease import LeaseOwner, read_lease

REPO = Path(__file__).resolve().parents[3]
BED = REPO / ".testbed"
OWN = Path(pyspark.__file__).resolve().parent  # lakesort's own Spark: the .venv's pyspark 4.2
SPARK_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g"}


def bed_home(version: str) -> Path:
    """SPARK_HOME of a Spark of the test bed (pip's pyspark package is one), or lakesort's own for 4.2."""
    if version == "4.2":
        return OWN
    homes = sorted((BED / f"spark-{version}" / "lib").glob("python3*/site-packages/pyspark"))
    if not homes or not (homes[0] / "bin" / "spark-submit").is_file():
        missing = pytest.fail if os.environ.get("CI") else pytest.skip
        missing(f"the test bed has no Spark {version} (.testbed/spark-{version}): `make testbed` builds it")
    return homes[0]


# ---- the job on each supported Spark -------------------------------------------------------------------


def evolved_table(catalog):
    """t.versions: partitioned by year of `day` (2024, and null), 60 rows in three appends, the last after a
    rename (name -> label), an added column (note) and two promotions (id int -> long, f float -> double).
    Small: a Spark task and a file each is what a test here costs, not the rows."""
    catalog.create_namespace("t")
    table = catalog.create_table("t.versions", Schema(
        NestedField(1, "id", IntegerType(), required=True), NestedField(2, "day", DateType()),
        NestedField(3, "name", StringType()), NestedField(4, "f", FloatType()),
        NestedField(5, "amount", DecimalType(9, 2)), NestedField(6, "ts", TimestampType()),
        NestedField(7, "tags", ListType(8, StringType(), element_required=False)),
    ))
    with table.update_spec() as spec:
        spec.add_field("day", YearTransform(), "day_year")
    table.append(rows_for(table, 0, 20))
    table.append(rows_for(table, 20, 20))
    with table.update_schema() as u:
        u.rename_column("name", "label")
        u.add_column("note", StringType())
        u.update_column("id", LongType())
        u.update_column("f", DoubleType())
    table.append(rows_for(table, 40, 20))
    return table.refresh()


@pytest.mark.spark
@pytest.mark.parametrize("version", ["3.5", "4.0", "4.1", "4.2"])
def test_the_job_compacts_an_evolved_table_on_each_supported_spark(
    version, iceberg_catalog, monkeypatch, tmp_path
):
    home = bed_home(version)
    monkeypatch.setenv("SPARK_HOME", str(home))
    for name in ("SPARK_PYTHON", "SPARK_CONF", "SHIP_LAYOUT", "SPARK_APPLICATION"):
        monkeypatch.delenv(f"LAKESORT_{name}", raising=False)
    monkeypatch.setenv("LAKESORT_REPORT_DIR", str(tmp_path / "reports"))
    table = evolved_table(iceberg_catalog)
    before = by_field_id(table)
    files_before = len(list(table.scan().plan_files()))

    result = compact("t.versions", spec=spec_for("t.versions"), force=True, spark_conf=SPARK_CONF,
                     work_dir=tmp_path / "work")

    manifest = StagedManifest.from_json((tmp_path / "work" / "manifest-0.json").read_text())
    assert manifest.spark_version.startswith(f"{version}.")  # that Spark ran the job
    table = table.refresh()
    assert result.snapshot_id == table.current_snapshot().snapshot_id
    assert result.files_removed == files_before and result.files_added < files_before
    assert_same(before, by_field_id(table))


# ---- which Spark, which version: pure ----------------------------------------------------------------


@pytest.mark.parametrize(("kind", "text", "version"), [
    ("RELEASE", "Spark 3.5.1 built for Hadoop 3.3.4\nBuild flags: -B -Pmesos -Pyarn\n", "3.5.1"),
    ("RELEASE", "Spark 4.1.0-preview2 (git revision 1a2b3c) built for Hadoop 3.4.1", "4.1.0-preview2"),
    ("version.py", "__version__: str = '4.2.0'\n", "4.2.0"),
    ("version.py", '__version__ = "3.5.9"\n', "3.5.9"),
    ("jar", "spark-core_2.12-3.5.9.jar", "3.5.9"),
    ("jar", "spark-core_2.13-4.0.5.jar", "4.0.5"),
    ("--version", "Welcome to\n   ____ ...\n   /___/ .__/\\_,_/_/ /_/\\_\\   version 4.0.1\n", "4.0.1"),
    ("RELEASE", "Hadoop 3.3.4", None),
    ("jar", "spark-sql_2.13-4.0.5.jar", None),
])
def test_a_version_is_read_from_what_a_spark_home_holds(kind, text, version):
    assert parse_version(kind, text) == version


def install(version: str) -> SparkInstall:
    return SparkInstall(home="/opt/spark", spark_submit="/opt/spark/bin/spark-submit", version=version,
                        source="/opt/spark/RELEASE")


@pytest.mark.parametrize("version",
                         ["3.5.0", "3.5.9", "4.0.5", "4.1.4", "4.2.0", "4.2.1-SNAPSHOT", "4.1.0-preview2"])
def test_supported_sparks_run(version):
    assert refusal(install(version)) is None


@pytest.mark.parametrize(("version", "why"), [
    ("3.4.1", "older"), ("3.3.0", "older"), ("2.4.8", "older"),
    ("4.3.0", "newer"), ("5.0.0", "newer"), ("3.6.0", "newer"),
])
def test_other_sparks_are_refused_naming_the_version_and_the_supported_ones(version, why):
    message = refusal(install(version))
    assert message is not None
    assert f"Spark {version} (from /opt/spark/RELEASE) is {why}" in message
    assert "Spark 3.5, 4.0, 4.1, 4.2" in message and "SPARK_HOME" in message


def test_refusal_agrees_with_the_supported_list():
    """Brute force over versions around the supported ones: refused exactly when (major,
    minor) is not listed."""
    for major in range(2, 7):
        for minor in range(8):
            assert (refusal(install(f"{major}.{minor}.3")) is None) == ((major, minor) in SUPPORTED)


def fake_home(root: Path, *, release: str | None = None, version_py: str | None = None,
              jar: str | None = None) -> Path:
    """A directory shaped like a Spark home, with bin/spark-submit that leaves a mark when it runs."""
    (root / "bin").mkdir(parents=True)
    script = root / "bin" / "spark-submit"
    script.write_text(f'#!/bin/sh\ntouch "{root}/ran"\necho "version 9.9.9" >&2\nexit 1\n')
    script.chmod(0o755)
    if release is not None:
        (root / "RELEASE").write_text(release)
    if version_py is not None:
        (root / "version.py").write_text(version_py)
    if jar is not None:
        (root / "jars").mkdir()
        (root / "jars" / jar).write_bytes(b"")
    return root


def test_the_version_comes_from_the_cheapest_place_the_home_has(tmp_path):
    release = fake_home(tmp_path / "a", release="Spark 3.4.1 built for Hadoop 3.3.4\n",
                        jar="spark-core_2.12-3.5.0.jar")
    found = find_install(str(release / "bin" / "spark-submit"), str(release))
    assert (found.version, found.source) == ("3.4.1", str(release / "RELEASE"))
    jar = fake_home(tmp_path / "b", jar="spark-core_2.13-5.0.0.jar")
    assert find_install(str(jar / "bin" / "spark-submit"), str(jar)).version == "5.0.0"
    # Without SPARK_HOME: a distribution's script names its home, the directory above its bin/.
    assert find_install(str(jar / "bin" / "spark-submit")).home == str(jar.resolve())
    # Nothing in the home says: `spark-submit --version` does (a JVM's start, so only then).
    bare = fake_home(tmp_path / "c")
    assert find_install(str(bare / "bin" / "spark-submit")).version == "9.9.9" and (bare / "ran").exists()
    # lakesort's own pyspark: pip's package, whose version.py says.
    assert find_install(str(Path(sys.executable).with_name("spark-submit"))).version == pyspark.__version__


def test_spark_home_names_the_spark_submit_lakesort_runs(tmp_path, monkeypatch):
    home = fake_home(tmp_path / "spark", release="Spark 4.0.1 built for Hadoop 3.4.1\n")
    monkeypatch.setenv("SPARK_HOME", str(home))
    assert spark_submit_binary() == str(home / "bin" / "spark-submit")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(InputError, match="has no bin/spark-submit"):
        spark_submit_binary()
    monkeypatch.delenv("SPARK_HOME")
    assert spark_submit_binary() == str(Path(sys.executable).with_name("spark-submit"))


def test_a_class_archive_is_never_handed_to_another_spark(tmp_path, monkeypatch):
    """The archive is named for the jars of the Spark the job runs on: $SPARK_HOME's when it is set."""
    monkeypatch.setenv("LAKESORT_SPARK_CLASS_ARCHIVE", "true")
    monkeypatch.delenv("SPARK_HOME", raising=False)
    own = archive_path(tmp_path)
    if own is None:
        pytest.skip("no Java: no class archive")
    own.write_bytes(b"an archive of lakesort's own Spark")
    assert java_options(tmp_path) is not None
    other = fake_home(tmp_path / "spark", jar="spark-core_2.12-3.5.9.jar")
    monkeypatch.setenv("SPARK_HOME", str(other))
    assert archive_path(tmp_path) != own and java_options(tmp_path) is None


# ---- the refusal, for real: before the lease, the plan and any Spark ----------------------------------


def test_lakesort_compact_refuses_an_old_spark_before_any_work(events, tmp_path):
    home = fake_home(tmp_path / "spark-3.4", release="Spark 3.4.1 built for Hadoop 3.3.4\n")
    env = {**os.environ, "SPARK_HOME": str(home)}
    done = subprocess.run([str(Path(sys.executable).with_name("lakesort")), "compact", "t.events"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, check=False, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "Spark 3.4.1" in done.stderr and "3.5, 4.0, 4.1, 4.2" in done.stderr
    assert not (home / "ran").exists()  # no spark-submit, not even `--version`
    assert read_lease("t.events") is None and not any((tmp_path / "work").rglob("plan.json"))


def test_the_dags_prepare_refuses_a_newer_spark_before_the_lease(events, tmp_path, monkeypatch):
    """The DAGs' prepare task is given the spark-submit on PATH, the one SparkSubmitOperator runs."""
    home = fake_home(tmp_path / "spark-5", jar="spark-core_2.13-5.0.0.jar")
    monkeypatch.setenv("SPARK_HOME", str(home))
    owner = LeaseOwner.cli()
    with pytest.raises(SparkUnsupported, match=r"Spark 5\.0\.0 .* is newer .*3\.5, 4\.0, 4\.1, 4\.2"):
        prepare_table(TableRequest(table="t.events", trigger="manual"), owner=owner,
                      spark_submit=str(home / "bin" / "spark-submit"))
    assert not (home / "ran").exists()
    assert read_lease("t.events") is None and not any((tmp_path / "work").rglob("plan.json"))
    # A dry run starts no Spark: it plans whatever SPARK_HOME says.
    planned = prepare_table(TableRequest(table="t.events", trigger="manual", dry_run=True), owner=owner,
                            spark_submit=str(home / "bin" / "spark-submit"))
    assert planned.status == "dry-run"
