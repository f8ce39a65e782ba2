"""`lakesort report`: the HTML reports for data owners."""

from __future__ import annotations

import argparse
from pathlib import Path

from layout.cli import EXIT_OK
from layout.report.render import write_reports


def run(args: argparse.Namespace) -> int:
    index = write_reports(Path(args.out) if args.out else None)
    print(f"report: {index}")
    return EXIT_OK
