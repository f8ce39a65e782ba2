"""The layout advisor (`lakesort advise`): its ranking checked against ground truth on real Iceberg tables.

The ground truth is a brute force that shares no layout code with the advisor (`oracle_bytes`): the
whole table (not a sample) sorted by the candidate with pyarrow (curves through `layout.curves`, tested
on its own in test_curves.py), cut into the files the rewrite planner would give it, written with the
spec's page row limit, and every probe planned on it. Three tables show the ranking is right:

- `a` probed heavily, `b` rarely: a linear sort on `a` wins;
- two independent columns probed alike: a curve wins over any linear sort;
- a skewed key: z-order on quantile ranks beats z-order scaled by min/max (the job's before).

On each, the recommendation reads at most 10% more than the best candidate by the brute force, and the
predicted bytes (from a quarter of the rows) are close to the brute force's.
"""

from __future__ import annotations

import contextlib
import html
import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml
from pyiceberg.exceptions import NamespaceAlreadyExistsError
from pyiceberg.transforms import IdentityTransform

from layout import curves
from layout.advise import advise, last_advice
from layout.advise.candidates import Candidate, candidates
from layout.advise.render import render_advice
from layout.advise.result import Advice, CandidateAdvice, spec_snippet
from layout.advise.sample import _shares, sample_table
from layout.advise.simulate import CandidateLayout, _cuts, _write, files_for, shape_of
from layout.cli import EXIT_OK, EXIT_USAGE, main
from layout.errors import UsageError
from layout.read.plan import plan
from layout.spec import SortKey, parse_spec

ROWS = 40_000
PAGE_ROWS = 400
SAMPLE = ROWS // 4


def make_spec(name: str, probes: list[dict], **extra) -> dict:
    return {"table": f"t.{name}", "owner": {"name": "t", "email": "t@example.com"},
            "target_file_size": "256KiB",
            "writer": {"page_row_count_limit": PAGE_ROWS, "compression": "zstd", "dictionary": False},
            "probes": probes, **extra}


def build(catalog, name: str, data: pa.Table, appends: int = 4, partition: str | None = None):
    """t.<name> from `data` in `appends` unsorted appends (each a small file per partition)."""
    with contextlib.suppress(NamespaceAlreadyExistsError):
        catalog.create_namespace("t")
    table = catalog.create_table(f"t.{name}", schema=data.schema)
    if partition:
        with table.update_spec() as update:
            update.add_field(partition, IdentityTransform(), f"{partition}_part")
    for part in np.array_split(np.arange(data.num_rows), appends):
        table.append(data.take(pa.array(part)).cast(table.schema().as_arrow()))
    return table


def oracle_bytes(table, spec, candidate: Candidate, directory: Path) -> dict[str, int]:
    """The probes' bytes on the whole table laid out as `candidate` (see the module docstring)."""
    full = table.scan().to_arrow()
    files = [t.file for t in table.scan().plan_files()]
    n_files = max(1, math.ceil(sum(f.file_size_in_bytes for f in files) / spec.target_file_size))
    columns = [full.column(c) for c in candidate.columns]
    if candidate.strategy == "linear":
        order = pc.sort_indices(full, sort_keys=[(c, "ascending") for c in candidate.columns]).to_numpy()
    elif candidate.scaling == "minmax":
        bits = 62 // len(columns)
        index = curves.zorder_index([curves.minmax_ranks(c, None, None, bits) for c in columns], bits)
        order = np.argsort(index, kind="stable")
    else:
        bits = curves.curve_bits(len(columns))
        bounds = [curves.quantile_boundaries(c, 1 << bits) for c in columns]
        order = np.argsort(curves.curve_index(columns, bounds, strategy=candidate.strategy, bits=bits),
                           kind="stable")
    directory.mkdir(parents=True)
    for i, chunk in enumerate(np.array_split(order, n_files)):
        pq.write_table(full.take(pa.array(chunk)), directory / f"{i:03d}.parquet", row_group_size=len(chunk),
                       max_rows_per_page=PAGE_ROWS, data_page_size=1 << 30, compression="zstd",
                       use_dictionary=False, write_page_index=True)
    return {p.name: plan(str(directory), p.where, p.columns, cache=False).counts.bytes_selected
            for p in spec.probes}


def as_candidate(c: CandidateAdvice) -> Candidate:
    return Candidate(c.strategy, c.sort_keys, c.scaling, c.origin)


def check_against_oracle(advice: Advice, table, spec, tmp_path: Path, *,
                         tolerance: float) -> dict[str, float]:
    """Every candidate laid out by brute force: the recommendation is within 10% of the best, and each
    prediction within `tolerance` of its truth in total. Returns the weighted truth per label."""
    truth = {}
    weights = {p.name: p.weight for p in spec.probes}
    for i, c in enumerate(c for c in advice.candidates if c.strategy != "current"):
        got = oracle_bytes(table, spec, as_candidate(c), tmp_path / f"oracle{i}")
        truth[c.label] = sum(weights[p] * b for p, b in got.items())
        assert abs(c.total_bytes / truth[c.label] - 1) <= tolerance, (c.label, c.predicted_bytes, got)
    chosen = advice.recommendation
    assert chosen is not None and chosen.action != "keep-layout"
    assert truth[chosen.label] <= 1.10 * min(truth.values()), (chosen.label, truth)
    assert abs(chosen.total_bytes / truth[chosen.label] - 1) <= 0.25, (chosen.label, truth)
    return truth


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def test_linear_sort_on_the_heavily_probed_column_wins(iceberg_catalog, rng, tmp_path):
    data = pa.table({"a": rng.permutation(ROWS * 10)[:ROWS].astype(np.int64),
                     "b": rng.integers(0, 10**9, ROWS),
                     "payload": pa.array([f"row-{i:08d}" for i in rng.permutation(ROWS)])})
    a_values = data.column("a").to_pylist()
    probes = [{"name": "a_point", "where": f"a = {a_values[7]}", "weight": 5},
              {"name": "a_range", "where": f"a BETWEEN {a_values[9]} AND {a_values[9] + 4000}", "weight": 5},
              {"name": "b_point", "where": f"b = {data.column('b')[3].as_py()}", "weight": 0.2}]
    table = build(iceberg_catalog, "lin", data)
    spec = parse_spec(make_spec("lin", probes))
    advice = advise("t.lin", spec=spec, sample_rows=SAMPLE, record=False)
    chosen = advice.recommendation
    assert chosen.strategy == "linear" and chosen.keys[0] == "a", render_advice(advice)
    truth = check_against_oracle(advice, table, spec, tmp_path, tolerance=0.3)
    assert min(truth, key=truth.get).startswith("linear(a")


def test_a_curve_wins_when_two_independent_columns_are_probed_alike(iceberg_catalog, rng, tmp_path):
    data = pa.table({"x": rng.integers(0, 10**6, ROWS), "y": rng.integers(0, 10**6, ROWS),
                     "payload": pa.array([f"row-{i:08d}" for i in range(ROWS)])})
    probes = [{"name": "x_point", "where": f"x = {data.column('x')[5].as_py()}"},
              {"name": "y_point", "where": f"y = {data.column('y')[6].as_py()}"},
              {"name": "x_range", "where": "x BETWEEN 200000 AND 210000"},
              {"name": "y_range", "where": "y BETWEEN 500000 AND 510000"}]
    table = build(iceberg_catalog, "xy", data)
    spec = parse_spec(make_spec("xy", probes))
    advice = advise("t.xy", spec=spec, sample_rows=SAMPLE, record=False)
    assert advice.recommendation.strategy in ("zorder", "hilbert"), render_advice(advice)
    truth = check_against_oracle(advice, table, spec, tmp_path, tolerance=0.3)
    best_linear = min(v for k, v in truth.items() if k.startswith("linear"))
    assert truth[advice.recommendation.label] < 0.7 * best_linear


def test_quantile_zorder_beats_minmax_zorder_on_skewed_keys(iceberg_catalog, rng, tmp_path):
    dense = rng.integers(0, 2_000, ROWS)
    tail = rng.integers(0, 10**12, ROWS)
    x = np.where(rng.random(ROWS) < 0.97, dense, tail)  # 97% of the rows in 2e-9 of the range
    data = pa.table({"x": x, "y": rng.integers(0, 10**6, ROWS),
                     "payload": pa.array([f"row-{i:08d}" for i in range(ROWS)])})
    probes = [{"name": "x_point", "where": f"x = {int(dense[3])}"},
              {"name": "x_range", "where": "x BETWEEN 100 AND 140"},
              {"name": "y_point", "where": f"y = {data.column('y')[8].as_py()}"}]
    table = build(iceberg_catalog, "skew", data)
    spec = parse_spec(make_spec("skew", probes))
    advice = advise("t.skew", spec=spec, sample_rows=SAMPLE, record=False, minmax=True)
    by_label = {c.label: c for c in advice.candidates}
    quantile, minmax = by_label["zorder(x, y)"], by_label["zorder min/max(x, y)"]
    assert quantile.total_bytes < 0.6 * minmax.total_bytes, render_advice(advice)
    assert quantile.rank < minmax.rank
    truth = check_against_oracle(advice, table, spec, tmp_path, tolerance=0.3)
    assert truth["zorder(x, y)"] < 0.6 * truth["zorder min/max(x, y)"]


# --- partitioned tables, the sample, the cut -------------------------------------------------------


def test_partitioned_tables_are_sampled_per_partition_and_files_never_mix_partitions(
    iceberg_catalog, rng, tmp_path
):
    groups = np.repeat(np.array(["a", "b", "c"]), [20_000, 6_000, 1_000])
    rng.shuffle(groups)
    data = pa.table({"g": pa.array(groups), "x": rng.integers(0, 10**6, len(groups)),
                     "y": rng.integers(0, 10**6, len(groups))})
    table = build(iceberg_catalog, "parts", data, partition="g")
    probes = [{"name": "x_point", "where": f"x = {data.column('x')[0].as_py()}"},
              {"name": "y_point", "where": f"y = {data.column('y')[1].as_py()}"}]
    spec = parse_spec(make_spec("parts", probes, target_file_size="64KiB"))
    sample = sample_table(table, rows=2_700, seed=3)
    shares = {p.label: (p.rows, p.sample_rows) for p in sample.partitions}
    assert shares == {"g_part=a": (20_000, 2_000), "g_part=b": (6_000, 600), "g_part=c": (1_000, 100)}
    labels = np.array([p.label for p in sample.partitions])[sample.partition]
    assert (labels == np.char.add("g_part=", sample.data.column("g").to_numpy(zero_copy_only=False))).all()
    assert sample_table(table, rows=2_700, seed=3).data.equals(sample.data)  # seeded
    chosen = candidates(spec, table.schema())
    layout = CandidateLayout.prepare(sample, spec, chosen)
    assert [s.files for s in layout.shapes] == [files_for(p.bytes, spec) for p in sample.partitions]
    hilbert = next(c for c in chosen if c.strategy == "hilbert")
    files, _, _ = _write(layout, hilbert, tmp_path / "laid")
    assert files == sum(s.files for s in layout.shapes)
    for path in (tmp_path / "laid").rglob("*.parquet"):
        assert len(pc.unique(pq.read_table(path, columns=["g"]).column("g"))) == 1, path
    advice = advise("t.parts", spec=spec, sample_rows=2_700, seed=3, record=False)
    assert advice.recommendation.strategy in ("zorder", "hilbert")


def test_shares_add_up_and_follow_the_rows():
    assert _shares([10, 30, 60], 10) == [1, 3, 6]
    assert _shares([1, 1, 1], 2) in ([1, 1, 0], [1, 0, 1], [0, 1, 1])
    assert sum(_shares([7, 13, 1, 0, 5], 11)) == 11
    assert _shares([5, 5], 100) == [5, 5]


def test_the_sample_keeps_the_tables_files_row_groups_and_pages(tmp_path):
    from layout.advise.sample import PartitionShare

    spec = parse_spec(make_spec("x", [], target_file_size="1MiB", max_group_size="4MiB",
                                writer={"row_group_size": "256KiB", "page_row_count_limit": 1000}))
    assert files_for(10 * 2**20, spec) == 4 + 4 + 2  # two full 4MiB groups, then 2MiB
    share = PartitionShare("p", rows=400_000, bytes=3 * 2**20, sample_rows=100_000)
    shape = shape_of(share, spec, uncompressed_bytes_per_row=32)  # 8192 rows fill a row group
    table_rows_per_file = 400_000 / 3
    assert shape.files == 3
    assert shape.page_rows == 250  # 1000 x f
    assert shape.row_group_rows == 8192 / 4
    # row groups
    assert math.ceil(100_000 / 3 / shape.row_group_rows) == math.ceil(table_rows_per_file / 8192)
    assert math.ceil(shape.row_group_rows / shape.page_rows) == math.ceil(8192 / 1000)  # pages per row group
    assert shape.pages_kept
    tiny = shape_of(PartitionShare("p", rows=10**9, bytes=2**30, sample_rows=10**5), spec, 32)
    assert tiny.page_rows == 1 and not tiny.pages_kept


def test_file_cuts_keep_equal_keys_together():
    keys = np.array([1, 1, 1, 2, 2, 3, 4, 4, 4, 4])  # sorted keys; a run of 4s at the end
    change = np.concatenate([[True], keys[1:] != keys[:-1]])
    assert _cuts(0, 10, 3, change) == [0, 3, 10]  # cut at 3 (a run starts there); 7 is inside the 4s
    assert _cuts(0, 10, 2, change) == [0, 5, 10]
    assert _cuts(0, 10, 1, change) == [0, 10]
    assert _cuts(0, 10, 10, np.array([True] + [False] * 9)) == [0, 10]  # one key: one file


# --- candidates, the result, the history, the command line ------------------------------------------


def test_candidates_from_the_probes_deduplicated_and_capped(iceberg_catalog, rng):
    data = pa.table({"a": rng.integers(0, 100, 1000), "b": rng.integers(0, 100, 1000),
                     "c": pa.array(["x"] * 1000), "flag": pa.array([True] * 1000),
                     "raw": pa.array([b"r"] * 1000)})
    table = build(iceberg_catalog, "cands", data, appends=1)
    probes = [{"name": "p1", "where": "a = 1 AND flag", "weight": 3},
              {"name": "p2", "where": "b = 2 OR c = 'x'"},
              {"name": "p3", "where": "raw = X'72' AND c = 'y'", "weight": 2}]
    spec = parse_spec(make_spec("cands", probes, sort={"keys": [{"column": "a"}]}))
    chosen = candidates(spec, table.schema(), (SortKey(column="a"),), minmax=True, max_candidates=100)
    labels = [c.label for c in chosen]
    # weights: a 3 + flag 3, c 3, raw 2, b 1: the four most weighted sortable columns; curves leave out
    # boolean and binary columns
    assert labels[:5] == ["linear(a)", "linear(flag)", "linear(c)", "linear(raw)", "zorder(a, c)"]
    assert chosen[0].origin == "spec" and labels.count("linear(a)") == 1
    assert "zorder min/max(a, c)" in labels and "hilbert(a, c)" in labels
    assert not any("b" in c.columns for c in chosen)  # the fifth column is left out (MAX_COLUMNS)
    assert not any(c.strategy != "linear" and {"flag", "raw"} & set(c.columns) for c in chosen)
    few = candidates(spec, table.schema(), (), runs={"a": 0.01, "flag": 5, "c": 5, "raw": 5},
                     max_candidates=100)
    assert not any(c.strategy == "linear" and c.columns[:1] == ("a",) and len(c.columns) == 2 for c in few)
    assert any(c.label == "linear(c, a)" for c in few)
    assert len(candidates(spec, table.schema(), (), max_candidates=6)) == 6


def test_spec_snippets_apply_as_table_specs():
    for strategy, keys in (("hilbert", (SortKey(column="a"), SortKey(column="b"))),
                           ("linear",
                            (SortKey(column="a", direction="desc"), SortKey(column="b", nulls="last")))):
        snippet = spec_snippet(strategy, keys)
        spec = parse_spec({**yaml.safe_load(snippet), "table": "t.x",
                           "owner": {"name": "t", "email": "t@e.com"}})
        assert spec.sort.strategy == strategy and spec.sort.keys == keys


def test_the_advice_is_recorded_and_the_last_one_read_back(iceberg_catalog, rng, tmp_path):
    data = pa.table({"x": rng.integers(0, 10**6, 4_000), "y": rng.integers(0, 10**6, 4_000)})
    build(iceberg_catalog, "hist", data, appends=2)
    spec = parse_spec(make_spec("hist", [{"name": "x_point", "where": "x = 5", "weight": 2},
                                         {"name": "y_point", "where": "y = 7"}]))
    assert last_advice(iceberg_catalog, "t.hist") is None
    first = advise("t.hist", spec=spec, sample_rows=1_000)
    second = advise("t.hist", spec=spec, sample_rows=2_000, seed=4)
    got = last_advice(iceberg_catalog, "t.hist")
    assert got is not None and got.run_id == second.run_id != first.run_id
    assert got.candidates == second.candidates and got.recommendation == second.recommendation
    assert (got.sample_rows, got.seed, got.probes) == (second.sample_rows, 4, second.probes)
    assert last_advice(iceberg_catalog, "t.other") is None
    rows = iceberg_catalog.load_table("lakesort.advice").scan().to_arrow()
    assert rows.num_rows == len(first.candidates) + len(second.candidates)
    assert sum(r["recommended"] for r in rows.to_pylist() if r["run_id"] == second.run_id) == 1

    # The report's "What would help" shows the last advice: its candidates and the recommendation.
    from layout.report.render import write_reports

    index = write_reports(tmp_path / "reports", catalog=iceberg_catalog, specs=[spec])
    page = (index.parent / "tables" / "t.hist.html").read_text()
    assert "What would help" in page and html.escape(second.recommendation.label) in page
    assert all(html.escape(c.label) in page for c in second.candidates[:8])


def _spec_file(tmp_path: Path, name: str, probes: list[dict]) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(make_spec(name, probes)))
    return path


def test_cli_prints_one_json_document_and_the_text(iceberg_catalog, rng, tmp_path, capsys):
    data = pa.table({"x": rng.integers(0, 10**6, 4_000), "y": rng.integers(0, 10**6, 4_000)})
    build(iceberg_catalog, "cli", data, appends=2)
    spec = _spec_file(
        tmp_path,
        "cli",
        [{"name": "x_point", "where": "x = 5"}, {"name": "y_range", "where": "y < 1000", "columns": ["y"]}],
    )
    assert (main(["-q", "advise", "t.cli", "--spec", str(spec), "--json", "--sample", "1000", "--no-record"])
            == EXIT_OK)
    document = json.loads(capsys.readouterr().out)
    assert {"table", "sample_rows", "candidates", "recommendation"} <= set(document)
    assert document["table"] == "t.cli" and document["sample_rows"] == 1000
    for c in document["candidates"]:
        assert {"strategy", "keys", "predicted_bytes", "total_bytes", "vs_current"} <= set(c)
        assert set(c["predicted_bytes"]) == {"x_point", "y_range"}
    assert document["candidates"][0]["rank"] == 1
    assert "spec_snippet" in document["recommendation"]
    assert main(["-q", "advise", "t.cli", "--spec", str(spec), "--sample", "1000", "--seed", "2"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "layouts compared on a sample of 1,000 of 4,000 rows (seed 2)" in text and "recommendation" in text
    assert last_advice(iceberg_catalog, "t.cli").seed == 2  # recorded without --no-record


def test_cli_refuses_bad_input_before_reading_data(iceberg_catalog, rng, tmp_path, capsys):
    build(iceberg_catalog, "bad", pa.table({"x": rng.integers(0, 100, 100)}), appends=1)
    no_probes = _spec_file(tmp_path, "bad", [])
    assert main(["advise", "t.bad", "--spec", str(no_probes)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "no probes" in err and "add `probes:` to the spec of t.bad" in err
    typo = _spec_file(tmp_path, "bad", [{"name": "p", "where": "xx = 1"}])
    assert main(["advise", "t.bad", "--spec", str(typo)]) == EXIT_USAGE
    assert "probes[0] (p): 'xx' is not a column of t.bad; did you mean 'x'?" in capsys.readouterr().err
    good = _spec_file(tmp_path, "bad", [{"name": "p", "where": "x = 1"}])
    assert main(["advise", "t.bad", "--spec", str(good), "--sample", "0"]) == EXIT_USAGE
    assert "--sample must be a positive number of rows" in capsys.readouterr().err
    missing = _spec_file(tmp_path, "gone", [{"name": "p", "where": "x = 1"}])
    assert main(["advise", "t.gone", "--spec", str(missing)]) == EXIT_USAGE
    assert "Iceberg table 't.gone' not found" in capsys.readouterr().err
    assert main(["advise", "t.bad", "--spec", str(missing)]) == EXIT_USAGE  # a spec of another table
    with pytest.raises(UsageError, match="no probes"):
        advise("t.bad", spec=parse_spec(make_spec("bad", [])))


def test_the_specs_own_curve_is_a_candidate_with_its_four_keys(iceberg_catalog, rng):
    data = pa.table({k: rng.integers(0, 10**6, 6_000) for k in "abcd"})
    build(iceberg_catalog, "four", data, appends=2)
    spec = parse_spec(make_spec("four", [{"name": "a_point", "where": f"a = {data.column('a')[0].as_py()}"},
                                         {"name": "b_point", "where": f"b = {data.column('b')[0].as_py()}"}],
                                sort={"strategy": "hilbert", "keys": [{"column": c} for c in "abcd"]}))
    advice = advise("t.four", spec=spec, sample_rows=3_000, record=False)
    own = next(c for c in advice.candidates if c.origin == "spec")
    assert own.label == "hilbert(a, b, c, d)" and own.scaling == "quantile"
    # no linear pairs: a and b are (nearly) unique, so a second key would change no page's bounds
    assert sorted(c.label for c in advice.candidates if c.origin == "probes") == [
        "hilbert(a, b)", "linear(a)", "linear(b)", "zorder(a, b)"]


def test_the_recommendation_keeps_what_reads_as_little_and_prefers_the_simpler_of_ties():
    from layout.advise.result import ProbeWeight, Unranked, rank, recommend

    probes = (ProbeWeight(name="p", where="a = 1", weight=2), ProbeWeight(name="q", where="b = 1"))

    def entry(strategy, keys, p, q, origin="probes"):
        return Unranked(strategy=strategy, sort_keys=tuple(SortKey(column=k) for k in keys), origin=origin,
                        label=f"{strategy}({', '.join(keys)})", predicted_bytes={"p": p, "q": q},
                        write_bytes=10)

    current = entry("current", (), 10_000, 10_000, origin="table")
    ranked = rank([current, entry("hilbert", "ab", 1000, 1000), entry("linear", "a", 1000, 1020),
                   entry("linear", "b", 5000, 100, origin="spec")], probes)
    assert [c.label for c in ranked] == ["hilbert(a, b)", "linear(a)", "linear(b)", "current()"]
    assert ranked[0].total_bytes == 3000 and ranked[0].vs_current == 0.1
    chosen = recommend(ranked, table="t.x", table_bytes=20)
    assert (chosen.action, chosen.label) == ("change-spec", "linear(a)")  # within 1% of hilbert: simpler
    assert chosen.write_change == -0.5 and "strategy: linear" in chosen.spec_snippet
    near = rank([current, entry("hilbert", "ab", 1000, 1000),
                 entry("linear", "b", 1000, 1100, origin="spec")],
                probes)
    assert recommend(near, table="t.x", table_bytes=20).action == "keep-spec"  # 3100 against 3000: within 5%
    worse = rank([current, entry("linear", "a", 10_000, 12_000)], probes)
    kept = recommend(worse, table="t.x", table_bytes=20)
    assert (kept.action, kept.strategy, kept.spec_snippet) == ("keep-layout", "current", "")
