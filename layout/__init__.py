"""lakesort's library: read Parquet and Iceberg tables with page-level pruning, and keep them well laid out.

The floors, top to bottom (imports only point down; pyproject.toml [tool.importlinter] checks it):

    cli, demo            the `lakesort` command (a module per command, loaded when it runs) and the demo
                         warehouse
    compaction  report   rewriting tables (pipeline over planning over executor code over integrity) |
                         HTML reports
    upkeep               the table lease, staged-file cleanup, maintenance as a run, lakesort's own tables
    maintenance          expiring snapshots and deleting the files nothing retained references
    advise               the layout advisor
    verify  metrics      checking layouts (rules, GX suites) | measuring what readers skip
    read                 the reader library: plans, page pruning, scans, sorted merge, metadata cache
    registry, spec       the table specs (dags/tables/*.yaml) and finding a table's spec
    expr                 predicates: tree, SQL parsing, binding to a schema
    parquet              footers, column and offset indexes, bloom filters of any Parquet file
    io, registered, catalog, manifest, settings, errors, models, sizes, durations, literals, curves
                         the ground floor

The whole package may import pyarrow, numpy, pyiceberg, sqlglot, pydantic and (for GX suites, inside the
functions that use it) great_expectations; never Spark (that is `jobs/`) and never Airflow (`dags/`).
"""
