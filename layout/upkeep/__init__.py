"""Table upkeep as lakesort runs it: one lease per table (`lease`), cleanup of staged files nothing references
(`cleanup`), snapshot expiry and deletion of unreferenced files under the lease and recorded (`maintain`, over
`layout.maintenance`), and housekeeping of lakesort's own tables (`housekeeping`).

May import: layout.maintenance, layout.metrics (to record maintenance), layout.registry, layout.spec and the
ground floor. Never layout.compaction (which takes the lease and cleans up through this package); never Spark.
"""
