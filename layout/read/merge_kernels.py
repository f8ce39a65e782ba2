"""Key normalization and the vectorized pieces of `layout.read.merge` (see its module docstring).

* `KeySpec.normalize` checks a batch's sortedness (vectorized) and returns its normalized keys in
  one of three forms, all indexable by row and all searchable with `search`:

  - one integer-like key column without nulls: the int64 numpy array itself (``~v`` when
    descending). Rows become Python ints only when the loser tree reads them (`ndarray.item`);
    binary searches run in numpy (`np.searchsorted`). Nothing is converted per batch.
  - one key column of another type (strings, binary, decimals, floats, uint64): `LazyKeys`, which
    converts single rows on demand (heads, binary searches: a few per run) and the whole batch at
    once (`to_pylist`) only after a sixteenth of its rows were asked for (interleaved inputs).
  - several key columns, or one integer-like column with nulls: a list of Python values (tuples
    for several columns; nulls as `NULL` or `INT_NULL`).

* `gather` builds one output batch from the segments (input batch, start, length) the tree chose:
  one zero-copy slice, a concatenation of slices when segments are long, else one `take`.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from layout.errors import InputError, UsageError

__all__ = [
    "END",
    "INT_NULL",
    "NULL",
    "KeySpec",
    "LazyKeys",
    "display",
    "gather",
    "int_numpy",
    "is_int_like",
    "search",
]


class _Top:
    """A value greater than every key value: `NULL` (nulls last) and, above it, `END` (exhausted)."""

    __slots__ = ("rank",)

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def __lt__(self, other: object) -> bool:
        return isinstance(other, _Top) and self.rank < other.rank

    def __gt__(self, other: object) -> bool:
        return not isinstance(other, _Top) or self.rank > other.rank

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return self.rank

    def __repr__(self) -> str:
        return ("NULL", "END")[self.rank - 1]


NULL = _Top(1)
END = _Top(2)
# Nulls of an integer-like column: a Python int above every int64 (and every ~int64), cheaper than NULL.
INT_NULL = 1 << 64
_INT64_MAX = (1 << 63) - 1
# Segments at least this long on average are concatenated (memcpy) rather than gathered by `take`.
_CONCAT_MIN_AVERAGE = 64


class _Desc:
    """A key value in descending order: compares reversed; still below `NULL` (nulls stay last)."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: object) -> bool:
        return other.v < self.v if type(other) is _Desc else True

    def __gt__(self, other: object) -> bool:
        return self.v < other.v if type(other) is _Desc else False

    def __eq__(self, other: object) -> bool:
        return type(other) is _Desc and self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)


def is_int_like(t: pa.DataType) -> bool:
    # uint64 does not fit int64; it takes the generic path (Python ints from to_pylist).
    return bool(
        (pa.types.is_integer(t) and t != pa.uint64())
        or pa.types.is_boolean(t)
        or pa.types.is_temporal(t)  # date, time, timestamp, duration
    )


def _orderable(t: pa.DataType) -> bool:
    return (
        is_int_like(t)
        or pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_string_view(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    )


def int_numpy(arr: pa.Array) -> np.ndarray:
    """An integer-like array as int64 (nulls as 0: callers mask them)."""
    t = arr.type
    if pa.types.is_boolean(t):
        arr = arr.cast(pa.int8())
    elif pa.types.is_temporal(t):
        arr = arr.view(pa.int32() if t.bit_width == 32 else pa.int64())
    if arr.null_count:
        arr = arr.fill_null(0)
    values: np.ndarray = arr.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return values


def display(batch: pa.RecordBatch, columns: Sequence[str], row: int) -> Any:
    values = tuple(batch.column(c)[row].as_py() for c in columns)
    return values[0] if len(values) == 1 else values


class LazyKeys:
    """One batch's normalized keys of a single non-integer key column, converted on demand.

    Indexable like the list `KeySpec.column_values` would return (so `bisect` works on it): rows are
    converted one at a time until more than a sixteenth of the batch (at least 64 rows) was asked
    for, then the whole batch at once. Nulls are known to be last (the batch was validated).
    """

    __slots__ = ("_arr", "_budget", "_desc", "_spec", "_valid", "_values")

    def __init__(self, arr: pa.Array, spec: KeySpec) -> None:
        self._arr = arr
        self._spec = spec
        self._desc = spec.descending
        self._valid = len(arr) - arr.null_count
        self._budget = max(64, len(arr) >> 4)
        self._values: list[Any] | None = None

    def __len__(self) -> int:
        return len(self._arr)

    def __getitem__(self, p: int) -> Any:
        values = self._values
        if values is not None:
            return values[p]
        self._budget -= 1
        if self._budget < 0:
            self._values = values = self._spec.column_values(self._arr)
            return values[p]
        if p < 0:
            p += len(self._arr)
        if p >= self._valid:
            return NULL
        v = self._arr[p].as_py()
        return _Desc(v) if self._desc else v


def search(keys: Any, value: Any, lo: int, hi: int, right: bool) -> int:
    """bisect_right (`right`) or bisect_left of `value` in normalized `keys[lo:hi]`."""
    if type(keys) is np.ndarray:
        if value > _INT64_MAX:  # INT_NULL: after every value (the array holds no nulls)
            return hi
        return lo + int(np.searchsorted(keys[lo:hi], value, side="right" if right else "left"))
    return (bisect.bisect_right if right else bisect.bisect_left)(keys, value, lo, hi)


class KeySpec:
    """How to normalize and validate the key columns of every batch (one per merge)."""

    def __init__(self, schema: pa.Schema, columns: list[str], descending: bool) -> None:
        for name in columns:
            if schema.get_field_index(name) < 0:
                raise UsageError(f"key column {name!r} is not in the streams' schema {schema.names}")
            t = schema.field(name).type
            if not _orderable(t):
                raise UsageError(f"key column {name!r} has type {t}, which has no order to merge by")
        self.columns = columns
        self.descending = descending
        self.int_like = [is_int_like(schema.field(c).type) for c in columns]
        self.floating = [pa.types.is_floating(schema.field(c).type) for c in columns]
        self.order = f"{'descending' if descending else 'ascending'}, nulls last"
        self.direction = "descending" if descending else "ascending"

    def normalize(self, batch: pa.RecordBatch, stream: int, offset: int) -> Any:
        """The batch's normalized keys (see the module docstring); InputError if it is not sorted."""
        arrays = [batch.column(c) for c in self.columns]
        for name, arr, floating in zip(self.columns, arrays, self.floating, strict=True):
            if floating and pc.any(pc.is_nan(arr)).as_py():
                raise InputError(f"stream {stream}: key column {name!r} holds NaN, which has no order")
        if len(arrays) == 1 and self.int_like[0]:
            return self._single_int(batch, arrays[0], stream, offset)
        bad = self._first_unsorted(arrays)
        if bad is not None:
            self._unsorted(batch, stream, offset, bad)
        if len(arrays) == 1:
            return LazyKeys(arrays[0], self)
        columns = [self.column_values(arr) for arr in arrays]
        return list(zip(*columns, strict=True))

    def _single_int(self, batch: pa.RecordBatch, arr: pa.Array, stream: int, offset: int) -> Any:
        n, nulls = len(arr), arr.null_count
        valid = n - nulls
        if nulls and arr.slice(valid).null_count != nulls:  # a null before a value
            first_null = pc.index(arr.is_null(), True).as_py()
            self._unsorted(batch, stream, offset, first_null + 1)
        values = int_numpy(arr.slice(0, valid))
        if self.descending:
            values = ~values  # order-reversing on int64 without overflow (-v would overflow at min)
        drops = np.flatnonzero(values[1:] < values[:-1])
        if drops.size:
            self._unsorted(batch, stream, offset, int(drops[0]) + 1)
        if not nulls:
            return values
        keys = values.tolist()
        keys.extend(itertools.repeat(INT_NULL, nulls))
        return keys

    def _first_unsorted(self, arrays: list[pa.Array]) -> int | None:
        """The first row whose key sorts before its predecessor's (lexicographic, nulls last), if any."""
        n = len(arrays[0])
        if n < 2:
            return None
        bad = prefix_equal = None
        for j, arr in enumerate(arrays):
            a, b = arr.slice(0, n - 1), arr.slice(1)
            worse = pc.greater(b, a) if self.descending else pc.less(b, a)
            if arr.null_count:
                worse = pc.or_(pc.fill_null(worse, False), pc.and_(a.is_null(), b.is_valid()))
            term = worse if prefix_equal is None else pc.and_(prefix_equal, worse)
            bad = term if bad is None else pc.or_(bad, term)
            if j + 1 < len(arrays):
                equal = pc.fill_null(pc.equal(a, b), False)
                if arr.null_count:
                    equal = pc.or_(equal, pc.and_(a.is_null(), b.is_null()))
                prefix_equal = equal if prefix_equal is None else pc.and_(prefix_equal, equal)
        first = pc.index(bad, True).as_py()
        return None if first < 0 else first + 1

    def column_values(self, arr: pa.Array) -> list[Any]:
        """One column's normalized keys as a list of Python values."""
        if is_int_like(arr.type):
            ints = int_numpy(arr)
            keys: list[Any] = (~ints if self.descending else ints).tolist()
            if arr.null_count:
                mask = arr.is_null().to_numpy(zero_copy_only=False)
                for i in np.flatnonzero(mask).tolist():
                    keys[i] = INT_NULL
            return keys
        values: list[Any] = arr.to_pylist()
        if self.descending:
            return [NULL if v is None else _Desc(v) for v in values]
        if arr.null_count:
            return [NULL if v is None else v for v in values]
        return values

    def _unsorted(self, batch: pa.RecordBatch, stream: int, offset: int, row: int) -> None:
        raise InputError(
            f"stream {stream} is not sorted by {self.columns} ({self.order}): row {offset + row} has key "
            f"{display(batch, self.columns, row)!r} after row {offset + row - 1}'s key "
            f"{display(batch, self.columns, row - 1)!r}"
        )


def gather(
    by_id: dict[int, pa.RecordBatch], seg_batch: list[int], seg_start: list[int], seg_len: list[int]
) -> pa.RecordBatch:
    """One output batch from segments (input batch id, start row, length), in segment order."""
    if len(seg_batch) == 1:
        return by_id[seg_batch[0]].slice(seg_start[0], seg_len[0])
    if sum(seg_len) >= _CONCAT_MIN_AVERAGE * len(seg_batch):
        return pa.concat_batches(
            [by_id[b].slice(s, m) for b, s, m in zip(seg_batch, seg_start, seg_len, strict=True)]
        )
    ids = np.asarray(seg_batch, dtype=np.int64)
    starts = np.asarray(seg_start, dtype=np.int64)
    lengths = np.asarray(seg_len, dtype=np.int64)
    uniq, inverse = np.unique(ids, return_inverse=True)
    # Within a chunk each input batch is consumed contiguously: slice [lo, hi) of each,
    # concatenate, and index into that.
    lo = np.full(len(uniq), np.iinfo(np.int64).max)
    hi = np.zeros(len(uniq), dtype=np.int64)
    np.minimum.at(lo, inverse, starts)
    np.maximum.at(hi, inverse, starts + lengths)
    base = np.concatenate(([0], np.cumsum(hi - lo)[:-1]))
    first = base[inverse] + starts - lo[inverse]
    if int(lengths.max()) == 1:
        index = first
    else:
        ends = np.cumsum(lengths)
        index = np.repeat(first - (ends - lengths), lengths) + np.arange(int(ends[-1]))
    parts = [
        by_id[b].slice(s, e - s) for b, s, e in zip(uniq.tolist(), lo.tolist(), hi.tolist(), strict=True)
    ]
    return pa.concat_batches(parts).take(pa.array(index))
