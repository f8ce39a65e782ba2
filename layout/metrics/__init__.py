"""Measuring what readers skip: each probe query of a table planned on a snapshot (`measure`), and the
Iceberg tables the measurements, compaction runs and maintenance runs (`maintenance`) are recorded in
(`store`).

May import: layout.read, layout.expr, layout.registry, layout.spec and the ground floor. Never
compaction, verify or report.
"""
