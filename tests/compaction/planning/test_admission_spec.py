"""Admission (`layout.compaction.planning.admission.check_table`) of a spec against its table, before Spark:
every column the spec names (sort keys, the table's own sort order, bloom filters, verify columns, merge keys
and sequence, probes' columns and predicates) must exist and be of a kind the use allows; a renamed or
dropped column is named from the table's schema history; all problems come in one message, a line each,
naming the spec file. And the CLI refuses a --spec written for another table, before any Spark work.

Tables are real pyiceberg tables in a SQLite catalog under tmp_path. The table's own types and names are
test_admission.py's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from admission_schemas import OWNER, Ids, field, lines_about, list_of, map_of, spec_of, struct
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import BucketTransform, IdentityTransform, VoidTransform
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    UUIDType,
)

from layout.cli import EXIT_USAGE, build_parser, main
from layout.cli.args import table_spec
from layout.compaction.planning.admission import check_table, table_problems
from layout.errors import UsageError
from layout.spec import load_spec, parse_spec

# ---- the spec's column references ------------------------------------------------------------------


@pytest.fixture
def lineitem(make_table):
    ids = Ids()
    return make_table(
        field(ids, "l_orderkey", LongType()), field(ids, "l_quantity", DecimalType(12, 2)),
        field(ids, "l_shipdate", DateType()), field(ids, "l_comment", StringType()),
        field(ids, "l_returnflag", BooleanType()), field(ids, "l_raw", BinaryType()),
        field(ids, "l_updated", TimestampType()), field(ids, "l_version", LongType()),
        field(ids, "l_ship", struct(ids, mode=StringType(), instruct=StringType())),
        field(ids, "l_tags", list_of(ids, StringType())),
        field(ids, "l_attrs", map_of(ids, StringType(), StringType())),
        with_id=False, name="lineitem",
    )


def lineitem_spec(**overrides):
    doc = {"table": "demo.lineitem", "owner": OWNER,
           "sort": {"keys": [{"column": "l_shipdate"}, {"column": "l_orderkey"}]}}
    doc.update(overrides)
    return parse_spec(doc, source="dags/tables/lineitem.yaml")


def test_a_good_spec_using_every_key_is_admitted(lineitem):
    spec = lineitem_spec(
        writer={"bloom_filters": {"l_comment": {"ndv": 1000}, "l_returnflag": {"ndv": 2}}},
        verify={"column_index_columns": ["l_shipdate", "l_ship.mode"],
                "boundary_order": {"l_shipdate": "ASCENDING", "l_ship.mode": "UNORDERED"}},
        keys={"columns": ["l_orderkey"], "sequence": "l_updated"},
        probes=[{"name": "ship", "where": "l_shipdate >= DATE '1995-01-01' AND l_ship.mode = 'AIR'",
                 "columns": ["l_orderkey", "l_ship.mode"]},
                {"name": "qty", "where": "SELECT * FROM demo.lineitem l WHERE l.l_quantity < 10.5"}],
    )
    assert table_problems(lineitem, spec) == []


def test_unknown_sort_key_gets_a_did_you_mean(lineitem):
    spec = lineitem_spec(sort={"keys": [{"column": "l_orderkey"}, {"column": "l_shipdat"}]})
    [line] = table_problems(lineitem, spec)
    assert line.startswith("demo.lineitem: dags/tables/lineitem.yaml: sort.keys[1].column: `l_shipdat` is "
                           "not a column of demo.lineitem; did you mean `l_shipdate`")


def test_a_renamed_or_dropped_column_is_named_from_the_table_s_schema_history(lineitem):
    """Iceberg tracks columns by field id: a spec written before a rename or a drop gets told which."""
    with lineitem.update_schema() as update:
        update.rename_column("l_shipdate", "ship_date")
        update.rename_column("l_ship.mode", "ship_mode")
    with lineitem.update_schema() as update:
        update.delete_column("l_comment")
    field_id = lineitem.schema().find_field("ship_date").field_id
    spec = lineitem_spec(verify={"column_index_columns": ["l_ship.mode", "l_comment"]})
    problems = table_problems(lineitem, spec)
    [line] = lines_about(problems, "sort.keys[0].column")
    assert line.endswith("`l_shipdate` is not a column of demo.lineitem: it was renamed to `ship_date` "
                         f"(field id {field_id}; `l_shipdate` in schema 0). Fix: "
                         "name it `ship_date` in the spec")
    [line] = lines_about(problems, "verify.column_index_columns[0]")
    assert "it was renamed to `l_ship.ship_mode`" in line
    [line] = lines_about(problems, "verify.column_index_columns[1]")
    assert "`l_comment` is not a column of demo.lineitem: it was dropped from the table (field id" in line
    assert "last in schema 1). Fix: remove it from the spec" in line


def test_the_compaction_goes_on_with_a_probe_on_a_renamed_column(lineitem, caplog):
    """The rewrite does not need the probes: the planner warns about a stale one
    (`check_table(probes="warn")`) and refuses the rest as before."""
    with lineitem.update_schema() as update:
        update.rename_column("l_quantity", "quantity")
    spec = lineitem_spec(probes=[{"name": "qty", "where": "l_quantity < 10", "columns": ["l_quantity"]}])
    with pytest.raises(UsageError, match=r"probes\[0\]\.where: `l_quantity` is not a column"):
        check_table(lineitem, spec)
    check_table(lineitem, spec, probes="warn")
    assert [r.getMessage() for r in caplog.records if "probes[0]" in r.getMessage()] and all(
        "renamed to `quantity`" in r.getMessage() and "the rewrite goes on" in r.getMessage()
        for r in caplog.records if "probes[0]" in r.getMessage())
    with pytest.raises(UsageError, match=r"sort.keys\[0\].column: `l_shipdat` is not a column"):
        check_table(
            lineitem,
            lineitem_spec(
                sort={"keys": [{"column": "l_shipdat"}]}, probes=[{"name": "qty", "where": "l_quantity < 10"}]
            ),
            probes="warn",
        )


def test_sort_key_in_the_wrong_case_says_names_are_case_sensitive(lineitem):
    [line] = table_problems(lineitem, lineitem_spec(sort={"keys": [{"column": "L_SHIPDATE"}]}))
    assert "sort.keys[0].column: `L_SHIPDATE` is not a column" in line
    assert "did you mean `l_shipdate`? (names are case-sensitive)" in line


def test_sort_keys_must_be_primitive_top_level_columns(lineitem):
    spec = lineitem_spec(sort={"keys": [{"column": "l_ship.mode"}, {"column": "l_ship"},
                                        {"column": "l_tags.element"}, {"column": "l_attrs"}]})
    problems = table_problems(lineitem, spec)
    assert len(problems) == 4, problems
    assert (
        "sort.keys[0].column: `l_ship.mode` is a field of the struct `l_ship`: sort keys must be primitive "
        "top-level columns" in problems[0]
    )
    assert "sort.keys[1].column: `l_ship` is a struct, not a primitive column" in problems[1]
    assert "sort.keys[2].column: `l_tags.element` is inside the list `l_tags`" in problems[2]
    assert "sort.keys[3].column: `l_attrs` is a map, not a primitive column" in problems[3]


def test_zorder_keys_must_be_numbers_dates_timestamps_or_strings(lineitem):
    spec = lineitem_spec(sort={"strategy": "zorder", "keys": [
        {"column": "l_shipdate"}, {"column": "l_quantity"}, {"column": "l_updated"}, {"column": "l_comment"},
        {"column": "l_returnflag"}, {"column": "l_raw"}]})
    problems = table_problems(lineitem, spec)
    assert len(problems) == 2, problems
    assert "sort.keys[4].column: `l_returnflag` has type boolean: z-order keys must be numbers" in problems[0]
    assert "sort.keys[5].column: `l_raw` has type binary: z-order keys must be numbers" in problems[1]
    # a linear sort takes them
    linear = lineitem_spec(sort={"keys": [{"column": "l_returnflag"}, {"column": "l_raw"}]})
    assert table_problems(lineitem, linear) == []


def test_hilbert_keys_are_checked_as_z_order_keys(lineitem):
    spec = lineitem_spec(sort={"strategy": "hilbert",
                               "keys": [{"column": "l_shipdate"}, {"column": "l_returnflag"}]})
    problems = table_problems(lineitem, spec)
    assert len(problems) == 1, problems
    assert "sort.keys[1].column: `l_returnflag` has type boolean: Hilbert keys must be numbers" in problems[0]


def test_sort_keys_from_the_tables_sort_order(make_table, lineitem):
    ids = Ids()
    nested = struct(ids, x=LongType())
    table = make_table(NestedField(500, "s", nested, required=False), name="ordered",
                       sort_order=SortOrder(SortField(source_id=nested.fields[0].field_id,
                                                      transform=IdentityTransform())))
    spec = spec_of("demo.ordered", sort={})
    [line] = table_problems(table, spec)
    assert "sort.keys[0].column: `s.x` is a field of the struct `s`: sort keys must be primitive top-level " \
           "columns (from the sort order of demo.ordered; set sort.keys in the spec" in line

    # no keys anywhere, and a transform lakesort cannot sort by: resolve_sort_keys' refusals, as lines
    [unsorted] = table_problems(lineitem, lineitem_spec(sort={}))
    assert unsorted.startswith("demo.lineitem: dags/tables/lineitem.yaml: sort: no sort keys")
    bucketed = make_table(name="bucketed", sort_order=SortOrder(SortField(
        source_id=10_000, transform=BucketTransform(8))))
    assert table_problems(bucketed, spec_of("demo.bucketed", sort={})) == []  # sorted by (issue #54)
    voided = make_table(name="voided",
                        sort_order=SortOrder(SortField(source_id=10_000, transform=VoidTransform())))
    [line] = table_problems(voided, spec_of("demo.voided", sort={}))
    assert "sort: the sort order of demo.voided (order id 1), field 0 sorts by void(id)" in line
    assert "fix: set sort.keys in the table's spec, or the table property lakesort.sort-keys" in line


def test_bloom_filter_columns_must_be_primitive_top_level_columns(lineitem):
    spec = lineitem_spec(writer={"bloom_filters": {
        "l_coment": {"ndv": 10}, "l_ship.mode": {"ndv": 10}, "l_tags": {"ndv": 10},
        "l_comment": {"ndv": 10}}})
    problems = table_problems(lineitem, spec)
    assert len(problems) == 3, problems
    [unknown] = lines_about(problems, "writer.bloom_filters.l_coment: `l_coment` is not a column")
    assert "did you mean `l_comment`?" in unknown
    assert lines_about(problems, "writer.bloom_filters.l_ship.mode: `l_ship.mode` is a field of the struct "
                                 "`l_ship`: bloom filter columns must be primitive top-level columns")
    assert lines_about(problems, "writer.bloom_filters.l_tags: `l_tags` is a list, not a primitive column")


def test_verify_columns_must_exist_as_primitive_columns(lineitem):
    spec = lineitem_spec(verify={"column_index_columns": ["l_shipdate", "l_shipmode", "l_ship",
                                                          "l_tags.element"],
                                 "boundary_order": {"l_orderky": "ASCENDING", "l_ship.mode": "UNORDERED"}})
    problems = table_problems(lineitem, spec)
    assert len(problems) == 4, problems
    [line] = lines_about(problems, "verify.column_index_columns[1]: `l_shipmode` is not a column")
    assert "did you mean" in line and "`l_ship.mode`" in line
    [line] = lines_about(problems, "verify.column_index_columns[2]: "
                                   "`l_ship` is a struct, not a primitive column")
    assert "its fields: `l_ship.mode`, `l_ship.instruct`" in line
    assert lines_about(problems, "verify.column_index_columns[3]: "
                                 "`l_tags.element` is inside the list `l_tags`")
    [line] = lines_about(problems, "verify.boundary_order.l_orderky: `l_orderky` is not a column")
    assert "did you mean `l_orderkey`?" in line


def test_merge_keys_and_sequence(lineitem):
    spec = lineitem_spec(keys={"columns": ["l_orderkey", "l_linenumber", "l_ship"],
                               "sequence": "l_returnflag"})
    problems = table_problems(lineitem, spec)
    assert len(problems) == 3, problems
    assert lines_about(problems, "keys.columns[1]: `l_linenumber` is not a column of demo.lineitem")
    assert lines_about(problems, "keys.columns[2]: `l_ship` is a struct, not a primitive column: merge key "
                                 "columns must be primitive top-level columns")
    [line] = lines_about(problems, "keys.sequence: `l_returnflag` has type boolean: the sequence column must "
                                   "be orderable")
    assert "dates, timestamps or strings" in line
    for good in ("l_version", "l_updated", "l_shipdate", "l_comment", "l_quantity"):
        assert (table_problems(lineitem, lineitem_spec(keys={"columns": ["l_orderkey"], "sequence": good}))
                == [])
    [line] = table_problems(lineitem,
                            lineitem_spec(keys={"columns": ["l_orderkey"], "sequence": "l_versoin"}))
    assert "keys.sequence: `l_versoin` is not a column of demo.lineitem; did you mean `l_version`?" in line


def test_probe_columns_and_literals(lineitem):
    spec = lineitem_spec(probes=[
        {"name": "ok", "where": "l_shipdate >= DATE '1995-01-01'"},
        {"name": "typo", "where": "l_shipdate >= DATE '1995-01-01'", "columns": ["l_orderkey", "l_comennt"]},
        {"name": "bad", "where": "l_shipdat >= DATE '1995-01-01' AND l_tags.element = 'x' OR l_ship = 'y'"},
        {"name": "literal", "where": "l_quantity = 'many' AND l_orderkey < 1.5 AND l_comment LIKE 'a%'"},
    ])
    problems = table_problems(lineitem, spec)
    assert len(problems) == 6, problems
    [line] = lines_about(problems, "probes[1].columns[1]: `l_comennt` is not a column")
    assert "did you mean `l_comment`?" in line
    [line] = lines_about(problems, "probes[2].where: `l_shipdat` is not a column")
    assert "did you mean `l_shipdate`, `l_ship.mode`" in line  # struct fields count in a predicate
    assert lines_about(problems, "probes[2].where: `l_tags.element` is inside the list `l_tags`")
    assert lines_about(problems, "probes[2].where: `l_ship` is a struct")
    [line] = lines_about(problems, "probes[3].where: column `l_quantity` is DECIMAL but the literal 'many'")
    [line] = lines_about(problems, "probes[3].where: column `l_orderkey` is INTEGER but the literal 1.5")
    assert "not a whole number" in line


def test_all_problems_in_one_message_one_line_each(lineitem):
    spec = lineitem_spec(
        sort={"keys": [{"column": "l_shipdat"}]},
        writer={"bloom_filters": {"l_coment": {"ndv": 10}}},
        keys={"columns": ["l_orderkey"], "sequence": "l_returnflag"},
        probes=[{"name": "p", "where": "l_quantiy < 5"}],
    )
    with pytest.raises(UsageError) as raised:
        check_table(lineitem, spec)
    lines = str(raised.value).splitlines()
    assert len(lines) == 4
    assert all(line.startswith("demo.lineitem: dags/tables/lineitem.yaml: ") for line in lines)
    assert [line.split(": ")[2] for line in lines] == [
        "sort.keys[0].column", "writer.bloom_filters.l_coment", "keys.sequence", "probes[0].where"]


def test_problems_name_the_spec_file(tmp_path, lineitem):
    path = tmp_path / "lineitem.yaml"
    path.write_text(yaml.safe_dump({"table": "demo.lineitem", "owner": OWNER,
                                    "sort": {"keys": [{"column": "nope"}]}}))
    [line] = table_problems(lineitem, load_spec(path))
    assert line.startswith(f"demo.lineitem: {path}: sort.keys[0].column: `nope` is not a column")
    assert "its columns are `l_orderkey`" in line  # nothing close: the columns are listed


def test_a_key_on_a_refused_column_is_reported_once(make_table):
    ids = Ids()
    table = make_table(field(ids, "u", UUIDType()))
    problems = table_problems(table, spec_of(sort={"keys": [{"column": "u"}]}))
    assert len(problems) == 1 and "column `u` has type uuid" in problems[0]


# ---- the CLI: --spec for another table ---------------------------------------------------------------


@pytest.fixture
def other_spec(tmp_path) -> Path:
    path = tmp_path / "a.yaml"
    path.write_text(yaml.safe_dump({"table": "demo.a", "owner": OWNER, "sort": {"keys": [{"column": "id"}]}}))
    return path


@pytest.mark.parametrize("command", ["plan-rewrite", "compact", "measure"])
def test_cli_refuses_a_spec_for_another_table(command, other_spec, capsys):
    assert main([command, "demo.b", "--spec", str(other_spec)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"lakesort {command}: error: --spec {other_spec} is for table demo.a, not demo.b" in err


def test_cli_spec_for_the_named_table_is_used(other_spec):
    args = build_parser().parse_args(["plan-rewrite", "demo.a", "--spec", str(other_spec)])
    assert table_spec(args).table == "demo.a"


def test_cli_compact_with_a_mismatched_spec_stops_before_any_spark_work(tmp_path, other_spec):
    """The real command: exit 2, nothing staged, no work directory (so no spark-submit ran)."""
    lakesort = Path(sys.executable).with_name("lakesort")
    assert lakesort.is_file(), (
        "the `lakesort` console script is not installed beside this Python (`make setup`)")
    work = tmp_path / "cwd"
    work.mkdir()
    runs = tmp_path / "runs"
    env = {**os.environ, "HOME": str(work), "LAKESORT_SPARK_MASTER": "local[1]",
           "LAKESORT_WORK_DIR": str(runs)}
    proc = subprocess.run([str(lakesort), "compact", "demo.b", "--spec", str(other_spec)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert "is for table demo.a, not demo.b" in proc.stderr
    assert proc.stderr.startswith("lakesort compact: error: --spec "), proc.stderr  # nothing logged before
    # compact() makes its run's work directory (plan, manifests, the job's zip) before it submits anything:
    # none here, so there was no spark-submit; and nothing else was written either.
    assert not runs.exists()
    assert list(work.iterdir()) == []
