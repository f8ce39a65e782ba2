"""The columns the job adds beside the table's own, by name. The planner refuses a table with a top-level
column named `__lakesort*` or `lakesort_*` (`layout.compaction.planning.admission`), so none collides with
them. The row's group and partition (GROUP, PART, PART_KEY) are `layout.compaction.executor.partitions`':
they name the staged output's directories too.
"""

from __future__ import annotations

SOURCE = "__lakesort_source"  # the file a natively read row came from (null for rows pyiceberg's reader read)
RANK = "__lakesort_rank"  # a keyed table's row among the rows of its key: the merge keeps rank 1
KEY = "__lakesort_key"  # + its index: a transformed sort key's values (`key_columns`), what tasks sort by
CURVE = "__lakesort_z"  # a curve layout's index (z-order or Hilbert: `layout.curves`), what its tasks sort by
SLOT = "__lakesort_slot"  # the row's slot: a piece of an output file (`layout.compaction.executor.slots`)
PREFIX = "__lakesort_prefix"  # the sort prefix over several keys (`layout.compaction.executor.sort_prefix`)
# merge-on-read inputs: the row's input file, by its index in the job (`deletes.file_index`)
FILE = "__lakesort_file"
POS = "__lakesort_pos"  # merge-on-read inputs: the row's position in its input file
DEL = "__lakesort_del"  # a delete file's index in the job's list of delete files
DPATH = "__lakesort_dpath"  # a position delete's data file path
