"""`lakesort measure`: what readers skip for each probe on a snapshot, and the clustering of each sort key."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any

from layout.cli import EXIT_OK
from layout.cli.args import table_spec
from layout.metrics.clustering import summarize
from layout.metrics.measure import Measurement, measure_snapshot


def run(args: argparse.Namespace) -> int:
    spec = table_spec(args)
    result = measure_snapshot(spec.table, spec=spec, snapshot_id=args.snapshot, record=not args.no_record,
                              engine=False if args.no_engine else None)
    rows = result.probes
    if args.json:
        def plain(row: dict[str, Any]) -> dict[str, Any]:
            return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}

        json.dump({"measurements": [plain(m.to_row()) for m in rows],
                   "clustering": [plain(dataclasses.asdict(r)) for r in result.clustering]}, sys.stdout,
                  indent=1)
        sys.stdout.write("\n")
        return EXIT_OK
    if not rows:
        print(f"{spec.table}: no snapshot to measure")
        return EXIT_OK
    print(f"{spec.table} snapshot {result.snapshot_id}: {len(rows)} probe(s)"
          + ("" if args.no_record
             else " (recorded in lakesort.pruning_metrics and lakesort.clustering_metrics)"))
    for line in _measure_table(rows):
        print(line)
    for line in _measure_notes(rows):
        print(line)
    for key in summarize(result.clustering):
        deepest = ", ".join(f"{r.partition_path or '(unpartitioned)'} ({r.average_depth:.1f})"
                            for r in key.deepest[:3] if r.average_depth > 1)
        print(f"clustering by {key.sort_key}: {key.partitions} partition(s), {key.files} file(s), average "
              f"depth {key.average_depth:.2f}, max {key.max_depth}, average overlaps "
              f"{key.average_overlaps:.2f}"
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

    # Only a merge-on-read table gets the delete files' column: elsewhere it would be zeros.
    deletes = any(m.delete_files_total for m in rows)
    header = ("probe", "files", *(("deletes",) if deletes else ()), "pages", "bytes selected", "in pages",
              "clustered", "eff.", "waste", "DataFusion", "plan ms")
    table = [header]
    for m in rows:
        # unknown: planning opened only some files
        pages_total = "?" if m.pages_total is None else m.pages_total
        estimated = "~" if m.ideal_method not in (None, "exact") else ""
        merged = (f"{m.delete_files_selected or 0}/{m.delete_files_total or 0}",) if deletes else ()
        table.append((m.probe, f"{m.files_selected}/{m.files_total}", *merged,
                      f"{m.pages_selected}/{pages_total}", str(m.bytes_selected),
                      f"{m.bytes_ideal}{estimated}", f"{m.bytes_clustered}{estimated}",
                      percent(m.efficiency_clustered), percent(m.wasted_in_pages), engine(m),
                      f"{m.plan_cold_ms:.0f}/{m.plan_warm_ms:.0f}"))
    widths = [max(len(str(r[i])) for r in table) for i in range(len(header))]
    return ["  " + "  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w) for i, (v, w) in
                             enumerate(zip(r, widths, strict=True))) for r in table]


def _measure_notes(rows: Sequence[Measurement]) -> list[str]:
    """What the columns of `_measure_table` mean, and why a probe is not confirmed by DataFusion."""
    notes = [("  in pages: bytes of the selected pages that hold a matching row (waste: the rest of the "
              "selected bytes); clustered: bytes a table perfectly clustered for the probe would read; eff.: "
              "clustered / selected"),
             ("  DataFusion: its bytes scanned against lakesort's over the same files (! more than 20% "
              "apart, s: on a sample of the files, n/c: not confirmed)")]
    if any(m.delete_files_total for m in rows):
        notes.append("  deletes: delete files a reader opens and merges for the selected files / for the "
                     "whole snapshot (lakesort.pruning_metrics.delete_files_*, their bytes delete_bytes_*); "
                     "rows and bytes are the data files', deleted rows included")
    if any(m.ideal_method not in (None, "exact") for m in rows):
        notes.append("  ~ estimated from a sample of the selected row groups "
                     "(lakesort.pruning_metrics.ideal_method)")
    notes += [f"  {m.probe}: {m.engine_status}" for m in rows
              if m.engine_status and not m.engine_checked and m.engine_status != "off"]
    return notes

