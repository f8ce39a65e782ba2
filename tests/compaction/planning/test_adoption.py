"""Adopting other writers' files (layout/compaction/planning/adoption.py): files another writer already
sorted, sized and indexed as the spec asks are left as they are; the rest is rewritten with the shortfall
named; a real compaction of such a mixed table loses nothing.

The "other writer" is pyarrow, with page indexes and bloom filters, its files registered with pyiceberg's
add_files: each add_files call is one commit of that writer.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lossless import OWNER, assert_same, by_field_id, in_process_submit, load_job, run
from pyiceberg.transforms import IdentityTransform

import layout.compaction.pipeline.driver
from layout.compaction.planning import adoption
from layout.compaction.planning.planner import plan_rewrite
from layout.spec import parse_spec

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("k", pa.int64()), pa.field("v", pa.string()),
                    pa.field("part", pa.string())])
GOOD = 2000  # rows of a file of the right size: about 85 KB, between small_file_size and max_file_size


def make_spec(**overrides):
    doc = {"table": "t.events", "owner": OWNER, "sort": {"keys": [{"column": "k"}]},
           "target_file_size": "96KiB", "small_file_size": "32KiB",
           "writer": {"bloom_filters": {"k": {"ndv": 4000}}}}
    doc.update(overrides)
    return parse_spec(doc, source="test-spec")


def rows(ks, part: str) -> pa.Table:
    ks = list(ks)
    return pa.table({"id": pa.array([10 * k for k in ks], pa.int64()), "k": pa.array(ks, pa.int64()),
                     "v": pa.array([f"value-{k:08d}" for k in ks]), "part": pa.array([part] * len(ks))},
                    schema=SCHEMA)


class Writer:
    """Another writer: pyarrow files (sorted, page indexes, a bloom filter on k unless told),
    one commit per call."""

    def __init__(self, table, directory):
        self.table, self.directory, self.files = table, directory, 0
        directory.mkdir()

    def commit(self, *files: tuple[str, range], unsorted: bool = False, page_index: bool = True,
               bloom: bool = True) -> list[str]:
        paths = []
        for part, ks in files:
            ks = list(ks)
            if unsorted:
                random.Random(len(ks)).shuffle(ks)
            path = self.directory / f"{self.files:03d}-{part}.parquet"
            self.files += 1
            pq.write_table(rows(ks, part), path, write_page_index=page_index, max_rows_per_page=250,
                           use_dictionary=False, compression="none",
                           bloom_filter_options={"k": {"ndv": 4000, "fpp": 0.01}} if bloom else None)
            paths.append(str(path))
        self.table.add_files(paths)
        self.table = self.table.refresh()
        return paths


@pytest.fixture
def writer(iceberg_catalog, tmp_path):
    """t.events, partitioned by part; partitions a and b hold two sorted, indexed files of good size each,
    in disjoint key ranges, from one commit; a later commit adds a third to a, above the others."""
    iceberg_catalog.create_namespace("t")
    table = iceberg_catalog.create_table("t.events", schema=SCHEMA)
    with table.update_spec() as spec:
        spec.add_field("part", IdentityTransform(), "part")
    w = Writer(table.refresh(), tmp_path / "other-writer")
    w.commit(("a", range(GOOD)), ("a", range(GOOD, 2 * GOOD)), ("b", range(GOOD)),
             ("b", range(GOOD, 2 * GOOD)))
    w.commit(("a", range(2 * GOOD, 3 * GOOD)))
    return w


def decision(plan, partition):
    return next(d for d in plan.partitions if d.partition == partition)


def rewritten(plan) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for g in plan.groups:
        out.setdefault(g.partition, set()).update(f.path for f in g.inputs)
    return out


def test_files_that_meet_the_spec_are_adopted_and_checked_once(writer, monkeypatch):
    spec = make_spec()
    reads = []
    check_one = adoption._check_one
    monkeypatch.setattr(adoption, "_check_one", lambda path, *a: reads.append(path) or check_one(path, *a))
    plan = plan_rewrite(writer.table, spec)
    assert plan.groups == ()
    for part, files in (("a", 3), ("b", 2)):
        d = decision(plan, f"part={part}")
        assert d.action == "skip" and (d.files, d.foreign_files, d.adopted_files) == (files, files, files)
        (reason,) = d.reasons
        assert reason == (f"meets spec {plan.spec_hash}: {files} file(s) of other writers adopted as they "
                          "are (sorted, sized, with the page indexes and bloom filters the spec asks for)")
    assert len(reads) == 5
    # The next night reads no footer again: the verdicts are recorded in the work directory.
    reads.clear()
    again = plan_rewrite(writer.table, spec)
    assert again.groups == () and reads == []
    assert decision(again, "part=a").adopted_files == 3
    # Under another spec (other verify bounds), the verdicts no longer hold: checked again.
    plan_rewrite(writer.table, make_spec(verify={"min_file_size": "1KiB"}))
    assert len(reads) == 5


def test_only_the_partition_that_falls_short_is_rewritten_with_the_reason(writer):
    unsorted = writer.commit(("b", range(2 * GOOD, 3 * GOOD)), unsorted=True)
    small = writer.commit(("c", range(100)), ("c", range(100, 200)), ("c", range(200, 300)))
    plan = plan_rewrite(writer.table, make_spec())
    a, b, c = (decision(plan, p) for p in ("part=a", "part=b", "part=c"))
    assert a.action == "skip" and a.adopted_files == 3
    assert b.action == "rewrite" and b.adopted_files == 2
    assert b.reasons[0].startswith(f"1 file(s) not written by lakesort under spec {plan.spec_hash} fall "
                                   "short of it: 1 with pages UNORDERED, not ASCENDING (`k`), e.g. "
                                   "005-b.parquet; the other 2 adopted as they are"), b.reasons
    assert c.action == "rewrite" and c.adopted_files == 0
    assert c.reasons[0].startswith("3 file(s) not written by lakesort under spec") and \
        "3 with a size under small_file_size (32768 bytes), like 3 file(s) of the partition" in c.reasons[0]
    groups = rewritten(plan)
    assert set(groups) == {"part=b", "part=c"}
    assert set(unsorted) <= groups["part=b"] and groups["part=c"] == set(small)
    assert all(g.reasons == decision(plan, g.partition).reasons for g in plan.groups)


def test_a_file_without_the_page_index_or_bloom_filter_is_rewritten_with_that_reason(writer):
    no_index = writer.commit(("a", range(3 * GOOD, 4 * GOOD)), page_index=False)
    no_bloom = writer.commit(("b", range(2 * GOOD, 3 * GOOD)), bloom=False)
    plan = plan_rewrite(writer.table, make_spec(max_sorted_runs=1))
    a, b = decision(plan, "part=a"), decision(plan, "part=b")
    assert a.action == b.action == "rewrite" and (a.adopted_files, b.adopted_files) == (3, 2)
    assert ("1 with no column index (`id`, `k`, `v`, `part`), e.g. 005-a.parquet; 1 with no offset index"
            in a.reasons[0])
    assert "1 with no bloom filter (`k`), e.g. 006-b.parquet; the other 2 adopted as they are" in b.reasons[0]
    # Each file lies above the adopted ones: with one run allowed, only it is rewritten.
    assert rewritten(plan) == {"part=a": set(no_index), "part=b": set(no_bloom)}
    # A spec asking for no bloom filter adopts the file without one.
    plain = plan_rewrite(writer.table, make_spec(writer={}, max_sorted_runs=1))
    assert set(rewritten(plain)) == {"part=a"}


def test_keyed_and_curve_specs_adopt_nothing(writer):
    for spec in (make_spec(sort={"strategy": "zorder", "keys": [{"column": "k"}, {"column": "id"}]}),
                 make_spec(keys={"columns": ["k"], "sequence": "id"})):
        plan = plan_rewrite(writer.table, spec)
        assert {d.action for d in plan.partitions} == {"rewrite"}
        assert "none adopted as they are" in decision(plan, "part=a").reasons[0]


@pytest.mark.spark
def test_compacting_a_mixed_table_loses_nothing_and_keeps_the_adopted_files(writer, spark, monkeypatch):
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", in_process_submit(spark, load_job()))
    writer.commit(("b", range(2 * GOOD, 3 * GOOD)), unsorted=True)
    writer.commit(("c", range(100)), ("c", range(100, 200)), ("c", range(200, 300)))
    table = writer.table
    adopted_a = {t.file.file_path for t in table.scan(row_filter="part == 'a'").plan_files()}
    before = by_field_id(table)
    spec = make_spec()
    run("t.events", spec=spec, force=False)
    table = table.refresh()
    assert_same(before, by_field_id(table))
    assert {t.file.file_path for t in table.scan(row_filter="part == 'a'").plan_files()} == adopted_a
    again = plan_rewrite(table, spec)
    assert again.groups == (), [d.reasons for d in again.partitions]
