"""A small Spark job that does what a compaction does, so that the JVM loads the classes a compaction needs:
`lakesort spark-archive` runs it once with `-XX:ArchiveClassesAtExit`
(`layout.compaction.pipeline.class_archive`).

`spark-submit jobs/warm_classes.py WORK_DIR`: writes and reads a few thousand rows of every common type under
WORK_DIR (the caller removes it). Only pyspark: it runs before anything else is set up.
"""

from __future__ import annotations

import sys

from pyspark.sql import Observation, SparkSession, Window
from pyspark.sql import functions as F

OPTIONS = {"compression": "zstd", "parquet.page.row.count.limit": "1000",
           "parquet.bloom.filter.enabled#id": "true", "parquet.bloom.filter.adaptive.enabled": "true",
           "parquet.columnindex.truncate.length": "64"}


def main(work: str) -> int:
    spark = (SparkSession.builder.appName("lakesort-warm-classes").config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
             .config("spark.sql.optimizer.plannedWrite.enabled", "false").getOrCreate())
    try:
        rows = spark.range(20_000).select(
            F.col("id"), (F.col("id") % 7).cast("int").alias("part"),
            F.col("id").cast("string").alias("name"), (F.col("id") / 3).cast("decimal(15,2)").alias("price"),
            (F.col("id") * 0.5).alias("ratio"),
            F.date_add(F.lit("2020-01-01").cast("date"), (F.col("id") % 400).cast("int")).alias("day"),
            F.timestamp_seconds(F.col("id")).alias("at"), F.array(F.col("id")).alias("ids"),
            F.create_map(F.lit("k"), F.col("id")).alias("tags"),
            F.struct(F.col("id").alias("x")).alias("point"))
        declared = [F.col(c).alias(c, metadata={"parquet.field.id": i + 1})
                    for i, c in enumerate(rows.columns)]
        rows.select(*declared).repartition(4).write.options(**OPTIONS).parquet(f"{work}/in")
        read = spark.read.parquet(f"{work}/in").select("*", F.input_file_name().alias("source"),
                                                      F.col("_metadata.file_name").alias("file"))
        files = spark.createDataFrame([(f, i) for i, f in enumerate(read.inputFiles())],
                                      "source string, n int")
        tagged = read.join(F.broadcast(files), "source")
        observation = Observation("warm")
        observed = tagged.observe(observation, F.count(F.lit(1)),
                                  F.sum(F.xxhash64(*rows.columns[:7]).bitwiseAND(0xFFFF)))
        ranked = observed.withColumn("rank", F.row_number().over(Window.partitionBy("part").orderBy("id")))
        out = (ranked.repartition(3, F.col("part")).select(*rows.columns).sortWithinPartitions("day", "id"))
        out.write.options(**OPTIONS).partitionBy("part").parquet(f"{work}/out")
        back = spark.read.parquet(f"{work}/out")
        back.groupBy("part").agg(
            F.count(F.lit(1)), F.sum(F.xxhash64(*rows.columns[:7]).bitwiseAND(0xFFFF))
        ).collect()
        back.select("id", "day").mapInArrow(lambda batches: batches, "id long, day date").count()
        observation.get  # noqa: B018 (the observed metrics' classes)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
