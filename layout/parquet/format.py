"""Immutable value types mirroring parquet.thrift (apache/parquet-format),
with the field ids the decoder uses.

Every struct is a `typing.NamedTuple`: immutable, and the cheapest to build (the generated decoder calls
`tuple.__new__` directly: ~0.18 us for a PageLocation, against ~0.6 us for a frozen slots dataclass; a
Spark file can hold tens of thousands of PageLocations). Field names are the thrift names in snake_case
(`logicalType` -> `logical_type`, union members lower-case); absent optional fields are None.

Enum-typed fields hold the members of the IntEnums below when the value is known to this version of the
spec, else the plain int (forward compatibility); IntEnum members compare equal to their int values.

`THRIFT_FIELDS` maps each struct to its fields: (field id, name, type spec, required). Type specs:
"bool", "byte", "i16", "i32", "i64", "double", "binary", "string", an IntEnum class, a struct class,
or ("list", element spec). Ids are exact as in parquet.thrift; unknown ids are skipped when decoding.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

# The default of the fields parquet.thrift declares `required`: None at run time, as for the optional ones
# (code may build a struct field by field; the encoder omits None fields), but the decoder raises ThriftError
# when one is missing, so a decoded struct always has them and their types say so.
_REQUIRED: Any = None


class _SpecEnum(enum.IntEnum):
    """IntEnum whose str() is the spec name (IntEnum's own str() is the number since Python 3.11)."""

    def __str__(self) -> str:
        return self.name


class PhysicalType(_SpecEnum):
    BOOLEAN = 0
    INT32 = 1
    INT64 = 2
    INT96 = 3
    FLOAT = 4
    DOUBLE = 5
    BYTE_ARRAY = 6
    FIXED_LEN_BYTE_ARRAY = 7


class ConvertedType(_SpecEnum):
    UTF8 = 0
    MAP = 1
    MAP_KEY_VALUE = 2
    LIST = 3
    ENUM = 4
    DECIMAL = 5
    DATE = 6
    TIME_MILLIS = 7
    TIME_MICROS = 8
    TIMESTAMP_MILLIS = 9
    TIMESTAMP_MICROS = 10
    UINT_8 = 11
    UINT_16 = 12
    UINT_32 = 13
    UINT_64 = 14
    INT_8 = 15
    INT_16 = 16
    INT_32 = 17
    INT_64 = 18
    JSON = 19
    BSON = 20
    INTERVAL = 21


class FieldRepetitionType(_SpecEnum):
    REQUIRED = 0
    OPTIONAL = 1
    REPEATED = 2
    VECTOR = 3


class Encoding(_SpecEnum):
    PLAIN = 0
    PLAIN_DICTIONARY = 2
    RLE = 3
    BIT_PACKED = 4
    DELTA_BINARY_PACKED = 5
    DELTA_LENGTH_BYTE_ARRAY = 6
    DELTA_BYTE_ARRAY = 7
    RLE_DICTIONARY = 8
    BYTE_STREAM_SPLIT = 9


class CompressionCodec(_SpecEnum):
    UNCOMPRESSED = 0
    SNAPPY = 1
    GZIP = 2
    LZO = 3
    BROTLI = 4
    LZ4 = 5
    ZSTD = 6
    LZ4_RAW = 7


class PageType(_SpecEnum):
    DATA_PAGE = 0
    INDEX_PAGE = 1
    DICTIONARY_PAGE = 2
    DATA_PAGE_V2 = 3


class BoundaryOrder(_SpecEnum):
    UNORDERED = 0
    ASCENDING = 1
    DESCENDING = 2


class EdgeInterpolationAlgorithm(_SpecEnum):
    SPHERICAL = 0
    VINCENTY = 1
    THOMAS = 2
    ANDOYER = 3
    KARNEY = 4


# --- statistics -------------------------------------------------------------------------------------


class SizeStatistics(NamedTuple):
    unencoded_byte_array_data_bytes: int | None = None
    repetition_level_histogram: list[int] | None = None
    definition_level_histogram: list[int] | None = None


class BoundingBox(NamedTuple):
    xmin: float = _REQUIRED
    xmax: float = _REQUIRED
    ymin: float = _REQUIRED
    ymax: float = _REQUIRED
    zmin: float | None = None
    zmax: float | None = None
    mmin: float | None = None
    mmax: float | None = None


class GeospatialStatistics(NamedTuple):
    bbox: BoundingBox | None = None
    geospatial_types: list[int] | None = None


class Statistics(NamedTuple):
    max: bytes | None = None  # deprecated: signed order only
    min: bytes | None = None  # deprecated: signed order only
    null_count: int | None = None
    distinct_count: int | None = None
    max_value: bytes | None = None
    min_value: bytes | None = None
    is_max_value_exact: bool | None = None
    is_min_value_exact: bool | None = None
    nan_count: int | None = None


# --- logical types ----------------------------------------------------------------------------------


class Empty(NamedTuple):
    """Any of the spec's empty marker structs (StringType, DateType, MilliSeconds, TypeDefinedOrder, ...);
    which one it is follows from the union field holding it."""


EMPTY = Empty()


class DecimalType(NamedTuple):
    scale: int = _REQUIRED
    precision: int = _REQUIRED


class TimeUnit(NamedTuple):  # union
    millis: Empty | None = None
    micros: Empty | None = None
    nanos: Empty | None = None


class TimestampType(NamedTuple):
    is_adjusted_to_utc: bool = _REQUIRED
    unit: TimeUnit = _REQUIRED


class TimeType(NamedTuple):
    is_adjusted_to_utc: bool = _REQUIRED
    unit: TimeUnit = _REQUIRED


class IntType(NamedTuple):
    bit_width: int = _REQUIRED
    is_signed: bool = _REQUIRED


class VariantType(NamedTuple):
    specification_version: int | None = None


class GeometryType(NamedTuple):
    crs: str | None = None


class GeographyType(NamedTuple):
    crs: str | None = None
    algorithm: EdgeInterpolationAlgorithm | int | None = None


class LogicalType(NamedTuple):  # union: exactly one member set (none when the writer used a newer member)
    string: Empty | None = None
    map: Empty | None = None
    list: Empty | None = None
    enum: Empty | None = None
    decimal: DecimalType | None = None
    date: Empty | None = None
    time: TimeType | None = None
    timestamp: TimestampType | None = None
    integer: IntType | None = None
    unknown: Empty | None = None
    json: Empty | None = None
    bson: Empty | None = None
    uuid: Empty | None = None
    float16: Empty | None = None
    variant: VariantType | None = None
    geometry: GeometryType | None = None
    geography: GeographyType | None = None
    vector: Empty | None = None


class SchemaElement(NamedTuple):
    type: PhysicalType | int | None = None
    type_length: int | None = None
    repetition_type: FieldRepetitionType | int | None = None
    name: str = _REQUIRED
    num_children: int | None = None
    converted_type: ConvertedType | int | None = None
    scale: int | None = None
    precision: int | None = None
    field_id: int | None = None
    logical_type: LogicalType | None = None
    vector_length: int | None = None


# --- column chunks, row groups, file ----------------------------------------------------------------


class KeyValue(NamedTuple):
    key: str = _REQUIRED
    value: str | None = None


class SortingColumn(NamedTuple):
    column_idx: int = _REQUIRED
    descending: bool = _REQUIRED
    nulls_first: bool = _REQUIRED


class PageEncodingStats(NamedTuple):
    page_type: PageType | int = _REQUIRED
    encoding: Encoding | int = _REQUIRED
    count: int = _REQUIRED  # type: ignore[assignment]  # parquet.thrift's name: shadows tuple.count


class ColumnMetaData(NamedTuple):
    type: PhysicalType | int = _REQUIRED
    encodings: list[Encoding | int] = _REQUIRED
    path_in_schema: list[str] = _REQUIRED
    codec: CompressionCodec | int = _REQUIRED
    num_values: int = _REQUIRED
    total_uncompressed_size: int = _REQUIRED
    total_compressed_size: int = _REQUIRED
    key_value_metadata: list[KeyValue] | None = None
    data_page_offset: int = _REQUIRED
    index_page_offset: int | None = None
    dictionary_page_offset: int | None = None
    statistics: Statistics | None = None
    encoding_stats: list[PageEncodingStats] | None = None
    bloom_filter_offset: int | None = None
    bloom_filter_length: int | None = None
    size_statistics: SizeStatistics | None = None
    geospatial_statistics: GeospatialStatistics | None = None


class EncryptionWithColumnKey(NamedTuple):
    path_in_schema: list[str] = _REQUIRED
    key_metadata: bytes | None = None


class ColumnCryptoMetaData(NamedTuple):  # union
    encryption_with_footer_key: Empty | None = None
    encryption_with_column_key: EncryptionWithColumnKey | None = None


class ColumnChunk(NamedTuple):
    file_path: str | None = None
    file_offset: int | None = None
    meta_data: ColumnMetaData | None = None
    offset_index_offset: int | None = None
    offset_index_length: int | None = None
    column_index_offset: int | None = None
    column_index_length: int | None = None
    crypto_metadata: ColumnCryptoMetaData | None = None
    encrypted_column_metadata: bytes | None = None


def chunk_metadata(chunk: ColumnChunk) -> ColumnMetaData:
    """`chunk.meta_data`, which only a column chunk with encrypted metadata lacks (none of the files lakesort
    writes or reads the pages of)."""
    assert chunk.meta_data is not None, "a column chunk with encrypted metadata"
    return chunk.meta_data


class RowGroup(NamedTuple):
    columns: list[ColumnChunk] = _REQUIRED
    total_byte_size: int = _REQUIRED
    num_rows: int = _REQUIRED
    sorting_columns: list[SortingColumn] | None = None
    file_offset: int | None = None
    total_compressed_size: int | None = None
    ordinal: int | None = None


class ColumnOrder(NamedTuple):  # union
    type_order: Empty | None = None
    ieee_754_total_order: Empty | None = None
    int96_timestamp_order: Empty | None = None


class AesGcmV1(NamedTuple):
    aad_prefix: bytes | None = None
    aad_file_unique: bytes | None = None
    supply_aad_prefix: bool | None = None


class AesGcmCtrV1(NamedTuple):
    aad_prefix: bytes | None = None
    aad_file_unique: bytes | None = None
    supply_aad_prefix: bool | None = None


class EncryptionAlgorithm(NamedTuple):  # union
    aes_gcm_v1: AesGcmV1 | None = None
    aes_gcm_ctr_v1: AesGcmCtrV1 | None = None


class FileMetaData(NamedTuple):
    version: int = _REQUIRED
    schema: list[SchemaElement] = _REQUIRED
    num_rows: int = _REQUIRED
    row_groups: list[RowGroup] = _REQUIRED
    key_value_metadata: list[KeyValue] | None = None
    created_by: str | None = None
    column_orders: list[ColumnOrder] | None = None
    encryption_algorithm: EncryptionAlgorithm | None = None
    footer_signing_key_metadata: bytes | None = None


# --- page index ---------------------------------------------------------------------------------------


class PageLocation(NamedTuple):
    offset: int
    compressed_page_size: int
    first_row_index: int


class OffsetIndex(NamedTuple):
    page_locations: list[PageLocation] = _REQUIRED
    unencoded_byte_array_data_bytes: list[int] | None = None


class ColumnIndex(NamedTuple):
    null_pages: list[bool] = _REQUIRED
    min_values: list[bytes] = _REQUIRED
    max_values: list[bytes] = _REQUIRED
    boundary_order: BoundaryOrder | int = _REQUIRED
    null_counts: list[int] | None = None
    repetition_level_histograms: list[int] | None = None
    definition_level_histograms: list[int] | None = None
    nan_counts: list[int] | None = None


# --- bloom filter -------------------------------------------------------------------------------------


class BloomFilterAlgorithm(NamedTuple):  # union
    block: Empty | None = None


class BloomFilterHash(NamedTuple):  # union
    xxhash: Empty | None = None


class BloomFilterCompression(NamedTuple):  # union
    uncompressed: Empty | None = None


class BloomFilterHeader(NamedTuple):
    num_bytes: int = _REQUIRED
    algorithm: BloomFilterAlgorithm = _REQUIRED
    hash: BloomFilterHash = _REQUIRED
    compression: BloomFilterCompression = _REQUIRED


_L = "list"
THRIFT_FIELDS: dict[type, list[tuple[int, str, Any, bool]]] = {
    Empty: [],
    SizeStatistics: [
        (1, "unencoded_byte_array_data_bytes", "i64", False),
        (2, "repetition_level_histogram", (_L, "i64"), False),
        (3, "definition_level_histogram", (_L, "i64"), False),
    ],
    BoundingBox: [
        (1, "xmin", "double", True), (2, "xmax", "double", True),
        (3, "ymin", "double", True), (4, "ymax", "double", True),
        (5, "zmin", "double", False), (6, "zmax", "double", False),
        (7, "mmin", "double", False), (8, "mmax", "double", False),
    ],
    GeospatialStatistics: [(1, "bbox", BoundingBox, False), (2, "geospatial_types", (_L, "i32"), False)],
    Statistics: [
        (1, "max", "binary", False), (2, "min", "binary", False),
        (3, "null_count", "i64", False), (4, "distinct_count", "i64", False),
        (5, "max_value", "binary", False), (6, "min_value", "binary", False),
        (7, "is_max_value_exact", "bool", False), (8, "is_min_value_exact", "bool", False),
        (9, "nan_count", "i64", False),
    ],
    DecimalType: [(1, "scale", "i32", True), (2, "precision", "i32", True)],
    TimeUnit: [(1, "millis", Empty, False), (2, "micros", Empty, False), (3, "nanos", Empty, False)],
    TimestampType: [(1, "is_adjusted_to_utc", "bool", True), (2, "unit", TimeUnit, True)],
    TimeType: [(1, "is_adjusted_to_utc", "bool", True), (2, "unit", TimeUnit, True)],
    IntType: [(1, "bit_width", "byte", True), (2, "is_signed", "bool", True)],
    VariantType: [(1, "specification_version", "byte", False)],
    GeometryType: [(1, "crs", "string", False)],
    GeographyType: [(1, "crs", "string", False), (2, "algorithm", EdgeInterpolationAlgorithm, False)],
    LogicalType: [
        (1, "string", Empty, False), (2, "map", Empty, False), (3, "list", Empty, False),
        (4, "enum", Empty, False), (5, "decimal", DecimalType, False), (6, "date", Empty, False),
        (7, "time", TimeType, False), (8, "timestamp", TimestampType, False),
        (10, "integer", IntType, False), (11, "unknown", Empty, False), (12, "json", Empty, False),
        (13, "bson", Empty, False), (14, "uuid", Empty, False), (15, "float16", Empty, False),
        (16, "variant", VariantType, False), (17, "geometry", GeometryType, False),
        (18, "geography", GeographyType, False), (19, "vector", Empty, False),
    ],
    SchemaElement: [
        (1, "type", PhysicalType, False), (2, "type_length", "i32", False),
        (3, "repetition_type", FieldRepetitionType, False), (4, "name", "string", True),
        (5, "num_children", "i32", False), (6, "converted_type", ConvertedType, False),
        (7, "scale", "i32", False), (8, "precision", "i32", False), (9, "field_id", "i32", False),
        (10, "logical_type", LogicalType, False), (11, "vector_length", "i32", False),
    ],
    KeyValue: [(1, "key", "string", True), (2, "value", "string", False)],
    SortingColumn: [(1, "column_idx", "i32", True), (2, "descending", "bool", True),
                    (3, "nulls_first", "bool", True)],
    PageEncodingStats: [(1, "page_type", PageType, True), (2, "encoding", Encoding, True),
                        (3, "count", "i32", True)],
    ColumnMetaData: [
        (1, "type", PhysicalType, True), (2, "encodings", (_L, Encoding), True),
        (3, "path_in_schema", (_L, "string"), True), (4, "codec", CompressionCodec, True),
        (5, "num_values", "i64", True), (6, "total_uncompressed_size", "i64", True),
        (7, "total_compressed_size", "i64", True), (8, "key_value_metadata", (_L, KeyValue), False),
        (9, "data_page_offset", "i64", True), (10, "index_page_offset", "i64", False),
        (11, "dictionary_page_offset", "i64", False), (12, "statistics", Statistics, False),
        (13, "encoding_stats", (_L, PageEncodingStats), False), (14, "bloom_filter_offset", "i64", False),
        (15, "bloom_filter_length", "i32", False), (16, "size_statistics", SizeStatistics, False),
        (17, "geospatial_statistics", GeospatialStatistics, False),
    ],
    EncryptionWithColumnKey: [(1, "path_in_schema", (_L, "string"), True),
                              (2, "key_metadata", "binary", False)],
    ColumnCryptoMetaData: [
        (1, "encryption_with_footer_key", Empty, False),
        (2, "encryption_with_column_key", EncryptionWithColumnKey, False),
    ],
    ColumnChunk: [
        # file_offset is `required ... = 0` in the IDL but some writers omit it: not enforced.
        (1, "file_path", "string", False), (2, "file_offset", "i64", False),
        (3, "meta_data", ColumnMetaData, False), (4, "offset_index_offset", "i64", False),
        (5, "offset_index_length", "i32", False), (6, "column_index_offset", "i64", False),
        (7, "column_index_length", "i32", False), (8, "crypto_metadata", ColumnCryptoMetaData, False),
        (9, "encrypted_column_metadata", "binary", False),
    ],
    RowGroup: [
        (1, "columns", (_L, ColumnChunk), True), (2, "total_byte_size", "i64", True),
        (3, "num_rows", "i64", True), (4, "sorting_columns", (_L, SortingColumn), False),
        (5, "file_offset", "i64", False), (6, "total_compressed_size", "i64", False),
        (7, "ordinal", "i16", False),
    ],
    ColumnOrder: [
        (1, "type_order", Empty, False), (2, "ieee_754_total_order", Empty, False),
        (3, "int96_timestamp_order", Empty, False),
    ],
    AesGcmV1: [(1, "aad_prefix", "binary", False), (2, "aad_file_unique", "binary", False),
               (3, "supply_aad_prefix", "bool", False)],
    AesGcmCtrV1: [(1, "aad_prefix", "binary", False), (2, "aad_file_unique", "binary", False),
                  (3, "supply_aad_prefix", "bool", False)],
    EncryptionAlgorithm: [(1, "aes_gcm_v1", AesGcmV1, False), (2, "aes_gcm_ctr_v1", AesGcmCtrV1, False)],
    FileMetaData: [
        (1, "version", "i32", True), (2, "schema", (_L, SchemaElement), True), (3, "num_rows", "i64", True),
        (4, "row_groups", (_L, RowGroup), True), (5, "key_value_metadata", (_L, KeyValue), False),
        (6, "created_by", "string", False), (7, "column_orders", (_L, ColumnOrder), False),
        (8, "encryption_algorithm", EncryptionAlgorithm, False),
        (9, "footer_signing_key_metadata", "binary", False),
    ],
    PageLocation: [
        (1, "offset", "i64", True), (2, "compressed_page_size", "i32", True),
        (3, "first_row_index", "i64", True),
    ],
    OffsetIndex: [
        (1, "page_locations", (_L, PageLocation), True),
        (2, "unencoded_byte_array_data_bytes", (_L, "i64"), False),
    ],
    ColumnIndex: [
        (1, "null_pages", (_L, "bool"), True), (2, "min_values", (_L, "binary"), True),
        (3, "max_values", (_L, "binary"), True), (4, "boundary_order", BoundaryOrder, True),
        (5, "null_counts", (_L, "i64"), False), (6, "repetition_level_histograms", (_L, "i64"), False),
        (7, "definition_level_histograms", (_L, "i64"), False), (8, "nan_counts", (_L, "i64"), False),
    ],
    BloomFilterAlgorithm: [(1, "block", Empty, False)],
    BloomFilterHash: [(1, "xxhash", Empty, False)],
    BloomFilterCompression: [(1, "uncompressed", Empty, False)],
    BloomFilterHeader: [
        (1, "num_bytes", "i32", True), (2, "algorithm", BloomFilterAlgorithm, True),
        (3, "hash", BloomFilterHash, True), (4, "compression", BloomFilterCompression, True),
    ],
}
