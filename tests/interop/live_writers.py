"""Writers from Iceberg's own implementation that keep committing while lakesort compacts (issue #51), each
keeping its own model of the table, and the oracle that judges the table once they stop.

The writers run on the test bed (tests/iceberg_bed.py), committing every `interval` seconds until stopped:
- `MergeWriter`: Spark SQL `MERGE INTO` in merge-on-read mode (file-scoped position deletes on the files it
  touches: updates and deletes of existing rows, and inserts);
- `UpsertWriter`: a Flink-style upsert: equality deletes by key written by Iceberg's Java writer and committed
  in a RowDelta (`IcebergSpark.equality_deletes`), then the new versions INSERTed; NULL keys included (an
  equality delete's NULL equals NULL);
- `StreamWriter`: Structured Streaming from Spark's `rate-micro-batch` source (a rate source whose batch `b`
  holds the values `b * rows .. (b + 1) * rows - 1`) appending with Iceberg's sink.

A writer's requests go through its `IcebergSpark`, whose lock keeps them and anyone else's one at a time:
the make-test case shares the session's bed (nothing else asks it anything while the job runs: lakesort runs
in its own Spark), the benchmark gives each writer a bed process of its own so that Iceberg's
`rewrite_data_files` can run beside it. A writer's own commits are sequential (one thread).

The table (`create_table`): `(id bigint, d date, v int, s string, x double)` partitioned by `d`, format v2,
merge-on-read, several data files per partition, a DELETE's position deletes already on them, NULL ids, NULL
strings and NaNs. A row's `d` follows from its id (`day_of`), so a key (id, d) names one partition, as Flink's
upsert mode requires of a partitioned table.

The oracle (`judge`): Iceberg Spark's read equals the model (multisets, floats by bits); every retained
snapshot reads whole (every data and delete file it names is read); a rewrite's snapshot (`replace`) reads
what its parent read; and no live delete file applies where it should not (`audit_deletes`).
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import random
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from iceberg_bed import BedError, EqualityDelete, IcebergSpark, assert_same_rows

RUN_ID = "lakesort.run-id"
BASE_SNAPSHOT = "lakesort.base-snapshot-id"
DAY0 = dt.date(2024, 1, 1)
NAMES = ("id", "d", "v", "s", "x")
MERGE_ON_READ = ("'format-version'='2', 'write.delete.mode'='merge-on-read', "
                 "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read', "
                 "'write.distribution-mode'='none'")
NEW_IDS = 1_000_000_000  # ids the MERGE and upsert writers insert start here
STREAM_IDS = 2_000_000_000  # the stream's: STREAM_IDS + the rate source's value

# What Iceberg says when a writer's commit lost to a concurrent one: the writer runs the statement again.
CONFLICTS = ("ValidationException", "CommitFailedException")

Key = tuple[int | None, dt.date]
Row = dict[str, Any]


# ---- the table and its model ---------------------------------------------------------------------------


def day_of(i: int, days: int) -> dt.date:
    return DAY0 + dt.timedelta(days=i % days)


def base_row(r: int, days: int) -> Row:
    """The row `create_table` inserts for `range`'s value `r` (its SQL is `BASE_SQL`)."""
    return {"id": None if r % 97 == 0 else r, "d": day_of(r, days), "v": 0,
            "s": None if r % 13 == 0 else f"s{r % 17}", "x": math.nan if r % 29 == 0 else r * 0.25}


BASE_SQL = ("SELECT CASE WHEN id % 97 = 0 THEN NULL ELSE id END AS id, "
            "date_add(DATE '2024-01-01', CAST(id % {days} AS INT)) AS d, 0 AS v, "
            "CASE WHEN id % 13 = 0 THEN NULL ELSE concat('s', CAST(id % 17 AS STRING)) END AS s, "
            "CASE WHEN id % 29 = 0 THEN double('NaN') ELSE CAST(id AS DOUBLE) * 0.25 END AS x "
            "FROM range({start}, {stop})")
BASE_DELETE = "id % 50 = 1"  # the DELETE create_table runs: position deletes before any writer starts


@dataclass
class Model:
    """The rows a writer expects the table to hold, by key (id, d): every row inserted, none deleted."""

    days: int
    rows: dict[Key, list[Row]] = field(default_factory=dict)

    def insert(self, rows: Sequence[Row]) -> None:
        for row in rows:
            self.rows.setdefault((row["id"], row["d"]), []).append(dict(row))

    def delete(self, key: Key) -> int:
        """Every row of `key` goes (NULL ids too: an equality delete's NULL equals NULL); how many."""
        return len(self.rows.pop(key, []))

    def keys(self) -> list[Key]:
        return list(self.rows)

    def count(self) -> int:
        return sum(len(rows) for rows in self.rows.values())

    def reset(self, data: pa.Table) -> None:
        """The rows `data` holds (a table's read): a benchmark goes on after a round lost or resurrected
        rows, judging the next round on its own."""
        self.rows = {}
        self.insert([{n: r[n] for n in NAMES} for r in data.to_pylist()])

    def arrow(self, schema: pa.Schema) -> pa.Table:
        return pa.Table.from_pylist([r for rows in self.rows.values() for r in rows], schema=schema)


@dataclass(frozen=True)
class LiveTable:
    name: str
    days: int  # partitions: d in DAY0 .. DAY0 + days - 1
    rows: int  # rows inserted (before the DELETE)


def create_table(spark: IcebergSpark, name: str, *, rows: int, days: int = 4, appends: int = 3) -> tuple[
        LiveTable, Model]:
    """The table, written by Iceberg Spark in `appends` INSERTs (each several files per partition) and one
    DELETE (position deletes), and its model."""
    spark.sql(f"CREATE TABLE {name} (id bigint, d date, v int, s string, x double) USING iceberg "
              f"PARTITIONED BY (d) TBLPROPERTIES ({MERGE_ON_READ})")
    bounds = [rows * i // appends for i in range(appends + 1)]
    for start, stop in itertools.pairwise(bounds):
        spark.sql(f"INSERT INTO {name} {BASE_SQL.format(days=days, start=start, stop=stop)}")
    spark.sql(f"DELETE FROM {name} WHERE {BASE_DELETE}")
    model = Model(days)
    model.insert([r for r in (base_row(i, days) for i in range(rows))
                  if r["id"] is None or r["id"] % 50 != 1])
    return LiveTable(name, days, rows), model


def literal(value: Any, sql_type: str) -> str:
    """A typed Spark SQL literal."""
    if value is None:
        return f"CAST(NULL AS {sql_type})"
    if isinstance(value, float):
        return f"double('{value!r}')" if not math.isfinite(value) else f"CAST({value!r} AS DOUBLE)"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f"CAST({value} AS {sql_type})"


TYPES = {"id": "BIGINT", "d": "DATE", "v": "INT", "s": "STRING", "x": "DOUBLE"}


def values_sql(rows: Sequence[Row], extra: Sequence[str] = ()) -> str:
    """Rows as a VALUES list of typed literals (`extra`: further string values per row, as given)."""
    return ", ".join("(" + ", ".join([*(literal(r[n], TYPES[n]) for n in NAMES), *extra[i:i + 1]]) + ")"
                     for i, r in enumerate(rows))


# ---- the writers ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Commit:
    at: float  # time.monotonic() when it returned
    inserted: int
    deleted: int  # rows of the model it removed


class Writer:
    """A writer thread committing every `interval` seconds until `stop`; subclasses make one `step`."""

    kind = "writer"

    def __init__(self, spark: IcebergSpark, table: LiveTable, model: Model, *, interval: float = 2.0,
                 batch: int = 20, seed: int = 0) -> None:
        self.spark, self.table, self.model = spark, table, model
        self.interval, self.batch = interval, batch
        self.random = random.Random(seed)
        self.commits: list[Commit] = []
        self.conflicts: list[str] = []  # its commits Iceberg refused for a concurrent one (then run again)
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"{self.kind}-writer", daemon=True)
        self._next_id = NEW_IDS + seed * 10**7  # writers of one table (the benchmark's rounds) never collide

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[Commit]:
        """Stop after the commit in progress; the writer's failure, if any, raised here."""
        self._stop.set()
        self._thread.join()
        if self.error is not None:
            raise AssertionError(f"the {self.kind} writer failed: {self.error}") from self.error
        return self.commits

    def wait_commits(self, n: int, *, timeout: float = 60.0) -> None:
        """Until the writer has made `n` commits in all (its failure raised here)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.commits) < n and self.error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the {self.kind} writer made {len(self.commits)} of {n} commits "
                                         f"in {timeout:.0f}s")
                self._changed.wait(left)
        if self.error is not None:
            raise AssertionError(f"the {self.kind} writer failed: {self.error}") from self.error

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    inserted, deleted = self.step()
                except BedError as exc:
                    if not any(c in str(exc) for c in CONFLICTS):
                        raise
                    # Another commit (the compaction's) removed files this statement read: Iceberg refused
                    # it, the table and the model are unchanged; an application would run it again.
                    self.conflicts.append(str(exc).splitlines()[0][:300])
                    continue
                with self._changed:
                    self.commits.append(Commit(time.monotonic(), inserted, deleted))
                    self._changed.notify_all()
                self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))
        except BaseException as exc:  # noqa: BLE001 - handed to the test by stop() and wait_commits()
            with self._changed:
                self.error = exc
                self._changed.notify_all()

    def step(self) -> tuple[int, int]:
        raise NotImplementedError

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def new_row(self, key: Key, version: int) -> Row:
        i, d = key
        n = self.random.randrange(1 << 20)
        return {"id": i, "d": d, "v": version, "s": None if n % 7 == 0 else f"w{n}",
                "x": math.nan if n % 11 == 0 else n / 8}

    def pick(self, count: int) -> list[Key]:
        """`count` keys the model holds, non-NULL ids only (a MERGE matches no NULL)."""
        keys = [k for k in self.model.rows if k[0] is not None]
        return self.random.sample(keys, min(count, len(keys)))

    def insert(self, rows: Sequence[Row]) -> None:
        if rows:
            self.spark.sql(f"INSERT INTO {self.table.name} VALUES {values_sql(rows)}")
            self.model.insert(rows)


class MergeWriter(Writer):
    """MERGE INTO in merge-on-read mode: of `batch` existing rows a third deleted, the rest updated (a new
    `v`, `s` and `x`), plus new rows and one with a NULL id (a MERGE never matches NULL: always inserted)."""

    kind = "merge"

    def step(self) -> tuple[int, int]:
        keys = self.pick(self.batch)
        doomed = set(keys[: len(keys) // 3])
        source: list[Row] = []
        ops: list[str] = []
        for key in keys:
            old = self.model.rows[key][0]
            source.append(self.new_row(key, old["v"] + 1) if key not in doomed else dict(old))
            ops.append("'D'" if key in doomed else "'U'")
        for _ in range(max(1, self.batch // 4)):
            i = self.new_id()
            source.append(self.new_row((i, day_of(i, self.table.days)), 0))
            ops.append("'I'")
        null_day = day_of(self.random.randrange(self.table.days), self.table.days)
        source.append(self.new_row((None, null_day), 0))
        ops.append("'I'")
        name = self.table.name
        self.spark.sql(
            f"MERGE INTO {name} t USING (SELECT * FROM VALUES {values_sql(source, ops)} "
            f"AS src({', '.join(NAMES)}, op)) s ON t.id = s.id AND t.d = s.d "
            "WHEN MATCHED AND s.op = 'D' THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET t.v = s.v, t.s = s.s, t.x = s.x "
            "WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT (id, d, v, s, x) VALUES (s.id, s.d, s.v, s.s, s.x)")
        deleted = sum(self.model.delete(k) for k in keys)
        inserted = [r for r, op in zip(source, ops, strict=True) if op != "'D'"]
        self.model.insert(inserted)
        return len(inserted), deleted


class UpsertWriter(Writer):
    """A Flink-style upsert: an equality delete by `id` of `batch` existing keys and a few new ones, one file
    per partition in one RowDelta (Iceberg's Java writer), then the new versions INSERTed (a tenth of the keys
    deleted for good); a NULL id's key every step (it deletes every NULL id of that partition)."""

    kind = "upsert"

    def step(self) -> tuple[int, int]:
        keys = self.pick(self.batch)
        for _ in range(max(1, self.batch // 4)):
            i = self.new_id()
            keys.append((i, day_of(i, self.table.days)))
        keys.append((None, day_of(self.random.randrange(self.table.days), self.table.days)))
        by_day: dict[dt.date, list[list[Any]]] = {}
        for i, d in keys:
            by_day.setdefault(d, []).append([i])
        self.spark.equality_deletes(self.table.name, [EqualityDelete(["id"], ids, partition={"d": d})
                                                      for d, ids in sorted(by_day.items())])
        deleted = 0
        for key in keys:
            deleted += self.model.delete(key)
        gone = set(self.random.sample(keys, len(keys) // 10))
        rows = [self.new_row(k, self.random.randrange(1, 100)) for k in keys if k not in gone]
        self.insert(rows)
        return len(rows), deleted


class StreamWriter:
    """Structured Streaming from the `rate-micro-batch` source into the table with Iceberg's sink, a batch of
    `batch` rows every `interval` seconds, in the bed's JVM. Its model grows by the batches the query's
    checkpoint records as committed (`commits/`), read when it stops between two batches."""

    kind = "stream"

    def __init__(self, spark: IcebergSpark, table: LiveTable, model: Model, *, interval: float = 2.0,
                 batch: int = 50, seed: int = 0) -> None:
        self.spark, self.table, self.model = spark, table, model
        self.interval, self.batch = interval, batch
        self.query = f"stream_{abs(hash((table.name, seed, time.time()))) % 10**9}"
        self.checkpoint: Path | None = None
        self.committed = 0  # batches already in the model
        self.first = STREAM_IDS + seed * 10**7  # the id of value 0: streams of one table never collide

    def select(self) -> list[str]:
        return [f"CAST(value + {self.first} AS BIGINT) AS id",
                f"date_add(DATE '2024-01-01', CAST(value % {self.table.days} AS INT)) AS d",
                "CAST(value % 5 AS INT) AS v", "concat('r', CAST(value % 7 AS STRING)) AS s",
                "CAST(value AS DOUBLE) * 0.5 AS x"]

    def start(self) -> None:
        self.checkpoint = self.spark.append_stream(
            self.query, self.table.name, source="rate-micro-batch", select=self.select(),
            options={"rowsPerBatch": str(self.batch), "numPartitions": "2"},
            trigger=f"{self.interval:g} seconds")

    def batches(self) -> list[int]:
        commits = self.checkpoint / "commits" if self.checkpoint else None
        if commits is None or not commits.is_dir():
            return []
        return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())

    def wait_commits(self, n: int, *, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.batches()) < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"the stream committed {len(self.batches())} of {n} micro-batches in "
                                     f"{timeout:.0f}s")
            time.sleep(0.2)

    @property
    def commits(self) -> list[int]:
        return self.batches()

    def stop(self) -> list[int]:
        answer = self.spark.stop_stream(self.query, idle=3 * self.interval + 5)
        if answer.get("error"):
            raise AssertionError(f"the stream failed: {answer['error']}")
        batches = self.batches()
        assert batches == list(range(len(batches))), f"the stream's committed batches are not 0..n: {batches}"
        days = self.table.days
        self.model.insert([{"id": self.first + value, "d": day_of(value, days), "v": value % 5,
                            "s": f"r{value % 7}", "x": value * 0.5}
                           for value in range(self.committed * self.batch, len(batches) * self.batch)])
        self.committed = len(batches)
        return batches


WRITERS: dict[str, type[Writer | StreamWriter]] = {
    "merge": MergeWriter, "upsert": UpsertWriter, "stream": StreamWriter}


@contextmanager
def writing(writer: Writer | StreamWriter) -> Iterator[Writer | StreamWriter]:
    """The writer running for the block's duration, stopped (and its failure raised) on leaving."""
    writer.start()
    try:
        yield writer
    finally:
        writer.stop()


# ---- the oracle ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeleteAudit:
    position_files: int
    equality_files: int
    dangling_position_files: int  # naming only data files no longer live: harmless, read by no one
    wrong: tuple[str, ...]  # delete files applying where they must not


@dataclass(frozen=True)
class Verdict:
    rows: int
    snapshots_read: int
    rewrites_checked: int  # `replace` snapshots whose read equals their parent's
    deletes: DeleteAudit


def snapshots(spark: IcebergSpark, name: str) -> list[dict[str, Any]]:
    return spark.columns(f"SELECT snapshot_id, parent_id, operation, summary FROM {name}.snapshots "
                         "ORDER BY committed_at")


def lakesort_snapshots(spark: IcebergSpark, name: str) -> list[dict[str, Any]]:
    """The snapshots lakesort committed (its run id in the summary), oldest first."""
    return [s for s in snapshots(spark, name) if RUN_ID in (s["summary"] or {})]


def judge(spark: IcebergSpark, table: LiveTable, model: Model, *, catalog: Any, since: int | None = None,
          read_all: bool = True) -> Verdict:
    """Assert the oracle: Iceberg Spark's read equals the model; every retained snapshot (only those committed
    after `since`, a snapshot id, when given) reads whole; each `replace` snapshot among them reads as its
    parent and removed no equality delete committed after the snapshot it read (`rewrite_removals`); no live
    delete file applies where it must not (`audit_deletes`). `catalog`: pyiceberg's, for the manifests'
    entries.

    Without `read_all` (a benchmark's hundred snapshots a run, each a Spark job over hundreds of small files),
    Iceberg Spark reads the rewrites, their parents and children and the last snapshot, and every file any
    retained snapshot names (Iceberg's `all_files`) must exist: what would make a snapshot unreadable."""
    name = table.name
    sequences = sequence_numbers(catalog, name)
    actual = spark.read(name)
    listed = snapshots(spark, name)
    if since is not None:
        ids = [s["snapshot_id"] for s in listed]
        listed = listed[ids.index(since) + 1:] if since in ids else listed
    lost = rewrite_removals(catalog, name, [s for s in listed if s["operation"] == "replace"], sequences)
    assert_same_rows(model.arrow(actual.schema), actual,
                     what=f"{name}: Iceberg Spark's read against the writer's model"
                          + ("".join(f"\n- {why}" for why in lost[:5]) if lost else ""))
    assert not lost, f"{name}: a rewrite removed deletes it had not applied:\n" + "\n".join(lost)
    rewrites = [s for s in listed if s["operation"] == "replace" and s["parent_id"] is not None]
    to_read = listed
    if not read_all:
        missing = [p for (p,) in spark.sql(f"SELECT DISTINCT file_path FROM {name}.all_files")
                   if not Path(p.removeprefix("file:")).exists()]
        assert not missing, (f"{name}: {len(missing)} file(s) a retained snapshot names are gone: "
                             f"{missing[:3]}")
        wanted = {s["snapshot_id"] for s in rewrites} | {s["parent_id"] for s in rewrites} | {
            c["snapshot_id"] for c in listed if c["parent_id"] in {s["snapshot_id"] for s in rewrites}}
        to_read = [s for s in listed if s["snapshot_id"] in wanted] + listed[-1:]
    for snap in to_read:  # reads whole: every data file and delete file of the snapshot read
        spark.sql(f"SELECT count(*), sum(hash(id, d, v, s, x)) FROM {name} "
                  f"VERSION AS OF {snap['snapshot_id']}")
    for snap in rewrites:
        assert_same_rows(spark.read(name, snap["parent_id"]), spark.read(name, snap["snapshot_id"]),
                         what=f"{name}: the rewrite {snap['snapshot_id']} against its parent")
    audit = audit_deletes(spark, name, sequences)
    assert not audit.wrong, f"{name}: delete files applying where they must not:\n" + "\n".join(audit.wrong)
    return Verdict(actual.num_rows, len(to_read), len(rewrites), audit)


def audit_deletes(spark: IcebergSpark, name: str, sequence_numbers: dict[int, int]) -> DeleteAudit:
    """The live delete files against the live data files, by Iceberg's rules (data sequence numbers):
    - an equality delete applies to the data files of its partition (and spec) with a lower sequence number;
      on a file a rewrite added it must not apply unless committed after the snapshot the rewrite read
      (lakesort's `lakesort.base-snapshot-id`; `sequence_numbers` gives that snapshot's number), since it
      was applied to the rewrite's inputs already;
    - a position delete applies to the files it names with a sequence number no higher than its own; one
      naming a live file it then does not apply to has lost its deletes."""
    entries = spark.columns(
        "SELECT e.snapshot_id, e.sequence_number, e.data_file.content AS content, "
        "e.data_file.file_path AS path, e.data_file.spec_id AS spec_id, "
        f"to_json(e.data_file.partition) AS part FROM {name}.entries e WHERE e.status <> 2")
    rewrites = {s["snapshot_id"]: s for s in snapshots(spark, name) if s["operation"] == "replace"}
    data = {e["path"]: e for e in entries if e["content"] == 0}
    wrong: list[str] = []
    dangling = 0
    positions = [e for e in entries if e["content"] == 1]
    equalities = [e for e in entries if e["content"] == 2]
    for delete in positions:
        named = set(pq.read_table(delete["path"].removeprefix("file:"), columns=["file_path"])
                    .column("file_path").unique().to_pylist())
        live = [data[p] for p in named if p in data]
        dangling += not live
        for f in live:
            if f["sequence_number"] > delete["sequence_number"]:
                wrong.append(f"position delete {delete['path']} (sequence {delete['sequence_number']}) names "
                             f"{f['path']} (sequence {f['sequence_number']}): it no longer applies")
    for delete in equalities:
        for f in data.values():
            if (f["spec_id"], f["part"]) != (delete["spec_id"], delete["part"]) and delete["part"] != "{}":
                continue
            if f["sequence_number"] >= delete["sequence_number"]:
                continue  # does not apply
            rewrite = rewrites.get(f["snapshot_id"])
            if rewrite is None:
                continue
            base = (rewrite["summary"] or {}).get(BASE_SNAPSHOT)
            base_sequence = sequence_numbers.get(int(base)) if base is not None else None
            if base_sequence is None:
                base_sequence = f["sequence_number"]  # Iceberg's own: its files carry the starting number
            if delete["sequence_number"] <= base_sequence:
                wrong.append(f"equality delete {delete['path']} (sequence {delete['sequence_number']}) "
                             f"applies to {f['path']} (sequence {f['sequence_number']}), written by the "
                             f"rewrite {f['snapshot_id']} from a snapshot it was already applied to")
    return DeleteAudit(len(positions), len(equalities), dangling, tuple(wrong))


def rewrite_removals(catalog: Any, name: str, rewrites: Sequence[dict[str, Any]],
                     sequences: dict[int, int]) -> list[str]:
    """The equality delete files a rewrite (a `replace` snapshot) removed though committed after the snapshot
    it read: it never applied them, so the rows they delete are back. The snapshot read is lakesort's
    `lakesort.base-snapshot-id`; for another rewrite, the data sequence number its new files carry (Iceberg's
    `use-starting-sequence-number`). (A position delete committed meanwhile may go: lakesort carries it.)"""
    table = catalog.load_table(name)
    found = []
    for rewrite in rewrites:
        snap = table.snapshot_by_id(rewrite["snapshot_id"])
        if snap is None:
            continue
        removed, added = [], []
        for manifest in snap.manifests(table.io):
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                if entry.snapshot_id != snap.snapshot_id:
                    continue
                if entry.status.name == "DELETED" and entry.data_file.content.value == 2:
                    removed.append(entry)
                elif entry.status.name == "ADDED" and entry.data_file.content.value == 0:
                    added.append(entry.sequence_number)
        base = (rewrite["summary"] or {}).get(BASE_SNAPSHOT)
        read_at = sequences.get(int(base)) if base not in (None, "None") else None
        if read_at is None:
            read_at = min(added, default=None)
        for entry in removed if read_at is not None else ():
            if entry.sequence_number > read_at:
                found.append(f"the rewrite {snap.snapshot_id} (read at sequence {read_at}) removed the "
                             f"equality delete {entry.data_file.file_path} "
                             f"of sequence {entry.sequence_number}")
    return found


def sequence_numbers(catalog: Any, name: str) -> dict[int, int]:
    """Each retained snapshot's sequence number (pyiceberg's view of the metadata)."""
    return {s.snapshot_id: s.sequence_number for s in catalog.load_table(name).metadata.snapshots}
