"""`lakesort housekeep`: compact and expire lakesort's own tables (lakesort.*)."""

from __future__ import annotations

import argparse

from layout.catalog import load_catalog
from layout.cli import EXIT_FAILURE, EXIT_OK
from layout.upkeep.housekeeping import housekeep


def run(args: argparse.Namespace) -> int:
    results = housekeep(load_catalog(args.catalog), dry_run=args.dry_run)
    for result in results:
        print(result.summary())
    if not results:
        print("no lakesort tables in this catalog yet: nothing to do")
    if args.dry_run:
        print("dry run, nothing changed")
    return EXIT_FAILURE if any(r.error for r in results) else EXIT_OK
