"""`lakesort housekeep`: compact and expire lakesort's own tables (lakesort.*)."""

from __future__ import annotations

import argparse
import json
import sys

from layout.catalog import load_catalog
from layout.cli import EXIT_FAILURE, EXIT_OK
from layout.upkeep.housekeeping import housekeep


def run(args: argparse.Namespace) -> int:
    results = housekeep(load_catalog(args.catalog), dry_run=args.dry_run)
    status = EXIT_FAILURE if any(r.error for r in results) else EXIT_OK
    if args.json:
        json.dump({"dry_run": args.dry_run, "tables": [r.model_dump(mode="json") for r in results]},
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
        return status
    for result in results:
        print(result.summary())
    if not results:
        print("no lakesort tables in this catalog yet: nothing to do")
    if args.dry_run:
        print("dry run, nothing changed")
    return status
