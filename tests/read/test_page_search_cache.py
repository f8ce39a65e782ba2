"""Issue #14: a column chunk's page structures are built once per file version and kept in the metadata cache.

The search structure over a column index (`PageSearchIndex`: bounds, strategy, non-null pages) and the
pages of a chunk (`ChunkPages`: first rows, running page counts and bytes) cost O(pages) to build. A cold
plan builds them and the cache keeps them under the file's `FileKey`; a warm plan looks them up, so it
does O(log pages) work per searched chunk: no build, O(log n) key comparisons, O(log n) touches of the
page index. A rewritten file (same path, new content) gets fresh structures, never the old ones, and the
structures count in the cache's byte budget.
"""

from __future__ import annotations

import functools
import math
import os
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyarrow import fs

from layout.parquet import ParquetFile
from layout.parquet import format as fmt
from layout.read import chunks as chunk_structures
from layout.read.cache import CacheConfig, FileKey, MetadataCache, file_key, filesystem_id
from layout.read.chunks import ChunkPages
from layout.read.pages import Interval, LazyKeys, PageBounds, build_search_index, non_null_pages
from layout.read.plan import CACHE_ITEM_OVERHEAD, DECODED_SIZE_FACTOR, plan
from layout.read.scan import read_table
from layout.read.selection import RowSelection

ROWS_PER_PAGE = 8
N = 40_000  # 5,000 pages per column chunk


def write_sorted(path, n: int = N, start: int = 0) -> None:
    """One row group of a sorted int64 column `k` (start, start + 1, ...) and `v`, 8 rows per page."""
    keys = pa.array(range(start, start + n), pa.int64())
    pq.write_table(pa.table({"k": keys, "v": pc.multiply(keys, 2)}), path, write_page_index=True,
                   data_page_size=1, write_batch_size=ROWS_PER_PAGE, use_dictionary=False,
                   compression="none", row_group_size=n)


def pages_of(path) -> int:
    return len(ParquetFile.open(path).offset_index(0, "k").page_locations)


def log2_steps(n: int) -> int:
    """Steps of one binary search over n entries."""
    return math.ceil(math.log2(n + 1))


@pytest.fixture(scope="module")
def sorted_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("search") / "sorted.parquet"
    write_sorted(path)
    assert pages_of(path) == N // ROWS_PER_PAGE
    return path


@pytest.fixture
def builds(monkeypatch):
    """Counts calls of the two structure builders by (builder, row group, column)."""
    calls: Counter = Counter()
    for name in ("chunk_search_index", "chunk_pages"):
        real = getattr(chunk_structures, name)

        def counted(pf, rg, col, _real=real, _name=name):
            calls[_name, rg, col] += 1
            return _real(pf, rg, col)

        monkeypatch.setattr(chunk_structures, name, counted)
    return calls


# -- a warm plan builds nothing -----------------------------------------------------------------------


def test_a_warm_plan_builds_no_page_structure(sorted_file, builds):
    cache = MetadataCache()
    cold = plan(sorted_file, "k = 12345", cache=cache)
    assert builds == {("chunk_search_index", 0, 0): 1, ("chunk_pages", 0, 0): 1, ("chunk_pages", 0, 1): 1}
    for _ in range(3):
        warm = plan(sorted_file, "k = 23456", cache=cache)
        assert read_table(warm).column("k").to_pylist() == [23456]
    assert sum(builds.values()) == 3, f"warm plans built page structures again: {builds}"
    assert cold.counts.pages_selected == 2 and warm.counts.pages_selected == 2  # one page of k, one of v
    # The wrapper does see builds: without a cache, every plan pays them.
    plan(sorted_file, "k = 12345", cache=False)
    plan(sorted_file, "k = 12345", cache=False)
    assert builds["chunk_search_index", 0, 0] == 3


def test_a_warm_plan_equals_a_cold_one(sorted_file):
    cache = MetadataCache()
    for where in ("k = 12345", "k BETWEEN 100 AND 9000", "k IN (5, 39999)", "k <> 7", "v < 80", "k > 39990"):
        cold = plan(sorted_file, where, cache=cache)
        warm = plan(sorted_file, where, cache=cache)
        uncached = plan(sorted_file, where, cache=False)
        assert warm.files == cold.files == uncached.files, where
        assert warm.counts == cold.counts == uncached.counts, where
        assert warm.page_comparisons == cold.page_comparisons == uncached.page_comparisons, where


class CountingKey:
    """An order key that counts the comparisons made with it."""

    __slots__ = ("key",)
    comparisons = 0

    def __init__(self, key):
        self.key = key

    def _other(self, other):
        CountingKey.comparisons += 1
        return other.key if isinstance(other, CountingKey) else other

    def __lt__(self, other):
        return self.key < self._other(other)

    def __le__(self, other):
        return self.key <= self._other(other)

    def __gt__(self, other):
        return self.key > self._other(other)

    def __ge__(self, other):
        return self.key >= self._other(other)

    def __eq__(self, other):
        return self.key == self._other(other)

    def __ne__(self, other):
        return self.key != self._other(other)

    def __hash__(self):
        return hash(self.key)


class CountingList(list):
    """A page-index list that counts element reads, by index or by iteration."""

    reads = 0

    def __getitem__(self, i):
        CountingList.reads += 1
        return super().__getitem__(i)

    def __iter__(self):
        for item in super().__iter__():
            CountingList.reads += 1
            yield item


def test_a_warm_lookup_is_log_n_comparisons_and_page_index_reads(tmp_path, monkeypatch):
    path = tmp_path / "sorted.parquet"
    write_sorted(path)
    n = pages_of(path)
    assert n >= 1000

    real_key = chunk_structures._order_key
    decodes = Counter()

    def counting_key(ct, raw):
        decodes["keys"] += 1
        key = real_key(ct, raw)
        return None if key is None else CountingKey(key)

    monkeypatch.setattr(chunk_structures, "_order_key", counting_key)
    real_decode = ParquetFile._decode_page_index

    def counting_index(self, cls, data, column, rg, what):
        index = real_decode(self, cls, data, column, rg, what)
        if isinstance(index, fmt.ColumnIndex):
            return index._replace(null_pages=CountingList(index.null_pages),
                                  min_values=CountingList(index.min_values),
                                  max_values=CountingList(index.max_values),
                                  null_counts=CountingList(index.null_counts))
        return index._replace(page_locations=CountingList(index.page_locations))

    monkeypatch.setattr(ParquetFile, "_decode_page_index", counting_index)

    cache = MetadataCache()
    cold = plan(path, "k = 1234", columns=["k"], cache=cache)
    assert read_table(cold).column("k").to_pylist() == [1234]
    assert CountingList.reads >= 2 * n, "the cold plan reads the page index through the counting lists"

    # (predicate, page searches it makes, matching keys): wide ones select most pages, still O(log n).
    cases = [
        ("k = 7", 1, [7]), ("k = 20000", 1, [20_000]), ("k = 39999", 1, [39_999]),
        ("k > 30000", 1, range(30_001, N)), ("k BETWEEN 100 AND 35000", 2, range(100, 35_001)),
        ("k < 5 OR k >= 39990", 2, [*range(5), *range(39_990, N)]),
    ]
    steps = log2_steps(n)
    for where, searches, expected in cases:
        CountingKey.comparisons = CountingList.reads = 0
        decodes.clear()
        warm = plan(path, where, columns=["k"], cache=cache)
        # A search is two binary searches (first page reaching the interval, first page past it); a step
        # compares the key with an interval end at most twice (`<`, then `==` for an exclusive end).
        assert warm.page_comparisons <= 2 * steps * searches, where
        assert CountingKey.comparisons <= 4 * steps * searches, (where, CountingKey.comparisons)
        assert decodes["keys"] <= 2 * steps * searches, (where, decodes)
        # A decode reads a bound and its null flag; nothing else of the page index is read: no pass over
        # the null flags, the first rows or the page sizes, however many pages match.
        assert CountingList.reads <= 2 * decodes["keys"] + 2, (where, CountingList.reads)
        assert read_table(warm).column("k").to_pylist() == list(expected), where


# -- never stale ----------------------------------------------------------------------------------------


def test_a_rewritten_file_gets_fresh_structures(tmp_path, builds):
    path = tmp_path / "t.parquet"
    write_sorted(path, start=0)
    cache = MetadataCache()
    local = fs.LocalFileSystem()
    fs_id = filesystem_id(local)
    value = N // 2 + 5  # in both versions: row 20005 of the first, row 5 of the second
    first = plan(path, f"k = {value}", columns=["k"], cache=cache)
    assert read_table(first).column("k").to_pylist() == [value]
    old_key = file_key(local, str(path))
    old_index = cache.get(fs_id, old_key, ("page_search", 0, 0))
    assert old_index is not None and builds["chunk_search_index", 0, 0] == 1

    write_sorted(path, start=N // 2)  # same path, same size, new content
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    new_key = file_key(local, str(path))
    assert new_key != old_key and new_key.size == old_key.size

    again = plan(path, f"k = {value}", columns=["k"], cache=cache)
    assert builds["chunk_search_index", 0, 0] == 2, "the rewritten file must get a new search structure"
    new_index = cache.get(fs_id, new_key, ("page_search", 0, 0))
    assert new_index is not None and new_index is not old_index
    assert cache.get(fs_id, old_key, ("page_search", 0, 0)) is None, "the old version's items are dropped"
    rows = again.files[0].row_groups[0].selection
    assert 5 in rows and (N // 2 + 5) not in rows, f"a stale structure would select row {N // 2 + 5}: {rows}"
    assert read_table(again).column("k").to_pylist() == [value]


# -- the byte budget --------------------------------------------------------------------------------------


def _reference_size(values) -> int:
    """A plain deep size: the container and every element that is not a shared singleton or small int."""
    total = sys.getsizeof(values)
    for v in values:
        if v is None or isinstance(v, bool) or (type(v) is int and -5 <= v <= 256):
            continue
        total += sys.getsizeof(v)
    return total


def test_structures_are_accounted_in_the_byte_budget(sorted_file):
    cache = MetadataCache()
    plan(sorted_file, "k = 12345", columns=["k"], cache=cache)
    local = fs.LocalFileSystem()
    fs_id, key = filesystem_id(local), file_key(local, str(sorted_file))
    facts = cache.get(fs_id, key, "parquet")
    index = cache.get(fs_id, key, ("page_search", 0, 0))
    pages = cache.get(fs_id, key, ("chunk_pages", 0, 0))
    assert index is not None and pages is not None
    assert cache.stats().entries == 3
    assert cache.stats().bytes == (facts.accounted * DECODED_SIZE_FACTOR + 2 * CACHE_ITEM_OVERHEAD
                                   + index.nbytes + pages.nbytes)

    # The estimate covers what the structure keeps alive (the column index's lists too), not much more.
    ci = facts.pf.raw_column_index(0, 0)
    alive = (sum(_reference_size(v) for v in (ci.null_pages, ci.min_values, ci.max_values, ci.null_counts))
             + sys.getsizeof(index.pages))
    assert alive <= index.nbytes <= 1.2 * alive + 1024
    assert pages.nbytes >= sum(sys.getsizeof(a) for a in (pages.first_rows, pages.filled_before,
                                                            pages.bytes_before))


def test_a_structure_over_the_entry_bound_is_not_kept(sorted_file, builds):
    probe = MetadataCache()
    plan(sorted_file, "k = 1", columns=["k"], cache=probe)
    local = fs.LocalFileSystem()
    index = probe.get(filesystem_id(local), file_key(local, str(sorted_file)), ("page_search", 0, 0))
    builds.clear()
    # Room for the footer and the chunk's pages, not for the search structure.
    config = CacheConfig(max_total_bytes=index.nbytes, max_entry_bytes=index.nbytes // 2)
    cache = MetadataCache(config)
    for value in (1, 2):
        p = plan(sorted_file, f"k = {value}", columns=["k"], cache=cache)
        assert read_table(p).column("k").to_pylist() == [value]
        assert cache.stats().bytes <= config.max_total_bytes
    assert cache.stats().rejected >= 2
    assert builds["chunk_search_index", 0, 0] == 2, "not kept, so built again: the bound wins over speed"


def test_the_byte_bound_holds_across_files(tmp_path):
    paths = [tmp_path / f"part-{i}.parquet" for i in range(3)]
    for i, path in enumerate(paths):
        write_sorted(path, n=8_000, start=i * 8_000)
    sizing = MetadataCache()
    plan(paths[0], "k = 1", columns=["k"], cache=sizing)
    one_file = sizing.stats().bytes
    config = CacheConfig(max_total_bytes=int(one_file * 1.5), max_entry_bytes=one_file)
    cache = MetadataCache(config)
    for round_ in range(2):
        for i, path in enumerate(paths):
            value = i * 8_000 + 17 + round_
            assert read_table(plan(path, f"k = {value}", columns=["k"], cache=cache)).column(
                "k"
            ).to_pylist() == [value]
            assert cache.stats().bytes <= config.max_total_bytes
    assert cache.stats().evictions > 0


def test_a_value_too_big_to_keep_replaces_the_old_one():
    cache = MetadataCache(CacheConfig(max_total_bytes=1000, max_entry_bytes=100))
    key = FileKey("a", 1)
    assert cache.put("local", key, "parquet", "small", 50)
    assert not cache.put("local", key, "parquet", "grown", 200)
    assert cache.get("local", key, "parquet") is None, "the old value must not stay, under its old size"
    stats = cache.stats()
    assert (stats.entries, stats.bytes, stats.rejected, stats.evictions) == (0, 0, 1, 1)


def test_a_footer_entry_grown_past_the_entry_bound_is_dropped(sorted_file):
    local = fs.LocalFileSystem()
    fs_id, key = filesystem_id(local), file_key(local, str(sorted_file))
    footer = ParquetFile.open(sorted_file).bytes_read * DECODED_SIZE_FACTOR
    # The footer fits; the footer plus the page index the plan reads does not.
    config = CacheConfig(max_total_bytes=1 << 30, max_entry_bytes=footer * 2)
    cache = MetadataCache(config)
    p = plan(sorted_file, "k = 5", columns=["k"], cache=cache)
    assert read_table(p).column("k").to_pylist() == [5]
    assert cache.get(fs_id, key, "parquet") is None, (
        "kept under its footer-only size, it would hold the index")
    assert cache.stats().bytes <= config.max_total_bytes


# -- shared by threads ------------------------------------------------------------------------------------


def test_concurrent_plans_share_one_structure(sorted_file, builds):
    cache = MetadataCache()
    values = [17 + 997 * i for i in range(32)]
    with ThreadPoolExecutor(8) as pool:
        plans = list(pool.map(lambda v: plan(sorted_file, f"k = {v}", columns=["k"], cache=cache), values))
    assert builds["chunk_search_index", 0, 0] == 1
    for value, p in zip(values, plans, strict=True):
        # Each plan counts its own comparisons: the shared structure holds no counter.
        assert 0 < p.page_comparisons <= 2 * log2_steps(N // ROWS_PER_PAGE)
        assert p.counts.pages_selected == 1
        assert read_table(p).column("k").to_pylist() == [value]


# -- ChunkPages answers what RowSelection's O(pages) methods answer --------------------------------------


@st.composite
def chunks(draw):
    num_rows = draw(st.integers(0, 60))
    n_pages = draw(st.integers(1, 12)) if num_rows else 1
    cuts = sorted(draw(st.lists(st.integers(0, num_rows), min_size=n_pages - 1, max_size=n_pages - 1)))
    first_rows = [0, *cuts]  # repeated cuts: pages without rows
    sizes = draw(st.lists(st.integers(1, 1000), min_size=n_pages, max_size=n_pages))
    dictionary = draw(st.sampled_from([0, 77]))
    mask = draw(st.lists(st.booleans(), min_size=num_rows, max_size=num_rows))
    pages = sorted(draw(st.sets(st.integers(0, n_pages - 1))))
    return num_rows, first_rows, sizes, dictionary, RowSelection.from_mask(mask), pages


@settings(max_examples=400, deadline=None)
@given(chunks())
def test_chunk_pages_agree_with_row_selection(chunk):
    num_rows, first_rows, sizes, dictionary, selection, pages = chunk
    built = ChunkPages.build(num_rows, first_rows, sizes, dictionary)
    chosen = selection.scan_ranges(first_rows, num_rows)
    assert built.fetched(selection) == (len(chosen), sum(sizes[i] for i in chosen) + dictionary)
    assert built.rows(pages) == RowSelection.from_pages(first_rows, num_rows, pages)
    assert built.rows(list(reversed(pages))) == RowSelection.from_pages(first_rows, num_rows, pages)
    if pages:  # a run of consecutive pages, as a range: O(1)
        run = range(pages[0], pages[-1] + 1)
        assert built.rows(run) == RowSelection.from_pages(first_rows, num_rows, list(run))
    assert built.rows(range(0)) == RowSelection.none()


def test_chunk_pages_check_the_first_rows_once():
    with pytest.raises(Exception, match="first page must start at row 0"):
        ChunkPages.build(10, [1, 5], [10, 10])
    with pytest.raises(Exception, match="must not decrease"):
        ChunkPages.build(10, [0, 5, 4], [10, 10, 10])


# -- the search structure ---------------------------------------------------------------------------------


def test_ordered_searches_return_runs_without_listing_them():
    n = 100_000
    bounds = PageBounds([False] * n, list(range(0, 10 * n, 10)), list(range(9, 10 * n, 10)),
                        [0] * n, exact=True)
    index = build_search_index("ASCENDING", bounds)
    search = index.search()
    assert search.between_pages(Interval(55, True, None, True)) == range(5, n)  # x >= 55: O(1), not n - 5
    assert search.between(Interval(55, True, None, True)) == list(range(5, n))
    assert search.not_null_pages() == range(n)
    # Pages to rows for such a run: two first rows read, not one per page.
    first_rows = CountingList(range(0, 8 * n, 8))
    chunk = ChunkPages(8 * n, first_rows, [], [], 0)
    CountingList.reads = 0
    assert chunk.rows(range(5, n)) == RowSelection(((40, 8 * n),))
    assert chunk.rows(range(5, 7)) == RowSelection(((40, 56),))
    assert CountingList.reads == 3
    # Null pages first or last keep the non-null pages contiguous: still a range.
    assert non_null_pages([True, False, False, True]) == range(1, 3)
    assert list(non_null_pages([False, True, False])) == [0, 2]


def test_searches_share_the_structure_but_not_their_state():
    raw = [i.to_bytes(8, "little", signed=True) for i in range(0, 10_000, 10)]
    nulls = [False] * len(raw)
    decode = functools.partial(int.from_bytes, byteorder="little", signed=True)
    bounds = PageBounds(nulls, LazyKeys(decode, raw, nulls), LazyKeys(decode, list(raw), nulls),
                        [0] * len(raw), exact=True)
    index = build_search_index("ASCENDING", bounds)
    first, second = index.search(), index.search()
    assert first.between(Interval.point(500)) == [50]
    assert second.comparisons == 0 and first.comparisons > 0
    # The keys a search decodes live in its own memo: the shared (cached, accounted) structure never grows.
    assert not index.bounds.mins._memo and not index.bounds.maxs._memo
    assert first.bounds.mins._memo
