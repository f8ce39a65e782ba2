"""Iceberg's own Spark implementation, served to the tests:
`python testbed/iceberg_spark.py CATALOG_DB WAREHOUSE`.

It runs in the test bed's own virtualenv (pyspark 4.1, beside Iceberg's Spark runtime jar and the SQLite JDBC
driver: `make testbed`), never in lakesort's (pyspark 4.2, which no Iceberg release supports yet). One Spark
session, started once per test session, opens the tests' SQLite catalog file through Iceberg's `JdbcCatalog`
under the same name pyiceberg gives it, so both implementations see the same tables.

Requests come one JSON object a line on standard input, answers go one a line to standard output (Spark's
own output goes to standard error):
- `{"sql": "..."}`: run a statement; the answer's `rows` are its result (small results: metadata tables,
  procedure outputs), each row a list of JSON values (other values as strings);
- `{"sql": "...", "arrow": "PATH"}`: run a query and write its whole result to PATH as an Arrow IPC file,
  which keeps every value as Spark read it (floats bit for bit, timestamps to the microsecond);
- `{"stream": "start", ...}` / `{"stream": "poll"|"stop", "name": ...}`: a Structured Streaming query with
  Iceberg's source (see `stream`); `{"stream": "append", "name": ..., "into": TABLE, "source": "rate", ...}`:
  one from a built-in source appending to an Iceberg table with Iceberg's sink (see `Streams.append`);
- `{"equality_delete": TABLE, "columns": [...], "rows": [[...], ...], "partition": {...} | null,
  "spec_id": N}`, or `{"equality_delete": TABLE, "files": [{"columns": ..., "rows": ..., "partition": ...,
  "spec_id": ...}, ...]}`:
  equality delete files written by Iceberg's own writer and committed in one RowDelta (see `EqualityDeletes`);
- `{"equality_delete_query": TABLE, "columns": [...], "query": "SELECT ...", "files": N}`: the same for the
  rows of a Spark query, spread over about N files (benchmarks: hundreds of thousands of rows).
Position deletes need no request of their own: Spark SQL's DELETE, UPDATE and MERGE write them on a table in
merge-on-read mode.
A failed request answers `{"failed": "...", "type": "...", "trace": "..."}` and the server keeps serving.

Standard library, pyspark and pyarrow only: this file is not part of lakesort.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
import traceback
import uuid
from decimal import Decimal
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
        # pyiceberg's SQL catalog writes the V1 schema (with `iceberg_type`):
        # Iceberg must not try to migrate it.
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

    def append(self, name: str, into: str, checkpoint: str, source: str, options: dict[str, str],
               select: list[str], trigger: str) -> dict[str, Any]:
        """A query from a built-in source (`rate`, `rate-micro-batch`) appending `select`'s columns to the
        Iceberg table `into` with Iceberg's streaming sink, one micro-batch every `trigger`."""
        reader = self.spark.readStream.format(source)
        for key, value in options.items():
            reader = reader.option(key, value)
        query = (reader.load().selectExpr(*select).writeStream.format("iceberg").queryName(name)
                 .outputMode("append").option("checkpointLocation", checkpoint)
                 # a micro-batch's rows are in no partition order: one open file per partition
                 .option("fanout-enabled", "true")
                 .trigger(processingTime=trigger).toTable(into))
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

    def stop(self, name: str, idle: float = 0.0) -> dict[str, Any]:
        """Stop the query; with `idle`, first wait (up to that many seconds) for it to be between two
        micro-batches, so that no batch is cut off halfway through its commit."""
        query = self.queries[name]
        deadline = time.monotonic() + idle
        while time.monotonic() < deadline and query.isActive and query.status["isTriggerActive"]:
            time.sleep(0.05)
        self.queries.pop(name)
        failure = query.exception()
        query.stop()
        return {"error": str(failure) if failure else None}


class EqualityDeletes:
    """Equality delete files written by Iceberg's own Parquet writer and committed in one RowDelta
    (`table.newRowDelta().addDeletes(...)`), as an engine writing equality deletes (Flink, say) would.

    The writer is the one `FormatModelRegistry` holds for Spark's InternalRow (Iceberg's Spark writers use
    it). Spark makes the rows: py4j cannot make correctly typed Java values itself (a small Python int arrives
    as an Integer where the writer needs a Long), Spark's casts to the table's types can. A request's JSON
    rows become a local relation (no Spark job); a query's rows are collected in the bed's JVM and reach the
    writer a file's worth at a time, never row by row through Python. Each file still costs about twenty py4j
    calls: 300,000 rows in 1,000 files took about 30 s on a busy 2-core machine, most of it there.

    A file's partition, under the table's current spec or the one `spec_id` names:
    - given: `{"ts": "2024-03-01T10:00:00", "id": 3}` (the source columns' values; Iceberg's PartitionKey
      applies the transforms) or `{"ts_day": "2024-03-01", "id_bucket": 1}` (the partition fields' values);
    - null under a partitioned spec: each row's own, by Iceberg's transform functions in Spark (the rows must
      hold the spec's source columns), one file per partition the rows fall in (a query's: or more);
    - none under an unpartitioned spec: the delete applies to every data file of the table (a global delete).
    """

    def __init__(self, spark) -> None:
        self.spark = spark
        jvm = self.jvm = spark._jvm
        self.gateway = spark.sparkContext._gateway
        self.iceberg = jvm.org.apache.iceberg
        self.registry = self.iceberg.formats.FormatModelRegistry
        self.parquet = self.iceberg.FileFormat.PARQUET
        self.internal_row = jvm.org.apache.spark.sql.catalyst.InternalRow._java_lang_class
        # FileWriter.write(Iterable): py4j alone picks the erased write(Object) overload,
        # so call it reflectively.
        parameter = self.gateway.new_array(jvm.java.lang.Class, 1)
        parameter[0] = jvm.java.lang.Iterable._java_lang_class
        self.write_all = self.iceberg.io.FileWriter._java_lang_class.getMethod("write", parameter)
        self.arguments = self.gateway.new_array(jvm.java.lang.Object, 1)

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        bulk = "equality_delete_query" in request
        name = request["equality_delete_query"] if bulk else request["equality_delete"]
        table = self.iceberg.spark.Spark3Util.loadIcebergTable(self.spark._jsparkSession, name)
        target = Target(self, table, name)
        if bulk:
            written = self._query(target, request)
        else:
            written = [f for one in request.get("files") or [request] for f in self._rows(target, one)]
        if not written:
            raise ValueError(f"no rows to delete from {name}: no equality delete file written")
        delta = table.newRowDelta()
        for delete_file, _ in written:
            delta.addDeletes(delete_file)
        delta.commit()
        snapshot = table.currentSnapshot()
        answer = {"snapshot_id": snapshot.snapshotId(), "sequence_number": snapshot.sequenceNumber(),
                  "records": sum(n for _, (_, n, _) in written)}
        if bulk:  # a thousand files described would cost more py4j calls than writing them did
            answer["files"] = len(written)
        else:
            answer["files"] = [{"path": delete_file.location(), "records": n, "spec_id": spec_id,
                                "partition": path}
                               for delete_file, (spec_id, n, path) in written]
        answer["seconds"] = round(time.monotonic() - started, 3)
        return answer

    def _rows(self, target: Target, request: dict[str, Any]) -> list[Any]:
        """One file of the request's rows (or one per partition they fall in)."""
        from pyspark.sql import functions as F

        columns, rows = request["columns"], request["rows"]
        spec = target.spec(request.get("spec_id"))
        for row in rows:
            if len(row) != len(columns):
                raise ValueError(f"a row of {len(row)} values for the {len(columns)} "
                                 f"columns {columns}: {row}")
        if spec.isUnpartitioned():
            groups = {(): (None, rows)}
        elif request.get("partition") is not None:
            groups = {(): (target.partitions(spec).of(request["partition"]), rows)}
        else:
            fields = _partition_exprs(spec, target.schema, columns)
            frame = self._values(columns, rows, target.types)
            keys = frame.select(*[_as_text(F.expr(e), None).alias(f"__p{i}")
                                  for i, (_, e) in enumerate(fields)])
            groups = {}
            for key, row in zip((tuple(k) for k in keys.collect()), rows, strict=True):
                groups.setdefault(key, (None, []))[1].append(row)
            partitions = target.partitions(spec)
            groups = {key: (partitions.of_fields(dict(zip((f for f, _ in fields), key, strict=True))), group)
                      for key, (_, group) in groups.items()}
        written = []
        for partition, group in groups.values():
            if group:
                frame = self._values(columns, group, target.types)
                delete_file = self._file(target, spec, partition, columns, frame._jdf.schema(),
                                         self._collect(frame))
                path = spec.partitionToPath(partition) if partition is not None else ""
                written.append((delete_file, (spec.specId(), len(group), path)))
        return written

    def _values(self, columns: list[str], rows: list[list[Any]], types):
        """JSON rows as a local relation of the table's types: every value as text, cast by Spark (ISO dates
        and timestamps, 'NaN', numbers; JSON null stays NULL)."""
        def literal(value: Any) -> str:
            text = _text(value)
            return "NULL" if text is None else "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

        names = [f"c{i}" for i in range(len(columns))]
        values = ", ".join("(" + ", ".join(literal(v) for v in row) + ")" for row in rows)
        casts = ", ".join(f"CAST({n} AS {types[c].simpleString()}) AS `{c}`" for n, c in zip(names, columns))
        return self.spark.sql(f"SELECT {casts} FROM VALUES {values} AS v({', '.join(names)})")

    def _collect(self, frame):
        """The frame's rows, collected in the JVM, as a java.util.List of Spark's InternalRows."""
        scala = self.jvm.scala
        collected = frame._jdf.queryExecution().executedPlan().executeCollect()
        return scala.jdk.javaapi.CollectionConverters.asJava(
            scala.collection.immutable.ArraySeq.unsafeWrapArray(collected)
        )

    def _query(self, target: Target, request: dict[str, Any]) -> list[Any]:
        """The `columns` of a query's rows (its other columns may be a partition's sources) as about `files`
        files, shared among the partitions the rows fall in by their rows."""
        from pyspark.sql import functions as F

        columns, files = request["columns"], request["files"]
        spec = target.spec(request.get("spec_id"))
        partitions = target.partitions(spec)
        frame = self.spark.sql(request["query"])
        fixed, fields = None, []
        if spec.isUnpartitioned():
            pass
        elif request.get("partition") is not None:
            fixed = partitions.of(request["partition"])
        else:
            fields = _partition_exprs(spec, target.schema, frame.columns)
            frame = frame.select("*", *[F.expr(e).alias(f"__p{i}") for i, (_, e) in enumerate(fields)])
        keys = [f"__p{i}" for i in range(len(fields))]
        # One computation for the partitions' sizes and their rows: the two must agree.
        frame = frame.localCheckpoint()
        sizes = frame.groupBy(*keys).agg(F.count(F.lit(1)).alias("__rows"),
                                         *[F.first(_as_text(F.col(k), None)).alias(f"{k}_text")
                                           for k in keys])
        sizes = (sizes.orderBy(*keys) if keys else sizes).collect()
        ordered = frame.orderBy(*keys, *columns).select(*[F.col(c).cast(target.types[c]).alias(c)
                                                          for c in columns])
        rows_in_jvm, engine_schema = self._collect(ordered), ordered._jdf.schema()
        total = sum(s["__rows"] for s in sizes)
        written, offset = [], 0
        for size in sizes:
            n = size["__rows"]
            if not n:
                continue
            partition = fixed if not keys else partitions.of_fields(
                {f: size[f"{k}_text"] for (f, _), k in zip(fields, keys, strict=True)})
            pieces = min(n, max(1, round(files * n / total)))
            for i in range(pieces):
                start, end = offset + n * i // pieces, offset + n * (i + 1) // pieces
                delete_file = self._file(target, spec, partition, columns, engine_schema,
                                         rows_in_jvm.subList(start, end))
                written.append((delete_file, (None, end - start, None)))
            offset += n
        return written

    def _file(self, target: Target, spec, partition, columns: list[str], engine_schema, batch):
        """One equality delete file of `batch` (a java.util.List of InternalRows of `engine_schema`)."""
        delete_schema, ids = target.delete_schema(columns)
        output = (target.outputs.newOutputFile(spec, partition) if partition is not None
                  else target.outputs.newOutputFile())
        writer = (self.registry.equalityDeleteWriteBuilder(self.parquet, self.internal_row, output)
                  .setAll(target.properties).metricsConfig(target.metrics)
                  .schema(delete_schema).engineSchema(engine_schema).spec(spec).partition(partition)
                  .equalityFieldIds(ids).build())
        self.arguments[0] = batch
        try:
            self.write_all.invoke(writer, self.arguments)
        finally:
            writer.close()
        return writer.toDeleteFile()


class Target:
    """What a request's files share: the table, its schema and Spark types, where its files go, the writer's
    properties, and the delete schemas and specs asked for (each looked up once: py4j calls are what cost)."""

    def __init__(self, deletes: EqualityDeletes, table, name: str) -> None:
        iceberg, self.jvm, self.gateway = deletes.iceberg, deletes.jvm, deletes.gateway
        self.table, self.name = table, name
        self.schema = table.schema()
        self.types = {f.name: f.dataType for f in deletes.spark.table(name).schema.fields}
        # Where the files go: the table's data location, under each file's partition path.
        self.outputs = (iceberg.io.OutputFileFactory.builderFor(table, 0, int(time.time() * 1000) % 2**31)
                        .format(deletes.parquet).operationId(str(uuid.uuid4())).suffix("eq-deletes").build())
        self.properties = table.properties()
        self.metrics = iceberg.MetricsConfig.forTable(table)
        self._schemas: dict[tuple[str, ...], Any] = {}
        self._specs: dict[int | None, Any] = {}
        self._partitions: dict[int, Partitions] = {}

    def spec(self, spec_id: int | None):
        if spec_id not in self._specs:
            spec = self.table.specs().get(spec_id) if spec_id is not None else self.table.spec()
            if spec is None:
                raise ValueError(f"{self.name} has no partition spec {spec_id}")
            self._specs[spec_id] = spec
        return self._specs[spec_id]

    def partitions(self, spec) -> Partitions:
        spec_id = spec.specId()
        if spec_id not in self._partitions:
            self._partitions[spec_id] = Partitions(self.jvm, spec, self.schema)
        return self._partitions[spec_id]

    def delete_schema(self, columns: list[str]):
        """The files' rows' schema (the key columns, in the order given) and their equality field ids."""
        key = tuple(columns)
        if key not in self._schemas:
            fields = [self.schema.findField(c) for c in columns]
            if not fields or any(f is None for f in fields):
                raise ValueError(f"{self.name}: no column "
                                 f"{[c for c, f in zip(columns, fields) if f is None] or columns}")
            ids = self.gateway.new_array(self.jvm.int, len(fields))
            for i, field in enumerate(fields):
                ids[i] = field.fieldId()
            self._schemas[key] = (self.jvm.org.apache.iceberg.Schema(self.jvm.java.util.ArrayList(fields)),
                                  ids)
        return self._schemas[key]


class Partitions:
    """A spec's partitions (StructLikes Iceberg's writer takes) from the source columns' values, Iceberg's
    PartitionKey applying the transforms, or from the partition fields' own values, both by name."""

    def __init__(self, jvm, spec, schema) -> None:
        self.iceberg = jvm.org.apache.iceberg
        self.spec, self.schema = spec, schema
        self.key = self.iceberg.PartitionKey(spec, schema)
        self.columns = {str(f.name()): (f.fieldId(), str(f.type().toString())) for f in schema.columns()}
        self.type = spec.partitionType()
        self.fields = {str(f.name()): (f.fieldId(), str(f.type().toString())) for f in self.type.fields()}

    def of(self, values: dict[str, Any]):
        """The partition of `values`: source columns' (all names columns) or partition fields'
        (all names those)."""
        if all(k in self.columns for k in values):
            record = self.iceberg.SingleValueParser.fromJson(self.schema.asStruct(),
                                                             self._json(self.columns, values))
            self.key.partition(record)
            return self.key.copy()
        if all(k in self.fields for k in values):
            return self.of_fields(values)
        raise ValueError("a partition names columns or partition fields, not both or others: "
                         f"{sorted(values)} (partition fields {sorted(self.fields)})")

    def of_fields(self, values: dict[str, Any]):
        return self.iceberg.SingleValueParser.fromJson(self.type, self._json(self.fields, values))

    @staticmethod
    def _json(fields: dict[str, tuple[int, str]], values: dict[str, Any]) -> str:
        """A struct in Iceberg's single-value JSON (SingleValueParser): values by field id, NULLs left out."""
        return json.dumps({str(fields[k][0]): _single_value(fields[k][1], v) for k, v in values.items()
                           if v is not None})


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return ("NaN" if math.isnan(value)
                else ("Infinity" if value > 0 else "-Infinity") if math.isinf(value) else repr(value))
    return str(value)


def _as_text(column, data_type):
    """A value as text Iceberg's single-value JSON takes (hex for bytes), made by Spark
    (in its UTC session)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    return F.hex(column) if isinstance(data_type, BinaryType) else column.cast("string")


def _single_value(iceberg_type: str, value: Any) -> Any:
    """A value in Iceberg's single-value JSON (SingleValueParser) for a type named as Iceberg prints it."""
    if value is None:
        return None
    if iceberg_type in ("int", "long"):
        return int(value)
    if iceberg_type in ("float", "double"):
        return float(value)
    if iceberg_type == "boolean":
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if iceberg_type.startswith("timestamp"):
        text = str(value).replace(" ", "T")
        if iceberg_type.startswith("timestamptz") and not re.search(r"(Z|[+-]\d\d:\d\d)$", text):
            text += "+00:00"  # the session's time zone is UTC
        return text
    if iceberg_type.startswith("decimal"):
        scale = int(iceberg_type.rstrip(")").split(",")[1])
        return str(Decimal(str(value)).quantize(Decimal(1).scaleb(-scale)))
    return str(value)


def _partition_exprs(spec, schema, available: list[str]) -> list[tuple[str, str]]:
    """Each partition field's name and its value as Spark SQL over the rows, by Iceberg's own transform
    functions (in the catalog's `system` namespace)."""
    fields = []
    for field in spec.fields():
        source = schema.findColumnName(field.sourceId())
        transform = str(field.transform().toString())
        if source not in available and transform != "void":
            raise ValueError(f"the rows lack {source!r}, a source column of the partition spec {spec}: "
                             f"give the partition")
        sized = re.fullmatch(r"(bucket|truncate)\[(\d+)\]", transform)
        if transform == "identity":
            expr = f"`{source}`"
        elif sized:
            expr = f"{CATALOG}.system.{sized[1]}({sized[2]}, `{source}`)"
        elif transform in ("year", "month", "day", "hour"):
            expr = f"{CATALOG}.system.{transform}s(`{source}`)"
        elif transform == "void":
            expr = "CAST(NULL AS INT)"
        else:
            raise ValueError(f"no Spark function for the transform {transform}")
        fields.append((str(field.name()), expr))
    return fields


def handle(spark, streams: Streams, deletes: EqualityDeletes, request: dict[str, Any]) -> dict[str, Any]:
    if "equality_delete" in request or "equality_delete_query" in request:
        return deletes.handle(request)
    if "stream" in request:
        action = request["stream"]
        if action == "start":
            return streams.start(request["name"], request["table"], request["checkpoint"],
                                 request.get("options", {}))
        if action == "append":
            return streams.append(request["name"], request["into"], request["checkpoint"], request["source"],
                                  request.get("options", {}), request.get("select") or ["*"],
                                  request.get("trigger", "2 seconds"))
        if action == "stop":
            return streams.stop(request["name"], float(request.get("idle", 0.0)))
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
    # the JVM and py4j write to fd 1 too: keep it for answers
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    spark = session(catalog_db, warehouse)
    spark.sparkContext.setLogLevel("WARN")
    streams = Streams(spark)
    deletes = EqualityDeletes(spark)
    answers.write(json.dumps({"ready": spark.version}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = handle(spark, streams, deletes, json.loads(line))
        except Exception as exc:  # noqa: BLE001 - every failure is the test's to judge
            answer = {"failed": str(exc), "type": type(exc).__name__, "trace": traceback.format_exc()[-4000:]}
        answers.write(json.dumps(answer) + "\n")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
