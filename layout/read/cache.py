"""A bounded, two-tier cache of immutable metadata: Parquet footers, page indexes, Iceberg manifests.

Parquet files and Iceberg manifests never change once written, so what was decoded from them can be
kept and served again, the way Iceberg's `ManifestFiles` keeps a `ContentCache` per `FileIO`. The
first tier is the filesystem (an identity string such as `"local"` or `"s3:us-east-1"`), the second
the file, and a file holds several items (`"footer"`, `("column_index", rg, col)`, ...).

A file is keyed by `FileKey(path, size, mtime_ns)`. A rewritten or replaced file has a new size or
mtime, so it can never be served stale: a lookup with a different key for a known path misses and
drops every item cached for the old version. Iceberg paths are never reused, so path plus recorded
length is enough there (`mtime_ns=None`); other callers stat the file with `file_key`.

Bounds: total bytes (least recently used items go first, across the whole cache, not per tier), the
size of one item (bigger values are returned but not kept), and an expiry measured from last access.
Sizes are not measured here: `load` returns `(value, size)` and the caller estimates the size (for
example the raw metadata bytes times a factor for the decoded Python objects and the entry overhead).
The items live in one `cachetools.TTLCache`, which keeps the LRU order, the expiry and the byte bound;
this module adds the file versions, the per-item size limit, the counters and the shared loads.

Concurrency: one lock guards all state (cachetools' caches are not thread-safe). It is never held while
loading. Concurrent `get_or_load` calls for the same item share one load (an in-flight marker): the
first caller loads, the others wait for its result. If that load fails, the error goes to the caller
that ran it and each waiter retries (one of them becomes the next loader). One lock is enough: every
operation under it is a few dict operations, and the least-recently-used order spans all tiers, so
per-tier locks would still need a global one for it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

from cachetools import TTLCache
from pyarrow import fs

from layout.errors import ConfigError, InputError, UsageError
from layout.settings import settings
from layout.sizes import MiB

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem

__all__ = [
    "CacheConfig",
    "CacheStats",
    "FileKey",
    "MetadataCache",
    "default_cache",
    "file_key",
    "filesystem_id",
    "set_default_cache",
]

V = TypeVar("V")
_Ident = tuple[str, str, Hashable]  # (fs_id, path, item): one item in the store


@dataclass(frozen=True)
class FileKey:
    """One version of one file: a rewrite at the same path changes `size` or `mtime_ns`."""

    path: str
    size: int
    mtime_ns: int | None = None


@dataclass(frozen=True)
class CacheConfig:
    """How big the cache may grow and how long unused items stay; `enabled=False` keeps nothing.

    `max_entry_bytes` above `max_total_bytes` acts as `max_total_bytes`. `expire_after_seconds` may be
    `math.inf` (never expire).
    """

    enabled: bool = True
    max_total_bytes: int = 256 * MiB
    max_entry_bytes: int = 16 * MiB
    expire_after_seconds: float = 3600.0

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ConfigError(f"CacheConfig.enabled must be True or False, got {self.enabled!r}")
        for name in ("max_total_bytes", "max_entry_bytes"):
            value = getattr(self, name)
            # bool is an int subclass: True would silently mean one byte.
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"CacheConfig.{name} must be a positive integer of bytes, got {value!r}")
        seconds = self.expire_after_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
            raise ConfigError(f"CacheConfig.expire_after_seconds must be a positive number, got {seconds!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CacheConfig:
        """The `LAKESORT_CACHE_*` settings (`layout.settings`; unset or empty variables take the defaults).

        LAKESORT_CACHE_ENABLED, LAKESORT_CACHE_MAX_BYTES, LAKESORT_CACHE_MAX_ENTRY_BYTES and
        LAKESORT_CACHE_EXPIRE_SECONDS; a bad value is a `ConfigError` naming the variable.
        """
        given = settings(environ)
        return cls(
            enabled=given.cache_enabled,
            max_total_bytes=given.cache_max_bytes,
            max_entry_bytes=given.cache_max_entry_bytes,
            expire_after_seconds=given.cache_expire_seconds,
        )


@dataclass(frozen=True)
class CacheStats:
    """A snapshot of the counters.

    Every lookup (`get`, and each pass of `get_or_load`) is a hit or a miss. A `get_or_load` miss either
    runs `load` (`loads`) or waits for another thread's load of the same item (`coalesced`).
    `evictions` are items dropped for the byte bound (the least recently used, or an item replaced by a
    value over `max_entry_bytes`), `expirations` for the expiry interval,
    `invalidations` because their file changed or `invalidate`/`clear` was called; `rejected` counts
    values over `max_entry_bytes` that were not kept. `bytes` and `entries` describe what is held now.
    """

    hits: int
    misses: int
    loads: int
    coalesced: int
    load_seconds: float
    evictions: int
    expirations: int
    invalidations: int
    rejected: int
    bytes: int
    entries: int

    @property
    def lookups(self) -> int:
        return self.hits + self.misses

    @property
    def hit_rate(self) -> float:
        """Hits per lookup; 0.0 before the first lookup."""
        return self.hits / self.lookups if self.lookups else 0.0


class _File:
    # Hand-written: cachetools has no secondary index, and a rewritten file must lose all its items at
    # once (found here, not by scanning the whole store). `items` holds the store's own `(value, size)`
    # tuples, so a hit reads the value here and only writes it back to the store.
    __slots__ = ("items", "key")

    def __init__(self, key: FileKey) -> None:
        self.key = key
        self.items: dict[Hashable, tuple[Any, int]] = {}


class _Store(TTLCache[_Ident, tuple[Any, int]]):
    """The items, `(fs_id, path, item) -> (value, size)`, and the files they belong to (`files`).

    cachetools keeps the LRU order, the expiry and the byte bound. What it drops on its own is counted in
    `counts` and unindexed, through the two methods cachetools documents for that: `popitem` (the least
    recently used, evicted for room) and `expire` (timed out). No reference back to the `MetadataCache`:
    a cache that is let go is freed at once, with all it holds, not later by the cycle collector.
    """

    def __init__(self, config: CacheConfig, clock: Callable[[], float], counts: Counter[str]) -> None:
        super().__init__(maxsize=config.max_total_bytes, ttl=config.expire_after_seconds, timer=clock,
                         getsizeof=itemgetter(1))
        self.counts = counts
        self.files: dict[tuple[str, str], _File] = {}  # (fs_id, path) -> the version held and its items

    def popitem(self) -> tuple[_Ident, tuple[Any, int]]:
        ident, entry = super().popitem()
        self.counts["evictions"] += 1
        self.unindex(ident)
        return ident, entry

    def expire(self, time: float | None = None) -> list[tuple[_Ident, tuple[Any, int]]]:
        expired = super().expire(time)
        for ident, _ in expired:
            self.counts["expirations"] += 1
            self.unindex(ident)
        return expired

    def clear(self) -> None:
        super().clear()
        self.files.clear()

    def unindex(self, ident: _Ident) -> None:
        fs_id, path, item = ident
        file = self.files[fs_id, path]
        del file.items[item]
        # Empty files go too, so a cache of many short-lived files does not keep their shells.
        if not file.items:
            del self.files[fs_id, path]


class _Flight:
    """One load in progress; waiters block on `done` and then read `ok`/`value`.

    Hand-written rather than cachetools' `cached(lock=..., condition=...)`: the loader is a closure per
    call, not a function of the key; waiters must get the leader's value even when it was not kept (over
    `max_entry_bytes`); a load that straddles `invalidate` must not be stored; and the waits are counted.
    """

    __slots__ = ("done", "ok", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.ok = False
        self.value: Any = None


class MetadataCache:
    """The cache; see the module docstring. All methods are thread-safe.

    `clock` returns seconds (monotonic) and only drives expiry; tests pass a fake one.
    """

    def __init__(self, config: CacheConfig | None = None, *, clock: Callable[[], float] = time.monotonic):
        self._config = config or CacheConfig()
        self._max_entry = min(self._config.max_entry_bytes, self._config.max_total_bytes)
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._load_seconds = 0.0  # beside the counts: a Counter holds ints
        self._store = _Store(self._config, clock, self._counts)
        self._inflight: dict[tuple[str, FileKey, Hashable], _Flight] = {}
        # Bumped by invalidate/clear, so a load that started before one is returned but not stored.
        self._generation = 0

    @property
    def config(self) -> CacheConfig:
        return self._config

    def get(self, fs_id: str, key: FileKey, item: Hashable, default: Any = None) -> Any:
        """The cached value, or `default` on a miss (pass a sentinel if None is a valid value)."""
        with self._lock:
            entry = self._lookup_locked(fs_id, key, item)
            return default if entry is None else entry[0]

    def put(self, fs_id: str, key: FileKey, item: Hashable, value: Any, size: int) -> bool:
        """Keep `value` (estimated at `size` bytes); False if it was not kept (disabled or too big).

        The item's previous value goes either way: a value too big to keep is not replaced by a stale one.
        """
        _check_size(size)
        with self._lock:
            return self._store_locked(fs_id, key, item, value, size)

    def get_or_load(self, fs_id: str, key: FileKey, item: Hashable, load: Callable[[], tuple[V, int]]) -> V:
        """The cached value, or `load()`'s value (kept if it fits). `load` returns `(value, size_bytes)`.

        Only one concurrent caller runs `load` for the same (fs_id, key, item); the others wait for it.
        An exception from `load` propagates to the caller that ran it and nothing is stored.
        """
        if not self._config.enabled:
            # Nothing is stored, so there is nothing to share either: every caller loads.
            with self._lock:
                self._counts["misses"] += 1
            value, _ = self._run_load(load)
            return value
        flight_key = (fs_id, key, item)
        while True:
            with self._lock:
                entry = self._lookup_locked(fs_id, key, item)
                if entry is not None:
                    cached: V = entry[0]
                    return cached
                flight = self._inflight.get(flight_key)
                if flight is None:
                    flight = self._inflight[flight_key] = _Flight()
                    generation = self._generation
                    break
                self._counts["coalesced"] += 1
            flight.done.wait()
            if flight.ok:
                shared: V = flight.value
                return shared
            # The leader's load failed: look again, and load ourselves if still missing.
        try:
            value, size = self._run_load(load)
            with self._lock:
                if generation == self._generation:
                    self._store_locked(fs_id, key, item, value, size)
            flight.value, flight.ok = value, True
            return value
        finally:
            with self._lock:
                if self._inflight.get(flight_key) is flight:
                    del self._inflight[flight_key]
            flight.done.set()

    def invalidate(self, fs_id: str, path: str) -> int:
        """Drop everything cached for `path` on `fs_id` (any version); the number of items dropped."""
        with self._lock, self._store.timer as now:
            self._store.expire(now)
            self._generation += 1
            for flight_key in [k for k in self._inflight if k[0] == fs_id and k[1].path == path]:
                del self._inflight[flight_key]  # new callers start a fresh load
            return self._drop_file_locked(fs_id, path)

    def clear(self) -> None:
        """Drop everything (counters stay; dropped items count as invalidations)."""
        with self._lock:
            self._generation += 1
            self._inflight.clear()
            self._counts["invalidations"] += len(self._store)  # len() expires the timed-out ones first
            self._store.clear()

    def stats(self) -> CacheStats:
        with self._lock, self._store.timer:
            counts = self._counts
            return CacheStats(
                hits=counts["hits"], misses=counts["misses"], loads=counts["loads"],
                coalesced=counts["coalesced"], load_seconds=self._load_seconds,
                evictions=counts["evictions"], expirations=counts["expirations"],
                invalidations=counts["invalidations"], rejected=counts["rejected"],
                bytes=int(self._store.currsize), entries=len(self._store),
            )

    # -- internals; every *_locked method runs with self._lock held ---------------------------------

    def _run_load(self, load: Callable[[], tuple[V, int]]) -> tuple[V, int]:
        started = time.perf_counter()
        try:
            value, size = load()
        finally:
            elapsed = time.perf_counter() - started
            with self._lock:
                self._counts["loads"] += 1
                self._load_seconds += elapsed
        _check_size(size)
        return value, size

    def _lookup_locked(self, fs_id: str, key: FileKey, item: Hashable) -> tuple[Any, int] | None:
        store = self._store
        with store.timer as now:  # one reading of the clock for the whole lookup
            store.expire(now)
            file = self._file_locked(fs_id, key)
            entry = None if file is None else file.items.get(item)
            if entry is None:
                self._counts["misses"] += 1
                return None
            self._counts["hits"] += 1
            # Written back: TTLCache times an item from its last write, this cache from its last access.
            store[fs_id, key.path, item] = entry
            return entry

    def _store_locked(self, fs_id: str, key: FileKey, item: Hashable, value: Any, size: int) -> bool:
        if not self._config.enabled:
            return False
        store = self._store
        with store.timer as now:
            store.expire(now)
            file = self._file_locked(fs_id, key)
            ident = (fs_id, key.path, item)
            replaced = file is not None and item in file.items
            if replaced:
                # Replaced, whether or not the new value is kept: the old one must not be served again, and
                # it may be the same object grown past its accounted size (a ParquetFile that read page
                # indexes). Removed first, so making room for the new value never counts it as evicted.
                del store[ident]
                store.unindex(ident)
            if size > self._max_entry:
                self._counts["rejected"] += 1
                self._counts["evictions"] += replaced
                return False
            entry = store[ident] = (value, size)  # evicts the least recently used items while over the bound
            file = store.files.get((fs_id, key.path))
            if file is None:
                file = store.files[fs_id, key.path] = _File(key)
            file.items[item] = entry
            return True

    def _file_locked(self, fs_id: str, key: FileKey) -> _File | None:
        """The items held of `key`'s file, if they are of that version; those of another version go."""
        file = self._store.files.get((fs_id, key.path))
        if file is not None and file.key != key:
            # The file was rewritten (or the caller holds an older stat): the old items are dead weight.
            self._drop_file_locked(fs_id, key.path)
            return None
        return file

    def _drop_file_locked(self, fs_id: str, path: str) -> int:
        # Only after `expire` at a frozen time: TTLCache refuses to delete an expired item.
        file = self._store.files.pop((fs_id, path), None)
        if file is None:
            return 0
        for item in file.items:
            del self._store[fs_id, path, item]
        self._counts["invalidations"] += len(file.items)
        return len(file.items)


def _check_size(size: object) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise UsageError(f"cache entry size must be a non-negative integer of bytes, got {size!r}")


def file_key(filesystem: FileSystem, path: str) -> FileKey:
    """The key of `path`'s current version, from one `get_file_info` (size and mtime)."""

    info = filesystem.get_file_info(path)
    if info.type == fs.FileType.NotFound:
        raise InputError(f"{path}: no such file")
    if info.type != fs.FileType.File:
        raise InputError(f"{path}: not a file")
    return FileKey(path=path, size=info.size, mtime_ns=info.mtime_ns)


def filesystem_id(filesystem: FileSystem) -> str:
    """A string naming the namespace `filesystem`'s paths live in: `local`, `s3:<region>@<endpoint>`, ..."""
    name: str = filesystem.type_name
    if name == "local":
        return "local"
    if name == "subtree":
        # Paths are relative to the base path, so it belongs in the identity.
        return f"subtree:{filesystem_id(filesystem.base_fs)}:{filesystem.base_path}"
    if name == "mock":
        # An in-memory filesystem: two instances hold different files under the same paths.
        return f"mock:{id(filesystem)}"
    if name in ("s3", "gcs"):
        parts = [name]
        region = getattr(filesystem, "region", None) or getattr(filesystem, "project_id", None)
        if region:
            parts.append(f":{region}")
        # S3's endpoint is only visible through its pickling state; take that one field, nothing else.
        try:
            endpoint = filesystem.__reduce__()[1][0].get("endpoint_override")
        except (AttributeError, IndexError, KeyError, TypeError):  # not worth failing a lookup over
            endpoint = None
        if endpoint:
            parts.append(f"@{endpoint}")
        return "".join(parts)
    return name


_default: MetadataCache | None = None
_default_lock = threading.Lock()


def default_cache() -> MetadataCache:
    """The process-wide cache, created on first use from `CacheConfig.from_env()`."""
    global _default
    with _default_lock:
        if _default is None:
            _default = MetadataCache(CacheConfig.from_env())
        return _default


def set_default_cache(cache: MetadataCache | None) -> None:
    """Replace the process-wide cache; None makes the next `default_cache()` read the environment again."""
    global _default
    with _default_lock:
        _default = cache
