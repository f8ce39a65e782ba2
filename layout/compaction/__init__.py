"""Rewriting a table into its intended layout, and keeping it safe to do so.

    admission    refuse what cannot be rewritten (types, names, spec keys) before any work
    planner      the rewrite plan: which partitions, which file groups, why (RewritePlan)
    steps        the steps of a run (prepare, verify, commit, measure), as the DAGs and the CLI call them
    driver       `lakesort compact`: the steps in one process, under the table's lease
    submit       how the Spark job is submitted (shared by the CLI and the DAGs)
    inputs       executors' reads of the planned files, by Iceberg field id (used by jobs/compact.py)
    partitions   partition values as keys, and splitting rows by partition
    fingerprint  order-independent content hashes (xxh64: the hash Spark computes)
    proof        inputs' manifest statistics against the staged files' footers, by field id
    commit       the atomic Iceberg rewrite, validated as Iceberg's RewriteFiles is
    lease        one run per table (CLI, DAGs and cleanup alike)
    cleanup      deleting staged files no snapshot references
    maintain     table maintenance (`layout.maintenance`) as a lakesort run: spec, lease, record

May import: layout.maintenance, layout.verify, layout.metrics, layout.read, layout.expr, layout.parquet,
layout.registry, layout.spec and the ground floor. Never report; never Spark (the job itself is jobs/compact.py).
"""
