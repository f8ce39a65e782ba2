"""`lakesort spark-jars`: the Hadoop of the Spark in use (a fake $SPARK_HOME here), what it prints, the pom,
--fetch (Maven stood in for by a script, so nothing is downloaded) and the exit codes: 0 ok, 1 Maven failed,
2 bad usage or input (an unknown Hadoop, no Maven: before any work)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from layout.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, main
from layout.compaction.pipeline import spark_home

NS = {"m": "http://maven.apache.org/POM/4.0.0"}


@pytest.fixture
def spark(tmp_path, monkeypatch):
    """A Spark 4.0 distribution with Hadoop 3.4.1, as $SPARK_HOME."""
    home = tmp_path / "spark-4.0.1"
    (home / "bin").mkdir(parents=True)
    (home / "jars").mkdir()
    (home / "bin" / "spark-submit").write_text("#!/bin/sh\nexit 1\n")
    (home / "RELEASE").write_text("Spark 4.0.1 built for Hadoop 3.4.1\n")
    for name in ("spark-core_2.13-4.0.1.jar", "hadoop-client-api-3.4.1.jar",
                 "hadoop-client-runtime-3.4.1.jar"):
        (home / "jars" / name).write_bytes(b"")
    monkeypatch.setenv("SPARK_HOME", str(home))
    spark_home._checked.cache_clear()
    yield home
    spark_home._checked.cache_clear()


@pytest.fixture
def fake_mvn(tmp_path, monkeypatch):
    """An `mvn` on PATH that records its arguments and copies two jars to -DoutputDirectory."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "mvn.args"
    script = bin_dir / "mvn"
    script.write_text(f"""#!/bin/sh
printf '%s\\n' "$@" > {log}
for arg in "$@"; do
  case "$arg" in -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}";; esac
done
mkdir -p "$out" && touch "$out/hadoop-aws-3.4.1.jar" "$out/s3-2.24.6.jar"
""")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return log


def test_prints_the_coordinates_for_the_hadoop_of_spark_home(spark, capsys):
    assert main(["spark-jars"]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"Hadoop 3.4.1 (from the hadoop-client-api jar in {spark / 'jars'})" in out
    for coordinate in ("org.apache.hadoop:hadoop-aws:3.4.1", "software.amazon.awssdk:s3:2.24.6",
                       "software.amazon.awssdk:s3-transfer-manager:2.24.6",
                       "software.amazon.awssdk:sts:2.24.6"):
        assert coordinate in out
    assert "software.amazon.awssdk:bundle" in out  # named as left out
    assert "--fetch DIR" in out and "spark.jars" in out and "fs.s3.impl" in out


def test_hadoop_version_option_overrides_detection(capsys, monkeypatch):
    monkeypatch.setenv("SPARK_HOME", "/nonexistent")  # never looked at
    assert main(["spark-jars", "--hadoop-version", "3.3.4"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "org.apache.hadoop:hadoop-aws:3.3.4" in out and "AWS SDK v1 1.12.262" in out


def test_print_pom_writes_a_pom_for_that_version(spark, capsys):
    assert main(["spark-jars", "--print-pom"]) == EXIT_OK
    root = ET.fromstring(capsys.readouterr().out)
    deps = {(d.findtext("m:artifactId", namespaces=NS), d.findtext("m:version", namespaces=NS))
            for d in root.find("m:dependencies", NS)}
    assert deps == {("hadoop-aws", "3.4.1"), ("s3", "2.24.6"), ("s3-transfer-manager", "2.24.6"),
                    ("sts", "2.24.6"), ("spark-hadoop-cloud_2.13", "4.0.2")}


def test_unknown_hadoop_exits_2_naming_the_version_and_the_fix(tmp_path, spark, capsys):
    (spark / "jars" / "hadoop-client-api-3.4.1.jar").rename(spark / "jars" / "hadoop-client-api-3.9.9.jar")
    assert main(["spark-jars"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "Hadoop 3.9.9" in err and "SDK_OF_HADOOP" in err and "hadoop-project-3.9.9.pom" in err


def test_a_spark_without_hadoop_exits_2(spark, capsys):
    (spark / "jars" / "hadoop-client-api-3.4.1.jar").unlink()
    assert main(["spark-jars"]) == EXIT_USAGE
    assert "--hadoop-version" in capsys.readouterr().err


def test_an_unsupported_spark_exits_2(spark, capsys):
    (spark / "RELEASE").write_text("Spark 3.4.1 built for Hadoop 3.3.4\n")
    assert main(["spark-jars"]) == EXIT_USAGE
    assert "Spark 3.4.1" in capsys.readouterr().err


def test_fetch_without_mvn_exits_2_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn
    monkeypatch.setenv("SPARK_HOME", "/nonexistent")  # would fail later: the mvn check comes first
    out = tmp_path / "jars"
    assert main(["spark-jars", "--fetch", str(out)]) == EXIT_USAGE
    assert "`mvn` is not on PATH" in capsys.readouterr().err and not out.exists()


def test_fetch_prints_the_spark_jars_line(spark, fake_mvn, tmp_path, capsys):
    out = tmp_path / "s3a"
    assert main(["spark-jars", "--fetch", str(out), "--offline"]) == EXIT_OK
    captured = capsys.readouterr()
    expected = ",".join(str((out / n).absolute()) for n in ("hadoop-aws-3.4.1.jar", "s3-2.24.6.jar"))
    assert captured.out == f"spark.jars {expected}\n"
    assert "2 jars for S3A on Hadoop 3.4.1" in captured.err
    args = fake_mvn.read_text().splitlines()
    assert "--offline" in args and "dependency:copy-dependencies" in args
    assert any(a.startswith("-DexcludeGroupIds=io.netty,") for a in args)


def test_maven_failing_exits_1(spark, tmp_path, monkeypatch, capsys):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mvn").write_text("#!/bin/sh\necho '[ERROR] Could not resolve "
                                 "dependencies: offline'\nexit 1\n")
    (bin_dir / "mvn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert main(["spark-jars", "--fetch", str(tmp_path / "s3a")]) == EXIT_FAILURE
    assert "Could not resolve dependencies" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--print-pom", "--fetch", "x"], ["--offline"]])
def test_bad_usage_exits_2(argv, capsys, monkeypatch):
    monkeypatch.setenv("SPARK_HOME", "/nonexistent")
    assert main(["spark-jars", "--hadoop-version", "3.5.0", *argv]) == EXIT_USAGE


def test_the_module_is_loaded_only_when_the_command_runs():
    import layout.cli

    assert layout.cli.COMMANDS["spark-jars"] == "layout.cli.spark_jars"
    assert Path(layout.cli.__file__).with_name("spark_jars.py").is_file()
