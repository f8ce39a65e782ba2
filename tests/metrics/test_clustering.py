"""Clustering health (`layout.metrics.clustering`, `layout.read.overlap`): each file's overlap depth and
overlaps against a brute force, the Snowflake-style histogram, and real Iceberg tables whose bounds come
from the manifests or, where the manifests have none, from the footers; recorded and read back.

The brute force shares no code with lakesort: the overlap relation written out pairwise, and a file's
depth as the largest set of files that pairwise overlap and include it, found by trying every subset.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout.metrics import store
from layout.metrics.clustering import (
    ClusteringRecord,
    depth_bucket,
    health,
    key_spans,
    measure_clustering,
    read_clustering,
    record_clustering,
    summarize,
)
from layout.read.overlap import overlap_counts, overlap_depth, overlap_depths


def overlaps(a, b) -> bool:
    """Closed ranges that intersect, unless one ends exactly where the other begins; None overlaps all."""
    if None in a or None in b:
        return True
    if a[0] > b[1] or b[0] > a[1]:
        return False
    return not (a[1] == b[0] or b[1] == a[0])


def brute_depths(spans) -> list[int]:
    out = []
    for i in range(len(spans)):
        others = [j for j in range(len(spans)) if j != i]
        best = 1
        for size in range(1, len(others) + 1):
            for group in itertools.combinations(others, size):
                members = (i, *group)
                if all(overlaps(spans[x], spans[y]) for x, y in itertools.combinations(members, 2)):
                    best = max(best, size + 1)
        out.append(best)
    return out


SPANS = st.lists(st.one_of(st.just((None, None)),
                           st.tuples(st.integers(0, 8), st.sampled_from([0, 0, 1, 2, 4])).map(
                               lambda t: (t[0], t[0] + t[1]))), max_size=8)


@settings(max_examples=300, deadline=None)
@given(spans=SPANS)
def test_depths_overlaps_and_histogram_match_brute_force(spans):
    depths = brute_depths(spans)
    assert overlap_depths(spans) == depths
    assert overlap_counts(spans) == [sum(overlaps(s, t) for j, t in enumerate(spans) if j != i)
                                     for i, s in enumerate(spans)]
    if spans:
        assert max(depths) == overlap_depth(spans), "the planner's depth is the deepest file's"
    h = health(spans)
    histogram: dict[int, int] = {}
    for d in depths:
        bucket = d if d <= 16 else 2 ** (d - 1).bit_length()
        histogram[bucket] = histogram.get(bucket, 0) + 1
    assert dict(h.histogram) == histogram and sum(histogram.values()) == len(spans)
    if spans:
        assert h.average_depth == pytest.approx(sum(depths) / len(spans))
        assert h.max_depth == max(depths) and h.files == len(spans)
        assert h.files_unbounded == sum(1 for s in spans if None in s)


def test_buckets_and_a_deep_layout():
    assert [depth_bucket(d) for d in (1, 16, 17, 32, 33, 64, 65)] == [1, 16, 32, 32, 64, 64, 128]
    # 40 files over one range, 10 disjoint after it: depth 40 (bucket 64) and 1
    spans = [(0, 100)] * 40 + [(200 + 10 * i, 205 + 10 * i) for i in range(10)]
    h = health(spans)
    assert h.histogram == ((1, 10), (64, 40)) and h.max_depth == 40
    assert h.average_overlaps == pytest.approx(40 * 39 / 50)
    # touching ranges and repeated single values do not overlap (range partitioning splits a value so)
    assert health([(1, 2), (2, 3), (3, 3), (3, 3)]).max_depth == 1
    assert health([]).files == 0


def record(partition: str, key: str, files: int, depth: float, max_depth: int,
           histogram: dict) -> ClusteringRecord:
    return ClusteringRecord("r", "after", "t.a", 1, dt.datetime(2025, 1, 1, tzinfo=dt.UTC), key, partition,
                            files, 0, 0, depth - 1, depth, max_depth, json.dumps(histogram), 10, 100)


def test_summarize_weights_partitions_by_files():
    rows = [record("p=1", "k", 3, 1.0, 1, {"1": 3}), record("p=2", "k", 1, 5.0, 5, {"5": 1}),
            record("p=1", "v", 4, 2.0, 2, {"2": 4})]
    k, v = summarize(rows)
    assert (k.sort_key, k.partitions, k.files, k.max_depth) == ("k", 2, 4, 5)
    assert k.average_depth == pytest.approx(2.0) and k.histogram == ((1, 3), (5, 1))
    assert [r.partition_path for r in k.deepest] == ["p=2", "p=1"] and v.files == 4
    assert record("p", "k", 1, 1, 1, {}).histogram == ()
    assert dataclasses.replace(rows[0], depth_histogram="not json").histogram == ()  # unreadable: no buckets


# ---- real tables ---------------------------------------------------------------------------------------


def test_bounds_from_the_manifests_per_partition(events):
    """t.events: three appends of 30 days each into monthly partitions; January's files and so on."""
    spans = key_spans(events, ["d", "k"])
    by_partition: dict[str, list] = {}
    for span in spans["k"]:
        by_partition.setdefault(span.partition, []).append((span.lo, span.hi))
    assert set(by_partition) == {"d_month=1995-01", "d_month=1995-02", "d_month=1995-03", "d_month=1995-04"}
    assert sum(s.rows for s in spans["d"]) == 91
    days = sorted((s.lo, s.hi) for s in spans["d"])
    # dates as days, as pyiceberg decodes
    assert days[0][0] == (dt.date(1995, 1, 15) - dt.date(1970, 1, 1)).days
    rows = measure_clustering(events, ["d", "k"], snapshot_id=events.current_snapshot().snapshot_id,
                              run_id="r", phase="on-demand", measured_at=dt.datetime.now(dt.UTC))
    assert {(r.sort_key, r.partition_path) for r in rows} == {(key, p) for key in "dk" for p in by_partition}
    assert all(r.max_depth == 1 and r.average_overlaps == 0 for r in rows), "appends of disjoint days"


def test_files_without_manifest_bounds_get_their_footers(iceberg_catalog):
    """A table written without column metrics (metrics mode none): every bound from the footers, and
    overlapping appends show their depth."""
    iceberg_catalog.create_namespace("m")
    data = pa.table({"k": pa.array(range(100), pa.int64()), "s": pa.array([f"s{i:03d}" for i in range(100)])})
    table = iceberg_catalog.create_table("m.nometrics", schema=data.schema,
                                         properties={"write.metadata.metrics.default": "none"})
    for start in (0, 25, 50):  # three overlapping appends of 50 rows
        table.append(data.slice(start, 50).cast(table.schema().as_arrow()))
    entries = [e.data_file for m in table.current_snapshot().manifests(table.io)
               for e in m.fetch_manifest_entry(table.io)]
    assert all(not d.lower_bounds for d in entries), "the manifests hold no bounds"
    spans = key_spans(table, ["k", "s"])
    assert sorted((s.lo, s.hi) for s in spans["k"]) == [(0, 49), (25, 74), (50, 99)]
    assert sorted(s.lo for s in spans["s"]) == ["s000", "s025", "s050"]
    h = health([(s.lo, s.hi) for s in spans["k"]])
    assert (h.max_depth, h.histogram) == (2, ((2, 3),))


def test_recorded_rows_read_back_and_replace_a_rerun(iceberg_catalog, events):
    snapshot = events.current_snapshot().snapshot_id
    rows = measure_clustering(events, ["k"], snapshot_id=snapshot, run_id="r1", phase="after",
                              measured_at=dt.datetime(2025, 1, 1, tzinfo=dt.UTC))
    assert record_clustering(iceberg_catalog, rows) == len(rows) == 4
    assert record_clustering(iceberg_catalog, rows[:2]) == 2  # a rerun of the same measurement replaces it
    got = read_clustering(iceberg_catalog, "t.events").to_pylist()
    assert sorted(r["partition_path"] for r in got) == sorted(r.partition_path for r in rows[:2])
    assert set(got[0]) == {name for name, _, _ in store.CLUSTERING_FIELDS}
    assert read_clustering(iceberg_catalog, "t.other").num_rows == 0
