"""The S3A jars for a Spark (layout.compaction.pipeline.hadoop_aws): the Hadoop version read from a Spark's
jars/, the AWS SDK hadoop-project declares for it, the pom (parsed back with xml.etree) and Maven's command.
Maven runs only in the last test, offline, against the local repository (`make testbed` fills it)."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from layout.compaction.pipeline import hadoop_aws
from layout.compaction.pipeline.hadoop_aws import (
    EXCLUDED_GROUPS,
    SDK_OF_HADOOP,
    FetchFailed,
    copy_command,
    fetch,
    hadoop_version_in,
    pom_text,
    s3a_jars,
    spark_jars_value,
)
from layout.errors import InputError, UsageError

REPO = Path(__file__).resolve().parents[3]
TESTBED_POM = REPO / "testbed" / "maven" / "s3a.pom.xml"
NS = {"m": "http://maven.apache.org/POM/4.0.0"}
# The Hadoop each supported Spark ships (its jars/hadoop-client-api-<version>.jar).
HADOOP_OF_SPARK = {"3.5": "3.3.4", "4.0": "3.4.1", "4.1": "3.4.2", "4.2": "3.5.0"}


def _jars_dir(tmp_path: Path, *names: str) -> Path:
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in names:
        (jars / name).write_bytes(b"")
    return jars


def _dependencies(pom: str) -> dict[tuple[str, str], tuple[str, set[tuple[str, str]]]]:
    """(groupId, artifactId) -> (version, exclusions), with ${...} properties resolved."""
    root = ET.fromstring(pom)
    props = {p.tag.split("}")[1]: p.text for p in root.find("m:properties", NS) or []}

    def text(node, tag):
        value = node.findtext(f"m:{tag}", namespaces=NS)
        return props.get(value[2:-1], value) if value and value.startswith("${") else value

    out = {}
    for dep in root.find("m:dependencies", NS):
        excluded = {(text(e, "groupId"), text(e, "artifactId"))
                    for e in dep.iterfind("m:exclusions/m:exclusion", NS)}
        out[(text(dep, "groupId"), text(dep, "artifactId"))] = (text(dep, "version"), excluded)
    return out


# ---- the Hadoop version of a Spark ----------------------------------------------------------------------


def test_the_hadoop_version_is_read_from_the_hadoop_client_api_jar(tmp_path):
    jars = _jars_dir(tmp_path, "spark-core_2.13-4.2.0.jar", "hadoop-client-api-3.5.0.jar",
                     "hadoop-client-runtime-3.5.0.jar", "parquet-hadoop-1.17.0.jar")
    assert hadoop_version_in(jars) == "3.5.0"


def test_a_spark_without_hadoop_is_a_clear_error(tmp_path):
    jars = _jars_dir(tmp_path, "spark-core_2.12-3.5.1.jar", "parquet-hadoop-1.13.1.jar")
    with pytest.raises(InputError, match=r"no hadoop-client-api-<version>\.jar.*--hadoop-version"):
        hadoop_version_in(jars)
    with pytest.raises(InputError, match="no such directory"):
        hadoop_version_in(tmp_path / "missing")


def test_two_hadoop_versions_are_a_clear_error(tmp_path):
    jars = _jars_dir(tmp_path, "hadoop-client-api-3.4.1.jar", "hadoop-client-api-3.5.0.jar")
    with pytest.raises(InputError, match=r"several versions \(3\.4\.1, 3\.5\.0\)"):
        hadoop_version_in(jars)


def test_the_installed_pyspark_ships_a_hadoop_of_the_table():
    """lakesort's own pyspark: its Hadoop is one the table knows
    (a pyspark upgrade with a new Hadoop fails here)."""
    jars = hadoop_aws.jars_of_spark_in_use()
    assert hadoop_version_in(jars) in SDK_OF_HADOOP


# ---- the AWS SDK of a Hadoop ----------------------------------------------------------------------------


@pytest.mark.parametrize("spark, hadoop", sorted(HADOOP_OF_SPARK.items()))
def test_every_supported_sparks_hadoop_is_in_the_table(spark, hadoop):
    from layout.compaction.pipeline.spark_home import SUPPORTED

    assert tuple(int(x) for x in spark.split(".")) in SUPPORTED
    jars = s3a_jars(hadoop)
    assert jars.coordinates[0] == f"org.apache.hadoop:hadoop-aws:{hadoop}"
    assert jars.sdk.major == (1 if hadoop.startswith("3.3.") else 2)


def test_sdk_versions_are_hadoop_projects():
    # hadoop-project-<v>.pom on Maven Central: aws-java-sdk-v2.version (3.4+), aws-java-sdk.version (3.3).
    assert {v: (s.major, s.version) for v, s in SDK_OF_HADOOP.items()} == {
        "3.3.4": (1, "1.12.262"), "3.3.6": (1, "1.12.367"), "3.4.0": (2, "2.23.19"), "3.4.1": (2, "2.24.6"),
        "3.4.2": (2, "2.29.52"), "3.5.0": (2, "2.35.4")}


def test_an_unknown_hadoop_is_a_clear_error_naming_it_and_the_fix():
    with pytest.raises(InputError) as err:
        s3a_jars("3.6.0")
    message = str(err.value)
    assert "Hadoop 3.6.0" in message and "hadoop-project-3.6.0.pom" in message and "SDK_OF_HADOOP" in message
    assert "3.5.0" in message  # the versions it knows


# ---- the pom --------------------------------------------------------------------------------------------


def test_the_pom_for_hadoop_3_5_0_is_the_testbeds():
    """testbed/maven/s3a.pom.xml (what `make testbed` fetches) and the pom users get name the same jars."""
    assert _dependencies(pom_text(s3a_jars("3.5.0"))) == _dependencies(TESTBED_POM.read_text())


@pytest.mark.parametrize("hadoop", sorted(SDK_OF_HADOOP))
def test_the_pom_parses_and_names_hadoop_aws_and_its_sdk(hadoop):
    text = pom_text(s3a_jars(hadoop))
    root = ET.fromstring(text)  # well-formed: no `--` inside its comment either
    assert root.findtext("m:packaging", namespaces=NS) == "pom"
    deps = _dependencies(text)
    version, excluded = deps[("org.apache.hadoop", "hadoop-aws")]
    assert version == hadoop and ("org.wildfly.openssl", "wildfly-openssl") in excluded
    sdk = SDK_OF_HADOOP[hadoop]
    if sdk.major == 2:
        assert ("software.amazon.awssdk", "bundle") in excluded, "the 600 MB bundle is replaced by modules"
        for module in ("s3", "s3-transfer-manager", "sts"):
            assert deps[("software.amazon.awssdk", module)][0] == sdk.version
    else:
        assert set(deps) == {("org.apache.hadoop", "hadoop-aws")}, (
            "Hadoop 3.3's S3A: aws-java-sdk-bundle via hadoop-aws")
    for group in EXCLUDED_GROUPS:
        assert group in text, f"the pom's comment names the groups left out ({group})"


def test_the_copy_command_leaves_out_what_spark_ships(tmp_path):
    command = copy_command("mvn", tmp_path / "pom.xml", tmp_path / "out", offline=True)
    assert command[0] == "mvn" and "--offline" in command and "dependency:copy-dependencies" in command
    assert f"-DexcludeGroupIds={','.join(EXCLUDED_GROUPS)}" in command
    assert ({"io.netty", "org.slf4j", "commons-codec", "commons-logging", "org.apache.httpcomponents"}
            == set(EXCLUDED_GROUPS))
    assert "-DincludeScope=runtime" in command and f"-DoutputDirectory={tmp_path / 'out'}" in command
    assert "--offline" not in copy_command("mvn", tmp_path / "pom.xml", tmp_path / "out")


def test_spark_jars_value_is_comma_separated_paths(tmp_path):
    assert spark_jars_value([tmp_path / "a.jar", tmp_path / "b.jar"]) == f"{tmp_path}/a.jar,{tmp_path}/b.jar"


def test_no_mvn_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(UsageError, match="`mvn` is not on PATH"):
        hadoop_aws.find_mvn()


def test_a_failed_maven_run_names_its_error(tmp_path):
    fake = tmp_path / "mvn"
    fake.write_text("#!/bin/sh\necho '\033[0m[ERROR] Failed to execute goal: cannot resolve x -> [Help 1]'\n"
                    "echo '[ERROR] To see the full stack trace of the errors, re-run Maven with the -e "
                    "switch.'\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(FetchFailed) as err:
        fetch(s3a_jars("3.5.0"), tmp_path / "out", mvn=str(fake), offline=True)
    message = str(err.value)
    assert "cannot resolve x" in message and "-e switch" not in message and "\033" not in message
    assert "offline" in message and not (tmp_path / "out").exists()


# ---- Maven for real, offline ----------------------------------------------------------------------------


def _cached(hadoop: str) -> bool:
    repo = Path.home() / ".m2" / "repository"
    sdk = SDK_OF_HADOOP[hadoop].version
    return ((repo / f"org/apache/hadoop/hadoop-aws/{hadoop}/hadoop-aws-{hadoop}.jar").is_file()
            and (repo / f"software/amazon/awssdk/s3/{sdk}/s3-{sdk}.jar").is_file())


@pytest.mark.integration  # runs Maven, a JVM
def test_fetch_copies_the_jars_from_the_local_maven_repository(tmp_path):
    mvn = shutil.which("mvn")
    if mvn is None or not _cached("3.5.0"):
        pytest.skip("needs `mvn` and hadoop-aws 3.5.0 with its SDK in ~/.m2 (`make testbed` caches them)")
    out = tmp_path / "s3a"
    out.mkdir()
    (out / "unrelated.jar").write_bytes(b"")
    try:
        paths = fetch(s3a_jars("3.5.0"), out, mvn=mvn, offline=True)
    except FetchFailed as exc:  # something of the closure not cached: not this code's failure
        pytest.skip(f"not all of the closure is cached offline: {exc}")
    names = {p.name for p in paths}
    assert ({"hadoop-aws-3.5.0.jar", "s3-2.35.4.jar", "s3-transfer-manager-2.35.4.jar", "sts-2.35.4.jar"}
            <= names)
    assert "unrelated.jar" not in names and all(p.is_file() and p.parent == out for p in paths)
    # Spark's own: Netty (the SDK's netty-nio-client module stays), SLF4J,
    # commons-codec/logging, HttpComponents.
    spark_ships = ("netty-buffer", "netty-common", "netty-codec", "netty-handler", "netty-transport",
                   "slf4j-", "commons-codec", "commons-logging", "httpclient", "httpcore", "bundle-")
    assert not any(n.startswith(spark_ships) for n in names), sorted(names)
