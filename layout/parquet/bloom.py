"""Split block bloom filters (Parquet BloomFilter.md): header + bitset, xxhash64 of PLAIN bytes."""

from __future__ import annotations

import math
import struct
from typing import Any

import xxhash

from layout.parquet import format as fmt
from layout.parquet.types import ColumnType

SALTS = (0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D, 0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31)
BLOCK_BYTES = 32
_WORDS = struct.Struct("<8I")
_M32 = 0xFFFFFFFF


def xxh64(data: bytes) -> int:
    """The 64-bit xxHash (seed 0) the spec uses."""
    return xxhash.xxh64_intdigest(data, 0)


class BloomFilter:
    """A split block bloom filter of one column chunk. `might_contain` is False only for absent values."""

    __slots__ = ("bitset", "column_type", "header", "num_blocks")

    def __init__(self, bitset: bytes, column_type: ColumnType | None = None,
                 header: fmt.BloomFilterHeader | None = None) -> None:
        if not bitset or len(bitset) % BLOCK_BYTES:
            raise ValueError(f"bloom filter bitset of {len(bitset)} bytes is not a positive multiple of 32")
        self.bitset = bytes(bitset)
        self.num_blocks = len(bitset) // BLOCK_BYTES
        self.column_type = column_type
        self.header = header

    @property
    def num_bytes(self) -> int:
        return len(self.bitset)

    def might_contain_hash(self, h: int) -> bool:
        """Check a 64-bit xxhash64 value against the filter."""
        block = (((h >> 32) * self.num_blocks) >> 32) * BLOCK_BYTES
        words = _WORDS.unpack_from(self.bitset, block)
        x = h & _M32
        for word, salt in zip(words, SALTS):
            if not (word >> (((x * salt) & _M32) >> 27)) & 1:
                return False
        return True

    def might_contain(self, value: Any) -> bool:
        """Is `value` (a logical value of the column's type: str, int, date, Decimal, bytes, ...) possibly
        present? Raises layout.errors.UsageError for a value that does not fit the column's type."""
        ct = self.column_type
        if ct is None:
            raise ValueError("BloomFilter without a column type: use might_contain_hash")
        data = ct.plain_bytes(value)
        if ct.kind in ("float", "double", "float16") and not isinstance(value, bool):
            # Writers hash the PLAIN bytes, which differ for equal values: 0.0 == -0.0 must probe both
            # zeros, and NaNs have many bit patterns, so a NaN can never be ruled out (sound).
            if math.isnan(value):
                return True
            if value == 0:
                return any(self.might_contain_hash(xxh64(ct.plain_bytes(z))) for z in (0.0, -0.0))
        return self.might_contain_hash(xxh64(data))

    def __contains__(self, value: Any) -> bool:
        return self.might_contain(value)

    def __repr__(self) -> str:
        name = self.column_type.name if self.column_type is not None else "?"
        return f"BloomFilter(column={name!r}, num_bytes={self.num_bytes})"


def insert_hash(bitset: bytearray, h: int) -> None:
    """Set the bits of hash `h` in a bitset (for building test filters)."""
    num_blocks = len(bitset) // BLOCK_BYTES
    block = (((h >> 32) * num_blocks) >> 32) * BLOCK_BYTES
    words = list(_WORDS.unpack_from(bitset, block))
    x = h & _M32
    for i, salt in enumerate(SALTS):
        words[i] |= 1 << (((x * salt) & _M32) >> 27)
    _WORDS.pack_into(bitset, block, *words)


def check_header(header: fmt.BloomFilterHeader) -> str | None:
    """What this reader cannot handle in a header, or None when it is a supported filter."""
    if header.algorithm is None or header.algorithm.block is None:
        return "unsupported bloom filter algorithm (only the split block algorithm is defined)"
    if header.hash is None or header.hash.xxhash is None:
        return "unsupported bloom filter hash (only XXHASH is defined)"
    if header.compression is None or header.compression.uncompressed is None:
        return "unsupported bloom filter compression (only UNCOMPRESSED is defined)"
    if header.num_bytes is None or header.num_bytes <= 0 or header.num_bytes % BLOCK_BYTES:
        return f"bloom filter size {header.num_bytes} is not a positive multiple of 32 bytes"
    return None
