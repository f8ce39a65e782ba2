"""`lakesort tables`: every table of the catalog, its effective configuration and where each key came from,
its health and its last lakesort run.

The configuration is the registry's resolution (`layout.registry`: spec, `lakesort.*` properties, namespace
default, the table's own sort order and write properties). The health is read from metadata only, never from
data pages: the snapshot summary's totals (data files, delete files), one pass over the data manifests for the
file sizes and the sort keys' bounds (`layout.metrics.clustering.key_spans`, the measure step's own), and the
overlap depth per sort key from those bounds. The last run is the newest of the snapshot summaries'
`lakesort.run-id` (what committed) and `lakesort.compaction_runs` (every run, failed ones too).

Exit status: 0 listed; 1 a table whose configuration does not resolve (each such table says why); 2 bad usage
(a namespace the catalog does not hold), before any table is read.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from layout.catalog import RUN_ID, load_catalog
from layout.cli import EXIT_FAILURE, EXIT_OK
from layout.errors import ConfigError, UsageError
from layout.metrics.clustering import health, key_spans
from layout.metrics.runs import read_runs
from layout.read.iceberg import snapshot_of
from layout.registry import OWN_NAMESPACE, Resolution, list_catalog

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger("lakesort")


def run(args: argparse.Namespace) -> int:
    try:
        catalog = load_catalog(args.catalog)
    except ConfigError as exc:
        if args.catalog is None:  # no catalog configured at all: the setup's failure, not the command line's
            raise
        raise UsageError(f"--catalog {args.catalog}: {exc}") from None
    if args.namespace is not None:
        _check_namespace(catalog, args.namespace)
    listed = list_catalog(catalog.name, namespace=args.namespace)
    runs = _last_runs(catalog)
    rows = [_row(resolution, table, error, runs.get(resolution.table)) for resolution, table, error in listed]
    if args.json:
        print(json.dumps({"catalog": catalog.name, "tables": rows}, indent=2, default=str))
    else:
        _print(rows)
    return EXIT_FAILURE if any(r["error"] for r in rows) else EXIT_OK


def _check_namespace(catalog: Any, namespace: str) -> None:
    """Bad usage, before any table is read: a namespace the catalog does not hold, or lakesort's own."""
    if namespace.split(".")[0] == OWN_NAMESPACE:
        raise UsageError(f"--namespace {namespace}: lakesort's own tables are not listed (`lakesort report` "
                         "shows what they hold)")
    known = {".".join(n) for n in catalog.list_namespaces()}
    parts = tuple(namespace.split("."))
    # A nested namespace (a.b) is looked up itself: its first level existing is not enough.
    exists = parts[0] in known if len(parts) == 1 else _namespace_exists(catalog, parts)
    if not exists:
        listed = ", ".join(sorted(known - {OWN_NAMESPACE})) or "none"
        raise UsageError(f"--namespace {namespace}: no such namespace in catalog {catalog.name} "
                         f"(namespaces: {listed})")


def _namespace_exists(catalog: Any, parts: tuple[str, ...]) -> bool:
    try:
        catalog.load_namespace_properties(parts)
    except Exception:  # noqa: BLE001 - NoSuchNamespaceError, or a catalog that cannot say: not listable
        return False
    return True


def _row(resolution: Resolution, table: Table | None, error: str | None,
         recorded: dict[str, Any] | None) -> dict[str, Any]:
    spec = resolution.effective or resolution.spec
    row: dict[str, Any] = {
        "table": resolution.table, "catalog": resolution.catalog, "configured": resolution.configured,
        "reason": None if resolution.configured or error else resolution.reason, "error": error,
        "spec_hash": resolution.spec.spec_hash if resolution.spec is not None else None,
        "config": {}, "sources": {}, "health": None, "last_run": None,
    }
    if spec is not None and error is None:
        for key, source in resolution.keys().items():
            row["config"][key] = source.value
            row["sources"][key] = {"kind": source.kind, "origin": source.origin}
    if table is not None:
        small = spec.small_file_size if spec is not None else None
        row["health"] = _health(table, [k.column for k in resolution.sort_keys], small)
        row["last_run"] = _last_run(table, recorded)
    return row


def _health(table: Table, keys: Sequence[str], small_file_size: int | None) -> dict[str, Any]:
    """Files, small files, delete files and the overlap depth per sort key, from metadata alone."""
    snapshot = snapshot_of(table)
    if snapshot is None:
        return {"snapshot_id": None, "data_files": 0, "delete_files": 0, "small_files": 0, "bytes": 0,
                "overlap": {}}
    summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
    out: dict[str, Any] = {"snapshot_id": snapshot.snapshot_id,
                           "data_files": int(summary.get("total-data-files", 0)),
                           "delete_files": int(summary.get("total-delete-files", 0)),
                           "bytes": int(summary.get("total-files-size", 0)), "small_files": None,
                           "overlap": {}}
    try:
        spans = key_spans(table, list(keys)) if keys else {}
    except Exception as exc:  # noqa: BLE001 - the listing goes on; the table's own runs report it
        log.warning("%s: the health of its sort keys could not be read: %s", ".".join(table.name()), exc)
        return out
    if keys and small_file_size is not None:
        out["small_files"] = sum(1 for f in spans[keys[0]] if f.bytes < small_file_size)
    for column, files in spans.items():
        by_partition: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
        for f in files:
            by_partition[f.partition].append((f.lo, f.hi))
        figures = [health(p) for p in by_partition.values()]
        counted = sum(h.files for h in figures)
        out["overlap"][column] = {
            "max_depth": max((h.max_depth for h in figures), default=0),
            "average_depth": (round(sum(h.average_depth * h.files for h in figures) / counted, 2) if counted
                              else 0.0),
        }
    return out


def _last_runs(catalog: Any) -> dict[str, dict[str, Any]]:
    """Per table, the newest row of `lakesort.compaction_runs` (one read for the catalog)."""
    try:
        rows = read_runs(catalog).to_pylist()
    except Exception as exc:  # noqa: BLE001 - the listing goes on without the records
        log.warning("lakesort.compaction_runs could not be read: %s", exc)
        return {}
    return newest_rows(rows)


def newest_rows(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per table, its newest row by (start, run id), as the report orders runs: a trimmed night's commit and
    its `<run id>-deferred` row share a start, and the deferred one is the newer
    (whatever order the rows came in)."""
    newest: dict[str, dict[str, Any]] = {}
    for row in rows:
        kept = newest.get(row["table"])
        if kept is None or (row["started_at"], row["run_id"]) > (kept["started_at"], kept["run_id"]):
            newest[row["table"]] = row
    return newest


def _last_run(table: Table, recorded: dict[str, Any] | None) -> dict[str, Any] | None:
    """The newest of the last recorded run and the last snapshot lakesort committed (its summary's run id)."""
    committed = None
    snapshot = snapshot_of(table)
    by_id = {s.snapshot_id: s for s in table.metadata.snapshots}
    while snapshot is not None:  # the current branch's ancestry, newest first
        summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
        if RUN_ID in summary:
            at = dt.datetime.fromtimestamp(snapshot.timestamp_ms / 1000, tz=dt.UTC)
            committed = {"run_id": summary[RUN_ID], "status": "committed", "at": at.isoformat(),
                         "snapshot_id": snapshot.snapshot_id, "from": "snapshot summary"}
            break
        snapshot = by_id.get(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id is not None else None
    if recorded is None:
        return committed
    started = recorded["started_at"]
    if committed is not None and recorded["run_id"] == committed["run_id"]:
        return {**committed, "status": recorded["status"], "from": "lakesort.compaction_runs"}
    record = {"run_id": recorded["run_id"], "status": recorded["status"], "at": started.isoformat(),
              "snapshot_id": recorded.get("snapshot_after"), "from": "lakesort.compaction_runs",
              "error": recorded.get("error"), "reason": recorded.get("reason")}  # reason: why deferred
    if committed is None:
        return record
    return record if started.isoformat() > committed["at"] else committed


def _print(rows: Sequence[dict[str, Any]]) -> None:
    for row in rows:
        state = "error" if row["error"] else "configured" if row["configured"] else "not configured"
        print(f"{row['table']} ({row['catalog']}): {state}"
              + (f", spec hash {row['spec_hash']}" if row["configured"] else ""))
        if row["error"]:
            print(f"  error: {row['error']}")
        elif not row["configured"]:
            print(f"  {row['reason']}")
        for key, source in row["sources"].items():
            if source["kind"] != "lakesort":
                print(f"  {key} = {_short(row['config'][key])}  [{source['kind']}: {source['origin']}]")
        if (h := row["health"]) is not None:
            small = "" if h["small_files"] is None else f", {h['small_files']} small"
            overlap = "; ".join(f"{c} overlap depth max {o['max_depth']}, avg {o['average_depth']}"
                                for c, o in h["overlap"].items())
            print(f"  health: {h['data_files']} data file(s){small}, {h['delete_files']} delete file(s)"
                  + (f"; {overlap}" if overlap else ""))
        last = row["last_run"]
        print(f"  last run: {last['status']} {last['at']} ({last['run_id']})" if last else "  last run: none")
        if last and last.get("reason"):
            print(f"    {last['reason']}")


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 100 else text[:97] + "..."
