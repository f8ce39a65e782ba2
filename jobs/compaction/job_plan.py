"""The rewrite plan as the job uses it, decoded once per job (`JobPlan.of`).

The plan carries the table's schema as JSON text inside its own JSON, and every part of the job needs it in
some form: pyiceberg's `Schema` for the executors' reader and the sort keys' ordinals, Spark's types for the
reads and the write, the ids of list elements and map keys/values for the footers. `JobPlan.of` decodes it
and derives them, and the parts take the value; none decodes the schema again.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.schema import Schema
from pyspark.sql import types as T

from layout.compaction.executor.sort_prefix import key_ordinals
from layout.compaction.executor.staging import nested_field_ids
from layout.compaction.plan import RewritePlan, SortKeyModel

from .columns import CURVE
from .key_columns import KeyColumns
from .schema import spark_schema

# A curve layout's tasks sort by the curve's index alone: a long, one per row (`write.CurveIndex`).
CURVE_KEY = SortKeyModel(column=CURVE, direction="asc", nulls="last")


@dataclass(frozen=True, slots=True)
class JobPlan:
    """The plan, its table schema decoded (as pyiceberg's and as Spark's),
    and what the job derives from them."""

    plan: RewritePlan
    schema: Schema  # the table's current Iceberg schema (`RewritePlan.table_schema_json`, decoded)
    spark_schema: T.StructType  # as Spark reads and writes it: Iceberg's nullability, `parquet.field.id`s
    columns: tuple[str, ...]  # the table's top-level columns, in the schema's order
    nested_ids: dict[tuple[str, ...], int]  # ids of list elements and map keys/values by Parquet path
    keys: tuple[SortKeyModel, ...]  # what a write task sorts by: the plan's sort keys, or a curve's index
    # the transformed keys' columns (`key_columns`), which `keys` name in their place
    key_columns: KeyColumns
    ordinals: tuple[str | None, ...]  # per key, its ordinal's SQL (`sort_prefix.key_ordinals`), or None

    @classmethod
    def of(cls, plan: RewritePlan) -> JobPlan:
        schema = Schema.model_validate_json(plan.table_schema_json)  # the one place the job decodes it
        spark = spark_schema(schema)
        key_columns, keys = KeyColumns.of(schema, spark, plan.sort_keys if plan.strategy == "linear" else ())
        keys = keys if plan.strategy == "linear" else (CURVE_KEY,)
        return cls(plan=plan, schema=schema, spark_schema=spark, columns=tuple(f.name for f in spark.fields),
                   nested_ids=nested_field_ids(schema), keys=keys, key_columns=key_columns,
                   ordinals=key_ordinals(schema, [k.column for k in keys]))

    @property
    def transformed(self) -> bool:
        """A sort key sorts by a transform of its column: the job sorts by the transforms' columns, which
        manifests' bounds and sorted runs' pages do not give."""
        return bool(self.key_columns.columns)

    @property
    def curve(self) -> bool:
        """Rows are sorted by a curve's index (CURVE_KEY), computed from the plan's sort keys."""
        return self.plan.strategy != "linear"
