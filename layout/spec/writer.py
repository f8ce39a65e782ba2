"""The Parquet writer settings of a table spec (`WriterSpec`, `BloomFilter`) and how they become parquet-mr's
options for the Spark job (`WriterSpec.spark_options`)."""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator

from layout.models import Frozen
from layout.sizes import MiB
from layout.spec.fields import Compression, NonEmpty, Size


def _bloom_bytes(ndv: int, fpp: float) -> int:
    """The bytes of the split-block bloom filter parquet-mr writes for `ndv` values at `fpp`
    (BlockSplitBloomFilter.optimalNumOfBits, rounded up to a power of two, 32 B .. 128 MiB)."""
    bits = -8 * ndv / math.log(1 - fpp ** (1 / 8))
    size = max(32, math.ceil(bits / 8))
    return min(1 << (size - 1).bit_length(), 128 * 1024 * 1024)


# parquet-mr's ParquetProperties.DEFAULT_DICTIONARY_PAGE_SIZE (its default page size), passed when the spec
# and the table leave it unset, so the files do not depend on the cluster's defaults.
DEFAULT_DICTIONARY_PAGE_SIZE = 1 * MiB
_SPARK_CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "lz4_raw": "lz4_raw",
                 "uncompressed": "none"}
_LEVELS = {"zstd": (1, 22), "gzip": (1, 9)}
# Hadoop's GzipCodec reads `zlib.compress.level` with Configuration.getEnum, so it wants the enum
# constant's name of ZlibCompressor.CompressionLevel, not the number.
_ZLIB_LEVELS = {
    1: "BEST_SPEED", 2: "TWO", 3: "THREE", 4: "FOUR", 5: "FIVE",
    6: "SIX", 7: "SEVEN", 8: "EIGHT", 9: "BEST_COMPRESSION",
}


class BloomFilter(Frozen):
    """A split-block bloom filter sized for `ndv` distinct values at false-positive rate `fpp`."""

    ndv: Annotated[int, Field(gt=0)] = Field(
        description="Distinct values the filter is sized for, per row group "
                    "(parquet.bloom.filter.expected.ndv)."
    )
    fpp: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.01, description="False-positive probability, between 0 and 1 "
                          "(parquet.bloom.filter.fpp). Default 0.01."
    )


class WriterSpec(Frozen):
    """Parquet settings the Spark job passes to parquet-mr; `spark_options` turns them into writer options."""

    row_group_size: Size = Field(
        128 * MiB, description="Size a row group aims for, buffered bytes (parquet.block.size). Absent: the "
        "table's write.parquet.row-group-size-bytes, else 128MiB."
    )
    page_size: Size = Field(
        1 * MiB,
        description="Size a data page aims for (parquet.page.size); a page ends at this size or at "
        "page_row_count_limit rows, whichever comes first. Absent: the table's "
        "write.parquet.page-size-bytes, else 1MiB.",
    )
    page_row_count_limit: Annotated[int, Field(gt=0)] = Field(
        20_000,
        description="Most rows per data page (parquet.page.row.count.limit); smaller pages let readers skip "
        "more. Absent: the table's write.parquet.page-row-limit, else 20000.",
    )
    column_index_truncate_length: Annotated[int, Field(gt=0)] = Field(
        64,
        description="Bytes kept of min/max values in the column index (parquet.columnindex.truncate.length). "
        "Default 64.",
    )
    statistics_truncate_length: Annotated[int, Field(gt=0)] | None = Field(
        None,
        description="Bytes kept of min/max values in the footer statistics "
        "(parquet.statistics.truncate.length). Absent or null: parquet-mr does not truncate.",
    )
    compression: Compression = Field(
        "zstd",
        description="Compression codec: zstd, snappy, gzip, lz4_raw or uncompressed. Absent: the table's "
        "write.parquet.compression-codec, else zstd.",
    )
    compression_level: int | None = Field(
        None,
        description="Codec level: zstd 1-22, gzip 1-9; the other codecs have none. Absent: the table's "
        "write.parquet.compression-level when the codec is the table's; else (or null) "
        "the codec's default level.",
    )
    dictionary: bool = Field(
        True,
        description="Dictionary encoding (parquet.enable.dictionary). Always off for bloom-filtered columns: "
        "parquet-mr drops the bloom filter of an all-dictionary column chunk. Default true.",
    )
    dictionary_page_size: Size | None = Field(
        None,
        description="Most bytes of a column chunk's dictionary page (parquet.dictionary.page.size); past it "
        "the chunk's later pages are written without the dictionary. Absent: the table's "
        "write.parquet.dict-size-bytes, else (or null) parquet-mr's 1MiB.",
    )
    bloom_filters: dict[NonEmpty, BloomFilter] = Field(
        default_factory=dict,
        description="Column -> the bloom filter written for it, so point lookups skip row groups without "
        "the value. Absent: the table's write.parquet.bloom-filter-enabled.column.<col> properties (with "
        "their -fpp and -ndv, and bloom-filter-max-bytes), else none.",
    )

    @field_validator("compression_level")
    @classmethod
    def _level(cls, value: int | None, info: ValidationInfo) -> int | None:
        codec = info.data.get("compression")
        if value is None or codec is None:
            return value
        if codec not in _LEVELS:
            raise ValueError(
                f"compression {codec!r} has no level; remove compression_level or use zstd or gzip"
            )
        low, high = _LEVELS[codec]
        if not low <= value <= high:
            raise ValueError(f"{codec} levels are {low} to {high}, got {value}")
        return value

    def spark_options(self) -> dict[str, str]:
        """The `.option(name, value)` pairs for Spark's Parquet writer (parquet-mr 1.17).

        Every setting is passed, defaults included, so the written files do not depend on the
        cluster's Spark or Hadoop defaults. The gzip level name comes from parquet-mr/Hadoop sources
        (`zlib.compress.level`, an enum name); the other names are checked on Spark 4.2.
        """
        options = {
            "compression": _SPARK_CODECS[self.compression],
            "parquet.block.size": str(self.row_group_size),
            "parquet.page.size": str(self.page_size),
            "parquet.page.row.count.limit": str(self.page_row_count_limit),
            "parquet.columnindex.truncate.length": str(self.column_index_truncate_length),
            "parquet.enable.dictionary": "true" if self.dictionary else "false",
            "parquet.dictionary.page.size": str(self.dictionary_page_size or DEFAULT_DICTIONARY_PAGE_SIZE),
        }
        if self.statistics_truncate_length is not None:
            options["parquet.statistics.truncate.length"] = str(self.statistics_truncate_length)
        if self.compression_level is not None:
            if self.compression == "zstd":
                options["parquet.compression.codec.zstd.level"] = str(self.compression_level)
            else:
                options["zlib.compress.level"] = _ZLIB_LEVELS[self.compression_level]
        if self.bloom_filters:
            # Adaptive filters: parquet-mr sizes a filter for `ndv` whatever the file holds (a 300-row file of
            # a nightly run carried a 128 KiB filter, 13x its data); adaptive, it keeps candidates from the
            # size `ndv` and `fpp` ask for (the global max.bytes) down to about 1 KiB and writes the smallest
            # that holds the values written at `fpp`. Measured on parquet-mr 1.17 (ndv 100,000): 1 KiB for 300
            # distinct values, 8 KiB for 5,000, 128 KiB for 200,000. With expected.ndv set, parquet-mr ignores
            # the adaptive flag, so it is not passed.
            largest = max(_bloom_bytes(b.ndv, b.fpp) for b in self.bloom_filters.values())
            options["parquet.bloom.filter.adaptive.enabled"] = "true"
            options["parquet.bloom.filter.max.bytes"] = str(largest)
        for column, bloom in sorted(self.bloom_filters.items()):
            options[f"parquet.bloom.filter.enabled#{column}"] = "true"
            options[f"parquet.bloom.filter.fpp#{column}"] = repr(bloom.fpp)
            options[f"parquet.bloom.filter.candidates.number#{column}"] = str(
                max(1, (_bloom_bytes(bloom.ndv, bloom.fpp) // 1024).bit_length()))
            # parquet-mr drops a chunk's bloom filter when all its data pages are dictionary-encoded
            # (ParquetFileWriter.writeColumnChunk): a bloom-filtered column is written without one.
            options[f"parquet.enable.dictionary#{column}"] = "false"
        return options
