"""Sorted reads merge one stream per chain of files (`layout.read.chains`), against brute force.

Random files of a random key layout (sorted runs of disjoint files, overlapping files, files that touch at
one value, nulls in the key), written by pyarrow into a directory and planned with `layout.read.plan`:
`read_sorted` must give exactly the rows, in key order, that sorting all of them gives; the chains must be
as few as the files' overlap depth (each a sequence of files in strict key order), and never fewer.
"""

from __future__ import annotations

import itertools

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout.read.chains import sorted_chains
from layout.read.plan import plan
from layout.read.scan import read_sorted

span = st.tuples(st.integers(0, 60), st.integers(0, 15), st.integers(1, 6), st.booleans())


def write_files(directory, spans, descending: bool) -> list[list[int | None]]:
    """One file per (start, width, rows, with a null): `rows` keys spread over [start, start + width], sorted
    as the read wants them (nulls last)."""
    contents = []
    for i, (start, width, rows, with_null) in enumerate(spans):
        keys: list[int | None] = sorted((start + (width * j) // max(1, rows - 1) for j in range(rows)),
                                        reverse=descending)
        if with_null and i % 3 == 0:
            keys.append(None)
        table = pa.table({"k": pa.array(keys, pa.int64()), "file": pa.array([i] * len(keys), pa.int32())})
        pq.write_table(table, directory / f"part-{i:03d}.parquet")
        contents.append(keys)
    return contents


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spans=st.lists(span, min_size=1, max_size=8), descending=st.booleans())
def test_a_sorted_read_is_a_full_sort_and_chains_are_as_few_as_the_overlap(
    tmp_path_factory, spans, descending
):
    directory = tmp_path_factory.mktemp("chains")
    contents = write_files(directory, spans, descending)
    p = plan(str(directory), cache=False)
    merged = pa.Table.from_batches(list(read_sorted(p, "k", descending=descending)))
    values = [k for keys in contents for k in keys]
    non_null = sorted((k for k in values if k is not None), reverse=descending)
    got = merged.column("k").to_pylist()
    assert sorted(got, key=lambda k: (k is None, k if k is not None else 0)) == sorted(
        values, key=lambda k: (k is None, k if k is not None else 0)), "the same keys, none lost or repeated"
    assert [k for k in got if k is not None] == non_null, "in key order"

    chains = sorted_chains(p.files, "k", descending=descending)
    assert sorted(f.path for c in chains for f in c) == sorted(f.path for f in p.files)
    bounds = {}
    for keys, f in zip(contents, sorted(p.files, key=lambda f: f.path), strict=True):
        bounds[f.path] = None if None in keys else (min(keys), max(keys))
    for chain in chains:
        if len(chain) > 1:
            for a, b in itertools.pairwise(chain):
                (alo, ahi), (blo, bhi) = bounds[a.path], bounds[b.path]
                assert (ahi < blo) if not descending else (alo > bhi), (
                    "a chain's files follow in strict order")
    # As few as possible: the most files that pairwise share a key value (closed ranges), plus the unbounded.
    known = [b for b in bounds.values() if b is not None]
    deepest = max((sum(lo <= x <= hi for lo, hi in known) for x in range(80)), default=0)
    assert len(chains) == deepest + sum(b is None for b in bounds.values())
