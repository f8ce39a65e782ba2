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

Concurrency: one lock guards all state. It is never held while loading. Concurrent `get_or_load`
calls for the same item share one load (an in-flight marker): the first caller loads, the others wait
for its result. If that load fails, the error goes to the caller that ran it and each waiter retries
(one of them becomes the next loader). One lock is enough: every operation under it is a few dict
operations, and the least-recently-used order spans all tiers, so per-tier locks would still need a
global one for it.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from layout.errors import ConfigError, InputError, UsageError

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

MiB = 1024 * 1024
V = TypeVar("V")


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
        """The defaults, overridden by the `LAKESORT_CACHE_*` variables that are set and not empty.

        LAKESORT_CACHE_ENABLED (true/false/1/0), LAKESORT_CACHE_MAX_BYTES and
        LAKESORT_CACHE_MAX_ENTRY_BYTES (bytes, or a number with KiB/MiB/GiB/TiB such as `256MiB`),
        LAKESORT_CACHE_EXPIRE_SECONDS (a positive number of seconds).
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for var, field, parse in (
            ("LAKESORT_CACHE_ENABLED", "enabled", _parse_bool),
            ("LAKESORT_CACHE_MAX_BYTES", "max_total_bytes", _parse_bytes),
            ("LAKESORT_CACHE_MAX_ENTRY_BYTES", "max_entry_bytes", _parse_bytes),
            ("LAKESORT_CACHE_EXPIRE_SECONDS", "expire_after_seconds", _parse_seconds),
        ):
            raw = env.get(var)
            if raw is not None and raw.strip():
                values[field] = parse(var, raw.strip())
        return cls(**values)


def _parse_bool(var: str, raw: str) -> bool:
    text = raw.lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise ConfigError(f"{var}={raw!r}: not a boolean; use true, false, 1 or 0")


_UNITS = {"": 1, "b": 1, "kib": 1024, "mib": MiB, "gib": 1024 * MiB, "tib": 1024 * 1024 * MiB}
_SIZE = re.compile(r"(\d+)\s*([a-z]*)", re.IGNORECASE)


def _parse_bytes(var: str, raw: str) -> int:
    match = _SIZE.fullmatch(raw)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS or int(match.group(1)) == 0:
        raise ConfigError(
            f"{var}={raw!r}: not a positive size; use a plain number of bytes (268435456) "
            "or a number with KiB, MiB, GiB or TiB (256MiB, 1GiB)"
        )
    return int(match.group(1)) * _UNITS[unit]


def _parse_seconds(var: str, raw: str) -> float:
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not seconds > 0:  # also rejects nan
        raise ConfigError(f"{var}={raw!r}: not a positive number of seconds; use e.g. 3600 or 0.5 or inf")
    return seconds


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


class _Entry:
    # Mutable on purpose (last access moves); never leaves the cache.
    __slots__ = ("fs_id", "item", "last_access", "path", "size", "value")

    def __init__(self, fs_id: str, path: str, item: Hashable, value: Any, size: int, now: float) -> None:
        self.fs_id, self.path, self.item = fs_id, path, item
        self.value, self.size, self.last_access = value, size, now


class _File:
    __slots__ = ("items", "key")

    def __init__(self, key: FileKey) -> None:
        self.key = key
        self.items: dict[Hashable, _Entry] = {}


class _Flight:
    """One load in progress; waiters block on `done` and then read `ok`/`value`."""

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
        self._clock = clock
        self._lock = threading.Lock()
        self._tiers: dict[str, dict[str, _File]] = {}
        # Every entry once, oldest access first: the LRU order and the expiry order at the same time,
        # because expiry is measured from last access and the clock is monotonic.
        self._lru: OrderedDict[tuple[str, str, Hashable], _Entry] = OrderedDict()
        self._inflight: dict[tuple[str, FileKey, Hashable], _Flight] = {}
        # Bumped by invalidate/clear, so a load that started before one is returned but not stored.
        self._generation = 0
        self._bytes = 0
        self._hits = self._misses = self._loads = self._coalesced = 0
        self._evictions = self._expirations = self._invalidations = self._rejected = 0
        self._load_seconds = 0.0

    @property
    def config(self) -> CacheConfig:
        return self._config

    def get(self, fs_id: str, key: FileKey, item: Hashable, default: Any = None) -> Any:
        """The cached value, or `default` on a miss (pass a sentinel if None is a valid value)."""
        with self._lock:
            entry = self._lookup_locked(fs_id, key, item)
            return default if entry is None else entry.value

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
                self._misses += 1
            value, _ = self._run_load(load)
            return value
        flight_key = (fs_id, key, item)
        while True:
            with self._lock:
                entry = self._lookup_locked(fs_id, key, item)
                if entry is not None:
                    return entry.value
                flight = self._inflight.get(flight_key)
                leader = flight is None
                if flight is None:
                    flight = self._inflight[flight_key] = _Flight()
                    generation = self._generation
                else:
                    self._coalesced += 1
            if leader:
                break
            flight.done.wait()
            if flight.ok:
                return flight.value
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
        with self._lock:
            self._generation += 1
            for flight_key in [k for k in self._inflight if k[0] == fs_id and k[1].path == path]:
                del self._inflight[flight_key]  # new callers start a fresh load
            return self._drop_file_locked(fs_id, path)

    def clear(self) -> None:
        """Drop everything (counters stay; dropped items count as invalidations)."""
        with self._lock:
            self._generation += 1
            self._inflight.clear()
            self._invalidations += len(self._lru)
            self._tiers.clear()
            self._lru.clear()
            self._bytes = 0

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                hits=self._hits, misses=self._misses, loads=self._loads, coalesced=self._coalesced,
                load_seconds=self._load_seconds, evictions=self._evictions,
                expirations=self._expirations, invalidations=self._invalidations,
                rejected=self._rejected, bytes=self._bytes, entries=len(self._lru),
            )

    # -- internals; every *_locked method runs with self._lock held ---------------------------------

    def _run_load(self, load: Callable[[], tuple[V, int]]) -> tuple[V, int]:
        started = time.perf_counter()
        try:
            value, size = load()
        finally:
            elapsed = time.perf_counter() - started
            with self._lock:
                self._loads += 1
                self._load_seconds += elapsed
        _check_size(size)
        return value, size

    def _lookup_locked(self, fs_id: str, key: FileKey, item: Hashable) -> _Entry | None:
        now = self._clock()
        self._expire_locked(now)
        file = self._tiers.get(fs_id, {}).get(key.path)
        if file is not None and file.key != key:
            # The file was rewritten (or the caller holds an older stat): the old items are dead weight.
            self._drop_file_locked(fs_id, key.path)
            file = None
        entry = file.items.get(item) if file is not None else None
        if entry is None:
            self._misses += 1
            return None
        self._hits += 1
        entry.last_access = now
        self._lru.move_to_end((fs_id, key.path, item))
        return entry

    def _store_locked(self, fs_id: str, key: FileKey, item: Hashable, value: Any, size: int) -> bool:
        if not self._config.enabled:
            return False
        now = self._clock()
        self._expire_locked(now)
        file = self._tiers.get(fs_id, {}).get(key.path)
        if file is not None and file.key != key:
            self._drop_file_locked(fs_id, key.path)
            file = None
        old = file.items.get(item) if file is not None else None
        if old is not None:
            # Replaced, whether or not the new value is kept: the old one must not be served again, and it
            # may be the same object grown past its accounted size (a ParquetFile that read page indexes).
            self._remove_locked(old)  # may drop the file and tier if it was their last item
        if size > self._max_entry:
            self._rejected += 1
            self._evictions += old is not None
            return False
        files = self._tiers.setdefault(fs_id, {})
        file = files.get(key.path)
        if file is None:
            file = files[key.path] = _File(key)
        entry = _Entry(fs_id, key.path, item, value, size, now)
        file.items[item] = entry
        self._lru[(fs_id, key.path, item)] = entry
        self._bytes += size
        while self._bytes > self._config.max_total_bytes:
            self._remove_locked(self._lru[next(iter(self._lru))])
            self._evictions += 1
        return True

    def _expire_locked(self, now: float) -> None:
        ttl = self._config.expire_after_seconds
        while self._lru:
            oldest = self._lru[next(iter(self._lru))]
            if now - oldest.last_access < ttl:
                return
            self._remove_locked(oldest)
            self._expirations += 1

    def _drop_file_locked(self, fs_id: str, path: str) -> int:
        file = self._tiers.get(fs_id, {}).get(path)
        if file is None:
            return 0
        entries = list(file.items.values())
        for entry in entries:
            self._remove_locked(entry)
        self._invalidations += len(entries)
        return len(entries)

    def _remove_locked(self, entry: _Entry) -> None:
        del self._lru[(entry.fs_id, entry.path, entry.item)]
        self._bytes -= entry.size
        files = self._tiers[entry.fs_id]
        file = files[entry.path]
        del file.items[entry.item]
        # Empty tiers go too, so a cache of many short-lived files does not keep their shells.
        if not file.items:
            del files[entry.path]
            if not files:
                del self._tiers[entry.fs_id]


def _check_size(size: object) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise UsageError(f"cache entry size must be a non-negative integer of bytes, got {size!r}")


def file_key(filesystem: FileSystem, path: str) -> FileKey:
    """The key of `path`'s current version, from one `get_file_info` (size and mtime)."""
    from pyarrow import fs

    info = filesystem.get_file_info(path)
    if info.type == fs.FileType.NotFound:
        raise InputError(f"{path}: no such file")
    if info.type != fs.FileType.File:
        raise InputError(f"{path}: not a file")
    return FileKey(path=path, size=info.size, mtime_ns=info.mtime_ns)


def filesystem_id(filesystem: FileSystem) -> str:
    """A string naming the namespace `filesystem`'s paths live in: `local`, `s3:<region>@<endpoint>`, ..."""
    name = filesystem.type_name
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
