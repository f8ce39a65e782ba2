"""Key-range slices of sorted runs (`layout.compaction.executor.merge_runs`), against a brute-force oracle:
every row's first key lies in exactly one slice's range (lo, hi], or the row is in the null keys' slice, and
that slice's reads hold the row's position; the slices' ranges are ordered and meet; whatever the page sizes
and row groups. (Each slice read by Spark, for every type it slices on:
tests/compaction/test_merge_slices_in_spark.py.)"""

from __future__ import annotations

import datetime as dt
import itertools

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout.compaction.executor.merge_runs import bytes_read, key_pages, mergeable_keys, plan_slices
from layout.compaction.plan import SortKeyModel

SCHEMA = pa.schema([("k", pa.int64()), ("s", pa.string()), ("d", pa.date32()), ("v", pa.float64())])


def _write(path, rows: list[tuple], *, page_rows: int, group_rows: int) -> str:
    table = pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA)
    pq.write_table(table, path, write_page_index=True, max_rows_per_page=page_rows,
                   write_batch_size=page_rows, row_group_size=group_rows)
    return str(path)


def _order_key(value):
    """`ColumnType.order_key` of a value of SCHEMA's columns: ints as they are,
    strings as UTF-8, dates in days."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, str):
        return value.encode()
    return (value - dt.date(1970, 1, 1)).days


def _covered(paths: list[str], first: str, keys: list[str], count: int) -> list:
    """The slices of `paths`, checked against every row of every file (the oracle)."""
    files = [key_pages(p, None, keys) for p in paths]
    assert all(f.unsorted is None for f in files), [f.unsorted for f in files]
    slices = plan_slices(files, count)
    assert (bytes_read(files, slices) > 0) == any(f.rows for f in files)
    valued = [s for s in slices if not s.nulls]
    assert len(valued) <= count and sum(s.nulls for s in slices) <= 1
    for a, b in itertools.pairwise(valued):  # ordered ranges that meet: (lo, c], (c, hi]
        assert a.hi is not None and a.hi == b.lo
    assert not valued or (valued[0].lo is None and valued[-1].hi is None)
    for i, path in enumerate(paths):
        pf = pq.ParquetFile(path)
        for rg in range(pf.num_row_groups):
            for row, value in enumerate(pf.read_row_group(rg, columns=[first]).column(0).to_pylist()):
                key = _order_key(value)
                holding = [s for s in slices if (s.nulls if key is None else not s.nulls and (
                    s.lo is None or key > s.lo) and (s.hi is None or key <= s.hi))]
                assert len(holding) == 1, (path, rg, row, value)
                assert any(r.file == i and r.row_group == rg and r.start <= row < r.stop
                           for r in holding[0].reads), \
                    f"the slice of {value!r} does not read row {row} of row group {rg} of {path}"
    return slices


runs = st.lists(
    st.lists(st.tuples(st.one_of(st.none(), st.integers(-50, 50)), st.text("abc", max_size=3)), max_size=60),
    min_size=1, max_size=5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=runs, count=st.integers(1, 7), page_rows=st.integers(1, 9), group_rows=st.integers(5, 40))
def test_every_row_is_in_one_slice_that_reads_it(tmp_path_factory, runs, count,
                                                 page_rows, group_rows) -> None:
    directory = tmp_path_factory.mktemp("runs")
    paths = []
    for i, run in enumerate(runs):
        rows = sorted(((k, s, dt.date(2024, 1, 1), float(i)) for k, s in run),
                      key=lambda r: (r[0] is not None, r[0] or 0, r[1]))  # nulls first, as Spark sorts them
        paths.append(_write(directory / f"run{i}.parquet", rows, page_rows=page_rows, group_rows=group_rows))
    _covered(paths, "k", ["k", "s"], count)


def test_strings_and_dates_slice_on_their_order(tmp_path) -> None:
    rows = [(i, f"name{i:04d}é", dt.date(2020, 1, 1) + dt.timedelta(days=i // 3), 0.5) for i in range(500)]
    by_s = sorted(rows, key=lambda r: r[1])
    paths = [_write(tmp_path / "a.parquet", by_s[::2], page_rows=16, group_rows=100),
             _write(tmp_path / "b.parquet", by_s[1::2], page_rows=16, group_rows=100)]
    assert len(_covered(paths, "s", ["s"], 4)) == 4
    by_d = sorted(rows, key=lambda r: (r[2], r[0]))
    paths = [_write(tmp_path / "c.parquet", by_d[:300], page_rows=16, group_rows=100),
             _write(tmp_path / "d.parquet", by_d[300:], page_rows=16, group_rows=100)]
    assert len(_covered(paths, "d", ["d", "k"], 3)) == 3


def test_a_slice_reads_only_the_pages_its_keys_are_in(tmp_path) -> None:
    rows = [(i, "x", dt.date(2024, 1, 1), 0.0) for i in range(10_000)]
    paths = [_write(tmp_path / "a.parquet", rows[::2], page_rows=100, group_rows=1_000),
             _write(tmp_path / "b.parquet", rows[1::2], page_rows=100, group_rows=1_000)]
    files = [key_pages(p, None, ["k"]) for p in paths]
    slices = plan_slices(files, 10)
    assert len(slices) == 10
    whole = sum(sum(f.group_bytes) for f in files)
    # Pages, not row groups: a page either side of each boundary at most.
    assert bytes_read(files, slices) <= 1.1 * whole
    for piece in slices:
        assert piece.rows <= 1_000 + 2 * 100  # a tenth of the rows, and a page either side per file


def test_files_not_sorted_by_the_first_key_are_named(tmp_path) -> None:
    rows = [(i % 100, "x", dt.date(2024, 1, 1), 0.0) for i in range(1_000)]
    path = _write(tmp_path / "a.parquet", rows, page_rows=50, group_rows=1_000)
    found = key_pages(path, None, ["k"])
    assert found.unsorted and "ASCENDING" in found.unsorted
    assert "no column" in key_pages(path, None, ["k", "missing"]).unsorted
    assert "a float" in key_pages(path, None, ["v"]).unsorted
    # Sorted by the first key, not by the second, with nulls there: sliceable
    # (each slice is sorted by every key).
    second = [(i // 10, None if i % 7 == 0 else f"{9 - i % 10}", dt.date(2024, 1, 1), 0.0)
              for i in range(1_000)]
    path = _write(tmp_path / "b.parquet", second, page_rows=50, group_rows=1_000)
    assert key_pages(path, None, ["k", "s"]).unsorted is None


def test_which_keys_merge() -> None:
    asc = SortKeyModel(column="k")
    desc = SortKeyModel(column="k", direction="desc")
    assert mergeable_keys([asc], [pa.int64()]) is None
    assert mergeable_keys([asc, asc], [pa.timestamp("us", tz="UTC"), pa.string()]) is None
    # later keys: the sort in each slice
    assert mergeable_keys([asc, desc], [pa.date32(), pa.float64()]) is None
    assert "descending" in mergeable_keys([desc], [pa.int64()])
    assert "double" in mergeable_keys([asc], [pa.float64()])
    assert mergeable_keys([asc], [pa.decimal128(10, 2)]) is not None
    assert "micro" in mergeable_keys([asc], [pa.timestamp("ns")])
