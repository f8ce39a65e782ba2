"""Rewriting a table into its intended layout, and keeping it safe to do so; a subpackage per concern, the
arrows pointing down:

    pipeline/   the steps of a run (prepare, submit, verify, commit, record, measure) for the DAGs and the CLI
    planning/   which partitions, which file groups, why; what is refused before any work; sorted runs
    executor/   what the Spark job calls in its driver and executors (inputs, partitions, sort prefix, slots,
                memory, figures, staging); pure, no Spark
    integrity/  fingerprints, the metadata proof by field id, the checks of the staged output
    plan        the rewrite plan (RewritePlan): the frozen value planning produces and the job, verify and
                commit consume

Table upkeep (the lease, staged-file cleanup, maintenance as a run, housekeeping) is `layout.upkeep`, beside
`layout.maintenance`. May import: layout.upkeep, layout.maintenance, layout.verify, layout.metrics,
layout.read, layout.expr, layout.parquet, layout.registry, layout.spec and the ground floor. Never report;
never Spark (the job itself is jobs/compact.py).
"""
