"""Nothing is lost: the proofs a compaction's staged output must pass before it commits. An order-independent
content fingerprint that Spark and pyarrow compute alike (`fingerprint`, with `xxh64`); the metadata proof by
field id against Iceberg's manifest statistics (`proof`); the checks of the staged output as a whole: rows,
fingerprints read back, a re-read outside Spark, files unchanged since verified (`staged`).

May import: layout.compaction.plan, layout.manifest, layout.io, layout.settings, pyiceberg and the ground
floor. Never the executor code, the planner or the pipeline: a proof trusts nothing that wrote the output.
"""
