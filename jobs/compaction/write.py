"""The write's plan and its finishing touches: slots and tasks (`plan_write`), pieces sized to a task's sort
memory (`layout.compaction.executor.memory`), a curve's index column, the flat write's moves into the slots'
directories, and the staged files finished in the executors (stitched from pieces, list and map field ids).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
from pyarrow import fs as pafs
from pyspark.sql import types as T

from layout import curves
from layout.catalog import STAGING, stamped_dir
from layout.compaction.executor.memory import memory_per_input_byte, memory_piece_bytes, task_memory
from layout.compaction.executor.partitions import GROUP, PART
from layout.compaction.executor.slots import (
    PACK_BYTES,
    PIECE_BYTES,
    SlotPlan,
    flat_destinations,
    plan_slots,
    stitch_lists,
)
from layout.compaction.executor.sort_prefix import PrefixPlan, sort_prefix
from layout.compaction.executor.staging import finish_staged_file
from layout.io import find_parquet_files, resolve

from .read import is_local
from .sample import SAMPLE_SEED
from .schema import FIXED_WIDTH
from .spark_versions import to_arrow, with_arrow_column
from .storage import configured

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from layout.compaction.executor.figures import Parts
    from layout.compaction.plan import RewriteGroup, RewritePlan
    from layout.models import Strategy

    from .job_plan import JobPlan

log = logging.getLogger("lakesort.compact")


CURVE_SAMPLE = 200_000  # rows whose keys place a curve's quantile boundaries (2**bits cells per key)


FLAT_MAX_TASKS = 256  # unpacked slots past which several partitions' slots are packed (`plan_write`)


def staging_dir(plan: RewritePlan) -> str:
    """The run's staging directory under the table's data directory, where its files stay once committed."""
    return f"{plan.table_location.rstrip('/')}/data/{STAGING}/{plan.run_id}"


def write_dir(plan: RewritePlan) -> str:
    """Where the job writes (`layout.catalog.stamped_dir`): the path names the run and spec of every file."""
    return stamped_dir(f"{plan.table_location.rstrip('/')}/data", plan.run_id, plan.spec_hash)


def plan_write(spark: SparkSession, job: JobPlan, groups: Sequence[RewriteGroup], parts: Parts,
               files_of: Mapping[tuple[int, str], int], figures: Sequence[Mapping[str, Any]], *,
               nan_rows: Mapping[tuple[int, str], int] | None = None,
               nan_first: bool = False) -> tuple[SlotPlan, PrefixPlan | None, bool]:
    """The write's slots and tasks (`layout.compaction.executor.slots`), from each (group, partition)'s files
    and bytes (its group's input bytes by its share of the rows), and a NaN slot for each (group, partition)
    in `nan_rows` (its rows there: `placement.nan_rows`; `nan_first`: NaN sorts first); the sort prefix
    (`layout.compaction.executor.sort_prefix`, None: the keys themselves); whether the slots are written into
    one directory and moved into theirs afterwards (`place_flat_files`)."""
    group_bytes = {g.group_id: sum(f.size for f in g.inputs) for g in groups}
    group_rows: dict[int, int] = {}
    for (gid, _), (_, rows) in parts.items():
        group_rows[gid] = group_rows.get(gid, 0) + rows
    sizes = {pair: (files_of[pair], group_bytes[pair[0]] * rows / max(1, group_rows[pair[0]]))
             for pair, (_, rows) in parts.items()}
    nan_parts = {pair: sizes[pair][1] * n / max(1, parts[pair][1]) for pair, n in (nan_rows or {}).items()
                 if pair in sizes}
    piece_bytes = _piece_bytes(spark, groups, job.spark_schema)
    parallelism = spark.sparkContext.defaultParallelism
    slots = plan_slots(sizes, piece_bytes=piece_bytes, pack_bytes=min(PACK_BYTES, piece_bytes),
                       parallelism=parallelism, nan_parts=nan_parts, nan_first=nan_first)
    flat = (len(sizes) > 1 and spark.conf.get("spark.lakesort.compact.flatWrite", "true") == "true"
            and renames_cheaply(write_dir(job.plan)))
    if flat:
        # Several partitions: a task per slot, written into one directory and moved into the slots'
        # directories afterwards, instead of Spark's dynamic partition writer (which copies every row to drop
        # the partition columns): TPC-H SF1 by month into 84 files, warm, sort and write in 11.6-12.2 s
        # against 14.6-15.2 s packed into 27 tasks (one run each). Past FLAT_MAX_TASKS unpacked slots (many
        # small partitions, where a task's fixed cost outweighs the copy), the slots are packed and
        # partitioned as before.
        unpacked = plan_slots(sizes, piece_bytes=piece_bytes, parallelism=parallelism, pack=False,
                              nan_parts=nan_parts, nan_first=nan_first)
        flat = unpacked.tasks <= max(FLAT_MAX_TASKS, 2 * slots.tasks)
        slots = unpacked if flat else slots
    log.info("writing %d file(s) in %d slot(s) by %d task(s) (up to %d slot(s) a task, %d piece(s) a "
             "file%s%s)", sum(files_of.values()), len(slots.slots), slots.tasks, slots.most_per_task,
             slots.most_pieces, ", into one directory" if flat else "",
             f", {len(nan_parts)} NaN slot(s): the rows whose first sort key is NaN start a row group"
             if nan_parts else "")
    return slots, sort_prefix(job.keys, job.ordinals, figures), flat


def _piece_bytes(spark: SparkSession, groups: Sequence[RewriteGroup], schema: T.StructType) -> int:
    """The input bytes a piece of an output file aims for: spark.lakesort.compact.pieceBytes when set, else
    PIECE_BYTES or less, so that a write task sorts its rows in memory
    (`layout.compaction.executor.memory`)."""
    configured = spark.conf.get("spark.lakesort.compact.pieceBytes", None)
    if configured:
        return int(configured)
    sc = spark.sparkContext
    conf = sc.getConf()
    fraction = float(conf.get("spark.memory.fraction", "0.6"))
    jvm: Any = sc._jvm  # py4j's view of the running context's JVM
    if sc.master.startswith("local"):  # type: ignore[union-attr]  # the tasks run in this JVM
        heap, cores = jvm.java.lang.Runtime.getRuntime().maxMemory(), sc.defaultParallelism
    else:
        memory = conf.get("spark.executor.memory", "1g")
        heap = jvm.org.apache.spark.network.util.JavaUtils.byteStringAsMb(memory) << 20
        executors = max(1, sc._jsc.sc().getExecutorIds().size())
        cores = int(conf.get("spark.executor.cores", "0")) or max(1, sc.defaultParallelism // executors)
    per_task = task_memory(heap, fraction, cores)
    variable = sum(1 for f in schema.fields if not isinstance(f.dataType, FIXED_WIDTH) or
                   isinstance(f.dataType, T.DecimalType) and f.dataType.precision > 18)
    ratio = memory_per_input_byte(groups, fields=len(schema.fields) + 1,  # and the slot
                                  variable_fields=variable)
    if ratio is None or not per_task:
        return PIECE_BYTES
    fitted = memory_piece_bytes(per_task, ratio)
    if fitted < PIECE_BYTES:
        log.info("pieces of %.1f MiB of input (not %d MiB): a write task sorts up to %.0f MiB in memory "
                 "(heap %.0f MiB, %d task(s) at once), and the input takes about %.1f "
                 "bytes there per byte on disk",
                 fitted / 2**20, PIECE_BYTES >> 20, per_task / 2**20, heap / 2**20, cores, ratio)
    return min(PIECE_BYTES, fitted)


def renames_cheaply(path: str) -> bool:
    """Whether the file system moves a file without copying it (local, HDFS; not object stores)."""
    scheme = path.split("://", 1)[0].lower() if "://" in path else "file"
    return scheme in ("file", "hdfs", "viewfs")


def place_flat_files(spark: SparkSession, flat_dir: str, target: str, slots: SlotPlan) -> None:
    """Move the files of a write into one directory (a task per slot) into their slots' directories under
    `target` (`slots.flat_destinations`), a rename each, and drop the directory (`move_files`)."""
    move_files(spark, flat_dir, target, lambda names: flat_destinations(slots, names, GROUP, PART))


def move_files(spark: SparkSession, flat_dir: str, target: str,
               destinations: Callable[[list[str]], Iterable[tuple[str, str]]]) -> int:
    """Move the Parquet files of `flat_dir` into the directories under `target` that `destinations` gives each
    (from the files' names: (name, directory) pairs), a rename each, and drop `flat_dir`; how many moved. On a
    local file system by the driver itself (through Hadoop's, two Py4J calls a file took 0.54 s for 84 files),
    else through Hadoop's."""
    if is_local(flat_dir):
        filesystem, root = resolve(flat_dir)
        _, dest = resolve(target)
        names = [Path(i.path).name for i in filesystem.get_file_info(pafs.FileSelector(root))]
        moves = list(destinations([n for n in names if n.endswith(".parquet")]))
        for name, directory in moves:
            filesystem.create_dir(f"{dest}/{directory}", recursive=True)
            filesystem.move(f"{root}/{name}", f"{dest}/{directory}/{name}")
            if f".{name}.crc" in names:  # Hadoop's checksum of the file, which its reader checks when present
                filesystem.move(f"{root}/.{name}.crc", f"{dest}/{directory}/.{name}.crc")
        filesystem.delete_dir(root)
        return len(moves)
    fs, path = hadoop_fs(spark, flat_dir)
    names = [status.getPath().getName() for status in fs.listStatus(path(flat_dir))]
    moves = list(destinations([n for n in names if n.endswith(".parquet")]))
    for name, directory in moves:
        fs.mkdirs(path(f"{target}/{directory}"))
        if not fs.rename(path(f"{flat_dir}/{name}"), path(f"{target}/{directory}/{name}")):
            raise RuntimeError(f"{flat_dir}/{name}: could not move it to {target}/{directory}")
    fs.delete(path(flat_dir), True)
    return len(moves)


def hadoop_fs(spark: SparkSession, location: str) -> tuple[Any, Any]:
    """Hadoop's file system of `location` (as Spark writes there) and its Path class (Py4J's proxies of the
    JVM's objects: Any to Python)."""
    jvm: Any = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path
    return path(location).getFileSystem(spark._jsc.hadoopConfiguration()), path


@dataclass(frozen=True)
class CurveIndex:
    """A curve's index over the keys (`layout.curves`: z-order or Hilbert over quantile ranks), its boundaries
    drawn once (`curve_index`) and put on any frame of the input's rows (`on`): the rows to write, and the
    rows drawn for the file boundaries when the manifests give the rest."""

    name: str
    strategy: Literal["zorder", "hilbert"]
    keys: tuple[str, ...]
    bounds: tuple[Any, ...]  # per key, its quantile boundaries (numpy arrays)

    def on(self, df: DataFrame) -> DataFrame:
        """`df` with column `name`: each row's curve index, a long, computed in the executors over Arrow
        batches of the key columns with the same code the advisor runs,
        so the layout written is the layout predicted."""
        bits, bounds, strategy = curves.curve_bits(len(self.keys)), list(self.bounds), self.strategy

        def index(*columns: pa.Array) -> pa.Array:
            return pa.array(curves.curve_index(columns, bounds, strategy=strategy, bits=bits).view(np.int64))

        return with_arrow_column(df, self.name, index, list(self.keys), T.LongType())  # Spark 3.5 and 4.0 too


def curve_index(df: DataFrame, name: str, strategy: Strategy, keys: Sequence[str], rows: int) -> CurveIndex:
    """The curve over `keys` of `df`'s rows (`rows` of them): each key's quantile boundaries from a seeded
    sample of at most CURVE_SAMPLE rows of the key columns over the job's whole input (one boundary set for
    every group, as `lakesort advise` predicts with)."""
    bits = curves.curve_bits(len(keys))
    fraction = min(1.0, CURVE_SAMPLE / max(1, rows))
    sample = to_arrow(df.select(*keys).sample(fraction=fraction, seed=SAMPLE_SEED))
    bounds = tuple(curves.quantile_boundaries(sample.column(k), 1 << bits) for k in keys)
    assert strategy != "linear"  # a curve's (`JobPlan.curve`)
    return CurveIndex(name=name, strategy=strategy, keys=tuple(keys), bounds=bounds)


def finish_files(spark: SparkSession, job: JobPlan, target: str, slots: SlotPlan) -> None:
    """After the write, in the executors: each output file written in pieces is stitched from them
    (`layout.parquet.stitch`: row groups copied byte for byte, the pieces deleted), and list elements and
    map keys/values get their Iceberg field ids in every footer (`layout.parquet.field_ids`)."""
    ids = job.nested_ids
    scheme = target.split("://", 1)[0] + "://" if "://" in target else ""
    paths = [scheme + p if scheme and not p.startswith(scheme) else p for _, p in find_parquet_files(target)]
    work = stitch_lists(slots, paths, GROUP, PART) if slots.most_pieces > 1 else [[p] for p in paths]
    if not ids:
        work = [w for w in work if len(w) > 1]
    if not work:
        return
    t0 = time.perf_counter()
    tasks = max(1, min(len(work), spark.sparkContext.defaultParallelism * 2))
    finish = configured(job.plan.table_location, dict(job.plan.io_properties))(finish_staged_file)
    done = spark.sparkContext.parallelize(work, tasks).map(lambda w: finish(w, ids)).collect()
    stitched = [w for w in work if len(w) > 1]
    log.info("stitched %d file(s) from %d piece(s), %d footer(s) given list/map field ids, in %.1fs",
             len(stitched), sum(len(w) for w in stitched), sum(done), time.perf_counter() - t0)
