"""A loser-tree k-way merge of sorted streams of Arrow record batches.

Readers of a table whose files are each sorted but overlap need one sorted stream, without a full
sort. `merge_sorted` merges k streams (each an iterable of `pyarrow.RecordBatch` or `pa.Table`,
already sorted by the key, nulls last) into one stream of batches, stable: ties keep input order
(stream index, then position). With ``merge="deduplicate"`` / ``"first-row"`` it keeps one row per
key, chosen by a sequence column (Apache Paimon's DeduplicateMergeFunction / FirstRowMergeFunction).

How it works:

* Keys are normalized per input batch (`layout.read.merge_kernels`) into values that compare fast and in
  the requested order: Python ints for integer-like columns (dates, times, timestamps, durations,
  bools; ``~v`` when descending, so no overflow), the values themselves for strings, binary and
  decimals (wrapped in `_Desc` when descending), tuples for multi-column keys; nulls become `NULL`,
  greater than any value whichever the direction (nulls last). Nothing is converted per batch for a
  single key column: an integer-like one stays an int64 numpy array (rows become Python ints only
  when the tree reads them, binary searches run in numpy), any other converts rows on demand (and
  the whole batch once a sixteenth of it was read). Sortedness is checked per batch, vectorized
  (numpy or pyarrow compute), and across batch boundaries with one comparison.
* A loser tree (internal nodes keep the loser of their match) picks the next row: replacing the
  winner replays one leaf-to-root path, one key comparison per level (floor or ceil of log2 k).
* Runs are emitted in bulk: when the same input wins twice in a row, the runner-up (the best loser
  on the winner's path) is found and the end of the winner's run of rows that still beat it is
  found by binary search (`bisect`, or `np.searchsorted` on int64 keys), then emitted as one slice.
  Fully interleaved inputs never pay for this (the winner changes every row); long runs cost
  O(log k + log run) comparisons per run instead of per row.
* Fully interleaved inputs (`_BLOCK_STREAK` single-row wins in a row) switch to a block merge: all
  buffered rows up to the frontier (the smallest last key of the current batches) are merged at once
  by a stable sort of their keys (numpy's timsort, which merges the sorted runs, for one int64 key;
  Arrow's sort_indices otherwise) and one `take`; then the tree is rebuilt.
* Output batches are built from the input slices the chunk used, never row by row: one zero-copy
  slice, a concatenation of slices when they are long, else one `take`.
* Merge functions run on the merged stream, vectorized per chunk: all rows of a key are adjacent
  there and in input order, so "highest sequence, ties to the later stream" is "the last maximum of
  the group". Paimon's loser tree needs per-leaf states (winner/loser with new/same key, popped)
  because its readers reuse record objects, so it must finish a key in every input before advancing
  any; Arrow batches are immutable, so we can keep them and merge after the tree.

Counting (`MergeResult.comparisons`): one per three-way key comparison made by the tree (building
it: k - 1; replaying a path: one per level; finding the runner-up: one per loser on the path
but the first), plus ceil(log2(m + 1)) per binary search over m candidate rows (what bisect makes
at most). Comparisons against an exhausted input count too (they are cheap but real branches).
Validation (sortedness) and merge functions are vectorized and not counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from layout.errors import InputError, UsageError
from layout.read.merge_kernels import END, KeySpec, display, gather, int_numpy, is_int_like, search

MergeFunction = Literal["deduplicate", "first-row"]
MERGE_FUNCTIONS: tuple[str, ...] = get_args(MergeFunction)

__all__ = ["MERGE_FUNCTIONS", "MergeFunction", "MergeResult", "merge_sorted"]


# After this many rows in a row each won by a different input than the row before (no run to emit
# in bulk), the merge switches to a vectorized block merge up to the frontier (`MergeResult._block`).
_BLOCK_STREAK = 64


def _batches(stream: Any, index: int) -> Iterator[pa.RecordBatch]:
    if isinstance(stream, (pa.Table, pa.RecordBatch)):
        stream = [stream]
    for item in stream:
        if isinstance(item, pa.Table):
            yield from item.to_batches()
        elif isinstance(item, pa.RecordBatch):
            yield item
        else:
            raise UsageError(
                f"stream {index} yielded {type(item).__name__}, not a pyarrow RecordBatch or Table"
            )


class MergeResult:
    """The merged stream: an iterator of `pa.RecordBatch` (at most `batch_size` rows each).

    `comparisons` is the number of key comparisons made so far (see the module docstring for what
    counts); `rows_out` the number of rows yielded so far.
    """

    def __init__(
        self,
        streams: list[Any],
        key: list[str],
        merge: MergeFunction | None,
        sequence: str | None,
        descending: bool,
        batch_size: int,
        block_merge: bool = True,
    ) -> None:
        self.comparisons = 0
        self.rows_out = 0
        self._streams = streams
        self._key = key
        self._merge = merge
        self._sequence = sequence
        self._descending = descending
        self._batch_size = batch_size
        self._block_merge = block_merge
        self._output = self._merged()

    def __iter__(self) -> MergeResult:
        return self

    def __next__(self) -> pa.RecordBatch:
        batch = next(self._output)
        self.rows_out += batch.num_rows
        return batch

    # -- inputs ---------------------------------------------------------------------------

    def _setup(self) -> None:
        k = self._k = len(self._streams)
        self._iters = [_batches(s, i) for i, s in enumerate(self._streams)]
        self._schema: pa.Schema | None = None
        self._spec: KeySpec | None = None
        self._keys: list[Any] = [[] for _ in range(k)]  # normalized keys (see layout.read.merge_kernels)
        self._get: list[Any] = [self._keys[i].__getitem__ for i in range(k)]  # row -> normalized key
        self._heads: list[Any] = [END] * k
        self._pos = [0] * k
        self._n = [0] * k
        self._offset = [0] * k  # global row offset (within its stream) of the current batch
        self._bid = [-1] * k  # id of the current batch of each stream
        self._last: list[Any] = [None] * k  # last normalized key of the stream's previous batch
        self._last_display: list[Any] = [None] * k
        self._by_id: dict[int, pa.RecordBatch] = {}
        self._next_id = 0
        for i in range(k):
            self._load(i)

    def _check_schema(self, i: int, batch: pa.RecordBatch) -> None:
        if self._schema is None:
            self._schema = batch.schema
            self._spec = KeySpec(batch.schema, self._key, self._descending)
            if self._sequence is not None:
                _check_sequence(batch.schema, self._sequence)
        elif not batch.schema.equals(self._schema, check_metadata=False):
            raise UsageError(
                f"stream {i} has schema {batch.schema} but earlier input has {self._schema}: "
                "all streams must have the same schema"
            )

    def _load(self, i: int) -> None:
        """Move stream i to its next non-empty batch (or mark it exhausted)."""
        self._offset[i] += self._n[i]
        self._pos[i] = self._n[i] = 0
        for batch in self._iters[i]:
            self._check_schema(i, batch)
            if batch.num_rows == 0:
                continue
            spec = self._spec
            assert spec is not None  # set by the first batch's _check_schema
            keys = spec.normalize(batch, i, self._offset[i])
            get = keys.item if type(keys) is np.ndarray else keys.__getitem__
            n = batch.num_rows
            first, last = get(0), self._last[i]
            if last is not None and first < last:
                raise InputError(
                    f"stream {i} is not sorted by {self._key} ({spec.order}): row {self._offset[i]} "
                    f"has key {display(batch, self._key, 0)!r} after row {self._offset[i] - 1}'s key "
                    f"{self._last_display[i]!r}"
                )
            self._last[i] = get(n - 1)
            self._last_display[i] = display(batch, self._key, n - 1)
            self._keys[i], self._get[i], self._n[i], self._heads[i] = keys, get, n, first
            self._bid[i] = self._next_id
            self._by_id[self._next_id] = batch
            self._next_id += 1
            return
        self._keys[i], self._get[i], self._heads[i] = [], [].__getitem__, END

    # -- the loser tree -------------------------------------------------------------------

    def _build_tree(self) -> int:
        """Play every match bottom-up; internal node j keeps its match's loser. Returns comparisons."""
        k, heads = self._k, self._heads
        if len(getattr(self, "_tree", ())) != k:
            self._tree = [0] * k
        tree = self._tree  # filled in place: the merge loop holds a reference to it
        winners = [0] * k
        for node in range(k - 1, 0, -1):
            a = 2 * node - k if 2 * node >= k else winners[2 * node]
            b = 2 * node + 1 - k if 2 * node + 1 >= k else winners[2 * node + 1]
            ka, kb = heads[a], heads[b]
            if kb < ka or (kb == ka and b < a):
                a, b = b, a
            winners[node], tree[node] = a, b
        tree[0] = winners[1] if k > 1 else 0
        return max(k - 1, 0)

    def _sorted_chunks(self) -> Iterator[pa.RecordBatch]:
        """The merged rows (before any merge function), in batches of `batch_size` rows."""
        self._setup()
        if self._schema is None:
            return
        self.comparisons += self._build_tree()
        k, tree, heads, keys, get, pos, n, bid = (
            self._k,
            self._tree,
            self._heads,
            self._keys,
            self._get,
            self._pos,
            self._n,
            self._bid,
        )
        size = self._batch_size
        seg_batch: list[int] = []
        seg_start: list[int] = []
        seg_len: list[int] = []
        rows = comps = streak = 0
        streak_limit = _BLOCK_STREAK if self._block_merge else float("inf")
        previous = -1
        while True:
            w = tree[0]
            if heads[w] is END:
                break
            if streak >= streak_limit:
                # Interleaved inputs: merge up to the frontier vectorized, then rebuild the tree.
                self.comparisons += comps
                comps = streak = 0
                if rows:
                    yield self._build(seg_batch, seg_start, seg_len)
                    seg_batch, seg_start, seg_len, rows = [], [], [], 0
                yield from self._block()
                self.comparisons += self._build_tree()
                previous = -1
                continue
            p = pos[w]
            if w == previous:
                # The same input won twice: emit its whole run of rows that beat the runner-up.
                node = (w + k) >> 1
                r, rkey = -1, END
                while node:
                    o = tree[node]
                    if r < 0:
                        r, rkey = o, heads[o]
                    else:
                        ok = heads[o]
                        comps += 1
                        if ok < rkey or (ok == rkey and o < r):
                            r, rkey = o, ok
                    node >>= 1
                end = n[w]
                if rkey is not END:
                    comps += (end - p).bit_length()  # ceil(log2(m + 1)) for m candidates
                    end = search(keys[w], rkey, p, end, w < r)
                length = min(end - p, size - rows)
                streak = 0
            else:
                length = 1
                streak += 1
            seg_batch.append(bid[w])
            seg_start.append(p)
            seg_len.append(length)
            rows += length
            p += length
            if p == n[w]:
                self._load(w)
            else:
                pos[w] = p
                heads[w] = get[w](p)
            # Replay the winner's path with its new head: one comparison per level.
            key, cur, node = heads[w], w, (w + k) >> 1
            while node:
                o = tree[node]
                ok = heads[o]
                comps += 1
                if ok < key or (ok == key and o < cur):
                    tree[node], cur, key = cur, o, ok
                node >>= 1
            tree[0] = cur
            previous = w
            if rows >= size:
                self.comparisons += comps
                comps = 0
                yield self._build(seg_batch, seg_start, seg_len)
                seg_batch, seg_start, seg_len, rows = [], [], [], 0
        self.comparisons += comps
        if rows:
            yield self._build(seg_batch, seg_start, seg_len)

    def _block(self) -> Iterator[pa.RecordBatch]:
        """Merge every buffered row up to the frontier at once, vectorized.

        The frontier is the current batch whose last row comes first in merge order, say stream f's
        with key F: every buffered row before (F, f) in (key, stream) order can be emitted now, and
        no row not yet loaded can come before it. Each stream contributes a prefix (found by binary
        search); the prefixes are concatenated in stream order and sorted stably, which is the
        merge order. Comparisons: m - 1 to find the frontier over m inputs, the binary searches,
        and for the sort n * ceil(log2 m), the most an m-way merge of n rows needs (the sort itself
        runs in numpy or Arrow, where it cannot be counted).
        """
        keys, get, pos, n, heads = self._keys, self._get, self._pos, self._n, self._heads
        active = [i for i in range(self._k) if heads[i] is not END]
        f = active[0]
        frontier = get[f](n[f] - 1)
        for i in active[1:]:
            last = get[i](n[i] - 1)
            if last < frontier:  # ties: the earlier stream stays first
                f, frontier = i, last
        comps = len(active) - 1
        batches: list[pa.RecordBatch] = []
        arrays: list[Any] = []  # each batch's int64 keys, or None where the keys are not int64
        for i in active:
            p = pos[i]
            if i == f:
                end = n[i]
            else:
                comps += (n[i] - p).bit_length()
                end = search(keys[i], frontier, p, n[i], i < f)
            if end > p:
                batches.append(self._by_id[self._bid[i]].slice(p, end - p))
                arrays.append(keys[i][p:end] if type(keys[i]) is np.ndarray else None)
            if end == n[i]:
                self._load(i)
            else:
                pos[i], heads[i] = end, get[i](end)
        self.comparisons += comps + sum(map(len, batches)) * (len(batches) - 1).bit_length()
        current = set(self._bid)
        self._by_id = {b: batch for b, batch in self._by_id.items() if b in current}
        size = self._batch_size
        if len(batches) == 1:
            rows = batches[0]
        elif all(a is not None for a in arrays):
            # One int64 key: a stable argsort of the concatenated runs (timsort merges them).
            order = np.concatenate(arrays).argsort(kind="stable")
            rows = pa.concat_batches(batches).take(order)
        else:
            rows = pa.concat_batches(batches)
            assert self._spec is not None  # set by the first batch
            sort_keys = [(c, self._spec.direction, "at_end") for c in self._key]
            rows = rows.take(pc.sort_indices(rows.select(self._key), sort_keys=sort_keys))
        if rows.schema != self._schema:
            rows = rows.cast(self._schema)  # restore schema metadata dropped by a mismatching input
        for start in range(0, rows.num_rows, size):
            yield rows.slice(start, size)

    def _build(self, seg_batch: list[int], seg_start: list[int], seg_len: list[int]) -> pa.RecordBatch:
        """One output batch from the segments (input batch id, start row, length) the tree chose."""
        out = gather(self._by_id, seg_batch, seg_start, seg_len)
        current = set(self._bid)
        self._by_id = {b: batch for b, batch in self._by_id.items() if b in current}
        if out.schema != self._schema:
            out = out.cast(self._schema)  # restore schema metadata dropped by a mismatching input
        return out

    # -- merge functions ------------------------------------------------------------------

    def _merged(self) -> Iterator[pa.RecordBatch]:
        chunks = self._sorted_chunks()
        if self._merge is None:
            yield from chunks
            return
        pending: pa.RecordBatch | None = None  # the last key group so far: it may go on
        for chunk in chunks:
            if pending is not None:
                chunk = pa.concat_batches([pending, chunk])
            starts = self._group_starts(chunk)
            last = int(starts[-1])
            pending = chunk.slice(last)
            if last:
                yield self._pick(chunk.slice(0, last), starts[:-1])
        if pending is not None and pending.num_rows:
            yield self._pick(pending, np.zeros(1, dtype=np.int64))

    def _group_starts(self, chunk: pa.RecordBatch) -> np.ndarray:
        """Row numbers where a new key starts (row 0 always does)."""
        n = chunk.num_rows
        same: Any = None
        for name in self._key:
            arr = chunk.column(name)
            a, b = arr.slice(0, n - 1), arr.slice(1)
            eq = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(a.is_null(), b.is_null()))
            same = eq if same is None else pc.and_(same, eq)
        new = np.ones(n, dtype=bool)
        if n > 1:
            new[1:] = ~same.to_numpy(zero_copy_only=False)
        return np.flatnonzero(new)

    def _pick(self, rows: pa.RecordBatch, starts: np.ndarray) -> pa.RecordBatch:
        """One row per group (groups start at `starts`): the last max / first min of the sequence."""
        n = rows.num_rows
        if len(starts) == n:
            return rows
        seq = rows.column(self._sequence)
        if seq.null_count:
            first = pc.index(seq.is_null(), True).as_py()
            raise InputError(
                f"sequence column {self._sequence!r} is null at key {display(rows, self._key, first)!r}"
            )
        values = int_numpy(seq) if is_int_like(seq.type) else seq.to_numpy(zero_copy_only=False)
        sizes = np.diff(np.append(starts, n))
        group = np.repeat(np.arange(len(starts)), sizes)
        order = np.lexsort((values, group))  # stable: ties stay in merged (stream, position) order
        if self._merge == "deduplicate":
            chosen = order[starts + sizes - 1]  # the last of the maxima: the latest stream wins ties
        else:
            chosen = order[starts]  # the first of the minima: the earliest stream wins ties
        return rows.take(pa.array(chosen))


def _check_sequence(schema: pa.Schema, sequence: str) -> None:
    if schema.get_field_index(sequence) < 0:
        raise UsageError(f"sequence column {sequence!r} is not in the streams' schema {schema.names}")
    t = schema.field(sequence).type
    if not (is_int_like(t) or pa.types.is_integer(t) or pa.types.is_floating(t)):
        raise UsageError(
            f"sequence column {sequence!r} has type {t}: need an integer, float or temporal type"
        )


def merge_sorted(
    streams: Iterable[Any],
    key: str | Sequence[str],
    *,
    merge: MergeFunction | None = None,
    sequence: str | None = None,
    descending: bool = False,
    batch_size: int = 65_536,
    block_merge: bool = True,
) -> MergeResult:
    """Merge sorted streams of Arrow batches into one sorted stream (see the module docstring).

    `streams`: iterables of `pa.RecordBatch` (or `pa.Table`), each sorted by `key` (nulls last;
    all key columns descending if `descending`). `merge`: None keeps every row, ties in input order
    (stream index, then position); "deduplicate" keeps per key the row with the highest `sequence`
    (ties: the later stream); "first-row" the lowest (ties: the earlier stream).
    `block_merge=False` keeps every row in the loser tree (no vectorized block merges of
    interleaved inputs): slower, but `comparisons` is then an exact count (tests use it).
    Raises UsageError for bad options or mismatching schemas, InputError for unsorted input (while
    iterating).
    """
    if merge is not None and merge not in MERGE_FUNCTIONS:
        raise UsageError(
            f"merge={merge!r} is not a merge function; valid: None, {', '.join(map(repr, MERGE_FUNCTIONS))}"
        )
    if merge is not None and sequence is None:
        raise UsageError(f"merge={merge!r} needs sequence= (the column whose value picks the row to keep)")
    columns = [key] if isinstance(key, str) else list(key)
    if not columns or not all(isinstance(c, str) for c in columns):
        raise UsageError(f"key must be a column name or a non-empty list of column names, got {key!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise UsageError(f"batch_size must be a positive int, got {batch_size!r}")
    return MergeResult(
        list(streams), columns, merge, sequence, bool(descending), batch_size, bool(block_merge)
    )
