"""Committing a compaction's staged output as one Iceberg `replace` snapshot per part, as Java's
`SnapshotProducer.apply` does: the table's state an attempt is built on (`state`), a named validation before
any manifest is written (`validate`), the changes computed per attempt (`changes`: data and delete files to
remove and to add, the data sequence number of the added files), the position deletes committed during the
job carried onto the new files (`carry`), the snapshot summary lakesort writes and reads (`summary`), and the
one adapter that touches pyiceberg's private producer API (`producer`, with `delete_manifests`).

May import: layout.compaction.executor (partition keys), layout.compaction.integrity (CommitRefused),
layout.compaction.plan, layout.read (the delete rule's index) and the ground floor. The pipeline's commit step
(`layout.compaction.pipeline.commit`) drives it.
"""
