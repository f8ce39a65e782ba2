"""`lakesort plan-rewrite`: which partitions need sorting and compacting, and why."""

from __future__ import annotations

import argparse

from layout.catalog import load_table
from layout.cli import EXIT_OK
from layout.cli.args import dates_of, partitions_of, table_spec
from layout.compaction.planning.planner import plan_rewrite
from layout.spec import resolve_for_table


def run(args: argparse.Namespace) -> int:
    dates = dates_of(args)
    spec = table_spec(args)
    partitions = partitions_of(args, spec, dates)
    if partitions == [] and dates is not None:
        print(f"{spec.table}: nothing to do (no partition holds rows of {dates})")
        return EXIT_OK
    table = load_table(spec.table, spec.catalog)
    # As a run plans: the table's write properties where the spec is silent.
    rewrite = plan_rewrite(table, resolve_for_table(spec, table), partitions=partitions, force=args.force)
    if args.json:
        print(rewrite.to_json())
        return EXIT_OK
    for d in rewrite.partitions:
        deletes = f", {d.delete_files} delete files of {d.delete_rows} rows" if d.delete_files else ""
        print(f"{d.partition or '(unpartitioned)'}: {d.action} - {'; '.join(d.reasons)} "
              f"({d.files} files, {d.bytes} bytes, overlap depth {d.overlap_depth}{deletes})")
    for g in rewrite.groups:
        # merge-on-read: what each group applies (rows: the delete files' record counts, at most)
        if g.deletes:
            kinds = ", ".join(f"{sum(d.kind == k for d in g.deletes)} {k}" for k in ("position", "equality")
                              if any(d.kind == k for d in g.deletes))
            print(f"group {g.group_id} ({g.partition or 'unpartitioned'}): {len(g.inputs)} files, {g.bytes} "
                  f"bytes; applies {len(g.deletes)} delete files ({kinds}), "
                  f"{g.delete_rows} deleted rows at most")
    print(f"{len(rewrite.groups)} rewrite group(s), {rewrite.input_bytes} bytes to rewrite" if rewrite.groups
          else "nothing to do")
    return EXIT_OK
