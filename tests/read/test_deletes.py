"""`layout.read.deletes`: the index answers exactly what Iceberg's rules say, pair by pair (brute force)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from layout.read.deletes import DataRef, DeleteFile, DeleteIndex

PATHS = [f"s3://b/t/data/{i:05d}.parquet" for i in range(6)]


def _delete(i: int, kind: str, spec: int, part: int, seq: int, unpartitioned: bool,
            bounds: tuple | None) -> DeleteFile:
    lo, hi = bounds if bounds is not None else (None, None)
    return DeleteFile(path=f"del-{i}", kind=kind, spec_id=spec, partition=part, sequence_number=seq,
                      record_count=1, size=1, unpartitioned=unpartitioned, path_lo=lo, path_hi=hi)


bounds = st.one_of(st.none(), st.sampled_from(PATHS).map(lambda p: (p, p)),
                   st.tuples(st.sampled_from(PATHS), st.sampled_from(PATHS)).map(lambda t: tuple(sorted(t))))
deletes = st.lists(st.tuples(st.sampled_from(["position", "equality"]), st.integers(0, 1), st.integers(0, 2),
                             st.integers(0, 5), st.booleans(), bounds), max_size=12)
data = st.lists(st.tuples(st.sampled_from(PATHS), st.integers(0, 1), st.integers(0, 2), st.integers(0, 5)),
                min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(deletes, data)
def test_the_index_finds_exactly_the_deletes_the_rules_apply(spec_deletes, spec_data):
    found = [_delete(i, kind, spec, part, seq, glob, b if kind == "position" else None)
             for i, (kind, spec, part, seq, glob, b) in enumerate(spec_deletes)]
    index = DeleteIndex(found)
    refs = [DataRef(path, spec, part, seq) for path, spec, part, seq in spec_data]
    for ref in refs:
        expected = {d.path for d in found if _brute(d, ref)}
        assert {d.path for d in index.for_file(ref)} == expected
    kept = {d.path for d in index.dangling(refs)}
    assert kept == {d.path for d in found if not any(_brute(d, r) for r in refs)}


def _brute(d: DeleteFile, data: DataRef) -> bool:
    """Iceberg's rules, spelled out as the spec words them."""
    same_partition = d.spec_id == data.spec_id and d.partition == data.partition
    if d.kind == "equality":  # "... or the delete file's partition spec is unpartitioned"
        return (same_partition or d.unpartitioned) and data.sequence_number < d.sequence_number
    in_bounds = d.path_lo is None or d.path_lo <= data.path <= d.path_hi
    return same_partition and data.sequence_number <= d.sequence_number and in_bounds


def test_a_file_scoped_position_delete_applies_to_its_file_alone():
    d = _delete(0, "position", 0, 1, 5, False, (PATHS[1], PATHS[1]))
    assert d.file_scoped
    index = DeleteIndex([d])
    assert index.for_file(DataRef(PATHS[1], 0, 1, 5)) == (d,)
    assert index.for_file(DataRef(PATHS[2], 0, 1, 5)) == ()
    assert index.for_file(DataRef(PATHS[1], 0, 1, 6)) == ()  # written after the delete


def test_an_equality_delete_spares_rows_written_with_or_after_it():
    d = _delete(0, "equality", 0, 1, 5, False, None)
    index = DeleteIndex([d])
    assert index.for_file(DataRef(PATHS[0], 0, 1, 4)) == (d,)
    assert index.for_file(DataRef(PATHS[0], 0, 1, 5)) == ()
    assert index.for_file(DataRef(PATHS[0], 1, 1, 4)) == ()  # another spec
