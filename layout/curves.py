"""Clustering curves on Arrow and numpy batches: the one implementation the advisor and the Spark job share.

A curve layout sorts rows by one number computed from several keys, so that rows close in every key land
close together (in the same files, row groups and pages). Three steps, each a function here:

1. **Scale** each key to an integer rank in ``[0, 2**bits)``:
   - `quantile_boundaries` + `ranks`: by the key's quantiles, sampled (as Delta's ``range_partition_id``
     does): each rank cell holds about as many rows as the next, however skewed the values are. Numbers,
     decimals, dates, times, timestamps (with or without a zone), strings and binary; strings and binary
     compare by their first `PREFIX_BYTES` bytes (bytewise, as Spark and Parquet order them).
   - `minmax_ranks`: linearly between a minimum and a maximum, as ``zorder_column`` in jobs/compact.py
     did before (strings by their first 7 bytes); skewed keys then collapse into a few cells. Kept for the
     benchmark's comparison.
2. **Combine** the ranks into one index: `zorder_index` interleaves their bits (Morton order);
   `hilbert_index` follows the Hilbert curve (John Skilling, "Programming the Hilbert curve", AIP
   Conference Proceedings 707, 2004: the transpose algorithm, vectorized over numpy arrays), whose
   consecutive cells are always adjacent, so it never jumps across the key space as a z-order does.
3. **Sort** by the index (the caller's job: Arrow's sort, or Spark's).

`curve_index` runs 1 and 2 for a batch given each key's boundaries. Everything is deterministic and
vectorized, so the same boundaries give the same index in the advisor's process and in every Spark
executor; boundaries are numpy arrays (they pickle) and must come from values of the same Arrow type
family as the batches ranked with them (strings with strings, timestamps with timestamps).

Nulls take one end of the rank range (``nulls="last"``: the largest rank, as the job's z-order did);
NaN ranks above every number (Spark's order). Sort direction does not apply to a curve: it clusters,
it does not order any single key.

Pure numpy and pyarrow, on the ground floor of `layout`: it imports nothing of lakesort, so arguments a
caller got wrong raise ValueError or TypeError (the caller knows the spec key to name in its message).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "DEFAULT_CELL_BITS",
    "MAX_INDEX_BITS",
    "PREFIX_BYTES",
    "curve_bits",
    "curve_index",
    "hilbert_index",
    "minmax_ranks",
    "quantile_boundaries",
    "ranks",
    "zorder_index",
]

Values: TypeAlias = pa.Array | pa.ChunkedArray | np.ndarray
Nulls = Literal["first", "last"]

# Strings and binary rank by this many leading bytes: enough to tell apart the quantiles of real keys
# (ids, codes, names) while the comparison stays a fixed-width memcmp in numpy.
PREFIX_BYTES = 16
# The index is a uint64 whose top bit stays clear, so Spark can carry it as a (signed) long.
MAX_INDEX_BITS = 63
# 2**16 quantile cells per key: far finer than the pages of any file, and 2 to 3 keys still fit 63 bits.
DEFAULT_CELL_BITS = 16
# The job's min/max z-order read strings as a 56-bit number: their first 7 bytes.
_MINMAX_STRING_BYTES = 7
_MICROS_PER_DAY = 86_400_000_000


def curve_bits(keys: int) -> int:
    """Bits per key for a curve over `keys` keys: `DEFAULT_CELL_BITS`, fewer when 63 bits cannot hold them."""
    if keys < 1:
        raise ValueError(f"a curve needs at least one key, got {keys}")
    return min(DEFAULT_CELL_BITS, MAX_INDEX_BITS // keys)


# --- order keys: any supported Arrow type as a numpy array that sorts the same way ----------------------


def _arrow(values: Values) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if isinstance(values, pa.Array):
        return values
    if isinstance(values, np.ndarray):
        return pa.array(values)
    raise TypeError(f"expected a pyarrow or numpy array, got {type(values).__name__}")


def _prefix_keys(array: pa.Array, width: int) -> np.ndarray:
    """The first `width` bytes of each value, zero-padded, as numpy ``S{width}`` (compared bytewise)."""
    binary = array.cast(pa.large_binary())
    padded = pc.binary_join_element_wise(binary, pa.scalar(b"\0" * width, pa.large_binary()),
                                         pa.scalar(b"", pa.large_binary()))
    fixed = pc.binary_slice(padded, 0, width).cast(pa.binary(width))
    buffer = fixed.buffers()[1]
    if buffer is None or len(fixed) == 0:
        return np.zeros(len(fixed), dtype=f"S{width}")
    return np.frombuffer(buffer, dtype=f"S{width}")[fixed.offset: fixed.offset + len(fixed)]


def _order_keys(values: Values) -> tuple[np.ndarray, np.ndarray]:
    """(keys, valid): a numpy array ordered as the values are (int64, uint64, float64 or bytes), and
    which entries are not null. A null's key is arbitrary; NaN becomes +inf (above every number)."""
    array = _arrow(values)
    t = array.type
    if pa.types.is_dictionary(t):
        array = array.dictionary_decode()
        t = array.type
    valid = array.is_valid().to_numpy(zero_copy_only=False) if array.null_count else np.ones(len(array), bool)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or \
            pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or \
            t in (pa.string_view(), pa.binary_view()):
        return _prefix_keys(array, PREFIX_BYTES), valid
    if pa.types.is_boolean(t):
        array = array.cast(pa.int8())
    elif pa.types.is_decimal(t):
        # float64 keeps the order of decimals up to 15-16 significant digits: ties beyond are harmless here.
        array = array.cast(pa.float64())
    elif pa.types.is_timestamp(t):
        # One domain for every unit: microseconds (Iceberg's), nanoseconds truncated.
        array = pc.cast(array, pa.timestamp("us", t.tz), safe=False).cast(pa.int64())
    elif pa.types.is_date32(t) or pa.types.is_time32(t):
        array = array.cast(pa.int32()).cast(pa.int64())
    elif pa.types.is_date64(t) or pa.types.is_time64(t) or pa.types.is_duration(t):
        array = array.cast(pa.int64())
    elif pa.types.is_floating(t):
        array = array.cast(pa.float64())
    elif pa.types.is_unsigned_integer(t) and t.bit_width == 64:
        pass
    elif pa.types.is_integer(t):
        array = array.cast(pa.int64())
    else:
        raise TypeError(f"cannot rank values of type {t}: use numbers, decimals, dates, times, timestamps, "
                        "strings or binary")
    filled = pc.fill_null(array, 0) if array.null_count else array
    keys = filled.to_numpy(zero_copy_only=False)
    if keys.dtype.kind == "f":
        keys = np.where(np.isnan(keys), np.inf, keys)
    return keys, valid


# --- step 1: ranks ----------------------------------------------------------------------------------


def quantile_boundaries(values: Values, cells: int) -> np.ndarray:
    """At most ``cells - 1`` increasing boundaries that cut a sample's non-null values into `cells` cells
    of about equal counts (fewer where values repeat: one value never spans two cells).

    `values` is a sample of the key (any supported type, nulls ignored); the result is in the key's
    order domain (numbers as int64/uint64/float64, strings and binary as bytes prefixes): pass it to
    `ranks` with values of the same type. No non-null value: an empty array (every value ranks 0).
    """
    if cells < 1:
        raise ValueError(f"cells must be at least 1, got {cells}")
    keys, valid = _order_keys(values)
    present = np.sort(keys[valid], kind="stable")
    n = len(present)
    if n == 0 or cells == 1:
        return present[:0].copy()
    positions = (np.arange(1, cells, dtype=np.int64) * n) // cells
    # The first value is no boundary: nothing ranks below it.
    chosen = np.unique(present[positions])
    return chosen[chosen > present[0]] if len(chosen) else chosen


def ranks(values: Values, boundaries: np.ndarray, bits: int, *, nulls: Nulls = "last") -> np.ndarray:
    """Each value's rank in ``[0, 2**bits)``: its cell among `boundaries` (found by binary search: the
    number of boundaries at or below it), spread evenly over the range so that every key of a curve
    weighs alike however many cells it has. Monotone: a larger value never ranks lower. Nulls rank
    ``2**bits - 1`` (`nulls="last"`) or 0. Needs ``len(boundaries) < 2**bits``."""
    _check_bits(bits)
    cells = len(boundaries) + 1
    if cells > (1 << bits):
        raise ValueError(f"{len(boundaries)} boundaries make {cells} cells, more than {bits} bits hold; "
                         f"take at most {1 << bits} cells (quantile_boundaries(values, cells=2**bits))")
    keys, valid = _order_keys(values)
    bounds = np.asarray(boundaries)
    if len(bounds) and (keys.dtype.kind == "S") != (bounds.dtype.kind == "S"):
        raise TypeError(f"boundaries of dtype {bounds.dtype} cannot rank values of type "
                        f"{_arrow(values).type}: take the boundaries from values of the same type")
    cell = np.searchsorted(bounds, keys, side="right").astype(np.uint64)
    if cells == (1 << bits):
        out = cell
    else:
        # floor(cell * 2**bits / cells): cells >= 1 apart stay apart (the factor is >= 1).
        out = np.floor(cell * ((1 << bits) / cells)).astype(np.uint64)
        np.minimum(out, np.uint64((1 << bits) - 1), out=out)
    return _nulls_to_end(out, valid, bits, nulls)


def minmax_ranks(values: Values, lo: Any, hi: Any, bits: int) -> np.ndarray:
    """Ranks scaled linearly between `lo` and `hi`, the z-order of jobs/compact.py before quantiles.

    Numbers, decimals, dates and timestamps as doubles (dates and timestamps in microseconds since the
    epoch), scaled ``trunc((v - lo) / (hi - lo) * (2**bits - 1))``, capped at ``2**bits - 1`` and floored
    at 0; ``hi - lo == 0`` counts as 1. `lo` / `hi`: Python values of the column's type, or None for the
    values' own minimum / maximum (what the job computed over its input). Strings and binary: their first
    7 bytes as a 56-bit number over ``[0, 2**56]`` (`lo` and `hi` ignored; equal to the job for ASCII).
    Nulls take `hi` (so the last rank, as the job's ``coalesce(value, hi)``); NaN is left out of the
    minimum and maximum and ranks 0 (Spark casts a NaN double to long as 0).
    """
    _check_bits(bits)
    array = _arrow(values)
    top = float((1 << bits) - 1)
    if _is_bytes(array.type):
        keys = _prefix_keys(array, _MINMAX_STRING_BYTES)
        number = np.frombuffer(keys.tobytes(), dtype=np.uint8).reshape(-1, _MINMAX_STRING_BYTES) \
            if len(keys) else np.zeros((0, _MINMAX_STRING_BYTES), np.uint8)
        value = np.zeros(len(keys), dtype=np.float64)
        for column in range(_MINMAX_STRING_BYTES):
            value = value * 256.0 + number[:, column]
        low, high = 0.0, float(2 ** (8 * _MINMAX_STRING_BYTES))
    else:
        value = _micros_or_number(array)
        present = value[array.is_valid().to_numpy(zero_copy_only=False)] if array.null_count else value
        present = present[~np.isnan(present)] if len(present) else present
        low = _bound(lo, array.type, min, present)
        high = _bound(hi, array.type, max, present)
    valid = array.is_valid().to_numpy(zero_copy_only=False) if array.null_count else np.ones(len(array), bool)
    value = np.where(valid, value, high)
    span = (high - low) or 1.0
    with np.errstate(invalid="ignore"):
        scaled = np.trunc((value - low) / span * top)
    scaled = np.where(np.isnan(scaled), 0.0, np.clip(scaled, 0.0, top))
    return scaled.astype(np.uint64)


def _is_bytes(t: pa.DataType) -> bool:
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or t in (pa.string_view(),
                                                                                        pa.binary_view()))


def _micros_or_number(array: pa.Array) -> np.ndarray:
    """Doubles as the job's z-order took them: dates and timestamps as microseconds since the epoch."""
    t = array.type
    if pa.types.is_timestamp(t):
        ints = pc.cast(array, pa.timestamp("us", t.tz), safe=False).cast(pa.int64())
    elif pa.types.is_date32(t):
        ints = pc.multiply(array.cast(pa.int32()).cast(pa.int64()), _MICROS_PER_DAY)
    elif pa.types.is_date64(t):
        ints = pc.multiply(array.cast(pa.int64()), 1000)
    elif pa.types.is_decimal(t) or pa.types.is_floating(t) or pa.types.is_integer(t) \
            or pa.types.is_boolean(t):
        ints = array.cast(pa.float64()) if not pa.types.is_boolean(t) else array.cast(pa.int8())
    else:
        raise TypeError(f"cannot scale values of type {t} by min/max: use numbers, "
                        "dates, timestamps or strings")
    filled = pc.fill_null(ints, 0) if ints.null_count else ints
    scaled: np.ndarray = filled.to_numpy(zero_copy_only=False).astype(np.float64)
    return scaled


def _bound(given: Any, t: pa.DataType, pick: Any, present: np.ndarray) -> float:
    if given is None:
        return float(pick(present)) if len(present) else 0.0  # Spark's `lo or 0.0` for an all-null input
    return float(_micros_or_number(pa.array([given], type=t))[0])


def _nulls_to_end(out: np.ndarray, valid: np.ndarray, bits: int, nulls: Nulls) -> np.ndarray:
    if nulls not in ("first", "last"):
        raise ValueError(f"nulls must be 'first' or 'last', got {nulls!r}")
    if not valid.all():
        out[~valid] = (1 << bits) - 1 if nulls == "last" else 0
    return out


def _check_bits(bits: int) -> None:
    if not 1 <= bits <= MAX_INDEX_BITS:
        raise ValueError(f"bits must be between 1 and {MAX_INDEX_BITS}, got {bits}")


# --- step 2: one index from several ranks -----------------------------------------------------------


def _spread_table(stride: int) -> np.ndarray:
    """For each byte value, its 8 bits moved to positions 0, stride, 2 * stride, ..."""
    table = np.zeros(256, dtype=np.uint64)
    for value in range(256):
        spread = 0
        for bit in range(8):
            if value >> bit & 1:
                spread |= 1 << (bit * stride)
        table[value] = spread
    return table


_SPREAD = {stride: _spread_table(stride) for stride in range(1, 8)}


def _interleave(ranks_msb_first: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """Bit `b` of key `i` (of n) at position ``b * n + (n - 1 - i)``: the first key most significant."""
    n = len(ranks_msb_first)
    if n < 1:
        raise ValueError("a curve needs at least one key")
    _check_bits(bits)
    if n * bits > MAX_INDEX_BITS:
        raise ValueError(f"{n} keys x {bits} bits = {n * bits} bits, more than the {MAX_INDEX_BITS} an index "
                         f"holds; use at most {MAX_INDEX_BITS // n} bits per key (curve_bits({n}))")
    arrays = [np.asarray(r, dtype=np.uint64) for r in ranks_msb_first]
    if len({len(a) for a in arrays}) > 1:
        raise ValueError(f"the keys' ranks differ in length: {[len(a) for a in arrays]}")
    if n == 1:
        return arrays[0] & np.uint64((1 << bits) - 1)
    table = _SPREAD[n] if n in _SPREAD else _spread_table(n)
    out = np.zeros(len(arrays[0]), dtype=np.uint64)
    mask = np.uint64(255)
    for i, r in enumerate(arrays):
        shift = n - 1 - i
        for byte in range((bits + 7) // 8):
            chunk = (r >> np.uint64(8 * byte)) & mask
            if byte == (bits - 1) // 8 and bits % 8:  # the top byte holds fewer than 8 of the key's bits
                chunk &= np.uint64((1 << (bits % 8)) - 1)
            out |= table[chunk] << np.uint64(8 * byte * n + shift)
    return out


def zorder_index(ranks: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """The z-order (Morton) index of each row: bit `b` of key `i` (of n keys) at position ``b * n + i``,
    as jobs/compact.py interleaved (the first key least significant within each group of n bits).
    `ranks`: one uint64 array per key, each in ``[0, 2**bits)``; n * bits at most 63."""
    return _interleave(list(reversed(ranks)), bits)


def hilbert_index(ranks: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """The Hilbert index of each row over the grid ``[0, 2**bits)**n`` (n = len(ranks), n * bits <= 63):
    consecutive indexes are adjacent cells (they differ by 1 in exactly one key), and every cell has
    its own index. Skilling's transpose algorithm (see the module docstring), vectorized."""
    n = len(ranks)
    if n < 1:
        raise ValueError("a curve needs at least one key")
    _check_bits(bits)
    if n * bits > MAX_INDEX_BITS:
        raise ValueError(f"{n} keys x {bits} bits = {n * bits} bits, more than the {MAX_INDEX_BITS} an index "
                         f"holds; use at most {MAX_INDEX_BITS // n} bits per key (curve_bits({n}))")
    x = [np.array(r, dtype=np.uint64, copy=True) for r in ranks]
    zero = np.uint64(0)
    # Inverse undo: walk the bit levels from the top, inverting or exchanging the low bits.
    q = 1 << (bits - 1)
    while q > 1:
        p, qq = np.uint64(q - 1), np.uint64(q)
        for i in range(n):
            hit = (x[i] & qq) != zero
            x[0] = np.where(hit, x[0] ^ p, x[0])
            if i:
                t = np.where(hit, zero, (x[0] ^ x[i]) & p)
                x[0] ^= t
                x[i] ^= t
        q >>= 1
    # Gray encode.
    for i in range(1, n):
        x[i] ^= x[i - 1]
    t = np.zeros_like(x[0])
    q = 1 << (bits - 1)
    while q > 1:
        t ^= np.where((x[n - 1] & np.uint64(q)) != zero, np.uint64(q - 1), zero)
        q >>= 1
    for i in range(n):
        x[i] ^= t
    # The transpose holds the index's bits level by level, x[0] most significant within each level.
    return _interleave(x, bits)


def curve_index(columns: Sequence[Values], boundaries: Sequence[np.ndarray], *,
                strategy: Literal["zorder", "hilbert"], bits: int | None = None,
                nulls: Nulls = "last") -> np.ndarray:
    """The curve index of each row of a batch: every key ranked by its quantile `boundaries`
    (`quantile_boundaries` over a sample of that key, ``cells=2**bits``), then combined by `strategy`.
    `bits` defaults to `curve_bits(len(columns))`. Sort the rows by the result (ascending)."""
    if len(columns) != len(boundaries):
        raise ValueError(f"{len(columns)} key column(s) but {len(boundaries)} boundary array(s)")
    width = curve_bits(len(columns)) if bits is None else bits
    ranked = [ranks(c, b, width, nulls=nulls) for c, b in zip(columns, boundaries, strict=True)]
    if strategy == "zorder":
        return zorder_index(ranked, width)
    if strategy == "hilbert":
        return hilbert_index(ranked, width)
    raise ValueError(f"strategy must be 'zorder' or 'hilbert', got {strategy!r}")
