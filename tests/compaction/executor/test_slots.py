"""`layout.compaction.executor.slots`: output files cut into pieces,
pieces packed into write tasks (pure logic).

The properties are what the job relies on: a task never holds two slots of one (group, partition) (its
rows would land in one file), a task's positions are 0..n-1, no piece is larger than asked, a packed task
stays within its budget, and the written files map back to each output file's pieces in key order.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout.compaction.executor.slots import (
    EDGE_SLACK,
    edges_on_values,
    flat_destinations,
    plan_slots,
    quantile_picks,
    stitch_lists,
)

partitions = st.dictionaries(
    st.tuples(st.integers(0, 3), st.sampled_from(["", "m=1", "m=2", "m=3"])),
    st.tuples(st.integers(1, 6), st.floats(0, 500.0)), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(parts=partitions, piece_bytes=st.integers(1, 200), pack_bytes=st.integers(1, 300),
       parallelism=st.integers(1, 8), pack=st.booleans())
def test_slot_plans_keep_the_job_s_invariants(parts, piece_bytes, pack_bytes, parallelism, pack):
    plan = plan_slots(parts, piece_bytes=piece_bytes, pack_bytes=pack_bytes,
                      parallelism=parallelism, pack=pack)
    # Key order: by (group, partition), file, piece; each file of a partition in the same number of pieces.
    assert [(s.group_id, s.part, s.file, s.piece) for s in plan.slots] == sorted(
        (g, p, f, k) for (g, p), (files, _) in parts.items() for f in range(files)
        for k in range(plan.pieces_per_file(g, p)))
    assert (plan.slot_counts()
            == {pair: files * plan.pieces_per_file(*pair) for pair, (files, _) in parts.items()})
    for (g, p), (files, size) in parts.items():
        assert size / files / plan.pieces_per_file(g, p) <= piece_bytes  # no piece larger than asked
        assert (plan.pieces_per_file(g, p) == 1
                or size / files / (plan.pieces_per_file(g, p) - 1) > piece_bytes)
    tasks: dict[int, list] = {}
    for s in plan.slots:
        tasks.setdefault(s.task, []).append(s)
    assert sorted(tasks) == list(range(plan.tasks))
    total = sum(size for _, size in parts.values())
    budget = min(pack_bytes, total / (2 * parallelism))
    for held in tasks.values():
        assert sorted(s.position for s in held) == list(range(len(held)))
        assert len({(s.group_id, s.part) for s in held}) == len(held), "two slots of one partition in a task"
        if not pack:
            assert len(held) == 1
        elif len(held) > 1:
            sizes = [parts[s.group_id, s.part][1] / parts[s.group_id, s.part][0]
                     / plan.pieces_per_file(s.group_id, s.part) for s in held]
            assert sum(sizes) <= budget + 1e-9
    assert plan.most_per_task == max(len(h) for h in tasks.values())


@settings(max_examples=200, deadline=None)
@given(parts=partitions, piece_bytes=st.integers(1, 200), seed=st.integers(0, 2**32 - 1))
def test_written_files_map_back_to_each_file_s_pieces_in_order(parts, piece_bytes, seed):
    plan = plan_slots(parts, piece_bytes=piece_bytes, parallelism=2)
    rng = random.Random(seed)
    present = [s for s in plan.slots if rng.random() < 0.8]  # a slot without rows writes no file
    paths = [f"s3://b/t/data/g={s.group_id}/p={s.part}/part-{s.task:05d}-uuid.c000.zstd.parquet"
             for s in present]
    rng.shuffle(paths)
    expected: dict = {}
    for s in present:
        expected.setdefault((s.group_id, s.part, s.file), []).append(
            f"s3://b/t/data/g={s.group_id}/p={s.part}/part-{s.task:05d}-uuid.c000.zstd.parquet")
    assert stitch_lists(plan, paths, "g", "p") == [expected[k] for k in sorted(expected)]


def test_a_file_that_is_no_piece_is_refused():
    plan = plan_slots({(0, "m=1"): (2, 100.0)}, piece_bytes=40)
    with pytest.raises(ValueError, match="no piece of the write's plan"):
        stitch_lists(plan, ["/t/g=0/m=1/part-00099-x.parquet"], "g", "p")
    with pytest.raises(ValueError, match="a second file for piece 0 of file 0"):
        stitch_lists(plan,
                     ["/t/g=0/p=m=1/part-00000-x.c000.parquet", "/t/g=0/p=m=1/part-00000-x.c001.parquet"],
                     "g", "p")


def test_small_partitions_share_tasks_and_large_files_split():
    """TPC-H SF1 as the benchmark has it: 84 month partitions of ~2 MiB into tasks of 8 MiB, and one
    unpartitioned group of three ~58 MiB files into two pieces each."""
    months = plan_slots({(i, f"m={i}"): (1, 2.07 * 2**20) for i in range(84)}, parallelism=2)
    assert 21 <= months.tasks <= 28 and months.most_pieces == 1 and months.most_per_task == 3
    flat = plan_slots({(0, ""): (3, 174e6)}, piece_bytes=32 << 20, parallelism=2)
    assert flat.tasks == 6 and flat.most_pieces == 2 and flat.most_per_task == 1


@settings(max_examples=200, deadline=None)
@given(parts=partitions, piece_bytes=st.integers(1, 200), seed=st.integers(0, 2**32))
def test_flat_files_go_to_their_slot_s_directory(parts, piece_bytes, seed):
    """A write of one slot per task into one directory: each task's file (part-<task>-...) goes to its slot's
    (group, partition) directory; a file of no task, or a second one of a task, is refused."""
    plan = plan_slots(parts, piece_bytes=piece_bytes, pack=False)
    names = [f"part-{s.task:05d}-uuid.c000.zstd.parquet" for s in plan.slots]
    random.Random(seed).shuffle(names)
    moves = dict(flat_destinations(plan, names, "g", "p"))
    assert len(moves) == len(plan.slots)
    for s in plan.slots:
        assert moves[f"part-{s.task:05d}-uuid.c000.zstd.parquet"] == f"g={s.group_id}/p={s.part}"
    with pytest.raises(ValueError, match="no task"):
        flat_destinations(plan, [*names, f"part-{plan.tasks:05d}-uuid.c000.zstd.parquet"], "g", "p")
    with pytest.raises(ValueError, match="second file"):
        flat_destinations(plan, [*names, names[0].replace("c000", "c001")], "g", "p")


@settings(max_examples=200, deadline=None)
@given(parts=partitions, piece_bytes=st.integers(1, 200), pack=st.booleans(), nan_first=st.booleans(),
       data=st.data())
def test_nan_slots_are_a_piece_of_their_own_at_the_end_where_nan_sorts(
    parts, piece_bytes, pack, nan_first, data
):
    """A partition whose first sort key holds NaN gets one more slot, the last piece of its last file (NaN
    sorts last ascending) or the first of its first (descending); a row placed among the regular slots alone
    maps to its slot in the plan, or to its partition's NaN slot. Oracle: the plan without NaN slots."""
    with_nan = data.draw(st.sets(st.sampled_from(sorted(parts))))
    nan_parts = {pair: 10.0 for pair in with_nan}
    plan = plan_slots(parts, piece_bytes=piece_bytes, parallelism=2, pack=pack, nan_parts=nan_parts,
                      nan_first=nan_first)
    plain = plan_slots(parts, piece_bytes=piece_bytes, parallelism=2, pack=pack)
    assert [(s.group_id, s.part, s.file, s.piece) for s in plan.slots if not s.nan] == \
        [(s.group_id, s.part, s.file, s.piece) for s in plain.slots]
    assert plan.regular_counts() == plain.slot_counts()
    for pair in parts:
        slots = [s for s in plan.slots if (s.group_id, s.part) == pair]
        nan = [s for s in slots if s.nan]
        assert len(nan) == (pair in with_nan)
        if nan:  # at the partition's end where NaN sorts, and the end of its file's pieces in key order
            assert nan[0] == (slots[0] if nan_first else slots[-1])
            same_file = sorted(s.piece for s in slots if s.file == nan[0].file)
            assert nan[0].piece == (same_file[0] if nan_first else same_file[-1])
    for held in {s.task: [t for t in plan.slots if t.task == s.task] for s in plan.slots}.values():
        assert len({(s.group_id, s.part) for s in held}) == len(held), "two slots of one partition in a task"
    remap = plan.nan_remap()
    if not with_nan:
        assert remap is None and plan.most_pieces == plain.most_pieces
        return
    regular, nan_of = remap
    assert len(regular) == len(plain.slots)
    for r, (i, j) in enumerate(zip(regular, nan_of, strict=True)):
        s, p = plan.slots[i], plain.slots[r]
        assert (s.group_id, s.part, s.file, s.piece, s.nan) == (p.group_id, p.part, p.file, p.piece, False)
        target = plan.slots[j]
        assert (target.group_id, target.part) == (s.group_id, s.part)
        assert target.nan == ((s.group_id, s.part) in with_nan)
    assert plan.most_pieces == plain.most_pieces + 1 or plan.most_pieces == plain.most_pieces
    paths = [f"s3://b/t/data/g={s.group_id}/p={s.part}/part-{s.task:05d}-uuid.c000.zstd.parquet"
             for s in plan.slots]
    if pack is False:
        for files in stitch_lists(plan, paths, "g", "p"):  # the NaN piece stitched at its end of its file
            tasks = [int(f.rsplit("/part-", 1)[1][:5]) for f in files]
            slots = [next(s for s in plan.slots if s.task == t) for t in tasks]
            if any(s.nan for s in slots):
                assert (slots[0] if nan_first else slots[-1]).nan


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 15)), min_size=1, max_size=400),
       st.integers(1, 6), st.integers(1, 3))
def test_file_edges_move_to_the_start_of_a_first_key_value_only_within_the_slack(rows, files, pieces):
    """Prefixes of (first key << 4 | second key): a boundary between pieces of one file stays; an edge between
    files starts a first-key value afterwards exactly when one of the two starts around it (checked one by
    one, by counting the sample) moves at most EDGE_SLACK of a file's sampled rows and stays strictly between
    its neighbours, and then it is the one that moves fewer."""
    shift = 4
    ordered = sorted((a << shift) | b for a, b in rows)
    before = quantile_picks(ordered, files * pieces)
    after = edges_on_values(before, ordered, pieces, shift)
    assert len(after) == len(before)
    assert all(x <= y for x, y in itertools.pairwise(after))
    most = EDGE_SLACK * len(ordered) / files

    def rank(v: int) -> int:
        return sum(x < v for x in ordered)

    for j, (old, new) in enumerate(zip(before, after, strict=True), start=1):
        if j % pieces or old & 0xF == 0:
            assert new == old
            continue
        low = after[j - 2] if j >= 2 else None
        high = before[j] if j < len(before) else None
        fits = [(abs(rank(c) - rank(old)), c)
                for c in ((old >> shift) << shift, ((old >> shift) + 1) << shift) if (low is None or c > low)
                and (high is None or c < high) and abs(rank(c) - rank(old)) <= most]
        assert new == (min(fits)[1] if fits else old)


def test_file_edges_inside_one_day_move_to_its_start():
    """Three files over 31 days of 100 rows each, the first key a day: each edge moves to the nearer start of
    a day, and no day spans two files."""
    shift = 8
    ordered = sorted((day << shift) | k for day in range(31) for k in range(100))
    after = edges_on_values(quantile_picks(ordered, 3), ordered, 1, shift)
    assert [(b >> shift, b & 0xFF) for b in after] == [(10, 0), (21, 0)]
