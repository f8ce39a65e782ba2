"""`lakesort plan`: what a page-index-aware reader must read for a predicate, level by level."""

from __future__ import annotations

import argparse
import json
import sys

from layout.cli import EXIT_OK
from layout.cli.args import column_list
from layout.read.plan import plan


def run(args: argparse.Namespace) -> int:
    result = plan(args.source, args.where, column_list(args.columns))
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return EXIT_OK
    c = result.counts
    print(f"plan for {args.source} where {result.predicate} ({result.plan_ms:.1f} ms)")
    rows = [("level", "total", "selected", "skipped")]
    for label, total, chosen in (
        ("files", c.files_total, c.files_selected), ("row groups", c.row_groups_total, c.row_groups_selected),
        ("pages", c.pages_total, c.pages_selected), ("rows", c.rows_total, c.rows_selected),
        ("bytes", c.bytes_total, c.bytes_selected),
        # Merge-on-read tables: the delete files a reader opens and merges for the selected data files.
        *((("delete files", c.delete_files_total, c.delete_files_selected),
           ("delete bytes", c.delete_bytes_total, c.delete_bytes_selected)) if c.delete_files_total else ()),
    ):
        skipped = f"{100 * (1 - chosen / total):.1f}%" if total else "-"
        # None: not counted (an Iceberg plan opens only the files its manifests keep)
        rows.append((label, "-" if total is None else str(total), str(chosen), skipped))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  " + "  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                               for i, (v, w) in enumerate(zip(r, widths))))
    return EXIT_OK
