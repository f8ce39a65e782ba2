"""The commit's pure values against brute-force oracles: which concurrent delete files are carried or apply
on (`validate.classify`), which dangle once the inputs go (`changes.dangling`), the parts a run commits in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from layout.compaction.commit.changes import dangling
from layout.compaction.commit.state import LiveDelete
from layout.compaction.commit.validate import classify
from layout.compaction.pipeline.commit import parts_of
from layout.manifest import StagedGroup
from layout.read.deletes import DataRef, DeleteFile

PATHS = [f"s3://b/t/data/f{i}.parquet" for i in range(4)]
OUTPUTS = [f"s3://b/t/data/lakesort-staging/r/o{i}.parquet" for i in range(2)]

refs = st.builds(DataRef, path=st.sampled_from(PATHS), spec_id=st.just(0), partition=st.sampled_from("ab"),
                 sequence_number=st.integers(0, 6))


@st.composite
def deletes(draw):
    kind = draw(st.sampled_from(["position", "equality"]))
    scoped = kind == "position" and draw(st.booleans())
    target = draw(st.sampled_from(PATHS)) if scoped else None
    return DeleteFile(path=f"d{draw(st.integers(0, 10**6))}", kind=kind, spec_id=0,
                      partition=draw(st.sampled_from("ab")), sequence_number=draw(st.integers(0, 8)),
                      record_count=1, size=1, unpartitioned=kind == "equality" and draw(st.booleans()),
                      path_lo=target, path_hi=target)


def _applies(d: DeleteFile, ref: DataRef) -> bool:
    """The spec's rule, written out on its own."""
    same = d.partition == ref.partition or (d.kind == "equality" and d.unpartitioned)
    if not same:
        return False
    if d.kind == "equality":
        return ref.sequence_number < d.sequence_number
    return ref.sequence_number <= d.sequence_number and (d.path_lo is None or d.path_lo == ref.path)


@given(st.lists(deletes(), max_size=8, unique_by=lambda d: d.path), st.lists(refs, max_size=4),
       st.integers(0, 8))
def test_classify_matches_the_rule(found, inputs, plan_sequence):
    live = [LiveDelete(d, None) for d in found]  # type: ignore[arg-type]
    carry, equality, concurrent = classify(live, inputs, plan_sequence=plan_sequence)
    later = [d for d in found if d.sequence_number > plan_sequence]
    assert concurrent == len(later)
    applying = [d for d in later if any(_applies(d, r) for r in inputs)]
    assert sorted(d.rule.path for d in carry) == sorted(d.path for d in applying if d.kind == "position")
    assert sorted(d.rule.path for d in equality) == sorted(d.path for d in applying if d.kind == "equality")


@given(st.lists(deletes(), max_size=8, unique_by=lambda d: d.path), st.lists(refs, max_size=4),
       st.integers(0, 8), st.sampled_from("ab"))
def test_dangling_matches_the_rule(found, remaining, plan_sequence, partition):
    outputs = [DataRef(p, 0, partition, plan_sequence) for p in OUTPUTS]
    gone = dangling(found, remaining, outputs)
    expected = [d for d in found
                if not any(_applies(d, r) for r in remaining)
                and not (d.kind == "equality" and any(_applies(d, o) for o in outputs))]
    assert [d.path for d in gone] == [d.path for d in expected]


def test_an_equality_delete_committed_during_the_job_never_dangles_and_one_at_the_plan_does():
    outputs = [DataRef(OUTPUTS[0], 0, "a", 5)]
    during = DeleteFile("during", "equality", 0, "a", 6, 1, 1)
    at_plan = DeleteFile("at-plan", "equality", 0, "a", 5, 1, 1)
    carried_original = DeleteFile("pos", "position", 0, "a", 6, 1, 1, path_lo=PATHS[0], path_hi=PATHS[0])
    assert [d.path for d in dangling([during, at_plan, carried_original], [], outputs)] == ["at-plan", "pos"]


@given(st.lists(st.integers(1, 100), min_size=1, max_size=12), st.one_of(st.none(), st.integers(1, 300)),
       st.one_of(st.none(), st.integers(1, 5)))
def test_parts_keep_the_bounds_and_every_group_once(sizes, max_bytes, max_groups):
    groups = [StagedGroup(group_id=i, partition="", inputs=(), input_rows=0, expected_rows=0, outputs=(),
                          seconds=0.0) for i in range(len(sizes))]
    parts = parts_of(groups, dict(enumerate(sizes)), max_bytes=max_bytes, max_groups=max_groups)
    assert [g.group_id for p in parts for g in p] == list(range(len(sizes)))
    for part in parts:
        assert part
        if len(part) > 1:
            assert max_bytes is None or sum(sizes[g.group_id] for g in part) <= max_bytes
        assert max_groups is None or len(part) <= max_groups
    assert parts == parts_of(groups, dict(enumerate(sizes)), max_bytes=max_bytes, max_groups=max_groups)
