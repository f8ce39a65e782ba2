"""`layout.compaction.executor.memory`: how much of the input a write task sorts in memory.

The oracles are Spark's own figures: the sort's peak memory for rows estimated from a file's footer, and
the unified memory pool its block manager reports for the session's heap.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from layout.compaction.executor.memory import (
    MIN_PIECE_BYTES,
    RESERVED,
    memory_per_input_byte,
    memory_piece_bytes,
    row_bytes,
    task_memory,
    value_bytes,
)
from layout.compaction.planning.planner import InputFile, RewriteGroup


def _table(rows: int = 60_000) -> pa.Table:
    rng = random.Random(7)
    words = ["DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"]
    return pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "day": pa.array([rng.randrange(10_000) for _ in range(rows)], pa.int32()),
        "price": pa.array([rng.random() for _ in range(rows)], pa.float64()),
        # unique strings, plain-encoded once the dictionary outgrows its page
        "comment": pa.array(["x" * rng.randrange(10, 44) + str(i) for i in range(rows)]),
        # four values: dictionary-encoded, a few bits per value on disk whatever their length
        "instruct": pa.array([rng.choice(words) for _ in range(rows)]),
        "maybe": pa.array([None if i % 3 else "y" * 20 for i in range(rows)]),
    })


def test_value_bytes_estimates_the_strings_decoded_bytes(tmp_path):
    table = _table()
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=20_000)
    actual = sum(pc.sum(pc.binary_length(table[c])).as_py() or 0 for c in ("comment", "instruct", "maybe"))
    estimate = value_bytes(pq.read_metadata(path))
    # plain strings add their 4-byte lengths; a dictionary chunk counts its values' mean min/max length
    assert actual <= estimate <= actual + 4 * 3 * table.num_rows
    only_numbers = tmp_path / "n.parquet"
    pq.write_table(table.select(["id", "day", "price"]), only_numbers)
    assert value_bytes(pq.read_metadata(only_numbers)) == 0


def test_row_bytes_matches_spark_s_sort_memory(spark, tmp_path):
    """The estimate for a file's rows against the peak memory Spark's sort took for them, in one task."""
    from pyspark.sql import functions as F

    table = _table(300_000)
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    rows = spark.read.parquet(str(path)).withColumn("slot", F.lit(0))
    sort = rows.repartition(1).sortWithinPartitions("day", "id")
    execution = sort._jdf.queryExecution()
    execution.toRdd().count()
    peaks = [node.metrics().apply("peakMemory").value() for node in _nodes(execution.executedPlan())
             if node.nodeName() == "Sort"]
    assert len(peaks) == 1 and peaks[0] > 0
    estimate = table.num_rows * row_bytes(len(rows.columns), 3, 0) + value_bytes(pq.read_metadata(path))
    # Spark allocates its memory in pages: the peak is rounded up to one
    page = spark.sparkContext._jsc.sc().env().memoryManager().pageSizeBytes()
    assert 0.8 * (peaks[0] - page) <= estimate <= 1.2 * peaks[0], (estimate, peaks[0], page)


def _nodes(node):
    """A physical plan's nodes, through the adaptive plan's current form and its query stages."""
    yield node
    if node.nodeName() == "AdaptiveSparkPlan":
        yield from _nodes(node.executedPlan())
    elif node.nodeName().endswith("QueryStage"):
        yield from _nodes(node.plan())
    children = node.children().iterator()
    while children.hasNext():
        yield from _nodes(children.next())


def test_task_memory_is_spark_s_unified_pool_over_the_tasks(spark):
    sc = spark.sparkContext
    heap = sc._jvm.java.lang.Runtime.getRuntime().maxMemory()
    fraction = float(sc.getConf().get("spark.memory.fraction", "0.6"))
    pool = sc._jsc.sc().env().memoryManager().maxOnHeapStorageMemory() + \
        sc._jsc.sc().env().memoryManager().onHeapExecutionMemoryPool().memoryUsed()
    assert task_memory(heap, fraction, 1) == pytest.approx(pool, rel=0.01)
    assert task_memory(heap, fraction, 4) == pytest.approx(pool / 4, rel=0.01)
    assert task_memory(RESERVED, 0.6, 2) == 0


def test_memory_piece_bytes():
    task = 200 << 20
    assert memory_piece_bytes(task, 10.0) == int(task * 0.7 / 10)
    assert memory_piece_bytes(task, 1e6) == MIN_PIECE_BYTES  # never below the floor
    assert memory_piece_bytes(task, 2.0) > memory_piece_bytes(task, 4.0)
    with pytest.raises(ValueError):
        memory_piece_bytes(task, 0.0)


def test_value_bytes_reads_every_footer_of_parquet_testing(parquet_testing):
    """Other writers' files (parquet-testing: every type, nested, INT96, statistics pyarrow cannot convert):
    an estimate for each, never an error."""
    footers = {path: _footer(path) for path in sorted((parquet_testing / "data").glob("*.parquet"))}
    read = {path: metadata for path, metadata in footers.items() if metadata is not None}
    assert len(read) > 20
    for path, metadata in read.items():
        assert value_bytes(metadata) >= 0, path


def _footer(path) -> pq.FileMetaData | None:
    try:
        return pq.read_metadata(path)
    except Exception:  # noqa: BLE001 - files pyarrow itself refuses (encrypted, malformed on purpose)
        return None


def test_memory_per_input_byte_is_the_most_over_the_groups():
    def group(gid, *files):
        return RewriteGroup(group_id=gid, partition="", output_files=1, reasons=(),
                            inputs=tuple(InputFile(path=f"f{gid}{i}", size=size, rows=rows,
                                                   value_bytes=values)
                                         for i, (size, rows, values) in enumerate(files)))

    width = row_bytes(3, 1, 0)
    small = group(0, (1000, 10, 500), (1000, 10, 300))  # (20 rows x width + 800) / 2000
    wide = group(1, (100, 10, None))  # not measured: its 100 bytes on disk count as its values'
    assert (memory_per_input_byte([small], fields=3, variable_fields=1)
            == pytest.approx((20 * width + 800) / 2000))
    assert (memory_per_input_byte([small, wide], fields=3, variable_fields=1)
            == pytest.approx((10 * width + 100) / 100))
    assert memory_per_input_byte([group(2)], fields=3, variable_fields=1) is None
