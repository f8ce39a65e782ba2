"""Faults across hosts (issue #40): each fault injected at a moment of a `lakesort compact` run on the hosts
of `hosts_bed.HostsBed`, the outcome judged by an oracle that never looks at what Spark read, then `lakesort
cleanup` and the next run.

Moments are detected from the job's progress, not guessed by sleeping: the driver's Spark status API (which of
the job's parts runs: its Spark job groups, `jobs/compaction/run.py`'s `_Clock`), the S3 front's request log
(the first staged Parquet file written) and the run's files (the staged-output manifest, written when the
Spark job ends). The commit's moments are held open by the front: a delayed upload (pyiceberg's manifest list;
the REST catalog server's new metadata.json) during which the driver is killed.

Outcomes, the two good ones first:
- "committed": the run finished (Spark's retries absorbed the fault); one new snapshot, the same rows;
- "failed cleanly": the run failed or died; the table is as it was (same snapshot, same history);
- "committed by the catalog": the driver died while the catalog server was writing its commit, which then
  went through: the same rows, the staged files now the table's (a commit of unknown outcome to the driver);
- anything else is "BAD: <why>".
After each: every snapshot reads whole (its summary's row count, no key twice); `lakesort cleanup` leaves no
staged file that no snapshot references; the next `lakesort compact` succeeds and the rows are still the same.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from hosts_bed import HostsBed

KEY = ("l_orderkey", "l_linenumber")
JOB_MOMENTS = ("reading", "shuffle", "writing", "read-back")
COMMIT_MOMENTS = ("manifest list upload", "catalog writing metadata")
# fault -> the moments it is injected at
CASES: dict[str, tuple[str, ...]] = {
    "worker killed": JOB_MOMENTS,
    "worker link cut 30 s": JOB_MOMENTS,
    "worker link slow, lossy": JOB_MOMENTS,
    "driver killed": ("after staging",),
    "driver SIGKILL in commit": COMMIT_MOMENTS,
}
CUT_SECONDS = 30.0
COMMIT_HOLD_SECONDS = 8.0  # how long the front holds the commit's upload open: the driver dies meanwhile


@dataclass(frozen=True)
class Outcome:
    fault: str
    moment: str
    outcome: str
    reached: bool  # the moment was seen and the fault injected
    run_seconds: float  # the faulted run, start to end
    # from the fault to the table compacted, no staged leftovers (the next run, if needed)
    recover_seconds: float
    detail: str = ""
    table: str = ""

    @property
    def good(self) -> bool:
        return self.reached and not self.outcome.startswith("BAD")


# ---- the oracle -------------------------------------------------------------------------------------------


def canonical(data: pa.Table) -> pa.Table:
    """Rows by field id in key order, floats as their bits, strings as plain strings."""
    columns, names = [], []
    for f, col in zip(data.schema, data.columns, strict=True):
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if pa.types.is_floating(f.type):
            col = col.cast(pa.float64()).view(pa.int64())
        elif pa.types.is_large_string(f.type) or pa.types.is_string_view(f.type):
            col = col.cast(pa.string())
        columns.append(col)
        names.append(f.name)
    table = pa.table(columns, names=names)
    return table.sort_by([(k, "ascending") for k in KEY])


def duplicates(data: pa.Table) -> int:
    counts = data.group_by(list(KEY)).aggregate([([], "count_all")])
    return int(pc.sum(pc.greater(counts["count_all"], 1)).as_py() or 0)


@dataclass(frozen=True)
class TableState:
    snapshot_id: int
    files: frozenset[str]
    rows: pa.Table  # canonical
    history: dict[int, int]  # snapshot id -> rows it reads


def read_state(table) -> tuple[TableState, list[str]]:
    """The table as pyiceberg reads it, and what is wrong with any snapshot (unreadable,
    short, a key twice)."""
    table = table.refresh()
    problems, history = [], {}
    current = table.current_snapshot().snapshot_id
    rows = None
    for snapshot in table.snapshots():
        try:
            data = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
        except Exception as exc:  # noqa: BLE001 - an unreadable snapshot is a finding, not a crash
            problems.append(f"snapshot {snapshot.snapshot_id} unreadable: {exc}")
            continue
        expected = int(snapshot.summary["total-records"]) if snapshot.summary else None
        if expected is not None and data.num_rows != expected:
            problems.append(f"snapshot {snapshot.snapshot_id} reads {data.num_rows} rows, "
                            f"its summary says {expected}")
        if (dup := duplicates(data)):
            problems.append(f"snapshot {snapshot.snapshot_id}: {dup} key(s) twice")
        history[snapshot.snapshot_id] = data.num_rows
        if snapshot.snapshot_id == current:
            rows = canonical(data)
    files = frozenset(t.file.file_path for t in table.scan().plan_files())
    return TableState(current, files, rows, history), problems


def leftovers(bed: HostsBed, table) -> list[str]:
    """Staged files no snapshot of the table references."""
    table = table.refresh()
    referenced = {e.file_path for s in table.snapshots() for e in _data_files(table, s)}
    prefix = table.location().removeprefix("s3://warehouse/").rstrip("/") + "/data/lakesort-staging/"
    return [k for k in bed.store.keys(prefix)
            if not k.endswith("/") and f"s3://warehouse/{k}" not in referenced]


def _data_files(table, snapshot):
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            yield entry.data_file


# ---- moments --------------------------------------------------------------------------------------------


def _active(bed: HostsBed, part: str, stage_ok=lambda s: True) -> bool:
    return any(job["group"] == f"lakesort: {part}" and any(stage_ok(s) for s in job["stages"])
               for job in bed.job_status())


def _staged_put(bed: HostsBed, prefix: str) -> bool:
    return any(r["kind"] in ("PUT", "POST") and f"{prefix}/data/lakesort-staging/" in r["key"]
               and ".parquet" in r["key"] for r in bed.store.log())


def moment_reached(bed: HostsBed, moment: str, prefix: str, work: Path) -> bool:
    if moment == "reading":  # the input read: the first part whose stages read the planned files
        return any(_active(bed, p) for p in ("read, sample", "file boundaries", "merge: page indexes"))
    if moment == "shuffle":  # the map side: the inputs read again, rows written to the shuffle
        return _active(bed, "fingerprint, shuffle, sort, write", lambda s: s.get("shuffleReadBytes", 0) == 0)
    if moment == "writing":
        return _staged_put(bed, prefix)
    if moment == "read-back":
        return _active(bed, "read back")
    if moment == "after staging":  # the job wrote its manifest: staged output complete, not yet verified
        return any(work.rglob("manifest-*.json"))
    if moment in ("manifest list upload", "catalog writing metadata"):
        return any(rule.get("fired", 0) for rule in bed.store.faults())
    raise ValueError(moment)


def commit_hold(moment: str, prefix: str, version: int) -> list[dict]:
    """The front's rule holding the commit's upload open at `moment`."""
    if moment == "manifest list upload":
        key = f"{prefix}/metadata/snap-"
    elif moment == "catalog writing metadata":  # the server's next metadata file: 0000N-<uuid>.metadata.json
        key = f"{prefix}/metadata/{version + 1:05d}-"
    else:
        return []
    return [{"kind": "PUT", "key_contains": key, "action": "delay",
             "seconds": COMMIT_HOLD_SECONDS, "times": 1}]


# ---- one case ---------------------------------------------------------------------------------------------


def _spec_text(name: str, target: str) -> str:
    return (f"table: {name}\nowner: {{name: Test Team, email: test@example.com}}\n"
            "sort: {keys: [{column: l_shipdate}, {column: l_orderkey}]}\n"
            f"target_file_size: {target}\n")


@dataclass
class Runner:
    """Runs cases on one bed, each on a table of its own made from `source` (a lineitem Parquet file)."""

    bed: HostsBed
    source: Path
    target: str = "512KiB"
    batches: int = 6
    shape_rate: str = "8mbit"
    timeout: float = 1500.0
    count: int = 0

    def _compact(self, name: str, log: Path, *, force: bool):
        spec = self.bed.workdir / f"{name}.yaml"
        spec.write_text(_spec_text(name, self.target))
        args = ["compact", name, "--spec", str(spec), "--master", self.bed.master_url, "--no-record"]
        return self.bed.lakesort([*args, "--force"] if force else args, log)

    def _wait(self, proc, timeout: float) -> int:
        try:
            return proc.popen.wait(timeout)
        except Exception:  # noqa: BLE001 - a hung run is killed and counted as failed
            proc.kill()
            return proc.popen.wait(30)

    def run(self, fault: str, moment: str, *, table: str | None = None, next_run: bool = True) -> Outcome:
        """One case on a new table (or `table`, when a test chains cases: a failed case's next run can be the
        next case's faulted run, `next_run=False` on the first)."""
        bed = self.bed
        if table is None:
            self.count += 1
            name = f"hosts.lineitem_{self.count}"
            bed.create_lineitem(name, self.source, self.batches)
        else:
            name = table
        table = bed.load_catalog().load_table(name)
        prefix = table.location().removeprefix("s3://warehouse/").rstrip("/")
        version = int(table.metadata_location.rsplit("/", 1)[1].split("-", 1)[0])
        before, problems = read_state(table)
        assert not problems, problems
        logs = bed.workdir / "logs" / name
        logs.mkdir(parents=True, exist_ok=True)
        work = bed.workdir / "lakesort-work"
        manifests_before = set(work.rglob("manifest-*.json")) if work.exists() else set()
        bed.store.inject(*commit_hold(moment, prefix, version))
        started = time.monotonic()
        proc = self._compact(name, logs / "run.log", force=True)
        reached, fault_at, detail, early_cleanup = False, None, "", False
        try:
            while proc.popen.poll() is None and time.monotonic() - started < self.timeout:
                if moment == "after staging":
                    hit = bool(set(work.rglob("manifest-*.json")) - manifests_before)
                else:
                    hit = moment_reached(bed, moment, prefix, work)
                if hit:
                    reached, fault_at = True, time.monotonic()
                    detail = self._inject(fault, proc)
                    break
                time.sleep(0.2)
            code = self._wait(proc, max(60.0, self.timeout - (time.monotonic() - started)))
            ended = time.monotonic()
            if reached and moment in COMMIT_MOMENTS:
                # The driver died with its commit sent: its lease outlives it (`lease.mark_committing`), so a
                # cleanup now is refused instead of deleting the staged files the catalog may still commit.
                early = bed.lakesort(["cleanup", name, "--grace-hours", "0"], logs / "cleanup-early.log")
                early_cleanup = self._wait(early, 300) == 0
                self._settle(prefix)
                # The commit has settled (the held upload finished): what an operator does for a dead run, as
                # the refusal says, so that this case's cleanup need not wait out COMMIT_SETTLE.
                for held in (bed.workdir / "lakesort-work").rglob("lease.json"):
                    held.unlink()
        finally:
            bed.store.inject()
            self._heal(fault)
        if fault == "worker link slow, lossy":
            sent, dropped = bed.net.drops("w1")
            detail += f"; tbf dropped {dropped} of {sent + dropped} packets" if reached else ""
            bed.net.unshape("w1")
        fault_at = fault_at or ended
        after, problems = read_state(table)
        outcome = self._judge(code, before, after, problems, killed=fault.startswith("driver"))
        if early_cleanup:
            outcome = ("BAD: lakesort cleanup ran while the commit could still land "
                       f"({logs / 'cleanup-early.log'})")
        # The leftovers of a failed run: `lakesort cleanup` (no grace period) removes them.
        cleanup = bed.lakesort(["cleanup", name, "--grace-hours", "0"], logs / "cleanup.log")
        if self._wait(cleanup, 300) != 0:
            outcome = f"BAD: lakesort cleanup failed ({logs / 'cleanup.log'})"
        left = leftovers(bed, table)
        if left:
            outcome = f"BAD: {len(left)} staged file(s) left after cleanup"
        recovered = time.monotonic()
        if next_run:
            nxt = self._compact(name, logs / "next.log", force=False)
            if self._wait(nxt, self.timeout) != 0:
                outcome = f"BAD: the next run failed ({logs / 'next.log'})"
            final, problems = read_state(table)
            if outcome.startswith("failed"):
                recovered = time.monotonic()  # the next run did the compaction
            if problems or not final.rows.equals(before.rows):
                outcome = f"BAD: after the next run: {problems or 'rows differ'}"
        return Outcome(fault, moment, outcome, reached, ended - started, recovered - fault_at,
                       detail.strip("; "), name)

    def _judge(self, code: int, before: TableState, after: TableState, problems: list[str], *,
               killed: bool) -> str:
        if problems:
            return f"BAD: {'; '.join(problems)}"
        if after.snapshot_id == before.snapshot_id:
            if after.files != before.files or after.history != before.history:
                return "BAD: the table changed without a new snapshot"
            return "failed cleanly" if code != 0 else "BAD: exit 0 without a commit"
        new = set(after.history) - set(before.history)
        if len(new) != 1 or not set(before.history) <= set(after.history):
            return (f"BAD: {len(new)} new snapshot(s), history {sorted(before.history)} -> "
                    f"{sorted(after.history)}")
        if not after.rows.equals(before.rows):
            return "BAD: the rows differ"
        if code == 0:
            return "committed"
        return "committed by the catalog" if killed else f"BAD: committed but the run exited {code}"

    def _settle(self, prefix: str) -> None:
        """Wait for the upload the front held to finish, and the catalog server with it: the driver is gone,
        but a commit request it sent may still go through. (`lakesort cleanup --grace-hours 0` run before that
        deleted staged files that the commit then referenced; now the dead command's lease, marked as
        committing, refuses cleanup for `lease.COMMIT_SETTLE`, and the grace period is the second guard.)"""
        deadline = time.monotonic() + COMMIT_HOLD_SECONDS + 60
        while time.monotonic() < deadline:
            held = [r for r in self.bed.store.log()
                    if r.get("fault") == "delay" and r["key"].startswith(prefix)]
            if held and all(r.get("status") is not None for r in held):
                break
            time.sleep(0.5)
        time.sleep(3.0)  # the server's swap of the metadata pointer in its JDBC catalog, after the upload

    # ---- faults -------------------------------------------------------------------------------------------

    def _inject(self, fault: str, driver) -> str:
        bed = self.bed
        if fault == "worker killed":
            bed.kill_worker(1)
            return "worker 1 and its executor SIGKILLed"
        if fault == "worker link cut 30 s":
            bed.net.cut("w1")
            threading.Timer(CUT_SECONDS, bed.net.restore, args=("w1",)).start()
            return f"w1's link down for {CUT_SECONDS:g} s"
        if fault == "worker link slow, lossy":
            bed.net.shape("w1", rate=self.shape_rate)
            return f"w1's link: tbf {self.shape_rate}, 40 ms queue"
        if fault.startswith("driver"):
            driver.kill()
            return "the driver's host process group SIGKILLed"
        raise ValueError(fault)

    def _heal(self, fault: str) -> None:
        bed = self.bed
        if fault == "worker killed" and bed.workers[1].popen.poll() is not None:
            bed.start_worker(1)
            bed.wait_workers(2)
        if fault == "worker link cut 30 s":
            bed.net.restore("w1")
            bed.wait_workers(2)


def table_markdown(outcomes: list[Outcome]) -> str:
    lines = ["| fault | moment | outcome | faulted run (s) | time to recover (s) | note |",
             "|---|---|---|---:|---:|---|"]
    for o in outcomes:
        outcome = o.outcome if o.reached else f"{o.outcome} (moment not reached)"
        lines.append(f"| {o.fault} | {o.moment} | {outcome} | {o.run_seconds:.0f} | {o.recover_seconds:.0f} "
                     f"| {o.detail} |")
    return "\n".join(lines)
