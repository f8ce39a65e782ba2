"""Which write task sorts and writes which rows: output files cut into pieces, pieces packed into tasks.

The job gives each (group, partition) its share of the group's output files, and each file a range of the
sort key. Tying a task to a file made the task count the file count, which fits neither end:
- a few large files ran as a few long tasks (TPC-H SF1 into three files on two cores: two tasks, then one
  alone) each sorting a whole file in memory. A file is now cut into `pieces` consecutive key ranges, each
  written by its own task and stitched back into one file afterwards (`layout.parquet.stitch`: the row groups
  copied byte for byte), so no task sorts much more than `piece_bytes`;
- many small files ran as many short tasks, each paying a task's fixed cost (TPC-H SF1 by month, 84 files of
  2 MiB: the write stage took 16.7 s as 84 tasks, 15.4 s as 7; one run each, two cores). Slots (a piece of
  a file) now share a task up to `pack_bytes` together. Spark keeps a task's files open until it ends (each
  buffers its row group), so the budget is kept small: packed into 7 tasks of 32 MiB the driver peaked at
  2.8 GiB against 1.6 GiB; into 27 tasks of 8 MiB, 14.7 s and 2.5 GiB.

A float or double first sort key holding NaN: parquet-mr writes no column index for a chunk with a NaN, and
Spark's sort puts NaN above every number (last ascending, first descending), so the rows holding NaN (with the
nulls, where those sort beside them) get a slot of their own (`nan=True`), the last piece of the partition's
last file ascending, the first of its first file descending: the file then starts a row group where they
begin, and only the row groups holding NaN lose their column index.

A task's rows are sorted by the key, and Spark's writer keeps a file open per partition directory of the task
(`most_per_task` of them): so a task never holds two slots of one (group, partition), whose rows would land
in one file. Where files move without a copy, the job plans a task per slot instead (`pack=False`), writes
them into one directory and moves each to its slot's (`flat_destinations`). Pure: the job computes the sizes
and applies the plan.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Mapping, Sequence

from layout.models import Frozen

__all__ = ["Slot", "SlotPlan", "edges_on_values", "flat_destinations", "plan_slots", "quantile_picks",
           "spark_hash_int", "stitch_lists", "task_keys"]

# input bytes a piece of a file aims for (Spark conf spark.lakesort.compact.pieceBytes)
PIECE_BYTES = 32 << 20
PACK_BYTES = 8 << 20  # input bytes the slots sharing a task stay within (their files are open together)


class Slot(Frozen):
    """Piece `piece` of output file `file` of (group_id, part), written by task `task`,
    its `position`-th slot."""

    group_id: int
    part: str
    file: int
    piece: int
    task: int
    position: int
    nan: bool = False  # holds the (group, partition)'s rows whose first sort key is NaN: a piece of their own


class SlotPlan(Frozen):
    """Slots in key order: by (group, partition), file, piece. `pieces[(group, part)]`: pieces per file."""

    slots: tuple[Slot, ...]
    tasks: int
    pieces: tuple[tuple[int, str, int], ...]  # (group_id, part, pieces per file)

    @property
    def most_per_task(self) -> int:
        return max((s.position for s in self.slots), default=0) + 1

    @property
    def most_pieces(self) -> int:
        """The most pieces of one output file (a NaN slot is one more piece of its file)."""
        per_file: dict[tuple[int, str, int], int] = {}
        for s in self.slots:
            per_file[s.group_id, s.part, s.file] = per_file.get((s.group_id, s.part, s.file), 0) + 1
        return max(per_file.values(), default=1)

    def slot_counts(self) -> dict[tuple[int, str], int]:
        """Slots per (group, partition): its files times their pieces (the key ranges its rows are cut in),
        and its NaN slot."""
        counts: dict[tuple[int, str], int] = {}
        for s in self.slots:
            counts[s.group_id, s.part] = counts.get((s.group_id, s.part), 0) + 1
        return counts

    def regular_counts(self) -> dict[tuple[int, str], int]:
        """Slots per (group, partition) placed by key ranges (`slot_counts` without the NaN slots)."""
        counts: dict[tuple[int, str], int] = {}
        for s in self.slots:
            counts[s.group_id, s.part] = counts.get((s.group_id, s.part), 0) + (not s.nan)
        return counts

    def nan_remap(self) -> tuple[list[int], list[int]] | None:
        """For a row placed among the regular slots only (numbered as if there were no NaN slot: the
        partitions in order, each its `regular_counts`), the index in `slots` of its slot, and of its
        partition's NaN slot (the same slot where the partition has none). None when no
        partition has a NaN slot."""
        if not any(s.nan for s in self.slots):
            return None
        regular = [i for i, s in enumerate(self.slots) if not s.nan]
        nan_of = {(s.group_id, s.part): i for i, s in enumerate(self.slots) if s.nan}
        return regular, [nan_of.get((self.slots[i].group_id, self.slots[i].part), i) for i in regular]

    def pieces_per_file(self, group_id: int, part: str) -> int:
        return next(k for g, p, k in self.pieces if (g, p) == (group_id, part))


def plan_slots(parts: Mapping[tuple[int, str], tuple[int, float]], *, piece_bytes: int = PIECE_BYTES,
               pack_bytes: int = PACK_BYTES, parallelism: int = 2, pack: bool = True,
               nan_parts: Mapping[tuple[int, str], float] | None = None, nan_first: bool = False) -> SlotPlan:
    """Slots and tasks for `parts`: (group, partition) -> (output files, estimated bytes).

    Each file of a partition gets ceil(file bytes / piece_bytes) pieces. With `pack`, slots share a task while
    together they stay within pack_bytes, never two of one (group, partition); the budget shrinks so that
    there are at least twice `parallelism` tasks when the slots allow it. `nan_parts`: (group, partition) ->
    estimated bytes of its rows whose first sort key is NaN, which get a slot of their own: piece -1 of file 0
    when NaN sorts first (`nan_first`: a descending key), else one piece past the last of the last file."""
    if piece_bytes <= 0:
        raise ValueError(f"piece_bytes must be positive, got {piece_bytes}")
    nan_parts = nan_parts or {}
    laid: list[tuple[int, str, int, int, float, bool]] = []  # group, part, file, piece, bytes, nan
    pieces = []
    for (gid, part), (files, size) in sorted(parts.items()):
        files = max(1, files)
        k = max(1, math.ceil(size / files / piece_bytes))
        pieces.append((gid, part, k))
        nan = [(gid, part, 0 if nan_first else files - 1, -1 if nan_first else k,
                nan_parts[gid, part], True)] \
            if (gid, part) in nan_parts else []
        regular = [(gid, part, f, p, size / files / k, False) for f in range(files) for p in range(k)]
        laid += [*nan, *regular] if nan_first else [*regular, *nan]
    total = sum(entry[4] for entry in laid)
    budget = min(pack_bytes, total / (2 * max(1, parallelism))) if pack else 0
    # Packed in the order file 0 of every partition, then file 1...: neighbours are of different partitions.
    placed: dict[int, tuple[int, int]] = {}  # index in `laid` -> (task, position)
    task, used = -1, 0.0
    held: set[tuple[int, str]] = set()
    for i in sorted(range(len(laid)), key=lambda i: (laid[i][2], laid[i][3], i)):
        gid, part, _, _, size, _ = laid[i]
        if task < 0 or not pack or (gid, part) in held or used + size > budget:
            task, used, held = task + 1, 0.0, set()
        placed[i] = (task, len(held))
        used += size
        held.add((gid, part))
    slots = [Slot(group_id=gid, part=part, file=f, piece=p, task=placed[i][0], position=placed[i][1], nan=nan)
             for i, (gid, part, f, p, _, nan) in enumerate(laid)]
    return SlotPlan(slots=tuple(slots), tasks=task + 1, pieces=tuple(pieces))


_TASK = re.compile(r"^part-(\d+)-")  # Spark's file names: part-<task's partition id, 5 digits>-<job uuid>...


def stitch_lists(plan: SlotPlan, paths: Sequence[str], group_column: str,
                 part_column: str) -> list[list[str]]:
    """The written files (paths under `<group_column>=<id>/<part_column>=<value>/`) as output files: per file
    its pieces' paths in key order (one path: nothing to stitch). A piece is found by its directory and the
    task in its name; a file that is none of the plan's pieces, or two for one piece, is an error (the
    write did not do what the plan says: nothing may be stitched or committed)."""
    by_task = {(s.group_id, s.part, s.task): s for s in plan.slots}
    found: dict[tuple[int, str, int], list[tuple[int, str]]] = {}
    for path in paths:
        parts = path.rstrip("/").split("/")
        name, part_dir, group_dir = (parts[-1], parts[-2] if len(parts) > 1 else "",
                                     parts[-3] if len(parts) > 2 else "")
        task = _TASK.match(name)
        slot = None
        if task and group_dir.startswith(f"{group_column}=") and part_dir.startswith(f"{part_column}="):
            gid = group_dir.split("=", 1)[1]
            key = (int(gid) if gid.isdigit() else -1, part_dir.split("=", 1)[1], int(task.group(1)))
            slot = by_task.get(key)
        if slot is None:
            raise ValueError(f"{path}: a written file that is no piece of the write's plan (expected "
                             f"{group_column}=<group>/{part_column}=<partition>/part-<task>-...)")
        pieces = found.setdefault((slot.group_id, slot.part, slot.file), [])
        if any(piece == slot.piece for piece, _ in pieces):
            raise ValueError(f"{path}: a second file for piece {slot.piece} of file {slot.file} in "
                             f"{group_column}={slot.group_id}/{part_column}={slot.part} (a task "
                             "rolled over to a new file)")
        pieces.append((slot.piece, path))
    return [[path for _, path in sorted(pieces)] for _, pieces in sorted(found.items())]


def flat_destinations(plan: SlotPlan, names: Sequence[str], group_column: str,
                      part_column: str) -> list[tuple[str, str]]:
    """For a write of one slot per task into one directory (no partition columns): each written file's name
    and the directory, `<group_column>=<id>/<part_column>=<value>`, its slot's files go to (a task's file is
    its slot's: Spark names it part-<task>-...). A file of no task of the plan,
    or two of one task, is an error."""
    by_task = {s.task: s for s in plan.slots}
    if len(by_task) != len(plan.slots):
        raise ValueError("a write into one directory needs one slot per task; the plan packs several")
    seen: dict[int, str] = {}
    out = []
    for name in names:
        task = _TASK.match(name)
        slot = by_task.get(int(task.group(1))) if task else None
        if slot is None:
            raise ValueError(f"{name}: a written file of no task of the write's plan "
                             "(expected part-<task>-...)")
        if slot.task in seen:
            raise ValueError(f"{name}: a second file of task {slot.task} (after {seen[slot.task]}): a task "
                             "rolled over to a new file")
        seen[slot.task] = name
        out.append((name, f"{group_column}={slot.group_id}/{part_column}={slot.part}"))
    return out


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's `hash()` of an INT (Murmur3 x86 32-bit, seed 42, a signed result): what its hash partitioning
    of an int column computes, `pmod(hash(k), n)` being the task of key k among n."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = rotl((value & mask) * 0xCC9E2D51 & mask, 15) * 0x1B873593 & mask
    h1 = (rotl((seed & mask) ^ k1, 13) * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 = (h1 ^ (h1 >> 16)) * 0x85EBCA6B & mask
    h1 = (h1 ^ (h1 >> 13)) * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def task_keys(n: int) -> list[int]:
    """For each task i < n, the smallest int key k >= 0 that Spark's hash partitioning into n tasks sends to
    task i (`spark_hash_int(k) mod n == i`): the job repartitions by these keys, one per task. (A range
    partitioning on the task ids would let its sampled bounds put two tasks' rows in one.) About n ln n keys
    are hashed; in Python, not a Spark job (one run: 0.3 s of a cold job's driver time)."""
    found: dict[int, int] = {}
    k = 0
    while len(found) < n:
        found.setdefault(spark_hash_int(k) % n, k)
        k += 1
    return [found[i] for i in range(n)]


def quantile_picks(ordered: Sequence[int], slots: int) -> list[int]:
    """The n - 1 boundaries of n slots from a sorted sample: the j-th (j = 1 .. n-1) is the first sampled
    value of the j-th quantile, `ordered[j * len // n]` (none from an empty sample), as the job's `boundaries`
    picks them in Spark."""
    size = len(ordered)
    return [ordered[j * size // slots] for j in range(1, slots)] if size else []


# How far a file edge may move to the start of a first key's value: this share of a file's sampled rows. A day
# of TPC-H lineitem is 0.1% of an SF1 file of 2M rows; a first key of a few values is left cut where it falls.
EDGE_SLACK = 0.1


def edges_on_values(bounds: Sequence[int], ordered: Sequence[int], pieces: int, shift: int, *,
                    slack: float = EDGE_SLACK) -> list[int]:
    """`quantile_picks`' boundaries of a partition's slots (`pieces` a file, in file order), each one between
    two files moved to the nearest start of a first key's value: in a sort prefix (`sort_prefix.PrefixPlan`)
    the first key is the bits above `shift`, so a value starts where those below are zero. No value of the
    first key then spans two files, and a reader of one value reads one file. The one of the two starts
    around a boundary (before its value, or after) that moves fewer sampled rows (of `ordered`, sorted) is
    taken when that is at most `slack` of a file's rows and the boundaries stay strictly ordered; else the
    boundary stays. Boundaries between pieces of one file stay (the pieces are stitched into one file)."""
    out = list(bounds)
    if shift <= 0 or not ordered or pieces < 1:
        return out
    files = (len(out) + 1) // pieces
    most = slack * len(ordered) / max(1, files)
    # boundary j (1-based) opens slot j: the first piece of a file
    for j in range(pieces, len(out) + 1, pieces):
        b = out[j - 1]
        start = (b >> shift) << shift
        if start == b:
            continue
        rank = bisect.bisect_left(ordered, b)
        low = out[j - 2] if j >= 2 else None
        high = out[j] if j < len(out) else None
        best = None
        for candidate in (start, start + (1 << shift)):
            if (low is not None and candidate <= low) or (high is not None and candidate >= high):
                continue
            moved = abs(bisect.bisect_left(ordered, candidate) - rank)
            if moved <= most and (best is None or moved < best[0]):
                best = (moved, candidate)
        if best is not None:
            out[j - 1] = best[1]
    return out
