"""Planning through the metadata cache, and binary search on a real sorted file."""

from __future__ import annotations

import math
import os

import pyarrow as pa
import pyarrow.parquet as pq

from layout.cache import CacheConfig, MetadataCache
from layout.plan import plan


def write(path, keys, **kw):
    table = pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array([f"row{k}" for k in keys])})
    pq.write_table(table, path, write_page_index=True, **kw)
    return table


def test_rewritten_file_is_never_planned_from_stale_metadata(tmp_path):
    path = tmp_path / "t.parquet"
    write(path, range(1000))
    cache = MetadataCache()
    first = plan(path, "k = 1500", cache=cache)
    assert first.counts.rows_selected == 0, "Should skip: 1500 is above the file's max"
    # Same path, new content (and a different size): the cached footer must not be used.
    write(path, range(1000, 2000))
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    again = plan(path, "k = 1500", cache=cache)
    assert again.counts.rows_selected > 0, "Should read: the rewritten file holds 1500"
    assert again.to_arrow().column("k").to_pylist() == [1500]


def test_warm_planning_is_served_from_the_cache(tmp_path):
    for i in range(5):
        write(tmp_path / f"part-{i}.parquet", range(i * 100, (i + 1) * 100))
    cache = MetadataCache(CacheConfig())
    cold = plan(tmp_path, "k BETWEEN 120 AND 130", cache=cache)
    misses = cache.stats().misses
    warm = plan(tmp_path, "k BETWEEN 120 AND 130", cache=cache)
    assert cache.stats().misses == misses, "a second plan of unchanged files reads no metadata"
    assert cache.stats().hits >= 5
    assert warm.counts == cold.counts and warm.files == cold.files
    assert cold.counts.files_selected == 1


def test_cache_can_be_switched_off(tmp_path):
    write(tmp_path / "t.parquet", range(100))
    assert plan(tmp_path, "k = 5", cache=False).counts.rows_selected > 0


def test_binary_search_on_a_sorted_file_touches_log_n_entries(tmp_path):
    n = 200_000
    path = tmp_path / "sorted.parquet"
    write(path, range(n), data_page_size=512, write_batch_size=64, row_group_size=n, use_dictionary=False)
    pf_pages = pq.ParquetFile(path).metadata.row_group(0).column(0)
    assert pf_pages.has_column_index
    p = plan(path, "k = 123457", columns=["k"], cache=False)
    pages = p.counts.pages_total
    assert pages > 1000, "the file should have many pages for this test to mean anything"
    assert p.counts.pages_selected == 1
    # Two binary searches (first page reaching the value, first page past it) over `pages` entries.
    assert p.page_comparisons <= 2 * math.ceil(math.log2(pages + 1))
    assert p.to_arrow().column("k").to_pylist() == [123457]
