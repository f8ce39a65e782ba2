"""Table specs: how one Iceberg table should be laid out, written and checked (`dags/tables/*.yaml`).

One YAML file per table; keys are snake_case and unknown keys are errors. Only ``table`` and ``owner``
are required::

    # yaml-language-server: $schema=../../schemas/table-spec.schema.json
    table: sales.orders
    owner: {name: Sales Team, email: sales@example.com}
    sort:
      keys: [{column: order_date}, {column: customer_id, direction: desc}]
    target_file_size: 256MiB
    writer: {compression: zstd, compression_level: 3, bloom_filters: {customer_id: {ndv: 100000}}}
    probes:
      - {name: one_day, where: "order_date = DATE '2024-06-01'", columns: [order_id, total]}

Every key, its meaning and its default is documented on the fields of the models
(`layout.spec.models`), and so in the JSON schema generated from them, published as
``schemas/table-spec.schema.json`` (`table_spec_schema`; regenerate with
``python -m layout.spec --schema > schemas/table-spec.schema.json``). The first line above lets
editors (VS Code YAML, JetBrains) validate a spec and show the documentation while it is written.

Load specs with `load_spec`/`load_specs` (`layout.spec.loading`): errors are `ConfigError` naming the
file and the dotted key, one line per problem.

The package owns the spec's models (`models`, with their field types in `fields` and the Parquet writer
settings in `writer`), reading them (`loading`), their JSON schema (`schema`,
``__main__``), applying a spec's sort to an Iceberg table (`sorting`) and resolving a spec against the table's
own write properties where the spec is silent (`table_properties`). It may import the floors
below it (`layout.expr` for probe predicates, `layout.errors`, `layout.models`, `layout.sizes`,
`layout.durations`),
pydantic, PyYAML and pyiceberg; nothing above it (registry, read, verify, compaction, ...).
"""

from __future__ import annotations

from layout.spec.loading import load_spec, load_specs, parse_spec
from layout.spec.models import (
    CURVES,
    BloomFilter,
    BoundaryOrder,
    Columns,
    Compression,
    Direction,
    MergeMode,
    NullOrder,
    Owner,
    Probe,
    Retention,
    Size,
    SizeOrZero,
    SortKey,
    SortSpec,
    Strategy,
    TableSpec,
    UpsertKeys,
    VerifySpec,
    WriterSpec,
)
from layout.spec.schema import table_spec_schema, table_spec_schema_json
from layout.spec.sorting import (
    intended_boundary_orders,
    order_column,
    own_sort_keys,
    resolve_sort_keys,
    written_sort_order_id,
)
from layout.spec.table_properties import resolve_for_table, resolve_spec

__all__ = [
    "CURVES",
    "BloomFilter",
    "BoundaryOrder",
    "Columns",
    "Compression",
    "Direction",
    "MergeMode",
    "NullOrder",
    "Owner",
    "Probe",
    "Retention",
    "Size",
    "SizeOrZero",
    "SortKey",
    "SortSpec",
    "Strategy",
    "TableSpec",
    "UpsertKeys",
    "VerifySpec",
    "WriterSpec",
    "intended_boundary_orders",
    "load_spec",
    "load_specs",
    "order_column",
    "own_sort_keys",
    "parse_spec",
    "resolve_for_table",
    "resolve_sort_keys",
    "resolve_spec",
    "table_spec_schema",
    "table_spec_schema_json",
    "written_sort_order_id",
]
