"""Rows of a row group read page by page (`layout.parquet.excerpt`) are exactly pyarrow's read of the whole
row group, sliced: on files of other writers (parquet-testing's, with page indexes: tiny pages, plain and
dictionary encodings) and on pyarrow-written files of any page and row group sizes (hypothesis)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout.errors import ParquetError
from layout.parquet import ParquetFile
from layout.parquet.excerpt import read_rows


def _check(path, rg: int, start: int, stop: int, columns: list[str] | None = None) -> int:
    pf = ParquetFile.open(str(path))
    flat = [c.index for c in pf.columns
            if not c.max_repetition_level and (columns is None or c.name in columns)]
    pf.load_page_indexes(flat, [rg])
    with open(path, "rb") as f:
        def read(offset: int, length: int) -> bytes:
            f.seek(offset)
            return f.read(length)

        got = read_rows(pf, read, rg, flat, start, stop)
    names = [pf.columns[i].name for i in flat]
    whole = pq.ParquetFile(path).read_row_group(rg, columns=names).slice(start, stop - start)
    for name in names:
        assert got.column(name).to_pylist() == whole.column(name).to_pylist(), f"{path}: column {name}"
    return got.num_rows


@pytest.mark.parametrize("name", ["alltypes_tiny_pages.parquet", "alltypes_tiny_pages_plain.parquet",
                                  "data_index_bloom_encoding_stats.parquet"])
def test_files_of_other_writers(parquet_testing, name) -> None:
    path = parquet_testing / "data" / name
    rows = pq.ParquetFile(path).metadata.row_group(0).num_rows
    if ParquetFile.open(str(path)).offset_index(0, 0) is None:
        pytest.skip(f"{name} has no offset index")
    for start, stop in [(0, rows), (0, 1), (rows // 3, rows // 3 + 7), (rows - 1, rows), (rows // 2, rows)]:
        assert _check(path, 0, start, stop) == stop - start


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 3_000), page_rows=st.integers(1, 400), group_rows=st.integers(1, 2_000),
       dictionary=st.booleans(), data=st.data())
def test_any_rows_of_any_pages(tmp_path_factory, n, page_rows, group_rows, dictionary, data) -> None:
    table = pa.table({
        "i": pa.array(range(n), pa.int64()),
        "s": pa.array([None if i % 7 == 0 else f"v{i % 50}" for i in range(n)]),
        "d": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i % 300) for i in range(n)]),
        "x": pa.array([i / 3 for i in range(n)]),
    })
    path = tmp_path_factory.mktemp("excerpt") / "f.parquet"
    pq.write_table(table, path, write_page_index=True, max_rows_per_page=page_rows, row_group_size=group_rows,
                   use_dictionary=dictionary, write_batch_size=page_rows)
    meta = pq.ParquetFile(path).metadata
    rg = data.draw(st.integers(0, meta.num_row_groups - 1))
    rows = meta.row_group(rg).num_rows
    start = data.draw(st.integers(0, rows - 1))
    stop = data.draw(st.integers(start + 1, rows))
    assert _check(path, rg, start, stop) == stop - start


def test_nested_columns_are_refused(tmp_path) -> None:
    path = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"l": [[1, 2], [3]]}), path, write_page_index=True)
    pf = ParquetFile.open(str(path))
    pf.load_page_indexes([0])
    with pytest.raises(ParquetError, match="nested"):
        read_rows(pf, lambda o, n: path.read_bytes()[o:o + n], 0, [0], 0, 1)
