"""Measuring what readers skip: each probe query of a table planned on a snapshot (`measure`, with its
probes in `probes`), against the page-level ideal (`ideal`) and a perfectly clustered table
(`clustered`), confirmed by DataFusion (`engine`); the clustering health of each sort key per partition
(`clustering`); and the Iceberg tables the measurements, compaction runs (`runs`) and maintenance runs
(`maintenance`) are recorded in (`store`).

May import: layout.read, layout.expr, layout.registry, layout.spec and the ground floor. Never
compaction, verify or report.
"""
