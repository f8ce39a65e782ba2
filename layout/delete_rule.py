"""Iceberg's rule of which delete file applies to which data file, written once.

The spec (format v2, "Scan Planning"): a delete file applies to a data file when the partition rule holds
(the data file's partition, spec and values, is the delete file's; or the delete is global: an equality delete
of an unpartitioned spec) and the sequence rule holds (a position delete: the data file's data sequence number
is at most the delete's; an equality delete: strictly lower). A position delete also names its data files by
path, which each caller matches its own way (bounds of `file_path`, or a join on it).

`applies` is one expression over its operands' `<`, `<=`, `&` and `|`, so the same code is the rule on plain
values (the planner, the commit, the measurement: `layout.read.deletes`) and on Spark columns (the job's
joins: `jobs/compaction/deletes.py`). Operands are never combined with `and`/`or`, which columns refuse.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["Kind", "applies"]

Kind = Literal["position", "equality"]


def applies(kind: Kind, *, data_sequence: Any, delete_sequence: Any, same_partition: Any,
            delete_global: Any) -> Any:
    """Whether a delete of `kind` applies by sequence number and partition (paths aside): a bool for plain
    values, a boolean Column for Spark columns. `delete_global` must be false for position deletes."""
    if kind == "position":
        by_sequence = data_sequence <= delete_sequence
    else:
        by_sequence = data_sequence < delete_sequence
    return by_sequence & (delete_global | same_partition)
