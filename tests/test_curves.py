"""layout.curves against brute-force oracles that share no code with it.

- z-order: a per-row loop over the bits, as jobs/compact.py's Spark expression interleaves them;
- Hilbert: on small grids the map is a bijection whose consecutive indexes are adjacent cells (L1 distance
  1); on large grids a scalar transcription of Skilling's inverse (TransposetoAxes) maps random indexes
  back to cells that hilbert_index maps to the same indexes, and index h + 1 is adjacent to h;
- ranks: a value's cell is the number of boundaries at or below it (counted one by one); ranks are monotone
  and spread skewed samples evenly over the cells;
- min/max ranks: the job's formula evaluated per row in Python floats.

And verification of a curve layout: each key's clustering is reported (informational), not BoundaryOrder.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout import curves
from layout.cli import main
from layout.spec import parse_spec
from layout.verify.clustering import key_clustering
from layout.verify.facts import open_files
from layout.verify.rules import verify_files

# --- oracles ----------------------------------------------------------------------------------------


def zorder_oracle(row: list[int], bits: int) -> int:
    z = 0
    for b in range(bits):
        for i, value in enumerate(row):
            z |= ((value >> b) & 1) << (b * len(row) + i)
    return z


def hilbert_axes(index: int, n: int, bits: int) -> list[int]:
    """Skilling's TransposetoAxes, scalar: the cell of a Hilbert index (the inverse of hilbert_index)."""
    x = [0] * n
    for level in range(bits):  # de-interleave: x[0] holds the most significant bit of each level
        for i in range(n):
            bit = (index >> (level * n + (n - 1 - i))) & 1
            x[i] |= bit << level
    big = 2 << (bits - 1)
    t = x[n - 1] >> 1
    for i in range(n - 1, 0, -1):
        x[i] ^= x[i - 1]
    x[0] ^= t
    q = 2
    while q != big:
        p = q - 1
        for i in range(n - 1, -1, -1):
            if x[i] & q:
                x[0] ^= p
            else:
                t = (x[0] ^ x[i]) & p
                x[0] ^= t
                x[i] ^= t
        q <<= 1
    return x


def cells(n: int, bits: int) -> list[np.ndarray]:
    grid = np.array(list(itertools.product(range(1 << bits), repeat=n)), dtype=np.uint64)
    return [grid[:, i] for i in range(n)]


# --- z-order ----------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_zorder_matches_a_per_row_bit_loop(data):
    n = data.draw(st.integers(1, 4), label="keys")
    bits = data.draw(st.integers(1, 63 // n), label="bits")
    rows = data.draw(st.lists(st.lists(st.integers(0, (1 << bits) - 1), min_size=n, max_size=n),
                              min_size=1, max_size=20), label="rows")
    ranks = [np.array([r[i] for r in rows], dtype=np.uint64) for i in range(n)]
    got = curves.zorder_index(ranks, bits)
    assert got.dtype == np.uint64
    assert [int(v) for v in got] == [zorder_oracle(r, bits) for r in rows]


def test_zorder_refuses_more_than_63_bits():
    with pytest.raises(ValueError, match="curve_bits"):
        curves.zorder_index([np.zeros(1, np.uint64)] * 2, 32)


# --- Hilbert ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "bits"),
                         [(2, 1), (2, 2), (2, 3), (2, 5), (3, 1), (3, 2), (3, 3), (4, 1), (4, 2)])
def test_hilbert_is_a_bijection_of_adjacent_steps_on_small_grids(n, bits):
    axes = cells(n, bits)
    index = curves.hilbert_index(axes, bits)
    assert sorted(int(h) for h in index) == list(range(1 << (n * bits)))
    order = np.argsort(index)
    path = np.stack([a[order].astype(np.int64) for a in axes], axis=1)
    steps = np.abs(np.diff(path, axis=0)).sum(axis=1)
    assert (steps == 1).all()
    assert (path[0] == 0).all()  # the curve starts at the origin


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_hilbert_inverse_round_trips_and_steps_to_neighbours_on_large_grids(data):
    n = data.draw(st.integers(2, 4), label="keys")
    bits = data.draw(st.integers(1, min(curves.DEFAULT_CELL_BITS, 63 // n)), label="bits")
    top = (1 << (n * bits)) - 1
    indexes = data.draw(st.lists(st.integers(0, top - 1), min_size=1, max_size=10), label="indexes")
    here = [hilbert_axes(h, n, bits) for h in indexes]
    after = [hilbert_axes(h + 1, n, bits) for h in indexes]
    ranks = [np.array([cell[i] for cell in here], dtype=np.uint64) for i in range(n)]
    assert [int(v) for v in curves.hilbert_index(ranks, bits)] == indexes
    for a, b in zip(here, after, strict=True):
        assert sum(abs(x - y) for x, y in zip(a, b, strict=True)) == 1


# --- quantile ranks ---------------------------------------------------------------------------------


def count_at_or_below(boundaries: list, value) -> int:
    return sum(1 for b in boundaries if b <= value)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-10**12, 10**12)), min_size=1, max_size=80),
       st.integers(1, 20), st.integers(5, 8))
def test_ranks_are_the_number_of_boundaries_at_or_below_spread_evenly(values, cells_wanted, bits):
    array = pa.array(values, pa.int64())
    boundaries = curves.quantile_boundaries(array, cells_wanted)
    assert len(boundaries) <= cells_wanted - 1
    assert list(boundaries) == sorted(set(boundaries.tolist()))
    got = curves.ranks(array, boundaries, bits)
    cells_made = len(boundaries) + 1
    for value, rank in zip(values, got, strict=True):
        if value is None:
            assert rank == (1 << bits) - 1
        else:
            cell = count_at_or_below(boundaries.tolist(), value)
            assert rank == (cell << bits) // cells_made


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=True), st.text(max_size=20), st.binary(max_size=20)),
                min_size=1, max_size=60).map(
    lambda vs: [v for v in vs if v is None or type(v) is type(next((w for w in vs if w is not None), v))]),
    st.integers(1, 16))
def test_ranks_are_monotone_for_floats_strings_and_binary(values, cells_wanted):
    kinds = {type(v) for v in values if v is not None}
    t = {float: pa.float64(), str: pa.string(), bytes: pa.binary()}.get(
        next(iter(kinds), float), pa.float64()
    )
    array = pa.array(values, t)
    bits = 6
    got = curves.ranks(array, curves.quantile_boundaries(array, cells_wanted), bits, nulls="first")
    present = [(v, r) for v, r in zip(values, got, strict=True) if v is not None]
    nan = float("inf")  # NaN ranks above every number

    def order(v):
        if isinstance(v, float):
            return nan if math.isnan(v) else v
        raw = v.encode() if isinstance(v, str) else v
        return raw[:curves.PREFIX_BYTES].rstrip(b"\0")  # ranked by the first bytes (trailing zeros: padding)

    for (a, ra), (b, rb) in itertools.combinations(present, 2):
        if order(a) < order(b):
            assert ra <= rb
        elif order(a) == order(b):
            assert ra == rb
    assert all(r == 0 for v, r in zip(values, got, strict=True) if v is None)


@pytest.mark.parametrize("sample", ["lognormal", "pareto", "two_spikes_and_tail"])
def test_quantile_ranks_balance_skewed_samples_where_minmax_collapses(sample):
    rng = np.random.default_rng(7)
    n = 200_000
    values = {
        "lognormal": lambda: rng.lognormal(0, 3, n),
        "pareto": lambda: rng.pareto(0.7, n),
        "two_spikes_and_tail": lambda: np.concatenate([rng.normal(0, 1e-3, n // 2),
                                                       rng.normal(1e6, 1e-3, n // 4),
                                                       rng.exponential(1e9, n - n // 2 - n // 4)]),
    }[sample]()
    bits = 6
    boundaries = curves.quantile_boundaries(values, 1 << bits)
    counts = np.bincount(curves.ranks(values, boundaries, bits).astype(np.int64), minlength=1 << bits)
    assert counts.max() <= 1.05 * n / (1 << bits)  # every cell holds about 1/64 of the rows
    minmax = np.bincount(curves.minmax_ranks(pa.array(values), None, None, bits).astype(np.int64),
                         minlength=1 << bits)
    assert minmax.max() >= 0.5 * n  # min/max scaling puts half the rows or more into one cell


def test_ranks_of_dates_timestamps_decimals_and_string_views():
    days = [dt.date(2024, 1, d) for d in range(1, 29)]
    zone = dt.UTC
    columns = [
        pa.array(days, pa.date32()),
        pa.array([dt.datetime(2024, 1, d, 12) for d in range(1, 29)], pa.timestamp("us")),
        pa.array([dt.datetime(2024, 1, d, 12, tzinfo=zone) for d in range(1, 29)], pa.timestamp("ns", "UTC")),
        pa.array([Decimal(f"{d}.25") for d in range(1, 29)], pa.decimal128(10, 2)),
        pa.array([f"key-{d:03d}" for d in range(1, 29)], pa.string_view()),
        pa.array([f"key-{d:03d}".encode() for d in range(1, 29)], pa.large_binary()),
        pa.chunked_array([pa.array(range(14)), pa.array(range(14, 28))]),
        np.arange(28, dtype=np.int32),
    ]
    for column in columns:
        got = curves.ranks(column, curves.quantile_boundaries(column, 4), 2)
        assert got.tolist() == [i * 4 // 28 for i in range(28)], (
            column.type if hasattr(column, "type") else column
        )


def test_ranks_refuse_more_cells_than_bits_hold_and_mixed_types():
    with pytest.raises(ValueError, match="cells"):
        curves.ranks(pa.array([1, 2, 3]), np.array([1, 2, 3, 4]), 2)
    with pytest.raises(TypeError, match="same type"):
        curves.ranks(pa.array(["a"]), np.array([1, 2]), 4)
    with pytest.raises(TypeError, match="cannot rank"):
        curves.quantile_boundaries(pa.array([[1]]), 4)


# --- min/max ranks (the job's z-order before quantiles) ---------------------------------------------


def job_minmax(values: list, bits: int) -> list[int]:
    present = [v for v in values if v is not None]
    lo, hi = (min(present), max(present)) if present else (0.0, 0.0)
    span = (hi - lo) or 1.0
    top = 2**bits - 1
    return [min(top, int((float(hi if v is None else v) - lo) / span * top)) for v in values]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-10**9, 10**9)), min_size=1, max_size=40),
       st.integers(1, 31))
def test_minmax_ranks_match_the_jobs_formula(values, bits):
    assert (curves.minmax_ranks(pa.array(values, pa.int64()), None, None, bits).tolist()
            == job_minmax(values, bits))


def test_minmax_ranks_of_strings_and_dates_as_the_job():
    bits = 31
    text = ["apple", "banana", None, "", "zebra-crossing"]
    expected = []
    for v in text:
        raw = (v if v is not None else "").encode()[:7].ljust(7, b"\0")
        number = float(int.from_bytes(raw, "big")) if v is not None else float(2**56)
        expected.append(min(2**bits - 1, int(number / 2**56 * (2**bits - 1))))
    assert curves.minmax_ranks(pa.array(text), None, None, bits).tolist() == expected
    days = [dt.date(2020, 1, 1), dt.date(2020, 1, 11), dt.date(2020, 1, 2)]
    got = curves.minmax_ranks(pa.array(days), dt.date(2020, 1, 1), dt.date(2020, 1, 11), 4)
    assert got.tolist() == [0, 15, 1]


# --- the composition --------------------------------------------------------------------------------


def test_curve_index_ranks_then_combines():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 1000, 500), rng.lognormal(0, 2, 500)
    bounds = [curves.quantile_boundaries(a, 1 << 8), curves.quantile_boundaries(b, 1 << 8)]
    for strategy, combine in (("zorder", curves.zorder_index), ("hilbert", curves.hilbert_index)):
        got = curves.curve_index([a, b], bounds, strategy=strategy, bits=8)
        want = combine([curves.ranks(a, bounds[0], 8), curves.ranks(b, bounds[1], 8)], 8)
        assert np.array_equal(got, want)
    assert curves.curve_bits(2) == 16 and curves.curve_bits(4) == 15
    with pytest.raises(ValueError, match="strategy"):
        curves.curve_index([a], [bounds[0]], strategy="linear")  # type: ignore[arg-type]


# --- verification of curve layouts ------------------------------------------------------------------


def test_curve_layouts_report_each_keys_clustering_instead_of_boundary_order(tmp_path, capsys):
    rng = np.random.default_rng(5)
    n = 16_000
    data = pa.table({"x": rng.integers(0, 10**6, n), "y": rng.integers(0, 10**6, n)})
    bits = curves.curve_bits(2)
    bounds = [curves.quantile_boundaries(data.column(c), 1 << bits) for c in ("x", "y")]
    index = curves.curve_index([data.column("x"), data.column("y")], bounds, strategy="hilbert")
    layouts = {"hilbert": np.argsort(index, kind="stable"), "random": rng.permutation(n)}
    paths = {}
    for name, order in layouts.items():
        (tmp_path / name).mkdir()
        paths[name] = []
        for i, chunk in enumerate(np.array_split(order, 4)):
            path = tmp_path / name / f"{i}.parquet"
            pq.write_table(data.take(pa.array(chunk)), path, row_group_size=1000, write_page_index=True,
                           max_rows_per_page=250)
            paths[name].append(str(path))
    spec = parse_spec({"table": "t.c", "owner": {"name": "t", "email": "t@example.com"},
                       "sort": {"strategy": "hilbert", "keys": [{"column": "x"}, {"column": "y"}]}})
    report = verify_files(paths["hilbert"], spec)
    assert report.ok and not [f for f in report.findings if f.rule == "boundary_order"]
    found = [f for f in report.findings if f.rule == "clustering"]
    assert [(f.column, f.severity) for f in found] == [("x", "info"), ("y", "info")]
    assert ("a point lookup touches" in found[0].observed
            and "BoundaryOrder is not checked" in found[0].diagnosis)
    for column in ("x", "y"):
        clustered = key_clustering(open_files(paths["hilbert"], None), column)
        scattered = key_clustering(open_files(paths["random"], None), column)
        assert (clustered.files, clustered.row_groups, clustered.lookups) == (4, 16, 16)
        assert scattered.lookup_share > 0.8 and scattered.row_group_depth_average > 12
        assert clustered.lookup_share < 0.4 and clustered.row_group_depth_average < 8
    linear = parse_spec({"table": "t.c", "owner": {"name": "t", "email": "t@example.com"},
                         "sort": {"keys": [{"column": "x"}]}})
    assert not [f for f in verify_files(paths["random"], linear).findings if f.rule == "clustering"]
    spec_path = tmp_path / "c.yaml"
    spec_path.write_text("table: t.c\nowner: {name: t, email: t@example.com}\n"
                         "sort: {strategy: zorder, keys: [{column: x}, {column: y}]}\n")
    assert main(["-q", "verify", str(tmp_path / "hilbert"), "--spec", str(spec_path)]) == 0
    out = capsys.readouterr().out
    assert "[clustering]" in out and "column x" in out and "a zorder layout" in out
