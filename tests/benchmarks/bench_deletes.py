"""Benchmark: compacting a merge-on-read table, `lakesort compact` against Iceberg's `rewrite_data_files`.

Run from the repo root (it needs the test bed: `make testbed`):

    .venv/bin/python tests/benchmarks/bench_deletes.py [--cases position,equality] [--scale 1] [--quick]
        [--driver-memory 6g] [--master local[2]] [--keep]

The table: TPC-H `lineitem` (tpchgen-cli, cached under tests/benchmarks/.cache/tpch/, git-ignored), shuffled
(a seeded permutation: an ingest lands rows in arrival order) and INSERTed by Iceberg's own Spark (the test
bed, tests/iceberg_bed.py) in three appends into a format-version 2, merge-on-read table partitioned by
`months(l_shipdate)` (84 partitions), in a throw-away SQLite catalog in a temporary directory (PYICEBERG_HOME,
HOME and LAKESORT_WORK_DIR point there; the catalog's URI is checked). Partitioned rather than flat because
a DELETE with `write.delete.granularity` 'partition' then writes one position delete file per partition it
touches, whatever the tasks: twelve DELETEs make about 12 x 84 (996 at SF1: the first and last months are
small, and a few DELETEs find no row there).

Then 5% of the rows (`pmod(hash(l_orderkey, l_linenumber), 240) < 12`) are deleted, in one of two ways:
- `position`: twelve Spark SQL DELETEs in merge-on-read mode, `... = k` for k in 0..11: about 1,000 position
  delete files;
- `equality`: the same rows' (l_orderkey, l_linenumber) written by Iceberg's own equality delete writer as
  about 1,000 files (`--delete-files`) committed in one RowDelta (the bed's `equality_delete_query`).

That state is saved (warehouse and catalog file), and each tool starts from it, restored in place (the
metadata holds absolute paths):
1. Iceberg: `CALL lakesort.system.rewrite_data_files(table, strategy 'sort', sort_order 'l_orderkey ASC
   NULLS FIRST', options rewrite-all, target-file-size-bytes, remove-dangling-deletes)` in a freshly started
   bed; the clock runs around the CALL only, so the bed's JVM start and Spark session are not in it;
2. lakesort: `layout.compaction.pipeline.driver.compact(table, spec=<sorted by l_orderkey, same target size>,
   force=True, master=...,
   spark_conf=...)`, with the bed stopped. Its seconds include spark-submit's JVM start and stop; they are
   also given without them (spark-submit's wall minus the job's own clock, from its manifests), which is the
   figure the ratio compares with Iceberg's.
Same Spark resources: both on `--master` (local[2]) with `--driver-memory` (6g), 4 shuffle partitions and no
UI (the bed's session conf), one at a time.

Before and after each tool, Iceberg Spark reports the rows (count, sum(hash(*)), bit_xor(xxhash64(*)): the
rows after must be the rows before), the data files and the live delete files (`.data_files`,
`.delete_files`), and lakesort's reader-side planning (`layout.read.plan.plan` through pyiceberg) a point
lookup's files, bytes and delete files (`l_orderkey = <an existing key>`). Exits 0 whatever the outcome; a
tool that fails is reported with its traceback. Timings are single runs on whatever else the machine is doing.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import os
import shutil
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
for _path in (REPO_ROOT, REPO_ROOT / "tests", HERE):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_compact import Timers, isolated_home, mib, tpch_file  # the paths above make it importable

TABLE = "bench.lineitem"
SORT_KEY = "l_orderkey"
TARGET = "128MiB"
TARGET_BYTES = 128 << 20
APPENDS = 3
POSITION_DELETES = 12  # DELETE statements; each deletes 1/240 of the rows, 5% in all
HASH = "pmod(hash(l_orderkey, l_linenumber), 240)"
DELETED = f"{HASH} < {POSITION_DELETES}"
SHUFFLE_SEED = 42
MOR = {"format-version": "2", "write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read",
       "write.merge.mode": "merge-on-read", "write.delete.granularity": "partition"}
CASES = ("position", "equality")

log = logging.getLogger("bench_deletes")


# --- the test bed (Iceberg Spark), one process per phase -----------------------------------------------


class Home:
    """The temporary directory: the live catalog file and warehouse, saved states, the bed's scratch dirs."""

    def __init__(self, root: Path, master: str, memory: str) -> None:
        self.root, self.master, self.memory = root, master, memory
        self.starts = 0

    @contextlib.contextmanager
    def bed(self) -> Iterator[Any]:
        """A fresh Iceberg Spark process on the live catalog (about 15 s to start), closed on leaving."""
        import iceberg_bed

        self.starts += 1
        scratch = self.root / f"bed-{self.starts}"
        scratch.mkdir()
        # The bed reads its master and memory from the environment it inherits (testbed/iceberg_spark.py).
        os.environ["LAKESORT_BED_MASTER"], os.environ["LAKESORT_BED_MEMORY"] = self.master, self.memory
        t0 = time.perf_counter()
        spark = iceberg_bed.IcebergSpark(self.root / "catalog.db",
                                         f"file://{self.root / 'warehouse'}", scratch)
        print(f"  (Iceberg Spark {spark.version} started in {time.perf_counter() - t0:.0f}s)", flush=True)
        try:
            yield spark
        finally:
            spark.close()

    def save(self, name: str) -> None:
        """Copy the live state aside (no process writes meanwhile: the bed is stopped or idle)."""
        saved = self.root / "saved" / name
        shutil.rmtree(saved, ignore_errors=True)
        saved.mkdir(parents=True)
        shutil.copytree(self.root / "warehouse", saved / "warehouse")
        shutil.copyfile(self.root / "catalog.db", saved / "catalog.db")

    def restore(self, name: str) -> None:
        """Put a saved state back where it was: the metadata's paths are absolute. The catalog file is
        overwritten in place (same inode), so a pooled SQLite connection of this process reads
        the restored one."""
        saved = self.root / "saved" / name
        shutil.rmtree(self.root / "warehouse")
        shutil.copytree(saved / "warehouse", self.root / "warehouse")
        shutil.copyfile(saved / "catalog.db", self.root / "catalog.db")


def ensure_java_home() -> None:
    """Spark's launcher wants JAVA_HOME or `java` on PATH: derive JAVA_HOME from PATH if it is unset."""
    if not os.environ.get("JAVA_HOME") and shutil.which("java"):
        os.environ["JAVA_HOME"] = str(Path(shutil.which("java")).resolve().parent.parent)


# --- building the table ---------------------------------------------------------------------------------


def shuffled_source(scale: float, out: Path) -> tuple[list[Path], int]:
    """tpchgen's lineitem in a seeded random order, as APPENDS Parquet files Spark reads (plain strings), and
    an existing order key for the point lookup (the middle row's: tpchgen writes in key order)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = pq.read_table(tpch_file(scale, "lineitem"))
    key = source.column(SORT_KEY)[source.num_rows // 2].as_py()
    plain = pa.schema([f.with_type(pa.string()) if pa.types.is_string_view(f.type) else f
                       for f in source.schema])
    source = source.cast(plain).replace_schema_metadata(None)
    shuffled = source.take(pa.array(np.random.default_rng(SHUFFLE_SEED).permutation(source.num_rows)))
    out.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, shuffled.num_rows, APPENDS + 1).astype(int)
    paths = []
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        path = out / f"part-{i}.parquet"
        pq.write_table(shuffled.slice(lo, hi - lo), path, compression="zstd")
        paths.append(path)
    return paths, key


def build_base(spark, parts: list[Path]) -> None:
    props = ", ".join(f"'{k}'='{v}'" for k, v in MOR.items())
    spark.sql("CREATE NAMESPACE IF NOT EXISTS bench")
    spark.sql(f"CREATE TABLE {TABLE} USING iceberg PARTITIONED BY (months(l_shipdate)) TBLPROPERTIES "
              f"({props}) AS SELECT * FROM parquet.`file://{parts[0]}`")
    for part in parts[1:]:
        spark.sql(f"INSERT INTO {TABLE} SELECT * FROM parquet.`file://{part}`")


def delete_rows(case: str, spark, files: int) -> str:
    """Delete the same 5% of the rows, as position or as equality deletes; what was written."""
    if case == "position":
        for k in range(POSITION_DELETES):
            t0 = time.perf_counter()
            spark.sql(f"DELETE FROM {TABLE} WHERE {HASH} = {k}")
            log.info("DELETE %d/%d in %.1fs", k + 1, POSITION_DELETES, time.perf_counter() - t0)
        return f"{POSITION_DELETES} DELETE statements (write.delete.granularity 'partition')"
    answer = spark.equality_delete_query(TABLE, ["l_orderkey", "l_linenumber"],
                                         "SELECT l_orderkey, l_linenumber, "
                                         f"l_shipdate FROM {TABLE} WHERE {DELETED}",
                                         files=files)
    files = answer["files"]  # the bulk answer counts them; an older bed described each
    count = files if isinstance(files, int) else len(files)
    rows = answer.get("records") or sum(f["records"] for f in files)
    return (f"one RowDelta of {count} equality delete files, "
            f"{rows:,} keys ({answer['seconds']:.1f}s in the bed)")


# --- what a table holds, and what a point lookup reads -----------------------------------------------------


def table_state(spark, key: int) -> dict[str, Any]:
    """Rows and their checksum as Iceberg Spark reads them, files and delete files, a point lookup's plan."""
    rows, h32, x64 = spark.sql(f"SELECT count(*), sum(hash(*)), bit_xor(xxhash64(*)) FROM {TABLE}")[0]
    data_files, data_bytes = spark.sql(f"SELECT count(*), coalesce(sum(file_size_in_bytes), 0) "
                                       f"FROM {TABLE}.data_files")[0]
    deletes = {content: (n, size) for content, n, size in spark.sql(
        f"SELECT content, count(*), sum(file_size_in_bytes) FROM {TABLE}.delete_files GROUP BY content")}
    matching = spark.sql(f"SELECT count(*) FROM {TABLE} WHERE {SORT_KEY} = {key}")[0][0]
    return {"rows": rows, "checksum": (h32, x64), "data_files": data_files, "data_bytes": data_bytes,
            "position_deletes": deletes.get(1, (0, 0)), "equality_deletes": deletes.get(2, (0, 0)),
            "lookup": lookup(key), "lookup_rows": matching}


def lookup(key: int) -> dict[str, Any]:
    """lakesort's reader-side plan of `l_orderkey = key` on the current snapshot, no metadata cache."""
    from layout.read.plan import plan

    try:
        counts = plan(TABLE, f"{SORT_KEY} = {key}", cache=False).counts
    except Exception as exc:  # noqa: BLE001 - reported in the table, the benchmark goes on
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"files": counts.files_selected, "files_total": counts.files_total,
            "row_groups": counts.row_groups_selected, "pages": counts.pages_selected,
            "bytes": counts.bytes_selected, "bytes_total": counts.bytes_total,
            # delete files a reader merges for the selected data files (planning that counts them)
            "delete_files": getattr(counts, "delete_files_selected", None),
            "delete_bytes": getattr(counts, "delete_bytes_selected", None)}


def delete_count(state: dict[str, Any]) -> int:
    return state["position_deletes"][0] + state["equality_deletes"][0]


def describe(state: dict[str, Any]) -> str:
    (pn, pb), (en, eb) = state["position_deletes"], state["equality_deletes"]
    return (f"{state['rows']:,} rows, {state['data_files']} data files ({mib(state['data_bytes'])}), "
            f"{pn} position delete files ({mib(pb or 0)}), {en} equality delete files ({mib(eb or 0)}); "
            f"lookup: {lookup_text(state['lookup'])}, {state['lookup_rows']} matching rows")


def lookup_text(look: dict[str, Any]) -> str:
    if "error" in look:
        return f"failed ({look['error'][:80]})"
    deletes = "" if look["delete_files"] is None else f", {look['delete_files']} delete files " \
                                                      f"({mib(look['delete_bytes'])})"
    return (f"{look['files']}/{look['files_total']} files, {look['row_groups']} row groups, {look['pages']} "
            f"pages, {mib(look['bytes'])}{deletes}")


# --- the contenders -------------------------------------------------------------------------------------


def run_iceberg(spark) -> dict[str, Any]:
    options = {"rewrite-all": "true", "target-file-size-bytes": str(TARGET_BYTES),
               # lakesort's commit removes the delete files a rewrite leaves dangling: Iceberg's too, then
               "remove-dangling-deletes": "true"}
    t0 = time.perf_counter()
    try:
        out = spark.call("rewrite_data_files", table=TABLE, strategy="sort",
                         sort_order=f"{SORT_KEY} ASC NULLS FIRST", options=options)
    except Exception:  # noqa: BLE001 - reported, the benchmark goes on
        return {"seconds": time.perf_counter() - t0, "error": traceback.format_exc()}
    return {"seconds": time.perf_counter() - t0, "output": out[0] if out else {}}


def run_lakesort(args, work: Path, timers: Timers) -> dict[str, Any]:
    from layout.compaction.pipeline.driver import compact
    from layout.spec import parse_spec

    spec = parse_spec({"table": TABLE, "catalog": "lakesort",
                       "owner": {"name": "Benchmarks", "email": "bench@example.com"},
                       "sort": {"keys": [{"column": SORT_KEY}]}, "target_file_size": TARGET},
                      source="bench_deletes")
    conf = {"spark.driver.memory": args.driver_memory, "spark.sql.shuffle.partitions": "4",
            "spark.ui.enabled": "false"}
    work.mkdir(parents=True, exist_ok=True)
    timers.reset()
    t0 = time.perf_counter()
    try:
        result = compact(TABLE, spec=spec, force=True, master=args.master, spark_conf=conf, work_dir=work)
    except Exception:  # noqa: BLE001 - reported, the benchmark goes on
        return {"seconds": time.perf_counter() - t0, "error": traceback.format_exc()}
    seconds = time.perf_counter() - t0
    job = sum(json.loads(p.read_text())["seconds"] for p in work.glob("manifest-*.json"))
    jvm = max(0.0, timers.seconds.get("submit", 0.0) - job)
    return {"seconds": seconds, "jvm": jvm, "job": job, "result": result, "parts": dict(timers.seconds)}


# --- one case --------------------------------------------------------------------------------------------


def run_case(case: str, home: Home, args, key: int, timers: Timers) -> dict[str, Any]:
    print(f"\n=== {case} deletes ===", flush=True)
    home.restore("base")
    with home.bed() as spark:
        t0 = time.perf_counter()
        how = delete_rows(case, spark, args.delete_files)
        print(f"  deleted: {how}, in {time.perf_counter() - t0:.0f}s", flush=True)
        before = table_state(spark, key)
    print(f"  before: {describe(before)}", flush=True)
    home.save(case)

    with home.bed() as spark:
        print("  Iceberg rewrite_data_files ...", flush=True)
        iceberg = run_iceberg(spark)
        if "error" not in iceberg:
            iceberg["after"] = table_state(spark, key)
    report_tool("Iceberg", iceberg, before)

    home.restore(case)
    print("  lakesort compact ...", flush=True)
    lakesort = run_lakesort(args, home.root / f"compact-{case}", timers)
    if "error" not in lakesort:
        with home.bed() as spark:
            lakesort["after"] = table_state(spark, key)
    report_tool("lakesort", lakesort, before)
    return {"case": case, "before": before, "iceberg": iceberg, "lakesort": lakesort}


def report_tool(name: str, run: dict[str, Any], before: dict[str, Any]) -> None:
    if "error" in run:
        print(f"  {name} FAILED after {run['seconds']:.1f}s:\n{run['error']}", flush=True)
        return
    after = run["after"]
    same = after["rows"] == before["rows"] and after["checksum"] == before["checksum"]
    run["same_rows"] = same
    extra = ""
    if "output" in run:
        extra = f"; CALL returned {run['output']}"
    if "result" in run:
        r = run["result"]
        extra = (f"; {r.files_before} -> {r.files_after} files, {getattr(r, 'delete_files_removed', '?')} "
                 f"delete files removed; spark-submit JVM start and stop {run['jvm']:.1f}s, "
                 f"the job's clock {run['job']:.1f}s")
    print(f"  {name}: {run['seconds']:.1f}s{extra}", flush=True)
    print(f"    after: {describe(after)}", flush=True)
    print("    rows the same as before (count, sum(hash(*)), bit_xor(xxhash64(*))): "
          f"{'yes' if same else 'NO'}",
          flush=True)


# --- the summary ------------------------------------------------------------------------------------------


def summary(results: list[dict[str, Any]]) -> None:
    """One row per case and tool, as a Markdown table (the README's): before -> after in each cell."""
    print("\nOne run each. Iceberg: the CALL alone (its JVM was up); lakesort: compact() without "
          "spark-submit's JVM start and stop (whole compact() in brackets). Lookup: lakesort's planning of "
          f"{SORT_KEY} = key: data files, their bytes, delete files merged.")
    rows = [("case", "tool", "seconds", "lakesort / Iceberg", "data files", "delete files", "rows",
             "same rows", "lookup files", "lookup MiB", "lookup delete files")]
    for res in results:
        before, ice = res["before"], res["iceberg"]
        for name in ("Iceberg", "lakesort"):
            run = res[name.lower()]
            if "error" in run:
                rows.append((res["case"], name, f"failed after {run['seconds']:.1f}", *["-"] * 8))
                continue
            after, ratio = run["after"], ""
            if name == "lakesort":
                secs = f"{run['seconds'] - run['jvm']:.1f} ({run['seconds']:.1f})"
                if "error" not in ice:
                    ratio = (f"{(run['seconds'] - run['jvm']) / ice['seconds']:.2f} "
                             f"({run['seconds'] / ice['seconds']:.2f})")
            else:
                secs = f"{run['seconds']:.1f}"
            lb, la = before["lookup"], after["lookup"]
            rows.append((res["case"], name, secs, ratio, f"{before['data_files']} -> {after['data_files']}",
                         f"{delete_count(before)} -> {delete_count(after)}",
                         f"{before['rows']:,} -> {after['rows']:,}", "yes" if run["same_rows"] else "NO",
                         arrow(lb, la, "files"), arrow(lb, la, "bytes", mib_=True),
                         arrow(lb, la, "delete_files")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        print("| " + " | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + " |")
        if n == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def arrow(before: dict[str, Any], after: dict[str, Any], field: str, *, mib_: bool = False) -> str:
    def one(look: dict[str, Any]) -> str:
        value = look.get(field)
        if value is None:
            return "?"
        return f"{value / 2**20:.1f}" if mib_ else str(value)

    return f"{one(before)} -> {one(after)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma separated: position, equality")
    parser.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument("--quick", action="store_true", help="scale 0.1 (to try it; not the issue's figures)")
    parser.add_argument("--delete-files", type=int, default=1000, help="equality delete files (about)")
    parser.add_argument("--driver-memory", default="6g", help="both tools' spark.driver.memory")
    parser.add_argument("--master", default="local[2]", help="both tools' Spark master")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    if unknown := [c for c in cases if c not in CASES]:
        parser.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")
    scale = 0.1 if args.quick else args.scale
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("pyiceberg").setLevel(logging.WARNING)

    import iceberg_bed

    if why := iceberg_bed.missing():
        print(f"bench_deletes needs the test bed: {why}", file=sys.stderr)
        return 2
    ensure_java_home()
    root = isolated_home("lakesort-bench-deletes-", keep=args.keep)
    os.environ["LAKESORT_WORK_DIR"] = str(root / "lakesort-work")  # runs and leases of this benchmark only
    home = Home(root, args.master, args.driver_memory)
    from layout.compaction.pipeline import driver

    timers = Timers()
    timers.wrap(driver, "submit", "submit")
    print(f"TPC-H lineitem sf={scale:g}; both tools on {args.master}, driver memory {args.driver_memory}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)

    t0 = time.perf_counter()
    parts, key = shuffled_source(scale, root / "source")
    with home.bed() as spark:
        build_base(spark, parts)
        files = spark.sql(f"SELECT count(*) FROM {TABLE}.data_files")[0][0]
        deleted = spark.sql(f"SELECT count(*) FROM {TABLE} WHERE {DELETED}")[0][0]
        rows = spark.sql(f"SELECT count(*) FROM {TABLE}")[0][0]
    home.save("base")
    print(f"built {TABLE}: {rows:,} rows in {files} data files, {APPENDS} appends, in "
          f"{time.perf_counter() - t0:.0f}s; the deletes remove {deleted:,} rows ({deleted / rows:.2%}); "
          f"lookup {SORT_KEY} = {key}", flush=True)

    results = [run_case(case, home, args, key, timers) for case in cases]
    summary(results)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
