"""Iceberg's own Spark implementation as the tests' second opinion: write a table with it, read a table (at a
snapshot) with it, run its procedures, stream from it, write equality delete files with its Java writer.

The implementation runs in the test bed (`make testbed`, testbed/README.md): one Spark 4.1 process with
Iceberg's Spark runtime, started once per test session (`testbed/iceberg_spark.py`), which opens the tests'
SQLite catalog file through Iceberg's `JdbcCatalog` under pyiceberg's catalog name. This module is its client:
requests and answers are JSON lines over the process's pipes, and a read's rows come back as an Arrow file
written by Spark itself, so what is compared is exactly what Iceberg's reader produced.

Equality deletes (`equality_delete`, `equality_deletes`, `equality_delete_query`) are written by Iceberg's own
Parquet writer in the bed and committed with a RowDelta: Spark SQL has no statement that writes them. Position
deletes need nothing here: DELETE, UPDATE and MERGE write them on a table in merge-on-read mode.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import struct
import subprocess
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
TESTBED = REPO / ".testbed"
BED_PYTHON = TESTBED / "spark-4.1" / "bin" / "python"
BED_JARS = TESTBED / "jars"
SERVER = REPO / "testbed" / "iceberg_spark.py"
CATALOG = "lakesort"  # pyiceberg's catalog name in the tests' .pyiceberg.yaml: the Spark catalog's too


class BedError(AssertionError):
    """Iceberg Spark refused a request: its exception's class and message."""


def missing() -> str | None:
    """Why the test bed cannot start here, or None."""
    if not BED_PYTHON.is_file():
        return ("the test bed's Spark 4.1 is not installed "
                f"({BED_PYTHON.relative_to(REPO)}): run `make testbed`")
    if not any(BED_JARS.glob("iceberg-spark-runtime-*.jar")):
        return "Iceberg's Spark runtime jar is not in .testbed/jars: run `make testbed`"
    return None


@dataclass(frozen=True)
class EqualityDelete:
    """One equality delete file's request: its key `columns` and `rows` of their values (JSON values, or
    dates, datetimes and Decimals; None is NULL and deletes the rows whose key is NULL).

    `partition` is the file's partition under `spec_id` (default: the table's current spec): the source
    columns' values (`{"ts": "2024-03-01T10:00:00"}`) or the partition fields' (`{"ts_day": "2024-03-01"}`).
    None under a partitioned spec: one file per partition the rows fall in (the rows must hold the spec's
    source columns); under an unpartitioned spec the delete is global."""

    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    partition: dict[str, Any] | None = None
    spec_id: int | None = None

    def request(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "rows": [[_jsonable(v) for v in row] for row in self.rows],
                "partition": (None if self.partition is None
                              else {k: _jsonable(v) for k, v in self.partition.items()}),
                "spec_id": self.spec_id}


class IcebergSpark:
    """One Iceberg Spark process over the SQLite catalog at `catalog_db` with its warehouse at `warehouse`."""

    def __init__(self, catalog_db: Path, warehouse: str, scratch: Path) -> None:
        self.scratch = scratch
        self._lock = threading.Lock()
        self._reads = 0
        self._log = open(scratch / "iceberg-spark.log", "w")  # noqa: SIM115 - open for the process's life
        env = {**os.environ, "LAKESORT_BED_JARS": str(BED_JARS), "LAKESORT_BED_CATALOG": CATALOG}
        for name in ("SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH"):
            env.pop(name, None)  # lakesort's Spark 4.2 must not leak into the bed's 4.1
        self.process = subprocess.Popen(
            [str(BED_PYTHON), str(SERVER), str(catalog_db), warehouse], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, text=True, env=env, cwd=scratch)
        ready = self._answer()
        self.version = ready["ready"]

    def _answer(self) -> dict[str, Any]:
        line = self.process.stdout.readline()
        if not line:
            self._log.flush()
            tail = (self.scratch / "iceberg-spark.log").read_text(errors="replace")[-3000:]
            raise BedError(f"the Iceberg Spark process ended (exit {self.process.poll()}):\n{tail}")
        return json.loads(line)

    def request(self, **request: Any) -> dict[str, Any]:
        with self._lock:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            answer = self._answer()
        if "failed" in answer:
            raise BedError(f"Iceberg Spark: {answer['type']}: {answer['failed']}\n{answer['trace']}")
        return answer

    def sql(self, statement: str) -> list[list[Any]]:
        """Run one statement (Spark SQL with Iceberg's extensions); its result rows as JSON values."""
        return self.request(sql=statement)["rows"]

    def columns(self, statement: str) -> list[dict[str, Any]]:
        """Run a query; each row as a dict by column name."""
        answer = self.request(sql=statement)
        return [dict(zip(answer["columns"], row, strict=True)) for row in answer["rows"]]

    def read(self, table: str, snapshot_id: int | None = None, *, columns: str = "*") -> pa.Table:
        """The table's rows as Iceberg Spark reads them (at `snapshot_id`, else the current snapshot)."""
        self._reads += 1
        path = self.scratch / f"read-{self._reads}.arrow"
        at = f" VERSION AS OF {snapshot_id}" if snapshot_id is not None else ""
        self.request(sql=f"SELECT {columns} FROM {table}{at}", arrow=str(path))
        with pa.memory_map(str(path)) as source:
            data = pa.ipc.open_file(source).read_all()
        path.unlink()
        return data

    def call(self, procedure: str, **args: Any) -> list[dict[str, Any]]:
        """CALL lakesort.system.<procedure>(name => value, ...): strings quoted, maps as map(...)."""
        return self.columns(
            f"CALL {CATALOG}.system.{procedure}({', '.join(f'{k} => {_arg(v)}' for k, v in args.items())})"
        )

    def snapshots(self, table: str) -> list[dict[str, Any]]:
        return self.columns("SELECT snapshot_id, operation, "
                            f"summary FROM {table}.snapshots ORDER BY committed_at")

    # ---- equality deletes written by Iceberg's own writer ------------------------------------------------

    def equality_delete(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
                        partition: dict[str, Any] | None = None,
                        spec_id: int | None = None) -> dict[str, Any]:
        """Commit one equality delete file (see `EqualityDelete`); the answer: `snapshot_id`,
        `sequence_number`, `records`, `files` (each `path`, `records`, `spec_id`, `partition` path)."""
        return self.equality_deletes(table, [EqualityDelete(columns, rows, partition, spec_id)])

    def equality_deletes(self, table: str, files: Iterable[EqualityDelete]) -> dict[str, Any]:
        """Commit several equality delete files in one RowDelta (one snapshot, one sequence number)."""
        return self.request(equality_delete=table, files=[f.request() for f in files])

    def equality_delete_query(self, table: str, columns: Sequence[str], query: str, *, files: int,
                              partition: dict[str, Any] | None = None,
                              spec_id: int | None = None) -> dict[str, Any]:
        """Commit the `columns` of a Spark query's rows as about `files` equality delete files (shared among
        the partitions the rows fall in by their rows, unless `partition` names one), in one RowDelta.
        For benchmarks: the rows stay in the bed's JVM (300,000 rows in 1,000 files: about 30 s). The answer
        counts the files and records rather than describing each file."""
        return self.request(equality_delete_query=table, columns=list(columns), query=query, files=files,
                            partition=partition, spec_id=spec_id)

    def delete_files(self, table: str) -> list[dict[str, Any]]:
        """The table's live delete files as Iceberg's `delete_files` metadata table lists them (`content` 1 is
        position deletes, 2 equality deletes)."""
        return self.columns(f"SELECT content, file_path, record_count, spec_id, equality_ids, "
                            f"referenced_data_file FROM {table}.delete_files")

    # ---- Structured Streaming with Iceberg's source --------------------------------------------------------

    def stream(self, name: str, table: str, *, options: dict[str, str] | None = None) -> None:
        self.request(stream="start", name=name, table=table,
                     checkpoint=str(self.scratch / f"checkpoint-{name}"), options=options or {})

    def poll(self, name: str) -> dict[str, Any]:
        """Process everything available, then the query's state (`active`, `error`)."""
        return self.request(stream="poll", name=name)

    def stop_stream(self, name: str, *, idle: float = 0.0) -> dict[str, Any]:
        """Stop the query; with `idle`, once it is between micro-batches (waiting up to that many seconds)."""
        return self.request(stream="stop", name=name, idle=idle)

    def append_stream(self, name: str, into: str, *, source: str, options: dict[str, str] | None = None,
                      select: Sequence[str] = ("*",), trigger: str = "2 seconds") -> Path:
        """Start a Structured Streaming query from a built-in source (`rate`, `rate-micro-batch`) appending
        `select`'s columns to the Iceberg table `into` with Iceberg's sink, a micro-batch every `trigger`;
        its checkpoint directory (`commits/` holds the micro-batches it committed)."""
        checkpoint = self.scratch / f"checkpoint-{name}"
        self.request(stream="append", name=name, into=into, checkpoint=str(checkpoint), source=source,
                     options=options or {}, select=list(select), trigger=trigger)
        return checkpoint

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self._log.close()


def _jsonable(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def _arg(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "map(" + ", ".join(f"{_arg(k)}, {_arg(v)}" for k, v in value.items()) + ")"
    return "'" + str(value).replace("'", "\\'") + "'"


# ---- the oracle: multisets of rows, floats by their bits --------------------------------------------------


def _canonical(value: Any) -> Any:
    if isinstance(value, float):
        return ("f64", struct.pack(">d", value))
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    return value


def row_multiset(data: pa.Table) -> Counter:
    """Each row (by column name, in the table's column order) counted; floats compared by bits (NaN == NaN
    of the same payload, -0.0 != 0.0). float32 values are widened to double exactly by pyarrow's to_pylist."""
    names = data.column_names
    return Counter(tuple(_canonical(row[n]) for n in names) for row in data.to_pylist())


def assert_same_rows(before: pa.Table, after: pa.Table, *, what: str = "") -> None:
    assert before.schema == after.schema, (
        f"{what}: the schema Iceberg Spark reads changed:\n{before.schema}\n{after.schema}")
    a, b = row_multiset(before), row_multiset(after)
    if a != b:
        lost, gained = a - b, b - a
        raise AssertionError(f"{what}: {sum(lost.values())} row(s) lost, {sum(gained.values())} gained; "
                             f"e.g. lost {list(lost)[:3]}, gained {list(gained)[:3]}")


def read_every_snapshot(bed: IcebergSpark, table: str, snapshot_ids: Iterable[int]) -> dict[int, pa.Table]:
    return {sid: bed.read(table, sid) for sid in snapshot_ids}
