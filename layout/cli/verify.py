"""`lakesort verify`: check written files against the table spec, with diagnoses; optionally its GX suite."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from layout.cli import EXIT_FAILURE, EXIT_OK
from layout.errors import UsageError
from layout.settings import settings
from layout.spec import TableSpec, load_spec
from layout.verify.expectations import facts_for_source, validate_facts
from layout.verify.findings import SEVERITIES
from layout.verify.rules import verify_source


def run(args: argparse.Namespace) -> int:
    spec = load_spec(Path(args.spec)) if args.spec else None
    report = verify_source(args.source, spec)
    if args.json:
        if args.gx:
            raise UsageError("--gx prints a text report; leave out --json")
        json.dump(report.to_json(), sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return EXIT_OK if report.ok else EXIT_FAILURE
    for severity in SEVERITIES:
        found = report.by_severity(severity)
        if found:
            print(f"{severity}s ({len(found)}):")
        for f in found:
            where = ", ".join(part for part in (
                f.path, None if f.row_group is None else f"row group {f.row_group}",
                None if f.column is None else f"column {f.column}") if part)
            print(f"  [{f.rule}] {where or '-'}: {f.diagnosis}")
            print(f"      observed: {f.observed}; intended: {f.intended}")
    errors, warnings = len(report.by_severity("error")), len(report.by_severity("warning"))
    verdict = "as intended" if report.ok else "NOT as intended"
    print(f"{args.source}: {report.files} file(s), {report.row_groups} row group(s): {verdict} "
          f"({errors} error(s), {warnings} warning(s))")
    ok = report.ok
    if args.gx:
        ok = _verify_gx(args, spec) and ok
    return EXIT_OK if ok else EXIT_FAILURE


def _verify_gx(args: argparse.Namespace, spec: TableSpec | None) -> bool:
    """The spec's GX suite on the layout facts, Data Docs into --docs;
    True when no error expectation failed."""
    facts, spec, keys = facts_for_source(args.source, spec)
    docs = Path(args.docs) if args.docs else settings().report_dir / "gx"
    result = validate_facts(facts, spec, keys, docs_dir=docs)
    for severity, lines in (("error", result.errors), ("warning", result.warnings)):
        if lines:
            print(f"gx {severity}s ({len(lines)}):")
        for line in lines:
            print(f"  {line}")
    suite = f"lakesort.{spec.table}" if spec is not None else "lakesort.default"
    print(f"{args.source}: GX suite {suite}: {'passed' if result.success else 'FAILED'}; "
          f"Data Docs: {result.docs_index}")
    return result.success
