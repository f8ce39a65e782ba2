"""Merging sorted runs by key-range slices (`layout.compaction.executor.merge_runs`), against a brute-force
oracle: the slices' rows, in slice order, are the runs' rows sorted; every slice is sorted by the keys and
holds only its own key range; no row is read twice or lost, whatever the page sizes and row groups."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout.compaction.executor import merge_runs
from layout.compaction.executor.merge_runs import (
    bytes_read,
    key_pages,
    merge_slice,
    mergeable_keys,
    plan_slices,
)
from layout.compaction.plan import SortKeyModel
from layout.errors import InputError

SCHEMA = pa.schema([("k", pa.int64()), ("s", pa.string()), ("d", pa.date32()), ("v", pa.float64())])


def _write(path, rows: list[tuple], *, page_rows: int, group_rows: int) -> str:
    table = pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA)
    pq.write_table(table, path, write_page_index=True, max_rows_per_page=page_rows,
                   write_batch_size=page_rows, row_group_size=group_rows)
    return str(path)


def _merged(paths: list[str], keys: list[str], count: int) -> list[list[tuple]]:
    files = [key_pages(p, None, keys) for p in paths]
    assert all(f.unsorted is None for f in files), [f.unsorted for f in files]
    slices = plan_slices(files, count)
    assert (bytes_read(files, slices) > 0) == any(f.rows for f in files)
    out = []
    for piece in slices:
        batches = list(merge_slice(piece, paths, SCHEMA.names, keys, SCHEMA))
        table = pa.Table.from_batches(batches, schema=SCHEMA)
        out.append([tuple(r.values()) for r in table.to_pylist()])
    return out


def _order(row: tuple, keys: list[str]) -> tuple:
    return tuple((row[SCHEMA.names.index(k)] is None, row[SCHEMA.names.index(k)]) for k in keys)


runs = st.lists(
    st.lists(st.tuples(st.one_of(st.none(), st.integers(-50, 50)), st.text("abc", max_size=3)), max_size=60),
    min_size=1, max_size=5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=runs, count=st.integers(1, 7), page_rows=st.integers(1, 9), group_rows=st.integers(5, 40))
def test_slices_merge_to_the_sorted_rows(tmp_path_factory, runs, count, page_rows, group_rows) -> None:
    directory = tmp_path_factory.mktemp("runs")
    keys = ["k", "s"]
    paths = []
    everything = []
    for i, run in enumerate(runs):
        rows = [(k, s, dt.date(2024, 1, 1), float(i)) for k, s in run]
        rows.sort(key=lambda r: _order(r, keys))
        everything += rows
        paths.append(_write(directory / f"run{i}.parquet", rows, page_rows=page_rows, group_rows=group_rows))
    slices = _merged(paths, keys, count)
    nonnull = [s for s in slices if s and s[0][0] is not None]
    for rows in slices:
        assert rows == sorted(rows, key=lambda r: _order(r, keys))
        assert len({r[0] is None for r in rows}) <= 1  # null first keys have a slice of their own
    flat = [r for rows in nonnull for r in rows]
    assert [r[0] for r in flat] == sorted(r[0] for r in flat)  # slices hold disjoint, ordered key ranges
    assert sorted(map(repr, (r for rows in slices for r in rows))) == sorted(map(repr, everything))
    assert len(nonnull) <= count


def test_strings_and_dates_slice_on_their_order(tmp_path) -> None:
    rows = [(i, f"name{i:04d}", dt.date(2020, 1, 1) + dt.timedelta(days=i // 3), 0.5) for i in range(500)]
    by_s = sorted(rows, key=lambda r: r[1])
    paths = [_write(tmp_path / "a.parquet", by_s[::2], page_rows=16, group_rows=100),
             _write(tmp_path / "b.parquet", by_s[1::2], page_rows=16, group_rows=100)]
    slices = _merged(paths, ["s"], 4)
    assert len(slices) == 4 and [r for s in slices for r in s] == by_s
    by_d = sorted(rows, key=lambda r: (r[2], r[0]))
    paths = [_write(tmp_path / "c.parquet", by_d[:300], page_rows=16, group_rows=100),
             _write(tmp_path / "d.parquet", by_d[300:], page_rows=16, group_rows=100)]
    slices = _merged(paths, ["d", "k"], 3)
    assert [r for s in slices for r in s] == by_d


def test_a_slice_reads_only_the_row_groups_its_keys_are_in(tmp_path) -> None:
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


def test_unsorted_files_are_named_or_caught(tmp_path) -> None:
    rows = [(i % 100, "x", dt.date(2024, 1, 1), 0.0) for i in range(1_000)]
    path = _write(tmp_path / "a.parquet", rows, page_rows=50, group_rows=1_000)
    found = key_pages(path, None, ["k"])
    assert found.unsorted and "ASCENDING" in found.unsorted
    # Sorted by the first key, not by the second: the loser tree finds it while merging.
    second = [(i // 10, f"{9 - i % 10}", dt.date(2024, 1, 1), 0.0) for i in range(1_000)]
    path = _write(tmp_path / "b.parquet", second, page_rows=50, group_rows=1_000)
    files = [key_pages(path, None, ["k", "s"])]
    assert files[0].unsorted is None
    with pytest.raises(InputError, match="sorted"):
        for piece in plan_slices(files, 2):
            list(merge_slice(piece, [path], SCHEMA.names, ["k", "s"], SCHEMA))
    nulls = [(i, None if i % 2 else "x", dt.date(2024, 1, 1), 0.0) for i in range(100)]
    path = _write(tmp_path / "c.parquet", nulls, page_rows=50, group_rows=1_000)
    assert "nulls" in key_pages(path, None, ["k", "s"]).unsorted


def test_which_keys_merge() -> None:
    asc = SortKeyModel(column="k")
    assert mergeable_keys([asc], [pa.int64()]) is None
    assert mergeable_keys([asc, asc], [pa.timestamp("us", tz="UTC"), pa.string()]) is None
    assert "descending" in mergeable_keys([SortKeyModel(column="k", direction="desc")], [pa.int64()])
    assert "float" in mergeable_keys([asc], [pa.float64()]) or "double" in mergeable_keys([asc], [pa.float64()])
    assert mergeable_keys([asc], [pa.decimal128(10, 2)]) is not None


def test_a_run_is_read_in_steps_of_bounded_rows(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(merge_runs, "STEP_ROWS", 37)  # steps that cut pages (16 rows) in the middle
    rows = [(i, f"n{i:05d}", dt.date(2024, 1, 1), 0.5) for i in range(1_000)]
    paths = [_write(tmp_path / "a.parquet", rows[::3], page_rows=16, group_rows=128),
             _write(tmp_path / "b.parquet", [r for i, r in enumerate(rows) if i % 3], page_rows=16, group_rows=128)]
    slices = _merged(paths, ["k"], 3)
    assert [r for s in slices for r in s] == rows
