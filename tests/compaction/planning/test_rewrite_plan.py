"""The rewrite planner (layout/compaction/planning/planner.py), without Spark: decisions on real tiny Iceberg
tables, and the interval logic (`overlap_depth`, `_components`, `_pack`) against brute force.

A lakesort commit is simulated with a pyiceberg write carrying the snapshot summary properties lakesort writes
(`lakesort.run-id`, `lakesort.spec-hash` = the plan's effective hash): that is all the planner reads of one.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import warnings

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.expressions import EqualTo
from pyiceberg.transforms import IdentityTransform

from layout.catalog import load_catalog, write_sql_catalog_config
from layout.compaction.planning.planner import (
    RUN_ID,
    SPEC_HASH,
    RewritePlan,
    _components,
    _Entry,
    _pack,
    plan_rewrite,
)
from layout.errors import UsageError
from layout.read.overlap import overlap_depth
from layout.spec import parse_spec

OWNER = {"name": "Test Team", "email": "test@example.com"}
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("k", pa.int64()),
                    pa.field("d", pa.date32()), pa.field("part", pa.string(), nullable=False)])


def make_spec(**overrides):
    doc = {"table": "t.events", "catalog": "lakesort", "owner": OWNER, "sort": {"keys": [{"column": "k"}]},
           "target_file_size": "1MiB"}
    doc.update(overrides)
    return parse_spec(doc, source="test-spec")


@pytest.fixture
def catalog(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PYICEBERG_HOME", raising=False)
    write_sql_catalog_config(tmp_path / ".lakesort", tmp_path)
    cat = load_catalog()
    cat.create_namespace_if_not_exists("t")
    return cat


def rows(ks, part: str, start_id: int = 0) -> pa.Table:
    ks = list(ks)
    return pa.Table.from_pylist(
        [{"id": start_id + i, "k": k, "d": dt.date(2024, 1, 1) + dt.timedelta(days=k % 300), "part": part}
         for i, k in enumerate(ks)], SCHEMA)


@pytest.fixture
def table(catalog):
    """Partitioned by `part`; three appends each add one small, unsorted file to part=a and to part=b."""
    t = catalog.create_table("t.events", schema=SCHEMA)
    with t.update_spec() as spec:
        spec.add_field("part", IdentityTransform(), "part")
    for batch in range(3):
        t.append(pa.concat_tables([rows(range(100 * batch, 100 * batch + 50)[::-1], "a", 1000 * batch),
                                   rows(range(batch, 300, 3), "b", 1000 * batch + 500)]))
    return t.refresh()


def lakesort_commit(table, plan_or_hash, data: pa.Table, part: str | None, run: str = "sim-run") -> None:
    """What a lakesort commit leaves for the planner:
    a snapshot whose summary carries run id and spec hash."""
    spec_hash = plan_or_hash if isinstance(plan_or_hash, str) else plan_or_hash.spec_hash
    props = {RUN_ID: run, SPEC_HASH: spec_hash}
    if part is None:
        table.append(data, snapshot_properties=props)
    else:
        table.overwrite(data, overwrite_filter=EqualTo("part", part), snapshot_properties=props)


def decision(plan: RewritePlan, part: str):
    (d,) = [d for d in plan.partitions if d.partition == part]
    return d


# ---- decisions on a real table ----------------------------------------------------------------------


def test_small_unsorted_files_are_rewritten_with_the_reasons(table):
    spec = make_spec()
    plan = plan_rewrite(table, spec)
    assert [d.partition for d in plan.partitions] == ["part=a", "part=b"]
    a, b = decision(plan, "part=a"), decision(plan, "part=b")
    assert a.action == b.action == "rewrite"
    assert (a.files, a.rows, a.small_files, a.foreign_files, a.delete_files) == (3, 150, 3, 3, 0)
    # Sorted runs (the default, max_sorted_runs 4): the new files become one run; no run of lakesort's yet.
    for d in (a, b):  # pyiceberg writes no page index: nothing to adopt
        (reason,) = d.reasons
        assert reason.startswith(f"3 file(s) not written by lakesort under spec {plan.spec_hash} fall short "
                                 "of it: 3 with no column index (`id`, `k`, `d`, `part`), e.g. "), reason
    assert a.sorted_runs == b.sorted_runs == 0
    # part=a's appends hold disjoint k ranges (0-49, 100-149, 200-249); part=b's all span 0..~299.
    assert a.overlap_depth == 1 and b.overlap_depth == 3
    # One run per partition (max_sorted_runs 1): the reasons say why the partition is rewritten whole.
    one = plan_rewrite(table, make_spec(max_sorted_runs=1))
    assert any(r == f"3 small file(s) under {spec.small_file_size} bytes"
               for r in decision(one, "part=a").reasons)
    assert "sorted runs overlap in k: depth 3" in decision(one, "part=b").reasons
    # Every file goes into one group per partition (tiny), sized for one output file;
    # bounds come from manifests.
    assert {g.partition: len(g.inputs) for g in plan.groups} == {"part=a": 3, "part=b": 3}
    assert all(g.output_files == 1 for g in plan.groups)
    group_a = next(g for g in plan.groups if g.partition == "part=a")
    assert [(f.lo, f.hi) for f in group_a.inputs] == [(0, 49), (100, 149), (200, 249)]
    assert group_a.rows == 150 and group_a.bytes == a.bytes
    assert (plan.snapshot_id == table.current_snapshot().snapshot_id
            and plan.table_location == table.location())


def test_after_a_lakesort_commit_the_nightly_plan_is_empty_and_named_partitions_skip(table):
    spec = make_spec()
    plan = plan_rewrite(table, spec)
    lakesort_commit(table, plan, rows(range(300), "a"), "a")
    lakesort_commit(table, plan, rows(range(0, 300, 3), "b"), "b")
    table = table.refresh()
    nightly = plan_rewrite(table, spec)
    assert nightly.groups == () and {d.action for d in nightly.partitions} == {"skip"}
    named = plan_rewrite(table, spec, partitions=["part=a", "part=b"])
    assert named.groups == ()
    for d in named.partitions:
        assert d.action == "skip" and d.reasons == (f"already compacted under spec {plan.spec_hash}",)
        assert (d.files, d.foreign_files, d.overlap_depth) == (1, 0, 1)

    # A new append makes its partition a candidate again: only that one.
    table.append(rows(range(5), "b", 9000))
    again = plan_rewrite(table.refresh(), spec)
    assert [(d.partition, d.action) for d in again.partitions] == [("part=a", "skip"), ("part=b", "rewrite")]
    # the new file alone: a run of its own while a slot is free
    assert [len(g.inputs) for g in again.groups] == [1]

    # A different spec (other writer settings) makes lakesort's own files foreign.
    other = make_spec(writer={"compression": "snappy"})
    changed = plan_rewrite(table.refresh(), other, partitions=["part=a"])
    assert decision(changed, "part=a").action == "rewrite"
    assert any("1 file(s) not written by lakesort under spec" in r
               for r in decision(changed, "part=a").reasons)


def test_force_rewrites_a_compacted_partition(table):
    spec = make_spec()
    plan = plan_rewrite(table, spec)
    lakesort_commit(table, plan, rows(range(300), "a"), "a")
    forced = plan_rewrite(table.refresh(), spec, partitions=["part=a"], force=True)
    assert forced.forced
    d = decision(forced, "part=a")
    assert d.action == "rewrite" and d.reasons == ("forced",)
    assert [len(g.inputs) for g in forced.groups] == [1]
    assert plan_rewrite(table.refresh(), spec, partitions=["part=a"]).groups == ()


def test_partition_selection_and_unknown_partitions(table):
    spec = make_spec()
    only_b = plan_rewrite(table, spec, partitions=["part=b", "part=b"])
    assert [d.partition for d in only_b.partitions] == ["part=b"]
    assert {g.partition for g in only_b.groups} == {"part=b"}
    with pytest.raises(UsageError) as info:
        plan_rewrite(table, spec, partitions=["part=c", "part=b", "a"])
    message = str(info.value)
    assert "no such partition(s): part=c, a" in message
    assert "partitions look like: part=a, part=b" in message


def test_unknown_sort_key_is_refused_at_plan_time(table):
    with pytest.raises(UsageError, match=r"sort.keys\[0\].column: `kk` is not a column of "
                                         r"t.events; did you mean `k`"):
        plan_rewrite(table, make_spec(sort={"keys": [{"column": "kk"}]}))


def test_empty_table_plans_nothing(catalog):
    t = catalog.create_table("t.events", schema=SCHEMA)
    plan = plan_rewrite(t, make_spec())
    assert plan.groups == () and plan.partitions == () and plan.snapshot_id is None
    with pytest.raises(UsageError, match="no such partition"):
        plan_rewrite(t, make_spec(), partitions=["part=a"])


def test_plan_json_roundtrip(table):
    spec = make_spec(sort={"keys": [{"column": "d"}, {"column": "k", "direction": "desc"}]},
                     keys={"columns": ["id"], "sequence": "k", "merge": "first-row"},
                     writer={"bloom_filters": {"id": {"ndv": 100}}})
    plan = plan_rewrite(table, spec, run_id="run-1")
    assert plan.groups and plan.run_id == "run-1"
    # Date bounds from the manifests become strings in the JSON plan (for humans); they roundtrip as such.
    assert all(isinstance(f.lo, str) for g in plan.groups for f in g.inputs)
    again = RewritePlan.from_json(plan.to_json())
    assert again == plan
    assert again.to_json() == plan.to_json()
    assert again.keys.merge == "first-row" and again.sort_keys[1].direction == "desc"
    assert again.writer_options["parquet.bloom.filter.enabled#id"] == "true"


def test_pyiceberg_writes_no_delete_files(table):
    """Why the refusal below uses synthetic entries: pyiceberg 0.12 has no merge-on-read writer; with
    `write.delete.mode=merge-on-read` it warns and rewrites data files (copy-on-write),
    so no delete file exists."""
    with table.transaction() as tx:
        tx.set_properties({"write.delete.mode": "merge-on-read"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table.refresh().delete(EqualTo("id", 1))
    assert any("Merge on read is not yet supported" in str(w.message) for w in caught)
    plan = plan_rewrite(table.refresh(), make_spec())
    assert all(d.delete_files == 0 for d in plan.partitions)


def _entry(path, lo, hi, *, size=100, content=0, snapshot_id=1, seq=1) -> _Entry:
    return _Entry(path=path, size=size, rows=10, content=content, partition="part=a", snapshot_id=snapshot_id,
                  sequence_number=seq, lo=lo, hi=hi)


# ---- known bugs -------------------------------------------------------------------------------------


def test_append_during_a_lakesort_run_is_planned_by_the_next_nightly_run(table):
    spec = make_spec()
    plan = plan_rewrite(table, spec)
    for part, compacted in (("a", rows(range(300), "a")), ("b", rows(range(0, 300, 3), "b"))):
        lakesort_commit(table, plan, compacted, part, run="night-1")
    table.append(rows(range(10, 20), "a", 7000))  # lakesort's next run plans part=a ...
    table.append(rows(range(40, 60), "b", 8000))  # ... this lands in part=b while its Spark job runs ...
    lakesort_commit(table, plan, rows(range(300), "a"), "a", run="night-2")  # ... and it commits part=a.
    nightly = plan_rewrite(table.refresh(), spec)
    assert "part=b" in [d.partition for d in nightly.partitions]


def test_lakesort_output_split_into_small_files_is_not_rewritten_again(table):
    probe = make_spec()
    plan = plan_rewrite(table, probe)
    lakesort_commit(table, plan, rows(range(150), "a"), "a")  # the compaction's two output files
    lakesort_commit(table, plan, rows(range(150, 300), "a", 150), None)
    table = table.refresh()
    sizes = [t.file.file_size_in_bytes for t in table.scan(row_filter=EqualTo("part", "a")).plan_files()]
    assert len(sizes) == 2
    # A target that makes exactly this layout what the job writes: two files, each under small_file_size.
    target = int(max(sizes) * 1.6)
    spec = make_spec(target_file_size=target)
    spec_plan = plan_rewrite(table, spec, partitions=["part=a"])
    assert max(sizes) < spec.small_file_size and math.ceil(sum(sizes) / target) == len(sizes)
    # Restamp both files with this spec's hash, as a lakesort run under `spec` would have.
    lakesort_commit(table, spec_plan, rows(range(150), "a"), "a")
    lakesort_commit(table, spec_plan, rows(range(150, 300), "a", 150), None)
    rerun = plan_rewrite(table.refresh(), spec, partitions=["part=a"])
    assert decision(rerun, "part=a").foreign_files == 0
    assert rerun.groups == (), decision(rerun, "part=a").reasons


# ---- interval logic against brute force -------------------------------------------------------------

bound = st.integers(min_value=0, max_value=30)
interval = st.one_of(
    st.tuples(bound, bound).map(lambda t: (min(t), max(t))),
    st.just((None, None)), st.tuples(st.none(), bound), st.tuples(bound, st.none()),
)


def overlaps(a, b) -> bool:
    """Closed ranges intersecting in more than a shared end (one ends exactly where the other begins)."""
    if a[1] == b[0] or b[1] == a[0]:
        return False
    return a[0] <= b[1] and b[0] <= a[1]


def brute_depth(intervals) -> int:
    """The largest set of pairwise-overlapping ranges (exhaustive), plus the ranges without bounds."""
    known = [(lo, hi) for lo, hi in intervals if lo is not None and hi is not None]
    unknown = len(intervals) - len(known)
    best = 0
    for size in range(1, len(known) + 1):
        if any(all(overlaps(a, b) for a, b in itertools.combinations(group, 2))
               for group in itertools.combinations(known, size)):
            best = size
    return best + unknown


@given(st.lists(interval, max_size=9))
def test_overlap_depth_matches_brute_force(intervals):
    assert overlap_depth(intervals) == brute_depth(intervals)


def test_overlap_depth_examples():
    assert overlap_depth([]) == 0
    assert overlap_depth([(1, 2), (2, 3)]) == 1  # one key split across two files only touches
    assert overlap_depth([(2, 2), (2, 2)]) == 1
    assert overlap_depth([(1, 3), (2, 2)]) == 2
    assert overlap_depth([(1, 2), (3, 4)]) == 1
    assert overlap_depth([(1, 2), (None, None)]) == 2
    assert overlap_depth([("a", "m"), ("b", "c"), ("n", "z")]) == 2


def brute_components(entries: list[_Entry]) -> set[frozenset[str]]:
    """Connected components of the 'closed intervals intersect' graph (union-find);
    unknown bounds join all."""
    if any(e.lo is None or e.hi is None for e in entries):
        return {frozenset(e.path for e in entries)} if entries else set()
    parent = {e.path: e.path for e in entries}

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for a in entries:
        for b in entries:
            if a.lo <= b.hi and b.lo <= a.hi:
                parent[find(a.path)] = find(b.path)
    groups: dict[str, set[str]] = {}
    for e in entries:
        groups.setdefault(find(e.path), set()).add(e.path)
    return {frozenset(g) for g in groups.values()}


@given(st.lists(interval, max_size=20))
def test_components_match_brute_force(intervals):
    entries = [_entry(f"f{i}", lo, hi) for i, (lo, hi) in enumerate(intervals)]
    comps = _components(entries)
    assert sorted(e.path for c in comps for e in c) == sorted(e.path for e in entries)
    assert {frozenset(e.path for e in c) for c in comps} == brute_components(entries)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.tuples(st.tuples(bound, bound).map(sorted), st.integers(1, 500)), max_size=30),
       st.integers(100, 1000))
def test_pack_bounds_groups_by_max_group_size(files, max_group):
    entries = [_entry(f"f{i}", lo, hi, size=size) for i, ((lo, hi), size) in enumerate(files)]
    spec = make_spec(target_file_size=100, small_file_size=50, max_group_size=max_group)
    groups = _pack("part=a", entries, spec, ("why",), 7)
    # Every file exactly once, group ids numbered from `start`.
    assert sorted(f.path for g in groups for f in g.inputs) == sorted(e.path for e in entries)
    assert [g.group_id for g in groups] == list(range(7, 7 + len(groups)))
    comp_of = {e.path: i for i, c in enumerate(_components(entries)) for e in c}
    for g in groups:
        members = {comp_of[f.path] for f in g.inputs}
        # Over the bound only when the group is one component too big to split.
        assert g.bytes <= max_group or len(members) == 1, (g.bytes, max_group, members)
        assert g.output_files == max(1, math.ceil(g.bytes / 100))
        assert g.reasons == ("why",)
    # A component is never split across groups.
    owners: dict[int, set[int]] = {}
    for g in groups:
        for f in g.inputs:
            owners.setdefault(comp_of[f.path], set()).add(g.group_id)
    assert all(len(o) == 1 for o in owners.values())


def test_pack_on_a_real_table_respects_max_group_size(table):
    """part=b's three files overlap (one component): one group even over the bound; part=a's are disjoint:
    split into groups of at most max_group_size bytes."""
    sizes = {t.file.file_path: t.file.file_size_in_bytes for t in table.scan().plan_files()}
    limit = max(sizes.values()) + 1
    spec = make_spec(target_file_size=limit, max_group_size=limit)
    plan = plan_rewrite(table, spec)
    a_groups = [g for g in plan.groups if g.partition == "part=a"]
    b_groups = [g for g in plan.groups if g.partition == "part=b"]
    assert len(a_groups) == 3 and all(g.bytes <= limit for g in a_groups)
    assert len(b_groups) == 1 and b_groups[0].bytes > limit and len(b_groups[0].inputs) == 3
