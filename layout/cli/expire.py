"""`lakesort expire`: expire old snapshots and delete the files nothing retained references."""

from __future__ import annotations

import argparse
import sys

from layout.cli import EXIT_FAILURE, EXIT_OK
from layout.cli.args import table_spec
from layout.sizes import format_size
from layout.upkeep.lease import LeaseOwner, TableBusy, new_run_id
from layout.upkeep.maintain import maintain_table


def run(args: argparse.Namespace) -> int:
    spec = table_spec(args)  # a bad or missing spec: exit 2 before anything is opened
    try:  # under the table's lease, as a command-line run: never beside a compaction of the table
        result = maintain_table(spec.table, owner=LeaseOwner.cli(new_run_id("expire")), spec=spec,
                                dry_run=args.dry_run)
    except TableBusy as exc:
        print(f"lakesort expire: table busy, nothing expired or deleted: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(result.model_dump_json(indent=1))
        return EXIT_OK
    print(result.summary())
    for d in result.deleted:
        if d.files:
            print(f"  {d.kind:<14} {d.files:>8} file(s) {format_size(d.bytes):>12}")
    if result.dry_run:
        print("dry run, nothing changed (the files are listed in the log on stderr)")
    return EXIT_OK
