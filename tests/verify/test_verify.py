"""layout.verify.rules on Spark-written files: each layout failure gives exactly its finding and diagnosis."""

from __future__ import annotations

import json
import random
import re
import shutil
import string

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from writers import write_spark

from layout.cli import main
from layout.spec import parse_spec
from layout.verify.rules import Finding, VerifyReport, layout_facts, verify_files, verify_source

pytestmark = pytest.mark.spark

ROWS = 20_000
PAGE_ROWS = 1_000
LONG = 10_000  # bytes per string: min+max far over parquet-mr's 4096 bytes per page
SPEC = {"table": "test.t", "owner": {"name": "t", "email": "t@example.com"},
        "sort": {"keys": [{"column": "k"}]}}


def _spec(**extra):
    return parse_spec({**SPEC, **extra})


def _errors(report: VerifyReport) -> list[Finding]:
    return report.by_severity("error")


@pytest.fixture(scope="module")
def files(spark, tmp_path_factory):
    """Every Spark-written case once per module: {name: path of a file or directory}."""
    from pyspark.sql import functions as F

    base = tmp_path_factory.mktemp("verify")
    rng = random.Random(7)
    pages = {"parquet.page.row.count.limit": PAGE_ROWS}
    out = {}
    long_rows = [(k, "".join(rng.choices(string.ascii_letters, k=LONG))) for k in range(200)]
    out["long"] = write_spark(spark, long_rows, base / "long", sort_by="k", schema="k long, text string",
                              options={"parquet.page.row.count.limit": 20,
                                       "parquet.columnindex.truncate.length": 1_000_000})
    ids = spark.range(ROWS)  # generated in the JVM: far faster than Python rows
    shuffled = ids.select(F.col("id").alias("k"), (F.rand(7) * ROWS).cast("long").alias("v"))
    out["unordered"] = write_spark(spark, shuffled, base / "unordered", sort_by="v", options=pages)
    overlap = base / "overlap"
    overlap.mkdir()
    for name, start in (("a", 0), ("b", 500)):
        run = spark.range(start, start + 1000).select(F.col("id").alias("k"), F.col("id").alias("v"))
        part = write_spark(spark, run, base / f"run_{name}", sort_by="k", options=pages)
        shutil.copy(part, overlap / f"{name}.parquet")
    out["overlap"] = overlap
    bloom = {"parquet.bloom.filter.enabled#k": True, "parquet.bloom.filter.expected.ndv#k": 500, **pages}
    few_keys = ids.select((F.col("id") % 500).alias("k"), F.col("id").alias("v"))
    out["dictionary"] = write_spark(spark, few_keys, base / "dictionary", sort_by="k", options=bloom)
    good_spec = _good_spec()
    df = ids.select((F.col("id") % 5000).alias("k"), F.col("id").alias("v"))
    df = df.repartitionByRange(3, "k").sortWithinPartitions("k")
    df.write.mode("overwrite").options(**good_spec.writer.spark_options()).parquet(str(base / "good"))
    out["good"] = base / "good"
    nan = ids.select(F.col("id").alias("k"), F.when(F.col("id") % 97 == 0, F.lit(float("nan")))
                     .otherwise(F.col("id").cast("double")).alias("x"))
    out["nan"] = write_spark(spark, nan, base / "nan", sort_by="k", options=pages)
    # NaN beside numbers
    out["nan_key"] = write_spark(spark, nan, base / "nan_key", sort_by="x", options=pages)
    return out


def _good_spec():
    return _spec(writer={"page_row_count_limit": PAGE_ROWS, "dictionary": False,
                         "bloom_filters": {"k": {"ndv": 5000}}})


def test_dropped_column_index_is_diagnosed_with_numbers(files):
    spec = _spec(writer={"column_index_truncate_length": 1_000_000})
    [finding] = _errors(verify_files([files["long"]], spec))
    assert (finding.rule, finding.severity, finding.column, finding.row_group) == ("page_index", "error",
                                                                                   "text", 0)
    d = finding.diagnosis
    assert "column index dropped for `text`" in d
    assert "over parquet-mr's 4,096-byte limit" in d
    assert "set writer.column_index_truncate_length (currently 1000000) to 64" in d
    per_page = float(d.split("average ")[1].split(" bytes")[0].replace(",", ""))
    assert 2 * LONG * 0.99 <= per_page <= 2 * LONG  # measured: a page's min and max are whole 10 KB strings


def test_a_float_column_index_dropped_for_nan_is_reported_not_refused(files):
    """parquet-mr drops the column index of a double chunk holding NaN, whatever its settings: verification
    reports the row groups (a warning naming the column and what readers lose),
    and does not refuse the files."""
    report = verify_files([files["nan"]], _spec())
    assert report.ok and not _errors(report)
    [finding] = [f for f in report.findings if f.rule == "nan_column_index"]
    assert (finding.severity, finding.column, finding.row_group) == ("warning", "x", 0)
    assert finding.observed.startswith("no column index in row group(s) 0")
    d = finding.diagnosis
    assert "spread over the rows (not the first sort key)" in d and "no writer setting" in d
    assert "cannot prune row group(s) 0 by `x`'s page index" in d and "store NaN as null" in d
    assert "write_page_index" not in d


def test_nan_mixed_with_numbers_in_the_first_sort_key_says_the_write_did_not_cut(files):
    spec = _spec(sort={"keys": [{"column": "x"}]})
    report = verify_files([files["nan_key"]], spec)
    assert report.ok
    [finding] = [f for f in report.findings if f.rule == "nan_column_index"]
    assert "mix NaN with numbers in the first sort key `x`" in finding.diagnosis
    assert ("did not start a row group where the NaN rows begin (they sort last for `x` asc)"
            in finding.diagnosis)


def test_a_double_chunk_without_nan_and_without_column_index_stays_an_error(tmp_path):
    path = tmp_path / "no_index.parquet"
    pq.write_table(pa.table({"k": pa.array(range(100), pa.int64()),
                             "x": pa.array([i / 3 for i in range(100)])}),
                   path, write_page_index=False)
    errors = _errors(verify_files([str(path)], _spec()))
    assert {(f.rule, f.column) for f in errors} >= {("page_index", "x")}
    assert not [f for f in verify_files([str(path)], _spec()).findings if f.rule == "nan_column_index"]


def test_spec_truncation_not_applied_is_named(files):
    [finding] = _errors(verify_files([files["long"]], _spec()))
    assert "parquet.columnindex.truncate.length=64" in finding.diagnosis


def test_unordered_pages_name_the_first_break(files):
    [finding] = _errors(verify_files([files["unordered"]], _spec()))
    assert (finding.rule, finding.column, finding.observed, finding.intended) == (
        "boundary_order", "k", "UNORDERED", "ASCENDING")
    first, second = (int(n) for n in re.findall(r"page (\d+) \[", finding.diagnosis))
    assert second == first + 1  # consecutive pages, with their bounds
    assert "ordered in `v`" in finding.diagnosis


def test_overlapping_files_in_one_partition(files):
    report = verify_files(sorted(files["overlap"].glob("*.parquet")), _spec())
    [finding] = _errors(report)
    assert (finding.rule, finding.column, finding.observed) == ("overlap", "k", "overlap depth 2")
    assert "[0 .. 999]" in finding.diagnosis and "[500 .. 1499]" in finding.diagnosis
    assert "repartitionByRange" in finding.diagnosis


def test_dictionary_encoded_chunk_has_no_bloom_filter(files):
    spec = _spec(writer={"bloom_filters": {"k": {"ndv": 500}}})
    [finding] = _errors(verify_files([files["dictionary"]], spec))
    assert (finding.rule, finding.severity, finding.column) == ("bloom_filter", "error", "k")
    assert "dictionary-encoded in every data page" in finding.diagnosis
    assert "parquet.enable.dictionary#k=false" in finding.diagnosis


def test_well_compacted_files_have_no_errors(files):
    report = verify_source(str(files["good"]), _good_spec())
    assert report.ok, [f.diagnosis for f in _errors(report)]
    assert report.files == 3
    assert {f.rule for f in report.findings} <= {"pages", "sorting_columns", "overlap"}


def test_layout_facts_table(files):
    facts = layout_facts(sorted(files["good"].glob("*.parquet")))
    assert facts.num_rows == 3 * 2  # 3 files x 1 row group x 2 columns
    rows = facts.to_pylist()
    assert all(r["has_column_index"] and r["has_offset_index"] for r in rows)
    assert {r["boundary_order"] for r in rows if r["column"] == "k"} == {"ASCENDING"}
    assert all(r["has_bloom_filter"] == (r["column"] == "k") for r in rows)
    assert facts.schema.field("pages").metadata[b"description"]


def test_files_opened_once_serve_the_rules_and_the_facts(files, monkeypatch):
    """The compaction's verify step opens the staged files once (`open_staged`) for the layout rules and the
    GX facts: given opened files, neither reads a footer again, and both see what they see from paths."""
    from layout.parquet import ParquetFile
    from layout.verify.facts import open_files

    paths = sorted(files["good"].glob("*.parquet"))
    opened = open_files(paths, None)
    from_paths = (verify_files(paths, _good_spec()), layout_facts(paths))
    opens = []
    real = ParquetFile.open.__func__
    monkeypatch.setattr(ParquetFile, "open",
                        classmethod(lambda cls, *a, **k: opens.append(a) or real(cls, *a, **k)))
    shared = (verify_files(opened, _good_spec()), layout_facts(opened))
    assert opens == [] and open_files(opened, None) == opened
    assert shared[0].findings == from_paths[0].findings and shared[0].files == 3
    assert shared[1].equals(from_paths[1])


def test_cli_exit_codes_and_json(files, tmp_path, capsys):
    spec_path = tmp_path / "t.yaml"
    spec_path.write_text(json.dumps(_good_spec().model_dump(mode="json", exclude_none=True)))
    assert main(["verify", str(files["good"]), "--spec", str(spec_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and set(doc) == {"ok", "findings"}
    keys = {"rule", "severity", "path", "row_group", "column", "observed", "intended", "diagnosis"}
    assert all(set(f) == keys for f in doc["findings"])
    assert main(["verify", str(files["overlap"]), "--spec", str(spec_path)]) == 1
    assert "[overlap]" in capsys.readouterr().out
    assert main(["verify", str(tmp_path / "missing.parquet")]) == 2
    assert main(["verify"]) == 2
