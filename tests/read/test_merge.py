"""Tests of layout.read.merge: the loser-tree k-way merge against brute-force oracles."""

from __future__ import annotations

import datetime as dt
import decimal
import heapq
import itertools
import math
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout.errors import InputError, UsageError
from layout.read import merge as merge_module
from layout.read.merge import merge_sorted

# -- random sorted streams --------------------------------------------------------------------

# Small domains so that duplicate keys (within and across streams) are common.
KEY_TYPES = {
    "int": (pa.int64(), st.integers(-5, 5)),
    "str": (pa.string(), st.sampled_from(["", "a", "ab", "b", "ä", "zz"])),
    "date": (pa.date32(), st.sampled_from([dt.date(2020, 1, d) for d in (1, 2, 3, 31)])),
    "dec": (pa.decimal128(6, 2), st.sampled_from([decimal.Decimal(x) for x in ("-1.50", "0.00", "2.25")])),
    "ts": (pa.timestamp("us", tz="UTC"), st.integers(-3, 3)),
}
KEY_SETS = [["int"], ["str"], ["date"], ["dec"], ["ts"], ["int", "str"], ["str", "int", "date"]]


@st.composite
def merge_cases(draw):
    names = draw(st.sampled_from(KEY_SETS))
    descending = draw(st.booleans())
    k = draw(st.integers(1, 64))
    max_rows = max(2, 120 // k)
    fields = [pa.field(n, KEY_TYPES[n][0]) for n in names]
    schema = pa.schema(
        [*fields, pa.field("seq", pa.int64()), pa.field("stream", pa.int32()), pa.field("pos", pa.int64())]
    )
    order = "descending" if descending else "ascending"
    streams, tables = [], []
    for i in range(k):
        n = draw(st.integers(0, max_rows))
        columns = {}
        for name in names:
            values = draw(st.lists(st.one_of(st.none(), KEY_TYPES[name][1]), min_size=n, max_size=n))
            columns[name] = pa.array(values, KEY_TYPES[name][0])
        columns["seq"] = pa.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), pa.int64())
        table = pa.table(columns).sort_by([(c, order, "at_end") for c in names])
        table = pa.table(
            {
                **{c: table.column(c) for c in [*names, "seq"]},
                "stream": pa.array([i] * n, pa.int32()),
                "pos": pa.array(range(n), pa.int64()),
            },
            schema=schema,
        )
        tables.append(table)
        cuts = sorted(draw(st.lists(st.integers(0, n), max_size=4)))
        bounds = [0, *cuts, n]
        streams.append([_batch(table, a, b) for a, b in itertools.pairwise(bounds)])
    batch_size = draw(st.sampled_from([1, 3, 64, 65_536]))
    return names, descending, streams, tables, schema, batch_size


def _batch(table: pa.Table, start: int, stop: int) -> pa.RecordBatch:
    """Rows [start, stop) of `table` as one batch (possibly empty)."""
    batches = table.slice(start, stop - start).combine_chunks().to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)


def _flatten(streams):
    out = []
    for stream in streams:
        batches = []
        for b in stream:
            batches.extend(b if isinstance(b, list) else [b])
        out.append(batches)
    return out


def _collect(result, schema) -> pa.Table:
    batches = list(result)
    return pa.Table.from_batches(batches, schema=schema)


def _sort_key(names, descending):
    order = "descending" if descending else "ascending"
    return [(c, order, "at_end") for c in names]


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(case=merge_cases(), block=st.booleans())
def test_merge_equals_stable_sort(case, block):
    names, descending, streams, tables, schema, batch_size = case
    # A block merge after every 2 single-row wins, so that small inputs exercise it too.
    with mock.patch.object(merge_module, "_BLOCK_STREAK", 2):
        result = merge_sorted(
            _flatten(streams), names, descending=descending, batch_size=batch_size, block_merge=block
        )
        batches = list(result)
    assert all(b.num_rows <= batch_size for b in batches)
    out = pa.Table.from_batches(batches, schema=schema)
    everything = pa.concat_tables(tables)
    # Arrow's sort_indices is stable: ties keep concatenation order, i.e. stream then position.
    expected = everything.take(pa.compute.sort_indices(everything, sort_keys=_sort_key(names, descending)))
    assert out.equals(expected)
    assert result.rows_out == everything.num_rows


def _oracle(tables, names, descending, rule) -> pa.Table:
    """Brute force: group every row by key, keep max (deduplicate) or min (first-row) sequence."""
    best: dict[tuple, dict] = {}
    for table in tables:
        for row in table.to_pylist():
            key = tuple(row[c] for c in names)
            rank = (row["seq"], row["stream"], row["pos"])  # later stream / position wins ties
            held = best.get(key)
            if held is None:
                best[key] = row
                continue
            held_rank = (held["seq"], held["stream"], held["pos"])
            if (rank > held_rank) if rule == "deduplicate" else (rank < held_rank):
                best[key] = row
    picked = pa.Table.from_pylist(list(best.values()), schema=tables[0].schema)
    return picked.take(pa.compute.sort_indices(picked, sort_keys=_sort_key(names, descending)))


@pytest.mark.parametrize("rule", ["deduplicate", "first-row"])
@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(case=merge_cases())
def test_merge_functions_match_group_by(rule, case):
    names, descending, streams, tables, schema, batch_size = case
    with mock.patch.object(merge_module, "_BLOCK_STREAK", 2):
        result = merge_sorted(
            _flatten(streams), names, merge=rule, sequence="seq", descending=descending, batch_size=batch_size
        )
        out = _collect(result, schema)
    assert out.equals(_oracle(tables, names, descending, rule))
    assert result.rows_out == out.num_rows


def test_tables_and_batches_are_both_streams():
    a = pa.table({"k": [1, 4]})
    b = pa.record_batch({"k": [2, 3]})
    out = _collect(merge_sorted([a, [b], iter([])], "k"), a.schema)
    assert out.column("k").to_pylist() == [1, 2, 3, 4]


def test_long_runs_use_bulk_path():
    # Two streams in blocks of 1,000 consecutive keys: a handful of comparisons per block, not per row.
    k, rows, block = 2, 20_000, 1_000
    streams = []
    for i in range(k):
        keys = [b * block * k + i * block + j for b in range(rows // block) for j in range(block)]
        streams.append([pa.record_batch({"k": keys[s : s + 4096]}) for s in range(0, rows, 4096)])
    result = merge_sorted(streams, "k")
    out = _collect(result, pa.schema([("k", pa.int64())]))
    assert out.column("k").to_pylist() == list(range(k * rows))
    assert result.comparisons < k * rows / 20


# -- comparisons ------------------------------------------------------------------------------


def _interleaved(k: int, per: int, batch: int = 50):
    """Stream i holds i, i + k, i + 2k, ...: the winner changes at every row (row-at-a-time path)."""
    return [
        [
            pa.record_batch({"k": list(range(i + s * k, i + min(s + batch, per) * k, k))})
            for s in range(0, per, batch)
        ]
        for i in range(k)
    ]


class _Counted:
    comparisons = 0
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __lt__(self, other):
        _Counted.comparisons += 1
        return self.v < other.v

    def __eq__(self, other):
        return self.v == other.v


def _heapq_comparisons(k: int, per: int) -> int:
    _Counted.comparisons = 0
    runs = [[(i + j * k, i, j) for j in range(per)] for i in range(k)]
    out = list(heapq.merge(*runs, key=lambda t: _Counted(t[0])))
    assert len(out) == k * per
    return _Counted.comparisons


def _textbook_heap_comparisons(k: int, per: int) -> int:
    """A binary-heap merge with the textbook sift-down: two comparisons per level (children, then item)."""
    comparisons = 0
    heap = [((i, i, 0)) for i in range(k)]
    heap.sort()  # building is not counted: we compare the per-row cost
    while heap:
        key, stream, j = heap[0]
        if j + 1 < per:
            heap[0] = (key + k, stream, j + 1)
        else:
            heap[0] = heap[-1]
            heap.pop()
        pos, n = 0, len(heap)
        while True:
            child = 2 * pos + 1
            if child >= n:
                break
            if child + 1 < n:
                comparisons += 1
                if heap[child + 1] < heap[child]:
                    child += 1
            comparisons += 1
            if not heap[child] < heap[pos]:
                break
            heap[pos], heap[child] = heap[child], heap[pos]
            pos = child
    return comparisons


class _Key:
    """A normalized key that counts the comparisons made with it, in counters the test owns: `less` for
    `<`, `<=`, `>`, `>=` (each three-way comparison of the tree starts with exactly one), `equal` for `==`
    (the tie-break after a `<` that was false). Above every value: the merge's END and NULL markers."""

    less = equal = 0
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __lt__(self, other):
        _Key.less += 1
        return self.v < other.v if type(other) is _Key else True

    def __le__(self, other):
        _Key.less += 1
        return self.v <= other.v if type(other) is _Key else True

    def __gt__(self, other):
        _Key.less += 1
        return self.v > other.v if type(other) is _Key else False

    def __ge__(self, other):
        _Key.less += 1
        return self.v >= other.v if type(other) is _Key else False

    def __eq__(self, other):
        _Key.equal += 1
        return type(other) is _Key and self.v == other.v

    __hash__ = None


class _CountingKeySpec(merge_module.KeySpec):
    """The merge's own key normalization (and sortedness check), each key then wrapped in a `_Key`."""

    def normalize(self, batch, stream, offset):
        keys = super().normalize(batch, stream, offset)
        return [_Key(v) for v in (keys.tolist() if hasattr(keys, "tolist") else list(keys))]


@pytest.mark.parametrize("k", [2, 4, 5, 8, 16, 37, 64])
def test_comparisons_counted_outside_the_code_at_most_log2_k_per_row(k, monkeypatch):
    """The loser tree's O(log k) per row, without trusting `MergeResult.comparisons`: the keys count the
    comparisons made with them. Interleaved streams (the winner changes at every row): each row replays one
    leaf-to-root path, at most ceil(log2 k) three-way comparisons; setup is k - 1 to build the tree and one
    sortedness check per batch after a stream's first. Comparisons the markers (END, NULL) make on their own
    side are not seen; on these inputs they only happen once a stream ran out."""
    per, batch = 300, 50
    monkeypatch.setattr(merge_module, "KeySpec", _CountingKeySpec)
    _Key.less = _Key.equal = 0
    result = merge_sorted(_interleaved(k, per, batch), "k", block_merge=False)
    out = _collect(result, pa.schema([("k", pa.int64())]))
    rows = k * per
    assert out.column("k").to_pylist() == list(range(rows))
    depth = math.ceil(math.log2(k))
    setup = (k - 1) + k * (math.ceil(per / batch) - 1)
    assert rows * (depth - 1) <= _Key.less <= rows * depth + setup, (_Key.less, rows, depth)
    assert _Key.equal <= _Key.less, "a tie-break only after a `<` that was false"


@pytest.mark.parametrize("k", [2, 4, 5, 8, 16, 37, 64])
def test_comparisons_per_row_at_most_log2_k(k):
    per = 300
    # block_merge=False: every row goes through the tree (the default merges long interleaved
    # stretches vectorized, whose comparisons are an upper bound, not a count).
    result = merge_sorted(_interleaved(k, per), "k", block_merge=False)
    out = _collect(result, pa.schema([("k", pa.int64())]))
    rows = k * per
    assert out.column("k").to_pylist() == list(range(rows))
    # Each row replays one leaf-to-root path: floor or ceil(log2 k) comparisons (exactly ceil for
    # a power of two); the slack k - 1 is building the tree once. The bulk path never triggers
    # here because the winner changes at every row.
    depth = math.ceil(math.log2(k))
    assert result.comparisons <= rows * depth + (k - 1)
    # Measured: Python's heapq.merge uses heapreplace, whose sift (Floyd's: down to a leaf, then up)
    # costs about log2 k + O(1) per row; on this input, where the replacement always sinks to the
    # bottom, it matches the loser tree (ratio 0.87 .. 1.00). So against heapq we can only claim
    # "no worse" (slack: tree building, k - 1).
    assert result.comparisons <= _heapq_comparisons(k, per) + k
    # Against a textbook sift-down heap (two comparisons per level, children then item) the loser
    # tree makes 0.60 (k = 64) .. 0.75 (k = 4) as many, measured: not quite half, because a heap of k
    # items has a full level fewer than the loser tree's ceil(log2 k) for most k (its last level is
    # partly empty) and the early exit at the bottom saves one comparison. Bound: 0.8.
    if k >= 4:
        assert result.comparisons <= 0.8 * _textbook_heap_comparisons(k, per) + k


# -- errors -----------------------------------------------------------------------------------


def test_unsorted_input_names_stream_position_and_keys():
    good = [pa.record_batch({"k": [1, 2, 3]})]
    bad = [pa.record_batch({"k": [1, 5]}), pa.record_batch({"k": [6, 9, 7]})]
    with pytest.raises(InputError, match=r"stream 1 .*row 4 has key 7 after row 3's key 9"):
        list(merge_sorted([good, bad], "k"))
    # across a batch boundary
    bad = [pa.record_batch({"k": [1, 5]}), pa.record_batch({"k": [4]})]
    with pytest.raises(InputError, match=r"stream 1 .*row 2 has key 4 after row 1's key 5"):
        list(merge_sorted([good, bad], "k"))
    # nulls must come last
    bad = [pa.record_batch({"k": pa.array([None, 1], pa.int64())})]
    with pytest.raises(InputError, match=r"stream 0 .*row 1 has key 1 after row 0's key None"):
        list(merge_sorted(bad, "k"))
    # strings and descending order
    bad = [pa.record_batch({"s": ["b", "c"]})]
    with pytest.raises(InputError, match=r"stream 0 .*descending.*row 1 has key 'c' after row 0's key 'b'"):
        list(merge_sorted(bad, "s", descending=True))
    bad = [pa.record_batch({"a": [1, 1], "s": ["b", "a"]})]
    with pytest.raises(InputError, match=r"row 1 has key \(1, 'a'\) after row 0's key \(1, 'b'\)"):
        list(merge_sorted(bad, ["a", "s"]))


def test_schema_mismatch_names_the_stream():
    a = [pa.record_batch({"k": [1]})]
    b = [pa.record_batch({"k": pa.array([2], pa.int32())})]
    with pytest.raises(UsageError, match="stream 1 has schema"):
        list(merge_sorted([a, b], "k"))


def test_bad_options():
    with pytest.raises(UsageError, match="valid: None, 'deduplicate', 'first-row'"):
        merge_sorted([], "k", merge="last-row", sequence="s")
    with pytest.raises(UsageError, match="needs sequence="):
        merge_sorted([], "k", merge="deduplicate")
    with pytest.raises(UsageError, match="key column 'x'"):
        list(merge_sorted([pa.table({"k": [1]})], "x"))
    with pytest.raises(UsageError, match="batch_size"):
        merge_sorted([], "k", batch_size=0)


def test_empty_inputs():
    assert list(merge_sorted([], "k")) == []
    assert list(merge_sorted([[], iter([])], "k")) == []


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("kind", ["int", "str", "int_nulls", "str_nulls"])
def test_long_streams_mixed_runs_equal_stable_sort(kind, descending):
    # Larger than the property tests: runs of 1 .. 300 rows (row-level path, bulk runs, block merges),
    # batches of hundreds of rows (so lazily converted string keys get converted in full, and output
    # chunks are built both by concatenating long segments and by one take), duplicates across streams.
    import random

    rng = random.Random(f"{kind}{descending}")
    k, n = 5, 3_000
    order = "descending" if descending else "ascending"
    tables = []
    for i in range(k):
        values, v = [], 0
        while len(values) < n:
            v += rng.choice([0, 1, 1, 2, 7 * k])
            values.extend([v] * rng.choice([1, 1, 2, 300]))
        values = values[:n]
        if kind.endswith("nulls"):
            nulls = rng.randrange(1, 50)
            values[-nulls:] = [None] * nulls
        column = pa.array(values, pa.int64())
        if kind.startswith("str"):
            column = pa.compute.utf8_lpad(pa.compute.cast(column, pa.string()), 8, "0")
        table = pa.table({"k": column, "stream": pa.array([i] * n, pa.int32()), "pos": pa.array(range(n))})
        tables.append(table.sort_by([("k", order, "at_end")]).set_column(2, "pos", pa.array(range(n))))
    streams = [t.to_batches(max_chunksize=rng.choice([97, 500, 4096])) for t in tables]
    everything = pa.concat_tables(tables)
    expected = everything.take(pa.compute.sort_indices(everything, sort_keys=[("k", order, "at_end")]))
    for block, streak in ((True, 4), (True, merge_module._BLOCK_STREAK), (False, 4)):
        with mock.patch.object(merge_module, "_BLOCK_STREAK", streak):
            result = merge_sorted(streams, "k", descending=descending, batch_size=1_000, block_merge=block)
            out = _collect(result, tables[0].schema)
        assert out.equals(expected), (block, streak)
