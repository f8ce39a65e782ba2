"""The ideal read of a probe (`layout.metrics.ideal`) on files whose answer is known: exact on random files
and predicates (a property, against the brute force of tests/metrics/pruning_oracle.py, page row boundaries
also known by construction, pyarrow's `max_rows_per_page`), and beyond its row-group budget a ratio
estimate from a seeded sample: evaluating every row group gives the exact figures, the same plan gives the
same sample, estimates never exceed the selection, and on generated tables they stay within the standard
error they report (`within_tolerance`)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings, target
from hypothesis import strategies as st
from pruning_oracle import SAMPLED, BruteForce, generated_table, within_tolerance

from layout.errors import UsageError
from layout.metrics.clustered import clustered_read
from layout.metrics.ideal import Ideal, estimate, ideal
from layout.metrics.measure import measure_probe
from layout.metrics.probes import Probe
from layout.read.plan import plan

# ---- property: on any files and predicate, the ideal and the matching rows are exact ---------------

# (SQL, predicate columns, the predicate in Python) from (lo, hi, s): NULL compares as unknown (None).
PREDICATES: dict[str, Callable[[int, int, str], tuple[str, list[str], Callable[[dict], bool | None]]]] = {
    "between": lambda lo, hi, s: (
        f"k BETWEEN {lo} AND {hi}", ["k"],
        lambda r: None if r["k"] is None else lo <= r["k"] <= hi),
    "not_between": lambda lo, hi, s: (
        f"NOT (k BETWEEN {lo} AND {hi})", ["k"],
        lambda r: None if r["k"] is None else not lo <= r["k"] <= hi),
    "in": lambda lo, hi, s: (
        f"k IN ({lo}, {hi}, {lo + 7})", ["k"],
        lambda r: None if r["k"] is None else r["k"] in (lo, hi, lo + 7)),
    "or_string": lambda lo, hi, s: (
        f"k BETWEEN {lo} AND {hi} OR s = '{s}'", ["k", "s"],
        lambda r: (r["k"] is not None and lo <= r["k"] <= hi) or r["s"] == s),
    "is_null": lambda lo, hi, s: ("k IS NULL", ["k"], lambda r: r["k"] is None),
}
STRINGS = ("a", "bb", "c" * 30, "d" * 200)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(num_rows=st.integers(1, 400), seed=st.integers(0, 2**32 - 1),
       null_fraction=st.sampled_from([0, 0.1, 0.5]), lo=st.integers(-60, 60), width=st.integers(0, 40),
       sort=st.booleans(), strings=st.lists(st.sampled_from(STRINGS), min_size=1, max_size=8),
       shape=st.sampled_from(sorted(PREDICATES)), projection=st.sampled_from([None, ("v",), ("s",), ("k",)]),
       n_files=st.integers(1, 2), row_group_size=st.integers(1, 150) | st.just(1000),
       page_rows=st.integers(1, 6) | st.integers(1, 40), dictionary=st.sampled_from([True, False, ["s"]]),
       page_version=st.sampled_from(["1.0", "2.0"]), budget=st.integers(1, 12))
def test_ideal_is_exact_on_random_files(tmp_path_factory, num_rows, seed, null_fraction, lo, width, sort,
                                        strings, shape, projection, n_files, row_group_size, page_rows,
                                        dictionary, page_version, budget):
    directory = tmp_path_factory.mktemp("prop")
    rng = random.Random(seed)
    values = [None if rng.random() < null_fraction else rng.randint(-50, 50) for _ in range(num_rows)]
    keys = sorted(values, key=lambda v: (v is None, v or 0)) if sort else values
    data = pa.table({"k": pa.array(keys, pa.int64()),
                     "v": pa.array(range(len(values)), pa.int64()),
                     "s": pa.array([strings[i % len(strings)] for i in range(len(values))], pa.string())})
    # Page row boundaries known by construction: at most `page_rows` rows a page, pages far below 1 MiB.
    bounds = [round(f * len(values) / n_files) for f in range(n_files + 1)]
    paths = []
    for f in range(n_files):
        path = str(directory / f"part-{f}.parquet")
        pq.write_table(data.slice(bounds[f], bounds[f + 1] - bounds[f]), path, row_group_size=row_group_size,
                       max_rows_per_page=page_rows, data_page_size=1 << 20, write_page_index=True,
                       use_dictionary=dictionary, data_page_version=page_version)
        paths.append(path)
    where, columns, match = PREDICATES[shape](lo, lo + width, strings[0])
    m = measure_probe(str(directory), Probe("p", where, projection), run_id="t", phase="on-demand",
                      ideal_row_groups=None)
    assert m.ideal_method == "exact"

    brute = BruteForce(page_rows)
    pages, nbytes, matching = brute.ideal(paths, columns, match, projection)
    assert m.rows_matching == matching, where
    assert (m.pages_ideal, m.bytes_ideal) == (pages, nbytes), f"{where}, columns {projection}"
    assert m.efficiency == (nbytes / m.bytes_selected if m.bytes_selected else 1.0)
    assert (m.pages_total, m.bytes_total) == brute.totals(paths, columns, projection)
    assert m.bytes_ideal <= m.bytes_selected and m.pages_ideal <= m.pages_selected
    assert (m.bytes_ideal == 0) == (matching == 0)
    event("ideal < selected" if m.pages_ideal < m.pages_selected else "ideal = selected")
    target(m.pages_selected - m.pages_ideal)  # steer towards selected pages without a match
    planned = plan(str(directory), where, projection, cache=False)
    check_sampled(planned, Ideal(pages, nbytes, matching, "exact"), budget)
    # The clustered ideal scales the columns' rows, pages and bytes of the selected row groups (the oracle's,
    # from the page headers) to the matching rows (its formula is checked in tests/metrics/test_clustered.py).
    rates = brute.rates([(f.path, rg.index) for f in planned.files for rg in f.row_groups],
                        columns, projection)
    expected = clustered_read(matching, m.rows_total, rates)
    assert (m.pages_clustered, m.bytes_clustered) == (expected.pages, expected.bytes), where
    assert (m.efficiency_clustered
            == (min(1.0, expected.bytes / m.bytes_selected) if m.bytes_selected else 1.0))


def check_sampled(planned, exact: Ideal, budget: int) -> None:
    """Under the budget the ideal is exact; over it, a deterministic sample of `budget` row groups whose
    estimates stay within the selection; estimating from every row group gives the exact figures."""
    units = [(f, rg) for f in planned.files for rg in f.row_groups]
    c = planned.counts
    assert estimate(planned, units, len(units)) == exact, "the ratio estimate over every row group is exact"
    got = ideal(planned, row_groups=budget)
    if len(units) <= budget:
        assert got == exact
        return
    event("sampled")
    assert got == ideal(planned, row_groups=budget), "the same plan, the same sample"
    m = SAMPLED.fullmatch(got.method)
    assert m and (int(m.group(1)), int(m.group(2))) == (budget, len(units)), got.method
    assert got.pages <= c.pages_selected and got.bytes <= c.bytes_selected and got.rows <= c.rows_selected
    assert (got.rows == 0) == (got.bytes == 0) == (got.pages == 0) == (m.group(4) is not None), got
    if exact.rows == 0:
        assert got == Ideal(0, 0, 0, got.method), "no match anywhere: none in the sample"



# ---- a sampled ideal against the exact one on generated tables ---------------------------------------------


@pytest.mark.parametrize("sort", [False, True], ids=["scattered", "sorted"])
@pytest.mark.parametrize("where", ["k BETWEEN 1000 AND 1999", "k BETWEEN 5000 AND 5099",
                                   "k IN (17, 4242, 9000)", "NOT (k BETWEEN 2000 AND 7999)"])
def test_a_sampled_ideal_is_near_the_exact_one(tmp_path, sort, where):
    """Over the budget (40 of 400 row groups where all are selected), the estimate is deterministic and
    within the tolerance stated by `within_tolerance` of the exact figures; rows matching within the same
    relative error as the efficiency."""
    directory = generated_table(tmp_path, sort=sort)
    planned = plan(str(directory), where, cache=False)
    exact = ideal(planned, row_groups=None)
    got = ideal(planned, row_groups=40)
    assert exact.method == "exact"
    assert got == ideal(plan(str(directory), where, cache=False), row_groups=40), "deterministic"
    with pytest.raises(UsageError, match="budget must be at least 1"):
        ideal(planned, row_groups=0)
    c = planned.counts
    if c.row_groups_selected <= 40:  # the column index pruned the sorted table below the budget
        assert got == exact
        return
    assert SAMPLED.fullmatch(got.method), got.method
    assert within_tolerance(got.bytes / c.bytes_selected, exact.bytes / c.bytes_selected,
                            got.method), (got, exact)
    assert within_tolerance(got.rows / c.rows_selected, exact.rows / c.rows_selected, got.method), (got,
                                                                                                  exact)


