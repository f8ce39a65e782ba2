"""Reading exactly the planned files as Iceberg defines their rows: Spark's own reader for the files the
prepare step marked native, pyiceberg's reader in the executors for the others
(`layout.compaction.executor.inputs`), each row tagged with its group,
its current-spec partition and the file it came from.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from layout.compaction.executor import partitions as partitioning
from layout.compaction.executor.partitions import GROUP, PART, PART_KEY
from layout.errors import InputError

from .columns import FILE, POS, SOURCE
from .deletes import file_index
from .frames import literal_frame
from .spark_versions import arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from layout.compaction.plan import RewriteGroup

    from .job_plan import JobPlan

log = logging.getLogger("lakesort.compact")


def read_inputs(spark: SparkSession, job: JobPlan, groups: Sequence[RewriteGroup]) -> Inputs:
    """The planned files' rows as Iceberg defines them, tagged with group, partition key and SOURCE (the file
    a natively read row came from; null for the others). Files marked `spark_native` by the prepare step
    are read by Spark's own vectorized reader; the others by pyiceberg's reader in the executors
    (`layout.compaction.executor.inputs`), spread over tasks balanced by bytes."""

    plan, schema, columns = job.plan, job.spark_schema, job.columns
    tags = [T.StructField(GROUP, T.IntegerType(), False), T.StructField(PART, T.StringType(), False),
            T.StructField(PART_KEY, T.StringType(), False)]
    # Merge-on-read: each row's input file and position in it, which the deletes name
    # (`deletes.apply_deletes`).
    positioned = plan.has_deletes
    located = [FILE, POS] if positioned else []
    if positioned:
        tags += [T.StructField(FILE, T.IntegerType(), False), T.StructField(POS, T.LongType(), False)]
    index = file_index(groups)
    out_schema = T.StructType([*schema.fields, *tags])
    native = [(g.group_id, f) for g in groups for f in g.inputs if f.spark_native]
    others = sorted(((g.group_id, f) for g in groups for f in g.inputs if not f.spark_native),
                    key=lambda x: -x[1].size)
    parts: list[DataFrame] = []
    sources: dict[str, tuple[str, int]] = {}
    native_scan = None
    if native:
        if all(is_local(f.path) for _, f in native):
            # Spark lists more than 32 paths with a Spark job (a task per path: 2.7 s for 252 files on two
            # cores); on a local file system the driver stats them in milliseconds. Object stores keep it.
            spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold",
                           str(10 * len(native) + 32))
        rows = spark.read.schema(schema).parquet(*[f.path for _, f in native])
        if positioned:  # the reader's own row index (Spark 3.5 and later): the position a delete names
            rows = rows.withColumn(POS, F.col("_metadata.row_index"))
        # input_file_name() names a file as inputFiles() does: the join key, so no row needs a regex.
        planned = {_source_name(f.path): (gid, f) for gid, f in native}
        listed: list[tuple[Any, ...]] = []  # SOURCE, GROUP, PART, PART_KEY (and FILE)
        for name in rows.inputFiles():
            if _source_name(name) not in planned:
                raise InputError(f"{name}: Spark lists a file the plan does not hold (planned: "
                                 f"{sorted(planned)[:3]}...); nothing was rewritten")
            gid, f = planned.pop(_source_name(name))
            listed.append((name, gid, partitioning.key_dir(f.partition_key), f.partition_key,
                           *([index[f.path]] if positioned else [])))
            sources[name] = (f.path, f.rows)
        if planned:
            raise InputError(f"{min(planned)}: Spark does not list this planned file; nothing was rewritten")
        single = listed[0][1:] if len({row[1:] for row in listed}) == 1 else None
        listing = literal_frame(spark, listed, [SOURCE, GROUP, PART, PART_KEY, *located[:1]])
        native_scan = NativeScan(rows, listing, single)
        parts.append(native_scan.tagged(rows).select(*columns, GROUP, PART, PART_KEY, *located, SOURCE))
    if others:
        target = arrow_schema(out_schema)  # in the job's session time zone, UTC
        tasks = max(1, min(len(others), spark.sparkContext.defaultParallelism * 4))
        slices: list[list[tuple[int, str, int, str, int, int, int]]] = [[] for _ in range(tasks)]
        for i, (gid, f) in enumerate(others):  # round robin over size-descending files: balanced bytes
            slices[i % tasks].append((gid, f.path, f.spec_id, f.partition_key, f.rows, f.size, index[f.path]))
        file_schema = T.StructType([T.StructField("group_id", T.IntegerType()),
                                    T.StructField("path", T.StringType()),
                                    T.StructField("spec_id", T.IntegerType()),
                                    T.StructField("partition", T.StringType()),
                                    T.StructField("record_count", T.LongType()),
                                    T.StructField("size", T.LongType()),
                                    T.StructField("file_index", T.IntegerType())])
        files = spark.createDataFrame(spark.sparkContext.parallelize([r for s in slices for r in s], tasks),
                                      file_schema)
        # pyiceberg's reader (and its table module) is imported only when some file needs it: 0.4 s of the
        # driver's start otherwise.
        from layout.compaction.executor.inputs import InputSource, tagged_batches

        source = InputSource(metadata_location=plan.metadata_location, io_properties=dict(plan.io_properties),
                             schema=job.schema)
        spec_id = plan.partition_spec_id

        named = (FILE, POS) if positioned else None

        def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return tagged_batches(source, batches, target, spec_id, positions=named)

        parts.append(files.mapInArrow(read, out_schema).withColumn(SOURCE, F.lit(None).cast("string")))
    df = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    log.info("reading %d file(s) with Spark's reader, %d through pyiceberg", len(native), len(others))
    return Inputs(df, sources, native_scan if not others else None)


@dataclass(frozen=True, slots=True)
class NativeScan:
    """Spark's scan of the natively read files and their listing (SOURCE -> GROUP, PART, PART_KEY)."""

    rows: DataFrame
    listing: DataFrame
    single: tuple[Any, ...] | None  # (GROUP, PART, PART_KEY[, FILE]) when every file has the same

    def tagged(self, rows: DataFrame, extra: DataFrame | None = None) -> DataFrame:
        """`rows` of this scan with each file's group, partition and SOURCE: a broadcast join on the file name
        (input_file_name() names a file as inputFiles() does), or literals when every file has the same.
        `extra`: a small frame by (GROUP, PART) whose columns the same join brings
        (files of one partition)."""
        rows = rows.withColumn(SOURCE, F.input_file_name())
        if self.single is not None and extra is None:
            tagged = (rows.withColumn(GROUP, F.lit(self.single[0])).withColumn(PART, F.lit(self.single[1]))
                      .withColumn(PART_KEY, F.lit(self.single[2])))
            return tagged.withColumn(FILE, F.lit(self.single[3])) if len(self.single) > 3 else tagged
        listing = self.listing if extra is None else self.listing.join(extra, [GROUP, PART], "left")
        return rows.join(F.broadcast(listing), SOURCE, "left")


@dataclass(frozen=True, slots=True)
class Inputs:
    """`read_inputs`: the rows (the table's columns, GROUP, PART, PART_KEY, SOURCE), the natively read files
    by SOURCE -> (path, rows the manifest records),
    and the native scan when Spark's reader reads every file."""

    rows: DataFrame
    native: dict[str, tuple[str, int]]
    scan: NativeScan | None


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file:")


def _source_name(path: str) -> str:
    """A path as the plan records it and as Spark's input_file_name() reports it, alike: scheme and leading
    slashes dropped (file:///a, file:/a and /a are one file; s3:// and s3a:// one object)."""
    return re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*:", "", path).lstrip("/")
