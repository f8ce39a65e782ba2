"""Iceberg's own Spark implementation, served to the tests: `python testbed/iceberg_spark.py CATALOG_DB WAREHOUSE`.

It runs in the test bed's own virtualenv (pyspark 4.1, beside Iceberg's Spark runtime jar and the SQLite JDBC
driver: `make testbed`), never in lakesort's (pyspark 4.2, which no Iceberg release supports yet). One Spark
session, started once per test session, opens the tests' SQLite catalog file through Iceberg's `JdbcCatalog`
under the same name pyiceberg gives it, so both implementations see the same tables.

Requests come one JSON object a line on standard input, answers go one a line to standard output (Spark's
own output goes to standard error):
- `{"sql": "..."}`: run a statement; the answer's `rows` are its result (small results: metadata tables,
  procedure outputs), each row a list of JSON values (other values as strings);
- `{"sql": "...", "arrow": "PATH"}`: run a query and write its whole result to PATH as an Arrow IPC file, which
  keeps every value as Spark read it (floats bit for bit, timestamps to the microsecond);
- `{"stream": "start", ...}` / `{"stream": "poll"|"stop", "name": ...}`: a Structured Streaming query with
  Iceberg's source (see `stream`).
A failed request answers `{"failed": "...", "type": "...", "trace": "..."}` and the server keeps serving.

Standard library, pyspark and pyarrow only: this file is not part of lakesort.
"""

from __future__ import annotations

import json
import math
import os
import sys
import traceback
from pathlib import Path
from typing import Any

CATALOG = os.environ.get("LAKESORT_BED_CATALOG", "lakesort")


def session(catalog_db: str, warehouse: str):
    from pyspark.sql import SparkSession

    jars = Path(os.environ["LAKESORT_BED_JARS"])
    prefix = f"spark.sql.catalog.{CATALOG}"
    builder = (
        SparkSession.builder.master(os.environ.get("LAKESORT_BED_MASTER", "local[2]"))
        .appName("lakesort test bed: Iceberg Spark")
        .config("spark.jars", ",".join(str(p) for p in sorted(jars.glob("*.jar"))))
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", os.environ.get("LAKESORT_BED_MEMORY", "2g"))
        .config(prefix, "org.apache.iceberg.spark.SparkCatalog")
        .config(f"{prefix}.type", "jdbc")
        .config(f"{prefix}.uri", f"jdbc:sqlite:{catalog_db}")
        .config(f"{prefix}.warehouse", warehouse)
        # Another implementation (lakesort, pyiceberg) commits between requests: never serve a cached table.
        .config(f"{prefix}.cache-enabled", "false")
        # pyiceberg's SQL catalog writes the V1 schema (with `iceberg_type`): Iceberg must not try to migrate it.
        .config(f"{prefix}.jdbc.schema-version", "V1")
        .config("spark.sql.defaultCatalog", CATALOG)
    )
    return builder.getOrCreate()


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if hasattr(value, "asDict"):  # a Row (a tuple too): a struct, by field name
        return {k: _json_value(v) for k, v in value.asDict().items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return str(value)


class Streams:
    """Structured Streaming queries reading an Iceberg table with Iceberg's source and its default options,
    each into an in-memory sink the tests poll."""

    def __init__(self, spark) -> None:
        self.spark = spark
        self.queries: dict[str, Any] = {}

    def start(self, name: str, table: str, checkpoint: str, options: dict[str, str]) -> dict[str, Any]:
        reader = self.spark.readStream.format("iceberg")
        for key, value in options.items():
            reader = reader.option(key, value)
        query = (reader.load(table).writeStream.format("memory").queryName(name)
                 .option("checkpointLocation", checkpoint).outputMode("append").start())
        self.queries[name] = query
        return {"id": str(query.id)}

    def poll(self, name: str) -> dict[str, Any]:
        query = self.queries[name]
        query.processAllAvailable()
        return self.status(name)

    def status(self, name: str) -> dict[str, Any]:
        query = self.queries[name]
        failure = query.exception()
        return {"active": query.isActive, "error": str(failure) if failure else None}

    def stop(self, name: str) -> dict[str, Any]:
        query = self.queries.pop(name)
        failure = query.exception()
        query.stop()
        return {"error": str(failure) if failure else None}


def handle(spark, streams: Streams, request: dict[str, Any]) -> dict[str, Any]:
    if "stream" in request:
        action = request["stream"]
        if action == "start":
            return streams.start(request["name"], request["table"], request["checkpoint"], request.get("options", {}))
        return getattr(streams, action)(request["name"])
    frame = spark.sql(request["sql"])
    if "arrow" in request:
        import pyarrow as pa

        data = frame.toArrow()
        with pa.OSFile(request["arrow"], "wb") as sink, pa.ipc.new_file(sink, data.schema) as writer:
            writer.write_table(data)
        return {"rows": data.num_rows}
    return {"columns": frame.columns, "rows": [[_json_value(v) for v in row] for row in frame.collect()]}


def main(argv: list[str]) -> int:
    catalog_db, warehouse = argv
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # the JVM and py4j write to fd 1 too: keep it for answers
    sys.stdout = sys.stderr
    spark = session(catalog_db, warehouse)
    spark.sparkContext.setLogLevel("WARN")
    streams = Streams(spark)
    answers.write(json.dumps({"ready": spark.version}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = handle(spark, streams, json.loads(line))
        except Exception as exc:  # noqa: BLE001 - every failure is the test's to judge
            answer = {"failed": str(exc), "type": type(exc).__name__, "trace": traceback.format_exc()[-4000:]}
        answers.write(json.dumps(answer) + "\n")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
