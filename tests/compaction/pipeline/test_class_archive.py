"""The Spark driver JVM's class archive (layout.compaction.pipeline.class_archive): where it is, the driver
option that uses it (added to the user's own), and a real spark-submit that maps its classes from it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from layout.compaction.pipeline import class_archive
from layout.compaction.pipeline.class_archive import (
    DRIVER_OPTIONS,
    WARM_JOB,
    archive_path,
    build_archive,
    java_options,
    with_java_options,
)
from layout.compaction.pipeline.submit import describe_job, spark_submit_binary


def test_the_option_is_added_after_the_users_own():
    conf = {"spark.ui.enabled": "false"}
    assert with_java_options(conf, None) == conf
    assert (with_java_options(conf, "-XX:SharedArchiveFile=a.jsa")
            == {**conf, DRIVER_OPTIONS: "-XX:SharedArchiveFile=a.jsa"})
    mine = {DRIVER_OPTIONS: "-XX:+UseSerialGC"}
    assert with_java_options(mine, "-Xshare:auto") == {DRIVER_OPTIONS: "-XX:+UseSerialGC -Xshare:auto"}
    assert mine == {DRIVER_OPTIONS: "-XX:+UseSerialGC"}  # not changed in place


def test_jobs_use_the_archive_only_when_it_is_there_and_on(tmp_path, monkeypatch):
    path = archive_path(tmp_path)
    assert path is not None and path.parent == tmp_path and path.name.startswith("spark-classes-")
    assert archive_path(tmp_path) == path  # the same Java and jars: the same name
    assert java_options(tmp_path) is None  # not built
    path.write_bytes(b"x")
    assert java_options(tmp_path) == f"-XX:SharedArchiveFile={path} -Xshare:auto"
    monkeypatch.setenv("LAKESORT_SPARK_CLASS_ARCHIVE", "false")
    assert java_options(tmp_path) is None
    monkeypatch.setenv("LAKESORT_SPARK_CLASS_ARCHIVE", "true")
    monkeypatch.setattr(class_archive, "ARCHIVE_DIR", tmp_path)
    job = describe_job(plan_path="p.json", manifest_path="m.json", groups=None, name="n", work_dir=tmp_path,
                       conf={DRIVER_OPTIONS: "-XX:+UseSerialGC"})
    assert job.conf[DRIVER_OPTIONS] == f"-XX:+UseSerialGC -XX:SharedArchiveFile={path} -Xshare:auto"


def test_a_job_maps_its_classes_from_the_archive(spark, tmp_path):
    """`make setup` built the archive (else it is built here); a spark-submit that must use it (-Xshare:on:
    the JVM refuses to start otherwise) loads Spark's classes from it."""
    path = archive_path()
    if path is None or not path.is_file():
        path = build_archive(spark_submit=spark_submit_binary(), directory=tmp_path / "archive")
    loaded = tmp_path / "classes.log"
    options = f"-XX:SharedArchiveFile={path} -Xshare:on -Xlog:class+load=info:file={loaded}"
    done = subprocess.run([spark_submit_binary(), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                           "--conf", f"{DRIVER_OPTIONS}={options}", str(WARM_JOB), str(tmp_path / "work")],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable,
                               "PYSPARK_DRIVER_PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = loaded.read_text().splitlines()
    shared = [line for line in lines if "shared objects file (top)" in line]
    spark_classes = [line for line in shared if " org.apache.spark." in line]
    # Most of what the job loads comes from the archive, Spark's own classes too.
    assert len(shared) > len(lines) // 2 and len(spark_classes) > 1000, (len(shared), len(lines),
                                                                         len(spark_classes))


def test_a_failed_build_says_so_and_leaves_nothing(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(class_archive, "WARM_JOB", tmp_path / "missing.py")
    with pytest.raises(class_archive.ArchiveFailed, match="jobs run without an archive"):
        build_archive(spark_submit=spark_submit_binary(), directory=tmp_path / "archive")
    assert list((tmp_path / "archive").iterdir()) == []
