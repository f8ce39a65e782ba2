"""What several commands read from their arguments: the table's spec, the date range, the partitions, columns.

Imported by the command modules only, never when the command line is parsed: the spec and the dates need
pyiceberg and pydantic, which `lakesort --help` must not load.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from layout.compaction.pipeline.config import RunConfig
from layout.compaction.planning.dates import DateRange, date_range, partitions_for_dates
from layout.errors import UsageError
from layout.registry import find_resolution, find_spec
from layout.spec import TableSpec, load_spec

log = logging.getLogger("lakesort")


def column_list(text: str | None) -> list[str] | None:
    """--columns A,B as a list; None: every column."""
    return [c.strip() for c in text.split(",") if c.strip()] if text else None


def table_spec(args: argparse.Namespace) -> TableSpec:
    """The spec of TABLE: --spec, or the one found in dags/tables/ by the table's name."""
    if not args.spec:
        return _in_catalog(args, find_spec(args.table))
    spec = _in_catalog(args, load_spec(Path(args.spec)))
    # TABLE is what gets rewritten (and leased): a spec written for another table must not drive it.
    if spec.table != args.table:
        raise UsageError(
            f"--spec {args.spec} is for table {spec.table}, not {args.table}; pass {spec.table} as TABLE, "
            f"or the spec of {args.table} (leave out --spec to find it in dags/tables/)"
        )
    return spec


def table_config(args: argparse.Namespace) -> RunConfig:
    """`table_spec` as a run's configuration: found in the registry, with the source of each key (which the
    run's record keeps); from --spec, the file alone."""
    if not args.spec:
        config = RunConfig.of_resolution(find_resolution(args.table))
        _in_catalog(args, config.spec)
        return config
    return RunConfig.of(table_spec(args))


def _in_catalog(args: argparse.Namespace, spec: TableSpec) -> TableSpec:
    """`spec`, when --catalog (the process's default catalog, `layout.cli.main`) does not contradict the
    catalog it names."""
    given = getattr(args, "catalog", None)
    if given is not None and spec.catalog is not None and spec.catalog != given:
        raise UsageError(f"--catalog {given}, but the spec of {spec.table} names catalog {spec.catalog}; "
                         f"leave out --catalog, or pass --catalog {spec.catalog}")
    return spec


def dates_of(args: argparse.Namespace) -> DateRange | None:
    """--from/--to, checked before anything is opened (exit 2: both or neither, not with --partition)."""
    return date_range(args.date_from, args.date_to, partitions=args.partition,
                      names=("--from", "--to", "--partition"))


def partitions_of(args: argparse.Namespace, spec: TableSpec, dates: DateRange | None) -> list[str] | None:
    """--partition, or the existing partitions holding the days of --from/--to; None: every partition."""
    if dates is None:
        given: list[str] | None = args.partition
        return given
    partitions = partitions_for_dates(spec, dates=dates)
    log.info("%s: %s covers %s", spec.table, dates, ", ".join(partitions) or "no partition")
    return partitions
