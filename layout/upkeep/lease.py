"""One lease per table: a table never has two runs at once, whichever entry point started them.

The lease is a JSON file, `<work root>/<table>/lease.json`, naming its owner (a DAG run, a `lakesort`
command, a cleanup), the host and process, and when it was taken. The DAGs, `lakesort compact` and
`lakesort cleanup` take it; the work root must be shared by everything that works on a table.

Atomic takeover. Every read-check-write of a lease happens inside one critical section: an exclusive
`fcntl.flock` on the sibling file `lease.lock` (never deleted: a lock file that can be deleted can be
locked twice, once per inode). Inside it, the lease is read; if it is free, this owner's, or stale, the
new lease is written to a temporary file and `os.replace`d over `lease.json`. Two contenders breaking
one stale lease are serialised by the lock: the second reads the first's fresh lease and is refused.
Readers outside the lock (`read_lease`) never see a half-written lease, because the file only ever
appears whole. A process that dies holding the lock loses it with its file descriptor, so the lock
itself can never go stale; a lease can, and is broken after LAKESORT_LEASE_TTL_HOURS (default 12), or at
once when it is a killed `lakesort` command's (its process gone from this host: `_process_gone`), unless the
command died in its commit (`mark_committing`): a catalog may still complete the commit request it sent, and
a cleanup that took the lease at once deleted the staged files that commit then added (the faults-across-hosts
test, a REST catalog finishing the commit of a SIGKILLed driver), so that lease waits COMMIT_SETTLE first.

The work root must support `flock` (a local disk, a Docker volume, NFSv4): on one that does not, taking
a lease fails with an error saying so rather than proceeding unguarded.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from layout.errors import LakesortError
from layout.models import Frozen
from layout.settings import settings

log = logging.getLogger(__name__)

LEASE_FILE = "lease.json"
LOCK_FILE = "lease.lock"
# How long to wait for another process's critical section (milliseconds of work) before giving up.
LOCK_TIMEOUT_SECONDS = 30.0
# A lease file that cannot be parsed (written by hand, or by a crashed older writer) is broken once it
# is this old; younger, it is treated as held.
UNREADABLE_GRACE = dt.timedelta(minutes=1)
# How long a killed command's commit may still land after its process died: a commit request the catalog
# received goes on without its client (pyiceberg's REST client waits at most its request timeout, 60 s by
# default, and then the server may still be working); ten minutes covers that with room.
COMMIT_SETTLE = dt.timedelta(minutes=10)

Kind = Literal["dag", "cli", "cleanup"]
Outcome = Literal["taken", "reacquired", "broken"]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def new_run_id(kind: str) -> str:
    """A run id for a command-line run: `<kind>-<UTC time>-<random>` (unique across hosts)."""
    return f"{kind}-{_now():%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


class LeaseOwner(Frozen):
    """Who holds (or asks for) a table's lease. Two owners are the same run when kind, dag_id and run_id
    agree: a retried task (another process, maybe another host) takes its run's lease again."""

    # Extra fields are ignored, unlike other contracts: a lease written by a newer version stays readable.
    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: Kind
    run_id: str
    dag_id: str | None = None
    host: str = Field(default_factory=socket.gethostname)
    pid: int | None = Field(default_factory=os.getpid)
    acquired_at: dt.datetime = Field(default_factory=_now)
    committing_at: dt.datetime | None = None  # when the run sent its commit (`mark_committing`)

    @field_validator("acquired_at", "committing_at")
    @classmethod
    def _aware(cls, value: dt.datetime | None) -> dt.datetime | None:
        if value is None:
            return None
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)

    @model_validator(mode="after")
    def _dag_has_id(self) -> LeaseOwner:
        if self.kind == "dag" and not self.dag_id:
            raise ValueError("a DAG run's lease owner needs its dag_id")
        return self

    @classmethod
    def dag(cls, dag_id: str, run_id: str) -> LeaseOwner:
        return cls(kind="dag", dag_id=dag_id, run_id=run_id)

    @classmethod
    def cli(cls, run_id: str | None = None) -> LeaseOwner:
        return cls(kind="cli", run_id=run_id or new_run_id("cli"))

    @classmethod
    def cleanup(cls, run_id: str | None = None) -> LeaseOwner:
        return cls(kind="cleanup", run_id=run_id or new_run_id("cleanup"))

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> LeaseOwner:
        """An owner from a lease file, including those written before owners had a kind and a pid."""
        data = dict(record)
        data.setdefault("kind", "dag" if data.get("dag_id") else "cli")
        data.setdefault("pid", None)
        return cls.model_validate(data)

    def same_run(self, other: LeaseOwner) -> bool:
        return (self.kind, self.dag_id, self.run_id) == (other.kind, other.dag_id, other.run_id)

    def describe(self) -> str:
        return {"dag": f"{self.dag_id} run {self.run_id}", "cli": f"lakesort run {self.run_id}",
                "cleanup": f"lakesort cleanup {self.run_id}"}[self.kind]

    def where(self) -> str:
        return f"host {self.host}" + (f", pid {self.pid}" if self.pid is not None else "")


class TableBusy(LakesortError):
    """Another run holds the table's lease; the message says who, since when, and what to do."""

    def __init__(self, message: str, *, table: str, path: Path, holder: LeaseOwner | None = None) -> None:
        super().__init__(message)
        self.table = table
        self.path = path
        self.holder = holder


def lease_ttl() -> dt.timedelta:
    """Age after which a lease is a dead run's: $LAKESORT_LEASE_TTL_HOURS, default 12."""
    return dt.timedelta(hours=settings().lease_ttl_hours)


def lease_path(table: str) -> Path:
    return settings().work_dir / table / LEASE_FILE


def read_lease(table: str) -> LeaseOwner | None:
    """The table's current holder, or None (free, or unreadable). Needs no lock: leases appear whole."""
    held, _ = _read(lease_path(table))
    return held


# ---- the critical section ---------------------------------------------------------------------------


def _before_replace(path: Path, held: LeaseOwner | None) -> None:
    """Called inside the critical section between reading the lease and replacing it (a test hook)."""


@contextlib.contextmanager
def _locked(path: Path, table: str, timeout: float | None = None) -> Iterator[None]:
    """Hold the exclusive flock of the lease's sibling lock file (own file descriptor: threads of one
    process exclude each other too)."""
    timeout = LOCK_TIMEOUT_SECONDS if timeout is None else timeout
    lock = path.with_name(LOCK_FILE)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline, delay = time.monotonic() + timeout, 0.0005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TableBusy(f"{table}: could not lock {lock} within {timeout:.0f}s (another process "
                                    "is stuck taking or releasing the lease); try again", table=table,
                                    path=path) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.02)
            except OSError as exc:
                if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise LakesortError(f"{table}: the work root does not support file locks ({lock}: "
                                        f"{exc}); put LAKESORT_WORK_DIR on a filesystem that does") from exc
                raise
        yield
    finally:
        os.close(fd)  # releases the flock


def _read(path: Path) -> tuple[LeaseOwner | None, dt.datetime | None]:
    """(holder, since): (None, None) when there is no lease; (None, mtime) when it is unreadable."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None, None
    try:
        held = LeaseOwner.from_record(json.loads(text))
    except (ValueError, TypeError, ValidationError):
        try:
            return None, dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC)
        except FileNotFoundError:
            return None, None
    return held, held.acquired_at


def _write(path: Path, owner: LeaseOwner) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "x") as out:
        out.write(owner.model_dump_json())
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def _remove_leftovers(path: Path) -> None:
    """Temporary lease files of writers that crashed (none can be in progress: we hold the lock)."""
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        tmp.unlink(missing_ok=True)


def _process_gone(held: LeaseOwner) -> bool:
    """Whether the holder is a `lakesort` command (a compaction or a cleanup: the lease lives and dies with
    its process) whose process, on this host, no longer exists: killed, its lease is free at once instead of
    after the TTL. A DAG run's lease outlives each task's process (the next task takes it again), so it waits
    for the TTL; so does a holder on another host, or one whose pid this host has given to a new process."""
    if held.kind == "dag" or held.pid is None or held.host != socket.gethostname():
        return False
    try:
        os.kill(held.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def _commit_in_flight(held: LeaseOwner) -> bool:
    """Whether the holder sent its commit less than COMMIT_SETTLE ago: its lease is kept though its process
    is gone, since the catalog may still complete that commit (and its staged files become the table's)."""
    return held.committing_at is not None and _now() - held.committing_at < COMMIT_SETTLE


def _dead(held: LeaseOwner) -> bool:
    """A command's lease free at once: its process is gone and no commit of its can still land."""
    return _process_gone(held) and not _commit_in_flight(held)


def _busy(table: str, path: Path, held: LeaseOwner, ttl: dt.timedelta) -> TableBusy:
    if held.committing_at is not None and _process_gone(held):
        settled = (held.committing_at + COMMIT_SETTLE).isoformat()
        return TableBusy(
            f"{table}: {held.describe()} died while committing (its commit was sent at "
            f"{held.committing_at.isoformat()}; {held.where()}; lease {path}); the catalog may still "
            "complete that commit, so the lease is kept until "
            f"{settled}: try again then", table=table, path=path,
            holder=held)
    return TableBusy(
        f"{table}: {held.describe()} is working on this table since {held.acquired_at.isoformat()} "
        f"({held.where()}; lease {path}); a table never has two runs at once: wait for it to finish, or, if "
        f"that run is dead, remove {path} (a lease older than {ttl} is broken automatically)",
        table=table, path=path, holder=held)


# ---- the API --------------------------------------------------------------------------------------------


def acquire_lease(table: str, owner: LeaseOwner, *, ttl: dt.timedelta | None = None) -> Outcome:
    """Take the table's lease for `owner`, or raise TableBusy naming the holder.

    Returns "taken" (it was free), "reacquired" (this run held it already: a retried task) or "broken"
    (a lease older than `ttl`, default LAKESORT_LEASE_TTL_HOURS, was a dead run's and is now ours).
    """
    ttl = lease_ttl() if ttl is None else ttl
    path = lease_path(table)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path, table):
        _remove_leftovers(path)
        held, since = _read(path)
        if held is None and since is None:
            outcome: Outcome = "taken"
        elif held is not None and held.same_run(owner):
            outcome = "reacquired"
        elif held is not None:
            age = _now() - held.acquired_at
            gone = _dead(held)
            if age <= ttl and not gone:
                raise _busy(table, path, held, ttl)
            log.warning("%s: breaking the lease of %s (%s), taken %s ago: %s", table, held.describe(),
                        held.where(), age, "its process is gone" if gone else f"more than {ttl}")
            outcome = "broken"
        else:
            assert since is not None  # no holder read: `since` is when the unreadable lease was written
            age = _now() - since
            if age < UNREADABLE_GRACE:
                raise TableBusy(f"{table}: the lease {path} is unreadable and was written {age} ago; wait "
                                "a minute and try again, or remove it if no run holds it",
                                table=table, path=path)
            log.warning("%s: breaking the unreadable lease %s (written %s ago)", table, path, age)
            outcome = "broken"
        _before_replace(path, held)
        _write(path, owner)
    log.info("%s: lease %s by %s (%s)", table, outcome, owner.describe(), owner.where())
    return outcome


def _release_if_held(path: Path, table: str, owner: LeaseOwner) -> bool:
    with _locked(path, table):
        held, _ = _read(path)
        if held is None or not held.same_run(owner):
            return False
        path.unlink(missing_ok=True)
    log.info("%s: lease released by %s", table, owner.describe())
    return True


def refuse_if_held(table: str, owner: LeaseOwner, *, why: str) -> None:
    """What taking the lease would do, without taking it (dry runs): TableBusy if another live run holds
    it; `why` says what that means for the caller (e.g. "its staged files are not orphans")."""
    held, path = read_lease(table), lease_path(table)
    if held is None or held.same_run(owner) or _now() - held.acquired_at > lease_ttl() or _dead(held):
        return
    raise TableBusy(f"{table}: {held.describe()} is working on this table since "
                    f"{held.acquired_at.isoformat()} ({held.where()}; lease {path}): {why}; wait for it to "
                    f"finish, or, if that run is dead, remove {path}", table=table, path=path, holder=held)


def mark_committing(table: str, owner: LeaseOwner) -> bool:
    """Record in `owner`'s lease that its commit is being sent (just before the catalog request): killed from
    now on, its lease outlives its process by COMMIT_SETTLE. False (nothing written) when `owner` does not
    hold the lease."""
    path = lease_path(table)
    if not path.exists():
        return False
    with _locked(path, table):
        held, _ = _read(path)
        if held is None or not held.same_run(owner):
            return False
        _write(path, held.model_copy(update={"committing_at": _now()}))
    return True


def release_lease(table: str, owner: LeaseOwner) -> bool:
    """Remove the table's lease if `owner`'s run holds it; True when it did (anyone else's: untouched)."""
    path = lease_path(table)
    if not path.exists():
        return False
    return _release_if_held(path, table, owner)


def sweep_leases(owner: LeaseOwner) -> int:
    """Release every lease `owner`'s run still holds, on any table; how many it released."""
    paths = sorted(settings().work_dir.glob(f"*/{LEASE_FILE}"))
    return sum(_release_if_held(path, path.parent.name, owner) for path in paths)


@contextlib.contextmanager
def table_lease(table: str, owner: LeaseOwner, *, ttl: dt.timedelta | None = None) -> Iterator[LeaseOwner]:
    """Hold the table's lease for the block. A lease the owner held already (reentrant use) is left held."""
    outcome = acquire_lease(table, owner, ttl=ttl)
    try:
        yield owner
    finally:
        if outcome != "reacquired" and not release_lease(table, owner):
            log.warning("%s: the lease of %s was no longer held at the end (broken as stale by another run?)",
                        table, owner.describe())
