"""The test bed of faults across hosts (issue #40): a Spark standalone master, two workers and the lakesort
driver, each on a host of its own (`testbed/netns.py`: network namespaces on a bridge), with the warehouse on
the object-store bed's S3 server behind its front and Iceberg's REST catalog (`tests/object_store.py`), both
reached from the hosts through `testbed/netns_relay.py` on the bridge's address.

The driver is `lakesort compact` itself, started on its host (`start_driver`), configured as a user of the
REST catalog is: the catalog URI, the S3 endpoint and region; the S3 keys come from the catalog. The Spark is
lakesort's own (pyspark's `bin/spark-class`, as tests/compaction/test_standalone_cluster.py starts it);
workers have one core and 1.2 GiB each, executors 1 GiB. The driver's Spark UI is on, so the harness can see
which part of the job runs (`job_status`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import object_store as store_bed
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "testbed"))
from netns import Network

NAMESPACE = "hosts"
UI_PORT = 4040
EXECUTOR_CONF = {
    "spark.executor.memory": "1g", "spark.executor.cores": "1", "spark.cores.max": "2",
    "spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "true",
    "spark.ui.port": str(UI_PORT), "spark.ui.showConsoleProgress": "false",
}


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class Proc:
    """A process started on a host in a session of its own: killing its group kills what it started."""

    popen: subprocess.Popen
    log: Path

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        self.kill(signal.SIGTERM)
        try:
            self.popen.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()
            self.popen.wait(10)
        try:  # what the session started and outlived it (an executor, a Python worker)
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@dataclass
class HostsBed:
    workdir: Path
    net: Network = field(default_factory=Network)
    store: store_bed.ObjectStore | None = None
    catalog: store_bed.RestCatalog | None = None
    relay: subprocess.Popen | None = None
    s3_endpoint: str = ""  # the front, as the hosts reach it
    catalog_uri: str = ""  # the REST catalog, as the hosts reach it
    master: Proc | None = None
    workers: dict[int, Proc] = field(default_factory=dict)
    started: list[Proc] = field(default_factory=list)

    # ---- start and stop ----------------------------------------------------------------------------------

    def start(self) -> HostsBed:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.net.up()
        for name in ("master", "w1", "w2", "driver"):
            self.net.add(name)
        self.store = store_bed.start_object_store(self.workdir)
        self.catalog = store_bed.start_rest_catalog(self.store, self.workdir)
        front_port = int(self.store.endpoint.rsplit(":", 1)[1])
        rest_port = int(self.catalog.uri.rsplit(":", 1)[1])
        log = self.workdir / "relay.log"
        self.relay = subprocess.Popen([sys.executable, str(REPO / "testbed" / "netns_relay.py"),
                                       self.net.gateway, str(front_port), str(rest_port)],
                                      stdout=log.open("w"), stderr=subprocess.STDOUT)
        ports = self._wait_lines(log, "relay ", 2)
        self.s3_endpoint = f"http://{ports[0]}"
        self.catalog_uri = f"http://{ports[1]}"
        self._start_master()
        for i in (1, 2):
            self.start_worker(i)
        self.wait_workers(2)
        return self

    def stop(self) -> None:
        """Everything, whatever state a test left: never raises."""
        for proc in [*self.started, *self.workers.values(), *([self.master] if self.master else [])]:
            with contextlib.suppress(Exception):  # teardown goes on
                proc.stop()
        self.net.teardown()
        for part in (self.relay,):
            if part is not None and part.poll() is None:
                part.kill()
                part.wait(10)
        for part in (self.catalog, self.store):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.stop()

    @staticmethod
    def _wait_lines(log: Path, marker: str, n: int, timeout: float = 30) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = [ln for ln in log.read_text().splitlines() if ln.startswith(marker)]
            if len(lines) >= n:
                return [ln.split()[1] for ln in lines]
            time.sleep(0.1)
        raise RuntimeError(f"no {n} {marker!r} lines in {log}: {log.read_text()[-2000:]}")

    # ---- Spark ------------------------------------------------------------------------------------------

    @property
    def master_url(self) -> str:
        return f"spark://{self.net.hosts['master'].address}:7077"

    def _spark_env(self, host: str) -> dict[str, str]:
        logs = self.workdir / "spark"
        logs.mkdir(exist_ok=True)
        return dict(os.environ, SPARK_HOME=str(_spark_home()), SPARK_LOCAL_IP=self.net.hosts[host].address,
                    SPARK_LOG_DIR=str(logs), PYSPARK_PYTHON=sys.executable,
                    SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")

    def _spawn(self, host: str, argv: list[str], log: Path, env: dict[str, str]) -> Proc:
        with open(log, "a") as out:
            popen = subprocess.Popen(self.net.command(host, argv), stdout=out, stderr=subprocess.STDOUT,
                                     env=env, cwd=self.workdir, start_new_session=True)
        return Proc(popen, log)

    def _start_master(self) -> None:
        spark_class = str(_spark_home() / "bin" / "spark-class")
        address = self.net.hosts["master"].address
        self.master = self._spawn("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host",
                                             address, "--port", "7077", "--webui-port", "8080"],
                                  self.workdir / "master.log", self._spark_env("master"))

    def start_worker(self, i: int) -> None:
        spark_class = str(_spark_home() / "bin" / "spark-class")
        host = f"w{i}"
        self.workers[i] = self._spawn(
            host, [spark_class, "org.apache.spark.deploy.worker.Worker", self.master_url, "--host",
                   self.net.hosts[host].address, "--cores", "1", "--memory", "1200m", "--webui-port", "8081",
                   "--work-dir", str(self.workdir / f"work-{host}")],
            self.workdir / f"worker-{i}.log", self._spark_env(host))

    def kill_worker(self, i: int) -> None:
        """The worker and its executor (a child in its session), at once: the host lost."""
        self.workers[i].kill()
        self.workers[i].popen.wait(10)

    def master_state(self) -> dict:
        url = f"http://{self.net.hosts['master'].address}:8080/json/"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return json.loads(resp.read())

    def wait_workers(self, n: int, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if sum(w["state"] == "ALIVE" for w in self.master_state()["workers"]) >= n:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{n} workers did not "
                           f"register:\n{(self.workdir / 'master.log').read_text()[-2000:]}")

    # ---- the catalog, the table, the driver ---------------------------------------------------------------

    def catalog_properties(self, *, on_host: bool) -> dict[str, str]:
        """pyiceberg's configuration of the REST catalog: from a host (through the relay) or from here."""
        if on_host:
            return {"type": "rest", "uri": self.catalog_uri, "s3.endpoint": self.s3_endpoint,
                    "s3.region": store_bed.REGION}
        return self.catalog.properties()

    def load_catalog(self):
        from pyiceberg.catalog import load_catalog

        return load_catalog(store_bed.CATALOG, **self.catalog_properties(on_host=False))

    def create_lineitem(self, name: str, source: Path, batches: int) -> int:
        """`name` from TPC-H lineitem (a Parquet file), unpartitioned,
        appended in `batches` shuffled batches."""
        import numpy as np

        data = pq.read_table(source)
        data = data.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_string_view(f.type) else f
                                    for f in data.schema]))
        catalog = self.load_catalog()
        catalog.create_namespace_if_not_exists(name.rpartition(".")[0])
        table = catalog.create_table(name, schema=data.schema)
        data = data.take(pa.array(np.random.default_rng(7).permutation(data.num_rows))).cast(
            table.schema().as_arrow())
        bounds = np.linspace(0, data.num_rows, batches + 1).astype(int)
        for lo, hi in itertools.pairwise(bounds):
            table.append(data.slice(lo, hi - lo))
        return data.num_rows

    def driver_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYICEBERG_", "AWS_", "LAKESORT_", "SPARK_", "PYSPARK_"))}
        prefix = f"PYICEBERG_CATALOG__{store_bed.CATALOG.upper()}__"
        for key, value in self.catalog_properties(on_host=True).items():
            env[prefix + key.upper().replace(".", "__").replace("-", "_")] = value
        address = self.net.hosts["driver"].address
        conf = {**EXECUTOR_CONF, "spark.jars": store_bed.s3a_jars(), "spark.driver.host": address,
                "spark.driver.bindAddress": address}
        env.update({
            "PYICEBERG_DEFAULT_CATALOG": store_bed.CATALOG, "HOME": str(self.workdir),
            "AWS_ENDPOINT_URL": self.s3_endpoint, "AWS_EC2_METADATA_DISABLED": "true",
            "LAKESORT_WORK_DIR": str(self.workdir / "lakesort-work"),
            "LAKESORT_TABLES_DIR": str(self.workdir / "tables"),
            "LAKESORT_REPORT_DIR": str(self.workdir / "reports"),
            "LAKESORT_SPARK_CONF": json.dumps(conf), "SPARK_LOCAL_IP": address,
        })
        return env

    def lakesort(self, args: list[str], log: Path) -> Proc:
        """`lakesort ARGS` on the driver's host, in a session of its own."""
        (self.workdir / "tables").mkdir(exist_ok=True)
        proc = self._spawn("driver", [sys.executable, "-m", "layout.cli", *args], log, self.driver_env())
        self.started.append(proc)
        return proc

    def job_status(self) -> list[dict]:
        """The driver's running Spark jobs with their active stages: [{"group", "stages": [{...}]}]; [] when
        the driver's UI is not up (no job yet, or done)."""
        base = f"http://{self.net.hosts['driver'].address}:{UI_PORT}/api/v1/applications"
        try:
            with urllib.request.urlopen(base, timeout=2) as resp:
                apps = json.loads(resp.read())
            if not apps:
                return []
            app = f"{base}/{apps[0]['id']}"
            with urllib.request.urlopen(f"{app}/jobs?status=running", timeout=2) as resp:
                jobs = json.loads(resp.read())
            with urllib.request.urlopen(f"{app}/stages?status=active", timeout=2) as resp:
                stages = {s["stageId"]: s for s in json.loads(resp.read())}
        except (OSError, ValueError):
            return []
        return [{"group": job.get("jobGroup", ""),
                 "stages": [stages[s] for s in job["stageIds"] if s in stages]}
                for job in jobs]
