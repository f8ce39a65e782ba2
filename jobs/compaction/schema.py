"""The table's Iceberg schema as Spark types, with each struct field's Iceberg field id for parquet-mr, and
columns written as the schema declares them (required ones REQUIRED).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyiceberg import types as I
from pyspark.sql import functions as F
from pyspark.sql import types as T

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyspark.sql import Column


def spark_schema(schema: Schema) -> T.StructType:
    """The table's schema as Spark types, with Iceberg's nullability and each struct field's Iceberg field
    id as `parquet.field.id` (parquet-mr writes it: spark.sql.parquet.fieldId.write.enabled is on)."""

    return T.StructType([_struct_field(f) for f in schema.fields])


def _struct_field(field: I.NestedField) -> T.StructField:

    return T.StructField(field.name, _spark_type(field.field_type), nullable=not field.required,
                         metadata={"parquet.field.id": field.field_id})


def _spark_type(t: I.IcebergType) -> T.DataType:
    """Iceberg type -> Spark type. Types Spark cannot write (uuid, fixed, time) are refused at plan time
    (`layout.compaction.planning.admission`); reaching one here is a bug."""

    simple = {I.BooleanType: T.BooleanType, I.IntegerType: T.IntegerType, I.LongType: T.LongType,
              I.FloatType: T.FloatType, I.DoubleType: T.DoubleType, I.DateType: T.DateType,
              I.StringType: T.StringType, I.BinaryType: T.BinaryType,
              # Iceberg timestamptz is an instant (Spark TimestampType); timestamp is wall-clock (NTZ).
              I.TimestamptzType: T.TimestampType, I.TimestampType: T.TimestampNTZType}
    for iceberg, spark in simple.items():
        if type(t) is iceberg:
            return spark()
    if isinstance(t, I.DecimalType):
        return T.DecimalType(t.precision, t.scale)
    if isinstance(t, I.StructType):
        return T.StructType([_struct_field(f) for f in t.fields])
    if isinstance(t, I.ListType):
        return T.ArrayType(_spark_type(t.element_type), containsNull=not t.element_required)
    if isinstance(t, I.MapType):
        return T.MapType(_spark_type(t.key_type), _spark_type(t.value_type),
                         valueContainsNull=not t.value_required)
    raise TypeError(f"Iceberg type {t} has no Spark type lakesort writes; the planner should have refused it")


# Spark types an UnsafeRow holds in its 8-byte field (a decimal up to 18 digits as a long).
FIXED_WIDTH = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
               T.DateType, T.TimestampType, T.TimestampNTZType, T.DecimalType)


_PLACEHOLDER = {"date": "1970-01-01", "timestamp": "1970-01-01 00:00:00",
                "timestamp_ntz": "1970-01-01 00:00:00", "string": "", "binary": "", "boolean": "false"}


def as_declared(field: T.StructField) -> Column:
    """A column as the schema declares it: Spark reads every file column as nullable, so a required
    (top-level, primitive) column would be written OPTIONAL; coalescing with a placeholder makes Spark
    know it is not null and write it REQUIRED. A null there would be a broken input file: the placeholder
    would then differ from the input's fingerprint (taken before this) and the commit be refused."""
    col = F.col(field.name)
    if field.nullable or not isinstance(field.dataType, T.AtomicType):
        return col
    placeholder = _PLACEHOLDER.get(field.dataType.typeName(), "0")
    return F.coalesce(col, F.lit(placeholder).cast(field.dataType))
