"""The `lakesort` command line: the parser, the table of commands and the dispatch; a module per command.

Exit status: 0 ok, 1 a finding, a busy table, a refusal or a failure, 2 bad usage, configuration or input;
every command's help says it (its epilog, `_EXITS`). Results go to stdout (with --json, one JSON document);
progress, timings and errors go to stderr, errors as one plain line (no terminal escapes).

Parsing the command line imports argparse and the ground floor's `layout.errors` only: each command's module
(`COMMANDS`, its `run(args) -> int`) is imported when that command runs, so `lakesort --help` and
`lakesort CMD --help` load none of pyiceberg, pyarrow, pandas or pydantic. `args` holds what several commands
read from their arguments (the spec of TABLE, the date range, the partitions, the columns).

May import: every floor of `layout` below it (the command modules do); this module itself only the standard
library, `layout.errors` and, through `importlib` at dispatch, its command modules.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import logging
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from layout.errors import InputError, LakesortError, UsageError

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

# Each command and the module holding its `run(args) -> int`, imported only when the command runs (a command
# needs pyiceberg, pyarrow or pandas: about 1,000 modules and 2 s of CPU that parsing the line must not pay).
COMMANDS: dict[str, str] = {
    "inspect": "layout.cli.inspect",
    "plan": "layout.cli.plan",
    "plan-rewrite": "layout.cli.plan_rewrite",
    "compact": "layout.cli.compact",
    "measure": "layout.cli.measure",
    "report": "layout.cli.report",
    "verify": "layout.cli.verify",
    "cleanup": "layout.cli.cleanup",
    "expire": "layout.cli.expire",
    "housekeep": "layout.cli.housekeep",
    "spark-archive": "layout.cli.spark_archive",
    "spark-jars": "layout.cli.spark_jars",
    "advise": "layout.cli.advise",
    "demo": "layout.cli.demo",
    "tables": "layout.cli.tables",
}

# layout.advise.sample.DEFAULT_SAMPLE_ROWS, stated here: importing it loads pandas and pyiceberg to parse the
# line. tests/cli/test_dispatch.py checks that the two agree.
ADVISE_SAMPLE_ROWS = 2_000_000

# What status 1 means for each command (0 and 2 mean the same everywhere): the epilog of its --help, and the
# Reference's exit codes (docs/hooks/reference.py reads the epilogs).
_EXITS: dict[str, str] = {
    "inspect": "the files could not be read",
    "plan": "the plan could not be made",
    "plan-rewrite": "the plan could not be made",
    "compact": "the table is busy (another run holds its lease), the run was refused or it failed",
    "measure": "the measurement failed",
    "report": "the report could not be written",
    "verify": "an error finding (the layout is not as intended)",
    "cleanup": "the table is busy (a run holds its lease) or a file could not be deleted",
    "expire": "the table is busy (a run holds its lease) or expiring failed",
    "housekeep": "one of lakesort's tables could not be maintained",
    "spark-archive": "the archive could not be built",
    "spark-jars": "Maven could not fetch the jars",
    "advise": "the advice could not be made",
    "demo": "the demo could not be built",
    "tables": "a table's configuration does not resolve",
}
# The process's default catalog for pyiceberg (`--catalog`): read by every `Config()`, lakesort's own
# `load_catalog(None)` and the registry's, so one flag reaches every table a command opens.
CATALOG_VARIABLE = "PYICEBERG_DEFAULT_CATALOG"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # CSI sequences: sqlglot underlines a parse error's culprit

_TABLE_HELP = "Iceberg table identifier `ns.table`"
_SPEC_HELP = "the table spec (default: found in dags/tables/ by table name)"
_SOURCE_HELP = "a Parquet file, a directory, or an Iceberg table `ns.table`"


def _logging_flags(parser: argparse.ArgumentParser, *, default_verbose: object,
                   default_quiet: object) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=default_verbose,
                        help="more log output (-vv for debug)")
    parser.add_argument("-q", "--quiet", action="store_true", default=default_quiet,
                        help="only warnings and errors on stderr")


def _epilog(command: str) -> str:
    return (f"Exit status: 0 done; 1 {_EXITS[command]}; 2 bad usage or configuration (a bad flag, spec, "
            "setting or catalog; the message says which).")


class _Version(argparse.Action):
    """`lakesort --version`: the installed distribution's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        try:
            found = importlib.metadata.version("lakesort")
        except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
            found = "unknown (not installed)"
        print(f"lakesort {found}")  # on stdout, as argparse's own version action prints
        parser.exit()


class _Deprecated(argparse.Action):
    """A flag's old name: sets the new one's value, says the new name on stderr, and is left out of --help."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest=dest, nargs=0, default=argparse.SUPPRESS,
                         help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"{parser.prog}: warning: {option_string} is deprecated, use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, True)


def _table_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", metavar="TABLE", help=_TABLE_HELP)
    _catalog_arg(p)


def _catalog_arg(p: argparse.ArgumentParser, *,
                 help: str = "the catalog holding the table (default: the spec's `catalog`, else "
                             "pyiceberg's default catalog)") -> None:
    p.add_argument("--catalog", metavar="NAME", help=help)


def _json_flag(p: argparse._ActionsContainer, *, help: str = "one JSON document on stdout") -> None:
    _flag(p, "--json", help=help)


def _spec_arg(p: argparse.ArgumentParser, *, help: str = _SPEC_HELP) -> None:
    p.add_argument("--spec", metavar="YAML", help=help)


def _source_arg(p: argparse.ArgumentParser, *, help: str = _SOURCE_HELP) -> None:
    p.add_argument("source", metavar="SOURCE", help=help)


def _flag(p: argparse._ActionsContainer, name: str, *, help: str) -> None:
    """An on/off option (--json, --dry-run, --no-record, ...): its help says what it does for this command."""
    p.add_argument(name, action="store_true", help=help)


def _range_args(p: argparse.ArgumentParser) -> None:
    """TABLE and what selects its partitions: plan-rewrite's and compact's arguments."""
    _table_arg(p)
    _spec_arg(p)
    p.add_argument("--partition", action="append", metavar="P",
                   help="only this partition, as its path, e.g. l_shipdate_month=1995-03 (repeatable)")
    p.add_argument("--from", dest="date_from", metavar="YYYY-MM-DD",
                   help="only the partitions holding rows of the days --from..--to (with --to; not with "
                        "--partition), for a table partitioned by one date or time transform")
    p.add_argument("--to", dest="date_to", metavar="YYYY-MM-DD", help="the last day of --from, included")
    p.add_argument("--force", "--full", dest="force", action="store_true",
                   help="rewrite every file of the partitions into one sorted run, even if already compacted")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakesort",
        description="Sort and compact Iceberg tables, verify their Parquet page indexes, measure pruning.",
    )
    # Logging flags work before or after the command (`lakesort -q plan ...`, `lakesort plan ... -q`);
    # the command's copies default to SUPPRESS so they never overwrite what came before the command.
    _logging_flags(parser, default_verbose=0, default_quiet=False)
    parser.add_argument("--version", action=_Version, help="print lakesort's version and exit")
    common = argparse.ArgumentParser(add_help=False)
    _logging_flags(common, default_verbose=argparse.SUPPRESS, default_quiet=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, *, help: str, description: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], help=help, description=description,
                              epilog=_epilog(name))

    p = command("inspect", help="show footers, column indexes, offset indexes and bloom filters",
                description="Show what a page-index-aware reader sees in Parquet files.")
    _source_arg(p, help="a Parquet file, a directory of them (recursive), or an Iceberg table `ns.table`")
    _catalog_arg(p, help="the catalog of an Iceberg table SOURCE (default: pyiceberg's default catalog)")
    p.add_argument("--columns", metavar="A,B", help="only these columns (dotted paths for nested columns)")
    out = p.add_mutually_exclusive_group()
    _flag(out, "--json", help="one JSON document on stdout")
    _flag(out, "--summary", help="one line per file, then column index coverage and BoundaryOrder per column")

    p = command("plan", help="what a page-index-aware reader must read for a predicate",
                description="Prune files, row groups and pages for a predicate; print the counts.")
    _source_arg(p)
    _catalog_arg(p, help="the catalog of an Iceberg table SOURCE (default: pyiceberg's default catalog)")
    p.add_argument("--where", required=True, metavar="SQL",
                   help="a SQL condition, e.g. \"l_shipdate >= DATE '1995-01-01' AND l_quantity < 10\"")
    p.add_argument("--columns", metavar="A,B", help="the projected columns (default: all)")
    _flag(p, "--json", help="counts per level, plan_ms and the row selection per row group as JSON")

    p = command("plan-rewrite", help="which partitions need sorting and compacting, and why",
                description="Decide per partition: rewrite (with reasons), skip or refuse; group the files.")
    _range_args(p)
    _flag(p, "--json", help="print the rewrite plan as JSON")

    p = command("compact", help="plan, sort and compact on Spark, verify and commit",
                description="The whole compaction step: plan, spark-submit the job, check, commit.")
    _range_args(p)
    p.add_argument("--master", help="Spark master (default: $LAKESORT_SPARK_MASTER or local[*]), "
                                    "e.g. spark://127.0.0.1:7077")
    _flag(p, "--no-record", help="record no measurement: skip measuring the probes before and after "
                                 "(lakesort.pruning_metrics); the run itself is recorded")
    p.add_argument("--no-measure", dest="no_record", action=_Deprecated, new="--no-record")
    _flag(p, "--dry-run",
          help="plan only, as the DAGs' dry run: print the plan and record the dry run; change nothing")
    _json_flag(p, help="the result (or with --dry-run the plan) as one JSON document on stdout")

    p = command("measure", help="measure what readers skip for each probe, on a snapshot",
                description="Plan every probe of the table (the spec's and the standard ones per sort key), "
                            "record files, row groups, pages, rows and bytes selected against the page-level "
                            "and the perfectly clustered ideal, with DataFusion's bytes next to them, in "
                            "lakesort.pruning_metrics; and each sort key's overlap depth per partition in "
                            "lakesort.clustering_metrics.")
    _table_arg(p)
    _spec_arg(p)
    p.add_argument("--snapshot", type=int, metavar="ID", help="snapshot id (default: the current snapshot)")
    _flag(p, "--no-record", help="print only; record nothing")
    _flag(p, "--no-engine",
          help="skip running each probe with DataFusion (a real query over the selected files, up to "
               "$LAKESORT_ENGINE_CHECK_MAX_BYTES a probe; $LAKESORT_ENGINE_CHECK=false turns it off)")
    _flag(p, "--json", help='{"measurements": [...], "clustering": [...]}: the rows as recorded')

    p = command("report", help="write the HTML reports for data owners",
                description="Static HTML (readable offline): one page per table and an index, from the "
                            "metrics tables.")
    p.add_argument("--out", metavar="DIR", help="output directory (default: "
                                                "$LAKESORT_REPORT_DIR or .lakesort/reports)")
    _json_flag(p, help='{"index": ..., "pages": [...]}: the index and every page written')

    p = command("verify", help="check written files against the table spec, with diagnoses",
                description="Prove the layout: page indexes, BoundaryOrder, ordered and disjoint sorted "
                            "runs, sizes, bloom filters. Exit 0 as intended, 1 on any error finding.")
    _source_arg(p)
    _spec_arg(p, help="the table spec (default for a table: found in dags/tables/; "
                      "otherwise only column and offset indexes are checked)")
    _catalog_arg(p, help="the catalog of an Iceberg table SOURCE (default: pyiceberg's default catalog)")
    _flag(p, "--json", help='one JSON document: {"ok": ..., "findings": [...]}')
    _flag(p, "--gx", help="also validate the spec's Great Expectations suite and build Data Docs")
    p.add_argument("--docs", metavar="DIR",
                   help="with --gx: Data Docs go to DIR/gx-data-docs/ (default: $LAKESORT_REPORT_DIR/gx, "
                        "else .lakesort/reports/gx, where compaction puts them too)")

    p = command("cleanup", help="remove staged files orphaned by crashed runs",
                description="Delete staged files that no retained snapshot of the table references, "
                            "older than a grace period, under the table's lease (never beside a run).")
    _table_arg(p)
    p.add_argument("--grace-hours", type=float, default=None, metavar="H",
                   help="keep unreferenced files modified in the last H hours (default: "
                        "$LAKESORT_CLEANUP_GRACE_HOURS, else 24)")
    _flag(p, "--dry-run", help="list what would be deleted; delete nothing")
    _json_flag(p, help="the result as one JSON document, the files deleted (or that would be) included")

    p = command("expire", help="expire old snapshots and delete the files nothing retained references",
                description="Expire snapshots by the spec's retention (max_age, min_snapshots; branch and "
                            "tag heads kept), then delete every file under the table location that no "
                            "retained snapshot references, and orphans older than orphan_grace; under the "
                            "table's lease. Recorded in lakesort.maintenance_runs.")
    _table_arg(p)
    _spec_arg(p)
    _flag(p, "--dry-run", help="count what would be expired and deleted, "
                               "list the files on stderr; change nothing")
    _flag(p, "--json", help="the result as JSON")

    p = command("housekeep", help="compact and expire lakesort's own tables (lakesort.*)",
                description="lakesort's own tables (run records, metrics) get a commit and a small file per "
                            "record: rewrite each into one file past a few files, expire its snapshots older "
                            "than a week (the newest 10 kept; $LAKESORT_HOUSEKEEPING_RETENTION changes "
                            "it) and delete the files nothing retained references. The nightly DAG does it "
                            "in its report task.")
    p.add_argument("--catalog", metavar="NAME", help="the catalog (default: pyiceberg's default catalog)")
    _flag(p, "--dry-run", help="report what maintenance would delete; change nothing")
    _json_flag(p, help='{"dry_run": ..., "tables": [...]}: what was done to each of lakesort\'s tables')

    p = command("spark-archive", help="build the class archive every job's Spark driver starts from",
                description="Run a small Spark job once with the JVM storing the classes it loads (about 40 "
                            "s); every compaction's driver JVM then starts from that archive, 2-3 s sooner "
                            "on two cores (LAKESORT_SPARK_CLASS_ARCHIVE=false: without). `make setup` runs "
                            "it. The archive is kept in this environment, one per Java and Spark version.")
    _flag(p, "--force", help="build it again even when it is there")
    _flag(p, "--path", help="print where the archive is (or would be) and build nothing")

    p = command("spark-jars", help="the S3A connector jars for the Spark that runs the job",
                description="Find the Hadoop of the Spark in use ($SPARK_HOME, else lakesort's pyspark), "
                            "name hadoop-aws of that version and the AWS SDK modules it needs, and fetch "
                            "them once with Maven for spark.jars (never spark.jars.packages: nothing "
                            "downloads at run time).")
    p.add_argument("--hadoop-version", metavar="X.Y.Z",
                   help="for this Hadoop instead of the one of the Spark in use (e.g. a cluster's Spark)")
    out = p.add_mutually_exclusive_group()
    _flag(out, "--print-pom", help="print a Maven pom naming the jars, and fetch nothing")
    out.add_argument("--fetch", metavar="DIR",
                     help="copy the jars into DIR with `mvn dependency:copy-dependencies` and print the "
                          "spark.jars line naming them")
    _flag(p, "--offline", help="with --fetch: only from Maven's local repository (mvn --offline)")

    p = command("advise", help="predict which sort would serve the owners' probes best",
                description="Sample the table, lay the sample out as the compaction would for each candidate "
                            "layout (the current one, linear on the probes' columns and pairs of them, "
                            "zorder and hilbert on pairs and triples), plan every probe on it, and rank the "
                            "layouts by the bytes the probes would read. "
                            "Recorded in lakesort.advice for the report.")
    _table_arg(p)
    _spec_arg(p, help="the table spec with the probes (default: found in dags/tables/)")
    _flag(p, "--json",
          help='one JSON document: {"table", "sample_rows", "candidates": [...], "recommendation": {...}}')
    p.add_argument("--sample", type=int, default=ADVISE_SAMPLE_ROWS, metavar="ROWS",
                   help="most rows sampled, stratified over partitions (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, metavar="N",
                   help="the sample's seed (default: %(default)s)")
    _flag(p, "--no-record", help="print only; record nothing in lakesort.advice")

    p = command("demo", help="build the demo warehouse (TPC-H lineitem in a local Iceberg catalog)",
                description="Ingest TPC-H lineitem into `demo.lineitem` in many small unsorted appends.")
    p.add_argument("--home", default=".lakesort", help="where the catalog and warehouse "
                                                       "live (default: %(default)s)")
    p.add_argument("--scale", type=float, default=0.05, help="TPC-H scale factor (default: %(default)s)")
    p.add_argument("--batches", type=int, default=12, help="number of appends (default: %(default)s)")
    _flag(p, "--replace", help="drop and rebuild the demo table if it exists")

    p = command("tables", help="every table of the catalog: its configuration and sources, health, last run",
                description="List every table of the catalog with its effective configuration (from its "
                            "spec, its lakesort.* table properties, the namespace defaults, its own sort "
                            "order and write.* properties, in that order of precedence) and where each key "
                            "came from; its health from metadata (data files, small files, delete files, "
                            "overlap depth per sort key) and its last lakesort run. A table with no sort key "
                            "anywhere is listed as not configured. Exit 1 when a table's "
                            "configuration does not resolve.")
    p.add_argument("--catalog", metavar="NAME", help="the catalog (default: pyiceberg's default catalog)")
    p.add_argument("--namespace", metavar="N", help="only the tables of namespace N (and the ones under it)")
    _flag(p, "--json", help='one JSON document: {"catalog", "tables": [{table, configured, config, sources, '
                            'health, last_run, ...}]}')
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage and 0 on --help
        return int(exc.code or 0)
    level = logging.WARNING if args.quiet else (logging.DEBUG if args.verbose > 1 else logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    # `tables` and `housekeep` take the catalog to list (their own --catalog); elsewhere it is the table's.
    catalog = getattr(args, "catalog", None) if args.command not in ("tables", "housekeep") else None
    before = os.environ.get(CATALOG_VARIABLE)
    try:
        if catalog is not None:
            # pyiceberg's default catalog for this command (and the Spark job it starts); the first catalog
            # the command loads checks that it is configured (exit 2 naming the known ones otherwise)
            os.environ[CATALOG_VARIABLE] = catalog
        # The command's module, and with it pyiceberg, pyarrow and the rest, only now that the command runs.
        code: int = importlib.import_module(COMMANDS[args.command]).run(args)
        return code
    except (UsageError, InputError) as exc:
        print(f"lakesort {args.command}: error: {plain(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except LakesortError as exc:
        print(f"lakesort {args.command}: failed: {plain(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:  # `lakesort inspect ... | head`
        return EXIT_OK
    finally:  # main() is called in-process too (tests, scripts): the flag must not outlive the command
        if catalog is not None:
            if before is None:
                os.environ.pop(CATALOG_VARIABLE, None)
            else:
                os.environ[CATALOG_VARIABLE] = before


def plain(error: BaseException) -> str:
    """An error's message as one plain text: without terminal escapes (sqlglot's parse errors underline the
    culprit with them), which a log, a file or a non-terminal would show as garbage."""
    return _ANSI.sub("", str(error))
