"""`lakesort demo`: build the demo warehouse (TPC-H lineitem in a local Iceberg catalog)."""

from __future__ import annotations

import argparse
from pathlib import Path

from layout.cli import EXIT_OK
from layout.demo import build_demo


def run(args: argparse.Namespace) -> int:
    summary = build_demo(Path(args.home), scale=args.scale, batches=args.batches, replace=args.replace)
    verb = "created" if summary.created else "kept existing"
    print(f"{verb} {summary.table}: {summary.rows} rows in {summary.data_files} data files, "
          f"{summary.snapshots} snapshots ({summary.seconds:.1f}s)")
    return EXIT_OK
