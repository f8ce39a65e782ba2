"""`lakesort report`: the HTML reports for data owners."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from layout.cli import EXIT_OK
from layout.report.render import write_reports


def run(args: argparse.Namespace) -> int:
    index = write_reports(Path(args.out) if args.out else None)
    if args.json:
        pages = sorted(str(p) for p in index.parent.glob("*.html"))
        json.dump({"index": str(index), "pages": pages}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return EXIT_OK
    print(f"report: {index}")
    return EXIT_OK
