"""The planner on merge-on-read partitions: files whose deletes pass the spec's thresholds are rewritten with
their delete files, which the group carries; the rest follow today's reasons. Synthetic manifest entries (pure
logic); tables written by Iceberg's own writers are in tests/interop/test_iceberg_deletes.py."""

from __future__ import annotations

from layout.compaction.planning.planner import _decide, _Entry, _pack
from layout.read.deletes import DeleteFile
from layout.spec import parse_spec

OWNER = {"name": "Test Team", "email": "test@example.com"}
HASH = "hash"


def make_spec(**overrides):
    doc = {"table": "t.events", "owner": OWNER, "sort": {"keys": [{"column": "k"}]},
           "target_file_size": "1MiB", "max_sorted_runs": 1}
    doc.update(overrides)
    return parse_spec(doc, source="test-spec")


def entry(path: str, lo: int, hi: int, *, rows: int = 100, size: int = 900_000) -> _Entry:
    # Written by lakesort under this spec (the path's stamp is not needed: `ours` names its snapshot).
    return _Entry(path=path, size=size, rows=rows, content=0, partition="part=a", snapshot_id=1,
                  sequence_number=1, lo=lo, hi=hi)


OURS = {1: {"lakesort.run-id": "r1", "lakesort.spec-hash": HASH, "snapshot.timestamp-ms": "0"}}


def position(path: str, target: str | None, rows: int, seq: int = 2) -> DeleteFile:
    return DeleteFile(path=path, kind="position", spec_id=0, partition="[]", sequence_number=seq,
                      record_count=rows, size=10, path_lo=target, path_hi=target)


def test_a_file_past_the_delete_ratio_is_rewritten_with_its_deletes():
    files = [entry("f1", 0, 10), entry("f2", 20, 30)]
    deletes = {"f1": (position("d1", "f1", 30),), "f2": (position("d2", "f2", 10),)}
    decision, chosen = _decide("part=a", files, OURS, make_spec(), False, "k", HASH, deletes=deletes)
    assert decision.action == "rewrite"
    assert [e.path for e in chosen] == ["f1"]  # 30% deleted: Iceberg's default ratio 0.3; f2 (10%) stays
    assert (decision.delete_files, decision.delete_rows) == (2, 40)
    assert "past the thresholds" in decision.reasons[0] and "delete_ratio_threshold" in decision.reasons[0]
    (group,) = _pack("part=a", chosen, make_spec(), decision.reasons, 0, deletes)
    assert [d.path for d in group.deletes] == ["d1"] and group.delete_rows == 30
    assert group.inputs[0].sequence_number == 1


def test_partition_scoped_deletes_count_by_files_not_ratio():
    files = [entry("f1", 0, 10), entry("f2", 20, 30)]
    shared = tuple(position(f"d{i}", None, 90) for i in range(3))  # no path bounds: rows unknown per file
    deletes = {"f1": shared, "f2": shared}
    assert _decide("part=a", files, OURS, make_spec(), False, "k", HASH, deletes=deletes)[0].action == "skip"
    decision, chosen = _decide("part=a", files, OURS, make_spec(delete_file_threshold=3), False, "k", HASH,
                               deletes=deletes)
    assert decision.action == "rewrite" and {e.path for e in chosen} == {"f1", "f2"}
    assert "delete_file_threshold" in decision.reasons[0]
    (group,) = _pack("part=a", chosen, make_spec(), decision.reasons, 0, deletes)
    assert len(group.deletes) == 3  # each delete file once, though it applies to both inputs


def test_deletes_under_the_thresholds_ride_along_with_a_rewrite_for_other_reasons():
    files = [entry("f1", 0, 10), entry("f2", 5, 30)]  # overlapping: rewritten
    deletes = {"f2": (position("d2", "f2", 1),)}
    decision, chosen = _decide("part=a", files, OURS, make_spec(), False, "k", HASH, deletes=deletes)
    assert decision.action == "rewrite" and {e.path for e in chosen} == {"f1", "f2"}
    (group,) = _pack("part=a", chosen, make_spec(), decision.reasons, 0, deletes)
    assert [d.path for d in group.deletes] == ["d2"]
