"""Compaction end to end: the whole demo table compacted once through the real `spark-submit` (Spark local),
then what a reader sees: one snapshot with the same rows, fewer files within the size bound, sorted pages,
ordered disjoint files, a rerun that plans nothing, and the files read back as one sorted stream.

Time budget (2 cores): a `spark-submit` costs about a minute here, whatever the data size, so this module
makes one (`e2e`, module-scoped) and every test reads its result.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from demo_tables import (
    NAME_MAPPING,
    SPARK_CONF,
    TARGET,
    State,
    build_demo_at,
    by_every_column,
    canonical,
    demo_spec,
    isolate,
    live_files,
    open_parquet,
    partition_of,
    readable,
    sorted_rows,
    staged_parquet,
    state,
)

from layout.catalog import load_table
from layout.compaction.pipeline.driver import compact
from layout.compaction.planning.planner import RUN_ID, SPEC_HASH, plan_rewrite
from layout.io import resolve
from layout.parquet import BoundaryOrder

pytestmark = pytest.mark.spark


@dataclass
class E2E:
    root: Path
    spec: object
    before: State
    result: object
    seconds: float


@pytest.fixture(scope="module")
def e2e(tmp_path_factory, tpch_cache) -> E2E:
    """The whole demo table compacted once through the real `spark-submit` (local mode)."""
    root = tmp_path_factory.mktemp("e2e")
    build_demo_at(root, tpch_cache)
    spec = demo_spec()
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, root)
        table = load_table("demo.lineitem")
        before = state(table)
        started = time.perf_counter()
        result = compact("demo.lineitem", spec=spec, spark_conf=SPARK_CONF, work_dir=root / "work")
        seconds = time.perf_counter() - started
    return E2E(root, spec, before, result, seconds)


@pytest.fixture
def e2e_table(e2e, monkeypatch):
    isolate(monkeypatch, e2e.root)
    return load_table("demo.lineitem")


def test_e2e_commits_one_snapshot_with_the_same_rows(e2e, e2e_table):
    result = e2e.result
    assert not result.nothing_to_do and result.snapshot_id is not None
    assert e2e_table.current_snapshot().snapshot_id == result.snapshot_id
    # The compaction's snapshot is the only new one, and its parent is the snapshot planned against.
    assert (e2e_table.current_snapshot().parent_snapshot_id == e2e.before.snapshot_id
            == result.plan.snapshot_id)
    assert result.rows == 60_175
    after = sorted_rows(e2e_table, result.snapshot_id)
    before = sorted_rows(e2e_table, e2e.before.snapshot_id)  # the old snapshot is still readable
    assert before.equals(e2e.before.rows)
    assert after.schema == before.schema
    assert after.equals(before)
    assert staged_parquet(e2e_table) and set(staged_parquet(e2e_table)) == {
        resolve(f.file_path)[1] for f in live_files(e2e_table)}, (
        "the committed files are the staged ones, in place")


def test_e2e_snapshot_summary_names_the_run_and_spec(e2e, e2e_table):
    props = e2e_table.current_snapshot().summary.additional_properties
    assert props[RUN_ID] == e2e.result.plan.run_id
    assert props[SPEC_HASH] == e2e.result.plan.spec_hash
    assert props["lakesort.rows"] == "60175"
    assert props["lakesort.base-snapshot-id"] == str(e2e.before.snapshot_id)


def test_e2e_fewer_files_within_the_size_bound(e2e, e2e_table):
    """Fewer files, and none above 2 x target: the bound `verify.max_file_size` defaults to, because
    parquet-mr checks its buffered size only every so many rows. No lower bound per file: a partition's last
    file is legitimately small. How one rewrite group splits over several files is
    tests/jobs/test_write.py's `test_a_group_larger_than_the_target_splits_into_disjoint_ordered_files`."""
    files = live_files(e2e_table)
    result = e2e.result
    assert result.files_before == len(e2e.before.files) == 249
    assert result.files_after == len(files) < result.files_before
    assert result.files_removed == 249
    assert max(f.file_size_in_bytes for f in files) <= 2 * TARGET
    # Every file the plan rewrote is gone; every month is still there.
    assert not {f.file_path for f in files} & e2e.before.files
    assert len({partition_of(e2e_table, f) for f in files}) == 83


def test_e2e_sort_key_pages_ascending_in_every_row_group(e2e, e2e_table):
    row_groups = pages = 0
    for f in live_files(e2e_table):
        pf = open_parquet(f.file_path)
        for rg in range(pf.num_row_groups):
            ci = pf.column_index(rg, "l_shipdate")
            assert ci is not None, f"{f.file_path} row group {rg}: no column index"
            assert ci.boundary_order == BoundaryOrder.ASCENDING, (f.file_path, rg, ci.boundary_order)
            row_groups += 1
            pages += len(ci.min_values)
    assert pages > row_groups > len(live_files(e2e_table)), (
        "the small writer settings should give many of each")


def test_e2e_files_and_row_groups_ordered_and_disjoint_within_a_partition(e2e, e2e_table):
    """What range partitioning on (group, l_shipdate, l_orderkey) guarantees: files of one partition hold
    disjoint ranges of the whole sort key, so in the first key alone consecutive files may share only their
    boundary value (min(next) >= max(prev), equal when one ship date straddles the split); within a file the
    row groups follow the same order. On the full key (l_shipdate, l_orderkey) the last row of a file is <=
    the first row of the next (equal keys can straddle: an order has several lineitems,
    often shipped the same day)."""
    by_partition: dict[str, list] = {}
    for f in live_files(e2e_table):
        by_partition.setdefault(partition_of(e2e_table, f), []).append(f)
    for label, files in by_partition.items():
        spans = []
        for f in files:
            pf = open_parquet(f.file_path)
            stats = [pf.statistics(rg, "l_shipdate") for rg in range(pf.num_row_groups)]
            for prev, nxt in itertools.pairwise(stats):
                assert prev.max <= nxt.min, f"{label} {f.file_path}: row groups out of order"
            filesystem, path = resolve(f.file_path)
            keys = pq.read_table(
                path, filesystem=filesystem, columns=["l_shipdate", "l_orderkey"]
            ).to_pylist()
            tuples = [(r["l_shipdate"], r["l_orderkey"]) for r in keys]
            assert tuples == sorted(tuples), f"{label} {f.file_path}: rows not sorted"
            spans.append((stats[0].min, stats[-1].max, tuples[0], tuples[-1]))
        spans.sort()
        for (_, prev_max, _, prev_last), (next_min, _, next_first, _) in itertools.pairwise(spans):
            assert next_min >= prev_max, f"{label}: files overlap in l_shipdate"
            assert next_first >= prev_last, f"{label}: files overlap in (l_shipdate, l_orderkey)"


def test_e2e_rerun_plans_nothing(e2e, e2e_table):
    plan = plan_rewrite(e2e_table, e2e.spec)
    assert plan.groups == ()
    again = compact("demo.lineitem", spec=e2e.spec, spark_conf=SPARK_CONF)
    assert again.nothing_to_do and again.snapshot_id is None
    assert e2e_table.refresh().current_snapshot().snapshot_id == e2e.result.snapshot_id


def test_compacted_table_is_readable_without_a_name_mapping(e2e, e2e_table):
    assert NAME_MAPPING not in e2e_table.properties
    assert e2e_table.scan().to_arrow().num_rows == 60_175


def test_e2e_rerun_for_the_same_partitions_plans_nothing(e2e, e2e_table):
    plan = plan_rewrite(e2e_table, e2e.spec, partitions=[g.partition for g in e2e.result.plan.groups])
    assert plan.groups == (), [d.reasons for d in plan.partitions if d.action == "rewrite"][:3]



def test_compacted_files_read_as_one_sorted_stream(e2e, e2e_table):
    """Each compacted file is sorted by the sort key: merging them (loser tree) equals pyiceberg's scan of the
    same rows sorted by pyarrow. The oracle is another reader (pyiceberg) and another sort (`sort_by`), so a
    row lost or repeated by lakesort's own reader is caught as well as one lost by the merge."""
    from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

    from layout.read.plan import plan
    from layout.read.scan import read_sorted

    keys = ["l_shipdate", "l_orderkey"]
    p = plan("demo.lineitem",
             "l_shipdate >= DATE '1993-01-01' AND l_shipdate < DATE '1994-01-01'", cache=False)
    assert len(p.files) > 1
    merged = canonical(pa.Table.from_batches(list(read_sorted(p, keys))))
    scanned = canonical(readable(e2e_table).scan(row_filter=And(
        GreaterThanOrEqual("l_shipdate", "1993-01-01"), LessThan("l_shipdate", "1994-01-01"))).to_arrow())
    expected = scanned.sort_by([(k, "ascending") for k in keys])
    assert merged.num_rows == scanned.num_rows > 0
    assert merged.column_names == scanned.column_names
    # The key order is total up to ties; rows with equal keys may come in any order, so compare the keys in
    # stream order and the rows as a multiset.
    assert merged.select(keys).equals(expected.select(keys).combine_chunks())
    assert by_every_column(merged).equals(by_every_column(scanned)), "the same rows, none lost or repeated"
