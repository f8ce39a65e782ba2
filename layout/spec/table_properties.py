"""The Iceberg table's own write properties, honoured where the spec is silent:
a spec resolved against its table.

Iceberg's writers read a table's ``write.parquet.*`` properties and ``write.target-file-size-bytes``
(Iceberg's "Table properties" documentation); lakesort writes with them too. Precedence, per setting: what the
spec file sets (in its YAML, not a default) wins, then the table's property, then lakesort's default. The
sort follows the same rule in `layout.spec.sorting` (the spec's `sort.keys`, else the table's sort order).

A property lakesort's writer cannot honour (a codec parquet-mr is not built with here, a malformed number, a
bloom filter on a column the table lacks) is refused with a `ConfigError` naming the table, the property and
the fix, at plan time: nothing is written with settings the table's owner did not choose.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from layout.errors import ConfigError
from layout.spec.fields import Compression
from layout.spec.models import TableSpec
from layout.spec.writer import WriterSpec

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["TARGET_FILE_SIZE", "WRITE_PROPERTY_PREFIX", "resolve_for_table", "resolve_spec",
           "write_properties"]

WRITE_PROPERTY_PREFIX = "write.parquet."
TARGET_FILE_SIZE = "write.target-file-size-bytes"
CODEC = "write.parquet.compression-codec"
LEVEL = "write.parquet.compression-level"
BLOOM_ENABLED = "write.parquet.bloom-filter-enabled.column."
BLOOM_FPP = "write.parquet.bloom-filter-fpp.column."
BLOOM_NDV = "write.parquet.bloom-filter-ndv.column."
BLOOM_MAX_BYTES = "write.parquet.bloom-filter-max-bytes"
# Iceberg's defaults where lakesort needs one to read the others:
# the codec a level belongs to, a filter's size.
ICEBERG_CODEC = "zstd"
ICEBERG_FPP = 0.01
ICEBERG_BLOOM_MAX_BYTES = 1024 * 1024

# Property -> the WriterSpec field it sets, for the plain sizes and counts.
_SIZES = {
    "write.parquet.row-group-size-bytes": "row_group_size",
    "write.parquet.page-size-bytes": "page_size",
    "write.parquet.page-row-limit": "page_row_count_limit",
    "write.parquet.dict-size-bytes": "dictionary_page_size",
}
# Iceberg's codec names (case-insensitive) -> lakesort's; lz4
# (Hadoop's framing) and brotli are not lakesort's.
_CODECS: dict[str, Compression] = {
    "zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "uncompressed": "uncompressed", "lz4_raw": "lz4_raw",
}


def write_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """The properties of a table that shape what lakesort writes: what a run records and resolves with."""
    return {k: v for k, v in sorted(properties.items())
            if k.startswith(WRITE_PROPERTY_PREFIX) or k == TARGET_FILE_SIZE}


def resolve_for_table(spec: TableSpec, table: Table) -> TableSpec:
    """`resolve_spec` with the table's own properties and columns."""
    return resolve_spec(spec, write_properties(table.properties), columns=table.schema().column_names)


def resolve_spec(spec: TableSpec, properties: Mapping[str, str], *,
                 columns: Collection[str] | None = None) -> TableSpec:
    """The spec with the table's write `properties` in every setting its file does not set; the spec itself
    when they change nothing. `columns` (the table's), when given, are checked against bloom filter columns.

    Derived settings follow the resolved ones as they follow the spec's (`TableSpec._derive`): the small-file
    size, the verification bounds of row groups and files and the bloom filters every file must carry, unless
    the file sets them. A `max_group_size` left to its default grows to a larger target file size."""
    props = _Properties(spec, properties)
    writer = props.writer_update(spec.writer, columns)
    top: dict[str, Any] = {}
    if TARGET_FILE_SIZE in properties and "target_file_size" not in spec.model_fields_set:
        target = props.positive_int(TARGET_FILE_SIZE)
        top["target_file_size"] = target
        if "max_group_size" not in spec.model_fields_set and spec.max_group_size < target:
            top["max_group_size"] = target
    if not writer and not top:
        return spec
    data = spec.model_dump(mode="json", exclude_unset=True)
    if writer:
        data["writer"] = {**data.get("writer", {}), **writer}
    data.update(top)
    try:
        resolved = TableSpec.model_validate(data)
    except ValidationError as error:
        detail = "; ".join(str(e["ctx"]["error"]) if e["type"] == "value_error" else e["msg"]
                           for e in error.errors(include_url=False))
        raise ConfigError(
            f"{spec.source}: {spec.table}: the spec and the table's write properties "
            f"({', '.join(f'{k}={properties[k]}' for k in props.used)}) do not go together: {detail}; set "
            "the setting in the spec or change the table property (ALTER TABLE ... SET TBLPROPERTIES)"
        ) from None
    resolved._source = spec.source
    return resolved


class _Properties:
    """The table's properties read for one spec, each value checked as it is read; `used` names those read."""

    def __init__(self, spec: TableSpec, properties: Mapping[str, str]) -> None:
        self.spec, self.properties = spec, properties
        self.used: list[str] = []

    def _refuse(self, name: str, problem: str, fix: str) -> ConfigError:
        return ConfigError(
            f"{self.spec.source}: the Iceberg table {self.spec.table} has {name}={self.properties[name]!r}: "
            f"{problem}; {fix}"
        )

    def _fix(self, setting: str) -> str:
        return (f"change the table property (ALTER TABLE {self.spec.table} SET TBLPROPERTIES), or set "
                f"{setting} in the spec, which then wins over it")

    def positive_int(self, name: str, setting: str = "target_file_size") -> int:
        self.used.append(name)
        raw = self.properties[name].strip()
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value <= 0:
            raise self._refuse(name, "expected a positive whole number of bytes or rows", self._fix(setting))
        return value

    def writer_update(self, writer: WriterSpec, columns: Collection[str] | None) -> dict[str, Any]:
        """The writer settings the table's properties give, for the ones the spec does not set."""
        given = writer.model_fields_set
        update: dict[str, Any] = {}
        for name, field in _SIZES.items():
            if name in self.properties and field not in given:
                update[field] = self.positive_int(name, f"writer.{field}")
        update.update(self._compression(given))
        if "bloom_filters" not in given:
            blooms = self._bloom_filters(columns)
            if blooms:
                update["bloom_filters"] = blooms
        return update

    def _compression(self, given: Collection[str]) -> dict[str, Any]:
        update: dict[str, Any] = {}
        table_codec = ICEBERG_CODEC
        if CODEC in self.properties:
            self.used.append(CODEC)
            raw = self.properties[CODEC].strip().lower()
            if raw not in _CODECS:
                raise self._refuse(CODEC, "lakesort's writer cannot write that codec (it writes "
                                   f"{', '.join(_CODECS)})", self._fix("writer.compression"))
            table_codec = _CODECS[raw]
            if "compression" not in given:
                update["compression"] = table_codec
        # A level belongs to its codec: the table's applies only when the files get the table's codec.
        codec = update.get("compression", self.spec.writer.compression)
        if LEVEL in self.properties and "compression_level" not in given and codec == table_codec:
            self.used.append(LEVEL)
            raw = self.properties[LEVEL].strip()
            try:
                level = int(raw)
            except ValueError:
                raise self._refuse(LEVEL, "expected a whole number",
                                   self._fix("writer.compression_level")) from None
            try:
                WriterSpec(compression=codec, compression_level=level)
            except ValidationError as error:
                raise self._refuse(LEVEL, str(error.errors(include_url=False)[0]["ctx"]["error"]),
                                   self._fix("writer.compression_level")) from None
            update["compression_level"] = level
        return update

    def _bloom_filters(self, columns: Collection[str] | None) -> dict[str, dict[str, Any]]:
        """Iceberg's per-column bloom filter properties as the spec's `bloom_filters`. Iceberg sizes a filter
        by its ndv property when given, else writes `bloom-filter-max-bytes`; lakesort's filters are sized by
        ndv, so without one a filter gets the ndv that fills max-bytes at its fpp (parquet-mr's adaptive
        filter then writes the smallest of its candidates that holds what a file holds)."""
        enabled = []
        for name in sorted(self.properties):
            if not name.startswith(BLOOM_ENABLED):
                continue
            self.used.append(name)
            flag = self.properties[name].strip().lower()
            if flag not in ("true", "false"):
                raise self._refuse(name, "expected true or false", self._fix("writer.bloom_filters"))
            column = name.removeprefix(BLOOM_ENABLED)
            if flag == "true":
                if columns is not None and column not in columns:
                    raise self._refuse(name, f"{column!r} is not a column of {self.spec.table}",
                                       f"remove the property (ALTER TABLE {self.spec.table} UNSET "
                                       "TBLPROPERTIES) or name a column of the table, or set "
                                       "writer.bloom_filters in the spec, which then wins over it")
                enabled.append(column)
        if not enabled:
            return {}
        max_bytes = ICEBERG_BLOOM_MAX_BYTES
        if BLOOM_MAX_BYTES in self.properties:
            max_bytes = self.positive_int(BLOOM_MAX_BYTES, "writer.bloom_filters")
        blooms = {}
        for column in enabled:
            fpp = ICEBERG_FPP
            if BLOOM_FPP + column in self.properties:
                name = BLOOM_FPP + column
                self.used.append(name)
                try:
                    fpp = float(self.properties[name])
                except ValueError:
                    fpp = math.nan
                if not 0 < fpp < 1:
                    raise self._refuse(name, "expected a probability between 0 and 1, like 0.01",
                                       self._fix("writer.bloom_filters"))
            if BLOOM_NDV + column in self.properties:
                ndv = self.positive_int(BLOOM_NDV + column, "writer.bloom_filters")
            else:
                ndv = _ndv_filling(max_bytes, fpp)
            blooms[column] = {"ndv": ndv, "fpp": fpp}
        return blooms


def _ndv_filling(max_bytes: int, fpp: float) -> int:
    """The distinct values a split-block filter of `max_bytes` holds at `fpp` (the inverse of
    `layout.spec.writer._bloom_bytes`, parquet-mr's optimalNumOfBits)."""
    return max(1, math.floor(-max_bytes * 8 * math.log(1 - fpp ** (1 / 8)) / 8))
