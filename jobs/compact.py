"""Sort-and-compact job: `spark-submit jobs/compact.py --plan PLAN.json --manifest MANIFEST.json`.

For the groups of the rewrite plan, in one Spark application and parallel in every stage: read exactly
the planned input files as Iceberg defines their rows (Spark's own reader for files whose columns match
the schema by name, field id and type; pyiceberg's reader in the executors for the others:
`layout.compaction.executor.inputs`), tag each row with its group and the partition of the table's current
spec, apply the merge rule for keyed tables, and in a pass over the sort and partition columns count rows and
sample the sort key. File boundaries are the sample's quantiles; a file is cut into slots (a large file
into several pieces, `layout.compaction.executor.slots`) and each row goes to the task of its slot (the pass
that reads every column for that shuffle fingerprints the input; small files' slots share a task), which sorts
it (linear: by one long prefix of several keys where their types allow,
`layout.compaction.executor.sort_prefix`; or a z-order or Hilbert curve over the keys' quantile ranks) and
writes Parquet with the spec's writer settings and Iceberg field ids to a staging directory under the table's
location; a file written in pieces is then stitched from their row groups (`layout.parquet.stitch`). Then the
staged files are read back from storage and fingerprinted file by file. The manifest records it all, with each
output file's partition values; verify (outside Spark) compares the figures, proves the output against
Iceberg's own metadata and checks the layout before anything is committed.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

# spark-submit runs this file with its directory first on sys.path, which makes `compaction` the job's own
# package (jobs/compaction); a test that loads this file by its path has to put it there.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
import installed_pyspark

installed_pyspark.prefer_installed()  # before pyspark is imported (0.45 s less compiling: see the module)

import compaction
from compaction.progress import reporting
from compaction.run import compact_groups, write_manifest
from pyspark import SparkConf, SparkContext, cloudpickle
from pyspark.sql import SparkSession

from layout.compaction.plan import RewritePlan

# The executors import `layout` (the zip or the installed package) but not this package: what they run of it
# travels by value.
cloudpickle.register_pickle_by_value(compaction)  # type: ignore[no-untyped-call]  # pyspark's vendored copy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jobs/compact.py", description=__doc__.splitlines()[0])
    parser.add_argument("--plan", required=True, help="the rewrite plan (JSON) from `lakesort plan-rewrite`")
    parser.add_argument("--manifest", required=True, help="where to write the staged-output manifest (JSON)")
    parser.add_argument("--groups", help="only these group ids, comma separated (default: all)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    plan = RewritePlan.from_json(Path(args.plan).read_text())
    wanted = {int(g) for g in args.groups.split(",")} if args.groups else None
    groups = [g for g in plan.groups if wanted is None or g.group_id in wanted]
    spark = spark_session(f"lakesort-compact {plan.table} {plan.run_id}")
    started = time.perf_counter()
    try:
        timings: dict[str, float] = {}
        with reporting(spark):  # progress lines in the driver's log while Spark works (`compaction.progress`)
            staged = compact_groups(spark, plan, groups, timings=timings)
        write_manifest(spark, plan, staged, args.manifest, time.perf_counter() - started, timings=timings)
    finally:
        spark.stop()
    return 0


def spark_session(name: str) -> SparkSession:
    """The job's session, in UTC; on a local master its Python daemon imports the installed pyspark
    (`installed_pyspark`: 0.5 s less before the first Python task of the job)."""
    SparkContext._ensure_initialized()  # the gateway spark-submit started: its conf names the master
    submitted = dict(SparkConf().getAll())
    builder = SparkSession.builder.appName(name).config("spark.sql.session.timeZone", "UTC")
    for key, value in installed_pyspark.daemon_conf(submitted.get("spark.master", ""), submitted).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


if __name__ == "__main__":
    sys.exit(main())
