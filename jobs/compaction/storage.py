"""The table's object store, for this job: its settings and credentials from the catalog, in memory only.

The plan names the table and carries its public storage settings (endpoint, region); credentials are never
written into it. On an object store the driver loads the table from the catalog once (a REST catalog vends
the table's credentials in that response), sets them in the driver's Hadoop configuration, which Spark ships
to executors with each task for its own reader and writer (S3A), and returns a plan whose FileIO properties
include them for the executors' pyiceberg and pyarrow readers, which get it inside their task closures.
Nothing here is logged, written to a file or passed on a command line.

Nothing but the table's own files is left in its location (`without_sidecars`, `drop_sidecars`): no
`_SUCCESS` marker, and on a local file system no `.<name>.crc` beside each file (Hadoop's LocalFileSystem
writes one by default). Nothing references them, so they would stay until maintenance deleted them as
orphans, and the report's storage view counted them as such.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypeVar

from pyarrow import fs as pafs

from layout import storage
from layout.catalog import load_table
from layout.errors import ConfigError
from layout.io import resolve

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from layout.compaction.plan import RewritePlan

S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem"
PROTOCOL = "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol"
log = logging.getLogger("lakesort.compact")
_R = TypeVar("_R")


def with_storage(spark: SparkSession, plan: RewritePlan) -> RewritePlan:
    """`plan` with its table's full FileIO properties, and Spark's Hadoop configuration set for its store
    (and for writes without sidecar files: `without_sidecars`)."""
    without_sidecars(spark, plan.table_location)
    if not storage.is_object_store(plan.table_location):
        return plan
    table = load_table(plan.table, plan.catalog)  # registers the table's storage settings (`layout.storage`)
    # What executors need of them: the catalog's own URI and credentials stay in this driver.
    properties = storage.for_files({**plan.io_properties, **storage.properties_for(table.location())})
    settings = storage.hadoop_settings(properties)
    if not _loads(spark, S3A):
        raise ConfigError(
            f"table {plan.table} is at {plan.table_location}, but this Spark has no S3A connector "
            f"({S3A}): add hadoop-aws of the Spark's Hadoop version and its AWS SDK jars to spark.jars "
            "(`lakesort spark-jars` names and fetches them; LAKESORT_SPARK_CONF='{\"spark.jars\": \"...\"}')"
        )
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in settings.items():
        hadoop.set(key, value)
    if settings.get("fs.s3.impl") and plan.table_location.split("://", 1)[0] in ("s3", "s3a", "s3n"):
        _magic_committer(spark, hadoop, plan)
    return plan.model_copy(update={"io_properties": properties})


def _is_local(location: str) -> bool:
    return "://" not in location or location.startswith("file:")


def without_sidecars(spark: SparkSession, location: str) -> None:
    """Spark's writes to `location` leave no sidecar file: no `_SUCCESS` marker (the output committer's), and
    on a local file system no checksum files: checksums off on Hadoop's cached LocalFileSystem, the instance
    every write of this JVM uses (the driver's and, with a local master, every task's). Executors in other
    JVMs keep their own instance: what they leave, `drop_sidecars` deletes."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop.set("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
    if _is_local(location):
        jvm: Any = spark.sparkContext._jvm
        jvm.org.apache.hadoop.fs.Path(location).getFileSystem(hadoop).setWriteChecksum(False)


def drop_sidecars(directory: str) -> int:
    """Delete the sidecar files left under `directory` on a local file system (`.<name>.crc`, `_SUCCESS`):
    what executors with their own checksumming file system wrote. Returns how many went."""
    if not _is_local(directory):
        return 0  # object stores and HDFS keep no checksum files beside the data; no marker is written
    filesystem, root = resolve(directory)
    if filesystem.get_file_info(root).type == pafs.FileType.NotFound:
        return 0
    found = [i.path for i in filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
             if i.type == pafs.FileType.File and _sidecar(i.base_name)]
    for path in found:
        filesystem.delete_file(path)
    if found:
        log.info("deleted %d sidecar file(s) (Hadoop checksums, _SUCCESS) under %s", len(found), directory)
    return len(found)


def _sidecar(name: str) -> bool:
    return name == "_SUCCESS" or (name.startswith(".") and name.endswith(".crc"))


def _loads(spark: SparkSession, name: str) -> bool:
    jvm: Any = spark.sparkContext._jvm  # py4j's view of the JVM (None fails below: not loadable)
    try:
        jvm.java.lang.Class.forName(name, False, jvm.Thread.currentThread().getContextClassLoader())
    except Exception:  # noqa: BLE001 - py4j wraps the ClassNotFoundException
        return False
    return True


def _magic_committer(spark: SparkSession, hadoop: Any, plan: RewritePlan) -> None:
    """Write through S3A's magic committer: each task's files are multipart uploads that the job commit
    completes, so nothing is renamed (on S3 a rename is a copy and a delete per file; Spark's default commit
    renames every file twice). It needs Spark's binding of the committers (spark-hadoop-cloud); without it the
    job still works, through renames, and says so. On a 200,000-row write in 4 tasks to the test bed's S3:
    637 requests with 56 copies by renames, 324 and no copy with the magic committer."""
    if not _loads(spark, PROTOCOL):
        log.warning("%s: the job writes to %s through renames (a copy of every file on S3): add Spark's "
                    "spark-hadoop-cloud jar to spark.jars for S3A's magic committer (`lakesort spark-jars`)",
                    plan.table, plan.table_location)
        return
    for scheme in ("s3", "s3a", "s3n"):
        hadoop.set(f"mapreduce.outputcommitter.factory.scheme.{scheme}",
                   "org.apache.hadoop.fs.s3a.commit.S3ACommitterFactory")
    hadoop.set("fs.s3a.committer.name", "magic")
    hadoop.set("fs.s3a.committer.magic.enabled", "true")
    spark.conf.set("spark.sql.sources.commitProtocolClass", PROTOCOL)
    spark.conf.set("spark.sql.parquet.output.committer.class",
                   "org.apache.spark.internal.io.cloud.BindingParquetOutputCommitter")
    log.info("%s: writing with S3A's magic committer (no renames)", plan.table)


def configured(location: str, properties: dict[str, str]
               ) -> Callable[[Callable[..., _R]], Callable[..., _R]]:
    """A function for executors that registers the table's storage settings in their Python worker, then
    calls `fn`: `configured(loc, props)(fn)(args)`."""

    def wrap(fn: Callable[..., _R]) -> Callable[..., _R]:
        def call(*args: Any, **kwargs: Any) -> _R:
            storage.configure(location, properties)
            return fn(*args, **kwargs)
        return call

    return wrap
