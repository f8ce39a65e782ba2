"""The compaction job on a real Spark standalone cluster: a master and two workers started on 127.0.0.1 from
pyspark's own `bin/spark-class`, the real `spark-submit` to it, and the event log showing that the tasks of
one Spark job ran on both workers. (docker/README.md and tests/test_docker.py point here: the distributed path
without Docker.)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from demo_tables import MONTHS, SPARK_CONF, demo_spec, sorted_rows, staged_files, state

from layout.catalog import load_table
from layout.compaction.pipeline.driver import compact
from layout.io import resolve
from layout.manifest import StagedManifest

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def standalone_cluster(tmp_path):
    """A Spark master and two workers (1 core, 1 GiB each) on 127.0.0.1, from pyspark's own
    `bin/spark-class`."""
    import pyspark

    spark_home = Path(pyspark.__file__).resolve().parent
    spark_class = spark_home / "bin" / "spark-class"
    assert spark_class.is_file(), f"pyspark ships no bin/spark-class at {spark_home}"
    port, master_ui, worker_ui = _free_port(), _free_port(), _free_port()
    logs = tmp_path / "cluster"
    logs.mkdir()
    env = dict(os.environ, SPARK_HOME=str(spark_home), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(logs),
               SPARK_WORKER_DIR=str(logs / "work"), PYSPARK_PYTHON=sys.executable,
               # The master's REST server has a fixed port (6066): off, so parallel runs cannot collide.
               SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
    url = f"spark://127.0.0.1:{port}"
    procs = []
    try:
        master_log = logs / "master.log"
        with open(master_log, "w") as out:
            procs.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(master_ui)],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        for i, ui in enumerate((worker_ui, _free_port())):
            with open(logs / f"worker-{i}.log", "w") as out:
                procs.append(subprocess.Popen(
                    [str(spark_class), "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                     "--cores", "1", "--memory", "1g", "--webui-port", str(ui), "--work-dir",
                     str(logs / f"work-{i}")],
                    stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        deadline = time.monotonic() + 90
        while master_log.read_text(errors="replace").count("Registering worker") < 2:
            dead = [p for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                tail = master_log.read_text(errors="replace")[-2000:]
                pytest.fail("the standalone cluster did not come up "
                            f"({'a process exited' if dead else 'timeout'}):\n{tail}")
            time.sleep(0.5)
        yield url
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


def _executors_per_job(event_dir: Path) -> dict[int, set[str]]:
    """From the application's Spark event log: the executor ids that ran tasks of each job."""
    stage_job: dict[int, int] = {}
    executors: dict[int, set[str]] = {}
    for log_file in (p for p in event_dir.rglob("*") if p.is_file()):
        for line in log_file.read_text(errors="replace").splitlines():
            event = json.loads(line)
            if event["Event"] == "SparkListenerJobStart":
                stage_job.update({stage: event["Job ID"] for stage in event["Stage IDs"]})
            elif event["Event"] == "SparkListenerTaskEnd":
                job = stage_job.get(event["Stage ID"])
                executors.setdefault(job, set()).add(event["Task Info"]["Executor ID"])
    return executors


def test_compaction_on_a_standalone_cluster(demo_home, standalone_cluster, tmp_path):
    """The job on a standalone cluster of two workers: an executor on each, and the tasks of one Spark job
    (reading the inputs, the shuffle and sort, the write, the read-back) spread over both."""
    table = load_table("demo.lineitem")
    before = state(table)
    events = tmp_path / "events"
    events.mkdir()
    result = compact("demo.lineitem", spec=demo_spec(), partitions=MONTHS, master=standalone_cluster,
                     spark_conf={**SPARK_CONF, "spark.executor.memory": "512m", "spark.executor.cores": "1",
                                 "spark.cores.max": "2", "spark.eventLog.enabled": "true",
                                 "spark.eventLog.dir": events.as_uri(), "spark.eventLog.compress": "false",
                                 "spark.eventLog.rolling.enabled": "false"},
                     work_dir=demo_home / "work")
    manifest = StagedManifest.from_json((demo_home / "work" / "manifest-0.json").read_text())
    assert manifest.spark_master == standalone_cluster
    table = table.refresh()
    assert result.snapshot_id == table.current_snapshot().snapshot_id != before.snapshot_id
    assert result.files_removed == 6
    assert sorted_rows(table).equals(before.rows)
    assert (staged_files(table)
            and all(p.startswith(resolve(table.location())[1]) for p in staged_files(table)))
    per_job = _executors_per_job(events)
    assert set().union(*per_job.values()) - {"driver"} == {"0", "1"}, per_job
    assert any(len(ids) == 2 for ids in per_job.values()), f"no job ran tasks on both workers: {per_job}"
