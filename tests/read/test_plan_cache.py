"""Planning through the metadata cache, and binary search on a real sorted file."""

from __future__ import annotations

import math
import operator
import os
import types
from collections import Counter
from dataclasses import replace

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
    fake clock that advances 0.25 s per reading it is 250 ms per reading after the first,
    and the JSON agrees."""
    write(tmp_path / "t.parquet", range(100))
    ticks = iter(range(1000))
    monkeypatch.setattr(layout.read.plan, "time",
                        types.SimpleNamespace(perf_counter=lambda: 0.25 * next(ticks)))
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


# -- Iceberg: only the files the manifests keep are opened -------------------------------------------


@pytest.fixture
def counted_table(iceberg_catalog, counting_fs, monkeypatch):
    """`cache.events`: six appends, six files of 100 disjoint ids each (0..599); every Parquet file the plan
    opens goes through `counting_fs`."""
    real = layout.read.plan.resolve
    counting = pafs.PyFileSystem(counting_fs)

    def resolve(location):
        filesystem, path = real(location)
        return (counting, path) if filesystem.type_name == "local" else (filesystem, path)

    monkeypatch.setattr(layout.read.plan, "resolve", resolve)
    iceberg_catalog.create_namespace_if_not_exists("cache")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    table = iceberg_catalog.create_table("cache.events", schema=schema)
    for part in range(6):
        ids = range(part * 100, (part + 1) * 100)
        table.append(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]},
                              schema=schema))
    return table.refresh()


def _manifest_files(table):
    """(path as the plan opens it, DataFile) of every data file, from pyiceberg's own full scan."""
    return [(layout.io.resolve(t.file.file_path)[1], t.file) for t in table.scan().plan_files()]


def test_iceberg_point_lookup_opens_only_the_files_its_manifests_keep(counted_table, counting_fs):
    files = _manifest_files(counted_table)
    (holder,) = [layout.io.resolve(t.file.file_path)[1]
                 for t in counted_table.scan(row_filter="id = 250").plan_files()]
    cache = MetadataCache()
    cold = plan("cache.events", "id = 250", cache=cache)
    assert set(counting_fs.opened) == {holder}, "Should open: only the file whose manifest bounds hold 250"
    assert counting_fs.opened[holder] == 1, "its footer is read once, then served from the cache"
    misses = cache.stats().misses
    opened = sum(counting_fs.opened.values())

    warm = plan("cache.events", "id = 250", cache=cache)
    assert sum(counting_fs.opened.values()) == opened, "a warm plan opens no file"
    assert cache.stats().misses == misses, (
        "a warm plan reads no metadata: files, kept set and footer are cached")
    assert warm.counts == cold.counts and warm.files == cold.files
    assert read_table(warm).column("id").to_pylist() == [250]

    # The totals are the manifests': six files, their record counts, their columns' sizes.
    counts = cold.counts
    assert (counts.files_total, counts.files_selected) == (6, 1)
    assert counts.rows_total == sum(f.record_count for _, f in files) == 600
    assert counts.bytes_total == sum(sum(f.column_sizes.values()) for _, f in files)
    assert (counts.row_groups_total, counts.pages_total) == (None, None), (
        "only footers count row groups and pages, and five footers were not read")


def test_iceberg_exact_totals_open_every_footer(counted_table, counting_fs):
    fast = plan("cache.events", "id = 250", cache=MetadataCache())
    counting_fs.opened.clear()
    exact = plan("cache.events", "id = 250", cache=MetadataCache(), exact_totals=True)
    assert set(counting_fs.opened) == {p for p, _ in _manifest_files(counted_table)}, "every footer is read"
    assert exact.files == fast.files
    assert exact.counts.row_groups_total == 6 and exact.counts.pages_total >= 12, exact.counts
    same = replace(exact.counts, row_groups_total=None, pages_total=None)
    assert same == fast.counts, (
        "the manifests' totals are the footers' (pyiceberg's column sizes sum the chunks)")


def test_iceberg_plan_without_pruning_opens_every_file_and_counts_everything(counted_table, counting_fs):
    p = plan("cache.events", "id >= 0", ["id"], cache=False)
    assert len(counting_fs.opened) == 6
    assert p.counts.row_groups_total == 6 and p.counts.pages_total is not None, (
        "every file was opened: the footer-only totals are known")
    assert p.counts.rows_selected == p.counts.rows_total == 600


def test_iceberg_new_snapshot_is_planned_from_its_own_manifests(counted_table, counting_fs):
    """The cached file lists belong to one snapshot (its manifest list never changes): after an append, the
    same cache plans the new snapshot, with the new file, and the old snapshot still as it was."""
    cache = MetadataCache()
    before = plan("cache.events", "id = 250", cache=cache)
    old_snapshot = counted_table.current_snapshot().snapshot_id
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])  # as the fixture wrote
    counted_table.append(pa.table({"id": pa.array([250, 900], pa.int64()), "name": ["again", "new"]},
                                  schema=schema))
    after = plan("cache.events", "id = 250", cache=cache)
    assert (after.counts.files_total, after.counts.files_selected) == (7, 2)
    assert after.counts.rows_total == before.counts.rows_total + 2
    assert sorted(read_table(after).column("name").to_pylist()) == ["again", "n250"]
    travel = plan("cache.events", "id = 250", cache=cache, snapshot_id=old_snapshot)
    assert travel.counts == before.counts and travel.files == before.files
