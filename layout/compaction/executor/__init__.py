"""The code the Spark job (`jobs/compact.py`) runs in its driver and executors, pure and without Spark:
reading planned inputs as Iceberg defines their rows (`inputs`), partition keys (`partitions`), the sort
prefix (`sort_prefix`), the write's slots and tasks (`slots`), the memory a write task may sort in (`memory`),
the figures the write is planned with and checked against (`figures`), finishing staged files (`staging`).

May import: layout.compaction.integrity.fingerprint, layout.compaction.plan, layout.parquet, pyiceberg and the
ground floor. The job imports this package, the plan and the fingerprint, and nothing else of layout (the
`jobs` contract of the house).
"""
