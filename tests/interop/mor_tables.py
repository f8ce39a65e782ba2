"""Merge-on-read Iceberg tables written by Iceberg's own implementation (the test bed), each with the rows it
must read, computed here in Python independently of any Iceberg reader.

Position deletes come from Spark SQL's DELETE, UPDATE and MERGE INTO on format-version 2 tables in
merge-on-read mode; equality deletes from Iceberg's own Java writer (`IcebergSpark.equality_delete*`), since
Spark SQL writes none. Every table has several data files per partition (one per batch of rows) and data files
no delete applies to. Each builder returns a `MorTable`: its name, its expected rows and the kinds of delete
files it holds.

The expected rows follow Iceberg's rules, kept by `Model`: a position delete removes the rows a statement
matched; an equality delete removes the rows its keys equal (NULL equals NULL) in the data files committed
before it (a lower sequence number: a row inserted again afterwards stays), of its own spec and partition, or
of every spec and partition when its spec is unpartitioned.

Iceberg 1.12 on format v2 writes Parquet position delete files (no deletion vectors: those are v3's), one per
data file by default (`write.delete.granularity` = file), and a later DELETE on the same data file replaces
that file's position delete file with one holding both deletes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from iceberg_bed import EqualityDelete

COLUMNS = "(id bigint, k int, s string, d date, ts timestamp, x double)"
NAMES = ("id", "k", "s", "d", "ts", "x")
# Distribution mode none: an INSERT's Spark tasks each write their own file per partition (several data files
# per partition from one statement, which keeps the tables quick to build).
MERGE_ON_READ = ("'format-version'='2', 'write.delete.mode'='merge-on-read', "
                 "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read', "
                 "'write.distribution-mode'='none'")
DAY0 = dt.date(2024, 1, 1)
TS0 = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
BATCH = 100  # rows an INSERT's task writes: one data file per partition each

# `row(i)` in Spark SQL, over `range(...)`'s `id`: NULLs in k and s, five dates,
# four days of timestamps, NaNs.
ROWS_SQL = (
    "SELECT id, CASE WHEN id % 11 = 0 THEN NULL ELSE CAST(id % 37 AS INT) END AS k, "
    "CASE WHEN id % 13 = 0 THEN NULL ELSE concat('s', CAST(id % 17 AS STRING)) END AS s, "
    "date_add(DATE '2024-01-01', CAST(id % 5 AS INT)) AS d, "
    "TIMESTAMP '2024-03-01 00:00:00' + make_interval(0, 0, 0, CAST(id % 4 AS INT), CAST(id % 7 AS INT), "
    "CAST(id % 60 AS INT), 0) AS ts, "
    "CASE WHEN id % 29 = 0 THEN double('NaN') ELSE CAST(id AS DOUBLE) * 0.25 END AS x FROM {source}")


def row(i: int) -> dict[str, Any]:
    """The row `ROWS_SQL` makes of id `i`."""
    return {"id": i, "k": None if i % 11 == 0 else i % 37, "s": None if i % 13 == 0 else f"s{i % 17}",
            "d": DAY0 + dt.timedelta(days=i % 5),
            "ts": TS0 + dt.timedelta(days=i % 4, hours=i % 7, minutes=i % 60),
            "x": float("nan") if i % 29 == 0 else i * 0.25}


@dataclass(frozen=True)
class MorTable:
    name: str
    expected: list[dict[str, Any]]  # the rows Iceberg must read, by column name
    # the kinds of the live delete files: "position" (content 1), "equality" (content 2)
    deletes: frozenset[str]
    equality_commits: tuple[dict[str, Any], ...] = ()  # the bed's answers to the equality delete requests

    def expected_arrow(self, schema: pa.Schema) -> pa.Table:
        """The expected rows as a table of `schema` (that of Iceberg Spark's read), for `assert_same_rows`."""
        return pa.Table.from_pylist(self.expected, schema=schema)


# ---- the model: Iceberg's rules for which rows a table holds ---------------------------------------------


@dataclass
class Held:
    row: dict[str, Any]
    spec_id: int  # the spec of the data file holding the row
    partition: tuple  # that file's partition, as the spec's `partition_of` makes it


Partitioner = Callable[[dict[str, Any]], tuple]


@dataclass
class Model:
    """The rows a table holds, each with its data file's spec and partition,
    changed as Iceberg's rules say."""

    specs: dict[int, Partitioner | None]  # spec id -> a row's partition (None: unpartitioned)
    spec_id: int = 0  # the table's current spec, where new data files go
    held: list[Held] = field(default_factory=list)

    def evolve(self, spec_id: int, partition_of: Partitioner | None) -> None:
        self.specs[spec_id] = partition_of
        self.spec_id = spec_id

    def partition(self, spec_id: int, values: dict[str, Any]) -> tuple:
        partition_of = self.specs[spec_id]
        return () if partition_of is None else partition_of(values)

    def insert(self, rows: Iterable[dict[str, Any]]) -> None:
        self.held += [Held(dict(r), self.spec_id, self.partition(self.spec_id, r)) for r in rows]

    def delete(self, where: Callable[[dict[str, Any]], bool]) -> None:
        """DELETE (position deletes): the rows matched go."""
        self.held = [h for h in self.held if not where(h.row)]

    def update(self, where: Callable[[dict[str, Any]], bool],
               change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """UPDATE (position deletes and new data files under the current spec)."""
        changed = [change(dict(h.row)) for h in self.held if where(h.row)]
        self.held = [h for h in self.held if not where(h.row)]
        self.insert(changed)

    def equality_delete(self, columns: Sequence[str], keys: Iterable[Sequence[Any]], *, spec_id: int,
                        partition: dict[str, Any] | None = None) -> None:
        """An equality delete file under `spec_id`: in `partition` (its source columns' values), else in each
        key's own partition (the keys hold the source columns); global when the spec is unpartitioned."""
        keys = [tuple(k) for k in keys]
        if self.specs[spec_id] is None:
            scoped = {None: set(keys)}
        elif partition is not None:
            scoped = {self.partition(spec_id, partition): set(keys)}
        else:
            scoped: dict[tuple | None, set] = {}
            for key in keys:
                scoped.setdefault(self.partition(spec_id, dict(zip(columns, key, strict=True))),
                                  set()).add(key)

        def deleted(h: Held) -> bool:
            key = tuple(h.row[c] for c in columns)
            if None in scoped:
                return key in scoped[None]
            return h.spec_id == spec_id and key in scoped.get(h.partition, ())

        self.held = [h for h in self.held if not deleted(h)]

    def rows(self) -> list[dict[str, Any]]:
        return [{n: h.row[n] for n in NAMES} for h in self.held]


def by_day(values: dict[str, Any]) -> tuple:
    """days(ts), of a row or of a partition given by its field's value (`ts_day`)."""
    if "ts" not in values:
        return (values["ts_day"],)
    return (None if values["ts"] is None else values["ts"].date(),)


# ---- building blocks ---------------------------------------------------------------------------------------


def _create(bed, table: str, partitioned_by: str | None, properties: str = "") -> str:
    name = bed.name(table)
    by = f" PARTITIONED BY ({partitioned_by})" if partitioned_by else ""
    extra = f", {properties}" if properties else ""
    bed.spark.sql(f"CREATE TABLE {name} {COLUMNS} USING iceberg{by} TBLPROPERTIES ({MERGE_ON_READ}{extra})")
    return name


def _insert(bed, name: str, model: Model, ids: Sequence[int], *, tasks: int = 1) -> None:
    """One INSERT of `row(i)` for the ids: a range in `tasks` Spark tasks of consecutive ids, each writing one
    data file per partition (other ids in one task)."""
    if isinstance(ids, range):
        source = f"range({ids.start}, {ids.stop}, {ids.step}, {tasks})"
    else:
        source = "(SELECT CAST(col1 AS BIGINT) AS id FROM VALUES " + ", ".join(f"({i})" for i in ids) + ")"
    bed.spark.sql(f"INSERT INTO {name} " + ROWS_SQL.format(source=source))
    model.insert(row(i) for i in ids)


def _batches(bed, name: str, model: Model, count: int, *, start: int = 0) -> None:
    """`count` batches of BATCH consecutive ids from `start` in one INSERT:
    a data file per batch and partition."""
    _insert(bed, name, model, range(start, start + count * BATCH), tasks=count)


def _equality(bed, name: str, model: Model, files: Sequence[EqualityDelete]) -> dict[str, Any]:
    """The files in one commit, in the bed and in the model."""
    answer = bed.spark.equality_deletes(name, files)
    for f in files:
        model.equality_delete(f.columns, f.rows, spec_id=model.spec_id if f.spec_id is None else f.spec_id,
                              partition=f.partition)
    return answer


def _key(i: int, *columns: str) -> list[Any]:
    return [row(i)[c] for c in columns]


# ---- the tables ------------------------------------------------------------------------------------------


def position_deleted(bed, granularity: str = "file") -> MorTable:
    """Partitioned by days(ts) and bucket(4, id), three batches, then two DELETEs of rows of the first two
    (position deletes scoped by `write.delete.granularity`: one delete file per data file, or per partition);
    the third batch's files keep no deletes."""
    name = _create(bed, f"position_{granularity}", "days(ts), bucket(4, id)",
                   f"'write.delete.granularity'='{granularity}'")
    model = Model({0: None})  # position deletes need no partitions
    _batches(bed, name, model, 3)
    bed.spark.sql(f"DELETE FROM {name} WHERE id % 7 = 0 AND id < 200")
    model.delete(lambda r: r["id"] % 7 == 0 and r["id"] < 200)
    bed.spark.sql(f"DELETE FROM {name} WHERE s = 's5' AND id < 200")
    model.delete(lambda r: r["s"] == "s5" and r["id"] < 200)
    return MorTable(name, model.rows(), frozenset({"position"}))


def updated_and_merged(bed) -> MorTable:
    """Partitioned by days(ts): UPDATE and MERGE INTO (matched rows updated or deleted, others inserted) in
    merge-on-read mode: position deletes plus new data files."""
    name = _create(bed, "updated_merged", "days(ts)")
    model = Model({0: by_day})
    _batches(bed, name, model, 3)
    bed.spark.sql(f"UPDATE {name} SET s = concat(coalesce(s, 'null'), '!'), x = x + 1 WHERE "
                  "id % 5 = 0 AND id < 200")
    model.update(lambda r: r["id"] % 5 == 0 and r["id"] < 200,
                 lambda r: {**r, "s": f"{r['s'] if r['s'] is not None else 'null'}!", "x": r["x"] + 1})
    source = ROWS_SQL.format(source="range(150, 350, 5)")
    bed.spark.sql(f"MERGE INTO {name} t USING ({source}) u ON t.id = u.id "
                  f"WHEN MATCHED AND u.id % 2 = 0 THEN DELETE "
                  f"WHEN MATCHED THEN UPDATE SET t.k = -1 "
                  f"WHEN NOT MATCHED THEN INSERT *")
    present = {h.row["id"] for h in model.held}
    incoming = range(150, 350, 5)
    model.delete(lambda r: r["id"] in incoming and r["id"] % 2 == 0)
    model.update(lambda r: r["id"] in incoming and r["id"] % 2 == 1, lambda r: {**r, "k": -1})
    model.insert(row(i) for i in incoming if i not in present)
    return MorTable(name, model.rows(), frozenset({"position"}))


def equality_deleted(bed) -> MorTable:
    """Partitioned by days(ts), three batches, then one commit of four equality delete files: on id (long),
    k (int, with NULL), s and d (string and date, with a NULL s), x and ts (double and timestamp, each key in
    its own partition); then rows equal to deleted keys inserted again (they stay), then one more file on s.
    The first day's files keep no deletes; an id whose row is in another day than its file's stays."""
    name = _create(bed, "equality", "days(ts)")
    model = Model({0: by_day})
    _batches(bed, name, model, 3)
    answers = [_equality(bed, name, model, [
        # Day 2: 1, 5, 9, 13 and 77 live there; 6 lives on day 3 and stays.
        EqualityDelete(["id"], [[1], [5], [9], [13], [77], [6]], {"ts_day": dt.date(2024, 3, 2)}),
        EqualityDelete(["k"], [[None], [4]], {"ts": dt.datetime(2024, 3, 3, 12, tzinfo=dt.UTC)}),
        EqualityDelete(["s", "d"], [["s3", dt.date(2024, 1, 4)], [None, dt.date(2024, 1, 3)]],
                       {"ts_day": dt.date(2024, 3, 4)}),
        EqualityDelete(["x", "ts"], [_key(42, "x", "ts"), _key(43, "x", "ts"), _key(202, "x", "ts")]),
    ])]
    # 77 deleted above, inserted again (a higher sequence number); NULL k on day 3 (330),
    # s3 and NULL s on day 4.
    _insert(bed, name, model, [77, *range(300, 340)])
    answers.append(_equality(bed, name, model,
                             [EqualityDelete(["s"], [["s1"], [None]], {"ts_day": dt.date(2024, 3, 3)})]))
    return MorTable(name, model.rows(), frozenset({"equality"}), tuple(answers))


def equality_deleted_across_specs(bed) -> MorTable:
    """A spec that evolved twice (unpartitioned, then identity(d), then d and days(ts)), two data files per
    partition under each, then one commit of equality deletes under all three specs: the unpartitioned spec's
    apply to every data file, an older partitioned spec's only to that spec's files of its partition (not to
    the same keys in later specs' files), the current spec's by each key's own partition. Then rows under the
    current spec equal to the deleted keys (they stay)."""
    name = _create(bed, "equality_specs", None)
    model = Model({0: None})
    _batches(bed, name, model, 2)
    bed.spark.sql(f"ALTER TABLE {name} ADD PARTITION FIELD d")
    model.evolve(1, lambda v: (v["d"],))
    _batches(bed, name, model, 2, start=2 * BATCH)
    bed.spark.sql(f"ALTER TABLE {name} ADD PARTITION FIELD days(ts)")
    model.evolve(2, lambda v: (v["d"], by_day(v)[0]))
    _batches(bed, name, model, 2, start=4 * BATCH)
    answers = [_equality(bed, name, model, [
        EqualityDelete(["k"], [[7], [8]], spec_id=0),  # global
        EqualityDelete(["k"], [[9], [10]], {"d": dt.date(2024, 1, 2)}, spec_id=1),
        EqualityDelete(["s"], [["s6"]], {"d": dt.date(2024, 1, 3)}, spec_id=1),
        # 450 lives under spec 2 and goes; 40 (spec 0) and 240 (spec 1) stay.
        EqualityDelete(["id", "d", "ts"], [_key(i, "id", "d", "ts") for i in (40, 240, 450)]),
    ])]
    # Keys deleted above, under the current spec afterwards: they stay.
    _insert(bed, name, model,
            [i for i in range(600, 700) if row(i)["k"] in (7, 8, 9, 10) or row(i)["s"] == "s6"])
    return MorTable(name, model.rows(), frozenset({"equality"}), tuple(answers))


def unpartitioned_global(bed) -> MorTable:
    """No partitions: a DELETE with partition-scoped position deletes (one delete file for the data files it
    touches), an equality delete on k (global, NULL among the keys), one more INSERT (its NULL k rows stay),
    then an UPDATE (position deletes and a new data file)."""
    name = _create(bed, "unpartitioned", None, "'write.delete.granularity'='partition'")
    model = Model({0: None})
    _batches(bed, name, model, 3)
    bed.spark.sql(f"DELETE FROM {name} WHERE id % 10 = 3 AND id < 200")
    model.delete(lambda r: r["id"] % 10 == 3 and r["id"] < 200)
    answers = [_equality(bed, name, model, [EqualityDelete(["k"], [[None], [12]])])]
    _insert(bed, name, model, range(300, 350))
    bed.spark.sql(f"UPDATE {name} SET k = k + 100 WHERE id % 50 = 1")
    model.update(lambda r: r["id"] % 50 == 1, lambda r: {**r, "k": None if r["k"] is None else r["k"] + 100})
    return MorTable(name, model.rows(), frozenset({"position", "equality"}), tuple(answers))


def mixed_deletes(bed) -> MorTable:
    """Partitioned by d: position deletes (DELETE) and equality deletes on the same data files, a row deleted
    by both; the third batch's file for 2024-01-03 keeps no deletes."""
    name = _create(bed, "mixed", "d")
    model = Model({0: lambda v: (v["d"],)})
    _batches(bed, name, model, 3)
    bed.spark.sql(f"DELETE FROM {name} WHERE id % 9 = 0 AND id < 200")
    model.delete(lambda r: r["id"] % 9 == 0 and r["id"] < 200)
    answers = [_equality(bed, name, model, [
        EqualityDelete(["s"], [["s4"], [None]], {"d": dt.date(2024, 1, 2)}),
        # 18 is gone already (position deleted): deleted twice over.
        EqualityDelete(["id", "d"], [_key(i, "id", "d") for i in (18, 19, 250)]),
    ])]
    return MorTable(name, model.rows(), frozenset({"position", "equality"}), tuple(answers))


def equality_deleted_by_query(bed, *, files: int = 8) -> MorTable:
    """Partitioned by days(ts) and bucket(4, id): the bulk request (a query's rows, about `files` files,
    each row in its own partition by Iceberg's transform functions) deletes every third id."""
    name = _create(bed, "equality_query", "days(ts), bucket(4, id)")
    model = Model({0: None})
    _batches(bed, name, model, 3)
    answer = bed.spark.equality_delete_query(name, ["id"],
                                             f"SELECT id, ts FROM {name} WHERE id % 3 = 0", files=files)
    model.delete(lambda r: r["id"] % 3 == 0)  # each key's own partition: where its row is
    return MorTable(name, model.rows(), frozenset({"equality"}), (answer,))


BUILDERS = {
    "position_file": lambda bed: position_deleted(bed, "file"),
    "position_partition": lambda bed: position_deleted(bed, "partition"),
    "updated_and_merged": updated_and_merged,
    "equality": equality_deleted,
    "equality_across_specs": equality_deleted_across_specs,
    "unpartitioned_global": unpartitioned_global,
    "mixed": mixed_deletes,
    "equality_by_query": equality_deleted_by_query,
}
# The kinds tests/interop/test_iceberg_deletes.py compacts (checking each as built first,
# `test_mor_bed.check_built`). Partition-scoped position deletes are compacted in `unpartitioned_global` (a
# DELETE at partition granularity).
COMPACTED = ("updated_and_merged", "equality", "equality_across_specs", "unpartitioned_global", "mixed")
