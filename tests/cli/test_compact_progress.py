"""`lakesort compact` shows the job's progress lines
(jobs/compaction/progress.py) on its stderr, and not with -q.

spark-submit's output goes to the run's spark-submit.log as it comes, and the job's progress lines (logger
`lakesort.progress`) also to the command's log, which prints on stderr unless -q; with -q the job is told to
log none (`PROGRESS_CONF` = 0). The relaying is tested with a stand-in for spark-submit; the last test runs
the real `lakesort compact` (a process of its own, the real spark-submit) on a small table.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import textwrap

import pytest

import layout.cli.compact
from layout.cli import EXIT_FAILURE, main
from layout.compaction.pipeline import submit
from layout.upkeep.lease import TableBusy

PROGRESS = ("2026-11-27 20:00:01,000 INFO lakesort.progress: [write] stage 4 (save at "
            "run.py:4): 1/2 tasks, ...")


def test_progress_lines_are_relayed_and_every_line_is_kept_in_the_log(tmp_path, caplog):
    script = textwrap.dedent(f"""
        import sys
        sys.stdout.write("26/11/27 20:00:00 INFO SparkContext: Running Spark version 4.2.0\\n")
        sys.stderr.write({PROGRESS!r} + "\\n")
        sys.stdout.write("no newline at the end")
    """)
    log = tmp_path / "spark-submit.log"
    with caplog.at_level(logging.INFO, logger=submit.PROGRESS_LOGGER), open(log, "wb") as out:
        assert submit._run_relaying([sys.executable, "-c", script], out, env=os.environ) == 0
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("lakesort.progress", "[write] stage 4 (save at run.py:4): 1/2 tasks, ...")]
    kept = log.read_text()
    assert "Running Spark version" in kept and PROGRESS in kept and kept.endswith("no newline at the end")
    assert submit.progress_message(b"INFO lakesort.compact: wrote manifest") is None


def test_the_job_and_the_command_name_the_same_logger_and_conf():
    # The job's package, loaded as spark-submit runs it (pyspark imported): for this test only.
    from lossless import job_part

    progress = job_part("progress")
    assert (progress.LOGGER, progress.INTERVAL_CONF) == (submit.PROGRESS_LOGGER, submit.PROGRESS_CONF)


@pytest.mark.parametrize(("argv", "conf"), [
    (["compact", "t.events"], None),
    (["compact", "t.events", "-q"], {submit.PROGRESS_CONF: "0"}),
    (["-q", "compact", "t.events"], {submit.PROGRESS_CONF: "0"}),
])
def test_quiet_turns_progress_off_in_the_job(argv, conf, registry, tmp_path, monkeypatch):
    seen = {}

    def compact(table, **kwargs):
        seen.update(kwargs)
        raise TableBusy("stand-in: the Spark half is not run here", table=table, path=tmp_path)

    monkeypatch.setattr(layout.cli.compact, "compact", compact)
    assert main(argv) == EXIT_FAILURE
    assert seen["spark_conf"] == conf


@pytest.mark.spark
def test_real_compaction_prints_progress_on_stderr(events, monkeypatch):
    """Through `python -m layout.cli` and spark-submit, as a user runs it (a line at most every second here; a
    summary line per stage in any case). With -q the job is told to log none (above), and the job honours it
    (tests/jobs/test_progress.py): a second spark-submit here would cost half a minute more."""
    monkeypatch.setenv("LAKESORT_SPARK_CONF", json.dumps({
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g",
        submit.PROGRESS_CONF: "1"}))
    monkeypatch.setenv("LAKESORT_SPARK_MASTER", "local[2]")
    done = subprocess.run([sys.executable, "-m", "layout.cli", "compact", "t.events", "--no-record"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    relayed = [ln.split(" INFO lakesort.progress: ", 1)[1] for ln in done.stderr.splitlines()
               if " INFO lakesort.progress: " in ln]
    assert any(" done: " in ln for ln in relayed), done.stderr[-3000:]
    assert all(" tasks, read " in ln or " done: " in ln for ln in relayed), relayed
    assert all(ln.startswith("[") and "elapsed" in ln and "read ?" not in ln for ln in relayed), relayed
    # Bytes from the driver's status store although the UI is off: the shuffle's, at least.
    assert any(re.search(r"(read|wrote) [1-9]", ln) for ln in relayed), relayed
    assert "SparkContext" not in done.stderr  # the job's other lines stay in its spark-submit.log
