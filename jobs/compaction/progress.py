"""Progress of the job's Spark work in the driver's log: while Spark runs, at most every `interval` seconds
(10 by default) a line per running stage (the job's part, the stage, tasks done of total, bytes read and
written, time elapsed, an estimate of the stage's time left), and a summary line per stage as it completes.

The lines go through the logger `lakesort.progress` to the driver's stderr, the way the job's other log lines
go: the Airflow task running spark-submit (SparkSubmitOperator) logs every line spark-submit prints, and
`lakesort compact` relays these from the job's output to its own stderr (`layout.compaction.pipeline.submit`),
unless `-q`, which also turns them off in the job (`INTERVAL_CONF` = 0).

Where the figures come from. pyspark's status tracker (`SparkContext.statusTracker()`, the same on 3.5 and
4.x) gives the jobs, their stage ids and each stage's task counts, but no bytes and no times; Python has no
SparkListener; the REST status API serves bytes only while the Spark UI is on (the benchmarks and tests turn
it off). So the stage ids come from the public tracker (job ids are consecutive: a job that ran between two
polls is still found), and each stage's figures from the driver's own status store
(`SparkContext.statusStore`, the store the UI and the REST API read, kept whether or not the UI is on) through
py4j: `lastStageAttempt(stageId)`'s `v1.StageData`, whose getters are the same in Spark 3.5 to 4.2. Should
that ever fail (a Spark that changed it), the lines keep the tracker's task counts, without bytes. A poll
costs a few py4j calls per stage seen, every `POLL_SECONDS`
(`tests/benchmarks/README.md` has the measured overhead).

The formatting is pure functions of one value, `StageProgress`; `Progress` is the daemon thread that polls.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

LOGGER = "lakesort.progress"  # `layout.compaction.pipeline.submit` relays the lines of this logger
INTERVAL_CONF = "spark.lakesort.progress.interval"  # seconds between progress lines; 0 turns progress off
DEFAULT_INTERVAL = 10.0
POLL_SECONDS = 5.0  # how often the thread looks: a summary comes within this (every 2 s: 1% of the SF1 job)

log = logging.getLogger(LOGGER)
# What the looks cost, logged at stop: in the driver's log only (`lakesort compact` relays
# `lakesort.progress`'s lines alone; tests/benchmarks/bench_progress.py reads it from the
# run's spark-submit.log).
cost_log = logging.getLogger(f"{LOGGER}.cost")

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
GONE = "gone"  # a stage that will never run or complete: no longer watched


@dataclass(frozen=True, slots=True)
class StageProgress:
    """One stage as one look at Spark's status saw it: what a progress or summary line says."""

    stage_id: int
    part: str  # the job's part running it (its Spark job group's description, `run._Clock`); "" when none
    name: str  # Spark's stage name: the action and its call site, e.g. "collect at run.py:345"
    tasks_done: int
    tasks: int
    elapsed: float  # seconds since the job's Spark work started
    stage_seconds: float  # seconds since the stage was submitted (to its completion, once done)
    bytes_read: int | None = None  # input and shuffle read; None: not known (the status store is unreachable)
    bytes_written: int | None = None  # output and shuffle write
    done: bool = False

    @property
    def seconds_left(self) -> float | None:
        return seconds_left(self.tasks_done, self.tasks, self.stage_seconds)


def seconds_left(done: int, total: int, seconds: float) -> float | None:
    """The stage's time left if its remaining tasks go at the pace of the done ones (tasks run in waves of
    about equal tasks in this job); None before any task is done."""
    if total <= 0 or done >= total:
        return 0.0
    if done <= 0 or seconds <= 0:  # no pace measured yet
        return None
    return seconds * (total - done) / done


def format_bytes(n: int | None) -> str:
    """Bytes in binary units with one decimal ("1.5 GiB"), whole bytes below 1 KiB; "?" when not known."""
    if n is None:
        return "?"
    value, unit = float(n), 0
    # By the value as shown: 1023.96 KiB is "1.0 MiB", never "1024.0 KiB".
    while float(f"{abs(value):.1f}") >= 1024 and unit < len(_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{n} B" if unit == 0 else f"{value:.1f} {_UNITS[unit]}"


def format_duration(seconds: float | None) -> str:
    """m:ss below an hour, h:mm:ss from there; "?" when not known."""
    if seconds is None:
        return "?"
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def short_name(name: str) -> str:
    """Spark's stage name where it points into the job, with the call site's directories dropped: "collect at
    /a/b/run.py:345" is "collect at run.py:345" (the job's files live in a temporary directory on a cluster);
    "" for a JVM call site ("parquet at NativeMethodAccessorImpl.java:0", adaptive execution's "$anonfun$...
    at CompletableFuture.java:1768"), which says nothing the part does not."""
    action, sep, site = name.partition(" at ")
    if not sep:
        return name
    return f"{action}{sep}{site.rsplit('/', 1)[-1]}" if ".py:" in site else ""


def _stage(p: StageProgress) -> str:
    part = f"[{p.part}] " if p.part else ""
    name = short_name(p.name)
    return f"{part}stage {p.stage_id}" + (f" ({name})" if name else "")


def progress_line(p: StageProgress) -> str:
    """One running stage: "[read, sample] stage 3 (collect at run.py:345): 12/40 tasks, read 1.2 GiB,
    wrote 300.0 MiB; 0:42 elapsed, about 0:31 left in this stage"."""
    left = p.seconds_left
    return (f"{_stage(p)}: {p.tasks_done}/{p.tasks} tasks, read {format_bytes(p.bytes_read)}, "
            f"wrote {format_bytes(p.bytes_written)}; {format_duration(p.elapsed)} elapsed, "
            + ("time left unknown" if left is None else f"about {format_duration(left)} left in this stage"))


def summary_line(p: StageProgress) -> str:
    """One completed stage: "[read, sample] stage 3 (collect at run.py:345) done: 40 tasks in 0:12, read
    1.2 GiB, wrote 300.0 MiB; 0:54 elapsed"."""
    return (f"{_stage(p)} done: {p.tasks} task{'' if p.tasks == 1 else 's'} in "
            f"{format_duration(p.stage_seconds)}, read {format_bytes(p.bytes_read)}, wrote "
            f"{format_bytes(p.bytes_written)}; {format_duration(p.elapsed)} elapsed")


class _Status:
    """What Spark says about its jobs and stages: ids from the public status tracker, a stage's figures from
    the driver's status store (None once it cannot be read: task counts from the tracker alone)."""

    def __init__(self, sc: SparkContext) -> None:
        self.tracker = sc.statusTracker()
        try:
            self.store: Any = sc._jsc.sc().statusStore()
        # A Spark without it (py4j error): the lines go on without bytes.
        except Exception as exc:  # noqa: BLE001
            log.debug("no status store (%s): progress without bytes", exc)
            self.store = None
        self.next_job = 0
        self.first_seen: dict[int, float] = {}
        self.new_stage_ids()  # the jobs before this one started (a session used before) are not its work

    def new_stage_ids(self) -> list[int]:
        """The stages of the jobs submitted since the last call: job ids are consecutive, so a job that
        started and ended between two calls is found too
        (a job not yet known to the tracker ends the scan)."""
        found: list[int] = []
        active = self.tracker.getActiveJobsIds()
        top = max(active, default=-1)
        while True:
            info = self.tracker.getJobInfo(self.next_job)
            if info is None and self.next_job > top:
                break
            if info is not None:
                found.extend(int(s) for s in info.stageIds)
            self.next_job += 1
        return found

    def stage(self, stage_id: int, now: float, started: float) -> StageProgress | str | None:
        """The stage as its last attempt stands; None while it is pending, GONE once it will never run
        (skipped, failed, or no longer in the store)."""
        if self.store is not None:
            try:
                return self._from_store(stage_id, now, started)
            # py4j wraps the JVM's; an unknown stage: NoSuchElementException.
            except Exception as exc:  # noqa: BLE001
                if "NoSuchElementException" in str(exc):
                    return GONE
                log.debug("status store unreadable (%s): progress without bytes", exc)
                self.store = None
        info = self.tracker.getStageInfo(stage_id)
        if info is None or info.numActiveTasks == 0 and info.numCompletedTasks == 0:
            return None
        first = self.first_seen.setdefault(stage_id, now)
        return StageProgress(stage_id=stage_id, part="", name=info.name, tasks_done=info.numCompletedTasks,
                             tasks=info.numTasks, elapsed=now - started, stage_seconds=now - first,
                             done=info.numCompletedTasks >= info.numTasks and info.numActiveTasks == 0)

    def _from_store(self, stage_id: int, now: float, started: float) -> StageProgress | str | None:
        data = self.store.lastStageAttempt(stage_id)
        status = data.status().toString()
        if status == "PENDING":
            return None
        # SKIPPED (its shuffle output was there), FAILED (Spark says why)
        if status not in ("ACTIVE", "COMPLETE"):
            return GONE
        submitted = data.submissionTime()
        if not submitted.isDefined():
            return None
        completed = data.completionTime()
        # The store's times are the driver's wall clock, in ms.
        start_ms = submitted.get().getTime()
        end_ms = completed.get().getTime() if completed.isDefined() else time.time() * 1000
        description = data.description()
        return StageProgress(
            stage_id=stage_id, part=description.get() if description.isDefined() else "", name=data.name(),
            tasks_done=data.numCompleteTasks(), tasks=data.numTasks(),
            elapsed=now - started,
            stage_seconds=max(0.0, (end_ms - start_ms) / 1000),
            bytes_read=data.inputBytes() + data.shuffleReadBytes(),
            bytes_written=data.outputBytes() + data.shuffleWriteBytes(),
            done=status == "COMPLETE")


class Progress:
    """The daemon thread that looks at Spark's status every `poll` seconds, logs a summary line per completed
    stage and, at most every `interval` seconds, a progress line per running stage. `stop` looks once more, so
    every stage that completed is summarized."""

    def __init__(self, sc: SparkContext, *, interval: float = DEFAULT_INTERVAL, poll: float = POLL_SECONDS,
                 emit: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.status = _Status(sc)
        self.interval, self.poll, self.clock = interval, min(poll, interval), clock
        self.emit = emit or (lambda line: log.info("%s", line))
        self.started = self.last_line = clock()
        self.watched: dict[int, None] = {}  # stages not yet summarized, in order of submission
        self.lines = 0  # lines emitted: progress and summaries
        # looks at Spark's status, and the seconds they took (their cost's bound)
        self.looks, self.busy = 0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lakesort-progress", daemon=True)

    def start(self) -> Progress:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=max(5.0, 2 * self.poll))
        self._look(final=True)
        cost_log.info("%d looks at Spark's status in %.3f s, %d lines", self.looks, self.busy, self.lines)

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self._look()
            except Exception as exc:  # noqa: BLE001 - progress is a courtesy: it never fails the job
                log.debug("progress: %s", exc)

    def _look(self, *, final: bool = False) -> None:
        # Wall time, which bounds what a look costs the driver and its JVM both (py4j calls are synchronous).
        started = time.perf_counter()
        try:
            self._look_once(final=final)
        finally:
            self.looks += 1
            self.busy += time.perf_counter() - started

    def _look_once(self, *, final: bool) -> None:
        now = self.clock()
        for stage_id in self.status.new_stage_ids():
            self.watched.setdefault(stage_id, None)
        due = not final and now - self.last_line >= self.interval
        running: list[StageProgress] = []
        for stage_id in list(self.watched):
            seen = self.status.stage(stage_id, now, self.started)
            if seen == GONE:
                del self.watched[stage_id]
            if not isinstance(seen, StageProgress):
                continue
            if seen.done:
                del self.watched[stage_id]
                self._emit(summary_line(seen))
            elif due:
                running.append(seen)
        for seen in running:
            self._emit(progress_line(seen))
        if running:
            self.last_line = now

    def _emit(self, line: str) -> None:
        self.lines += 1
        self.emit(line)


def interval_of(spark: SparkSession) -> float:
    """Seconds between progress lines from the job's conf (`INTERVAL_CONF`); 0
    (or less) turns progress off."""
    value = spark.conf.get(INTERVAL_CONF, None)
    return DEFAULT_INTERVAL if value in (None, "") else float(value)


@contextmanager
def reporting(spark: SparkSession) -> Iterator[Progress | None]:
    """Progress lines while the body runs Spark's work (none when `INTERVAL_CONF` is 0)."""
    interval = interval_of(spark)
    if interval <= 0:
        yield None
        return
    progress = Progress(spark.sparkContext, interval=interval).start()
    try:
        yield progress
    finally:
        progress.stop()
