"""`lakesort cleanup`: remove staged files orphaned by crashed runs, under the table's lease."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from layout.catalog import load_table
from layout.cli import EXIT_FAILURE, EXIT_OK
from layout.upkeep.cleanup import cleanup
from layout.upkeep.lease import LeaseOwner, TableBusy


def run(args: argparse.Namespace) -> int:
    try:  # under the table's lease, as a "cleanup" run: never beside a compaction of the table
        result = cleanup(load_table(args.table), grace_hours=args.grace_hours, dry_run=args.dry_run,
                         owner=LeaseOwner.cleanup())
    except TableBusy as exc:
        print(f"lakesort cleanup: table busy, nothing deleted: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        json.dump({**dataclasses.asdict(result), "removed": result.removed}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return EXIT_OK
    verb = "would remove" if result.dry_run else "removed"
    print(f"{args.table}: {verb} {result.removed} orphaned staged file(s) ({result.bytes_deleted} bytes); "
          f"kept {result.kept_referenced} referenced by one of {result.snapshots} snapshot(s) and "
          f"{result.kept_fresh} younger than {result.grace_hours:g}h ({result.seconds:.1f}s)")
    return EXIT_OK
