"""Malformed input: every failure is a ParquetError that names the file; nothing hangs or over-reads."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from writers import parquet_testing_dir

from layout.errors import ParquetError
from layout.parquet import ParquetFile, thrift
from layout.parquet import format as fmt

BAD = parquet_testing_dir() / "bad_data"
BAD_FILES = sorted(p.name for p in BAD.glob("*.parquet")) if BAD.is_dir() else []

# The footer of these is corrupt: opening must fail.
FOOTER_ERRORS = {
    "PARQUET-1481.parquet": "invalid physical type",  # schema Thrift value corrupted (type -7)
}
# These are bad in their *data pages* (which this package never decodes); their footers and page indexes
# are valid, so they are read correctly:
#   ARROW-GH-41317 (a ColumnMetaData list<Encoding> written with i16 elements: decoded like C++ does),
#   ARROW-GH-41321 (rep/def levels fewer than num_values), ARROW-GH-43605 (RLE dictionary indices with
#   bit width 0), ARROW-GH-45185 (repetition levels starting at 1), ARROW-GH-47662 (nulls in a required
#   column), ARROW-RS-GH-6229-DICTHEADER (negative dictionary num_values),
#   ARROW-RS-GH-6229-LEVELS (too few repetition levels), ARROW-RS-GH-11261-FLBA-DICT (dictionary values
#   with BYTE_ARRAY encoding in a FLBA column).
READ_CORRECTLY = {
    "ARROW-GH-41317.parquet",
    "ARROW-GH-41321.parquet",
    "ARROW-GH-43605.parquet",
    "ARROW-GH-45185.parquet",
    "ARROW-GH-47662.parquet",
    "ARROW-RS-GH-6229-DICTHEADER.parquet",
    "ARROW-RS-GH-6229-LEVELS.parquet",
    "ARROW-RS-GH-11261-FLBA-DICT.parquet",
}


@pytest.mark.skipif(
    not BAD_FILES, reason=f"parquet-testing bad_data not found at {BAD} (set LAKESORT_PARQUET_TESTING)"
)
@pytest.mark.parametrize("name", BAD_FILES)
def test_bad_data_file(name: str) -> None:
    path = BAD / name
    assert name in FOOTER_ERRORS or name in READ_CORRECTLY, f"decide how {name} should be handled"
    if name in FOOTER_ERRORS:
        with pytest.raises(ParquetError) as err:
            ParquetFile.open(path)
        assert str(path) in str(err.value) and FOOTER_ERRORS[name] in str(err.value)
        return
    pf = ParquetFile.open(path)
    md = pq.ParquetFile(path).metadata
    assert (pf.num_rows, pf.num_row_groups, len(pf.columns)) == (
        md.num_rows,
        md.num_row_groups,
        md.num_columns,
    )
    for rg in range(pf.num_row_groups):
        for col in pf.columns:
            pf.statistics(rg, col.index)
            pf.column_index(rg, col.index)
            pf.offset_index(rg, col.index)


# --- synthetic --------------------------------------------------------------------------------------------


@pytest.fixture()
def good_file(tmp_path: Path) -> Path:
    path = tmp_path / "good.parquet"
    pq.write_table(
        pa.table({"a": list(range(1000)), "s": [str(i) for i in range(1000)]}),
        path,
        write_page_index=True,
        data_page_size=512,
    )
    return path


def _expect_error(path: Path, fragment: str = "") -> ParquetError:
    with pytest.raises(ParquetError) as err:
        ParquetFile.open(path)
    assert str(path) in str(err.value)
    assert fragment in str(err.value)
    return err.value


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.parquet"
    p.write_bytes(b"")
    _expect_error(p, "too small")


def test_three_byte_file(tmp_path: Path) -> None:
    p = tmp_path / "three.parquet"
    p.write_bytes(b"PAR")
    _expect_error(p, "too small")


def test_missing_file(tmp_path: Path) -> None:
    _expect_error(tmp_path / "nope.parquet", "not found")


def test_wrong_magic(tmp_path: Path, good_file: Path) -> None:
    p = tmp_path / "magic.parquet"
    p.write_bytes(good_file.read_bytes()[:-4] + b"PAR2")
    _expect_error(p, "magic")


def test_not_parquet(tmp_path: Path) -> None:
    p = tmp_path / "text.parquet"
    p.write_bytes(b"hello world, this is not parquet at all\n" * 10)
    _expect_error(p, "not a Parquet file")


def test_encrypted_footer(tmp_path: Path, good_file: Path) -> None:
    p = tmp_path / "enc.parquet"
    p.write_bytes(good_file.read_bytes()[:-4] + b"PARE")
    _expect_error(p, "encrypted")


def test_footer_length_larger_than_file(tmp_path: Path, good_file: Path) -> None:
    data = good_file.read_bytes()
    p = tmp_path / "len.parquet"
    p.write_bytes(data[:-8] + struct.pack("<I", len(data) * 2) + b"PAR1")
    _expect_error(p, "footer length")


def test_truncated_footer(tmp_path: Path, good_file: Path) -> None:
    data = good_file.read_bytes()
    n = struct.unpack("<I", data[-8:-4])[0]
    p = tmp_path / "trunc.parquet"
    # keep the length and magic but cut the footer's last 20 bytes out
    p.write_bytes(data[: -8 - 20] + struct.pack("<I", n - 20) + b"PAR1")
    _expect_error(p)


def test_truncated_file(tmp_path: Path, good_file: Path) -> None:
    p = tmp_path / "cut.parquet"
    p.write_bytes(good_file.read_bytes()[:100])
    _expect_error(p)


def _rewrite_footer(src: Path, dst: Path, change) -> None:
    data = src.read_bytes()
    n = struct.unpack("<I", data[-8:-4])[0]
    md = thrift.decode_struct(fmt.FileMetaData, data[-8 - n : -8])[0]
    footer = thrift.encode_struct(change(md))
    dst.write_bytes(data[: -8 - n] + footer + struct.pack("<I", len(footer)) + b"PAR1")


def _move_chunk(md: fmt.FileMetaData, **changes) -> fmt.FileMetaData:
    rg = md.row_groups[0]
    cols = [rg.columns[0]._replace(**changes)] + rg.columns[1:]
    return md._replace(row_groups=[rg._replace(columns=cols)] + md.row_groups[1:])


def test_roundtrip_rewrite_is_valid(tmp_path: Path, good_file: Path) -> None:
    """Decoding the footer and encoding it again changes nothing: the same bytes, so the same file, whose page
    indexes (read through the rewritten footer's offsets) hold what pyarrow wrote."""
    p = tmp_path / "same.parquet"
    _rewrite_footer(good_file, p, lambda md: md)
    assert p.read_bytes() == good_file.read_bytes(), "the footer does not survive decode + encode unchanged"
    pf = ParquetFile.open(p)
    assert (pf.num_rows, pf.num_row_groups, [c.name for c in pf.columns]) == (1000, 1, ["a", "s"])
    assert pf.created_by == pq.ParquetFile(good_file).metadata.created_by
    ci, oi = pf.column_index(0, "a"), pf.offset_index(0, "a")
    assert ci.boundary_order.name == "ASCENDING" and ci.min_values[0] == 0 and ci.max_values[-1] == 999
    assert len(ci.min_values) == len(oi.page_locations) and oi.page_locations[0].first_row_index == 0
    assert pq.read_table(p).equals(pq.read_table(good_file))


def test_page_index_offset_past_end(tmp_path: Path, good_file: Path) -> None:
    p = tmp_path / "pi.parquet"
    _rewrite_footer(
        good_file, p, lambda md: _move_chunk(md, column_index_offset=10**9, offset_index_offset=10**9)
    )
    pf = ParquetFile.open(p)  # the footer itself is fine
    for get in (pf.column_index, pf.offset_index):
        with pytest.raises(ParquetError) as err:
            get(0, "a")
        assert str(p) in str(err.value) and "outside the file" in str(err.value) and "'a'" in str(err.value)


def test_page_index_length_past_end(tmp_path: Path, good_file: Path) -> None:
    p = tmp_path / "pilen.parquet"
    _rewrite_footer(good_file, p, lambda md: _move_chunk(md, offset_index_length=10**8))
    with pytest.raises(ParquetError, match="outside the file"):
        ParquetFile.open(p).offset_index(0, 0)


def test_page_index_pointing_at_garbage(tmp_path: Path, good_file: Path) -> None:
    p = tmp_path / "garbage.parquet"
    # point the column index at the file's first bytes (magic + data page): not a ColumnIndex
    _rewrite_footer(good_file, p, lambda md: _move_chunk(md, column_index_offset=0))
    with pytest.raises(ParquetError) as err:
        ParquetFile.open(p).column_index(0, 0)
    assert str(p) in str(err.value) and "column index" in str(err.value)


def test_bloom_filter_offset_past_end(tmp_path: Path, good_file: Path) -> None:
    p = tmp_path / "bloom.parquet"

    def change(md):
        cc = md.row_groups[0].columns[0]
        return _move_chunk(md, meta_data=cc.meta_data._replace(bloom_filter_offset=10**9))

    _rewrite_footer(good_file, p, change)
    with pytest.raises(ParquetError, match="bloom filter"):
        ParquetFile.open(p).bloom_filter(0, 0)


def test_row_group_column_count_mismatch(tmp_path: Path, good_file: Path) -> None:
    p = tmp_path / "cols.parquet"
    _rewrite_footer(
        good_file,
        p,
        lambda md: md._replace(row_groups=[md.row_groups[0]._replace(columns=md.row_groups[0].columns[:1])]),
    )
    _expect_error(p, "column chunks")


def test_schema_children_overrun(tmp_path: Path, good_file: Path) -> None:
    p = tmp_path / "schema.parquet"
    _rewrite_footer(
        good_file, p, lambda md: md._replace(schema=[md.schema[0]._replace(num_children=50)] + md.schema[1:])
    )
    _expect_error(p, "schema")


def test_huge_list_size_is_rejected_without_allocating(tmp_path: Path, good_file: Path) -> None:
    # FileMetaData{1: version=1, 2: schema = list<struct> of 2**31 elements} then nothing
    footer = bytes([0x15, 0x02, 0x19, 0xFC]) + bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x07])
    data = b"PAR1" + footer + struct.pack("<I", len(footer)) + b"PAR1"
    p = tmp_path / "huge.parquet"
    p.write_bytes(data)
    _expect_error(p, "exceeds the remaining")


# --- reading behaviour: few reads, laziness, filesystems ----------------------------------------------


def test_open_reads_footer_only_and_page_index_lazily(good_file: Path, monkeypatch) -> None:
    from layout.parquet import sources

    calls: list[tuple[int, int]] = []
    original = sources.LocalSource.read_at

    def spy(self, offset: int, length: int) -> bytes:
        calls.append((offset, length))
        return original(self, offset, length)

    monkeypatch.setattr(sources.LocalSource, "read_at", spy)
    pf = ParquetFile.open(good_file)
    assert len(calls) == 1  # small footer: one speculative tail read
    calls.clear()
    ci = pf.column_index(0, "a")
    pf.column_index(0, "a")
    assert len(calls) == 1 and calls[0][0] == pf.row_groups[0].columns[0].column_index_offset
    assert ci.min_values[0] == 0 and ci.boundary_order.name == "ASCENDING"


def test_long_footer_takes_two_reads(tmp_path: Path, monkeypatch) -> None:
    from layout.parquet import sources

    path = tmp_path / "wide.parquet"
    pq.write_table(pa.table({f"column_with_a_long_name_{i:04d}": [i] for i in range(1500)}), path)
    calls: list[int] = []
    original = sources.LocalSource.read_at
    monkeypatch.setattr(
        sources.LocalSource, "read_at", lambda self, o, n: calls.append(n) or original(self, o, n)
    )
    pf = ParquetFile.open(path)
    assert len(calls) == 2 and len(pf.columns) == 1500


def test_pyarrow_filesystem(good_file: Path) -> None:
    from pyarrow import fs

    pf = ParquetFile.open(str(good_file), filesystem=fs.LocalFileSystem())
    assert pf.num_rows == 1000 and len(pf.offset_index(0, "s").page_locations) >= 1
    with pytest.raises(ParquetError, match="not found"):
        ParquetFile.open(str(good_file) + ".missing", filesystem=fs.LocalFileSystem())


def test_unknown_column_is_a_usage_error(good_file: Path) -> None:
    from layout.errors import UsageError

    pf = ParquetFile.open(good_file)
    with pytest.raises(UsageError) as err:
        pf.column("nope")
    assert str(good_file) in str(err.value) and "a, s" in str(err.value)
    with pytest.raises(UsageError):
        pf.statistics(5, "a")
