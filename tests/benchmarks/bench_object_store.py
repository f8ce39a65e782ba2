"""Benchmark: what lakesort costs on an object store, in requests
(S3 behind Iceberg's REST catalog, issue #37).

Run from the repo root (needs `make testbed`: the REST catalog server's and the S3A jars, and Java):

    .venv/bin/python tests/benchmarks/bench_object_store.py [--sf 1] [--batches 4] [--json PATH] [--keep]

One run, on the object-store test bed of tests/object_store.py (moto's S3 behind testbed/s3_front.py, which
logs every request: kind, key, range, bytes;
Iceberg's REST catalog server vending the S3 credentials per table):

1. ingest: TPC-H lineitem (tpchgen-cli, cached under tests/benchmarks/.cache/tpch/) by `lakesort demo` into
   the REST catalog: rows shuffled, partitioned by month of l_shipdate, `--batches` appends (4 by default:
   each append writes a file per month, so 4 x 84 small files;
   the demo's 12 would triple ingest time on moto);
2. per command, the whole command as a user runs it (a subprocess, the CLI's own configuration: the catalog's
   URI, the S3 endpoint and region, no keys): `lakesort compact` (plan, Spark job, verify, commit, measure),
   the Spark job broken out by the time window between the `spark-submit` log line and the next line lakesort
   logs; then `lakesort verify` and `lakesort measure` (engine check on, as by default). Requests per kind
   (GET with bytes, PUT with bytes, LIST, DELETE, HEAD, POST);
3. per probe of dags/tables/demo_lineitem.yaml, on the compacted snapshot: lakesort's planning
   (`layout.read.plan`, cold metadata cache) against DataFusion running the probe's query (the engine check's
   own runner, `layout.metrics.engine._run`) over the same data files, the files the manifests keep, each
   counted by the same proxy. Both count GETs and bytes of data files; lakesort's planning reads metadata only
   (footers, page indexes, bloom filters) and its GETs per opened file are reported; DataFusion reads the
   pages it selects too.

Goals: at most 2 GETs per file for a file's metadata; per probe at most as many GETs and bytes as DataFusion.
Results are printed as tables and written as JSON (`--json`, default
tests/benchmarks/.cache/object_store.json). Exits 0 whether or not a goal is met.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
for extra in (REPO_ROOT, REPO_ROOT / "tests"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

CACHE_ROOT = HERE / ".cache" / "tpch"
SPEC_DIR = REPO_ROOT / "dags" / "tables"
TABLE = "demo.lineitem"
KINDS = ("GET", "PUT", "COPY", "LIST", "DELETE", "HEAD", "POST")
METADATA_GETS_GOAL = 2


def summarize(log: list[dict]) -> dict:
    """Requests per kind, and bytes out (GET) and in (PUT)."""
    kinds = Counter(r["kind"] for r in log)
    return {**{k: kinds.get(k, 0) for k in KINDS},
            "GET_bytes": sum(r.get("bytes_out") or 0 for r in log if r["kind"] == "GET"),
            "PUT_bytes": sum(r.get("bytes_in") or 0 for r in log if r["kind"] == "PUT"),
            "total": len(log)}


def window(log: list[dict], start: float | None, end: float | None) -> list[dict]:
    if start is None:
        return []
    return [r for r in log if start <= r["t"] <= (end if end is not None else float("inf"))]


def _stamp(line: str) -> float | None:
    try:
        return dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


def job_window(stderr: str) -> tuple[float | None, float | None]:
    """From `spark-submit` (lakesort's log line) to the next line lakesort logs after it."""
    start = end = None
    for line in stderr.splitlines():
        t = _stamp(line)
        if t is None:
            continue
        if start is None and "spark-submit --master" in line:
            start = t
        elif start is not None and " layout." in line[:80]:
            end = t
            break
    return start, end


def lakesort(env: dict[str, str], cwd: Path, *args: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([str(Path(sys.executable).with_name("lakesort")), "-v", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"lakesort {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return seconds, done.stderr


def probe_requests(store, probes, sources_env) -> list[dict]:
    """Per probe: lakesort's cold planning and DataFusion's query over the same files,
    from the proxy's log."""
    os.environ.update(sources_env)
    from layout.metrics import engine
    from layout.read.cache import MetadataCache
    from layout.read.plan import plan
    from layout.read.plan_values import FilePlan

    plan(TABLE, "l_orderkey = -1", None, cache=MetadataCache())  # loads the catalog once, outside the counts
    out = []
    for p in probes:
        store.reset()
        planned = plan(TABLE, p.where, p.columns, cache=MetadataCache())
        ls_log = store.log()
        data = [r for r in ls_log if r["key"].endswith(".parquet")]
        opened = sorted({r["key"] for r in data})
        gets = [r for r in data if r["kind"] == "GET"]
        filesystem = planned.files[0].filesystem if planned.files else None
        if filesystem is None:  # nothing selected: the files the manifests kept, opened all the same
            from layout.io import resolve
            filesystem = resolve(f"s3://warehouse/{opened[0]}")[0] if opened else None
        files = [FilePlan(f"warehouse/{key}", (), filesystem) for key in opened]
        store.reset()
        started = time.perf_counter()
        df = engine._run(files, str(planned.predicate), planned.columns) if files else (0, 0, 0, 0)
        df_seconds = time.perf_counter() - started
        df_log = [r for r in store.log() if r["key"].endswith(".parquet")]
        df_gets = [r for r in df_log if r["kind"] == "GET"]
        out.append({
            "probe": p.name, "where": p.where, "files_opened": len(opened),
            "files_selected": planned.counts.files_selected, "lakesort_gets": len(gets),
            "lakesort_bytes": sum(r.get("bytes_out") or 0 for r in gets),
            "lakesort_heads": sum(1 for r in data if r["kind"] == "HEAD"),
            "lakesort_gets_per_file": len(gets) / len(opened) if opened else 0.0,
            "lakesort_max_gets_one_file": max(Counter(r["key"] for r in gets).values(), default=0),
            "lakesort_catalog_requests": len(ls_log) - len(data), "lakesort_plan_ms": planned.plan_ms,
            "datafusion_gets": len(df_gets),
            "datafusion_bytes": sum(r.get("bytes_out") or 0 for r in df_gets),
            "datafusion_heads": sum(1 for r in df_log if r["kind"] == "HEAD"),
            "datafusion_lists": sum(1 for r in df_log if r["kind"] == "LIST"),
            "datafusion_bytes_scanned": df[1], "datafusion_rows_matching": df[3],
            "datafusion_seconds": df_seconds,
        })
    return out


def print_tables(result: dict) -> None:
    print(f"\nTPC-H lineitem SF{result['sf']:g}, {result['batches']} appends: {result['files_ingested']} "
          f"files ingested in {result['ingest_seconds']:.0f} s")
    print(f"\n{'command':<22}{'s':>7}" + "".join(f"{k:>8}" for k in KINDS)
          + f"{'GET MiB':>10}{'PUT MiB':>10}")
    for name, row in result["commands"].items():
        print(f"{name:<22}{row['seconds']:>7.0f}" + "".join(f"{row[k]:>8}" for k in KINDS)
              + f"{row['GET_bytes'] / 2**20:>10.1f}{row['PUT_bytes'] / 2**20:>10.1f}")
    print(f"\n{'probe':<18}{'files':>6}{'ls GET':>8}{'ls KiB':>9}{'GET/file':>9}{'ls HEAD':>8}"
          f"{'DF GET':>8}{'DF KiB':>9}{'DF HEAD':>8}  goals")
    for r in result["probes"]:
        ok_meta = r["lakesort_max_gets_one_file"] <= METADATA_GETS_GOAL
        ok_df = r["lakesort_gets"] <= r["datafusion_gets"] and r["lakesort_bytes"] <= r["datafusion_bytes"]
        print(
            f"{r['probe']:<18}{r['files_opened']:>6}{r['lakesort_gets']:>8}{r['lakesort_bytes'] / 1024:>9.0f}"
            f"{r['lakesort_gets_per_file']:>9.2f}{r['lakesort_heads']:>8}{r['datafusion_gets']:>8}"
            f"{r['datafusion_bytes'] / 1024:>9.0f}{r['datafusion_heads']:>8}  "
            f"<=2 GETs/file {'met' if ok_meta else 'MISSED'}; <= DataFusion {'met' if ok_df else 'MISSED'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument("--batches", type=int, default=4, help="appends at ingest (default 4)")
    parser.add_argument("--json", type=Path, default=HERE / ".cache" / "object_store.json")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()

    import object_store as bed

    why = bed.missing()
    if why:
        sys.exit(f"bench_object_store: {why}")
    work = Path(tempfile.mkdtemp(prefix="lakesort-bench-s3-"))
    (work / "home").mkdir()
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    (work / "home" / "tpch").symlink_to(CACHE_ROOT, target_is_directory=True)
    store = bed.start_object_store(work)
    catalog = bed.start_rest_catalog(store, work)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYICEBERG_", "AWS_", "LAKESORT_"))}
        settings = {**catalog.environment(), "PYICEBERG_DEFAULT_CATALOG": bed.CATALOG,
                    "LAKESORT_SPARK_CONF": json.dumps({"spark.jars": bed.s3a_jars()}),
                    "LAKESORT_TABLES_DIR": str(SPEC_DIR), "LAKESORT_WORK_DIR": str(work / "lakesort-work"),
                    "LAKESORT_REPORT_DIR": str(work / "reports"), "HOME": str(work / "home")}
        env.update(settings)
        result: dict = {"sf": args.sf, "batches": args.batches, "commands": {}}
        store.reset()
        seconds, _ = lakesort(env, work / "home", "demo", "--home", str(work / "home"), "--scale",
                              f"{args.sf:g}", "--batches", str(args.batches))
        ingest = store.log()
        result["ingest_seconds"] = seconds
        result["files_ingested"] = len({r["key"] for r in ingest
                                        if r["kind"] == "PUT" and r["key"].endswith(".parquet")})
        result["commands"]["ingest (demo)"] = {"seconds": seconds, **summarize(ingest)}
        print(f"ingested SF{args.sf:g} in {seconds:.0f} s", flush=True)

        store.reset()
        seconds, stderr = lakesort(env, work / "home", "compact", TABLE)
        log = store.log()
        result["commands"]["compact"] = {"seconds": seconds, **summarize(log)}
        start, end = job_window(stderr)
        if start is not None:
            result["commands"]["  of which Spark job"] = {"seconds": (end or log[-1]["t"]) - start,
                                                         **summarize(window(log, start, end))}
        print(f"compacted in {seconds:.0f} s", flush=True)
        for command in ("verify", "measure"):
            store.reset()
            seconds, _ = lakesort(env, work / "home", command, TABLE)
            result["commands"][command] = {"seconds": seconds, **summarize(store.log())}
            print(f"{command} in {seconds:.0f} s", flush=True)

        # In-process from here: pyiceberg configured as the CLI was (catalog URI, endpoint, region, no keys).
        for key in [k for k in os.environ if k.startswith(("PYICEBERG_", "AWS_"))]:
            del os.environ[key]
        os.chdir(work / "home")
        from layout.metrics.probes import owner_probes
        from layout.registry import find_spec

        probes = owner_probes(find_spec(TABLE, SPEC_DIR))
        result["probes"] = probe_requests(store, probes, settings)
        print_tables(result)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
        print(f"\nwritten to {args.json}")
    finally:
        catalog.stop()
        store.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


if __name__ == "__main__":
    main()
