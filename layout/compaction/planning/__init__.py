"""Planning a rewrite: which partitions of a table need sorting and compacting, and why (`planner`); what is
refused from metadata alone before any Spark work (`admission`); the sorted runs a partition holds and which a
nightly rewrite merges (`sorted_runs`); date ranges turned into partitions (`dates`). The output is the
rewrite plan (`layout.compaction.plan`). Across tables: what a planned run is predicted to save (`benefit`)
and a night's budget spent in order of benefit over cost (`budget`), both pure.

May import: layout.compaction.executor (partition keys, the sort prefix's bounds, what Spark reads natively),
layout.compaction.plan, layout.read, layout.expr, layout.spec, layout.registry and the ground floor. Never the
pipeline above it; never Spark.
"""
