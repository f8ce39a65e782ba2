"""Checking a layout: does a set of Parquet files carry what readers rely on, as the spec intends?

    sources       which files a check looks at (a file, a directory, a table, a run's staged output)
    facts         one row per file x row group x column, read from the metadata only
    findings      what a check reports: findings with their diagnosis, the report, the failure, the intent
    rules         the layout rules (column and offset indexes, BoundaryOrder, sizes, bloom filters,
                  overlap) with a diagnosis and the setting that fixes each finding
    clustering    for curve layouts (zorder, hilbert): each key's overlap depth and point-lookup share
    expectations  the same facts as Great Expectations suites, with Data Docs

May import: layout.read, layout.parquet, layout.registry, layout.spec and the ground floor; GX only
inside the functions that run it. Never compaction, metrics or report.
"""
