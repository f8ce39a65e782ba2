"""Benchmark: faults across hosts (issue #40), every fault at every moment, and the README's table.

Run from the repo root, as root (network namespaces), after `make testbed`
(the REST catalog's and S3A's jars):

    .venv/bin/python tests/benchmarks/bench_faults.py [--sf 1] [--only FAULT[/MOMENT]] [--json PATH]

One bed (tests/faults/hosts_bed.py: a Spark master, two workers and the driver on hosts of their own, network
namespaces on a bridge; the warehouse on moto's S3 behind its front; Iceberg's REST catalog), then per case a
fresh table of TPC-H lineitem (tpchgen-cli, cached under tests/benchmarks/.cache/tpch/; 6 shuffled appends,
unpartitioned), one `lakesort compact --force` with the fault injected at its moment
(tests/faults/host_faults.py), the oracle, `lakesort cleanup`, the next `lakesort compact`. Prints the table
of fault, moment, outcome, time of the faulted run and time to recover (from the fault to the table compacted
with no staged leftovers), as Markdown; writes it as JSON (default tests/benchmarks/.cache/faults.json). Exits
1 when a case ends BAD.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "faults"), str(REPO / "testbed")]

import host_faults
import netns
import object_store
from hosts_bed import HostsBed

CACHE = REPO / "tests" / "benchmarks" / ".cache"
# The output file size per scale: about four files from the table, so the write spreads over both workers.
TARGETS = {0.01: "512KiB", 0.1: "4MiB", 1.0: "48MiB"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--only", action="append", default=[], help="FAULT or FAULT/MOMENT (repeatable)")
    parser.add_argument("--json", type=Path, default=CACHE / "faults.json")
    parser.add_argument("--shape-rate", default="8mbit", help="the slow link's rate (tbf)")
    args = parser.parse_args()
    for why in (netns.unavailable(), object_store.missing()):
        if why:
            print(f"bench_faults: cannot run: {why}", file=sys.stderr)
            return 2
    from layout.demo import generate_lineitem

    source = generate_lineitem(args.sf, CACHE / "tpch")
    cases = [(f, m) for f, moments in host_faults.CASES.items() for m in moments
             if not args.only or f in args.only or f"{f}/{m}" in args.only]
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as tmp:
        bed = HostsBed(Path(tmp) / "bed")
        try:
            started = time.monotonic()
            bed.start()
            print(f"bed up in {time.monotonic() - started:.0f}s; {len(cases)} case(s) at SF {args.sf:g}",
                  flush=True)
            runner = host_faults.Runner(bed, source, target=TARGETS.get(args.sf, "64MiB"),
                                        shape_rate=args.shape_rate)
            for fault, moment in cases:
                outcome = runner.run(fault, moment)
                outcomes.append(outcome)
                print(f"{fault} / {moment}: "
                      f"{outcome.outcome}{'' if outcome.reached else ' (moment not reached)'}; run "
                      f"{outcome.run_seconds:.0f}s, recovered {outcome.recover_seconds:.0f}s after the "
                      f"fault; {outcome.detail}", flush=True)
        finally:
            bed.stop()
    print(f"\nSF {args.sf:g}\n")
    print(host_faults.table_markdown(outcomes))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"sf": args.sf, "outcomes": [dataclasses.asdict(o) for o in outcomes]},
                                    indent=2))
    return 0 if all(o.good for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
