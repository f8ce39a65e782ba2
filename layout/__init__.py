"""lakesort's library: read Parquet and Iceberg tables with page-level pruning, and keep them well laid out.

The floors, top to bottom (imports only point down; pyproject.toml [tool.importlinter] checks it):

    cli, demo            the `lakesort` command and the demo warehouse
    compaction  report   rewriting tables (plan, Spark job, proof, commit, lease, maintenance) | HTML reports
    verify  metrics      checking layouts (rules, GX suites) | measuring what readers skip
    read                 the reader library: plans, page pruning, scans, sorted merge, metadata cache
    registry, spec       the table specs (dags/tables/*.yaml) and finding a table's spec
    expr                 predicates: tree, SQL parsing, binding to a schema
    parquet              footers, column and offset indexes, bloom filters of any Parquet file
    io, catalog, manifest, settings, errors, models, sizes   the ground floor

The whole package may import pyarrow, numpy, pyiceberg, sqlglot, pydantic and (for GX suites, inside the
functions that use it) great_expectations; never Spark (that is `jobs/`) and never Airflow (`dags/`).
"""
