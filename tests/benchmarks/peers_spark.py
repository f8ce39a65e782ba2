"""The peers' side of bench_peers.py: Iceberg's rewrite_data_files and Delta's OPTIMIZE,
one Spark session each.

    .testbed/spark-4.1/bin/python tests/benchmarks/peers_spark.py REQUEST.json

It runs in the test bed's Spark 4.1 virtualenv (`make testbed`), never in lakesort's (pyspark 4.2, which no
Iceberg or Delta release supports yet), so it imports the standard library and pyspark only. The request says
which action, the master and Spark conf (the same as lakesort's compaction gets), where the jars are, and the
action's arguments:

- `iceberg_rewrite`: `CALL lakesort.system.rewrite_data_files(...)` through Iceberg's JdbcCatalog on
  pyiceberg's SQLite catalog file (as testbed/iceberg_spark.py opens it), with `strategy`,
  `sort_order` and `options`;
- `delta_write`: the given Parquet files' rows written as a Delta table (untimed set-up: the same rows as the
  Iceberg table's), partitioned by a column computed from another when asked (Delta partitions by a column's
  values only, and keeps that column out of the data files);
- `delta_optimize`: `OPTIMIZE delta.`path` ZORDER BY (...)`, then the table's live files.

The answer is one line `PEERS_RESULT {json}` on standard output, after Spark has stopped (so that the event
log is complete); Spark's own output goes to standard error.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def session(request: dict):
    from pyspark.sql import SparkSession

    jars = sorted(str(p) for d in request["jar_dirs"] for p in Path(d).glob("*.jar"))
    builder = (SparkSession.builder.master(request["master"]).appName(f"bench-peers {request['action']}")
               .config("spark.jars", ",".join(jars)))
    for key, value in request["conf"].items():
        builder = builder.config(key, value)
    if request["action"] == "iceberg_rewrite":
        prefix = "spark.sql.catalog.lakesort"
        builder = (builder.config("spark.sql.extensions",
                                  "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
                   .config(prefix, "org.apache.iceberg.spark.SparkCatalog")
                   .config(f"{prefix}.type", "jdbc")
                   .config(f"{prefix}.uri", f"jdbc:sqlite:{request['catalog_db']}")
                   .config(f"{prefix}.warehouse", request["warehouse"])
                   .config(f"{prefix}.cache-enabled", "false")
                   # pyiceberg's SQL catalog writes the V1 schema: Iceberg must not try to migrate it.
                   .config(f"{prefix}.jdbc.schema-version", "V1"))
    else:
        builder = (builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
                   .config("spark.sql.catalog.spark_catalog",
                           "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
    return builder.getOrCreate()


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def iceberg_rewrite(spark, request: dict) -> dict:
    options = ", ".join(f"{_quote(k)}, {_quote(str(v))}" for k, v in request["options"].items())
    sql = (f"CALL lakesort.system.rewrite_data_files(table => {_quote(request['table'])}, "
           f"strategy => {_quote(request['strategy'])}, sort_order => {_quote(request['sort_order'])}, "
           f"options => map({options}))")
    row = spark.sql(sql).collect()[0].asDict()
    return {"sql": sql, "procedure": {k: v for k, v in row.items() if isinstance(v, (int, float, str))}}


def delta_write(spark, request: dict) -> dict:
    from pyspark.sql import functions as F

    frame = spark.read.parquet(*request["inputs"])
    writer = None
    if request.get("partition_column"):
        name, expression = request["partition_column"]
        frame = frame.withColumn(name, F.expr(expression))
        writer = frame.write.format("delta").partitionBy(name)
    else:
        writer = frame.write.format("delta")
    writer.mode("overwrite").save(request["path"])
    return {"rows": spark.read.format("delta").load(request["path"]).count()}


def delta_optimize(spark, request: dict) -> dict:
    keys = ", ".join(f"`{k}`" for k in request["zorder"])
    sql = f"OPTIMIZE delta.`{request['path']}` ZORDER BY ({keys})"
    metrics = spark.sql(sql).collect()[0]["metrics"].asDict()
    files = spark.read.format("delta").load(request["path"]).inputFiles()
    return {"sql": sql, "files": [f.removeprefix("file:") for f in files],
            "procedure": {k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}}


ACTIONS = {"iceberg_rewrite": iceberg_rewrite, "delta_write": delta_write, "delta_optimize": delta_optimize}


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    started = time.perf_counter()
    spark = session(request)
    spark.sparkContext.setLogLevel("WARN")
    ready = time.perf_counter()
    answer = ACTIONS[request["action"]](spark, request)
    answer["action_seconds"] = time.perf_counter() - ready
    answer["session_seconds"] = ready - started
    spark.stop()
    print("PEERS_RESULT " + json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
