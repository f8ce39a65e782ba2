"""Position deletes committed while a compaction ran, carried onto the files it wrote (issue #51, part 2).

Another writer (Spark's `MERGE INTO`, `DELETE` or `UPDATE` in merge-on-read mode) may commit a position
delete on an input file while the job rewrites it: the row it deletes is somewhere in the job's output, at a
position nothing recorded. The commit must neither fail on that delete nor lose it. So for each
(file_path, pos) it names on an input, the `Carrier` reads that row as the job read it (columns by Iceberg
field id, the table's name mapping, identity-partition projection: pyiceberg's own reader), finds a row equal
to it in every column among the outputs of the same rewrite group (floats by their bits, every NaN equal to
every NaN, NULL equal to NULL), and writes position deletes for those output rows, staged under the
run's directory, which the commit adds in its own snapshot.

Rows identical in every column are interchangeable, so any equal output row will do, but each deleted row
takes a distinct one: n deleted copies of a row delete n copies. Positions the job's own delete files already
removed are not in the output and are not carried again (a writer that merges a file's earlier deletes into
its new delete file names them once more); positions past an input's end delete nothing. A deleted row with no
equal output row left (a keyed table's merge kept another row of its key, an equality delete the job applied
removed it) refuses the commit: nothing is committed, the next run compacts with the delete applied.

Only what the deletes name is read, so nothing here grows with the data: the input row groups that hold the
named positions, and the output row groups whose statistics can hold the rows by the plan's sort keys (every
row group of the group's outputs when no key is usable, as for most rows of a curve layout), batch by batch,
each batch compared in full only where its first key column matches a wanted row. A commit retried on a newer
table state calls `carry` again with the old and new delete files: each delete file is read once, and a row
once placed keeps its output position.
"""

from __future__ import annotations

import functools
import io as bytes_io
import math
import operator
import struct
import uuid
from collections.abc import Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema, prune_columns
from pyiceberg.table import DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE
from pyiceberg.types import ListType, LongType, MapType, StringType
from pyiceberg.utils.config import Config

from layout.compaction.executor import partitions as partitioning
from layout.compaction.integrity.staged import CommitRefused
from layout.errors import LakesortError
from layout.read.deletes import PATH_FIELD_ID, POS_FIELD_ID

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata

    from layout.compaction.plan import InputFile, RewritePlan
    from layout.manifest import StagedFile, StagedGroup, StagedManifest

__all__ = ["Carried", "Carrier", "RowMatcher", "canonical_rows"]

Ref = tuple[str, int]  # a deleted row: (input file path, position)
Key = tuple[Any, ...]  # a row's content in canonical form (`canonical_rows`)

_DELETE_SCHEMA = pa.schema([
    pa.field("file_path", pa.string(), nullable=False,
             metadata={b"PARQUET:field_id": str(PATH_FIELD_ID).encode()}),
    pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_FIELD_ID).encode()}),
])
CARRIED_DIR = "carried"  # under the run's staging directory: `delete_staged` removes what is not committed


@dataclass(frozen=True, slots=True)
class Carried:
    """What `Carrier.carry` staged for the commit."""

    files: tuple[DataFile, ...]  # position delete files on the outputs, one per output that gets deletes
    rows: int  # rows they delete
    # The concurrent delete files that name rows of the plan's inputs (paths), every such row accounted for:
    # carried onto an output, or already gone from the output (the job applied it; past the file's end).
    sources: tuple[str, ...]


class Carrier:
    """Carries position deletes on a run's inputs onto its staged outputs (the module's docstring)."""

    def __init__(self, table: Table, plan: RewritePlan, manifest: StagedManifest) -> None:
        self._table = table
        self._plan = plan
        self._manifest = manifest
        self._schema = Schema.model_validate_json(plan.table_schema_json)
        self._inputs: dict[str, InputFile] = {f.path: f for g in plan.groups for f in g.inputs}
        self._group_of: dict[str, StagedGroup] = {p: g for g in manifest.groups for p in g.inputs}
        self._named: dict[str, dict[str, tuple[int, ...]]] = {}  # delete file -> input -> positions
        self._applied: dict[str, frozenset[int]] = {}  # input -> positions the job's deletes removed
        self._placed: dict[Ref, tuple[str, int]] = {}  # deleted row -> (output path, position)
        self._taken: dict[str, set[int]] = {}  # output path -> positions placed rows took
        self._written: dict[tuple[str, tuple[int, ...]], DataFile] = {}
        self._keys = _usable_keys(self._schema, [k.column for k in plan.sort_keys])
        # The column that narrows a batch to its candidate rows: the first sort key, else any primitive one.
        primitive = [i for i, f in enumerate(self._schema.fields) if f.field_type.is_primitive]
        self._probe = self._keys[0][1] if self._keys else (primitive[0] if primitive else None)

    def carry(self, deletes: Sequence[DataFile]) -> Carried:
        """Position delete files on the outputs that delete the rows `deletes` delete on the inputs."""

        named: dict[Ref, str] = {}  # each deleted row with the first delete file that names it
        sources = []
        for delete in deletes:
            if delete.content != DataFileContent.POSITION_DELETES or delete.file_format != FileFormat.PARQUET:
                raise CommitRefused(
                    f"{self._plan.table}: {delete.file_path} ({delete.content.name}, {delete.file_format}) "
                    f"was committed while run {self._plan.run_id} ran; only Parquet position deletes are "
                    "carried onto a compaction's outputs; nothing committed, the next run compacts with it "
                    "applied")
            by_input = self._names(delete.file_path)
            if by_input:
                sources.append(delete.file_path)
            for path, positions in by_input.items():
                for pos in positions:
                    named.setdefault((path, pos), delete.file_path)
        live = [ref for ref in named if self._still_in_output(ref)]
        self._place([ref for ref in live if ref not in self._placed], named)
        per_output: dict[str, list[int]] = {}
        for ref in live:
            output, pos = self._placed[ref]
            per_output.setdefault(output, []).append(pos)
        files = tuple(self._delete_file(output, tuple(sorted(set(positions))))
                      for output, positions in sorted(per_output.items()))
        return Carried(files, sum(f.record_count for f in files), tuple(sorted(set(sources))))

    # ---- what the delete files name -------------------------------------------------------------------

    def _names(self, path: str) -> dict[str, tuple[int, ...]]:
        """The positions a position delete file names on the plan's inputs, by input (read once)."""
        if path not in self._named:
            self._named[path] = _positions_on(self._table.io, path, self._inputs.keys())
        return self._named[path]

    def _still_in_output(self, ref: Ref) -> bool:
        """Whether the job wrote the row: not past the input's end, not deleted by a delete it applied."""
        path, pos = ref
        if not 0 <= pos < self._inputs[path].rows:
            return False  # Iceberg: a position past the end deletes nothing
        return pos not in self._applied_to(path)

    def _applied_to(self, path: str) -> frozenset[int]:
        if path not in self._applied:
            source = self._inputs[path]
            applied: set[int] = set()
            for group in self._plan.groups:
                if not any(f.path == path for f in group.inputs):
                    continue
                for delete in group.deletes:
                    # The rule of `layout.read.deletes`: a position delete reaches files not newer than it.
                    if delete.kind == "position" and delete.sequence_number >= source.sequence_number:
                        applied.update(self._names(delete.path).get(path, ()))
            self._applied[path] = frozenset(applied)
        return self._applied[path]

    # ---- finding the rows in the output -------------------------------------------------------------

    def _place(self, refs: Sequence[Ref], named: dict[Ref, str]) -> None:
        by_input: dict[str, list[int]] = {}
        for path, pos in refs:
            by_input.setdefault(path, []).append(pos)
        wanted: dict[int, list[_Wanted]] = {}  # group id -> its deleted rows
        groups: dict[int, StagedGroup] = {}
        for path in sorted(by_input):
            group = self._group_of.get(path)
            if group is None:  # no group of the manifest read it: nowhere to find the rows
                self._refuse((path, min(by_input[path])), named, 0)
            groups[group.group_id] = group
            wanted.setdefault(group.group_id, []).extend(self._read_inputs(path, sorted(by_input[path])))
        for group_id, rows in sorted(wanted.items()):
            group = groups[group_id]
            matcher = RowMatcher([(r.ref, r.key) for r in rows], probe=self._probe)
            scalars = {r.key: r.scalars for r in rows}
            for output in group.outputs:
                if not matcher.remaining:
                    break
                self._search(output, matcher, scalars)
            if matcher.remaining:
                self._refuse(matcher.unmatched()[0], named, len(group.outputs))

    def _read_inputs(self, path: str, positions: list[int]) -> list[_Wanted]:
        """The rows at `positions` of an input file, as the job read them."""
        source = self._inputs[path]
        data_file = _data_file(path, self._table.specs()[source.spec_id], self._schema, source.partition_key,
                               source.rows, source.size)
        found: list[_Wanted] = []
        with _opened(self._table, self._schema, data_file) as reader:
            for rg, start, end in reader.row_groups():
                local = [p - start for p in positions if start <= p < end]
                if not local:
                    continue
                for offset, batch in reader.batches(rg):
                    here = [i - offset for i in local if offset <= i < offset + batch.num_rows]
                    if not here:
                        continue
                    rows = batch.take(pa.array(here, pa.int64()))
                    keys = canonical_rows(rows)
                    for j, key in enumerate(keys):
                        scalars = tuple(rows.column(index)[j] for _, index in self._keys)
                        found.append(_Wanted((path, start + offset + here[j]), key, scalars))
        if len(found) != len(positions):
            raise CommitRefused(f"{self._plan.table}: input file {path} read {len(found)} of the "
                                f"{len(positions)} row(s) deleted while run {self._plan.run_id} ran; nothing "
                                "committed, the next run compacts with the deletes applied")
        return found

    def _search(self, output: StagedFile, matcher: RowMatcher,
                scalars: dict[Key, tuple[pa.Scalar, ...]]) -> None:
        spec = self._table.specs()[self._plan.partition_spec_id]
        data_file = _data_file(output.path, spec, self._schema, output.partition_key, output.rows,
                               output.size)
        taken = self._taken.setdefault(output.path, set())
        with _opened(self._table, self._schema, data_file) as reader:
            # Only the row groups whose statistics can hold a wanted row (in its sort key columns).
            candidates = reader.can_hold([scalars[k] for k in matcher.wanted_keys()],
                                         [field_id for field_id, _ in self._keys])
            for rg, start, _ in reader.row_groups():
                if candidates is not None and rg not in candidates:
                    continue
                for offset, batch in reader.batches(rg):
                    for ref, pos in matcher.feed(start + offset, batch, taken):
                        self._placed[ref] = (output.path, pos)
                    if not matcher.remaining:
                        return

    def _refuse(self, ref: Ref, named: dict[Ref, str], outputs: int) -> NoReturn:
        path, pos = ref
        raise CommitRefused(
            f"{self._plan.table}: position delete file {named[ref]}, committed while run {self._plan.run_id} "
            f"ran, deletes row {pos} of input file {path}, and no row equal to it in every column is left in "
            f"the {outputs} file(s) the run wrote for that input's group (a keyed table's merge, or a "
            "delete the job applied, left it out), so the delete cannot be carried onto them; nothing "
            "committed, the next run compacts with the delete applied")

    # ---- writing the carried delete files ------------------------------------------------------------

    def _delete_file(self, output: str, positions: tuple[int, ...]) -> DataFile:
        if (output, positions) in self._written:
            return self._written[(output, positions)]
        table = pa.table({"file_path": [output] * len(positions), "pos": list(positions)},
                         schema=_DELETE_SCHEMA)
        buffer = bytes_io.BytesIO()
        pq.write_table(table, buffer)
        data = buffer.getvalue()
        location = (f"{self._manifest.staging_dir.rstrip('/')}/{CARRIED_DIR}/"
                    f"{len(self._written)}-{uuid.uuid4().hex[:16]}-deletes.parquet")
        try:
            with self._table.io.new_output(location).create(overwrite=True) as stream:
                stream.write(data)
        except Exception as exc:
            raise CommitRefused(f"{self._plan.table}: cannot write the carried position deletes "
                                f"{location}: {type(exc).__name__}: {exc}; nothing committed, the next run "
                                "retries") from exc
        metadata = pq.read_metadata(pa.BufferReader(data))
        sizes = {PATH_FIELD_ID: 0, POS_FIELD_ID: 0}
        for rg in range(metadata.num_row_groups):
            sizes[PATH_FIELD_ID] += metadata.row_group(rg).column(0).total_compressed_size
            sizes[POS_FIELD_ID] += metadata.row_group(rg).column(1).total_compressed_size
        spec = self._table.specs()[self._plan.partition_spec_id]
        staged = next(f for g in self._manifest.groups for f in g.outputs if f.path == output)
        n = len(positions)
        delete = DataFile.from_args(
            content=DataFileContent.POSITION_DELETES, file_path=location, file_format=FileFormat.PARQUET,
            partition=partitioning.decode(staged.partition_key, spec, self._schema), record_count=n,
            file_size_in_bytes=len(data), column_sizes=sizes,
            value_counts={PATH_FIELD_ID: n, POS_FIELD_ID: n},
            null_value_counts={PATH_FIELD_ID: 0, POS_FIELD_ID: 0},
            # lower == upper == the output's path: readers take the delete as file-scoped to that output.
            lower_bounds={PATH_FIELD_ID: to_bytes(StringType(), output),
                          POS_FIELD_ID: to_bytes(LongType(), positions[0])},
            upper_bounds={PATH_FIELD_ID: to_bytes(StringType(), output),
                          POS_FIELD_ID: to_bytes(LongType(), positions[-1])},
            sort_order_id=None, equality_ids=None, key_metadata=None,
        )
        delete.spec_id = spec.spec_id
        self._written[(output, positions)] = delete
        return delete


@dataclass(frozen=True, slots=True)
class _Wanted:
    ref: Ref
    key: Key
    scalars: tuple[pa.Scalar, ...]  # its values in the usable sort key columns (`_usable_keys`)


def _usable_keys(schema: Schema, columns: Sequence[str]) -> list[tuple[int, int]]:
    """(field id, column index) of the sort keys that are top-level primitive columns: the ones row-group
    statistics bound and a batch's column compares directly."""
    top = {f.field_id: i for i, f in enumerate(schema.fields) if f.field_type.is_primitive}
    out = []
    for name in columns:
        try:
            field_id = schema.find_field(name).field_id
        except ValueError:
            continue
        if field_id in top and (field_id, top[field_id]) not in out:
            out.append((field_id, top[field_id]))
    return out


# ---- matching rows by content (pure: tested against a brute-force oracle) -----------------------------


class RowMatcher:
    """Places wanted rows (a reference and a canonical key each) on distinct positions of a stream of batches
    holding rows equal to them. `probe`: a column index whose values narrow a batch down to the candidate rows
    before whole rows are compared (None: every row is compared)."""

    def __init__(self, wanted: Iterable[tuple[Hashable, Key]], *, probe: int | None = None) -> None:
        self._pending: dict[Key, list[Any]] = {}
        for ref, key in wanted:
            self._pending.setdefault(key, []).append(ref)
        for refs in self._pending.values():
            refs.reverse()  # popped from the end: the first wanted takes the first row found
        self._probe = probe

    @property
    def remaining(self) -> int:
        return sum(len(refs) for refs in self._pending.values())

    def wanted_keys(self) -> list[Key]:
        return list(self._pending)

    def unmatched(self) -> list[Any]:
        return [ref for refs in self._pending.values() for ref in reversed(refs)]

    def feed(self, offset: int, batch: pa.RecordBatch, taken: set[int]) -> list[tuple[Any, int]]:
        """The wanted rows placed in `batch` (its first row at position `offset`), as (reference, position);
        positions in `taken` are skipped, and the ones placed added to it."""
        if not self._pending or not batch.num_rows:
            return []
        indices = self._candidates(batch)
        if indices is not None:
            if not len(indices):
                return []
            batch = batch.take(indices)
        rows = range(batch.num_rows) if indices is None else indices.to_pylist()
        placed = []
        for i, key in zip(rows, canonical_rows(batch), strict=True):
            pos = offset + i
            refs = self._pending.get(key)
            if not refs or pos in taken:
                continue
            placed.append((refs.pop(), pos))
            taken.add(pos)
            if not refs:
                del self._pending[key]
                if not self._pending:
                    break
        return placed

    def _candidates(self, batch: pa.RecordBatch) -> pa.Array | None:
        if self._probe is None:
            return None
        column = _canonical_array(batch.column(self._probe))
        if column is None:
            return None
        try:
            values = pa.array([key[self._probe] for key in self._pending], type=column.type)
            mask = pc.is_in(column, value_set=values, skip_nulls=False)
        except (pa.ArrowException, TypeError, ValueError):
            return None  # a type these values do not round-trip through: compare every row
        return pc.indices_nonzero(mask.fill_null(False))


def canonical_rows(batch: pa.RecordBatch) -> list[Key]:
    """Each row of `batch` as a hashable tuple where equality means identical content: floating-point and
    temporal columns by their bits (-0.0 not equal to 0.0), NULL equal to NULL, nested values recursively.
    Every NaN is one value, as the job's fingerprint and Java take it (`Double.doubleToLongBits`): Spark's
    Parquet writer collapses NaN payloads, so an input row with another NaN is in the output with this one."""
    columns = [_canonical_column(batch.column(i)) for i in range(batch.num_columns)]
    if not columns:
        return [()] * batch.num_rows
    return list(zip(*columns, strict=True))


def _canonical_column(array: pa.Array) -> list[Any]:
    viewed = _canonical_array(array)
    if viewed is not None:
        return list(viewed.to_pylist())
    return [_canonical_value(v) for v in array.to_pylist()]


def _canonical_array(array: pa.Array) -> pa.Array | None:
    """A primitive column in a form whose values compare as the column's bits: floating-point and temporal
    values as integers of their width; other primitives as they are. None for nested columns."""
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    kind = array.type
    if pa.types.is_floating(kind) and kind.bit_width in (32, 64):
        bits = pa.int32() if kind.bit_width == 32 else pa.int64()
        nan = pc.fill_null(pc.is_nan(array), False)
        return pc.if_else(nan, pa.scalar(_NAN_BITS[kind.bit_width], bits), array.view(bits))
    if pa.types.is_floating(kind) or (pa.types.is_temporal(kind) and kind.bit_width in (32, 64)):
        return array.view(pa.int16() if kind.bit_width == 16 else pa.int32() if kind.bit_width == 32
                          else pa.int64())
    if pa.types.is_nested(kind) or pa.types.is_dictionary(kind):
        return None
    return array


_NAN_BITS = {32: 0x7FC00000, 64: 0x7FF8000000000000}  # Float.floatToIntBits(NaN), Double.doubleToLongBits


def _canonical_value(value: Any) -> Any:
    if isinstance(value, float):
        return ("f", b"NaN" if math.isnan(value) else struct.pack("<d", value))
    if isinstance(value, dict):
        return tuple((k, _canonical_value(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(_canonical_value(v) for v in value)
    return value


# ---- reading files as the job read them --------------------------------------------------------------


def _data_file(path: str, spec: PartitionSpec, schema: Schema, partition_key: str, rows: int,
               size: int) -> DataFile:
    data_file = DataFile.from_args(content=DataFileContent.DATA, file_path=path,
                                   file_format=FileFormat.PARQUET,
                                   partition=partitioning.decode(partition_key, spec, schema),
                                   record_count=rows, file_size_in_bytes=size)
    data_file.spec_id = spec.spec_id
    return data_file


@dataclass(slots=True)
class _Reader:
    """One open data file, read row group by row group into the job's read schema as pyiceberg's scan reads
    it (`pyiceberg.io.pyarrow._task_to_record_batches`, which reads whole files only)."""

    path: str
    fragment: Any  # pyarrow.dataset.ParquetFileFragment
    schema: Schema
    file_schema: Schema
    missing: dict[int, Any]  # identity-partition values of columns the file lacks
    downcast: bool
    starts: list[int] = field(default_factory=list)  # each row group's first row

    def row_groups(self) -> Iterator[tuple[int, int, int]]:
        """(row group, first row, end row) of each row group."""
        for rg in range(len(self.starts) - 1):
            yield rg, self.starts[rg], self.starts[rg + 1]

    def batches(self, rg: int) -> Iterator[tuple[int, pa.RecordBatch]]:
        """A row group's rows in the read schema: (first row's index in the row group, batch)."""
        # pyiceberg's Arrow I/O: 0.5 s to import, for a commit that carries deletes only.
        from pyiceberg.io.pyarrow import _to_requested_schema

        part = self.fragment.subset(row_group_ids=[rg])
        scanner = ds.Scanner.from_fragment(fragment=part, schema=self.fragment.physical_schema,
                                           columns=[c.name for c in self.file_schema.columns],
                                           use_threads=False)
        offset = 0
        for batch in scanner.to_batches():
            if not batch.num_rows:
                continue
            yield offset, _to_requested_schema(self.schema, self.file_schema, batch,
                                               downcast_ns_timestamp_to_us=self.downcast,
                                               projected_missing_fields=self.missing,
                                               allow_timestamp_tz_mismatch=True)
            offset += batch.num_rows

    def can_hold(self, rows: Sequence[tuple[pa.Scalar, ...]], field_ids: Sequence[int]) -> set[int] | None:
        """The row groups whose statistics can hold one of `rows` (values of the columns `field_ids`), from
        pyarrow's pruning on the footer; None: any row group can (no usable bound)."""
        names = _physical_names(self.fragment.physical_schema)
        terms = []
        for row in rows:
            conjuncts = []
            for field_id, scalar in zip(field_ids, row, strict=True):
                name = names.get(field_id)
                if name is None:
                    continue
                if not scalar.is_valid:
                    conjuncts.append(pc.field(name).is_null())
                    continue
                value = scalar.as_py()
                if isinstance(value, float) and math.isnan(value):
                    continue  # statistics leave NaN out: no bound
                try:
                    typed = scalar.cast(self.fragment.physical_schema.field(name).type)
                except (pa.ArrowException, TypeError, ValueError):
                    continue
                conjuncts.append(pc.field(name) == typed)
            if not conjuncts:
                return None  # this row can be in any row group
            terms.append(functools.reduce(operator.and_, conjuncts))
        if not terms:
            return set()
        try:
            return {rg.id for rg in self.fragment.subset(filter=_any_of(terms)).row_groups}
        except (pa.ArrowException, TypeError, ValueError):
            return None


def _any_of(terms: list[Any]) -> Any:
    """The disjunction of `terms` as a balanced tree (thousands of rows make no deep recursion)."""
    while len(terms) > 1:
        terms = [terms[i] | terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
    return terms[0]


def _physical_names(schema: pa.Schema) -> dict[int, str]:
    out = {}
    for f in schema:
        raw = (f.metadata or {}).get(b"PARQUET:field_id")
        if raw is not None:
            out[int(raw)] = f.name
    return out


@contextmanager
def _opened(table: Table, schema: Schema, data_file: DataFile) -> Iterator[_Reader]:
    # pyiceberg's Arrow I/O takes 0.5 s to import; only a commit that carries deletes reads inputs with it.
    from pyiceberg.io.pyarrow import _get_column_projection_values, pyarrow_to_schema

    metadata = table.metadata
    try:
        with table.io.new_input(data_file.file_path).open() as stream:
            fragment = ds.ParquetFileFormat(
                default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=True)
            ).make_fragment(stream)
            fragment.ensure_complete_metadata()
            downcast = _downcast(metadata)
            file_schema = pyarrow_to_schema(fragment.physical_schema, metadata.name_mapping(),
                                            downcast_ns_timestamp_to_us=downcast,
                                            format_version=metadata.format_version)
            projected = {i for i in schema.field_ids
                         if not isinstance(schema.find_type(i), MapType | ListType)}
            missing = _get_column_projection_values(data_file, schema, metadata.schema(),
                                                    metadata.specs().get(data_file.spec_id),
                                                    file_schema.field_ids)
            starts = [0]
            for info in sorted(fragment.row_groups, key=lambda r: r.id):
                starts.append(starts[-1] + info.num_rows)
            yield _Reader(data_file.file_path, fragment, schema,
                          prune_columns(file_schema, projected, select_full_types=False), dict(missing),
                          downcast, starts)
    except LakesortError:
        raise
    except Exception as exc:
        raise CommitRefused(f"{data_file.file_path}: cannot read it to carry position deletes committed "
                            f"meanwhile: {type(exc).__name__}: {exc}; nothing committed, the next run "
                            "retries") from exc


def _downcast(metadata: TableMetadata) -> bool:
    """pyiceberg's choice (`ArrowScan`): nanosecond timestamps read as microseconds up to format 2."""

    configured = Config().get_bool(DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE)
    return configured if configured is not None else metadata.format_version <= 2


def _positions_on(io: FileIO, path: str, inputs: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """The (file_path, pos) rows of a position delete file whose file_path is one of `inputs`, by input.
    Columns by their reserved field ids (the spec's names where a writer left the ids out); only the row
    groups whose `file_path` statistics can hold an input are read (Iceberg sorts the rows by file_path)."""
    wanted = sorted(set(inputs))
    try:
        with io.new_input(path).open() as stream:
            fragment = ds.ParquetFileFormat().make_fragment(stream)
            names = _physical_names(fragment.physical_schema)
            path_column = names.get(PATH_FIELD_ID, "file_path")
            pos_column = names.get(POS_FIELD_ID, "pos")
            missing = [c for c in (path_column, pos_column) if c not in fragment.physical_schema.names]
            if missing:
                raise CommitRefused(f"{path}: a position delete file without column {missing[0]} (field ids "
                                    f"{PATH_FIELD_ID}, {POS_FIELD_ID}); nothing committed")
            selected = pc.field(path_column).isin(wanted)
            scanner = ds.Scanner.from_fragment(fragment=fragment.subset(filter=selected),
                                               columns=[path_column, pos_column], filter=selected,
                                               use_threads=False)
            found: dict[str, list[int]] = {}
            for batch in scanner.to_batches():
                for file_path, pos in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(),
                                          strict=True):
                    found.setdefault(file_path, []).append(pos)
    except LakesortError:
        raise
    except Exception as exc:
        raise CommitRefused(f"{path}: cannot read this position delete file to carry it onto the "
                            f"compaction's outputs: {type(exc).__name__}: {exc}; nothing committed, the next "
                            "run retries") from exc
    return {p: tuple(sorted(set(positions))) for p, positions in sorted(found.items())}
