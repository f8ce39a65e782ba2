"""Admission (`layout.compaction.planning.admission.check_table`): bad tables are refused from metadata,
before Spark: types Spark cannot write (anywhere in a nested type, and the format v3 ones) and column names it
cannot (dots, case clashes, backticks, the job's helper columns). The spec's column references are
test_admission_spec.py's.

Tables are real pyiceberg tables in a SQLite catalog under tmp_path (format v3 ones, which pyiceberg
0.12 cannot create, are read from a metadata file as any v3 table written elsewhere would be). One
test confirms on Spark what the column-name rules rest on.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from admission_schemas import Ids, field, lines_about, list_of, map_of, spec_of, struct
from pyiceberg.schema import Schema
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
    LongType,
    NestedField,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

from layout.compaction.planning.admission import check_table, table_problems
from layout.errors import UsageError


def test_module_docstring_names_every_check():
    import layout.compaction.planning.admission

    for word in ("uuid", "fixed", "time", "timestamp_ns", "backtick", "lakesort_", "did you mean"):
        assert word in layout.compaction.planning.admission.__doc__


# ---- 1. types ----------------------------------------------------------------------------------------


def test_every_supported_type_is_admitted_also_nested(make_table):
    ids = Ids()
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
    ids = Ids()
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
    ids = Ids()
    table = make_table(field(ids, "payload", struct(ids, id=UUIDType())))
    [line] = table_problems(table, spec_of())
    assert line.startswith("demo.t: column `payload.id` has type uuid: Spark cannot write Iceberg uuid "
                           "(FIXED_LEN_BYTE_ARRAY(16))")


@pytest.fixture
def v3_table(tmp_path):
    """A format v3 table with the v3-only types, read from its metadata file
    (pyiceberg 0.12 cannot create v3)."""
    from pydantic import BaseModel
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table import StaticTable
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    ids = Ids()
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
    """Spark 2/3 refused ` ,;{}()\\n\\t=` in Parquet column names; Spark 4.2 writes them
    (see the Spark test)."""
    ids = Ids()
    odd = ["a b", "a,b", "a;b", "a{b}", "a(b)", "a=b", "a\nb", "a\tb", "ünï", "a-b", "1abc", "_x", "lakesort"]
    table = make_table(*(field(ids, n, StringType()) for n in odd),
                       field(ids, "s", struct(ids, **{"x`y": StringType(), "lakesort_group": LongType(),
                                                      "p q": StringType()})))
    assert table_problems(table, spec_of()) == []


def test_dotted_names_are_refused_at_any_level(make_table):
    ids = Ids()
    table = make_table(field(ids, "a.b", StringType()),
                       field(ids, "s", struct(ids, **{"x.y": StringType()})),
                       field(ids, "l", list_of(ids, struct(ids, **{"p.q": LongType()}))))
    problems = table_problems(table, spec_of())
    assert len(problems) == 3, problems
    for path, name in (("a.b", "a.b"), ("s.x.y", "x.y"), ("l.element.p.q", "p.q")):
        [line] = lines_about(problems, f"column `{path}` has a dot in its name `{name}`")
        assert "UNRESOLVED_COLUMN" in line and "rename" in line


def test_names_equal_but_for_case_are_refused_per_level(make_table):
    ids = Ids()
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
    ids = Ids()
    table = make_table(*(field(ids, n, StringType()) for n in
                         ("lakesort_group", "LAKESORT_PART", "lakesort_part_key", "__lakesort_z",
                          "__LakeSort")))
    problems = table_problems(table, spec_of())
    assert len(problems) == 5, problems
    for name in ("lakesort_group", "LAKESORT_PART", "lakesort_part_key", "__lakesort_z", "__LakeSort"):
        [line] = lines_about(problems, f"column `{name}` collides with the compaction job's helper columns")
        assert "lakesort_group, lakesort_part" in line and "rename" in line


def test_a_backtick_in_a_top_level_name_is_refused(make_table):
    ids = Ids()
    table = make_table(field(ids, "a`b", StringType()))
    [line] = table_problems(table, spec_of())
    assert line.startswith("demo.t: column `a`b` has a backtick in its name")
    assert "INVALID_ATTRIBUTE_NAME_SYNTAX" in line



# ---- Spark: what the name rules rest on --------------------------------------------------------------


@pytest.mark.spark
def test_spark_agrees_with_the_name_rules(spark, tmp_path, make_table):
    """Names admission accepts go through a Spark Parquet write as the job does it (select by name, write,
    read back); names it refuses fail in Spark, or
    (the helper columns) silently replace the table's column."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    accepted = ["a b", "a,b", "a;b", "a{b}", "a(b)", "a=b", "a\nb", "a\tb", "ünï"]
    nested = pa.struct([("x`y", pa.string()), ("p q;{}", pa.int64())])
    data = pa.table({**{n: pa.array(["v"]) for n in accepted},
                     "s": pa.array([{"x`y": "w", "p q;{}": 1}], nested)})
    source = tmp_path / "in.parquet"
    pq.write_table(data, source)
    df = spark.read.parquet(str(source)).select(*[F.col(n) for n in data.column_names])
    df.coalesce(1).write.parquet(str(tmp_path / "out"))
    [written] = (tmp_path / "out").glob("*.parquet")
    assert pq.read_table(written).to_pylist() == data.to_pylist()
    ids = Ids()
    table = make_table(*(field(ids, n, StringType()) for n in accepted),
                       field(ids, "s", struct(ids, **{"x`y": StringType(), "p q;{}": LongType()})))
    assert table_problems(table, spec_of()) == []

    refused = {"dot": ["a.b"], "backtick": ["a`b"], "case": ["k", "K"]}
    for label, names in refused.items():
        path = tmp_path / f"{label}.parquet"
        pq.write_table(pa.table({n: pa.array([n]) for n in names}), path)
        with pytest.raises(AnalysisException):
            spark.read.parquet(str(path)).select(*[F.col(n) for n in names]).collect()
        ids = Ids()
        assert table_problems(make_table(*(field(ids, n, StringType()) for n in names), name=label),
                              spec_of())

    # A table column named like the job's group column is replaced by withColumn: refused, not lost.
    clash = spark.createDataFrame([("mine",)], "lakesort_group string")
    assert clash.withColumn("lakesort_group", F.lit(7)).collect()[0][0] == 7
    ids = Ids()
    assert table_problems(make_table(field(ids, "lakesort_group", StringType()), name="clash"), spec_of())
