"""`lakesort compact`: plan, sort and compact on Spark, verify and commit; or, with --dry-run, plan only."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from layout.cli import EXIT_FAILURE, EXIT_OK
from layout.cli.args import dates_of, table_config
from layout.compaction.pipeline.driver import CompactResult, compact
from layout.compaction.pipeline.runs import PlannedTable
from layout.compaction.pipeline.submit import PROGRESS_CONF
from layout.upkeep.lease import TableBusy


def _print_dry_run(planned: PlannedTable) -> None:
    print(planned.summary)
    view = planned.plan
    if view is None:
        return
    for d in view.partitions:
        print(f"  {d.partition or '(unpartitioned)'}: {d.action} - {'; '.join(d.reasons) or '-'}")
    for g in view.groups:
        print(f"  group {g.group_id} ({g.partition}): {g.input_files} file(s), {g.bytes} bytes, {g.rows} "
              f"rows -> {g.output_files} file(s)")
    print(f"dry run, nothing changed; plan: {view.plan_path}")


def run(args: argparse.Namespace) -> int:
    dates = dates_of(args)
    config = table_config(args)  # resolved once, with each key's source: the run carries and records it
    spec = config.spec
    try:  # one path: --dry-run stops after the prepare step (plan, record the dry run; no lease, no Spark)
        result = compact(spec.table, config=config, partitions=args.partition, dates=dates, force=args.force,
                         dry_run=args.dry_run, master=args.master, measure=not args.no_record,
                         # -q: the job logs no progress either (its lines would not be shown)
                         spark_conf={PROGRESS_CONF: "0"} if args.quiet else None)
    except TableBusy as exc:
        print(f"lakesort compact: table busy, nothing done: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        json.dump(_as_json(result), sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return EXIT_OK
    if result.dry_run:
        _print_dry_run(result.planned)
        return EXIT_OK
    if result.nothing_to_do:  # "<table>: nothing to do (...)", the prepare step's words
        print(result.planned.summary)
        return EXIT_OK
    assert result.plan is not None  # a run that did something had a plan
    print(f"{spec.table}: rewrote {len(result.plan.groups)} group(s): {result.files_removed} files -> "
          f"{result.files_added} files, {result.rows} rows; table files {result.files_before} -> "
          f"{result.files_after}"
          + (f"; {result.delete_files_removed} delete files removed" if result.delete_files_removed else "")
          + (f"; {result.delete_files_carried} concurrent delete files carried onto the new files"
             if result.delete_files_carried else "")
          + (f"; {result.parts_committed}/{result.parts} parts" if result.parts > 1 else "")
          + f"; snapshot {result.snapshot_id} ({result.seconds:.1f}s)")
    if len(result.attempts) > 1:  # one line per commit attempt when another writer made it retry
        for attempt in result.attempts:
            print(f"  commit {attempt.line()}")
    return EXIT_OK


def _as_json(result: CompactResult) -> dict[str, Any]:
    """--json: what the text says, as one document (a dry run's plan; a committed run's figures)."""
    planned = result.planned
    status = "dry-run" if result.dry_run else "nothing-to-do" if result.nothing_to_do else "committed"
    doc: dict[str, Any] = {"table": planned.table, "status": status, "run_id": planned.run_id,
                           "summary": planned.summary}
    if result.dry_run:
        doc["plan"] = planned.plan.model_dump(mode="json") if planned.plan is not None else None
    elif not result.nothing_to_do:
        figures = dataclasses.asdict(result)
        del figures["planned"], figures["plan"], figures["attempts"]
        doc.update(figures, groups=len(result.plan.groups) if result.plan is not None else 0,
                   attempts=[dataclasses.asdict(a) for a in result.attempts])
    return doc
