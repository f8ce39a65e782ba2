"""Which delete files apply to which data files: Iceberg's rules, on manifest entries alone.

The spec (format v2, "Scan Planning"): a delete file applies to a data file when

- the data file's partition (spec and values) is the delete file's, or, for an equality delete only, the
  delete file's spec is unpartitioned (a global delete; as Iceberg's Java, a spec of void transforms only is
  unpartitioned too);
- a position delete: the data file's data sequence number is lower than or equal to the delete's; and, when
  the delete records bounds of its `file_path` column (or a `referenced_data_file`), the data file's path lies
  within them (a file-scoped delete has lower == upper);
- an equality delete: the data file's data sequence number is strictly lower than the delete's.

The planner (which files a rewrite applies, which delete files it leaves dangling), the commit (does a
delete committed since planning apply to an input) and the measurement (how many delete files a reader
opens for the files it selects) ask the same `DeleteIndex`. pyiceberg 0.12's own `DeleteFileIndex` knows
position deletes only, and not global ones; equality deletes make its planning raise.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyiceberg.manifest import DataFileContent
from pyiceberg.transforms import VoidTransform

from layout.delete_rule import Kind, applies

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.partitioning import PartitionSpec

__all__ = ["PATH_FIELD_ID", "POS_FIELD_ID", "DataRef", "DeleteFile", "DeleteIndex", "delete_file_of",
           "is_unpartitioned"]

# Reserved field ids of a position delete file's columns (Iceberg spec, "Reserved Field IDs").
PATH_FIELD_ID, POS_FIELD_ID = 2147483546, 2147483545


@dataclass(frozen=True, slots=True)
class DeleteFile:
    """A live delete file as its manifest entry records it. `partition`: any hashable the caller uses for
    partition values alike on data and delete files (the planner: the encoded partition key)."""

    path: str
    kind: Kind
    spec_id: int
    partition: Hashable
    sequence_number: int  # its data sequence number
    record_count: int
    size: int
    unpartitioned: bool = False  # an equality delete of an unpartitioned spec: applies in every partition
    equality_ids: tuple[int, ...] = ()
    # Position deletes: bounds of the referenced paths (None: unknown, any path), from `file_path`'s
    # lower/upper bounds or `referenced_data_file`.
    path_lo: str | None = None
    path_hi: str | None = None

    @property
    def is_global(self) -> bool:
        """Applies in every partition: only an equality delete of an unpartitioned spec does
        (Iceberg's spec)."""
        return self.unpartitioned and self.kind == "equality"

    @property
    def file_scoped(self) -> bool:
        """A position delete that references exactly one data file
        (its record count is that file's deletes)."""
        return self.kind == "position" and self.path_lo is not None and self.path_lo == self.path_hi

    def applies_to(self, data: DataRef) -> bool:
        """The rule itself (`layout.delete_rule`), for one pair (the index answers the same, faster)."""
        if not applies(self.kind, data_sequence=data.sequence_number, delete_sequence=self.sequence_number,
                       same_partition=(self.spec_id, self.partition) == (data.spec_id, data.partition),
                       delete_global=self.is_global):
            return False
        return self.kind == "equality" or ((self.path_lo is None or self.path_lo <= data.path)
                                           and (self.path_hi is None or data.path <= self.path_hi))


@dataclass(frozen=True, slots=True)
class DataRef:
    """A live data file as the rules need it."""

    path: str
    spec_id: int
    partition: Hashable
    sequence_number: int


@dataclass(slots=True)
class _BySequence:
    """Delete files of one partition (or path), sorted by sequence number:
    those at or above a bound by bisection."""

    files: list[DeleteFile] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)

    def index(self) -> None:
        self.files.sort(key=lambda d: d.sequence_number)
        self.seqs = [d.sequence_number for d in self.files]

    def from_seq(self, seq: int) -> list[DeleteFile]:
        return self.files[bisect_left(self.seqs, seq):]


class DeleteIndex:
    """The live delete files of a snapshot, indexed for `for_file` (partition, then sequence number by
    bisection, file-scoped position deletes by path)."""

    def __init__(self, deletes: Iterable[DeleteFile]) -> None:
        self.deletes = tuple(deletes)
        self._partition: dict[tuple[int, Hashable], _BySequence] = {}
        self._global: _BySequence = _BySequence()
        self._path: dict[str, _BySequence] = {}
        for d in self.deletes:
            if d.file_scoped:
                assert d.path_lo is not None  # file-scoped: its one path
                bucket = self._path.setdefault(d.path_lo, _BySequence())
            elif d.is_global:
                bucket = self._global
            else:
                bucket = self._partition.setdefault((d.spec_id, d.partition), _BySequence())
            bucket.files.append(d)
        for bucket in (*self._partition.values(), self._global, *self._path.values()):
            bucket.index()

    def __bool__(self) -> bool:
        return bool(self.deletes)

    def for_file(self, data: DataRef) -> tuple[DeleteFile, ...]:
        """Every delete file that applies to `data`, by sequence number then path."""
        if not self.deletes:
            return ()
        found: list[DeleteFile] = []
        for bucket in (self._partition.get((data.spec_id, data.partition)), self._global,
                       self._path.get(data.path)):
            if bucket is not None:
                # Sequence numbers at or above the data file's: exactly what a position delete may need; an
                # equality delete needs them strictly above (`applies_to` decides).
                found.extend(d for d in bucket.from_seq(data.sequence_number) if d.applies_to(data))
        return tuple(sorted(set(found), key=lambda d: (d.sequence_number, d.path)))

    def dangling(self, live: Sequence[DataRef]) -> tuple[DeleteFile, ...]:
        """The delete files that apply to none of `live` (the data files a snapshot keeps): safe to remove."""
        used: set[str] = set()
        for data in live:
            used.update(d.path for d in self.for_file(data))
        return tuple(d for d in self.deletes if d.path not in used)


def delete_file_of(data_file: DataFile, *, sequence_number: int, partition: Hashable,
                   spec: PartitionSpec) -> DeleteFile:
    """A pyiceberg delete file's manifest entry, under `spec`, as a `DeleteFile`
    (its `file_path` bounds decoded)."""
    kind: Kind = "equality" if data_file.content == DataFileContent.EQUALITY_DELETES else "position"
    lo = hi = None
    if kind == "position":
        referenced = getattr(data_file, "referenced_data_file", None)
        if referenced:
            lo = hi = referenced
        else:
            lo, hi = (_text((bounds or {}).get(PATH_FIELD_ID)) for bounds in (data_file.lower_bounds,
                                                                             data_file.upper_bounds))
            if lo is None or hi is None:
                lo = hi = None
    return DeleteFile(
        path=data_file.file_path, kind=kind, spec_id=spec.spec_id, partition=partition,
        sequence_number=sequence_number, record_count=data_file.record_count,
        size=data_file.file_size_in_bytes, unpartitioned=is_unpartitioned(spec),
        equality_ids=tuple(data_file.equality_ids or ()), path_lo=lo, path_hi=hi,
    )


def is_unpartitioned(spec: PartitionSpec) -> bool:
    """No partition field, or void transforms only (a v1 table's dropped fields),
    as Iceberg's Java decides."""
    return all(isinstance(f.transform, VoidTransform) for f in spec.fields)


def _text(raw: bytes | None) -> str | None:
    """A `file_path` bound. A truncated bound (metrics mode truncate) is still a bound: a prefix below every
    path, or a prefix incremented above them; only bytes that are no text are dropped (None: unknown, which
    only makes the delete apply more widely)."""
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
