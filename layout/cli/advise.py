"""`lakesort advise`: predict which sort would serve the owners' probes best."""

from __future__ import annotations

import argparse
import json
import sys

from layout.advise import advise
from layout.advise.render import render_advice
from layout.cli import EXIT_OK
from layout.cli.args import table_spec


def run(args: argparse.Namespace) -> int:
    spec = table_spec(args)  # a missing or broken spec, or one without probes: exit 2 before any data is read
    result = advise(spec.table, spec=spec, sample_rows=args.sample, seed=args.seed, record=not args.no_record)
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
        return EXIT_OK
    for line in render_advice(result):
        print(line)
    return EXIT_OK
