"""`lakesort spark-jars`: the S3A connector jars for the Spark that runs the job
(layout.compaction.pipeline.hadoop_aws)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from layout.cli import EXIT_OK
from layout.compaction.pipeline.hadoop_aws import (
    EXCLUDED_GROUPS,
    fetch,
    find_mvn,
    hadoop_version_in,
    jars_of_spark_in_use,
    pom_text,
    s3a_jars,
    spark_jars_value,
)
from layout.errors import UsageError


def run(args: argparse.Namespace) -> int:
    if args.offline and not args.fetch:
        raise UsageError("--offline goes with --fetch DIR")
    mvn = find_mvn() if args.fetch else None  # before any work: no Maven, no fetch
    if args.hadoop_version:
        version, source = args.hadoop_version, "--hadoop-version"
    else:
        jars_dir = jars_of_spark_in_use()
        version, source = hadoop_version_in(jars_dir), f"the hadoop-client-api jar in {jars_dir}"
    jars = s3a_jars(version)
    if args.print_pom:
        sys.stdout.write(pom_text(jars))
        return EXIT_OK
    if args.fetch:
        assert mvn is not None  # found above
        paths = fetch(jars, Path(args.fetch), mvn=mvn, offline=args.offline)
        print(f"{len(paths)} jars for S3A on Hadoop {version} in {args.fetch}; in spark-defaults.conf:",
              file=sys.stderr)
        print(f"spark.jars {spark_jars_value(paths)}")
        return EXIT_OK
    print(f"Hadoop {version} (from {source}): S3A needs, with AWS SDK v{jars.sdk.major} {jars.sdk.version}")
    for dep in jars.dependencies:
        without = f"  (without {', '.join(f'{g}:{a}' for g, a in dep.exclusions)})" if dep.exclusions else ""
        print(f"  {dep.coordinate}{without}")
    print(f"and what they depend on, less what Spark ships: {', '.join(EXCLUDED_GROUPS)}.")
    print("Fetch them once (Maven on PATH), then name them in spark-defaults.conf; never "
          "spark.jars.packages,\nwhich resolves them at every start:\n"
          "  lakesort spark-jars --fetch DIR        # prints the `spark.jars DIR/a.jar,...` line to add\n"
          "  lakesort spark-jars --print-pom        # the pom, to fetch them elsewhere\n"
          "or copy DIR/*.jar into the Spark's jars/ on every node. And for s3:// locations:\n"
          "  spark.hadoop.fs.s3.impl org.apache.hadoop.fs.s3a.S3AFileSystem")
    return EXIT_OK
