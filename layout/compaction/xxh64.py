"""XXH64 as Spark's `org.apache.spark.sql.catalyst.expressions.XXH64` computes it, over numpy arrays.

Spark hashes a value with a seed: `hashInt(i, seed)` and `hashLong(l, seed)` are XXH64 of the 4 or 8
little-endian bytes, written out here on uint64 arrays (wraparound arithmetic) so that a whole column
is hashed at once, each value with its own seed; `hashUnsafeBytes` is standard XXH64 of the bytes,
left to the `xxhash` package one value at a time.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import xxhash

_U64 = np.uint64
_P1 = _U64(0x9E3779B185EBCA87)
_P2 = _U64(0xC2B2AE3D27D4EB4F)
_P3 = _U64(0x165667B19E3779F9)
_P4 = _U64(0x85EBCA77C2B2AE63)
_P5 = _U64(0x27D4EB2F165667C5)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U64(r)) | (x >> _U64(64 - r))


def _fmix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> _U64(33))
    h = h * _P2
    h = h ^ (h >> _U64(29))
    h = h * _P3
    return h ^ (h >> _U64(32))


def hash_int(values: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """XXH64.hashInt(int, seed): `values` holds the int's 32 bits, zero-extended to uint64."""
    with np.errstate(over="ignore"):
        h = seeds + (_P5 + _U64(4))
        h = h ^ (values * _P1)
        h = _rotl(h, 23) * _P2 + _P3
        return _fmix(h)


def hash_long(values: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """XXH64.hashLong(long, seed): `values` holds the long's 64 bits."""
    with np.errstate(over="ignore"):
        h = seeds + (_P5 + _U64(8))
        h = h ^ (_rotl(values * _P2, 31) * _P1)
        h = _rotl(h, 27) * _P1 + _P4
        return _fmix(h)


def hash_bytes(values: Iterable[bytes | memoryview], seeds: np.ndarray) -> np.ndarray:
    """XXH64.hashUnsafeBytes per value (standard XXH64 of the bytes, with that value's seed)."""
    digest = xxhash.xxh64_intdigest
    return np.array([digest(v, s) for v, s in zip(values, seeds.tolist(), strict=True)], dtype=_U64)
