"""Committing a compaction's staged output as one Iceberg `replace` snapshot, and what it carries with it."""
