"""The object-store test bed: an S3-compatible server behind a counting, credential-checking, fault-injecting
proxy, and Iceberg's REST catalog server over it, all on 127.0.0.1 on free ports.

- **S3**: moto's server (PyPI, `moto[s3]`) in a process of its own, behind `testbed/s3_front.py`. The front
  accepts only the catalog's access key, so every request lakesort makes must carry the credentials the REST
  catalog vended for the table; its request log counts GET/PUT/POST/LIST/DELETE/HEAD with bytes, and it
  injects 503 SlowDown, latency and connection resets on request (`ObjectStore.inject`).
- **REST catalog**: Iceberg's own RESTCatalogServer (testbed/rest_catalog/RestCatalog.java, jars from
  testbed/maven/rest-catalog.pom.xml through `make testbed`) over a JdbcCatalog on SQLite, with S3FileIO on
  the front and `include-credentials` on: each load-table response carries the table's S3 credentials.
  lakesort itself is configured with the catalog's URI, the S3 endpoint and region, and no keys.

The credentials are made up per session and temporary in form (a session token with the keys, as STS vends
them); `ObjectStore.secret_key` and `session_token` are what a test searches the outputs for.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTBED = REPO / ".testbed"
REST_JARS = TESTBED / "rest-catalog"
S3A_JARS = TESTBED / "s3a"
FRONT = REPO / "testbed" / "s3_front.py"
REST_LAUNCHER = REPO / "testbed" / "rest_catalog" / "RestCatalog.java"
BUCKET = "warehouse"
REGION = "us-east-1"
CATALOG = "lakesort"


def missing() -> str | None:
    """Why the object-store bed cannot start here, or None."""
    if not any(REST_JARS.glob("iceberg-open-api-*.jar")):
        return "Iceberg's REST catalog server is not in .testbed/rest-catalog: run `make testbed`"
    if not any(S3A_JARS.glob("hadoop-aws-*.jar")):
        return "the S3A connector is not in .testbed/s3a: run `make testbed`"
    if shutil.which("java") is None:
        return "no java on PATH"
    return None


def s3a_jars() -> str:
    """The `spark.jars` value that gives lakesort's Spark the S3A connector."""
    return ",".join(str(p) for p in sorted(S3A_JARS.glob("*.jar")))


def _start(cmd: list[str], log: Path, marker: str, env: dict[str, str] | None = None,
           timeout: float = 60.0) -> tuple[subprocess.Popen, int]:
    """Start a server, wait for the line that names its port, return (process, port)."""
    out = log.open("w")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if marker in line:
                return proc, int(line.rsplit(":", 1)[1])
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{cmd[0]} did not start (no {marker!r} in {log.name}):\n{log.read_text()[-3000:]}")


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ObjectStore:
    """The S3 server behind its front; `endpoint` is the front's."""

    endpoint: str
    access_key: str
    secret_key: str
    session_token: str
    processes: list[subprocess.Popen] = field(default_factory=list)

    def _call(self, path: str, body: object | None = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.endpoint}/_front/{path}", data=data,
                                         method="POST" if data is not None else "GET")
        with urllib.request.urlopen(request, timeout=30) as resp:
            return json.loads(resp.read())

    def log(self) -> list[dict]:
        """Every request since the last `reset`, in order."""
        return self._call("log")  # type: ignore[return-value]

    def reset(self) -> None:
        """Forget the request log and every fault rule."""
        self._call("reset", {})

    def inject(self, *rules: dict) -> None:
        """Fault rules, replacing the current ones: {"kind": "GET"|"PUT"|...|"any", "key_contains": "...",
        "action": "503"|"reset"|"delay", "seconds": 1.0, "after": N matching requests let through first,
        "times": how many to fault}."""
        self._call("faults", list(rules))

    def faults(self) -> list[dict]:
        """The current rules, each with how often it `fired`."""
        return self._call("faults")  # type: ignore[return-value]

    def counts(self) -> Counter:
        """Requests by kind since the last reset."""
        return Counter(r["kind"] for r in self.log())

    def client(self):
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, aws_session_token=self.session_token,
                            region_name=REGION)

    def keys(self, prefix: str) -> list[str]:
        """Every key under `s3://warehouse/<prefix>` (paged)."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def stop(self) -> None:
        for proc in self.processes:
            proc.terminate()
        for proc in self.processes:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def start_object_store(workdir: Path) -> ObjectStore:
    access_key = "LAKESORTTEST" + secrets.token_hex(4).upper()
    secret_key = "lakesort-secret-" + secrets.token_hex(16)
    session_token = "lakesort-token-" + secrets.token_hex(24)
    port = _free_port()
    moto, _ = _start([sys.executable, "-c",
                      ("import sys; from moto.server import main; "
                      "print(f'moto listening on 127.0.0.1:{sys.argv[1]}', flush=True); "
                      "main(['-H', '127.0.0.1', '-p', sys.argv[1]])"), str(port)],
                     workdir / "moto.log", "moto listening on")
    front, front_port = _start([sys.executable, str(FRONT), "--upstream", f"http://127.0.0.1:{port}",
                                "--access-key", access_key, "--session-token", session_token],
                               workdir / "s3-front.log", "s3-front listening on")
    store = ObjectStore(f"http://127.0.0.1:{front_port}", access_key, secret_key, session_token,
                        [front, moto])
    deadline = time.monotonic() + 30
    while True:  # moto prints before it listens
        try:
            store.client().create_bucket(Bucket=BUCKET)
            break
        except Exception:
            if time.monotonic() > deadline:
                store.stop()
                raise
            time.sleep(0.2)
    store.reset()
    return store


@dataclass
class RestCatalog:
    uri: str
    store: ObjectStore
    process: subprocess.Popen

    def properties(self) -> dict[str, str]:
        """lakesort's (pyiceberg's) catalog configuration: the URI, the S3 endpoint and region, no keys."""
        return {"type": "rest", "uri": self.uri, "s3.endpoint": self.store.endpoint, "s3.region": REGION}

    def environment(self, name: str = CATALOG) -> dict[str, str]:
        """The same as pyiceberg's PYICEBERG_CATALOG__<NAME>__<KEY> variables."""
        prefix = f"PYICEBERG_CATALOG__{name.upper()}__"
        return {prefix + k.upper().replace(".", "__").replace("-", "_"): v
                for k, v in self.properties().items()}

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_rest_catalog(store: ObjectStore, workdir: Path) -> RestCatalog:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CATALOG_", "AWS_"))}
    env.update({
        "CATALOG_WAREHOUSE": f"s3://{BUCKET}/",
        "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
        "CATALOG_S3_ENDPOINT": store.endpoint,
        "CATALOG_S3_PATH__STYLE__ACCESS": "true",
        "CATALOG_S3_ACCESS__KEY__ID": store.access_key,
        "CATALOG_S3_SECRET__ACCESS__KEY": store.secret_key,
        "CATALOG_S3_SESSION__TOKEN": store.session_token,  # temporary credentials, as STS would vend them
        "CATALOG_CLIENT_REGION": REGION,
        "CATALOG_URI": f"jdbc:sqlite:file:{workdir / 'rest-catalog.db'}",
        "CATALOG_JDBC_SCHEMA__VERSION": "V1",
        # Vend the catalog's S3 credentials in every load-table response (`storage-credentials`).
        "CATALOG_INCLUDE__CREDENTIALS": "true",
        "AWS_REGION": REGION,
    })
    cmd = ["java", "-Xmx512m", "-XX:+UseSerialGC",
           # The server logs its catalog properties (the S3 keys among them) at INFO: not in the tests' logs.
           "-Dorg.slf4j.simpleLogger.log.org.apache.iceberg.rest.RESTCatalogServer=warn",
           "-cp", f"{REST_JARS}/*", str(REST_LAUNCHER)]
    proc, port = _start(cmd, workdir / "rest-catalog.log", "lakesort-rest-catalog listening on", env=env,
                        timeout=120)
    return RestCatalog(f"http://127.0.0.1:{port}", store, proc)
