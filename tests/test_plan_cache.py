"""Planning through the metadata cache, and binary search on a real sorted file."""

from __future__ import annotations

import math
import operator
import os
import types
from collections import Counter

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import layout.io
import layout.read.cache
import layout.read.plan
import layout.read.pruning
from layout.read.cache import CacheConfig, MetadataCache
from layout.read.plan import plan
from layout.read.scan import read_table


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
    assert read_table(again).column("k").to_pylist() == [1500]


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


class _CountingHandler(pafs.FileSystemHandler):
    """The local filesystem, counting every file opened for reading (what a plan fetches from storage)."""

    def __init__(self) -> None:
        self.local = pafs.LocalFileSystem()
        self.opened: Counter[str] = Counter()

    def get_type_name(self):
        return "counting"

    def normalize_path(self, path):
        return self.local.normalize_path(path)

    def get_file_info(self, paths):
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.local.get_file_info(selector)

    def open_input_file(self, path):
        self.opened[path] += 1
        return self.local.open_input_file(path)

    def open_input_stream(self, path):
        self.opened[path] += 1
        return self.local.open_input_stream(path)

    def _read_only(self, *args, **kwargs):
        raise AssertionError("planning must not write")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _read_only
    move = copy_file = open_output_stream = open_append_stream = _read_only


@pytest.fixture
def counting_fs(monkeypatch):
    """Local paths resolve to a filesystem that counts opens; the process-wide cache is a fresh one."""
    handler = _CountingHandler()
    filesystem = pafs.PyFileSystem(handler)
    real = layout.io.resolve

    def resolve(location):
        fs, path = real(location)
        return (filesystem, path) if fs.type_name == "local" else (fs, path)

    monkeypatch.setattr(layout.io, "resolve", resolve)
    monkeypatch.setattr(layout.read.cache, "_default", MetadataCache())
    return handler


def _opens(handler: _CountingHandler, run) -> int:
    before = sum(handler.opened.values())
    run()
    return sum(handler.opened.values()) - before


@pytest.mark.parametrize("off", ["cache=False", "enabled=False"])
def test_cache_can_be_switched_off(tmp_path, counting_fs, off):
    """Switched off, every plan reads the footers and page indexes from storage again: as many opens as a
    cold plan through a working cache, where a warm plan opens nothing. Nothing is looked up in (cache=False)
    or kept by (enabled=False) any cache."""
    for i in range(3):
        write(
            tmp_path / f"part-{i}.parquet",
            range(i * 100, (i + 1) * 100),
            data_page_size=64,
            write_batch_size=8,
        )
    where = "k BETWEEN 120 AND 130"
    on, reference = MetadataCache(), []
    cold = _opens(counting_fs, lambda: reference.append(plan(tmp_path, where, cache=on)))
    warm = _opens(counting_fs, lambda: plan(tmp_path, where, cache=on))
    assert cold >= 3 and warm == 0, (
        "the control: a working cache serves the second plan without opening a file"
    )

    disabled = MetadataCache(CacheConfig(enabled=False))
    cache = False if off == "cache=False" else disabled
    results = []
    opens = [
        _opens(counting_fs, lambda: results.append(plan(tmp_path, where, cache=cache))) for _ in range(3)
    ]
    assert opens == [cold] * 3, "switched off, every plan reads the metadata from storage"
    assert [r.counts for r in results] == [reference[0].counts] * 3
    assert 11 <= reference[0].counts.rows_selected < 100, (
        "pages pruned: the control plan did use the page index"
    )
    assert read_table(results[0]).column("k").to_pylist() == list(range(120, 131))
    stats, default = disabled.stats(), layout.read.cache.default_cache().stats()
    assert (default.lookups, default.entries) == (0, 0), "cache=False must not fall back to the default cache"
    assert (stats.hits, stats.entries, stats.bytes) == (0, 0, 0)
    if off == "enabled=False":
        assert stats.loads == stats.misses > 0 and stats.loads % 3 == 0, "every lookup of every plan loads"
    else:
        assert stats.lookups == 0


def test_plan_ms_is_the_measured_planning_time(tmp_path, monkeypatch):
    """`plan_ms` is (last - first) reading of `time.perf_counter` during the planning, in milliseconds: with a
    fake clock that advances 0.25 s per reading it is 250 ms per reading after the first, and the JSON agrees."""
    write(tmp_path / "t.parquet", range(100))
    ticks = iter(range(1000))
    monkeypatch.setattr(layout.read.plan, "time", types.SimpleNamespace(perf_counter=lambda: 0.25 * next(ticks)))
    p = plan(tmp_path, "k = 5", cache=False)
    readings = next(ticks)
    assert readings >= 2, "plan reads the clock at its start and at its end"
    assert p.plan_ms == 250.0 * (readings - 1)
    assert p.to_json()["plan_ms"] == p.plan_ms


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
    assert read_table(p).column("k").to_pylist() == [123457]


class _CountedKey:
    """A literal's order key that counts every comparison made with it, whichever side it is on (an int
    bound compared with it defers to these methods), in a counter the test owns."""

    calls = 0
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def _count(self, other, op):
        _CountedKey.calls += 1
        return op(self.v, other.v if isinstance(other, _CountedKey) else other)

    def __lt__(self, other):
        return self._count(other, operator.lt)

    def __le__(self, other):
        return self._count(other, operator.le)

    def __gt__(self, other):
        return self._count(other, operator.gt)

    def __ge__(self, other):
        return self._count(other, operator.ge)

    def __eq__(self, other):
        return self._count(other, operator.eq)

    __hash__ = None


def test_page_comparisons_counted_outside_the_code(tmp_path, monkeypatch):
    """The O(log pages) claim of planning on a sorted file, without trusting `page_comparisons`: the
    predicate's literal becomes a key that counts every comparison made with it (column-index bounds and
    row-group statistics alike). At most 2 per probe of two binary searches over the pages, plus a few
    for the file's and the row group's min/max."""
    n = 200_000
    path = tmp_path / "sorted.parquet"
    write(path, range(n), data_page_size=512, write_batch_size=64, row_group_size=n, use_dictionary=False)
    real = layout.read.pruning.literal_key

    def counted_key(ct, value):
        key = real(ct, value)
        return None if key is None else _CountedKey(key)

    monkeypatch.setattr(layout.read.pruning, "literal_key", counted_key)
    for where, rows in (
        ("k = 123457", [123457]),
        ("k >= 199990", list(range(199_990, n))),
        ("k < 3", [0, 1, 2]),
    ):
        _CountedKey.calls = 0
        p = plan(path, where, columns=["k"], cache=False)
        pages = p.counts.pages_total
        assert pages > 1000 and p.counts.pages_selected <= 2, where
        assert 0 < _CountedKey.calls <= 4 * math.ceil(math.log2(pages + 1)) + 16, (
            where,
            _CountedKey.calls,
            pages,
        )
        assert read_table(p).column("k").to_pylist() == rows
