"""Every file of apache/parquet-testing data/: open it, and check our metadata against pyarrow's."""

from __future__ import annotations

import datetime as dt
import itertools
import math

import pyarrow.parquet as pq
import pytest
from writers import parquet_testing_dir

from layout.errors import ParquetError
from layout.parquet import ParquetFile

DATA = parquet_testing_dir() / "data"
FILES = sorted(p.name for p in DATA.glob("*.parquet")) if DATA.is_dir() else []
pytestmark = pytest.mark.skipif(
    not FILES, reason=f"parquet-testing data not found at {DATA} (set LAKESORT_PARQUET_TESTING)"
)

# Files we expect to refuse, and why. (This checkout of parquet-testing has no encrypted files; when
# present, encrypted-footer files must raise ParquetError saying "encrypted".)
EXPECTED_ERRORS: dict[str, str] = {}
# Files pyarrow itself cannot open: only our side is checked.
PYARROW_CANNOT_READ = {
    "incorrect_map_schema.parquet":
        "pyarrow rejects the schema (map keys not REQUIRED); the metadata is fine",
}


def _same(ours, theirs) -> bool:
    """Honest comparison: same value, or equal after converting both to the same representation."""
    if type(theirs).__name__ == "Timestamp":  # pandas.Timestamp (ns): compare epoch nanoseconds
        if not isinstance(ours, dt.datetime):
            return False
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC if ours.tzinfo else None)
        d = ours - epoch
        ns = ((d.days * 86400 + d.seconds) * 10**6 + d.microseconds) * 1000 + getattr(ours, "nanosecond", 0)
        return ns == theirs.value
    if isinstance(theirs, dt.datetime) and isinstance(ours, dt.datetime):
        return ours == theirs and (ours.tzinfo is None) == (theirs.tzinfo is None)
    if isinstance(theirs, float) and isinstance(ours, float):
        return ours == theirs or (math.isnan(ours) and math.isnan(theirs))
    return type(ours) is type(theirs) and ours == theirs


@pytest.mark.parametrize("name", FILES)
def test_open_and_compare(name: str) -> None:
    path = DATA / name
    if name in EXPECTED_ERRORS:
        with pytest.raises(ParquetError) as err:
            ParquetFile.open(path)
        assert str(path) in str(err.value)
        return
    pf = ParquetFile.open(path)
    assert pf.size == path.stat().st_size
    assert len(pf.columns) >= 1
    for rg in range(pf.num_row_groups):
        for col in pf.columns:
            pf.statistics(rg, col.index)
            _check_page_index(pf, rg, col)
            if pf.has_bloom_filter(rg, col.index):
                assert pf.bloom_filter(rg, col.index).num_bytes > 0
    if name in PYARROW_CANNOT_READ:
        return
    md = pq.ParquetFile(path).metadata
    assert md.num_rows == pf.num_rows
    assert md.num_row_groups == pf.num_row_groups
    assert md.num_columns == len(pf.columns)
    for i in range(md.num_row_groups):
        for j in range(md.num_columns):
            c = md.row_group(i).column(j)
            assert c.path_in_schema == pf.columns[j].name
            assert c.physical_type == pf.columns[j].type.physical_type.name
            assert c.has_column_index == pf.has_column_index(i, j)
            assert c.has_offset_index == pf.has_offset_index(i, j)
            s = c.statistics
            if s is None or not s.has_min_max:
                continue
            ours = pf.statistics(i, j)
            assert ours is not None, (name, c.path_in_schema)
            ct = pf.columns[j].type
            for mine, theirs in ((ours.min, s.min), (ours.max, s.max)):
                if isinstance(theirs, float) and math.isnan(theirs):
                    # The spec says a NaN bound must be ignored (TYPE_ORDER); we report it as unusable.
                    assert mine is None, (name, c.path_in_schema)
                elif isinstance(theirs, bytes) and not isinstance(mine, bytes):
                    # pyarrow gives raw bytes for FLOAT16 and UUID: compare our value's PLAIN encoding.
                    assert ct.plain_bytes(mine) == theirs, (name, c.path_in_schema, mine, theirs)
                else:
                    assert _same(mine, theirs), (name, c.path_in_schema, mine, theirs)
            if s.has_null_count:
                assert ours.null_count == s.null_count


def _check_page_index(pf: ParquetFile, rg: int, col) -> None:
    oi = pf.offset_index(rg, col.index)
    ci = pf.column_index(rg, col.index)
    rows = pf.row_groups[rg].num_rows
    if ci is not None:
        assert oi is not None, "a column index without an offset index"
        n = len(ci.null_pages)
        assert len(oi.page_locations) == n == len(ci.min_values) == len(ci.max_values)
        for i, null in enumerate(ci.null_pages):
            if null:
                assert ci.min_values[i] is None and ci.max_values[i] is None
        if ci.null_counts is not None:
            stats = pf.row_groups[rg].columns[col.index].meta_data.statistics
            if stats is not None and stats.null_count is not None:
                assert sum(ci.null_counts) == stats.null_count
    if oi is not None:
        firsts = [p.first_row_index for p in oi.page_locations]
        assert firsts and firsts[0] == 0
        assert all(a < b for a, b in itertools.pairwise(firsts))
        assert firsts[-1] < rows
        offsets = [p.offset for p in oi.page_locations]
        assert all(0 <= o < pf.size for o in offsets)
        if col.max_repetition_level == 0:
            counts = [b - a for a, b in zip(firsts, firsts[1:] + [rows])]
            assert sum(counts) == rows and all(c > 0 for c in counts)


def test_expected_error_files_exist() -> None:
    for name in list(EXPECTED_ERRORS) + list(PYARROW_CANNOT_READ):
        assert name in FILES, f"{name} is listed but not in {DATA}"
