"""How much of the input one write task can sort without spilling to disk, and so how large a piece may be.

A write task sorts all of its rows in memory before writing them (`layout.compaction.executor.slots`: a piece
of an output file per task). Spark's sorter holds each row as an UnsafeRow: an 8-byte null bitset per 64
fields, 8 bytes per field, variable-length values (strings, binary, nested) after them rounded up to 8 bytes;
and per row a 4-byte length, an 8-byte pointer and an 8-byte key prefix, with a second pointer array for its
radix sort. When the rows outgrow the task's share of the executor's execution memory the sorter spills them
to disk and merges them back, which costs about as much as the sort itself: TPC-H SF10 into 52 pieces of
32 MiB at Spark's default 1 GiB spilled 4.0 GiB, and the sort and write took 110 s against 77 s for a plain
Spark sort in 100 tasks that did not spill (one run, two cores).

So a piece is at most what fits: the task's share of the unified memory (Spark's formula: the heap less
300 MiB reserved, times spark.memory.fraction, over the tasks running at once on an executor), with
headroom, converted to input bytes by the input's estimated bytes in memory per byte on disk. The
variable-length values are estimated from each input file's footer (`value_bytes`). Pure: the job asks
Spark for the heap and the cores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from layout.compaction.plan import RewriteGroup

__all__ = ["MIN_PIECE_BYTES", "memory_per_input_byte", "memory_piece_bytes", "row_bytes", "task_memory",
           "value_bytes"]

RESERVED = 300 << 20  # Spark's reserved system memory (UnifiedMemoryManager's RESERVED_SYSTEM_MEMORY_BYTES)
SORTER_BYTES = 36  # per row beyond the row: length (4), pointer and prefix (16), the radix sort's buffer (16)
# Of a task's share: the sorter's pointer array doubles as it grows, and memory comes in whole pages.
HEADROOM = 0.7
MIN_PIECE_BYTES = 4 << 20  # below this a piece (and so a row group) is smaller than memory requires


def row_bytes(fields: int, variable_fields: int, value_bytes_per_row: float) -> float:
    """Bytes one row of `fields` top-level fields takes in Spark's sorter, `variable_fields` of them
    variable-length with `value_bytes_per_row` bytes of values together
    (each rounded up to 8: 4 on average)."""
    bitset = 8 * math.ceil(fields / 64)
    return SORTER_BYTES + bitset + 8 * fields + value_bytes_per_row + 4 * variable_fields


def task_memory(heap: int, fraction: float, cores: int) -> int:
    """The execution memory one of `cores` concurrent tasks can hold at most on an executor of `heap` bytes
    (spark.memory.fraction `fraction`)."""
    return max(0, int((heap - RESERVED) * fraction / max(1, cores)))


def memory_per_input_byte(groups: Sequence[RewriteGroup], *, fields: int,
                          variable_fields: int) -> float | None:
    """The most bytes in the sorter per byte on disk over the groups' inputs (rows of `fields` fields,
    `variable_fields` of them variable-length, whose values `InputFile.value_bytes` estimates; a file the
    prepare step did not measure counts its bytes on disk); None without input bytes."""
    ratios = []
    for g in groups:
        size = sum(f.size for f in g.inputs)
        if size:
            values = sum(f.value_bytes if f.value_bytes is not None else f.size for f in g.inputs)
            ratios.append(
                (sum(f.rows for f in g.inputs) * row_bytes(fields, variable_fields, 0) + values) / size
            )
    return max(ratios) if ratios else None


def memory_piece_bytes(task_bytes: int, memory_per_input_byte: float) -> int:
    """The input bytes whose rows a task of `task_bytes` sorts in memory with headroom (at least
    MIN_PIECE_BYTES)."""
    if memory_per_input_byte <= 0:
        raise ValueError(f"memory per input byte must be positive, got {memory_per_input_byte}")
    return max(MIN_PIECE_BYTES, int(task_bytes * HEADROOM / memory_per_input_byte))


def value_bytes(metadata: pq.FileMetaData) -> int:
    """Estimated bytes of a Parquet file's variable-length values once decoded: per column chunk of strings,
    binary or a nested column, its uncompressed size (a plain-encoded string's bytes plus a 4-byte length), or
    where larger its non-null values times the mean length of its minimum and maximum (a dictionary-encoded
    chunk is small on disk whatever its values' length). Fixed-width columns count in `row_bytes` instead."""
    total = 0
    for rg in range(metadata.num_row_groups):
        group = metadata.row_group(rg)
        for c in range(group.num_columns):
            chunk = group.column(c)
            if chunk.physical_type not in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY") \
                    and "." not in chunk.path_in_schema:
                continue
            total += max(chunk.total_uncompressed_size, _from_statistics(chunk))
    return total


def _from_statistics(chunk: pq.ColumnChunkMetaData) -> int:
    """A string chunk's non-null values times the mean length of its minimum and maximum (0 without them)."""
    try:
        stats = chunk.statistics if chunk.is_stats_set else None
        if stats is None or not stats.has_min_max or not isinstance(stats.min, (str, bytes)):
            return 0
        values = chunk.num_values - (stats.null_count if stats.has_null_count else 0)
        return int(values * (_length(stats.min) + _length(stats.max)) / 2)
    # statistics pyarrow cannot convert
    except (ValueError, TypeError, NotImplementedError, pa.ArrowException):
        return 0


def _length(value: str | bytes) -> int:
    return len(value.encode()) if isinstance(value, str) else len(value)

