"""`lakesort inspect`: what a page-index-aware reader sees in Parquet files."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from layout.cli import EXIT_OK
from layout.cli.args import column_list
from layout.io import data_files
from layout.parquet import ParquetFile
from layout.read.inspect import file_layout, render_pages, render_summary

log = logging.getLogger("lakesort")


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    files = data_files(args.source)
    columns = column_list(args.columns)
    # The summary needs boundary orders, hence the column index, but never the per-page listing.
    layouts = []
    for filesystem, path in files:
        layouts.append(file_layout(ParquetFile.open(path, filesystem=filesystem), columns))
    log.info("inspected %d file(s) in %.2fs", len(layouts), time.perf_counter() - started)
    if args.json:
        json.dump({"files": [lay.to_json() for lay in layouts]}, sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
        return EXIT_OK
    lines = render_summary(layouts) if args.summary else (
        line for lay in layouts for line in render_pages(lay))
    for line in lines:
        print(line)
    return EXIT_OK
