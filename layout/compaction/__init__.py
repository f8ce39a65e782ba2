"""Rewriting a table into its intended layout, and keeping it safe to do so.

    admission    refuse what cannot be rewritten (types, names, spec keys) before any work
    plan         the rewrite plan (RewritePlan): the frozen value the planner produces and the job reads
    planner      which partitions, which file groups, why
    steps        the steps of a run (prepare, verify, commit, measure), as the DAGs and the CLI call them
    driver       `lakesort compact`: the steps in one process, under the table's lease
    submit       how the Spark job is submitted (shared by the CLI and the DAGs)
    inputs       executors' reads of the planned files, by Iceberg field id (used by jobs/compact.py)
    figures      rows and key ranges from the manifests, and the job's checks of them (pure)
    sort_prefix  the sort keys packed into one long, where their ranges allow it (pure)
    slots        output files cut into pieces, pieces packed into write tasks (pure)
    memory       how much of the input a write task sorts without spilling (pure)
    staging      after the write: pieces stitched, list and map field ids (in the executors)
    partitions   partition values as keys, splitting rows by partition, the staged directories' names
    fingerprint  order-independent content hashes (xxh64: the hash Spark computes)
    proof        inputs' manifest statistics against the staged files' footers, by field id
    commit       the atomic Iceberg rewrite, validated as Iceberg's RewriteFiles is
    lease        one run per table (CLI, DAGs and cleanup alike)
    cleanup      deleting staged files no snapshot references
    maintain     table maintenance (`layout.maintenance`) as a lakesort run: spec, lease, record
    housekeeping lakesort's own tables (`lakesort.*`) rewritten into one file and maintained

May import: layout.maintenance, layout.verify, layout.metrics, layout.read, layout.expr, layout.parquet,
layout.registry, layout.spec and the ground floor. Never report; never Spark (the job itself is jobs/compact.py).
"""
