"""Sorted runs (`layout.compaction.planning.sorted_runs`): which runs a nightly rewrite merges, against brute
force and over simulated nights; and the planner's decisions with runs on real tiny Iceberg tables.

The policy's promise: after every rewrite a partition holds at most `max_sorted_runs` runs, the merged runs
are always the newest ones, and over many nights each byte is rewritten a few times, not every night.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout.catalog import stamp_of, stamped_dir
from layout.compaction.planning.planner import RUN_ID, SPEC_HASH, _decide, _Entry
from layout.compaction.planning.sorted_runs import (
    MERGE_GROWTH,
    SortedRun,
    merge_order,
    runs_to_merge,
    sorted_runs,
)
from layout.spec import parse_spec


@dataclass(frozen=True)
class F:
    path: str
    size: int
    snapshot_id: int
    sequence_number: int
    lo: int | None = 0
    hi: int | None = 0


def run(size: int, seq: int = 1, name: str | None = None) -> SortedRun:
    return SortedRun(name or f"r{seq}", (F(f"f{seq}", size, seq, seq),))


def test_runs_come_from_the_commits_that_wrote_the_files_newest_first():
    files = [F("a1", 10, 1, 1, 0, 9), F("a2", 10, 2, 2, 10, 19), F("b1", 5, 3, 3, 0, 30),
             F("x", 7, 99, 4, 0, 1)]
    runs = sorted_runs(files, {"a1": "night-1", "a2": "night-1", "b1": "night-2"})  # x: another writer's
    assert [(r.run_id, [f.path for f in r.files], r.bytes) for r in runs] == [("night-2", ["b1"], 5),
                                                                            ("night-1", ["a1", "a2"], 20)]
    assert all(r.disjoint for r in runs)
    assert not SortedRun("bad", (F("p", 1, 1, 1, 0, 10), F("q", 1, 1, 1, 5, 15))).disjoint


def test_examples():
    # A free slot: the new files become a run of their own, whatever the sizes.
    assert runs_to_merge(1, [run(100)], 4) == 0
    assert runs_to_merge(1, [run(1, 3), run(2, 2), run(100, 1)], 4) == 0
    # Full: the smallest run joins, and the next smallest too when at most twice the size of the biggest
    # joining (runs come in any order: `merge_order` is smallest first).
    assert runs_to_merge(1, [run(50, 4), run(60, 3), run(70, 2), run(1000, 1)], 4) == 2
    assert runs_to_merge(1, [run(50, 4), run(160, 3), run(70, 2), run(1000, 1)], 4) == 2
    assert runs_to_merge(1, [run(50, 4), run(160, 3), run(170, 2), run(1000, 1)], 4) == 1
    assert [r.bytes for r in merge_order([run(50, 4), run(160, 3), run(70, 2)])] == [50, 70, 160]
    assert runs_to_merge(1, [run(50, 4), run(60, 3), run(70, 2), run(1000, 1)], 2) == 3
    # Nothing new: runs merge only when there are too many, and then at least two.
    assert runs_to_merge(0, [run(5, 2), run(100, 1)], 4) == 0
    assert runs_to_merge(0, [run(5, 3), run(6, 2), run(100, 1)], 2) == 2
    assert runs_to_merge(3, [run(100)], 1) == 1
    with pytest.raises(ValueError):
        runs_to_merge(1, [], 0)


sizes = st.lists(st.integers(min_value=1, max_value=1000), max_size=8)


@given(new=st.integers(min_value=0, max_value=1000), existing=sizes,
       max_runs=st.integers(min_value=1, max_value=6))
def test_the_partition_never_holds_more_than_max_runs_and_merges_are_minimal(new, existing, max_runs):
    runs = [run(b, seq=len(existing) - i) for i, b in enumerate(existing)]  # newest first
    merged = runs_to_merge(new, runs, max_runs)
    assert 0 <= merged <= len(runs)
    after = len(runs) - merged + (1 if new or merged else 0)
    if new or len(runs) > max_runs:
        assert after <= max_runs
    else:
        assert merged == 0  # a rerun with nothing new does nothing
    # Brute force: the fewest runs that keep the count, and one more when the next smallest is at most
    # MERGE_GROWTH times the biggest joining.
    if new:
        forced = max(0, len(runs) + 1 - max_runs)
        ordered = sorted(existing)
        grows = 0 < forced < len(ordered) and ordered[forced] <= MERGE_GROWTH * ordered[forced - 1]
        assert merged == forced + grows


def simulate(nights: list[int], base: int, max_runs: int) -> tuple[float, int]:
    """Bytes written per byte appended over the nights, and the most runs a partition held; each night merges
    the runs `runs_to_merge` counts in `merge_order`, as the planner does."""
    return _simulate(nights, base, max_runs)[0]


def _simulate(nights: list[int], base: int, max_runs: int) -> tuple[tuple[float, int], list[int]]:
    runs = [run(base, 0, "base")] if base else []
    written = most = 0
    so_far = []
    for night, size in enumerate(nights, start=1):
        ordered = merge_order(runs)
        merged = runs_to_merge(size, ordered, max_runs)
        new = SortedRun(f"n{night}",
                        (F(f"n{night}", size + sum(r.bytes for r in ordered[:merged]), night, night),))
        written += new.bytes
        runs = [new, *ordered[merged:]]
        most = max(most, len(runs))
        so_far.append(written)
    return (written / sum(nights), most), so_far


# ---- the oracle: the least any merge policy writes, knowing every night in advance ------------------------


def least_bytes(nights: tuple[int, ...], max_runs: int) -> int:
    """The least bytes any merge policy writes over `nights` (each night's appended bytes), exhaustively.

    The model (issue #38's; it gives 1.80 over 10 equal nights and 2.97 over 30 at 4 runs): the partition
    starts with the run of its first compaction, which holds one of the `max_runs` slots and is never merged
    (it is much bigger than a night; that first compaction is not counted). Each night the new bytes are
    written once, into one new run, together with any chosen subset of the other runs (merged straight into
    it: a run merged is written again whole); afterwards at most `max_runs - 1` runs besides the base remain.
    Merges happen only at nights. Cost: all bytes written; divided by the bytes appended, the amplification
    (so at least 1). Dynamic programming over the multiset of run sizes after each night."""
    slots = max_runs - 1

    @cache
    def least(night: int, state: tuple[int, ...]) -> int:
        if night == len(nights):
            return 0
        best = None
        for k in range(len(state) + 1):
            if len(state) - k + 1 > slots:
                continue
            for chosen in itertools.combinations(range(len(state)), k):
                merged = nights[night] + sum(state[i] for i in chosen)
                rest = tuple(sorted([s for i, s in enumerate(state) if i not in chosen] + [merged]))
                cost = merged + least(night + 1, rest)
                best = cost if best is None or cost < best else best
        return best

    return least(0, ())


def least_equal(nights: int, max_runs: int) -> int:
    """`least_bytes` of `nights` equal nights of 1 byte, from one table for every horizon (the same dynamic
    program, by nights left rather than by night)."""
    return _least_equal(nights, max_runs - 1, ())


@cache
def _least_equal(left: int, slots: int, state: tuple[int, ...]) -> int:
    if left == 0:
        return 0
    best = None
    for k in range(len(state) + 1):
        if len(state) - k + 1 > slots:
            continue
        for chosen in set(itertools.combinations(range(len(state)), k)):
            merged = 1 + sum(state[i] for i in chosen)
            rest = tuple(sorted([s for i, s in enumerate(state) if i not in chosen] + [merged]))
            cost = merged + _least_equal(left - 1, slots, rest)
            best = cost if best is None or cost < best else best
    return best


def test_the_oracle_gives_the_issue_s_figures_and_brute_force_agrees():
    assert least_bytes((1,) * 10, 4) / 10 == pytest.approx(1.80)
    assert least_bytes((1,) * 30, 4) / 30 == pytest.approx(2.97, abs=0.005)  # 89 / 30
    assert least_bytes((1,) * 30, 2) == sum(range(1, 31))  # one slot: every night rewrites everything since
    assert least_bytes((5, 7, 1), 8) == 13  # slots to spare: each byte written once
    assert [least_equal(n, k) for n in (7, 12) for k in (3, 5)] == [least_bytes((1,) * n, k) for n in (7, 12)
                                                                      for k in (3, 5)]
    # Brute force over every sequence of choices, with no memo and no canonical order of the runs.
    nights, max_runs = (4, 2, 270, 5), 3

    def every(night: int, state: list[int]) -> int:
        if night == len(nights):
            return 0
        costs = []
        for k in range(len(state) + 1):
            for chosen in itertools.combinations(range(len(state)), k):
                merged = nights[night] + sum(state[i] for i in chosen)
                rest = [s for i, s in enumerate(state) if i not in chosen] + [merged]
                if len(rest) <= max_runs - 1:
                    costs.append(merged + every(night + 1, rest))
        return min(costs)

    # Two slots: the two small nights merged straight into the big one, the last alone.
    assert least_bytes(nights, max_runs) == every(0, []) == 4 + 2 + (270 + 4 + 2) + 5


def online_within(ratio: float, max_runs: int, horizon: int) -> int | None:
    """Whether any online policy (one that cannot tell how many equal nights are still to come) writes at most
    `ratio` times `least_bytes` after every night 1..horizon: None if one does, else the night every
    policy has failed by (exhaustive: each night, every state reachable within the bound,
    at its least cost)."""
    states = {(): 0}
    for night in range(1, horizon + 1):
        bound = ratio * least_equal(night, max_runs)
        reached: dict[tuple[int, ...], int] = {}
        for state, cost in states.items():
            for k in range(len(state) + 1):
                for chosen in set(itertools.combinations(range(len(state)), k)):
                    merged = 1 + sum(state[i] for i in chosen)
                    rest = tuple(sorted([s for i, s in enumerate(state) if i not in chosen] + [merged]))
                    if len(rest) < max_runs and cost + merged <= bound + 1e-9 and cost + merged < reached.get(
                            rest, cost + merged + 1):
                        reached[rest] = cost + merged
        if not reached:
            return night
        states = reached
    return None


def test_equal_nights_near_the_optimum_and_near_the_best_any_online_policy_can_do():
    """Issue #38's figures, 10 and 30 equal nights at 4 runs, within 1.2x; over every horizon of 1-30 nights
    at 2-6 runs within 1.28x, where no online policy can promise 1.2x (at 3-5 runs)."""
    amplification, most = simulate([1] * 10, base=10_000, max_runs=4)
    assert (amplification, most) == (pytest.approx(2.00), 4)  # 1.11x the optimum (1.80)
    amplification, most = simulate([1] * 30, base=10_000, max_runs=4)
    assert amplification == pytest.approx(3.37, abs=0.005) and most == 4  # 1.13x the optimum (2.97)
    worst = {}
    for max_runs in range(2, 7):
        _, written = _simulate([1] * 30, 10_000, max_runs)
        ratios = [w / least_equal(n, max_runs) for n, w in enumerate(written, start=1)]
        assert ratios[9] <= 1.25 and ratios[29] <= 1.25
        worst[max_runs] = round(max(ratios), 2)
    assert worst == {2: 1.0, 3: 1.27, 4: 1.27, 5: 1.25, 6: 1.24}
    # No online policy is within 1.2x after every one of 30 nights at 3, 4 or 5 runs; the best possible worst
    # ratio at 4 runs lies between 1.23 and 1.231.
    assert (online_within(1.2, 3, 30) == 9 and online_within(1.2, 4, 30) == 14
            and online_within(1.2, 5, 30) == 30)
    assert online_within(1.23, 4, 30) is not None and online_within(1.231, 4, 30) is None


def test_thirty_nights_rewrite_each_byte_a_few_times_far_below_full_rewrites():
    amplification, most = simulate([1] * 30, base=1000, max_runs=4)
    assert most <= 4 and amplification == pytest.approx(3.37, abs=0.005)
    every_night_everything, _ = simulate([1] * 30, base=1000, max_runs=1)
    assert every_night_everything > 500  # the partition rewritten whole each night


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.one_of(st.integers(1, 1000), st.integers(90, 110)), min_size=1, max_size=6),
       st.integers(2, 5))
def test_unequal_nights_against_the_oracle(nights, max_runs):
    """Random nights (and runs of nearly equal ones) against the optimum knowing them all: optimal at 2 runs;
    above, within what an online policy can be held to when small nights follow big ones once the slots are
    full (the worst found by a search for bad sequences of at most 6 nights: 2.22x at 3 runs, 1.64x at 4,
    1.38x at 5; see the next test)."""
    amplification, most = simulate(nights, base=100 * sum(nights), max_runs=max_runs)
    assert most <= max_runs
    ratio = amplification * sum(nights) / least_bytes(tuple(nights), max_runs)
    assert ratio <= {2: 1.0, 3: 2.3, 4: 1.7, 5: 1.45}[max_runs] + 1e-9, ratio


def test_the_price_of_not_knowing_the_nights_to_come():
    """The worst sequences a search found: big nights fill the slots, then tiny ones each rewrite the
    smallest big run. The oracle, seeing the tiny nights coming, merged the big runs together first; an
    online policy doing that would pay for it whenever another big night follows instead."""
    for nights, max_runs, ratio in (([483, 1000, 1, 1, 15, 1], 3, 2.22),
                                    ([463, 1000, 1000, 1, 39, 1], 4, 1.64),
                                    ([1000, 499, 1000, 1000, 1, 1], 5, 1.37)):
        amplification, _ = simulate(nights, base=100 * sum(nights), max_runs=max_runs)
        assert (amplification * sum(nights) / least_bytes(tuple(nights), max_runs)
                == pytest.approx(ratio, abs=0.005))


def test_a_backfill_does_not_sit_in_the_way_of_the_nights_after_it():
    """A big night arriving with slots to spare keeps its own run; the small nights after it merge among
    themselves, never into it (the runs merged are the smallest, not the newest)."""
    nights = [10, 9, 1000, 11, 10, 12, 9, 10]
    amplification, most = simulate(nights, base=100_000, max_runs=4)
    assert most <= 4
    assert amplification * sum(nights) / least_bytes(tuple(nights), 4) <= 1.2


@given(st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=40), st.integers(2, 6))
def test_varying_nights_stay_within_max_runs_and_far_below_full_rewrites(nights, max_runs):
    amplification, most = simulate(nights, base=10 * sum(nights), max_runs=max_runs)
    assert most <= max_runs
    full, _ = simulate(nights, base=10 * sum(nights), max_runs=1)
    assert amplification <= full


# ---- the planner's decisions with runs ------------------------------------------------------------------

HASH = "0123abcd"
OWNER = {"name": "Test Team", "email": "test@example.com"}


def spec(**overrides):
    doc = {"table": "t.events", "catalog": "lakesort", "owner": OWNER, "sort": {"keys": [{"column": "k"}]}}
    return parse_spec({**doc, **overrides}, source="test-spec")


def entry(path, lo, hi, size, snapshot_id):
    return _Entry(path=path, size=size, rows=size, content=0, partition="part=a", snapshot_id=snapshot_id,
                  sequence_number=snapshot_id, lo=lo, hi=hi)


OURS = {s: {RUN_ID: f"night-{s}", SPEC_HASH: HASH} for s in range(1, 10)}  # snapshots 1-9 are lakesort runs
BASE = [entry("base-1", 0, 499, 10_000, 1), entry("base-2", 500, 999, 10_000, 1)]


def decide(files, **overrides):
    decision, chosen = _decide("part=a", files, OURS, spec(**overrides), False, "k", HASH)
    return decision, sorted(e.path for e in chosen)


def test_a_night_s_append_becomes_a_run_of_its_own_beside_the_compacted_one():
    decision, chosen = decide([*BASE, entry("new", 100, 900, 300, 50)])  # snapshot 50: another writer's
    assert decision.action == "rewrite" and chosen == ["new"] and decision.sorted_runs == 1
    assert decision.overlap_depth == 2  # the new run overlaps the base: allowed up to max_sorted_runs
    # The next nights: while a slot is free, each night's files are a run of their own.
    files = [*BASE, entry("run-2", 100, 900, 300, 2), entry("new", 50, 950, 300, 50)]
    assert decide(files)[1] == ["new"]
    # Four runs (the base among them) and a fifth night: the smallest run merges with the new files, and
    # the next smallest too, at most twice its size; the big ones stay.
    files = [*BASE, entry("run-2", 0, 900, 3000, 2), entry("run-3", 0, 900, 400, 3),
             entry("run-4", 0, 900, 300, 4), entry("new", 50, 950, 300, 50)]
    decision, chosen = decide(files)
    assert chosen == ["new", "run-3", "run-4"] and any(r.startswith("merging the")
                                                       and "2 of 4 sorted run(s)" in r
                                                       for r in decision.reasons)


def test_the_runs_merged_are_the_smallest_not_the_newest():
    files = [*BASE, entry("run-2", 0, 900, 300, 2), entry("run-3", 0, 900, 3000, 3),
             entry("run-4", 0, 900, 350, 4), entry("new", 50, 950, 300, 50)]
    decision, chosen = decide(files)
    assert chosen == ["new", "run-2", "run-4"] and decision.sorted_runs == 4


def test_nothing_new_does_nothing_until_runs_are_too_many():
    files = [*BASE, entry("run-2", 0, 900, 3000, 2), entry("run-3", 0, 900, 300, 3)]
    decision, chosen = decide(files)
    assert decision.action == "skip" and chosen == [] and decision.sorted_runs == 3
    decision, chosen = decide(files, max_sorted_runs=2)
    assert decision.action == "rewrite" and chosen == ["run-2", "run-3"]


def test_overlapping_files_of_one_run_are_sorted_again():
    files = [*BASE, entry("bad-1", 0, 600, 300, 2), entry("bad-2", 500, 900, 300, 2)]
    decision, chosen = decide(files)
    assert chosen == ["bad-1", "bad-2"] and any("files of run night-2 overlap" in r for r in decision.reasons)


def test_keyed_and_single_run_tables_merge_everything_that_overlaps():
    files = [*BASE, entry("new", 100, 900, 300, 50)]
    for overrides in ({"max_sorted_runs": 1}, {"keys": {"columns": ["k"], "sequence": "k"}}):
        decision, chosen = decide(files, **overrides)
        assert decision.action == "rewrite" and chosen == ["base-1", "base-2", "new"], overrides


# ---- verification knows runs --------------------------------------------------------------------------


def test_verifying_a_table_checks_each_run_and_the_depth_of_a_partition(iceberg_catalog):
    """`lakesort verify TABLE` holds each sorted run to disjoint files, and a partition to at most
    max_sorted_runs overlapping runs (a warning: the next compaction merges them). One lakesort run of two
    disjoint files, then appends by another writer that overlap it."""
    import pyarrow as pa

    from layout.verify.rules import verify_source

    schema = pa.schema([pa.field("k", pa.int64())])
    iceberg_catalog.create_namespace_if_not_exists("t")
    table = iceberg_catalog.create_table("t.events", schema=schema)
    with table.transaction() as tx:  # one lakesort run: two files with disjoint key ranges, one commit
        for ks in (range(50), range(50, 100)):
            tx.append(pa.table({"k": list(ks)}, schema=schema), snapshot_properties={RUN_ID: "night-1"})
    the_spec = spec(max_sorted_runs=2)

    def overlap_findings():
        return [f for f in verify_source("t.events", the_spec).findings if f.rule == "overlap"]

    assert not [f for f in overlap_findings() if f.severity == "error"]
    table.append(pa.table({"k": list(range(10, 90))}, schema=schema))  # another writer: a run of its own
    found = overlap_findings()
    assert not [f for f in found if f.severity == "error"] and not [f for f in found if "max_sorted_runs" in
                                                                     f.diagnosis]  # depth 2: allowed
    table.append(pa.table({"k": list(range(20, 80))}, schema=schema))
    found = overlap_findings()
    (deep,) = [f for f in found if "max_sorted_runs" in f.diagnosis]
    assert deep.severity == "warning" and "overlapping 3 deep" in deep.diagnosis, deep
    assert not [f for f in found if f.severity == "error"]


def test_a_run_outlives_its_expired_snapshot_by_its_path():
    """Maintenance expires old snapshots (their summaries go with them); the files a lakesort run wrote stay
    live, and their path still names run and spec (`layout.catalog.stamped_dir`): they stay a run, not new."""
    data = stamped_dir("s3://bucket/t/data", "20261101T000000-0badcafe", HASH)
    assert stamp_of(f"{data}/lakesort_group=0/lakesort_part=x/part-00000-1.zstd.parquet") == (
        "20261101T000000-0badcafe", HASH)
    assert stamp_of("s3://bucket/t/data/part=a/00000-1.parquet") is None
    old = [entry(f"{data}/lakesort_group=0/f{i}.parquet", lo, lo + 99, 10_000, 700)
           for i, lo in ((1, 0), (2, 100))]
    decision, chosen = decide([*old, entry("new", 50, 150, 300, 50)])  # snapshot 700 expired: not in OURS
    assert chosen == ["new"] and decision.sorted_runs == 1 and decision.foreign_files == 1


def test_full_compaction_every_merges_the_runs_once_the_oldest_since_the_last_full_merge_is_that_old():
    import time

    from layout.compaction.planning.planner import COMMITTED_MS

    now_ms = int(time.time() * 1000)
    day = 24 * 3600 * 1000
    ours = {1: {RUN_ID: "full", SPEC_HASH: HASH, COMMITTED_MS: str(now_ms - 30 * day)},
            2: {RUN_ID: "night-2", SPEC_HASH: HASH, COMMITTED_MS: str(now_ms - 8 * day)},
            3: {RUN_ID: "night-3", SPEC_HASH: HASH, COMMITTED_MS: str(now_ms - 1 * day)}}
    files = [*BASE, entry("run-2", 0, 900, 3000, 2), entry("run-3", 0, 900, 300, 3)]
    weekly = spec(full_compaction_every="7d")
    decision, chosen = _decide("part=a", files, ours, weekly, False, "k", HASH)
    assert decision.action == "rewrite" and sorted(e.path for e in chosen) == sorted(f.path for f in files)
    assert any(r.startswith("full compaction: 3 sorted runs") for r in decision.reasons)
    assert (_decide("part=a", files, ours, spec(full_compaction_every="9d"), False, "k", HASH)[0].action
            == "skip")
    # Its snapshot expired: the run id's leading time says when the run was written.
    expired = {3: ours[3]}
    old = [*BASE, entry("/t/data/lakesort-staging/20200101T000000-0badcafe/spec=0123abcd/f.parquet", 0, 900,
                        3000, 9),
           entry("run-3", 0, 900, 300, 3)]
    decision, chosen = _decide("part=a", old, expired, weekly, False, "k", HASH)
    assert decision.action == "rewrite" and len(chosen) == 4
