"""layout.read.cache: staleness, bounds, LRU, expiry, switching off, configuration and threads."""

from __future__ import annotations

import os
import random
import threading
import time
import weakref
from collections import OrderedDict

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyarrow import fs

from layout.errors import ConfigError, InputError, UsageError
from layout.read import cache as cache_mod
from layout.read.cache import (
    CacheConfig,
    CacheStats,
    FileKey,
    MetadataCache,
    default_cache,
    file_key,
    filesystem_id,
    set_default_cache,
)

MiB = 1024 * 1024


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def loader(value, size, calls=None):
    def load():
        if calls is not None:
            calls.append(value)
        return value, size

    return load


def wait_until(condition, timeout=10.0):
    # Synchronises with another thread (not a timing assumption): spin until it reaches a known state.
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the other thread never got there"
        time.sleep(0)


# -- a rewritten file is never served stale ---------------------------------------------------------


def test_rewritten_parquet_file_is_not_served_stale(tmp_path):
    path = str(tmp_path / "part-0.parquet")
    pq.write_table(pa.table({"x": list(range(100))}), path)
    local = fs.LocalFileSystem()
    fs_id = filesystem_id(local)
    cache = MetadataCache()

    def read_footer():
        meta = pq.read_metadata(path)
        return meta.num_rows, meta.serialized_size * 4

    old_key = file_key(local, path)
    assert cache.get_or_load(fs_id, old_key, "footer", read_footer) == 100
    cache.put(fs_id, old_key, ("column_index", 0, 0), "old index", 500)
    assert cache.get_or_load(fs_id, old_key, "footer", read_footer) == 100  # a hit
    before = cache.stats()
    assert (before.hits, before.loads, before.entries) == (1, 1, 2)

    old_stat = os.stat(path)
    pq.write_table(pa.table({"x": list(range(100, 250))}), path)
    new_stat = os.stat(path)
    if (new_stat.st_size, new_stat.st_mtime_ns) == (old_stat.st_size, old_stat.st_mtime_ns):
        os.utime(path, ns=(new_stat.st_atime_ns, old_stat.st_mtime_ns + 1_000_000))
    new_key = file_key(local, path)
    assert new_key != old_key and new_key.path == old_key.path

    assert cache.get(fs_id, new_key, ("column_index", 0, 0)) is None
    assert cache.get_or_load(fs_id, new_key, "footer", read_footer) == 150
    after = cache.stats()
    assert after.loads == 2
    assert after.invalidations == 2  # both items of the old version were dropped
    assert after.entries == 1
    assert after.bytes == pq.read_metadata(path).serialized_size * 4


def test_lookup_with_another_version_misses_and_drops_the_old_items():
    cache = MetadataCache()
    v1, v2 = FileKey("t/a.parquet", 10, 1), FileKey("t/a.parquet", 10, 2)
    cache.put("local", v1, "footer", "v1", 100)
    cache.put("local", v1, ("offset_index", 0, 1), "v1 oi", 50)
    assert cache.get("local", v2, "footer") is None
    assert cache.stats().bytes == 0 and cache.stats().entries == 0
    # A put of another version replaces, too; other paths and filesystems are untouched.
    cache.put("local", v1, "footer", "v1", 100)
    cache.put("local", FileKey("t/b.parquet", 10), "footer", "b", 7)
    cache.put("s3:eu", v1, "footer", "remote", 9)
    cache.put("local", FileKey("t/a.parquet", 11, 1), "footer", "v3", 30)
    assert cache.get("local", v1, "footer") is None
    assert cache.stats().bytes == 7 + 9  # v3 was dropped by the v1 lookup just above
    assert cache.get("s3:eu", v1, "footer") == "remote"


# -- bounds and LRU ---------------------------------------------------------------------------------


def test_values_over_max_entry_bytes_are_returned_but_not_kept():
    cache = MetadataCache(CacheConfig(max_total_bytes=1000, max_entry_bytes=100))
    key = FileKey("a", 1)
    calls: list = []
    for _ in range(2):
        assert cache.get_or_load("local", key, "footer", loader("big", 101, calls)) == "big"
    assert len(calls) == 2
    assert not cache.put("local", key, "x", "big", 101)
    assert cache.put("local", key, "y", "fits", 100)
    stats = cache.stats()
    assert (stats.rejected, stats.entries, stats.bytes) == (3, 1, 100)


def test_max_entry_bytes_above_the_total_acts_as_the_total():
    cache = MetadataCache(CacheConfig(max_total_bytes=100, max_entry_bytes=1000))
    assert not cache.put("local", FileKey("a", 1), "footer", "v", 101)
    assert cache.put("local", FileKey("a", 1), "footer", "v", 100)


def test_least_recently_used_goes_first_across_filesystems_and_files():
    cache = MetadataCache(CacheConfig(max_total_bytes=300, max_entry_bytes=100))
    a, b, c = ("local", FileKey("a", 1)), ("s3:x", FileKey("b", 1)), ("local", FileKey("c", 1))
    cache.put(*a, "footer", "A", 100)
    cache.put(*b, "footer", "B", 100)
    cache.put(*c, "footer", "C", 100)
    assert cache.get(*a, "footer") == "A"  # a is now the most recently used
    cache.put("gcs", FileKey("d", 1), "footer", "D", 100)
    assert cache.get(*b, "footer") is None
    assert cache.get(*a, "footer") == "A" and cache.get(*c, "footer") == "C"
    assert cache.stats().evictions == 1


# A reference model: an OrderedDict in LRU order, and one version per (fs, path).
class Model:
    def __init__(self, max_total, max_entry):
        self.max_total, self.max_entry = max_total, max_entry
        self.items: OrderedDict = OrderedDict()
        self.versions: dict = {}

    def lookup(self, fs_id, key, item, size):
        """True on a hit; on a miss, store like the cache does."""
        if self.versions.get((fs_id, key.path), key) != key:
            for k in [k for k in self.items if k[:2] == (fs_id, key.path)]:
                del self.items[k]
        self.versions[(fs_id, key.path)] = key
        ident = (fs_id, key.path, item)
        if ident in self.items:
            self.items.move_to_end(ident)
            return True
        if size <= self.max_entry:
            self.items[ident] = size
            while sum(self.items.values()) > self.max_total:
                self.items.popitem(last=False)
        return False


operation = st.tuples(
    st.integers(0, 2),  # filesystem
    st.integers(0, 5),  # file
    st.integers(0, 1),  # version of the file
    st.integers(0, 3),  # item within the file
    st.integers(0, 1200),  # size; over max_entry_bytes sometimes
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operation, min_size=1, max_size=400))
def test_bounds_lru_and_counters_match_a_reference_model(ops):
    config = CacheConfig(max_total_bytes=5000, max_entry_bytes=1000)
    cache, model = MetadataCache(config), Model(5000, 1000)
    expected_loads = expected_rejected = 0
    for fs_n, file_n, version, item_n, size in ops:
        fs_id, key = f"fs{fs_n}", FileKey(f"dir/f{file_n}.parquet", 4096, version)
        item = "footer" if item_n == 0 else ("column_index", 0, item_n)
        calls: list = []
        value = cache.get_or_load(fs_id, key, item, loader((fs_id, key, item), size, calls))
        assert value == (fs_id, key, item)
        hit = model.lookup(fs_id, key, item, size)
        assert (not calls) == hit, "the cache and the LRU model disagree on a hit"
        expected_loads += not hit
        expected_rejected += (not hit) and size > 1000
        stats = cache.stats()
        assert stats.bytes == sum(model.items.values()) <= config.max_total_bytes
        assert stats.entries == len(model.items)
    stats = cache.stats()
    assert stats.hits + stats.misses == stats.lookups == len(ops)
    assert stats.misses == stats.loads == expected_loads
    assert stats.rejected == expected_rejected
    assert stats.coalesced == 0


def test_thousands_of_entries_stay_within_bounds():
    rng = random.Random(7)
    config = CacheConfig(max_total_bytes=200_000, max_entry_bytes=4_000)
    cache = MetadataCache(config)
    stored = 0
    for i in range(5000):
        fs_id = f"s3://bucket-{rng.randrange(4)}"
        key = FileKey(f"warehouse/t/data/{rng.randrange(60)}.parquet", 1 << 20)
        size = rng.randrange(0, 5_000)
        kept = cache.put(fs_id, key, ("column_index", i, rng.randrange(12)), i, size)  # all distinct
        assert kept == (size <= config.max_entry_bytes)
        stored += kept
        assert cache.stats().bytes <= config.max_total_bytes
    stats = cache.stats()
    assert stats.evictions > 0
    assert stats.rejected == 5000 - stored
    assert stored == stats.entries + stats.evictions + stats.invalidations


# -- expiry -----------------------------------------------------------------------------------------


def test_items_expire_after_the_interval_since_last_access():
    clock = FakeClock()
    cache = MetadataCache(CacheConfig(expire_after_seconds=3600), clock=clock)
    key = FileKey("a", 1)
    cache.put("local", key, "footer", "F", 10)
    cache.put("local", key, "bloom", "B", 10)
    clock.advance(3599)
    assert cache.get("local", key, "footer") == "F"  # resets the footer's last access
    clock.advance(1)
    assert cache.get("local", key, "footer") == "F"
    assert cache.stats().expirations == 1 and cache.stats().entries == 1  # the bloom filter expired
    clock.advance(3600)
    calls: list = []
    assert cache.get_or_load("local", key, "footer", loader("F2", 10, calls)) == "F2"
    assert calls == ["F2"]
    stats = cache.stats()
    assert (stats.expirations, stats.entries, stats.bytes) == (2, 1, 10)


# -- switched off -----------------------------------------------------------------------------------


def test_a_disabled_cache_loads_every_time_and_keeps_nothing():
    cache = MetadataCache(CacheConfig(enabled=False))
    key, calls = FileKey("a", 1), []
    for _ in range(3):
        assert cache.get_or_load("local", key, "footer", loader("F", 10, calls)) == "F"
    assert not cache.put("local", key, "footer", "F", 10)
    assert cache.get("local", key, "footer") is None
    stats = cache.stats()
    assert len(calls) == 3
    assert (stats.misses, stats.loads, stats.hits, stats.entries, stats.bytes) == (4, 3, 0, 0, 0)
    assert stats.hit_rate == 0.0


# -- the rest of the API ----------------------------------------------------------------------------


def test_invalidate_clear_and_hit_rate():
    cache = MetadataCache()
    key = FileKey("a", 1)
    cache.put("local", key, "footer", "F", 10)
    cache.put("local", key, "bloom", "B", 10)
    cache.put("local", FileKey("b", 1), "footer", "G", 10)
    assert cache.get("local", key, "footer") == "F"
    assert cache.get("local", key, "nope", default="missing") == "missing"
    assert cache.stats().hit_rate == 0.5
    assert cache.invalidate("local", "a") == 2
    assert cache.invalidate("local", "a") == 0
    assert cache.stats().entries == 1
    cache.clear()
    stats = cache.stats()
    assert (stats.entries, stats.bytes, stats.invalidations) == (0, 0, 3)
    with pytest.raises(AttributeError):
        stats.hits = 0  # frozen


def test_a_bad_size_from_a_loader_is_a_usage_error_and_does_not_wedge_the_key():
    cache = MetadataCache()
    key = FileKey("a", 1)
    with pytest.raises(UsageError, match="size"):
        cache.get_or_load("local", key, "footer", lambda: ("F", -1))
    with pytest.raises(UsageError):
        cache.put("local", key, "footer", "F", "10")
    assert cache.get_or_load("local", key, "footer", loader("F", 10)) == "F"


def test_a_loader_error_propagates_and_nothing_is_stored():
    cache = MetadataCache()

    def boom():
        raise OSError("read failed")

    with pytest.raises(OSError, match="read failed"):
        cache.get_or_load("local", FileKey("a", 1), "footer", boom)
    assert cache.stats().entries == 0 and cache.stats().loads == 1


def test_a_cache_let_go_frees_its_values_at_once():
    # No reference cycle through the cache: plans that use a fresh cache each (benchmarks, measurements)
    # must not leave decoded footers behind for the cycle collector.
    class Value:
        pass

    cache, value = MetadataCache(), Value()
    cache.put("local", FileKey("a", 1), "footer", value, 10)
    assert cache.get("local", FileKey("a", 1), "footer") is value
    freed = weakref.ref(value)
    del cache, value
    assert freed() is None


def test_file_key_and_filesystem_id(tmp_path):
    local = fs.LocalFileSystem()
    path = tmp_path / "x.bin"
    path.write_bytes(b"12345")
    key = file_key(local, str(path))
    assert key == FileKey(str(path), 5, os.stat(path).st_mtime_ns)
    assert hash(key) == hash(FileKey(str(path), 5, os.stat(path).st_mtime_ns))
    with pytest.raises(InputError, match="no such file"):
        file_key(local, str(tmp_path / "missing"))
    with pytest.raises(InputError, match="not a file"):
        file_key(local, str(tmp_path))
    assert filesystem_id(local) == "local"
    assert filesystem_id(fs.SubTreeFileSystem(str(tmp_path), local)).startswith("subtree:local:")
    s3 = fs.S3FileSystem(region="eu-west-1", endpoint_override="http://minio:9000", anonymous=True)
    assert filesystem_id(s3) == "s3:eu-west-1@http://minio:9000"
    assert filesystem_id(fs._MockFileSystem()) != filesystem_id(fs._MockFileSystem())


# -- configuration ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, CacheConfig()),
        ({"LAKESORT_CACHE_ENABLED": "false"}, CacheConfig(enabled=False)),
        ({"LAKESORT_CACHE_ENABLED": " 0 "}, CacheConfig(enabled=False)),
        ({"LAKESORT_CACHE_ENABLED": "TRUE"}, CacheConfig(enabled=True)),
        ({"LAKESORT_CACHE_ENABLED": ""}, CacheConfig()),
        ({"LAKESORT_CACHE_MAX_BYTES": "1GiB"}, CacheConfig(max_total_bytes=1024 * MiB)),
        ({"LAKESORT_CACHE_MAX_BYTES": "256MiB"}, CacheConfig(max_total_bytes=256 * MiB)),
        ({"LAKESORT_CACHE_MAX_BYTES": "12345"}, CacheConfig(max_total_bytes=12345)),
        ({"LAKESORT_CACHE_MAX_ENTRY_BYTES": "64kib"}, CacheConfig(max_entry_bytes=64 * 1024)),
        ({"LAKESORT_CACHE_MAX_ENTRY_BYTES": "1.5GiB"}, CacheConfig(max_entry_bytes=1536 * MiB)),
        ({"LAKESORT_CACHE_EXPIRE_SECONDS": "90.5"}, CacheConfig(expire_after_seconds=90.5)),
        ({"LAKESORT_CACHE_EXPIRE_SECONDS": "inf"}, CacheConfig(expire_after_seconds=float("inf"))),
    ],
)
def test_from_env(env, expected):
    assert CacheConfig.from_env(env) == expected


@pytest.mark.parametrize(
    ("var", "raw", "accepted"),
    [
        ("LAKESORT_CACHE_ENABLED", "yes", "true, false, 1 or 0"),
        ("LAKESORT_CACHE_MAX_BYTES", "256MB", "write 256MiB"),
        ("LAKESORT_CACHE_MAX_BYTES", "0", "greater than 0"),
        ("LAKESORT_CACHE_MAX_BYTES", "-5", "128MiB or 1GiB"),
        ("LAKESORT_CACHE_MAX_ENTRY_BYTES", "1.5B", "not a whole number of bytes"),
        ("LAKESORT_CACHE_EXPIRE_SECONDS", "soon", "valid number"),
        ("LAKESORT_CACHE_EXPIRE_SECONDS", "0", "greater than 0"),
        ("LAKESORT_CACHE_EXPIRE_SECONDS", "nan", "greater than 0"),
    ],
)
def test_from_env_rejects_bad_values_naming_the_variable(var, raw, accepted):
    with pytest.raises(ConfigError, match=f"\\${var}={raw!r}") as info:
        CacheConfig.from_env({var: raw})
    assert accepted in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_total_bytes", 0),
        ("max_total_bytes", -1),
        ("max_entry_bytes", 0),
        ("max_entry_bytes", 1.5),
        ("max_entry_bytes", True),
        ("expire_after_seconds", 0),
        ("expire_after_seconds", -3),
        ("enabled", "yes"),
    ],
)
def test_config_validation_names_the_field(field, value):
    with pytest.raises(ConfigError, match=f"CacheConfig.{field}"):
        CacheConfig(**{field: value})


def test_default_cache_comes_from_the_environment_and_can_be_replaced(monkeypatch):
    monkeypatch.setattr(cache_mod, "_default", None)
    monkeypatch.setenv("LAKESORT_CACHE_MAX_BYTES", "3MiB")
    first = default_cache()
    assert first is default_cache()
    assert first.config.max_total_bytes == 3 * MiB
    mine = MetadataCache(CacheConfig(enabled=False))
    set_default_cache(mine)
    assert default_cache() is mine
    set_default_cache(None)
    assert default_cache() is not mine and default_cache() is not first


# -- threads ----------------------------------------------------------------------------------------


def run_threads(n, target):
    errors: list = []

    def guarded(i):
        try:
            target(i)
        except BaseException as exc:  # noqa: BLE001 -- reported to the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []


@pytest.mark.parametrize("max_total", [10 * MiB, 2_000])
def test_many_threads_share_one_cache(max_total):
    cache = MetadataCache(CacheConfig(max_total_bytes=max_total, max_entry_bytes=200))
    keys = [(f"fs{i % 3}", FileKey(f"f{i % 17}", 100), ("column_index", 0, i)) for i in range(60)]
    calls: dict = {}
    calls_lock = threading.Lock()
    threads, per_thread = 16, 400
    start = threading.Barrier(threads)

    def work(seed):
        rng = random.Random(seed)
        start.wait()
        for _ in range(per_thread):
            fs_id, key, item = rng.choice(keys)

            def load(fs_id=fs_id, key=key, item=item):
                with calls_lock:
                    calls[(fs_id, key, item)] = calls.get((fs_id, key, item), 0) + 1
                return (fs_id, key.path, item), 100

            assert cache.get_or_load(fs_id, key, item, load) == (fs_id, key.path, item)

    run_threads(threads, work)
    stats = cache.stats()
    assert stats.lookups == threads * per_thread
    assert stats.misses == stats.loads + stats.coalesced
    assert stats.loads == sum(calls.values())
    assert stats.bytes == 100 * stats.entries <= max_total
    if max_total == 10 * MiB:
        # Nothing is evicted, and the in-flight marker lets only one thread load each item.
        assert set(calls.values()) == {1} and len(calls) == len(keys)
        assert stats.entries == len(keys)


def test_concurrent_loads_of_one_item_share_one_load_without_holding_the_lock():
    cache = MetadataCache()
    key, release, calls = FileKey("a", 1), threading.Event(), []
    results: list = []

    def slow_load():
        calls.append(1)
        assert release.wait(10)
        return "F", 10

    leader = threading.Thread(
        target=lambda: results.append(cache.get_or_load("local", key, "footer", slow_load))
    )
    leader.start()
    wait_until(lambda: calls)
    follower = threading.Thread(
        target=lambda: results.append(cache.get_or_load("local", key, "footer", slow_load))
    )
    follower.start()
    wait_until(lambda: cache.stats().coalesced == 1)
    # The lock is free while the load runs: other items can be read and written.
    assert cache.put("local", key, "bloom", "B", 5)
    assert cache.get("local", key, "bloom") == "B"
    release.set()
    leader.join(10)
    follower.join(10)
    assert results == ["F", "F"] and len(calls) == 1
    assert cache.stats().loads == 1


def test_waiters_retry_when_the_shared_load_fails():
    cache = MetadataCache()
    key, go, failed = FileKey("a", 1), threading.Event(), []

    def failing_load():
        assert go.wait(10)
        raise OSError("flaky storage")

    def leader():
        try:
            cache.get_or_load("local", key, "footer", failing_load)
        except OSError as exc:
            failed.append(exc)

    results: list = []
    t1 = threading.Thread(target=leader)
    t1.start()
    wait_until(lambda: cache._inflight)
    t2 = threading.Thread(
        target=lambda: results.append(cache.get_or_load("local", key, "footer", loader("F", 1)))
    )
    t2.start()
    wait_until(lambda: cache.stats().coalesced == 1)
    go.set()
    t1.join(10)
    t2.join(10)
    assert len(failed) == 1 and results == ["F"]
    stats = cache.stats()
    assert (stats.loads, stats.entries) == (2, 1)
    assert stats.misses == stats.loads + stats.coalesced


def test_a_load_that_straddles_invalidate_is_returned_but_not_stored():
    cache = MetadataCache()
    key, started, release, results = FileKey("a", 1), threading.Event(), threading.Event(), []

    def slow_load():
        started.set()
        assert release.wait(10)
        return "F", 10

    t = threading.Thread(target=lambda: results.append(cache.get_or_load("local", key, "footer", slow_load)))
    t.start()
    assert started.wait(10)
    cache.invalidate("local", "a")
    release.set()
    t.join(10)
    assert results == ["F"]
    assert cache.stats().entries == 0


def test_stats_is_a_frozen_snapshot():
    stats = MetadataCache().stats()
    assert isinstance(stats, CacheStats) and stats.lookups == 0 and stats.hit_rate == 0.0
