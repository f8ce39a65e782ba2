"""Deletes applied by the compaction against a brute-force oracle (hypothesis).

A pyiceberg table partitioned by `p` takes appends, position deletes and equality deletes on a nullable `k` in
a random order, so that sequence numbers decide (a delete reaches the rows committed before it, an equality
delete not those of its own commit, and rows appended later survive it); some delete files name rows of
another partition or positions past a file's end, which must delete nothing. The oracle applies Iceberg's
rules to the rows in Python; the compaction (the real job, in process) must leave exactly those rows, read
back by pyiceberg (no delete file is left to apply), and every delete file must be gone. Tables written by
Iceberg's own writers are in tests/interop/test_iceberg_deletes.py.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from deletes_helpers import (
    commit_deletes,
    equality_delete_file,
    position_delete_file,
    write_equality_deletes,
    write_position_deletes,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lossless import in_process_submit, load_job, run, spec_for
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

import layout.compaction.pipeline.driver

pytestmark = pytest.mark.spark

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True),
                NestedField(2, "p", StringType(), required=True), NestedField(3, "k", IntegerType()))
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="p"))
PARTS = ("a", "b")

append = st.tuples(st.just("append"), st.integers(3, 12))
positions = st.tuples(st.just("position"), st.sampled_from(PARTS),
                      st.lists(st.integers(0, 14), min_size=1, max_size=5))
equality = st.tuples(st.just("equality"), st.sampled_from(PARTS),
                     st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=1, max_size=3))
steps = st.lists(st.one_of(append, positions, equality), min_size=3, max_size=8)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps)
def test_deletes_in_any_order_leave_exactly_the_rows_iceberg_keeps(
    iceberg_catalog, spark, monkeypatch, history
):
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", in_process_submit(spark, load_job()))
    cat = iceberg_catalog
    cat.create_namespace_if_not_exists("t")
    name = f"t.mor_{abs(hash(repr(history))) % 10**8}"
    if cat.table_exists(name):
        cat.drop_table(name)
    table = cat.create_table(name, SCHEMA, partition_spec=SPEC, properties={"format-version": "2"})

    live: list[dict] = []  # the oracle: every row with its file, position, partition and sequence number
    next_id = 0
    for step in [("append", 6), *history]:
        seq = (table.current_snapshot().sequence_number if table.current_snapshot() else 0) + 1
        if step[0] == "append":
            rows = [{"id": next_id + i, "p": PARTS[i % 2], "k": None if i % 5 == 4 else i % 4}
                    for i in range(step[1])]
            next_id += step[1]
            table.append(pa.Table.from_pylist(rows, schema=SCHEMA.as_arrow()))
            table = table.refresh()
            files = {f.file_path: f for f in _data_files(table)}
            new = [p for p in files if not any(r["file"] == p for r in live)]
            for path in new:
                part = files[path].partition[0]
                for pos, r in enumerate(r for r in rows if r["p"] == part):
                    live.append({**r, "file": path, "pos": pos, "seq": seq, "deleted": False})
            continue
        kind, part, values = step
        if kind == "position":
            targets = sorted({r["file"] for r in live if r["p"] == part})
            if not targets:
                continue
            named = sorted({(targets[v % len(targets)], v) for v in values})  # some past a file's end
            written = write_position_deletes(table, named)
            table = commit_deletes(table, [position_delete_file(table, written, partition=(part,))])
            for r in live:
                if (r["file"], r["pos"]) in named and r["seq"] <= seq and r["p"] == part:
                    r["deleted"] = True
        else:
            keys = pa.table({"k": pa.array(values, pa.int32())})
            written = write_equality_deletes(table, keys)
            table = commit_deletes(table, [equality_delete_file(table, written, ["k"], partition=(part,))])
            for r in live:
                if r["k"] in values and r["seq"] < seq and r["p"] == part:  # None in values: NULL equals NULL
                    r["deleted"] = True

    expected = Counter((r["id"], r["p"], r["k"]) for r in live if not r["deleted"])
    run(name, spec=_spec(name))

    table = table.refresh()
    got = Counter((r["id"], r["p"], r["k"]) for r in table.scan().to_arrow().to_pylist())
    assert got == expected
    assert not [f for f in _all_files(table) if f.content != 0], (
        "delete files outlived the data they applied to")


def _spec(name: str):
    # Thresholds out of the way: every file is rewritten (forced), every delete applied.
    return spec_for(name, sort={"keys": [{"column": "id"}]})


def _data_files(table):
    return [f for f in _all_files(table) if f.content == 0]


def _all_files(table):
    snapshot = table.current_snapshot()
    return [e.data_file for m in snapshot.manifests(table.io) for e in m.fetch_manifest_entry(table.io)]
