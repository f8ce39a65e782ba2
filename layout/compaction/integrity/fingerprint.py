"""An order-independent content fingerprint that Spark and pyarrow compute identically.

The compaction job (Spark) computes, over the input rows of a rewrite group::

    count(*), sum(cast(xxhash64(c1, ..., cN) as decimal(38,0)))

with Spark SQL's built-in `xxhash64` (seed 42, chained over the columns in order: the hash of
column i is the seed of column i+1, and a null leaves the running hash unchanged). The commit step
has no Spark: it re-reads the staged Parquet files with pyarrow and recomputes the same two numbers
with this module, which reimplements Spark's `XxHash64` row hash for Arrow data (see
`org.apache.spark.sql.catalyst.expressions.XxHash64` / `InterpretedHashFunction.hash` in
`hash.scala`, and `XXH64.java`). "Nothing is lost" rests on the two agreeing.

Per type, as Spark hashes the value it reads from Parquet (a null, at any depth, leaves the running
hash unchanged):

- boolean: hashInt(1 or 0); int8/int16/int32, date (days): hashInt(value);
- int64, timestamp (with a time zone: Spark's TimestampType, Iceberg timestamptz) and timestamp
  without one (TimestampNTZType, Iceberg timestamp): hashLong(microseconds since the epoch), whatever
  the Arrow unit; the zone plays no part (Spark holds UTC instants);
- time (Spark's TimeType, Iceberg time): hashLong(nanoseconds since midnight);
- float: hashInt(floatToIntBits(v)), double: hashLong(doubleToLongBits(v)); -0.0 hashes as 0.0 and
  every NaN as the canonical NaN (Java's floatToIntBits/doubleToLongBits collapse NaN payloads);
- decimal with precision <= 18: hashLong(unscaled value); else hashUnsafeBytes of the unscaled
  value's `BigInteger.toByteArray()` (big-endian two's complement, minimal length);
- string (UTF-8 bytes), binary and fixed-size binary (Iceberg fixed): hashUnsafeBytes; an Iceberg
  uuid (16 bytes; pyarrow reads it as fixed_size_binary(16), or arrow.uuid) too, though Spark 4.2's
  Parquet reader refuses the UUID annotation (PARQUET_TYPE_ILLEGAL), so the job cannot copy one;
- unsigned integers, as Spark reads them from Parquet: uint8/uint16 as short/int (hashInt),
  uint32 as long (hashLong), uint64 as decimal(20,0) (bytes);
- struct: each field in order, each hashed with the running hash as its seed; a null struct leaves
  the running hash unchanged;
- list (Spark's array; Arrow list, large_list or fixed_size_list): each element in order, chaining
  the running hash the same way; a null or empty list leaves it unchanged, and so does a null element;
- map: each entry in order: its key, then its value, chaining (the same as the list of its
  (key, value) structs); a null value leaves the running hash unchanged;
- null type: the running hash is unchanged.

Not supported (a `UsageError` names the column): variant (Spark's `xxhash64` refuses it:
HASH_VARIANT_TYPE), intervals and durations (no Iceberg types). Iceberg's timestamp_ns and
timestamptz_ns Spark 4.2 cannot read (Parquet TIMESTAMP(NANOS) is PARQUET_TYPE_ILLEGAL); nanosecond
Arrow timestamps (INT96 files) hash as their microseconds, and sub-microsecond values are refused.

What the Spark job must set (`SPARK_CONF`):

- `spark.sql.legacy.allowHashOnMapType=true` when a column holds a map at any depth: Spark refuses
  `xxhash64` over such a column at analysis (DATATYPE_MISMATCH.HASH_MAP_TYPE: equal maps may list
  their entries in different orders, so may hash differently). The conf only lifts that check; the
  hash is the one above, which depends on the entry order. Here that is sound: a compaction copies
  each map as it is, and Spark writes and pyarrow reads the entries in the stored order. (For a
  top-level map column `xxhash64(map_entries(m))` is the same number without the conf.)
- `spark.sql.timeType.enabled=true` to read Iceberg `time` columns at all: without it Spark 4.2
  refuses Parquet TIME (UNSUPPORTED_TIME_TYPE). It reads TIME(MICROS) as time(6), which
  hashes as hashLong(nanoseconds); Parquet TIME(MILLIS) and TIME(NANOS) it cannot read.

hashInt/hashLong are XXH64 of the 4/8 little-endian bytes, computed with numpy over whole columns
(`layout.compaction.integrity.xxh64`); byte strings too, the values of one length at a time. A list's
elements are hashed position by position: at position k the rows whose list is longer than k hash
their k-th element together, each with its own running hash as the seed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from layout.compaction.integrity.xxh64 import hash_binary, hash_bytes, hash_int, hash_long
from layout.errors import InputError, ParquetError, UsageError
from layout.io import resolve

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem

SEED = 42
"""Spark's `xxhash64` seed (`XxHash64(children, 42L)`)."""

FORMAT = "spark-xxhash64-sum/1"
"""Names the definition in serialized fingerprints, so that a changed definition is never compared."""

SPARK_CONF = {
    "spark.sql.legacy.allowHashOnMapType": "true",
    "spark.sql.timeType.enabled": "true",
}
"""Session settings the Spark side needs for every type here (see the module docstring): `xxhash64`
over a column holding a map, and reading Iceberg `time` columns. Neither changes any other hash."""

DEFAULT_BATCH_SIZE = 65_536

_U64 = np.uint64
_MASK32 = _U64(0xFFFFFFFF)
_FLOAT_NAN_BITS = np.uint32(0x7FC00000)  # Float.floatToIntBits(Float.NaN)
_DOUBLE_NAN_BITS = _U64(0x7FF8000000000000)  # Double.doubleToLongBits(Double.NaN)
_INT64_MAX = (1 << 63) - 1


# ---------------------------------------------------------------------------------------------
# The fingerprint value
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fingerprint:
    """Row count and the exact sum of the rows' signed 64-bit `xxhash64` values."""

    rows: int
    hash_sum: int

    @classmethod
    def zero(cls) -> Fingerprint:
        """The fingerprint of no rows (the identity of `+`)."""
        return cls(0, 0)

    def __add__(self, other: object) -> Fingerprint:
        if not isinstance(other, Fingerprint):
            return NotImplemented
        return Fingerprint(self.rows + other.rows, self.hash_sum + other.hash_sum)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict; `hash_sum` is a decimal string (it exceeds what JSON doubles hold exactly)."""
        return {"format": FORMAT, "rows": self.rows, "hash_sum": str(self.hash_sum)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> Fingerprint:
        """The inverse of `to_json` (a dict, or its JSON text); malformed input raises `InputError`."""
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError as exc:
                raise InputError(f"fingerprint: not JSON ({exc})") from exc
        if not isinstance(data, Mapping):
            raise InputError(f"fingerprint: expected an object, got {type(data).__name__}")
        fmt = data.get("format", FORMAT)
        if fmt != FORMAT:
            raise InputError(f"fingerprint: format {fmt!r} is not {FORMAT!r}; recompute it with this version")
        try:
            rows, hash_sum = data["rows"], data["hash_sum"]
        except KeyError as exc:
            raise InputError(f"fingerprint: missing key {exc.args[0]!r}") from exc
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise InputError(f"fingerprint: `rows` must be a non-negative integer, got {rows!r}")
        if isinstance(hash_sum, bool) or not isinstance(hash_sum, (int, str)):
            raise InputError("fingerprint: `hash_sum` must be an integer or its decimal "
                             f"string, got {hash_sum!r}")
        try:
            hash_sum = int(hash_sum)
        except ValueError as exc:
            raise InputError(f"fingerprint: `hash_sum` {hash_sum!r} is not an integer") from exc
        return cls(rows, hash_sum)

    @classmethod
    def from_spark(cls, rows: int, hash_sum: Decimal | int | None) -> Fingerprint:
        """From Spark's `count(*)` and `spark_fingerprint_expr(...)` results (the sum is NULL on no rows)."""
        if hash_sum is None:
            if rows:
                raise UsageError(f"fingerprint: Spark returned a NULL hash sum for {rows} rows")
            return cls(0, 0)
        if isinstance(hash_sum, Decimal) and hash_sum != hash_sum.to_integral_value():
            raise UsageError(f"fingerprint: hash sum {hash_sum} is not an integer")
        return cls(int(rows), int(hash_sum))


# ---------------------------------------------------------------------------------------------
# The Spark side: one definition, as SQL text
# ---------------------------------------------------------------------------------------------


def quote_identifier(name: str) -> str:
    """A Spark SQL identifier in backticks (a backtick inside is doubled)."""
    return "`" + name.replace("`", "``") + "`"


def spark_row_hash_expr(columns: list[str], *, salt: str | None = None) -> str:
    """Spark SQL text of the per-row hash: xxhash64 over the columns, in this order, then over `salt` (Spark
    SQL text of a non-null INT, e.g. the row's rewrite group id) when given: `salted` of the row's hash."""
    if isinstance(columns, str) or not columns:
        raise UsageError("fingerprint: give a non-empty list of column names")
    return "xxhash64(" + ", ".join([*(quote_identifier(c) for c in columns), *([salt] if salt else [])]) + ")"


def salted(hashes: np.ndarray, salt: int) -> np.ndarray:
    """Row hashes (int64) chained with one more INT column holding `salt` in every row: Spark's
    `xxhash64(c1, ..., cN, salt)` from `xxhash64(c1, ..., cN)`. Salting each row's hash with its group
    makes one sum over all groups tell a row from the same row in another group."""
    values = np.full(len(hashes), salt & 0xFFFFFFFF, dtype=_U64)
    return hash_int(values, hashes.view(_U64)).view(np.int64)


def spark_hash_halves(columns: list[str], *, salt: str | None = None) -> tuple[str, str]:
    """Spark SQL text of the row hash's signed high and unsigned low 32 bits. Summed as longs they give the
    exact hash sum (`exact_hash_sum`) without decimal arithmetic, which costs Spark several times more per
    row: each sum stays below 2**63 for fewer than 2**31 rows per aggregation group."""
    return hash_halves(spark_row_hash_expr(columns, salt=salt))


def hash_halves(hash_sql: str) -> tuple[str, str]:
    """`spark_hash_halves` of a hash already computed (Spark SQL text of a long, e.g. a column name)."""
    return f"shiftright({hash_sql}, 32)", f"({hash_sql} & 4294967295)"


def exact_hash_sum(high: int | None, low: int | None) -> int:
    """The hash sum from the sums of `spark_hash_halves` (None: no rows)."""
    return ((high or 0) << 32) + (low or 0)


def spark_fingerprint_expr(columns: list[str]) -> str:
    """Spark SQL text of the hash sum, e.g. "sum(cast(xxhash64(`a`, `b`) as decimal(38,0)))".

    The job selects `count(*)` and this, and builds the value with `Fingerprint.from_spark`.
    """
    return f"sum(cast({spark_row_hash_expr(columns)} as decimal(38,0)))"


# ---------------------------------------------------------------------------------------------
# Arrow columns to Spark's hash inputs
# ---------------------------------------------------------------------------------------------


_Hasher = Callable[[np.ndarray | None, np.ndarray], np.ndarray]
"""`hasher(idx, seeds)`: Spark's hash of one column's values at positions `idx` (all of them when
None), each with its own seed; a null leaves its seed as it is. Built once per column or nested
child (the values' hash inputs are prepared once), then called once per list position."""


# Fewer values than this are hashed one by one: `hash_binary`'s reordering and per-length steps cost more than
# they save on a few values (a list position of long lists:
# 0.27 s against 0.02 s for 40 lists of 0-3,000 strings).
_VECTOR_FROM = 1024


def _binary_hasher(arr: pa.Array) -> _Hasher:
    """hashUnsafeBytes over a large_binary array (nulls get a throwaway hash the caller discards): many values
    at once (`hash_binary`), a few one by one."""
    offsets = np.frombuffer(arr.buffers()[1], dtype="<i8", count=arr.offset + len(arr) + 1)[arr.offset :]
    data = memoryview(arr.buffers()[2]) if arr.buffers()[2] is not None else memoryview(b"")

    def hasher(idx: np.ndarray | None, seeds: np.ndarray) -> np.ndarray:
        if (len(arr) if idx is None else len(idx)) >= _VECTOR_FROM:
            return hash_binary(arr if idx is None else arr.take(pa.array(idx)), seeds)
        starts, ends = (offsets[:-1], offsets[1:]) if idx is None else (offsets[idx], offsets[idx + 1])
        return hash_bytes([data[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)], seeds)

    return hasher


def _lane_hasher(hash_lane: Callable[[np.ndarray, np.ndarray], np.ndarray], lane: np.ndarray) -> _Hasher:
    """hashInt or hashLong of prepared 32- or 64-bit lanes."""
    return lambda idx, seeds: hash_lane(lane if idx is None else lane[idx], seeds)


def _bytes_hasher(values: list[bytes]) -> _Hasher:
    """hashUnsafeBytes of prepared byte strings."""
    return lambda idx, seeds: hash_bytes(values if idx is None else [values[i] for i in idx.tolist()], seeds)


def _java_bytes(value: int) -> bytes:
    """`BigInteger.valueOf(value).toByteArray()`: big-endian two's complement, minimal length."""
    bits = value.bit_length() if value >= 0 else (~value).bit_length()
    return value.to_bytes(bits // 8 + 1, "big", signed=True)


def _int_lane(values: np.ndarray) -> np.ndarray:
    """A Java int's 32 bits (sign-extended to int first, as Java widens byte/short) as uint64."""
    return values.astype(np.int32, copy=False).view(np.uint32).astype(_U64)


def _long_lane(values: np.ndarray) -> np.ndarray:
    return values.astype(np.int64, copy=False).view(_U64)


def _filled(arr: pa.Array, fill: Any) -> np.ndarray:
    values: np.ndarray = (arr.fill_null(fill) if arr.null_count else arr).to_numpy(zero_copy_only=False)
    return values


def _decimal_words(arr: pa.Array, words: int) -> np.ndarray:
    """The little-endian 64-bit words of decimal128/256 values: shape (len(arr), words)."""
    buf = arr.buffers()[1]
    flat = np.frombuffer(buf, dtype="<u8", count=(arr.offset + len(arr)) * words)
    return flat.reshape(-1, words)[arr.offset :]


def _decimal_unscaled_ints(arr: pa.Array) -> list[int]:
    """Unscaled values of a decimal array as Python ints (nulls as 0)."""
    t = arr.type
    if isinstance(t, (pa.Decimal32Type, pa.Decimal64Type)):
        dtype = "<i4" if isinstance(t, pa.Decimal32Type) else "<i8"
        unscaled: list[int] = np.frombuffer(arr.buffers()[1], dtype=dtype, count=arr.offset + len(arr))[
            arr.offset :].tolist()
        return unscaled
    words = 2 if isinstance(t, pa.Decimal128Type) else 4
    w = _decimal_words(arr, words)
    # Values of precision <= 38 fit in 128 bits: the low word and the (signed) second word.
    lo = w[:, 0].tolist()
    hi = w[:, 1].view(np.int64).tolist()
    return [(h << 64) | low for h, low in zip(hi, lo, strict=True)]


def _decimal_small_lane(arr: pa.Array) -> np.ndarray:
    """Unscaled values (precision <= 18, so they fit a long) as uint64 bit patterns."""
    t = arr.type
    if isinstance(t, (pa.Decimal32Type, pa.Decimal64Type)):
        dtype = "<i4" if isinstance(t, pa.Decimal32Type) else "<i8"
        raw = np.frombuffer(arr.buffers()[1], dtype=dtype, count=arr.offset + len(arr))[arr.offset :]
        return raw.astype(np.int64).view(_U64)
    words = 2 if isinstance(t, pa.Decimal128Type) else 4
    return _decimal_words(arr, words)[:, 0].copy()


_TIME_FACTOR = {"s": 1_000_000, "ms": 1_000, "us": 1}


def _timestamp_micros(arr: pa.Array, name: str, valid: np.ndarray | None) -> np.ndarray:
    """Timestamps (since the epoch) or times (since midnight) as microseconds."""
    raw = _filled(arr.cast(pa.int32() if pa.types.is_time32(arr.type) else pa.int64()), 0).astype(np.int64)
    unit = arr.type.unit
    if unit == "ns":
        bad = raw % 1000 != 0
        if valid is not None:
            bad &= valid
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise UsageError(
                f"fingerprint: column {name!r} ({arr.type}) holds {arr[i]} with sub-microsecond "
                "precision, which Spark cannot hold (its timestamps and times are microseconds)"
            )
        return raw // 1000
    factor = _TIME_FACTOR[unit]
    if factor != 1:
        limit = _INT64_MAX // factor
        if ((raw > limit) | (raw < -limit)).any():
            raise UsageError(f"fingerprint: column {name!r} ({arr.type}) holds values beyond Spark's range")
        raw = raw * factor
    return raw


def _hasher(arr: pa.Array, name: str) -> _Hasher:
    """The hasher of one column (`name` says which in errors): its values as Spark hashes them."""
    t = arr.type
    if pa.types.is_dictionary(t):
        return _hasher(arr.dictionary_decode(), name)
    if pa.types.is_null(t):
        return lambda idx, seeds: seeds
    if isinstance(t, pa.BaseExtensionType) and t.extension_name == "arrow.uuid":
        return _hasher(arr.storage, name)  # 16 bytes, as Iceberg stores a uuid
    valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else None

    if pa.types.is_boolean(t):
        hasher = _lane_hasher(hash_int, _filled(arr, False).astype(_U64))
    elif t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()) or pa.types.is_date32(t):
        # Spark reads Parquet UINT_8/UINT_16 as short/int: the value, hashed as an int.
        hasher = _lane_hasher(hash_int,
                              _int_lane(_filled(arr.cast(pa.int32()) if pa.types.is_date32(t) else arr, 0)))
    elif pa.types.is_date64(t):
        days = _filled(arr.cast(pa.int64()), 0) // 86_400_000
        hasher = _lane_hasher(hash_int, _int_lane(days))
    elif t in (pa.int64(), pa.uint32()):
        # Spark reads Parquet UINT_32 as long.
        hasher = _lane_hasher(hash_long, _long_lane(_filled(arr, 0)))
    elif pa.types.is_timestamp(t):
        hasher = _lane_hasher(hash_long, _long_lane(_timestamp_micros(arr, name, valid)))
    elif pa.types.is_time(t):
        # Spark's TimeType holds nanoseconds since midnight (TIME(MICROS) values times 1000).
        hasher = _lane_hasher(hash_long, _long_lane(_timestamp_micros(arr, name, valid) * 1000))
    elif pa.types.is_float32(t):
        v = _filled(arr, 0).astype(np.float32, copy=False)
        bits = np.where(v == 0, np.float32(0), v).view(np.uint32)  # -0.0 hashes as 0
        bits = np.where(np.isnan(v), _FLOAT_NAN_BITS, bits)
        hasher = _lane_hasher(hash_int, bits.astype(_U64))
    elif pa.types.is_float64(t):
        v = _filled(arr, 0).astype(np.float64, copy=False)
        bits = np.where(v == 0, 0.0, v).view(_U64)
        bits = np.where(np.isnan(v), _DOUBLE_NAN_BITS, bits)
        hasher = _lane_hasher(hash_long, bits)
    elif pa.types.is_decimal(t):
        if t.precision > 38:
            raise UsageError(f"fingerprint: column {name!r} has type {t}: "
                             "Spark decimals hold at most 38 digits")
        if t.precision <= 18:
            hasher = _lane_hasher(hash_long, _decimal_small_lane(arr))
        else:
            hasher = _bytes_hasher([_java_bytes(v) for v in _decimal_unscaled_ints(arr)])
    elif t == pa.uint64():
        # Spark reads Parquet UINT_64 as decimal(20,0): hashed as the BigInteger's bytes.
        hasher = _bytes_hasher([_java_bytes(v) for v in _filled(arr, 0).astype(_U64, copy=False).tolist()])
    elif (
        pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)
        or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        hasher = _binary_hasher(arr.cast(pa.large_binary()))
    elif pa.types.is_struct(t):
        hasher = _struct_hasher(arr, name)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
            or pa.types.is_map(t):
        hasher = _list_hasher(arr, name, valid)
    else:
        raise UsageError(
            f"fingerprint: column {name!r} has type {t}, which the fingerprint does not support "
            "(supported: boolean, integers, float, double, decimal, string, binary, date, time, timestamp, "
            "struct, list, map)"
        )
    if valid is None:
        return hasher
    return lambda idx, seeds: np.where(valid if idx is None else valid[idx], hasher(idx, seeds), seeds)


def _struct_hasher(arr: pa.StructArray, name: str) -> _Hasher:
    """Each field in order, chaining the running hash. The fields come with the struct's nulls merged
    in (`flatten`), so a null struct leaves the running hash unchanged, whatever its fields hold."""
    fields = [_hasher(child, f"{name}.{f.name}") for f, child in zip(arr.type, arr.flatten(), strict=True)]

    def hasher(idx: np.ndarray | None, seeds: np.ndarray) -> np.ndarray:
        for hash_field in fields:
            seeds = hash_field(idx, seeds)
        return seeds

    return hasher


def _list_hasher(arr: pa.Array, name: str, valid: np.ndarray | None) -> _Hasher:
    """Each element in order, chaining the running hash; a map's elements are its (key, value) entry
    structs, so each entry hashes its key, then its value, as Spark hashes a map.

    An element's hash has the hash of the elements before it as its seed, so the elements are hashed
    position by position: at position k, the lists longer than k hash their k-th elements together,
    each with its own running hash. Lists are ordered by length once, so those are always a prefix.
    """
    if pa.types.is_fixed_size_list(arr.type):
        arr = arr.cast(pa.large_list(arr.type.value_field))
    offsets = arr.offsets.to_numpy().astype(np.int64)  # into arr.values, the array's slicing applied
    first = int(offsets[0])
    values = arr.values.slice(first, int(offsets[-1]) - first)  # only the values this array spans
    all_starts, all_lengths = offsets[:-1] - first, np.diff(offsets)
    if valid is not None:
        all_lengths = np.where(valid, all_lengths, 0)  # a null list may still span values: it has none
    element = _hasher(values, name if pa.types.is_map(arr.type) else f"{name}.element")

    def hasher(idx: np.ndarray | None, seeds: np.ndarray) -> np.ndarray:
        starts, lengths = (all_starts, all_lengths) if idx is None else (all_starts[idx], all_lengths[idx])
        hashed = seeds.copy()
        longest = int(lengths.max()) if len(lengths) else 0
        if not longest:
            return hashed
        order = np.argsort(-lengths, kind="stable")
        # active[k]: how many lists are longer than k (the length of the prefix of `order`).
        active = np.searchsorted(-lengths[order], -np.arange(longest), side="left")
        for k, n in enumerate(active.tolist()):
            rows = order[:n]
            hashed[rows] = element(starts[rows] + k, hashed[rows])
        return hashed

    return hasher


def _hash_column(arr: pa.Array, name: str, seeds: np.ndarray) -> np.ndarray:
    """Spark's hash of every value of one column with that row's running hash as seed (nulls: seed)."""
    return _hasher(arr, name)(None, seeds)


# ---------------------------------------------------------------------------------------------
# Rows, tables, files
# ---------------------------------------------------------------------------------------------


def _selected(schema: pa.Schema, columns: list[str] | None, where: str = "") -> list[int]:
    if columns is None:
        return list(range(len(schema)))
    if isinstance(columns, str):
        raise UsageError(f"fingerprint: `columns` must be a list of names, not the string {columns!r}")
    if not columns:
        raise UsageError("fingerprint: `columns` is empty")
    indices = []
    for name in columns:
        i = schema.get_field_index(name)
        if i < 0:
            what = "is ambiguous in" if schema.get_all_field_indices(name) else "is not in"
            raise UsageError(f"fingerprint: column {name!r} {what} {where or 'the data'} "
                             f"(columns: {schema.names})")
        indices.append(i)
    return indices


def row_hashes(data: pa.Table | pa.RecordBatch, columns: list[str] | None = None) -> np.ndarray:
    """Spark's `xxhash64(columns...)` of every row, as an int64 array (all columns when None)."""
    indices = _selected(data.schema, columns)
    if not indices:
        raise UsageError("fingerprint: the data has no columns")
    batches = data.to_batches() if isinstance(data, pa.Table) else [data]
    parts = []
    for batch in batches:
        seeds = np.full(batch.num_rows, SEED, dtype=_U64)
        for i in indices:
            seeds = _hash_column(batch.column(i), batch.schema.field(i).name, seeds)
        parts.append(seeds.view(np.int64))
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def _exact_sum(hashes: np.ndarray) -> int:
    """The exact sum of int64 values: 32-bit halves summed in int64 (exact below 2**31 values)."""
    lo = (hashes.view(_U64) & _MASK32).astype(np.int64)
    hi = hashes >> np.int64(32)  # arithmetic shift: the signed high half
    total = 0
    step = 1 << 30
    for start in range(0, len(hashes), step):
        total += (int(hi[start : start + step].sum()) << 32) + int(lo[start : start + step].sum())
    return total


def fingerprint_table(data: pa.Table | pa.RecordBatch, columns: list[str] | None = None, *,
                      salt: int | None = None) -> Fingerprint:
    """The fingerprint of a table or batch over `columns` (in that order; all columns when None), each
    row's hash `salted` when `salt` is given."""
    hashes = row_hashes(data, columns)
    if salt is not None:
        hashes = salted(hashes, salt)
    return Fingerprint(len(hashes), _exact_sum(hashes))


def fingerprint_files(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    filesystem: FileSystem | None = None,
    columns: list[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    *,
    salt: int | None = None,
) -> Fingerprint:
    """The fingerprint of the rows of Parquet files, streamed batch by batch.

    Without `filesystem`, each path is a local path or a URI. Without `columns`, the first file's
    top-level columns in its order (as `spark.read.parquet` takes its schema from a file); every file
    must then have those columns with the same types. INT96 timestamps are read as microseconds, as
    Spark reads them.
    """


    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    total = Fingerprint.zero()
    expected: dict[str, pa.DataType] | None = None
    for path in paths:
        fs, where = (filesystem, os.fspath(path)) if filesystem is not None else resolve(path)
        try:
            pf = pq.ParquetFile(where, filesystem=fs, coerce_int96_timestamp_unit="us")
        except FileNotFoundError as exc:
            raise InputError(f"{where}: no such file") from exc
        except (pa.ArrowException, OSError) as exc:
            raise ParquetError(where, f"cannot read the Parquet footer ({exc})") from exc
        schema = pf.schema_arrow
        if columns is None:
            columns = list(schema.names)
        indices = _selected(schema, columns, where=where)
        fields = {columns[k]: schema.field(i).type for k, i in enumerate(indices)}
        if expected is None:
            expected = fields
        else:
            for name, dtype in fields.items():
                if dtype != expected[name]:
                    raise InputError(
                        f"{where}: column {name!r} is {dtype} here but {expected[name]} in the first file; "
                        "the fingerprint hashes by type, so the files must agree"
                    )
        try:
            for batch in pf.iter_batches(batch_size=batch_size, columns=columns, use_threads=True):
                total = total + fingerprint_table(batch, columns, salt=salt)
        except UsageError as exc:
            raise UsageError(f"{where}: {exc}") from exc
        except (pa.ArrowException, OSError) as exc:
            raise ParquetError(where, f"cannot read the data ({exc})") from exc
    return total
