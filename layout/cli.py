"""The `lakesort` command line.

Exit status: 0 ok, 1 a finding or a failure, 2 bad usage or unreadable input.
Results go to stdout; progress, timings and errors go to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from layout.advise import advise
from layout.advise.render import render_advice
from layout.advise.sample import DEFAULT_SAMPLE_ROWS
from layout.catalog import load_catalog, load_table
from layout.compaction.pipeline.class_archive import archive_path, build_archive
from layout.compaction.pipeline.driver import compact
from layout.compaction.pipeline.runs import PlannedTable, TableRequest, prepare_table
from layout.compaction.pipeline.submit import spark_submit_binary
from layout.compaction.planning.dates import DateRange, date_range, partitions_for_dates
from layout.compaction.planning.planner import plan_rewrite
from layout.demo import build_demo
from layout.errors import InputError, LakesortError, UsageError
from layout.io import data_files
from layout.metrics.clustering import summarize
from layout.metrics.measure import Measurement, measure_snapshot
from layout.parquet import ParquetFile
from layout.read.inspect import file_layout, render_pages, render_summary
from layout.read.plan import plan
from layout.registry import find_spec
from layout.report.render import write_reports
from layout.settings import settings
from layout.sizes import format_size
from layout.spec import TableSpec, load_spec
from layout.upkeep.cleanup import cleanup
from layout.upkeep.housekeeping import housekeep
from layout.upkeep.lease import LeaseOwner, TableBusy, new_run_id
from layout.upkeep.maintain import maintain_table
from layout.verify.expectations import facts_for_source, validate_facts
from layout.verify.rules import SEVERITIES, verify_source

log = logging.getLogger("lakesort")

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def _columns(text: str | None) -> list[str] | None:
    return [c.strip() for c in text.split(",") if c.strip()] if text else None


def cmd_inspect(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    files = data_files(args.source)
    columns = _columns(args.columns)
    # The summary needs boundary orders, hence the column index, but never the per-page listing.
    layouts = []
    for filesystem, path in files:
        layouts.append(file_layout(ParquetFile.open(path, filesystem=filesystem), columns))
    log.info("inspected %d file(s) in %.2fs", len(layouts), time.perf_counter() - started)
    if args.json:
        json.dump({"files": [lay.to_json() for lay in layouts]}, sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
        return EXIT_OK
    lines = render_summary(layouts) if args.summary else (
        line for lay in layouts for line in render_pages(lay))
    for line in lines:
        print(line)
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    result = plan(args.source, args.where, _columns(args.columns))
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
    ):
        skipped = f"{100 * (1 - chosen / total):.1f}%" if total else "-"
        # None: not counted (an Iceberg plan opens only the files its manifests keep)
        rows.append((label, "-" if total is None else str(total), str(chosen), skipped))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  " + "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))))
    return EXIT_OK


def _spec(args: argparse.Namespace) -> TableSpec:
    if not args.spec:
        return find_spec(args.table)
    spec = load_spec(Path(args.spec))
    # TABLE is what gets rewritten (and leased): a spec written for another table must not drive it.
    if spec.table != args.table:
        raise UsageError(
            f"--spec {args.spec} is for table {spec.table}, not {args.table}; pass {spec.table} as TABLE, "
            f"or the spec of {args.table} (leave out --spec to find it in dags/tables/)"
        )
    return spec


def _dates(args: argparse.Namespace) -> DateRange | None:
    """--from/--to, checked before anything is opened (exit 2: both or neither, not with --partition)."""
    return date_range(args.date_from, args.date_to, partitions=args.partition,
                      names=("--from", "--to", "--partition"))


def _partitions(args: argparse.Namespace, spec: TableSpec, dates: DateRange | None) -> list[str] | None:
    """--partition, or the existing partitions holding the days of --from/--to; None: every partition."""
    if dates is None:
        return args.partition
    partitions = partitions_for_dates(spec, dates=dates)
    log.info("%s: %s covers %s", spec.table, dates, ", ".join(partitions) or "no partition")
    return partitions


def cmd_plan_rewrite(args: argparse.Namespace) -> int:
    dates = _dates(args)
    spec = _spec(args)
    partitions = _partitions(args, spec, dates)
    if partitions == [] and dates is not None:
        print(f"{spec.table}: nothing to do (no partition holds rows of {dates})")
        return EXIT_OK
    rewrite = plan_rewrite(load_table(spec.table, spec.catalog), spec, partitions=partitions, force=args.force)
    if args.json:
        print(rewrite.to_json())
        return EXIT_OK
    for d in rewrite.partitions:
        print(f"{d.partition or '(unpartitioned)'}: {d.action} - {'; '.join(d.reasons)} "
              f"({d.files} files, {d.bytes} bytes, overlap depth {d.overlap_depth})")
    print(f"{len(rewrite.groups)} rewrite group(s), {rewrite.input_bytes} bytes to rewrite" if rewrite.groups
          else "nothing to do")
    return EXIT_OK


def _print_dry_run(planned: PlannedTable) -> None:
    print(planned.summary)
    view = planned.plan
    if view is None:
        return
    for d in view.partitions:
        print(f"  {d.partition or '(unpartitioned)'}: {d.action} - {'; '.join(d.reasons) or '-'}")
    for g in view.groups:
        print(f"  group {g.group_id} ({g.partition}): {g.input_files} file(s), {g.bytes} bytes, {g.rows} rows "
              f"-> {g.output_files} file(s)")
    print(f"dry run, nothing changed; plan: {view.plan_path}")


def cmd_compact(args: argparse.Namespace) -> int:
    dates = _dates(args)
    spec = _spec(args)
    if args.dry_run:  # the DAGs' prepare step: plan, record the dry run; no lease, no Spark
        request = TableRequest(table=spec.table, trigger="manual", partitions=args.partition, dates=dates,
                               force=args.force, dry_run=True)
        _print_dry_run(prepare_table(request, owner=LeaseOwner.cli(), spec=spec))
        return EXIT_OK
    partitions = _partitions(args, spec, dates)
    if partitions == [] and dates is not None:
        print(f"{spec.table}: nothing to do (no partition holds rows of {dates})")
        return EXIT_OK
    try:
        result = compact(spec.table, spec=spec, partitions=partitions, force=args.force, master=args.master,
                         measure=not args.no_measure)
    except TableBusy as exc:
        print(f"lakesort compact: table busy, nothing done: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if result.nothing_to_do:
        print(f"{spec.table}: nothing to do ({len(result.plan.partitions)} partition(s) checked)")
        return EXIT_OK
    print(f"{spec.table}: rewrote {len(result.plan.groups)} group(s): {result.files_removed} files -> "
          f"{result.files_added} files, {result.rows} rows; table files {result.files_before} -> "
          f"{result.files_after}; snapshot {result.snapshot_id} ({result.seconds:.1f}s)")
    return EXIT_OK


def cmd_measure(args: argparse.Namespace) -> int:
    spec = _spec(args)
    result = measure_snapshot(spec.table, spec=spec, snapshot_id=args.snapshot, record=not args.no_record,
                              engine=False if args.no_engine else None)
    rows = result.probes
    if args.json:
        def plain(row: dict) -> dict:
            return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}

        json.dump({"measurements": [plain(m.to_row()) for m in rows],
                   "clustering": [plain(dataclasses.asdict(r)) for r in result.clustering]}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return EXIT_OK
    if not rows:
        print(f"{spec.table}: no snapshot to measure")
        return EXIT_OK
    print(f"{spec.table} snapshot {result.snapshot_id}: {len(rows)} probe(s)"
          + ("" if args.no_record else " (recorded in lakesort.pruning_metrics and lakesort.clustering_metrics)"))
    for line in _measure_table(rows):
        print(line)
    for line in _measure_notes(rows):
        print(line)
    for key in summarize(result.clustering):
        deepest = ", ".join(f"{r.partition_path or '(unpartitioned)'} ({r.average_depth:.1f})"
                            for r in key.deepest[:3] if r.average_depth > 1)
        print(f"clustering by {key.sort_key}: {key.partitions} partition(s), {key.files} file(s), average depth "
              f"{key.average_depth:.2f}, max {key.max_depth}, average overlaps {key.average_overlaps:.2f}"
              + (f"; deepest: {deepest}" if deepest else ""))
    return EXIT_OK


def _measure_table(rows: Sequence[Measurement]) -> list[str]:
    """The probes as aligned columns: selected, the two ideals, the efficiencies, DataFusion's check."""
    def percent(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.0f}%"

    def engine(m: Measurement) -> str:
        if m.engine_status is None or m.engine_status == "off":
            return "off"
        if not m.engine_checked:
            return "n/c"
        found = m.engine_difference
        sign = "-" if (m.engine_bytes or 0) < (m.engine_model_bytes or 0) else "+"
        shown = "same" if not found else "inf" if found == float("inf") else f"{sign}{100 * found:.1f}%"
        return f"{'!' if m.engine_differs else ''}{shown}{'' if m.engine_status == 'checked' else ' s'}"

    header = ("probe", "files", "pages", "bytes selected", "in pages", "clustered", "eff.", "waste",
              "DataFusion", "plan ms")
    table = [header]
    for m in rows:
        pages_total = "?" if m.pages_total is None else m.pages_total  # unknown: planning opened only some files
        estimated = "~" if m.ideal_method not in (None, "exact") else ""
        table.append((m.probe, f"{m.files_selected}/{m.files_total}", f"{m.pages_selected}/{pages_total}",
                      str(m.bytes_selected), f"{m.bytes_ideal}{estimated}", f"{m.bytes_clustered}{estimated}",
                      percent(m.efficiency_clustered), percent(m.wasted_in_pages), engine(m),
                      f"{m.plan_cold_ms:.0f}/{m.plan_warm_ms:.0f}"))
    widths = [max(len(str(r[i])) for r in table) for i in range(len(header))]
    return ["  " + "  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w) for i, (v, w) in
                             enumerate(zip(r, widths, strict=True))) for r in table]


def _measure_notes(rows: Sequence[Measurement]) -> list[str]:
    """What the columns of `_measure_table` mean, and why a probe is not confirmed by DataFusion."""
    notes = [("  in pages: bytes of the selected pages that hold a matching row (waste: the rest of the selected "
              "bytes); clustered: bytes a table perfectly clustered for the probe would read; eff.: clustered / "
              "selected"),
             ("  DataFusion: its bytes scanned against lakesort's over the same files (! more than 20% apart, "
              "s: on a sample of the files, n/c: not confirmed)")]
    if any(m.ideal_method not in (None, "exact") for m in rows):
        notes.append("  ~ estimated from a sample of the selected row groups (lakesort.pruning_metrics.ideal_method)")
    notes += [f"  {m.probe}: {m.engine_status}" for m in rows
              if m.engine_status and not m.engine_checked and m.engine_status != "off"]
    return notes


def cmd_report(args: argparse.Namespace) -> int:
    index = write_reports(Path(args.out) if args.out else None)
    print(f"report: {index}")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
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


def _verify_gx(args: argparse.Namespace, spec) -> bool:
    """The spec's GX suite on the layout facts, Data Docs into --docs; True when no error expectation failed."""
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


def cmd_cleanup(args: argparse.Namespace) -> int:
    try:  # under the table's lease, as a "cleanup" run: never beside a compaction of the table
        result = cleanup(load_table(args.table), grace_hours=args.grace_hours, dry_run=args.dry_run,
                         owner=LeaseOwner.cleanup())
    except TableBusy as exc:
        print(f"lakesort cleanup: table busy, nothing deleted: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    verb = "would remove" if result.dry_run else "removed"
    print(f"{args.table}: {verb} {result.removed} orphaned staged file(s) ({result.bytes_deleted} bytes); kept "
          f"{result.kept_referenced} referenced by one of {result.snapshots} snapshot(s) and {result.kept_fresh} "
          f"younger than {result.grace_hours:g}h ({result.seconds:.1f}s)")
    return EXIT_OK


def cmd_expire(args: argparse.Namespace) -> int:
    spec = _spec(args)  # a bad or missing spec: exit 2 before anything is opened
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


def cmd_housekeep(args: argparse.Namespace) -> int:
    results = housekeep(load_catalog(args.catalog), dry_run=args.dry_run)
    for result in results:
        print(result.summary())
    if not results:
        print("no lakesort tables in this catalog yet: nothing to do")
    if args.dry_run:
        print("dry run, nothing changed")
    return EXIT_FAILURE if any(r.error for r in results) else EXIT_OK


def cmd_spark_archive(args: argparse.Namespace) -> int:
    if args.path:
        path = archive_path()
        if path is None:
            raise UsageError("no Java or no Spark in this environment: run `make setup`")
        print(path if path.is_file() else f"{path} (not built: `lakesort spark-archive` builds it)")
        return EXIT_OK
    path = build_archive(spark_submit=spark_submit_binary(), force=args.force)
    print(f"Spark class archive: {path} ({format_size(path.stat().st_size)})")
    return EXIT_OK


def cmd_advise(args: argparse.Namespace) -> int:
    spec = _spec(args)  # a missing or broken spec, or one without probes: exit 2 before any data is read
    result = advise(spec.table, spec=spec, sample_rows=args.sample, seed=args.seed, record=not args.no_record)
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
        return EXIT_OK
    for line in render_advice(result):
        print(line)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    summary = build_demo(Path(args.home), scale=args.scale, batches=args.batches, replace=args.replace)
    verb = "created" if summary.created else "kept existing"
    print(f"{verb} {summary.table}: {summary.rows} rows in {summary.data_files} data files, "
          f"{summary.snapshots} snapshots ({summary.seconds:.1f}s)")
    return EXIT_OK


def _logging_flags(parser: argparse.ArgumentParser, *, default_verbose: object, default_quiet: object) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=default_verbose,
                        help="more log output (-vv for debug)")
    parser.add_argument("-q", "--quiet", action="store_true", default=default_quiet,
                        help="only warnings and errors on stderr")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakesort",
        description="Sort and compact Iceberg tables, verify their Parquet page indexes, measure pruning.",
    )
    # Logging flags work before or after the command (`lakesort -q plan ...`, `lakesort plan ... -q`);
    # the command's copies default to SUPPRESS so they never overwrite what came before the command.
    _logging_flags(parser, default_verbose=0, default_quiet=False)
    common = argparse.ArgumentParser(add_help=False)
    _logging_flags(common, default_verbose=argparse.SUPPRESS, default_quiet=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub_parser = sub.add_parser

    def add_parser(name: str, **kwargs):
        return sub_parser(name, parents=[common], **kwargs)

    sub.add_parser = add_parser  # type: ignore[method-assign]

    p = sub.add_parser("inspect", help="show footers, column indexes, offset indexes and bloom filters",
                       description="Show what a page-index-aware reader sees in Parquet files.")
    p.add_argument("source", metavar="SOURCE",
                   help="a Parquet file, a directory of them (recursive), or an Iceberg table `ns.table`")
    p.add_argument("--columns", metavar="A,B", help="only these columns (dotted paths for nested columns)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON document on stdout")
    out.add_argument("--summary", action="store_true",
                     help="one line per file, then column index coverage and BoundaryOrder per column")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("plan", help="what a page-index-aware reader must read for a predicate",
                       description="Prune files, row groups and pages for a predicate; print the counts.")
    p.add_argument("source", metavar="SOURCE", help="a Parquet file, a directory, or an Iceberg table `ns.table`")
    p.add_argument("--where", required=True, metavar="SQL",
                   help="a SQL condition, e.g. \"l_shipdate >= DATE '1995-01-01' AND l_quantity < 10\"")
    p.add_argument("--columns", metavar="A,B", help="the projected columns (default: all)")
    p.add_argument("--json", action="store_true",
                   help="counts per level, plan_ms and the row selection per row group as JSON")
    p.set_defaults(func=cmd_plan)

    def table_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("table", metavar="TABLE", help="Iceberg table identifier `ns.table`")
        p.add_argument("--spec", metavar="YAML", help="the table spec (default: found in dags/tables/ by table name)")
        p.add_argument("--partition", action="append", metavar="P",
                       help="only this partition, as its path, e.g. l_shipdate_month=1995-03 (repeatable)")
        p.add_argument("--from", dest="date_from", metavar="YYYY-MM-DD",
                       help="only the partitions holding rows of the days --from..--to (with --to; not with "
                            "--partition), for a table partitioned by one date or time transform")
        p.add_argument("--to", dest="date_to", metavar="YYYY-MM-DD", help="the last day of --from, included")
        p.add_argument("--force", "--full", dest="force", action="store_true",
                       help="rewrite every file of the partitions into one sorted run, even if already compacted")

    p = sub.add_parser("plan-rewrite", help="which partitions need sorting and compacting, and why",
                       description="Decide per partition: rewrite (with reasons), skip or refuse; group the files.")
    table_args(p)
    p.add_argument("--json", action="store_true", help="print the rewrite plan as JSON")
    p.set_defaults(func=cmd_plan_rewrite)

    p = sub.add_parser("compact", help="plan, sort and compact on Spark, verify and commit",
                       description="The whole compaction step: plan, spark-submit the job, check, commit.")
    table_args(p)
    p.add_argument("--master", help="Spark master (default: $LAKESORT_SPARK_MASTER or local[*]), "
                                    "e.g. spark://127.0.0.1:7077")
    p.add_argument("--no-measure", action="store_true",
                   help="skip measuring the probes before and after (lakesort.pruning_metrics)")
    p.add_argument("--dry-run", action="store_true",
                   help="plan only, as the DAGs' dry run: print the plan and record the dry run; change nothing")
    p.set_defaults(func=cmd_compact)

    p = sub.add_parser("measure", help="measure what readers skip for each probe, on a snapshot",
                       description="Plan every probe of the table (the spec's and the standard ones per sort key), "
                                   "record files, row groups, pages, rows and bytes selected against the page-level "
                                   "and the perfectly clustered ideal, with DataFusion's bytes next to them, in "
                                   "lakesort.pruning_metrics; and each sort key's overlap depth per partition in "
                                   "lakesort.clustering_metrics.")
    p.add_argument("table", metavar="TABLE", help="Iceberg table identifier `ns.table`")
    p.add_argument("--spec", metavar="YAML", help="the table spec (default: found in dags/tables/ by table name)")
    p.add_argument("--snapshot", type=int, metavar="ID", help="snapshot id (default: the current snapshot)")
    p.add_argument("--no-record", action="store_true", help="print only; record nothing")
    p.add_argument("--no-engine", action="store_true",
                   help="skip running each probe with DataFusion (a real query over the selected files, up to "
                        "$LAKESORT_ENGINE_CHECK_MAX_BYTES a probe; $LAKESORT_ENGINE_CHECK=false turns it off)")
    p.add_argument("--json", action="store_true",
                   help='{"measurements": [...], "clustering": [...]}: the rows as recorded')
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser("report", help="write the HTML reports for data owners",
                       description="Static HTML (readable offline): one page per table and an index, from the "
                                   "metrics tables.")
    p.add_argument("--out", metavar="DIR", help="output directory (default: $LAKESORT_REPORT_DIR or .lakesort/reports)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("verify", help="check written files against the table spec, with diagnoses",
                       description="Prove the layout: page indexes, BoundaryOrder, ordered and disjoint sorted "
                                   "runs, sizes, bloom filters. Exit 0 as intended, 1 on any error finding.")
    p.add_argument("source", metavar="SOURCE", help="a Parquet file, a directory, or an Iceberg table `ns.table`")
    p.add_argument("--spec", metavar="YAML", help="the table spec (default for a table: found in dags/tables/; "
                                                  "otherwise only column and offset indexes are checked)")
    p.add_argument("--json", action="store_true", help='one JSON document: {"ok": ..., "findings": [...]}')
    p.add_argument("--gx", action="store_true",
                   help="also validate the spec's Great Expectations suite and build Data Docs")
    p.add_argument("--docs", metavar="DIR",
                   help="with --gx: Data Docs go to DIR/gx-data-docs/ (default: $LAKESORT_REPORT_DIR/gx, "
                        "else .lakesort/reports/gx, where compaction puts them too)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("cleanup", help="remove staged files orphaned by crashed runs",
                       description="Delete staged files that no retained snapshot of the table references, "
                                   "older than a grace period, under the table's lease (never beside a run).")
    p.add_argument("table", metavar="TABLE", help="Iceberg table identifier `ns.table`")
    p.add_argument("--grace-hours", type=float, default=None, metavar="H",
                   help="keep unreferenced files modified in the last H hours (default: "
                        "$LAKESORT_CLEANUP_GRACE_HOURS, else 24)")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")
    p.set_defaults(func=cmd_cleanup)

    p = sub.add_parser("expire", help="expire old snapshots and delete the files nothing retained references",
                       description="Expire snapshots by the spec's retention (max_age, min_snapshots; branch and "
                                   "tag heads kept), then delete every file under the table location that no "
                                   "retained snapshot references, and orphans older than orphan_grace; under the "
                                   "table's lease. Recorded in lakesort.maintenance_runs.")
    p.add_argument("table", metavar="TABLE", help="Iceberg table identifier `ns.table`")
    p.add_argument("--spec", metavar="YAML", help="the table spec (default: found in dags/tables/ by table name)")
    p.add_argument("--dry-run", action="store_true",
                   help="count what would be expired and deleted, list the files on stderr; change nothing")
    p.add_argument("--json", action="store_true", help="the result as JSON")
    p.set_defaults(func=cmd_expire)

    p = sub.add_parser("housekeep", help="compact and expire lakesort's own tables (lakesort.*)",
                       description="lakesort's own tables (run records, metrics) get a commit and a small file per "
                                   "record: rewrite each into one file past a few files, expire its snapshots older "
                                   "than a week (the newest 10 kept; $LAKESORT_HOUSEKEEPING_RETENTION changes "
                                   "it) and delete the files nothing retained references. The nightly DAG does it "
                                   "in its report task.")
    p.add_argument("--catalog", metavar="NAME", help="the catalog (default: pyiceberg's default catalog)")
    p.add_argument("--dry-run", action="store_true", help="report what maintenance would delete; change nothing")
    p.set_defaults(func=cmd_housekeep)

    p = sub.add_parser("spark-archive", help="build the class archive every job's Spark driver starts from",
                       description="Run a small Spark job once with the JVM storing the classes it loads (about 40 s); "
                                   "every compaction's driver JVM then starts from that archive, 2-3 s sooner on "
                                   "two cores (LAKESORT_SPARK_CLASS_ARCHIVE=false: without). `make setup` runs it. The "
                                   "archive is kept in this environment, one per Java and Spark version.")
    p.add_argument("--force", action="store_true", help="build it again even when it is there")
    p.add_argument("--path", action="store_true", help="print where the archive is (or would be) and build nothing")
    p.set_defaults(func=cmd_spark_archive)

    p = sub.add_parser("advise", help="predict which sort would serve the owners' probes best",
                       description="Sample the table, lay the sample out as the compaction would for each candidate "
                                   "layout (the current one, linear on the probes' columns and pairs of them, zorder "
                                   "and hilbert on pairs and triples), plan every probe on it, and rank the layouts "
                                   "by the bytes the probes would read. Recorded in lakesort.advice for the report.")
    p.add_argument("table", metavar="TABLE", help="Iceberg table identifier `ns.table`")
    p.add_argument("--spec", metavar="YAML", help="the table spec with the probes (default: found in dags/tables/)")
    p.add_argument("--json", action="store_true",
                   help='one JSON document: {"table", "sample_rows", "candidates": [...], "recommendation": {...}}')
    p.add_argument("--sample", type=int, default=DEFAULT_SAMPLE_ROWS, metavar="ROWS",
                   help="most rows sampled, stratified over partitions (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="the sample's seed (default: %(default)s)")
    p.add_argument("--no-record", action="store_true", help="print only; record nothing in lakesort.advice")
    p.set_defaults(func=cmd_advise)

    p = sub.add_parser("demo", help="build the demo warehouse (TPC-H lineitem in a local Iceberg catalog)",
                       description="Ingest TPC-H lineitem into `demo.lineitem` in many small unsorted appends.")
    p.add_argument("--home", default=".lakesort", help="where the catalog and warehouse live (default: %(default)s)")
    p.add_argument("--scale", type=float, default=0.05, help="TPC-H scale factor (default: %(default)s)")
    p.add_argument("--batches", type=int, default=12, help="number of appends (default: %(default)s)")
    p.add_argument("--replace", action="store_true", help="drop and rebuild the demo table if it exists")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage and 0 on --help
        return int(exc.code or 0)
    level = logging.WARNING if args.quiet else (logging.DEBUG if args.verbose > 1 else logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except (UsageError, InputError) as exc:
        print(f"lakesort {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except LakesortError as exc:
        print(f"lakesort {args.command}: failed: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:  # `lakesort inspect ... | head`
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
