"""The job's progress lines (jobs/compaction/progress.py): the formatting as pure functions (byte and duration
units, the time left, Spark's stage names), the thread's rules against a scripted Spark status (at most a
progress line per interval, a summary per completed stage, a job that ran between two looks found, skipped
stages dropped, the last summaries logged at stop), and the job's conf turning it off. The real job's lines,
bytes from the driver's status store with the UI off: tests/cli/test_compact_progress.py."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lossless import job_part

progress = job_part("progress")
StageProgress = progress.StageProgress
# Pure functions, timed by whatever else the (shared, 2-core) machine does: no deadline.
quick = settings(max_examples=200, deadline=None)


@quick
@given(st.integers(min_value=0, max_value=1 << 62))
@example(1125844931261236)  # 1023.96 TiB: once shown as "1024.0 TiB"
def test_bytes_are_in_binary_units_within_a_twentieth(n):
    text = progress.format_bytes(n)
    if n < 1024:
        assert text == f"{n} B"
        return
    value, unit = text.split()
    power = ("KiB", "MiB", "GiB", "TiB", "PiB").index(unit) + 1
    assert 1.0 <= float(value) < 1024.0 or unit == "PiB"
    assert abs(float(value) * 1024**power - n) <= 0.05 * n


@quick
@given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_durations_read_back_as_the_rounded_seconds(seconds):
    fields = [int(f) for f in progress.format_duration(seconds).split(":")]
    assert all(f < 60 for f in fields[1:])
    total = fields[0] * 60 + fields[1] if len(fields) == 2 else fields[0] * 3600 + fields[1] * 60 + fields[2]
    assert total == round(seconds) and (len(fields) == 3) == (round(seconds) >= 3600)


@quick
@given(st.integers(min_value=1, max_value=10_000), st.integers(min_value=1, max_value=10_000),
       st.floats(min_value=0.001, max_value=1e5))
def test_time_left_goes_at_the_pace_of_the_done_tasks(done, total, seconds):
    left = progress.seconds_left(done, total, seconds)
    if done >= total:
        assert left == 0.0
    else:
        assert left == pytest.approx(seconds / done * (total - done))


def test_unknowns_are_said_so():
    assert progress.seconds_left(0, 10, 5.0) is None
    assert progress.format_bytes(None) == progress.format_duration(None) == "?"
    assert (progress.short_name("collect at /tmp/spark-1/jobs/compaction/run.py:345")
            == "collect at run.py:345")
    assert progress.short_name("Exchange") == "Exchange"
    assert progress.short_name("$anonfun$withThreadLocalCaptured$1 at CompletableFuture.java:1768") == ""


def test_a_progress_line_and_a_summary_line():
    running = StageProgress(stage_id=3, part="read, sample", name="collect at /x/run.py:345", tasks_done=12,
                            tasks=40, elapsed=42.4, stage_seconds=13.0, bytes_read=5 << 29,
                            bytes_written=300 << 20)
    assert progress.progress_line(running) == (
        "[read, sample] stage 3 (collect at run.py:345): 12/40 tasks, read 2.5 GiB, wrote 300.0 MiB; "
        "0:42 elapsed, about 0:30 left in this stage")
    done = StageProgress(stage_id=4, part="", name="collect at run.py:9", tasks_done=1,
                         tasks=1, elapsed=3725, stage_seconds=0.4, done=True)
    assert progress.summary_line(done) == (
        "stage 4 (collect at run.py:9) done: 1 task in 0:00, read ?, wrote ?; "
        "1:02:05 elapsed")


# ---- the thread, against a scripted Spark status ----------------------------------------------------------


class _Option:
    def __init__(self, value):
        self.value = value

    def isDefined(self):  # Scala's Option and v1.StageData, as py4j shows them
        return self.value is not None

    def get(self):
        return self.value


class _Stage:
    """A stage as py4j shows the status store's `v1.StageData`."""

    def __init__(self, stage_id, status, done, tasks):
        self.stage_id, self.state, self.done, self.tasks = stage_id, status, done, tasks
        self.submitted = time.time() * 1000 - 4000  # 4 s ago, by the driver's wall clock

    def status(self):
        return SimpleNamespace(toString=lambda: self.state)

    def submissionTime(self):
        return _Option(SimpleNamespace(getTime=lambda: self.submitted))

    def completionTime(self):
        return _Option(SimpleNamespace(getTime=lambda: self.submitted + 4000) if self.state == "COMPLETE"
                       else None)

    def description(self):
        return _Option("write")

    def name(self):
        return f"save at run.py:{self.stage_id}"

    def numCompleteTasks(self):
        return self.done

    def numTasks(self):
        return self.tasks

    def inputBytes(self):
        return 1 << 20

    def shuffleReadBytes(self):
        return 1 << 20

    def outputBytes(self):
        return 0

    def shuffleWriteBytes(self):
        return 3 << 20


class _Spark:
    """The jobs and stages a SparkContext's tracker and status store report, changed by the test."""

    def __init__(self):
        self.jobs: dict[int, list[int]] = {}
        self.active: list[int] = []
        self.stages: dict[int, _Stage] = {}
        self._jsc = SimpleNamespace(sc=lambda: SimpleNamespace(statusStore=lambda: self))

    def statusTracker(self):
        return SimpleNamespace(
            getActiveJobsIds=lambda: list(self.active),
            getJobInfo=lambda j: SimpleNamespace(stageIds=self.jobs[j]) if j in self.jobs else None,
        )

    def lastStageAttempt(self, stage_id):
        if stage_id not in self.stages:
            raise RuntimeError("py4j: java.util.NoSuchElementException: stage")
        return self.stages[stage_id]


def test_the_thread_logs_a_line_per_interval_and_a_summary_per_stage():
    sc, now, lines = _Spark(), [0.0], []
    sc.jobs[0] = [0]  # a job before the thread started: not this work's
    sc.stages[0] = _Stage(0, "COMPLETE", 1, 1)
    watcher = progress.Progress(sc, interval=10, poll=2, emit=lines.append, clock=lambda: now[0])
    sc.jobs[1], sc.active = [1, 2, 3], [1]
    sc.stages[1] = _Stage(1, "ACTIVE", 2, 8)
    sc.stages[2] = _Stage(2, "SKIPPED", 0, 8)
    sc.stages[3] = _Stage(3, "PENDING", 0, 2)
    for t in (2, 4, 6, 8):  # within the first interval: nothing to say yet
        now[0] = t
        watcher._look()
    assert lines == []
    now[0] = 10
    watcher._look()
    assert lines == [("[write] stage 1 (save at run.py:1): 2/8 tasks, read 2.0 MiB, wrote 3.0 MiB; 0:10 "
                     "elapsed, about 0:12 left in this stage")]
    assert 2 not in watcher.watched  # skipped: never looked at again
    sc.stages[1] = _Stage(1, "COMPLETE", 8, 8)
    sc.stages[3] = _Stage(3, "ACTIVE", 0, 2)
    sc.jobs[2], sc.active = [4], []  # a job that ran between two looks
    sc.stages[4] = _Stage(4, "COMPLETE", 2, 2)
    now[0] = 12
    watcher._look()  # summaries come as stages complete; the next progress line only 10 s after the last
    assert lines[1:] == [("[write] stage 1 (save at run.py:1) done: 8 tasks in 0:04, read 2.0 MiB, wrote 3.0 "
                         "MiB; 0:12 elapsed"),
                         ("[write] stage 4 (save at run.py:4) done: 2 tasks in 0:04, read 2.0 MiB, wrote 3.0 "
                         "MiB; 0:12 elapsed")]
    sc.stages[3] = _Stage(3, "COMPLETE", 2, 2)
    now[0] = 13
    watcher.stop()  # the thread never started: stop still looks once more
    assert lines[-1].startswith("[write] stage 3 (save at run.py:3) done: 2 tasks")
    assert watcher.lines == len(lines) == 4 and not watcher.watched


def test_without_the_status_store_the_lines_have_task_counts_only():
    sc, lines = _Spark(), []
    sc._jsc = None  # a Spark whose driver cannot be reached this way
    info = SimpleNamespace(name="collect at run.py:9", numTasks=4, numCompletedTasks=1, numActiveTasks=2)
    tracker = sc.statusTracker()
    tracker.getStageInfo = lambda stage_id: info
    sc.statusTracker = lambda: tracker
    watcher = progress.Progress(sc, interval=1, poll=1, emit=lines.append, clock=lambda: 5.0)
    sc.jobs[0] = [7]
    watcher.started = 0.0
    watcher.last_line = 0.0
    watcher._look()
    assert lines == [("stage 7 (collect at run.py:9): 1/4 tasks, read ?, wrote ?; "
                      "0:05 elapsed, time left unknown")]


# ---- on the session's real Spark (the real job's lines: tests/cli/test_compact_progress.py) ----------------


@pytest.mark.spark
def test_a_quiet_job_logs_no_progress(spark):
    """`lakesort compact -q` passes the conf that turns progress off: no thread at all."""
    spark.conf.set(progress.INTERVAL_CONF, "0")
    try:
        with progress.reporting(spark) as watcher:
            assert watcher is None
    finally:
        spark.conf.unset(progress.INTERVAL_CONF)
    with progress.reporting(spark) as watcher:
        assert watcher.interval == progress.DEFAULT_INTERVAL
