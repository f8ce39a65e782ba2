"""The job's write (jobs/compaction): how rows are placed into files and files into tasks, on the session's
in-process SparkSession. A group larger than the target splits into disjoint ordered files, each written by a
task of its own; files written in pieces are stitched with their indexes; small files share write tasks; key
ranges come from the manifests (and a wrong bound writes again); and the parts the placement relies on agree
with Spark: boundaries picked in Python, the file boundary comparison, literal frames, task keys.

The compactions run through `layout.compaction.pipeline.driver.compact` with only `submit` replaced
(`in_process_job`, tests/conftest.py) on the demo table (`demo_home`, tests/demo_tables.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from demo_tables import (
    MONTHS,
    by_every_column,
    canonical,
    demo_spec,
    live_files,
    month_filter,
    partition_of,
    readable,
)
from lossless import job_part

import layout.compaction.pipeline.driver
from layout.catalog import load_catalog, load_table
from layout.compaction.pipeline.driver import compact
from layout.compaction.plan import SortKeyModel
from layout.compaction.planning.planner import RewritePlan
from layout.io import resolve
from layout.parquet import ParquetFile

pytestmark = pytest.mark.spark


def test_a_group_larger_than_the_target_splits_into_disjoint_ordered_files(demo_home, spark, in_process_job):
    """One month, one rewrite group, target_file_size half its input: the plan asks for two files. Every
    output file is sorted by (l_shipdate, l_orderkey) and together they hold exactly the rows pyiceberg
    scanned from the month before the compaction. The two files' key ranges are disjoint and ordered: the
    boundary is a sampled quantile of the whole sort key, so equal keys share a file and the last key of one
    file is below the first key of the next. Each file is written by a task of its own (not one task for the
    group, as a window over the group ran before)."""
    table = load_table("demo.lineitem")
    month = MONTHS[0]
    inputs = [f for f in live_files(table) if partition_of(table, f) == month]
    expected = by_every_column(canonical(readable(table).scan(row_filter=month_filter(month)).to_arrow()))
    assert expected.num_rows == sum(f.record_count for f in inputs) > 0
    # The writer's defaults (not demo_spec's tiny pages), so the output is about as big as the input.
    spec = demo_spec(target_file_size=math.ceil(sum(f.file_size_in_bytes for f in inputs) / 2), writer={})

    # No layout rules: this test's own checks below are the oracle, not `layout.verify.rules`'s.
    result = compact("demo.lineitem", spec=spec, partitions=[month], verify=lambda manifest: [])
    tracker = spark.sparkContext.statusTracker()
    jobs = [tracker.getJobInfo(j)
            for j in tracker.getJobIdsForGroup("lakesort: fingerprint, shuffle, sort, write")]
    # The last stage of the part is the write (after AQE's broadcasts and the shuffle): a task per file.
    write = tracker.getStageInfo(max(s for job in jobs if job is not None for s in job.stageIds))
    assert write is not None and write.numTasks == 2, write
    (run,) = in_process_job
    (group,) = run.groups
    assert group.partition == month and group.output_files == 2 and len(group.inputs) == len(inputs)
    table = table.refresh()
    outputs = [f for f in live_files(table) if partition_of(table, f) == month]
    assert result.files_added == len(outputs) >= 1
    # Each task's own sort (by the key alone: here its exact prefix, `layout.compaction.executor.sort_prefix`)
    # is the write's only sort: Spark's planned write would sort by the partition columns instead, keeping the
    # key order only while nothing spills.
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()  # a Scala Seq
    plans = [p for p in (executions.apply(i).physicalPlanDescription() for i in range(executions.size()))
             if "lakesort-staging" in p and "InsertIntoHadoopFsRelationCommand" in p]
    sorts = [line for line in plans[-1].splitlines() if line.startswith("Arguments: [") and " ASC " in line]
    # (the description lists the adaptive plan's initial and final forms: the same sort)
    # (the prefix is computed again from the key columns after the shuffle, not carried through it)
    assert sorts and all(
        s.startswith("Arguments: [(shiftleft(") and s.count(" ASC ") == 1 and "lakesort_group" not in s
        for s in sorts
    ), sorts

    keys = ["l_shipdate", "l_orderkey"]
    spans, parts = [], []
    for f in outputs:
        filesystem, path = resolve(f.file_path)
        data = pq.read_table(path, filesystem=filesystem)
        tuples = list(zip(*(data.column(k).to_pylist() for k in keys), strict=True))
        assert tuples and tuples == sorted(tuples), f"{path}: rows not sorted by {keys}"
        spans.append((tuples[0], tuples[-1]))
        parts.append(data)
    written = by_every_column(canonical(pa.concat_tables(parts, promote_options="permissive")))
    assert written.num_rows == expected.num_rows
    assert written.cast(expected.schema).equals(expected), "the output files hold exactly the month's rows"
    after = by_every_column(canonical(readable(table).scan(row_filter=month_filter(month)).to_arrow()))
    assert after.equals(expected), "pyiceberg reads the same rows back after the commit"

    assert len(outputs) == 2
    (first_lo, first_hi), (second_lo, second_hi) = sorted(spans)
    assert first_lo <= first_hi < second_lo <= second_hi, f"the files' key ranges overlap: {sorted(spans)}"
    # Neither file is a sliver: the rows are split about evenly (ranks, not bytes: within a factor of two).
    assert min(p.num_rows for p in parts) * 2 >= max(p.num_rows for p in parts)


def _write_stage_tasks(spark) -> int:
    tracker = spark.sparkContext.statusTracker()
    jobs = [tracker.getJobInfo(j)
            for j in tracker.getJobIdsForGroup("lakesort: fingerprint, shuffle, sort, write")]
    write = tracker.getStageInfo(max(s for job in jobs if job is not None for s in job.stageIds))
    return write.numTasks


def test_files_written_in_pieces_are_stitched_with_their_indexes(demo_home, spark, in_process_job):
    """A month into two files, each written by three tasks (spark.lakesort.compact.pieceBytes at a sixth of
    the input) and stitched from their row groups (`layout.parquet.stitch`). Oracles that do not trust the
    stitcher: pyiceberg reads the month's rows back unchanged after the commit; pyarrow reads each file sorted
    with disjoint key ranges; the full verification (column and offset indexes, bloom filters, order) passes;
    every row group's bloom filter knows the row group's keys."""
    table = load_table("demo.lineitem")
    month = MONTHS[1]
    inputs = [f for f in live_files(table) if partition_of(table, f) == month]
    size = sum(f.file_size_in_bytes for f in inputs)
    expected = by_every_column(canonical(readable(table).scan(row_filter=month_filter(month)).to_arrow()))
    spec = demo_spec(target_file_size=math.ceil(size / 2),
                     writer={"row_group_size": "8KiB", "page_size": "1KiB", "page_row_count_limit": 20,
                             "bloom_filters": {"l_orderkey": {"ndv": 1000, "fpp": 0.05}}})
    spark.conf.set("spark.lakesort.compact.pieceBytes", str(math.ceil(size / 6)))
    try:
        result = compact("demo.lineitem", spec=spec, partitions=[month])
    finally:
        spark.conf.unset("spark.lakesort.compact.pieceBytes")
    assert _write_stage_tasks(spark) == 6
    table = table.refresh()
    outputs = [f for f in live_files(table) if partition_of(table, f) == month]
    assert result.files_added == len(outputs) == 2
    after = by_every_column(canonical(readable(table).scan(row_filter=month_filter(month)).to_arrow()))
    assert after.equals(expected), "pyiceberg reads the same rows back after the commit"
    keys = ["l_shipdate", "l_orderkey"]
    spans = []
    for f in outputs:
        filesystem, path = resolve(f.file_path)
        assert path.rsplit("/", 1)[1].startswith("stitched-part-"), path
        pf = ParquetFile.open(path, filesystem=filesystem)
        assert pf.num_row_groups >= 3, "three pieces, each at least a row group"
        data = pq.read_table(path, filesystem=filesystem)
        tuples = list(zip(*(data.column(k).to_pylist() for k in keys), strict=True))
        assert tuples == sorted(tuples), f"{path}: rows not sorted by {keys}"
        spans.append((tuples[0], tuples[-1]))
        first = 0
        for rg in range(pf.num_row_groups):
            bloom = pf.bloom_filter(rg, "l_orderkey")
            assert bloom is not None and bloom.might_contain(data.column("l_orderkey")[first].as_py())
            assert (pf.offset_index(rg, "l_orderkey") is not None
                    and pf.column_index(rg, "l_orderkey") is not None)
            first += pf.metadata.row_groups[rg].num_rows
    (a_lo, a_hi), (b_lo, b_hi) = sorted(spans)
    assert a_lo <= a_hi < b_lo <= b_hi


@pytest.mark.parametrize("flat", [False, True])
def test_small_files_share_write_tasks(demo_home, spark, in_process_job, flat):
    """Six months of ~3 small files each. Written by Spark's partitioned writer
    (spark.lakesort.compact.flatWrite off, as past FLAT_MAX_TASKS slots or on an object store): their slots
    share tasks (never two of one month; at least four tasks on two cores), so the write runs fewer tasks than
    it writes files. Written into one directory (the default on a local file system): a task per file, each
    moved into its month's directory. Either way every file is one partition's, sorted, verified, and
    pyiceberg reads each month back unchanged."""
    table = load_table("demo.lineitem")
    months = sorted({partition_of(table, f) for f in live_files(table)})[:6]
    expected = {m: by_every_column(canonical(readable(table).scan(row_filter=month_filter(m)).to_arrow()))
                for m in months}
    spark.conf.set("spark.lakesort.compact.flatWrite", str(flat).lower())
    try:
        result = compact("demo.lineitem", spec=demo_spec(), partitions=months)
    finally:
        spark.conf.unset("spark.lakesort.compact.flatWrite")
    if flat:
        # a task per file (no pieces here)
        assert _write_stage_tasks(spark) == result.files_added > len(months)
    else:
        assert 4 <= _write_stage_tasks(spark) < result.files_added
    table = table.refresh()
    for m in months:
        after = by_every_column(canonical(readable(table).scan(row_filter=month_filter(m)).to_arrow()))
        assert after.equals(expected[m])


def _group_jobs(spark, part: str) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(f"lakesort: {part}"))


@pytest.mark.parametrize("bounds", ["true", "too narrow"])
def test_key_ranges_come_from_the_manifests_and_a_wrong_bound_writes_again(demo_home, spark, job, monkeypatch,
                                                                           caplog, bounds):
    """Every input read by Spark's own reader, no merge rule: the job runs no first pass (no Spark job in its
    "read, sample" part); rows and the sort prefix's key ranges come from the manifests (`InputFile.ranges`).
    With bounds narrower than the data (a writer's wrong metrics, simulated in the plan) the write sees values
    outside them, says so, and writes everything again with ranges from the input. Either way the month is
    split into two sorted files with disjoint key ranges, and pyiceberg reads the same rows back."""
    table = load_table("demo.lineitem")
    month = MONTHS[0]
    inputs = [f for f in live_files(table) if partition_of(table, f) == month]
    expected = by_every_column(canonical(readable(table).scan(row_filter=month_filter(month)).to_arrow()))
    before = _group_jobs(spark, "read, sample")
    plans: list[RewritePlan] = []

    def submit(plan_path, manifest_path, *, master, name, conf=None, work_dir, groups=None):
        plan = RewritePlan.from_json(Path(plan_path).read_text())
        files = [f for g in plan.groups for f in g.inputs]
        assert files and all(f.spark_native and len(f.ranges) == 2 and all(f.ranges) for f in files)
        if bounds == "too narrow":  # every file claims l_shipdate's range is its upper bound alone
            groups_ = [g.model_copy(update={"inputs": tuple(
                f.model_copy(update={"ranges": ((f.ranges[0][1], f.ranges[0][1]), f.ranges[1])})
                for f in g.inputs)})
                for g in plan.groups]
            plan = plan.model_copy(update={"groups": tuple(groups_)})
        plans.append(plan)
        job.write_manifest(spark, plan, job.compact_groups(spark, plan, list(plan.groups)),
                           str(manifest_path), 0.0)

    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", submit)
    spec = demo_spec(target_file_size=math.ceil(sum(f.file_size_in_bytes for f in inputs) / 2), writer={})
    with caplog.at_level("WARNING", logger="lakesort.compact"):
        result = compact("demo.lineitem", spec=spec, partitions=[month])
    first_pass = _group_jobs(spark, "read, sample") - before
    assert plans and (first_pass > 0) == (bounds == "too narrow"), first_pass
    missed = [r for r in caplog.records if "outside the range" in r.getMessage()]
    assert bool(missed) == (bounds == "too narrow"), [r.getMessage() for r in caplog.records]
    if missed:
        assert "l_shipdate" in missed[0].getMessage() and "writing again" in missed[0].getMessage()
    # ... and the run's record carries it as a warning, naming the column (not only the job's log)
    from layout.metrics.measure import read_runs

    (run,) = [r for r in read_runs(load_catalog()).to_pylist() if r["run_id"] == plans[0].run_id]
    warned = [f for f in json.loads(run["findings"]) if f["rule"] == "manifest_bounds"]
    assert run["status"] == "committed" and len(warned) == (bounds == "too narrow"), run["findings"]
    assert all(f["column"] == "l_shipdate" and f["severity"] == "warning" for f in warned)
    table = table.refresh()
    outputs = [f for f in live_files(table) if partition_of(table, f) == month]
    assert result.files_added == len(outputs) == 2
    spans = []
    for f in outputs:
        filesystem, path = resolve(f.file_path)
        data = pq.read_table(path, filesystem=filesystem)
        tuples = list(zip(data.column("l_shipdate").to_pylist(),
                          data.column("l_orderkey").to_pylist(), strict=True))
        assert tuples == sorted(tuples), f"{path}: rows not sorted"
        spans.append((tuples[0], tuples[-1]))
    (a_lo, a_hi), (b_lo, b_hi) = sorted(spans)
    assert a_lo <= a_hi < b_lo <= b_hi
    after = by_every_column(canonical(readable(table).scan(row_filter=month_filter(month)).to_arrow()))
    assert after.equals(expected), "pyiceberg reads the same rows back after the commit"


@pytest.mark.parametrize("slots", [2, 3, 7])
def test_a_single_partition_s_boundaries_picked_in_python_are_spark_s(spark, job, slots):
    """`slots.quantile_picks` over the drawn rows' prefixes sorted in Python gives the boundaries that
    `boundaries` picks in Spark from the same sample (the first pass's shape, `as_summary`)."""
    from pyspark.sql import functions as F

    from layout.compaction.executor.slots import quantile_picks
    from layout.compaction.executor.sort_prefix import plan_prefix

    rows = [(0, "p", (i * 7919) % 1000, (i * 104729) % 50 - 25) for i in range(997)] + [(0, "p", None, 3)]
    drawn = spark.createDataFrame(rows, "lakesort_group int, lakesort_part string, a long, b long")
    keys = [SortKeyModel(column="a", direction="asc", nulls="first"),
            SortKeyModel(column="b", direction="desc", nulls="last")]
    prefix = plan_prefix([("CAST(`a` AS BIGINT)", "asc", "first", 0, 999),
                          ("CAST(`b` AS BIGINT)", "desc", "last", -25, 24)])
    (row,) = (
        job_part("sample")
        .boundaries(spark, job_part("sample").as_summary(drawn, keys), {(0, "p"): slots}, keys, prefix)
        .collect()
    )
    picked = quantile_picks(sorted(r[0] for r in drawn.select(F.expr(prefix.sql())).collect()), slots)
    assert list(row["__bounds"]) == picked and len(picked) == slots - 1
    assert quantile_picks([], slots) == []


@pytest.mark.parametrize("directions", [("asc", "first", "asc", "first"), ("asc", "last", "desc", "first"),
                                        ("desc", "last", "asc", "last"), ("desc", "first", "desc", "last")])
def test_the_file_boundary_comparison_is_spark_s_sort_order(spark, job, directions):
    """The job places rows against sampled boundary keys with `before`, written as Spark expressions. For
    every pair of keys (two columns: a double with NaN, -0.0 and nulls, a string with nulls), `before` must
    say exactly what Spark's own sort says (rank by orderBy), in each direction and null placement: otherwise
    a file could take rows that sort into its neighbour, and files would overlap."""
    from pyspark.sql import functions as F

    keys = [SortKeyModel(column="x", direction=directions[0], nulls=directions[1]),
            SortKeyModel(column="s", direction=directions[2], nulls=directions[3])]
    xs = [None, float("nan"), -1.5, -0.0, 0.0, 2.0, float("inf")]
    ss = [None, "", "a", "ab", "b"]
    rows = [(x, s) for x in xs for s in ss]
    df = spark.createDataFrame(rows, "x double, s string")
    def norm(x, s):  # Spark's sort: every NaN equal, -0.0 equal to 0.0
        return ("nan" if x is not None and math.isnan(x) else (0.0 if x == 0 else x)), s

    rank: dict = {}
    for r in df.orderBy(*[job_part("frames").ordered(key) for key in keys]).collect():
        rank.setdefault(norm(r.x, r.s), len(rank))
    left = df.select(F.col("x"), F.col("s"))
    right = df.select(F.struct(F.col("x").alias("k0"), F.col("s").alias("k1")).alias("b"))
    pairs = left.crossJoin(right).select("x", "s", "b", job_part("frames").before([F.col("x"), F.col("s")],
                                                                                  F.col("b"), keys)
                                        .alias("before")).collect()

    wrong = [(p.x, p.s, p.b.k0, p.b.k1, p.before) for p in pairs
             if p.before != (rank[norm(p.x, p.s)] < rank[norm(p.b.k0, p.b.k1)])]
    assert len(pairs) == len(rows) ** 2 and not wrong, wrong[:5]


def test_literal_frames_keep_every_value_and_type(spark, job):
    """Small lookup tables (file listing, per-partition rates and first file ids) are one SQL VALUES clause:
    strings with quotes, backslashes, newlines and non-ASCII characters,
    ints and doubles come back as given."""
    rows = [("it's", 1, 0.25), ("a\\b'", 2**40, 1.0), ("new\nline \u00fc \u2713", -3, 1e-300), ("", 0, 3.0)]
    frame = job_part("frames").literal_frame(spark, rows, ["s", "__n", "rate"])
    assert [tuple(r) for r in frame.collect()] == rows
    assert [f.dataType.simpleString() for f in frame.schema.fields] == ["string", "bigint", "double"]
    assert (job_part("frames").literal_frame(spark, [(1,)], ["g"]).schema.fields[0].dataType.simpleString()
            == "int")


def test_task_keys_send_each_slot_to_its_own_task(spark):
    """The key of task i lands in shuffle partition i under Spark's hash partitioning of that many tasks, and
    `spark_hash_int` is Spark's own `hash()` of an int (edge values and a seeded spread of others)."""
    import random

    from pyspark.sql import functions as F

    from layout.compaction.executor.slots import spark_hash_int, task_keys

    rng = random.Random(7)
    values = [0, 1, -1, 42, (1 << 31) - 1, -(1 << 31),
              *[rng.randint(-(1 << 31), (1 << 31) - 1) for _ in range(2000)]]
    got = spark.createDataFrame([(v,) for v in values], "v int").select("v", F.hash("v").alias("h")).collect()
    assert [(r.v, r.h) for r in got] == [(v, spark_hash_int(v)) for v in values]
    for n in (1, 3, 84, 1000):
        keys = task_keys(n)
        placed = (
            spark.createDataFrame([(k, i) for i, k in enumerate(keys)], "k int, i int")
            .repartition(n, "k")
            .select("i", F.spark_partition_id().alias("p"))
            .collect()
        )
        assert sorted((r.i, r.p) for r in placed) == [(i, i) for i in range(n)]
