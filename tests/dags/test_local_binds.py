"""The demo's Airflow home is this machine's user's alone: after `make demo` writes it and its components
start from its environment, nothing they start listens beyond 127.0.0.1, and no file holding a secret is
readable by others (scripts/airflow_demo.py: `demo_env`, `secure`, `start`).

Cheap by design (the suite is at its time budget): the session's migrated Airflow DB is copied instead of
migrated again, only the API server and the scheduler start (the scheduler is what would start a task log
server), and they are stopped as soon as both are up.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import airflow

REPO = Path(__file__).resolve().parents[2]
UP_SECONDS = 120  # the API server starts in 10-30 s on two busy cores
LOOPBACK = ("127.0.0.1", "::1", "[::1]")


def _demo_script():
    spec = importlib.util.spec_from_file_location("airflow_demo", REPO / "scripts" / "airflow_demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tree(roots: list[int]) -> set[int]:
    """The pids of `roots` and of every process under them (uvicorn's workers, the scheduler's children)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                # the fields after the command, whose name may hold spaces and parentheses
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found, grew = set(roots), True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


def _listening(pids: set[int]) -> list[tuple[str, int]]:
    """(local address, pid) of every TCP socket listening in one of `pids` (`ss -ltnp`)."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True, timeout=10).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        for pid in map(int, re.findall(r"pid=(\d+)", line)):
            if pid in pids:
                found.append((fields[3], pid))
    return found


def test_the_demo_airflow_listens_on_loopback_only_and_keeps_its_secrets(airflow_home, tmp_path, monkeypatch):
    demo = _demo_script()
    port = _free_port()
    monkeypatch.setenv("AIRFLOW__API__PORT", str(port))
    home = tmp_path / ".lakesort"
    (home / "airflow").mkdir(parents=True)
    shutil.copy(airflow_home / "airflow.db", home / "airflow" / "airflow.db")  # migrated once a session
    (home / "airflow" / f".lakesort-initialised-{airflow.__version__}").touch()
    env = demo.demo_env(home)
    demo.init_airflow(home, env)
    assert "LAKESORT_WORK_DIR" not in (home / "airflow" / "env.sh").read_text()  # the CLI's default, shared

    log = tmp_path / "airflow.log"
    with open(log, "w") as out:
        procs = demo.start(env, [demo.SERVE[0], demo.SERVE[1]], stdout=out, stderr=subprocess.STDOUT)
    pids: set[int] = set()
    try:
        deadline = time.monotonic() + UP_SECONDS
        while True:
            pids = _tree([p.pid for p in procs])
            listening = _listening(pids)
            api_up = any(address.endswith(f":{port}") for address, _ in listening)
            scheduler_up = "Starting the scheduler" in log.read_text(errors="replace")
            if api_up and scheduler_up:
                break
            assert all(p.poll() is None for p in procs), log.read_text()[-3000:]
            assert time.monotonic() < deadline, (f"not up in {UP_SECONDS}s: {listening}\n"
                                                 + log.read_text()[-3000:])
            time.sleep(0.5)
        time.sleep(2)  # a task log server, were one started with the scheduler, is listening by now
        pids = _tree([p.pid for p in procs])
        listening = _listening(pids)
        assert listening and all(address.rsplit(":", 1)[0] in LOOPBACK for address, _ in listening), listening
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        for pid in pids:  # a child its parent left behind (still an airflow process: pids are not reused)
            try:
                if b"airflow" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass

    airflow_dir = home / "airflow"
    assert stat.S_IMODE(airflow_dir.stat().st_mode) == 0o700
    secrets = [airflow_dir / n for n in (demo.PASSWORDS, "airflow.cfg", "airflow.db")]
    secrets += list(airflow_dir.glob("airflow.db-*"))  # SQLite's journal, when one is left
    for path in secrets:
        assert path.exists() or path.name != demo.PASSWORDS, path
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, f"{path.name} is readable by others"
