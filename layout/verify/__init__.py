"""Checking a layout: does a set of Parquet files carry what readers rely on, as the spec intends?

    sources       which files a check looks at (a file, a directory, a table, a run's staged output)
    facts         one row per file x row group x column, read from the metadata only
    findings      what a check reports: findings with their diagnosis, the report, the failure, the intent
    rules         the layout rules with a diagnosis and the setting that fixes each finding: the list
                  of them (`RULES`) and the checks that run them (verify_files, verify_source,
                  verify_staged); the rules themselves, one module per concern:
    index_rules   column and offset indexes (and NaN chunks without a column index)
    order_rules   BoundaryOrder, ordered row groups, overlap, the recorded sort, curve clustering
    writer_rules  file and row group sizes, pages, bloom filters
    clustering    for curve layouts (zorder, hilbert): each key's overlap depth and point-lookup share
    expectations  the same facts as Great Expectations suites, with Data Docs

May import: layout.read, layout.parquet, layout.registry, layout.spec and the ground floor; GX only
inside the functions that run it. Never compaction, metrics or report.
"""
