"""The staged files read back from storage by Spark's own reader (a new scan, not the job's rows): each
file's rows and fingerprint, keyed tables' duplicate and null keys, and the outputs listed for the manifest.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql import types as T

from layout.compaction.executor.partitions import GROUP, PART
from layout.compaction.integrity.fingerprint import exact_hash_sum
from layout.io import find_parquet_files, list_parquet_files
from layout.manifest import StagedFile
from layout.parquet import ParquetFile

from .fingerprints import with_halves
from .read import is_local

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .job_plan import JobPlan

# Per staged file, (group id, partition directory, file name) -> (rows, hash sum), as Spark read it back.
Checked = dict[tuple[int, str, str], tuple[int, int]]


def read_back(spark: SparkSession, job: JobPlan, target: str) -> Checked:
    """Each staged file's rows and fingerprint, read back from storage by Spark's own Parquet reader in the
    executors: a new scan of the files as written (not the job's cached rows), so a write that lost or
    changed rows shows here; (group, partition directory, file name) -> (rows, hash sum): a task that wrote
    files of several partitions gave them one name. Keyed tables: the files of one partition
    directory must not share a key, and no key is null; both are counted here (`key_problems`)."""
    # Each row's hash is salted with its group, as the input's: the group is the directory the write
    # partitioned by, read as a partition column (a constant per file: a join or regex per row costs more).
    schema = T.StructType([*job.spark_schema.fields, T.StructField(GROUP, T.IntegerType()),
                           T.StructField(PART, T.StringType())])
    with _read_settings(spark, target):
        staged = spark.read.schema(schema).parquet(target)
        # The file's name from the scan's metadata column: grouping by input_file_name() (the whole path, a
        # string per row) took the read-back 3.1-3.4 s against 2.3 s (TPC-H SF1, warm, best of three). A
        # table column named `_metadata` would hide it.
        name = F.col("_metadata.file_name") if "_metadata" not in job.columns else F.input_file_name()
        files = with_halves(staged.select("*", name.alias("__file")), job.columns, GROUP)
        figures = (
            files.groupBy(GROUP, PART, "__file")
            .agg(F.count(F.lit(1)).alias("rows"), F.sum("__high").alias("high"), F.sum("__low").alias("low"))
            .collect()
        )
    out: Checked = {}
    for r in figures:
        key = (r[GROUP], r[PART], _file_name(r["__file"]))
        if key in out:
            raise RuntimeError(f"two staged files are named {key}: cannot tell their figures apart")
        out[key] = (int(r["rows"]), exact_hash_sum(r["high"], r["low"]))
    return out


def key_problems(spark: SparkSession, job: JobPlan, target: str) -> dict[int, tuple[int, int]]:
    """Group id -> (duplicate keys, null keys) over the staged files of a keyed table, read back by Spark:
    keys are unique per partition directory (one current-spec partition of one group). Empty for a table
    without a merge rule: nothing to count."""
    if job.plan.keys is None:
        return {}
    with _read_settings(spark, target):  # the listing when the scan is made, the splits when it runs
        keys = list(job.plan.keys.columns)
        files = (_staged_rows(spark, job, target)
                 .withColumn("__dir", F.regexp_extract(F.input_file_name(), r"^(.*)/[^/]*$", 1))
                 .withColumn("__group", F.regexp_extract("__dir", rf"{GROUP}=(\d+)", 1).cast("int")))
        null = F.lit(False)
        for k in keys:
            null = null | F.col(k).isNull()
        per_key = files.groupBy("__group", "__dir", *keys).agg(F.count(F.lit(1)).alias("n"),
                                                                F.max(null.cast("int")).alias("null"))
        rows = per_key.groupBy("__group").agg(F.sum(F.col("n") - 1).alias("duplicates"),
                                             F.sum(F.col("null") * F.col("n")).alias("nulls")).collect()
        return {r["__group"]: (int(r["duplicates"] or 0), int(r["nulls"] or 0)) for r in rows}


# What a staged file costs a read-back task besides its bytes (Spark's spark.sql.files.openCostInBytes, 4 MiB
# by default). At the default a small file fills a task's split alone: TPC-H SF 0.1 by month staged 84 files
# of 0.2 MiB, read back in 42 tasks; at 64 KiB in 6 tasks, 1.5-1.8 s against 2.3-2.9 s (warm, loaded machine).
OPEN_COST = 64 << 10


@contextlib.contextmanager
def _read_settings(spark: SparkSession, target: str) -> Iterator[None]:
    """Session settings for reading the staged files back, restored after: splits of a few row groups, at
    least two per core, small files packed into them by their bytes (`OPEN_COST`), and a local staging
    directory listed by the driver (a listing job's tasks cost more than listing a local disk; object stores
    keep Spark's parallel listing)."""
    # Spark's default split (the input over the cores, at most 128 MiB) leaves whole files to tasks, and three
    # files on two cores ran as two tasks and then one.
    total = sum(info.size for _, info in list_parquet_files(target))
    parallelism = spark.sparkContext.defaultParallelism
    settings = {"spark.sql.files.maxPartitionBytes": str(max(4 << 20,
                                                             min(128 << 20, total // (2 * parallelism)))),
                "spark.sql.files.openCostInBytes": str(OPEN_COST)}
    if is_local(target):
        settings["spark.sql.sources.parallelPartitionDiscovery.threshold"] = str(1 << 20)
    before = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():  # SQL confs with defaults: get gave their values, never None
            spark.conf.set(key, old)  # type: ignore[arg-type]


def _staged_rows(spark: SparkSession, job: JobPlan, target: str) -> DataFrame:
    """The staged files as Spark's own reader reads them from storage (a new scan, not the job's rows)."""
    return spark.read.schema(job.spark_schema).option("recursiveFileLookup", "true").parquet(target)


def _file_name(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1]


def list_outputs(directory: str, partition_key: str,
                 checked: Mapping[str, tuple[int, int]]) -> list[StagedFile]:
    """The Parquet files the write produced: sizes and row counts from their footers, with the rows and
    fingerprint Spark read back from each (`read_back`)."""

    out = []
    scheme = directory.split("://", 1)[0] + "://" if "://" in directory else ""
    for filesystem, path in find_parquet_files(directory):
        pf = ParquetFile.open(path, filesystem=filesystem)
        uri = scheme + path if scheme and not path.startswith(scheme) else path
        rows, hash_sum = checked.get(_file_name(path), (0, 0))
        out.append(StagedFile(path=uri, size=pf.size, rows=pf.num_rows, partition_key=partition_key,
                              read_back_rows=rows, read_back_hash_sum=str(hash_sum)))
    return out
