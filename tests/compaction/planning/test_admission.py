"""Admission (`layout.compaction.planning.admission.check_table`): bad tables and specs are refused from metadata, before Spark.

Tables are real pyiceberg tables in a SQLite catalog under tmp_path (format v3 ones, which pyiceberg
0.12 cannot create, are read from a metadata file as any v3 table written elsewhere would be). One
test confirms on Spark what the column-name rules rest on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    GeographyType,
    GeometryType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

from layout.cli import EXIT_USAGE, _spec, build_parser, main
from layout.compaction.planning.admission import check_table, table_problems
from layout.errors import UsageError
from layout.spec import load_spec, parse_spec

REPO = Path(__file__).resolve().parents[3]
OWNER = {"name": "team", "email": "team@example.com"}


class _Ids:
    """Field ids for hand-built schemas: every NestedField and list/map child needs a unique one."""

    def __init__(self) -> None:
        self.last = 0

    def __call__(self) -> int:
        self.last += 1
        return self.last


def field(ids: _Ids, name: str, field_type, required: bool = False) -> NestedField:
    return NestedField(ids(), name, field_type, required=required)


def struct(ids: _Ids, **fields) -> StructType:
    return StructType(*(field(ids, n, t) for n, t in fields.items()))


def list_of(ids: _Ids, element) -> ListType:
    return ListType(ids(), element, element_required=False)


def map_of(ids: _Ids, key, value) -> MapType:
    return MapType(ids(), key, ids(), value, value_required=False)


def spec_of(table: str = "demo.t", **overrides):
    doc = {"table": table, "owner": OWNER, "sort": {"keys": [{"column": "id"}]}}
    doc.update(overrides)
    return parse_spec(doc, source="test-spec")


@pytest.fixture
def catalog(iceberg_catalog):
    iceberg_catalog.create_namespace("demo")
    return iceberg_catalog


@pytest.fixture
def make_table(catalog):
    """Create `demo.<name>` with the given top-level fields (an `id` long comes first unless given)."""

    def make(*fields: NestedField, name: str = "t", sort_order: SortOrder | None = None, with_id: bool = True):
        head = [NestedField(10_000, "id", LongType(), required=False)] if with_id else []
        kwargs = {"sort_order": sort_order} if sort_order is not None else {}
        return catalog.create_table(f"demo.{name}", Schema(*head, *fields), **kwargs)

    return make


def lines_about(problems: list[str], needle: str) -> list[str]:
    return [p for p in problems if needle in p]


def test_module_docstring_names_every_check():
    import layout.compaction.planning.admission

    for word in ("uuid", "fixed", "time", "timestamp_ns", "backtick", "lakesort_", "did you mean"):
        assert word in layout.compaction.planning.admission.__doc__


# ---- 1. types ----------------------------------------------------------------------------------------


def test_every_supported_type_is_admitted_also_nested(make_table):
    ids = _Ids()
    scalars = {
        "b": BooleanType(), "i": IntegerType(), "l": LongType(), "f": FloatType(), "d": DoubleType(),
        "dec1": DecimalType(1, 0), "dec9": DecimalType(9, 2), "dec18": DecimalType(18, 4),
        "dec19": DecimalType(19, 0), "dec38": DecimalType(38, 10), "dt": DateType(), "ts": TimestampType(),
        "tstz": TimestamptzType(), "s": StringType(), "bin": BinaryType(),
    }
    fields = [field(ids, n, t) for n, t in scalars.items()]
    fields += [
        field(ids, "st", struct(ids, **scalars)),
        field(ids, "tags", list_of(ids, StringType())),
        field(ids, "events", list_of(ids, struct(ids, at=TimestamptzType(), amount=DecimalType(38, 2)))),
        # a struct inside a list inside a map, inside a struct
        field(ids, "deep", struct(ids, attrs=map_of(ids, StringType(), list_of(
            ids, struct(ids, x=DoubleType(), when=DateType(), raw=BinaryType()))))),
        field(ids, "by_day", map_of(ids, DateType(), map_of(ids, IntegerType(), list_of(ids, LongType())))),
    ]
    table = make_table(*fields)
    assert table_problems(table, spec_of()) == []
    check_table(table, spec_of())  # no exception


REFUSED_NESTED = [
    # (column path, Iceberg type as printed, a word of the reason)
    ("u", "uuid", "FIXED_LEN_BYTE_ARRAY(16)"),
    ("fx", "fixed[16]", "FIXED_LEN_BYTE_ARRAY(16)"),
    ("tm", "time", "UNSUPPORTED_TIME_TYPE"),
    ("payload.id", "uuid", "Spark cannot write Iceberg uuid"),
    ("payload.code", "fixed[3]", "fixed-length binary"),
    ("hits.element", "time", "TIME"),
    ("hits2.element.key", "uuid", "uuid"),
    ("meta.key", "fixed[8]", "fixed[8]"),
    ("meta.value.element.at", "time", "TIME"),
]


def test_types_spark_cannot_write_are_refused_anywhere_with_path_and_type(make_table):
    ids = _Ids()
    table = make_table(
        field(ids, "u", UUIDType()),
        field(ids, "fx", FixedType(16)),
        field(ids, "tm", TimeType()),
        field(ids, "payload", struct(ids, id=UUIDType(), code=FixedType(3), ok=StringType())),
        field(ids, "hits", list_of(ids, TimeType())),
        field(ids, "hits2", list_of(ids, struct(ids, key=UUIDType()))),
        field(ids, "meta", map_of(ids, FixedType(8), list_of(ids, struct(ids, at=TimeType(), n=LongType())))),
    )
    problems = table_problems(table, spec_of())
    assert len(problems) == len(REFUSED_NESTED), problems
    for path, type_name, reason in REFUSED_NESTED:
        [line] = lines_about(problems, f"column `{path}` has type {type_name}:")
        assert line.startswith("demo.t: ")
        assert reason in line
        assert "lakesort cannot compact this table yet" in line
        assert "keep the table out of the registry" in line
    with pytest.raises(UsageError) as raised:
        check_table(table, spec_of())
    assert str(raised.value).splitlines() == problems


def test_uuid_message_reads_as_documented(make_table):
    ids = _Ids()
    table = make_table(field(ids, "payload", struct(ids, id=UUIDType())))
    [line] = table_problems(table, spec_of())
    assert line.startswith("demo.t: column `payload.id` has type uuid: Spark cannot write Iceberg uuid "
                           "(FIXED_LEN_BYTE_ARRAY(16))")


@pytest.fixture
def v3_table(tmp_path):
    """A format v3 table with the v3-only types, read from its metadata file (pyiceberg 0.12 cannot create v3)."""
    from pydantic import BaseModel
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table import StaticTable
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    ids = _Ids()
    schema = Schema(
        NestedField(10_000, "id", LongType(), required=False),
        field(ids, "ns", TimestampNanoType()),
        field(ids, "nstz", TimestamptzNanoType()),
        field(ids, "nothing", UnknownType()),
        field(ids, "shape", GeometryType()),
        field(ids, "place", GeographyType()),
        field(ids, "log", list_of(ids, struct(ids, at=TimestampNanoType(), ok=TimestampType()))),
    )
    metadata = new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER,
                                  (tmp_path / "v3").as_uri(), properties={"format-version": "3"})
    path = tmp_path / "v3.metadata.json"
    # pyiceberg 0.12 refuses to serialize v3 metadata through its own model_dump_json: pydantic's writes it.
    path.write_text(BaseModel.model_dump_json(metadata, exclude_none=True, by_alias=True))
    table = StaticTable.from_metadata(str(path))
    assert table.format_version == 3
    return table


def test_v3_types_are_refused(v3_table):
    problems = table_problems(v3_table, spec_of())
    expected = {
        "ns": ("timestamp_ns", "microseconds"), "nstz": ("timestamptz_ns", "microseconds"),
        "nothing": ("unknown", "unknown type"), "shape": ("geometry", "geometry"),
        "place": ("geography", "geography"), "log.element.at": ("timestamp_ns", "TIMESTAMP(NANOS)"),
    }
    assert len(problems) == len(expected), problems
    for path, (type_name, reason) in expected.items():
        [line] = lines_about(problems, f"column `{path}` has type {type_name}:")
        assert reason in line
    assert not lines_about(problems, "`log.element.ok`")  # timestamp (micros) is fine


# ---- 2. names ----------------------------------------------------------------------------------------


def test_names_spark_writes_as_they_are_are_admitted(make_table):
    """Spark 2/3 refused ` ,;{}()\\n\\t=` in Parquet column names; Spark 4.2 writes them (see the Spark test)."""
    ids = _Ids()
    odd = ["a b", "a,b", "a;b", "a{b}", "a(b)", "a=b", "a\nb", "a\tb", "ünï", "a-b", "1abc", "_x", "lakesort"]
    table = make_table(*(field(ids, n, StringType()) for n in odd),
                       field(ids, "s", struct(ids, **{"x`y": StringType(), "lakesort_group": LongType(),
                                                      "p q": StringType()})))
    assert table_problems(table, spec_of()) == []


def test_dotted_names_are_refused_at_any_level(make_table):
    ids = _Ids()
    table = make_table(field(ids, "a.b", StringType()),
                       field(ids, "s", struct(ids, **{"x.y": StringType()})),
                       field(ids, "l", list_of(ids, struct(ids, **{"p.q": LongType()}))))
    problems = table_problems(table, spec_of())
    assert len(problems) == 3, problems
    for path, name in (("a.b", "a.b"), ("s.x.y", "x.y"), ("l.element.p.q", "p.q")):
        [line] = lines_about(problems, f"column `{path}` has a dot in its name `{name}`")
        assert "UNRESOLVED_COLUMN" in line and "rename" in line


def test_names_equal_but_for_case_are_refused_per_level(make_table):
    ids = _Ids()
    table = make_table(
        field(ids, "Amount", LongType()), field(ids, "amount", LongType()), field(ids, "AMOUNT", LongType()),
        field(ids, "s", struct(ids, x=StringType(), X=StringType(), y=StringType())),
        field(ids, "m", map_of(ids, StringType(), struct(ids, k=LongType(), K=LongType()))),
        # the same name at different levels is fine
        field(ids, "t", struct(ids, amount=LongType(), s=LongType())),
    )
    problems = table_problems(table, spec_of())
    assert len(problems) == 3, problems
    [top] = lines_about(problems, "columns `Amount`, `amount`, `AMOUNT` differ only in case at the top level")
    assert "COLUMN_ALREADY_EXISTS" in top
    assert lines_about(problems, "columns `s.x`, `s.X` differ only in case in struct `s`")
    assert lines_about(problems, "columns `m.value.k`, `m.value.K` differ only in case in struct `m.value`")


def test_names_of_the_jobs_helper_columns_are_refused(make_table):
    ids = _Ids()
    table = make_table(*(field(ids, n, StringType()) for n in
                         ("lakesort_group", "LAKESORT_PART", "lakesort_part_key", "__lakesort_z", "__LakeSort")))
    problems = table_problems(table, spec_of())
    assert len(problems) == 5, problems
    for name in ("lakesort_group", "LAKESORT_PART", "lakesort_part_key", "__lakesort_z", "__LakeSort"):
        [line] = lines_about(problems, f"column `{name}` collides with the compaction job's helper columns")
        assert "lakesort_group, lakesort_part" in line and "rename" in line


def test_a_backtick_in_a_top_level_name_is_refused(make_table):
    ids = _Ids()
    table = make_table(field(ids, "a`b", StringType()))
    [line] = table_problems(table, spec_of())
    assert line.startswith("demo.t: column `a`b` has a backtick in its name")
    assert "INVALID_ATTRIBUTE_NAME_SYNTAX" in line


# ---- 3. the spec's column references ---------------------------------------------------------------


@pytest.fixture
def lineitem(make_table):
    ids = _Ids()
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
    assert line.startswith("demo.lineitem: dags/tables/lineitem.yaml: sort.keys[1].column: `l_shipdat` is not a "
                           "column of demo.lineitem; did you mean `l_shipdate`")


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
    assert line.endswith(f"`l_shipdate` is not a column of demo.lineitem: it was renamed to `ship_date` (field id "
                         f"{field_id}; `l_shipdate` in schema 0). Fix: name it `ship_date` in the spec")
    [line] = lines_about(problems, "verify.column_index_columns[0]")
    assert "it was renamed to `l_ship.ship_mode`" in line
    [line] = lines_about(problems, "verify.column_index_columns[1]")
    assert "`l_comment` is not a column of demo.lineitem: it was dropped from the table (field id" in line
    assert "last in schema 1). Fix: remove it from the spec" in line


def test_the_compaction_goes_on_with_a_probe_on_a_renamed_column(lineitem, caplog):
    """The rewrite does not need the probes: the planner warns about a stale one (`check_table(probes="warn")`)
    and refuses the rest as before."""
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
        check_table(lineitem, lineitem_spec(sort={"keys": [{"column": "l_shipdat"}]},
                                            probes=[{"name": "qty", "where": "l_quantity < 10"}]), probes="warn")


def test_sort_key_in_the_wrong_case_says_names_are_case_sensitive(lineitem):
    [line] = table_problems(lineitem, lineitem_spec(sort={"keys": [{"column": "L_SHIPDATE"}]}))
    assert "sort.keys[0].column: `L_SHIPDATE` is not a column" in line
    assert "did you mean `l_shipdate`? (names are case-sensitive)" in line


def test_sort_keys_must_be_primitive_top_level_columns(lineitem):
    spec = lineitem_spec(sort={"keys": [{"column": "l_ship.mode"}, {"column": "l_ship"},
                                        {"column": "l_tags.element"}, {"column": "l_attrs"}]})
    problems = table_problems(lineitem, spec)
    assert len(problems) == 4, problems
    assert "sort.keys[0].column: `l_ship.mode` is a field of the struct `l_ship`: sort keys must be primitive " \
           "top-level columns" in problems[0]
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
    spec = lineitem_spec(sort={"strategy": "hilbert", "keys": [{"column": "l_shipdate"}, {"column": "l_returnflag"}]})
    problems = table_problems(lineitem, spec)
    assert len(problems) == 1, problems
    assert "sort.keys[1].column: `l_returnflag` has type boolean: Hilbert keys must be numbers" in problems[0]


def test_sort_keys_from_the_tables_sort_order(make_table, lineitem):
    ids = _Ids()
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
    [line] = table_problems(bucketed, spec_of("demo.bucketed", sort={}))
    assert "sort: the sort order of demo.bucketed sorts by bucket[8](id)" in line


def test_bloom_filter_columns_must_be_primitive_top_level_columns(lineitem):
    spec = lineitem_spec(writer={"bloom_filters": {
        "l_coment": {"ndv": 10}, "l_ship.mode": {"ndv": 10}, "l_tags": {"ndv": 10}, "l_comment": {"ndv": 10}}})
    problems = table_problems(lineitem, spec)
    assert len(problems) == 3, problems
    [unknown] = lines_about(problems, "writer.bloom_filters.l_coment: `l_coment` is not a column")
    assert "did you mean `l_comment`?" in unknown
    assert lines_about(problems, "writer.bloom_filters.l_ship.mode: `l_ship.mode` is a field of the struct "
                                 "`l_ship`: bloom filter columns must be primitive top-level columns")
    assert lines_about(problems, "writer.bloom_filters.l_tags: `l_tags` is a list, not a primitive column")


def test_verify_columns_must_exist_as_primitive_columns(lineitem):
    spec = lineitem_spec(verify={"column_index_columns": ["l_shipdate", "l_shipmode", "l_ship", "l_tags.element"],
                                 "boundary_order": {"l_orderky": "ASCENDING", "l_ship.mode": "UNORDERED"}})
    problems = table_problems(lineitem, spec)
    assert len(problems) == 4, problems
    [line] = lines_about(problems, "verify.column_index_columns[1]: `l_shipmode` is not a column")
    assert "did you mean" in line and "`l_ship.mode`" in line
    [line] = lines_about(problems, "verify.column_index_columns[2]: `l_ship` is a struct, not a primitive column")
    assert "its fields: `l_ship.mode`, `l_ship.instruct`" in line
    assert lines_about(problems, "verify.column_index_columns[3]: `l_tags.element` is inside the list `l_tags`")
    [line] = lines_about(problems, "verify.boundary_order.l_orderky: `l_orderky` is not a column")
    assert "did you mean `l_orderkey`?" in line


def test_merge_keys_and_sequence(lineitem):
    spec = lineitem_spec(keys={"columns": ["l_orderkey", "l_linenumber", "l_ship"], "sequence": "l_returnflag"})
    problems = table_problems(lineitem, spec)
    assert len(problems) == 3, problems
    assert lines_about(problems, "keys.columns[1]: `l_linenumber` is not a column of demo.lineitem")
    assert lines_about(problems, "keys.columns[2]: `l_ship` is a struct, not a primitive column: merge key "
                                 "columns must be primitive top-level columns")
    [line] = lines_about(problems, "keys.sequence: `l_returnflag` has type boolean: the sequence column must "
                                   "be orderable")
    assert "dates, timestamps or strings" in line
    for good in ("l_version", "l_updated", "l_shipdate", "l_comment", "l_quantity"):
        assert table_problems(lineitem, lineitem_spec(keys={"columns": ["l_orderkey"], "sequence": good})) == []
    [line] = table_problems(lineitem, lineitem_spec(keys={"columns": ["l_orderkey"], "sequence": "l_versoin"}))
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
    path.write_text(yaml.safe_dump({"table": "demo.lineitem", "owner": OWNER, "sort": {"keys": [{"column": "nope"}]}}))
    [line] = table_problems(lineitem, load_spec(path))
    assert line.startswith(f"demo.lineitem: {path}: sort.keys[0].column: `nope` is not a column")
    assert "its columns are `l_orderkey`" in line  # nothing close: the columns are listed


def test_a_key_on_a_refused_column_is_reported_once(make_table):
    ids = _Ids()
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
    assert _spec(args).table == "demo.a"


def test_cli_compact_with_a_mismatched_spec_stops_before_any_spark_work(tmp_path, other_spec):
    """The real command: exit 2, nothing staged, no work directory (so no spark-submit ran)."""
    lakesort = Path(sys.executable).with_name("lakesort")
    assert lakesort.is_file(), "the `lakesort` console script is not installed beside this Python (`make setup`)"
    work = tmp_path / "cwd"
    work.mkdir()
    runs = tmp_path / "runs"
    env = {**os.environ, "HOME": str(work), "LAKESORT_SPARK_MASTER": "local[1]", "LAKESORT_WORK_DIR": str(runs)}
    proc = subprocess.run([str(lakesort), "compact", "demo.b", "--spec", str(other_spec)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert "is for table demo.a, not demo.b" in proc.stderr
    assert proc.stderr.startswith("lakesort compact: error: --spec "), proc.stderr  # nothing logged before
    # compact() makes its run's work directory (plan, manifests, the job's zip) before it submits anything:
    # none here, so there was no spark-submit; and nothing else was written either.
    assert not runs.exists()
    assert list(work.iterdir()) == []


# ---- Spark: what the name rules rest on --------------------------------------------------------------


@pytest.mark.spark
def test_spark_agrees_with_the_name_rules(spark, tmp_path, make_table):
    """Names admission accepts go through a Spark Parquet write as the job does it (select by name, write,
    read back); names it refuses fail in Spark, or (the helper columns) silently replace the table's column."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    accepted = ["a b", "a,b", "a;b", "a{b}", "a(b)", "a=b", "a\nb", "a\tb", "ünï"]
    nested = pa.struct([("x`y", pa.string()), ("p q;{}", pa.int64())])
    data = pa.table({**{n: pa.array(["v"]) for n in accepted}, "s": pa.array([{"x`y": "w", "p q;{}": 1}], nested)})
    source = tmp_path / "in.parquet"
    pq.write_table(data, source)
    df = spark.read.parquet(str(source)).select(*[F.col(n) for n in data.column_names])
    df.coalesce(1).write.parquet(str(tmp_path / "out"))
    [written] = (tmp_path / "out").glob("*.parquet")
    assert pq.read_table(written).to_pylist() == data.to_pylist()
    ids = _Ids()
    table = make_table(*(field(ids, n, StringType()) for n in accepted),
                       field(ids, "s", struct(ids, **{"x`y": StringType(), "p q;{}": LongType()})))
    assert table_problems(table, spec_of()) == []

    refused = {"dot": ["a.b"], "backtick": ["a`b"], "case": ["k", "K"]}
    for label, names in refused.items():
        path = tmp_path / f"{label}.parquet"
        pq.write_table(pa.table({n: pa.array([n]) for n in names}), path)
        with pytest.raises(AnalysisException):
            spark.read.parquet(str(path)).select(*[F.col(n) for n in names]).collect()
        ids = _Ids()
        assert table_problems(make_table(*(field(ids, n, StringType()) for n in names), name=label), spec_of())

    # A table column named like the job's group column is replaced by withColumn: refused, not lost.
    clash = spark.createDataFrame([("mine",)], "lakesort_group string")
    assert clash.withColumn("lakesort_group", F.lit(7)).collect()[0][0] == 7
    ids = _Ids()
    assert table_problems(make_table(field(ids, "lakesort_group", StringType()), name="clash"), spec_of())
