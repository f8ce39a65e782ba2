"""layout.verify.expectations: the layout rules as GX suites,
validated on pyarrow-written files (no Spark)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from layout.errors import LakesortError
from layout.manifest import StagedFile, StagedGroup, StagedManifest
from layout.spec import load_spec, parse_spec
from layout.verify import expectations as gxe
from layout.verify.rules import layout_facts

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "dags" / "tables" / "demo_lineitem.yaml"
ROWS = 6_000


def _spec(**extra):
    return parse_spec({
        "table": "test.items", "owner": {"name": "t", "email": "t@example.com"},
        "sort": {"keys": [{"column": "l_shipdate"}, {"column": "l_orderkey"}]},
        "target_file_size": "1MiB",
        "writer": {"bloom_filters": {"l_orderkey": {"ndv": 10_000}}, "page_row_count_limit": 1000},
        **extra,
    })


def _lineitem(sort: bool, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    days = rng.integers(0, 2_000, ROWS)
    start = datetime.date(1992, 1, 1)
    table = pa.table({
        "l_orderkey": pa.array(rng.permutation(ROWS).astype("int64")),
        "l_shipdate": pa.array([start + datetime.timedelta(days=int(d)) for d in days], pa.date32()),
        "l_quantity": pa.array(rng.integers(1, 50, ROWS).astype("int64")),
    })
    return table.sort_by([("l_shipdate", "ascending"), ("l_orderkey", "ascending")]) if sort else table


def _write(table: pa.Table, path: Path, *, bloom: bool = True) -> Path:
    pq.write_table(table, path, write_page_index=True, max_rows_per_page=500, row_group_size=3_000,
                   use_dictionary=False,
                   bloom_filter_options={"l_orderkey": {"ndv": 10_000, "fpp": 0.01}} if bloom else None)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    base = tmp_path_factory.mktemp("gx")
    return {
        "good": _write(_lineitem(sort=True), base / "good.parquet"),
        "unsorted": _write(_lineitem(sort=False), base / "unsorted.parquet"),
        "no_bloom": _write(_lineitem(sort=True), base / "no_bloom.parquet", bloom=False),
    }


def _by_type(suite):
    out = {}
    for e in suite.expectations:
        out.setdefault(e.expectation_type, []).append(e)
    return out


def _html(directory: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in directory.rglob("*.html"))


def test_demo_suite_has_the_layout_expectations():
    spec = load_spec(DEMO)
    suite = gxe.suite_for(spec, spec.sort.keys)
    assert suite.name == "lakesort.demo.lineitem"
    rules = {(e.meta["rule"], e.meta["severity"]) for e in suite.expectations}
    assert {("page_index", "error"), ("boundary_order", "error"), ("bloom_filter", "error"),
            ("file_size", "error"), ("columns", "error")} <= rules
    in_set = {e.column: e for e in _by_type(suite)["expect_column_values_to_be_in_set"]}
    order = in_set["boundary_order"]
    assert order.value_set == ["ASCENDING"]
    assert "l_shipdate" in json.dumps(order.row_condition.dict(), default=str)
    # column_index_columns: all -> every column's chunks need both indexes; a column index only where the
    # chunk holds no NaN (parquet-mr writes none there: reported as a warning, rule nan_column_index)
    assert in_set["has_offset_index"].row_condition is None
    indexes = {e.meta["rule"]: e for e in _by_type(suite)["expect_column_values_to_be_in_set"]
               if e.column == "has_column_index"}
    assert indexes["page_index"].meta["severity"] == "error"
    assert "has_nan" in json.dumps(indexes["page_index"].row_condition.dict(), default=str)
    assert indexes["nan_column_index"].meta["severity"] == "warning"
    assert "l_orderkey" in json.dumps(in_set["has_bloom_filter"].row_condition.dict(), default=str)
    sizes = {e.column: e for e in _by_type(suite)["expect_column_values_to_be_between"]}
    assert sizes["file_size"].max_value == 2 * 8 * 1024 * 1024  # derived: 2 x target_file_size
    assert all(e.meta["severity"] in ("error", "warning") for e in suite.expectations)


def test_well_laid_out_files_pass(files, tmp_path):
    facts = layout_facts([str(files["good"])])
    spec = _spec()
    result = gxe.validate_facts(facts, spec, spec.sort.keys, docs_dir=tmp_path)
    assert result.success, result.errors
    assert result.errors == []
    assert result.docs_index == tmp_path / "gx-data-docs" / "index.html" and result.docs_index.exists()


def test_unordered_sort_key_fails_and_shows_in_data_docs(files, tmp_path):
    facts = layout_facts([str(files["unsorted"])])
    spec = _spec()
    result = gxe.validate_facts(facts, spec, spec.sort.keys, docs_dir=tmp_path / "reports")
    assert not result.success
    assert any("[boundary_order]" in e and "expect_column_values_to_be_in_set" in e and "l_shipdate" in e
               and "UNORDERED" in e for e in result.errors), result.errors
    assert not any("bloom_filter" in e for e in result.errors)
    html = _html(tmp_path / "reports" / "gx-data-docs")
    assert result.docs_index.exists()
    assert "expect_column_values_to_be_in_set" in html and "boundary_order" in html
    assert "Failed" in html


def test_missing_bloom_filter_fails(files, tmp_path):
    facts = layout_facts([str(files["no_bloom"])])
    spec = _spec()
    result = gxe.validate_facts(facts, spec, spec.sort.keys, docs_dir=tmp_path)
    assert not result.success
    assert len(result.errors) == 1 and "[bloom_filter]" in result.errors[0], result.errors
    assert "l_orderkey" in result.errors[0] and "no_bloom.parquet" in result.errors[0]
    assert "has_bloom_filter" in _html(tmp_path / "gx-data-docs")


def _manifest(paths, expected_rows: int, *, read_back: int | None = None, duplicate_keys: int | None = None,
              null_keys: int | None = None) -> StagedManifest:
    outputs = []
    for p in paths:
        rows = pq.ParquetFile(p).metadata.num_rows
        outputs.append(StagedFile(path=str(p), size=p.stat().st_size, rows=rows,
                                  read_back_rows=rows if read_back is None else read_back,
                                  read_back_hash_sum="0"))
    group = StagedGroup(group_id=0, partition="p=1", inputs=("in.parquet",), input_rows=expected_rows,
                        expected_rows=expected_rows, outputs=tuple(outputs), seconds=0.0,
                        duplicate_keys=duplicate_keys, null_keys=null_keys)
    return StagedManifest(run_id="r", table="test.items", staging_dir=str(paths[0].parent), groups=(group,),
                          expected_hash_sum="0",
                          spark_version="-", spark_master="-", spark_conf={}, writer_options={}, seconds=0.0)


def _keyed_spec():
    return _spec(keys={"columns": ["l_orderkey", "l_linenumber"], "sequence": "seq"})


def _keyed_file(path: Path) -> Path:
    pq.write_table(pa.table({"l_orderkey": [1, 1, 2, 3, 3], "l_linenumber": [1, 2, 1, 1, 2], "seq": [1] * 5}),
                   path)
    return path


def test_staged_data_suite_reads_the_manifests_figures(tmp_path):
    """The data suite checks what Spark counted when it read the staged files back (rows; keyed tables:
    duplicate and null keys) and the footers' rows, from the manifest: it reads no data."""
    spec = _keyed_spec()
    good = _keyed_file(tmp_path / "good.parquet")
    assert gxe.validate_staged_data(_manifest([good], 5, duplicate_keys=0, null_keys=0), spec).success

    result = gxe.validate_staged_data(_manifest([good], 5, duplicate_keys=1, null_keys=0), spec)
    assert not result.success
    assert len(result.errors) == 1 and "duplicate_keys" in result.errors[0], result.errors

    result = gxe.validate_staged_data(_manifest([good], 5, read_back=4, duplicate_keys=0, null_keys=0), spec,
                                      docs_dir=tmp_path / "docs")
    assert not result.success
    assert len(result.errors) == 1 and "read_back_rows" in result.errors[0], result.errors
    assert (tmp_path / "docs" / "gx-data-docs" / "index.html").exists()

    result = gxe.validate_staged_data(_manifest([good], 7, read_back=7), _spec())
    assert not result.success and "footer_rows" in result.errors[0], result.errors
    manifest = _manifest([good], 5)
    good.unlink()  # nothing reads the file: the figures are the manifest's
    assert gxe.validate_staged_data(manifest, _spec()).success


def test_gx_verifier_raises_on_error_expectations(files, tmp_path):
    spec = _spec()
    gxe.gx_verifier(spec, spec.sort.keys)(_manifest([files["good"]], ROWS))
    with pytest.raises(LakesortError, match="boundary_order") as info:
        gxe.gx_verifier(spec, spec.sort.keys, docs_dir=tmp_path)(_manifest([files["unsorted"]], ROWS))
    assert isinstance(info.value, gxe.ExpectationsFailed)
    assert info.value.docs_index is not None and info.value.docs_index.exists()
    # One Data Docs build (`_Session.publish`) shows both suites' validations, and the index links them.
    pages = sorted(p.name for p in (tmp_path / "gx-data-docs" / "validations").rglob("*.html"))
    assert len(pages) == 2 and any(page.endswith(".data.html") for page in pages), pages
    index = info.value.docs_index.read_text(encoding="utf-8")
    assert all(page in index for page in pages), pages


def test_saved_project_loads_and_is_deterministic(tmp_path):
    spec = load_spec(DEMO)
    written = gxe.save_suites([spec], tmp_path)
    suite_file = tmp_path / "gx" / "expectations" / "lakesort" / "demo" / "lineitem.json"
    assert suite_file in written and suite_file.exists()
    before = {p: p.read_bytes() for p in (tmp_path / "gx").rglob("*") if p.is_file()}
    gxe.save_suites([spec], tmp_path / "gx")  # the gx/ folder itself is accepted too
    after = {p: p.read_bytes() for p in (tmp_path / "gx").rglob("*") if p.is_file()}
    assert before == after

    context = gxe.open_project(tmp_path)
    loaded = context.suites.get("lakesort.demo.lineitem")
    assert len(loaded.expectations) == len(gxe.suite_for(spec, spec.sort.keys).expectations)
    assert {e.meta["rule"] for e in loaded.expectations} >= {"boundary_order", "bloom_filter", "page_index"}
    assert context.suites.get("lakesort.demo.lineitem.data").expectations


def test_repository_gx_project_is_current():
    """gx/ in the repository holds the suites of dags/tables (run save_suites after changing a spec)."""
    suite_file = ROOT / "gx" / "expectations" / "lakesort" / "demo" / "lineitem.json"
    assert suite_file.is_file(), f"{suite_file.relative_to(ROOT)} is missing: run save_suites on dags/tables"
    spec = load_spec(DEMO)
    assert json.loads(suite_file.read_text()) == gxe._suite_json(gxe.suite_for(spec))


def test_cli_verify_gx_prints_the_data_docs_index(files, tmp_path, capsys):
    from layout.cli import EXIT_FAILURE, EXIT_OK, main

    spec_file = tmp_path / "items.yaml"
    spec_file.write_text(json.dumps(_spec().model_dump(mode="json", exclude_none=True)))
    docs = tmp_path / "docs"
    assert (main(["verify", str(files["good"]), "--spec", str(spec_file), "--gx", "--docs", str(docs)])
            == EXIT_OK)
    out = capsys.readouterr().out
    assert f"Data Docs: {docs / 'gx-data-docs' / 'index.html'}" in out and "passed" in out
    assert main(["verify", str(files["unsorted"]), "--spec", str(spec_file), "--gx", "--docs", str(docs)]) \
        == EXIT_FAILURE
    out = capsys.readouterr().out
    assert "gx errors (1):" in out and "[boundary_order]" in out and "FAILED" in out
