"""`lakesort spark-archive`: build the class archive every job's Spark driver starts from."""

from __future__ import annotations

import argparse

from layout.cli import EXIT_OK
from layout.compaction.pipeline.class_archive import archive_path, build_archive
from layout.compaction.pipeline.submit import spark_submit_binary
from layout.errors import UsageError
from layout.sizes import format_size


def run(args: argparse.Namespace) -> int:
    if args.path:
        path = archive_path()
        if path is None:
            raise UsageError("no Java or no Spark in this environment: run `make setup`")
        print(path if path.is_file() else f"{path} (not built: `lakesort spark-archive` builds it)")
        return EXIT_OK
    path = build_archive(spark_submit=spark_submit_binary(), force=args.force)
    print(f"Spark class archive: {path} ({format_size(path.stat().st_size)})")
    return EXIT_OK
