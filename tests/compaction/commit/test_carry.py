"""Position deletes committed during a compaction, carried onto its outputs (layout.compaction.commit.carry).

- Pure logic against brute-force oracles (hypothesis): `canonical_rows` makes two rows equal exactly when they
  are identical in every column (floats by their bits: -0.0 is not 0.0, every NaN one value as Spark's writer
  and the job's fingerprint take it; NULL equal to NULL; nested values);
  `RowMatcher` places each wanted row on a distinct position holding an identical row, as many as there are
  (multiplicities), whatever the batches and the probe column.
- Real files without Spark: a pyiceberg table planned by the real planner, its outputs written here sorted by
  the key in small row groups; a position delete on the inputs carried onto them must delete exactly the rows
  pyiceberg's own read of the table loses to that delete. An output missing a deleted row refuses the commit.
- Real files with the Spark job: the same oracle on the job's own staged output, with a delete the job applied
  named again (not carried twice) and a second `carry` call with old and new delete files.

The oracle never trusts the Carrier's reader: outputs are read by pyiceberg's scan with the carried delete
files applied (pyiceberg applies position deletes), the expected rows by pyiceberg's scan of the table with
the delete committed, compared as multisets by field id, floats bit for bit.
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deletes_helpers import commit_deletes, position_delete_file, write_position_deletes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lossless import _canonical as _bits
from lossless import spec_for
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, IntegerType, ListType, LongType, NestedField, StringType

from layout.compaction.commit.carry import Carrier, RowMatcher, canonical_rows
from layout.compaction.executor import partitions as partitioning
from layout.compaction.integrity.staged import CommitRefused
from layout.manifest import StagedFile, StagedGroup, StagedManifest
from layout.read.deletes import PATH_FIELD_ID

# ---- pure logic ---------------------------------------------------------------------------------------

_NANS = [struct.unpack("<d", struct.pack("<Q", bits))[0]
         for bits in (0x7FF8000000000000, 0x7FF8000000000001, 0xFFF8000000000000, 0x7FF0000000000123)]
doubles = st.one_of(st.sampled_from([0.0, -0.0, 1.5, math.inf, -math.inf, *_NANS]), st.floats(width=64))
small_doubles = st.sampled_from([0.0, -0.0, 1.5, *_NANS[:2]])
ROW_TYPE = pa.struct([
    pa.field("i", pa.int32()), pa.field("d", pa.float64()), pa.field("f", pa.float32()),
    pa.field("s", pa.string()), pa.field("l", pa.list_(pa.float64())),
    pa.field("t", pa.struct([pa.field("a", pa.float64()), pa.field("b", pa.string())])),
])


def _rows(values: st.SearchStrategy) -> st.SearchStrategy:
    """Rows of ROW_TYPE with values from a small domain (so that equal rows are frequent)."""
    def nullable(s: st.SearchStrategy) -> st.SearchStrategy:
        return st.one_of(st.none(), s)

    return st.fixed_dictionaries({
        "i": nullable(st.integers(0, 2)), "d": nullable(values),
        "f": nullable(st.sampled_from([0.0, -0.0, 2.5])), "s": nullable(st.sampled_from(["", "a", "é"])),
        "l": nullable(st.lists(nullable(values), max_size=2)),
        "t": nullable(st.fixed_dictionaries({"a": nullable(values),
                                             "b": nullable(st.sampled_from(["x", "y"]))})),
    })


def _batch(rows: list[dict]) -> pa.RecordBatch:
    if not rows:
        return pa.RecordBatch.from_pylist([], schema=pa.schema(list(ROW_TYPE)))
    return pa.RecordBatch.from_struct_array(pa.array(rows, type=ROW_TYPE))


def _identical(a: object, b: object) -> bool:
    """The oracle: identical values, floats by the bits of their Python value (every NaN one value), NULL
    identical to NULL."""
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, float) and isinstance(b, float)
                and (math.isnan(a) and math.isnan(b) or struct.pack("<d", a) == struct.pack("<d", b)))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@settings(max_examples=200, deadline=None)
@given(st.lists(_rows(doubles), min_size=1, max_size=12))
def test_canonical_rows_are_equal_exactly_when_identical(rows):
    batch = _batch(rows)
    read = batch.to_pylist()  # as Arrow holds them (float32 rounded)
    keys = canonical_rows(batch)
    assert len(keys) == len(rows)
    for i in range(len(rows)):
        for j in range(len(rows)):
            assert (keys[i] == keys[j]) == _identical(read[i], read[j]), (read[i], read[j])


def test_canonical_rows_tell_signed_zeros_apart_and_take_every_nan_as_one():
    # Spark's Parquet writer collapses NaN payloads (Java's doubleToLongBits): the job's output holds the
    # canonical NaN where an input held another, and the job's fingerprint takes them as one value too.
    batch = pa.RecordBatch.from_pydict({"d": pa.array([_NANS[0], _NANS[2], _NANS[1], 0.0, -0.0, None, None])})
    keys = canonical_rows(batch)
    assert keys[0] == keys[1] == keys[2] != keys[5]
    assert keys[3] != keys[4]
    assert keys[5] == keys[6] != keys[3]


@st.composite
def _matching(draw):
    """Output rows, wanted rows (some copies of output rows, some not in the output), positions already taken,
    the batches the output arrives in, and the probe column."""
    output = draw(st.lists(_rows(small_doubles), min_size=1, max_size=30))
    picks = draw(st.lists(st.integers(0, len(output) - 1), max_size=12))
    strangers = draw(st.lists(_rows(small_doubles), max_size=3))
    wanted = [output[i] for i in picks] + strangers
    taken = draw(st.sets(st.integers(0, len(output) - 1), max_size=5))
    cuts = sorted(draw(st.sets(st.integers(1, len(output) - 1), max_size=4))) if len(output) > 1 else []
    probe = draw(st.sampled_from([None, 0, 1, 2, 3, 4]))
    return output, wanted, taken, cuts, probe


@settings(max_examples=300, deadline=None)
@given(_matching())
def test_the_matcher_places_each_wanted_row_on_a_distinct_identical_row(case):
    output, wanted, taken, cuts, probe = case
    table = pa.Table.from_batches([_batch(output)])
    read = table.to_pylist()
    wanted_read = _batch(wanted).to_pylist() if wanted else []
    matcher = RowMatcher(list(enumerate(canonical_rows(_batch(wanted)) if wanted else [])), probe=probe)
    used = set(taken)
    placed = []
    for start, end in zip([0, *cuts], [*cuts, len(output)], strict=True):
        for batch in table.slice(start, end - start).to_batches():
            placed += matcher.feed(start, batch, used)
            start += batch.num_rows
    # Each placement: a distinct position, not taken before, holding a row identical to the wanted one.
    positions = [pos for _, pos in placed]
    assert len(set(positions)) == len(positions)
    assert not set(positions) & taken
    assert used == taken | set(positions)
    for ref, pos in placed:
        assert _identical(wanted_read[ref], read[pos])
    # As many as the brute force finds: per class of identical rows, min(wanted, free rows of the class).
    classes: list[tuple[dict, int, int]] = []  # (representative, wanted, free)
    for row in wanted_read:
        for k, (rep, w, f) in enumerate(classes):
            if _identical(rep, row):
                classes[k] = (rep, w + 1, f)
                break
        else:
            classes.append((row, 1, 0))
    expected = 0
    for rep, w, _ in classes:
        free = sum(1 for pos, row in enumerate(read) if pos not in taken and _identical(rep, row))
        expected += min(w, free)
    assert len(placed) == expected
    assert matcher.remaining == len(wanted) - expected
    assert sorted(matcher.unmatched() + [ref for ref, _ in placed]) == list(range(len(wanted)))


# ---- real files: a pyiceberg table, the real planner, outputs written here ----------------------------

SCHEMA = Schema(
    NestedField(1, "k", IntegerType(), required=False), NestedField(2, "p", StringType(), required=True),
    NestedField(3, "x", DoubleType(), required=False), NestedField(4, "s", StringType(), required=False),
    NestedField(5, "l", ListType(6, LongType(), element_required=False), required=False),
)
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="p"))
XS = [0.0, -0.0, math.nan, _NANS[1], 1.5, None]


def _table_rows(n: int, start: int = 0) -> pa.Table:
    """Rows with many exact duplicates (every 7th row repeats an earlier one), NaNs, signed zeros, NULLs."""
    rows = []
    for i in range(start, start + n):
        j = i - 3 if i % 7 == 6 and i - 3 >= start else i
        rows.append({"k": None if j % 9 == 8 else j % 5, "p": "ab"[j % 2], "x": XS[j % len(XS)],
                     "s": None if j % 4 == 3 else f"s{j % 6}",
                     "l": None if j % 5 == 4 else [j % 3] * (j % 3)})
    return pa.Table.from_pylist(rows, schema=SCHEMA.as_arrow())


def _build(cat, name: str):
    cat.create_namespace_if_not_exists("t")
    table = cat.create_table(f"t.{name}", SCHEMA, partition_spec=SPEC, properties={"format-version": "2"})
    for start in (0, 40, 80):  # three appends: three files per partition
        table.append(_table_rows(40, start))
    return table.refresh()


def _plan(table, name: str):
    from layout.compaction.planning.planner import plan_rewrite

    plan = plan_rewrite(table, spec_for(f"t.{name}", sort={"keys": [{"column": "k"}]}), force=True)
    assert plan.groups
    return plan


def _read(table, data_file: DataFile, deletes: frozenset[DataFile] = frozenset()) -> pa.Table:
    """pyiceberg's read of one file, with position delete files applied."""
    return ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(
        [FileScanTask(data_file, delete_files=set(deletes))])


def _data_file(table, path: str, partition_key: str, rows: int, size: int, *, spec_id: int = 0) -> DataFile:
    spec = table.specs()[spec_id]
    df = DataFile.from_args(content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET,
                            partition=partitioning.decode(partition_key, spec, table.schema()),
                            record_count=rows, file_size_in_bytes=size)
    df.spec_id = spec_id
    return df


def _write_outputs(table, plan, *, without: tuple | None = None) -> StagedManifest:
    """Each group's inputs read by pyiceberg, sorted by the key (NULLs first), written as two files of row
    groups of 7 rows under the run's staging directory; `without`: rows identical to it left out."""
    staging = f"{plan.table_location.rstrip('/')}/data/lakesort-staging/{plan.run_id}"
    groups = []
    arrow = schema_to_pyarrow(table.schema())
    for group in plan.groups:
        rows = pa.concat_tables([_read(table, _input_file(table, f)) for f in group.inputs])
        if without is not None:
            keep = [_row_key(r) != without for r in rows.to_pylist()]
            rows = rows.filter(pa.array(keep))
        rows = rows.take(pc.sort_indices(rows, sort_keys=[("k", "ascending", "at_start")]))
        half = rows.num_rows // 2
        outputs = []
        for n, part in enumerate((rows.slice(0, half), rows.slice(half))):
            path = f"{staging}/spec=x/g{group.group_id}-{n}.parquet"
            local = path.removeprefix("file://")
            Path(local).parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(part.cast(arrow), local, row_group_size=7)
            outputs.append(StagedFile(path=path, size=Path(local).stat().st_size, rows=part.num_rows,
                                      partition_key=group.inputs[0].partition_key))
        groups.append(StagedGroup(group_id=group.group_id, partition=group.partition,
                                  inputs=tuple(f.path for f in group.inputs), input_rows=group.rows,
                                  expected_rows=group.rows, outputs=tuple(outputs), seconds=0.0))
    return StagedManifest(run_id=plan.run_id, table=plan.table, staging_dir=staging, groups=tuple(groups),
                          expected_hash_sum="0", spark_version="-", spark_master="-", spark_conf={},
                          writer_options={}, seconds=0.0)


def _input_file(table, f) -> DataFile:
    return _data_file(table, f.path, f.partition_key, f.rows, f.size, spec_id=f.spec_id)


def _row_key(row: dict) -> tuple:
    return tuple(_canonical(v) for v in row.values())


def _canonical(value: object) -> object:
    """A value compared bit for bit (`lossless._canonical`), every NaN one value (Spark's writer collapses
    NaN payloads, the job's fingerprint takes them as one)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_canonical(v) for v in value)
    return _bits(value)


def _multiset(data: pa.Table, schema: Schema) -> Counter:
    ids = [schema.find_field(n).field_id for n in data.column_names]
    return Counter(tuple(sorted(zip(ids, (_canonical(v) for v in row.values()), strict=True)))
                   for row in data.to_pylist())


def _check_carried(table, plan, manifest: StagedManifest, carried, expected_table) -> None:
    """Outputs read with the carried deletes == the table as Iceberg reads it after the deletes."""
    deletes_of: dict[str, set] = {}
    for f in carried.files:
        assert f.content == DataFileContent.POSITION_DELETES
        lo, hi = f.lower_bounds[PATH_FIELD_ID], f.upper_bounds[PATH_FIELD_ID]
        assert lo == hi, "a carried delete file names one output"
        assert f.file_path.startswith(manifest.staging_dir + "/")
        deletes_of.setdefault(lo.decode(), set()).add(f)
    got: Counter = Counter()
    for group in manifest.groups:
        for out in group.outputs:
            df = _data_file(table, out.path, out.partition_key, out.rows, out.size)
            got += _multiset(_read(table, df, frozenset(deletes_of.pop(out.path, set()))), table.schema())
    assert not deletes_of, "a carried delete file names no output"
    want = _multiset(expected_table.scan().to_arrow(), table.schema())
    assert got == want
    assert carried.rows == sum(f.record_count for f in carried.files)


def _input_positions(plan, draw_positions: list[int]) -> list[tuple[str, int]]:
    inputs = [f for g in plan.groups for f in g.inputs]
    return sorted({(inputs[p % len(inputs)].path, (p // len(inputs)) % inputs[p % len(inputs)].rows)
                   for p in draw_positions})


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=25))
def test_carried_deletes_delete_exactly_the_rows_the_concurrent_delete_deletes(iceberg_catalog, picks):
    name = f"carry_{abs(hash(tuple(picks))) % 10**8}"
    if iceberg_catalog.table_exists(f"t.{name}"):
        iceberg_catalog.drop_table(f"t.{name}")
    table = _build(iceberg_catalog, name)
    plan = _plan(table, name)
    _carry_and_check(table, plan, _input_positions(plan, picks))


def test_every_row_of_an_input_deleted_duplicates_included(iceberg_catalog):
    table = _build(iceberg_catalog, "carry_all")
    plan = _plan(table, "carry_all")
    first = plan.groups[0].inputs[0]
    # Each input repeats some of its rows exactly (`_table_rows`): n deleted copies delete n copies.
    rows = _read(table, _input_file(table, first)).to_pylist()
    assert len({_row_key(r) for r in rows}) < len(rows)
    carried = _carry_and_check(table, plan, [(first.path, pos) for pos in range(first.rows)])
    assert carried.rows == first.rows


def _carry_and_check(table, plan, positions: list[tuple[str, int]]):
    manifest = _write_outputs(table, plan)
    # The concurrent delete, one file per partition (Spark writes per partition), committed after planning.
    by_part: dict[str, list] = {}
    key_of = {f.path: f.partition_key for g in plan.groups for f in g.inputs}
    for path, pos in positions:
        by_part.setdefault(key_of[path], []).append((path, pos))
    files = []
    for key, named in sorted(by_part.items()):
        part = partitioning.decode(key, table.spec(), table.schema())
        files.append(position_delete_file(table, write_position_deletes(table, named), partition=tuple(part)))
    after = table
    for f in files:
        after = commit_deletes(after, [f])
    carried = Carrier(table, plan, manifest).carry(files)
    assert carried.rows == len(positions)
    assert set(carried.sources) == {f.file_path for f in files}
    _check_carried(table, plan, manifest, carried, after)
    return carried


def test_a_deleted_row_missing_from_the_output_refuses_naming_it(iceberg_catalog):
    table = _build(iceberg_catalog, "carry_missing")
    plan = _plan(table, "carry_missing")
    group = plan.groups[0]
    rows = [(f, pos, _row_key(r)) for f in group.inputs
            for pos, r in enumerate(_read(table, _input_file(table, f)).to_pylist())]
    counts = Counter(key for _, _, key in rows)
    source, pos, key = next((f, pos, key) for f, pos, key in rows if counts[key] == 1)
    manifest = _write_outputs(table, plan, without=key)  # the output lost that row (a merge rule, a bug)
    part = tuple(partitioning.decode(source.partition_key, table.spec(), table.schema()))
    delete = position_delete_file(table, write_position_deletes(table, [(source.path, pos)]), partition=part)
    with pytest.raises(CommitRefused) as refused:
        Carrier(table, plan, manifest).carry([delete])
    message = str(refused.value)
    assert delete.file_path in message and source.path in message and f"row {pos} " in message
    assert "nothing committed" in message and "next run" in message


# ---- real files: the Spark job's own output ----------------------------------------------------------


def _positions(table, files) -> set[tuple[str, int]]:
    """(output path, position) of every row carried delete files delete."""
    out = set()
    for f in files:
        with table.io.new_input(f.file_path).open() as stream:
            rows = pq.read_table(stream)
        out |= set(zip(rows.column("file_path").to_pylist(), rows.column("pos").to_pylist(), strict=True))
    return out


@pytest.mark.spark
def test_deletes_carried_onto_the_spark_jobs_output_once_each(iceberg_catalog, spark, job, tmp_path):
    from layout.compaction.pipeline.steps import check_inputs

    table = _build(iceberg_catalog, "carry_job")
    first = next(f for f in table.inspect.files().to_pylist() if f["content"] == 0)
    partition = (first["partition"]["p"],)
    # Deleted before planning: the job applies it, and it must not be carried again when named once more.
    before = position_delete_file(table, write_position_deletes(table, [(first["file_path"], 0)]),
                                  partition=partition)
    table = commit_deletes(table, [before])
    plan = check_inputs(_plan(table, "carry_job"))
    assert any(d.path == before.file_path for g in plan.groups for d in g.deletes)
    staged = job.compact_groups(spark, plan, list(plan.groups))
    job.write_manifest(spark, plan, staged, str(tmp_path / "manifest.json"), 0.0)
    manifest = StagedManifest.from_json((tmp_path / "manifest.json").read_text())
    _check_carried(table, plan, manifest, Carrier(table, plan, manifest).carry([]), table)  # the job's output

    # A writer that merges a file's earlier deletes into its new delete file names position 0 again.
    named = [(first["file_path"], p) for p in (0, 3, 4, 9, 10, 11)]
    concurrent = position_delete_file(table, write_position_deletes(table, named), partition=partition)
    after = commit_deletes(table, [concurrent])
    carrier = Carrier(table, plan, manifest)
    carried = carrier.carry([concurrent])
    assert carried.rows == len(named) - 1 and carried.sources == (concurrent.file_path,)
    _check_carried(table, plan, manifest, carried, after)

    # A retried commit: the old delete file and a new one; the old one's rows keep their output positions.
    other = next(f for g in plan.groups for f in g.inputs if f.path != first["file_path"])
    more = position_delete_file(
        table, write_position_deletes(table, [(other.path, p) for p in range(0, other.rows, 4)]),
        partition=tuple(partitioning.decode(other.partition_key, table.spec(), table.schema())))
    after = commit_deletes(after, [more])
    again = carrier.carry([concurrent, more])
    assert again.rows == carried.rows + len(range(0, other.rows, 4))
    assert set(again.sources) == {concurrent.file_path, more.file_path}
    assert _positions(table, carried.files) <= _positions(table, again.files)
    _check_carried(table, plan, manifest, again, after)
