"""The table lease (layout.upkeep.lease): one holder at a time under real contention (threads and processes),
a stale lease broken exactly once, a retried run taking its own lease again, and the takeover's
critical section: a breaker paused between reading the stale lease and replacing it keeps every other
contender out."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import multiprocessing
import os
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from layout.errors import LakesortError
from layout.upkeep import lease
from layout.upkeep.lease import (
    LeaseOwner,
    TableBusy,
    acquire_lease,
    read_lease,
    release_lease,
    sweep_leases,
    table_lease,
)

TABLE = "t.events"
ROUNDS, CONTENDERS = 200, 8


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LAKESORT_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.delenv("LAKESORT_LEASE_TTL_HOURS", raising=False)
    return tmp_path / "work"


def _dead(run_id: str = "dead", hours: float = 13) -> LeaseOwner:
    """An owner whose lease is older than the default TTL (12 h)."""
    when = dt.datetime.now(dt.UTC) - dt.timedelta(hours=hours)
    return LeaseOwner(kind="cli", run_id=run_id, acquired_at=when)


# ---- contenders: module-level so that spawned processes can run them ---------------------------------


def _log(path: str, line: str) -> None:
    """Append one line to the shared holder log, under its own flock."""
    with open(path, "a") as out:
        fcntl.flock(out, fcntl.LOCK_EX)
        out.write(line + "\n")
        out.flush()


def _rounds(idx: int, rounds: int, barrier, log_path: str, work_dir: str) -> list[str]:
    """Each round: contender 0 plants a stale lease; all contend for it at once; the winner holds it
    until everyone has tried, then releases. Returns this contender's outcome per round."""
    os.environ["LAKESORT_WORK_DIR"] = work_dir
    outcomes = []
    for r in range(rounds):
        if idx == 0:
            assert acquire_lease(TABLE, _dead(f"dead-{r}")) == "taken"
        barrier.wait()
        owner = LeaseOwner.cli(f"c{idx}-r{r}")
        try:
            outcome = acquire_lease(TABLE, owner)
            _log(log_path, f"enter {idx} {r}")
        except TableBusy:
            outcome = "busy"
        barrier.wait()  # every contender has tried while the winner holds the lease
        if outcome != "busy":
            _log(log_path, f"exit {idx} {r}")
            assert release_lease(TABLE, owner)
        outcomes.append(outcome)
        barrier.wait()  # released before the next round's stale lease
    return outcomes


def _process_rounds(idx, rounds, barrier, log_path, work_dir, results) -> None:
    results.put((idx, _rounds(idx, rounds, barrier, log_path, work_dir)))


def _free_for_all(idx: int, attempts: int, log_path: str, work_dir: str, results) -> None:
    """No barriers: take the lease whenever it is free, hold it briefly, release."""
    os.environ["LAKESORT_WORK_DIR"] = work_dir
    won = 0
    for a in range(attempts):
        owner = LeaseOwner.cli(f"f{idx}-{a}")
        try:
            acquire_lease(TABLE, owner)
        except TableBusy:
            continue
        _log(log_path, f"enter {idx} {a}")
        _log(log_path, f"exit {idx} {a}")
        assert release_lease(TABLE, owner)
        won += 1
    results.put((idx, won))


def _max_holders(log_path: Path) -> tuple[int, int]:
    """(most holders at once, number of tenures) from the enter/exit log."""
    holders, most, tenures = set(), 0, 0
    for line in log_path.read_text().splitlines():
        what, idx, r = line.split()
        if what == "enter":
            holders.add((idx, r))
            tenures += 1
            most = max(most, len(holders))
        else:
            holders.remove((idx, r))
    assert not holders
    return most, tenures


def _check_rounds(per_contender: dict[int, list[str]], log_path: Path) -> None:
    assert sorted(per_contender) == list(range(CONTENDERS))
    for r in range(ROUNDS):
        outcomes = sorted(per_contender[i][r] for i in range(CONTENDERS))
        # The stale lease is broken exactly once; everyone else finds the breaker's fresh lease.
        assert outcomes == ["broken"] + ["busy"] * (CONTENDERS - 1), f"round {r}: {outcomes}"
    assert _max_holders(log_path) == (1, ROUNDS)


def test_stale_lease_broken_exactly_once_by_threads(work, tmp_path):
    barrier, log_path = threading.Barrier(CONTENDERS, timeout=60), tmp_path / "holders.log"
    results: dict[int, list[str]] = {}
    errors = []

    def run(i: int) -> None:
        try:
            results[i] = _rounds(i, ROUNDS, barrier, str(log_path), str(work))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(CONTENDERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    _check_rounds(results, log_path)
    assert read_lease(TABLE) is None


def test_stale_lease_broken_exactly_once_by_processes(work, tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier, results, log_path = ctx.Barrier(CONTENDERS, timeout=60), ctx.Queue(), tmp_path / "holders.log"
    procs = [ctx.Process(target=_process_rounds, args=(i, ROUNDS, barrier, str(log_path), str(work), results))
             for i in range(CONTENDERS)]
    for p in procs:
        p.start()
    per_contender = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    _check_rounds(per_contender, log_path)
    assert read_lease(TABLE) is None


def test_one_holder_at_a_time_free_for_all(work, tmp_path):
    """Processes taking and releasing the lease as fast as they can: never two holders, many tenures."""
    ctx = multiprocessing.get_context("spawn")
    results, log_path = ctx.Queue(), tmp_path / "holders.log"
    procs = [ctx.Process(target=_free_for_all, args=(i, 60, str(log_path), str(work), results))
             for i in range(CONTENDERS)]
    for p in procs:
        p.start()
    won = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    most, tenures = _max_holders(log_path)
    assert most == 1 and tenures == sum(won.values()) > CONTENDERS


# ---- the critical section -------------------------------------------------------------------------------


def _paused_breakers(monkeypatch) -> dict[str, object]:
    """Breaker A stops between reading the stale lease and replacing it; then breaker B tries."""
    acquire_lease(TABLE, _dead())
    paused, go, seen, results = threading.Event(), threading.Event(), {}, {}

    def hook(path, held):
        if threading.current_thread().name == "A":
            seen["held"] = held
            paused.set()
            assert go.wait(10)

    monkeypatch.setattr(lease, "_before_replace", hook)

    def attempt(name: str) -> None:
        try:
            results[name] = acquire_lease(TABLE, LeaseOwner.cli(name))
        except TableBusy as exc:
            results[name] = exc

    a = threading.Thread(target=attempt, args=("A",), name="A")
    a.start()
    assert paused.wait(10)
    assert seen["held"].run_id == "dead"  # A has read the stale lease and decided to break it
    b = threading.Thread(target=attempt, args=("B",), name="B")
    b.start()
    b.join(0.5)
    results["B still waiting while A paused"] = b.is_alive()
    go.set()
    a.join(10)
    b.join(10)
    return results


def test_paused_breaker_keeps_the_second_breaker_out(work, monkeypatch):
    results = _paused_breakers(monkeypatch)
    assert results["B still waiting while A paused"]  # B cannot even read the lease meanwhile
    assert results["A"] == "broken"
    busy = results["B"]
    assert isinstance(busy, TableBusy) and busy.holder.run_id == "A"  # B read A's fresh lease: refused
    assert read_lease(TABLE).run_id == "A"


def test_without_the_lock_both_breakers_would_win(work, monkeypatch):
    """The same interleaving with the critical section switched off: the test above has teeth."""
    monkeypatch.setattr(lease, "_locked", lambda path, table, timeout=None: contextlib.nullcontext())
    results = _paused_breakers(monkeypatch)
    assert not results["B still waiting while A paused"]
    assert results["A"] == results["B"] == "broken"  # two holders: what the lock prevents


def test_lock_wait_is_bounded(work, monkeypatch):
    monkeypatch.setattr(lease, "LOCK_TIMEOUT_SECONDS", 0.2)
    path = lease.lease_path(TABLE)
    path.parent.mkdir(parents=True)
    with lease._locked(path, TABLE), pytest.raises(TableBusy, match="could not lock"):
        acquire_lease(TABLE, LeaseOwner.cli())


# ---- semantics ------------------------------------------------------------------------------------------


def test_same_owner_reacquires_others_are_told_who_and_what_to_do(work):
    owner, other = LeaseOwner.cli("run-1"), LeaseOwner.cleanup("c-1")
    assert acquire_lease(TABLE, owner) == "taken"
    path = work / TABLE / "lease.json"
    assert json.loads(path.read_text())["run_id"] == "run-1"
    retried = owner.model_copy(update={"pid": owner.pid + 1, "host": "elsewhere"})  # a retried task
    assert acquire_lease(TABLE, retried) == "reacquired"
    assert read_lease(TABLE).host == "elsewhere"
    with pytest.raises(TableBusy) as caught:
        acquire_lease(TABLE, other)
    message = str(caught.value)
    for part in ("lakesort run run-1 is working on this table since", owner.acquired_at.isoformat(),
                 str(path), "wait for it to finish", f"remove {path}", "host elsewhere"):
        assert part in message
    assert isinstance(caught.value, LakesortError) and caught.value.holder.same_run(owner)
    assert not release_lease(TABLE, other) and path.exists()  # not the holder: untouched
    assert release_lease(TABLE, owner) and not path.exists()
    assert not release_lease(TABLE, owner)
    assert sorted(p.name for p in path.parent.iterdir()) == ["lease.lock"]  # no temporary files left


def test_stale_after_the_ttl(work, monkeypatch):
    acquire_lease(TABLE, _dead(hours=2))
    with pytest.raises(TableBusy):  # 2 h < 12 h by default
        acquire_lease(TABLE, LeaseOwner.cli("x"))
    monkeypatch.setenv("LAKESORT_LEASE_TTL_HOURS", "1")
    assert acquire_lease(TABLE, LeaseOwner.cli("x")) == "broken"
    with pytest.raises(TableBusy):  # x's lease is fresh
        acquire_lease(TABLE, LeaseOwner.cli("y"), ttl=dt.timedelta(hours=1))


def test_a_killed_command_s_lease_is_free_at_once(work):
    """`lakesort compact` killed (OOM, Ctrl-C twice, a lost terminal) leaves its lease: on this host, a lease
    of a command whose process is gone is broken at once, not after the TTL. A live process's, another host's,
    or a DAG run's (whose tasks are separate processes) still waits for the TTL."""
    child = multiprocessing.get_context("spawn").Process(target=os.getpid)
    child.start()
    child.join()
    killed = LeaseOwner(kind="cli", run_id="killed", pid=child.pid)
    acquire_lease(TABLE, killed)
    assert acquire_lease(TABLE, LeaseOwner.cleanup("next")) == "broken"
    release_lease(TABLE, LeaseOwner.cleanup("next"))
    for holder in (LeaseOwner(kind="cli", run_id="alive"),  # this process
                   killed.model_copy(update={"host": "elsewhere"}),
                   LeaseOwner(kind="dag", dag_id="lakesort_nightly", run_id="scheduled", pid=child.pid)):
        acquire_lease(TABLE, holder)
        with pytest.raises(TableBusy):
            acquire_lease(TABLE, LeaseOwner.cli("next"))
        release_lease(TABLE, holder)


def test_a_command_killed_while_committing_keeps_its_lease_until_the_commit_settled(work, monkeypatch):
    """A command killed after it sent its commit: the catalog may still complete that commit, so its lease is
    not free at once (a cleanup taking it would delete the staged files the commit adds); after COMMIT_SETTLE
    it is, and a lease marked by another run's owner is left alone."""
    child = multiprocessing.get_context("spawn").Process(target=os.getpid)
    child.start()
    child.join()
    killed = LeaseOwner(kind="cli", run_id="killed", pid=child.pid)
    acquire_lease(TABLE, killed)
    assert not lease.mark_committing(TABLE, LeaseOwner.cli("another"))
    assert lease.mark_committing(TABLE, killed)
    assert read_lease(TABLE).committing_at is not None and read_lease(TABLE).same_run(killed)
    with pytest.raises(TableBusy, match=r"died while committing .* the catalog may "
                                        r"still complete that commit"):
        acquire_lease(TABLE, LeaseOwner.cleanup("next"))
    with pytest.raises(TableBusy):
        lease.refuse_if_held(TABLE, LeaseOwner.cleanup("dry"), why="its staged files are not orphans")
    monkeypatch.setattr(lease, "COMMIT_SETTLE", dt.timedelta(0))
    assert acquire_lease(TABLE, LeaseOwner.cleanup("next")) == "broken"


def test_table_lease_context_and_reentrancy(work):
    owner = LeaseOwner.cli()
    with table_lease(TABLE, owner):
        with table_lease(TABLE, owner):  # the holder again: left held at the inner exit
            pass
        assert read_lease(TABLE).same_run(owner)
        with pytest.raises(TableBusy), table_lease(TABLE, LeaseOwner.cli()):
            pass
    assert read_lease(TABLE) is None
    with pytest.raises(RuntimeError), table_lease(TABLE, owner):
        raise RuntimeError("the block failed")
    assert read_lease(TABLE) is None  # released all the same


def test_unreadable_and_legacy_leases(work):
    path = work / TABLE / "lease.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(TableBusy, match="unreadable"):  # fresh: maybe someone else's, being written
        acquire_lease(TABLE, LeaseOwner.cli())
    old = (dt.datetime.now() - dt.timedelta(minutes=5)).timestamp()
    os.utime(path, (old, old))
    assert acquire_lease(TABLE, LeaseOwner.cli()) == "broken"
    # A lease written before owners had a kind and a pid (the DAGs' old format): a DAG run's.
    path.write_text(json.dumps({"dag_id": "lakesort_nightly", "run_id": "n1", "host": "h",
                                "acquired_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}))
    held = read_lease(TABLE)
    assert (held.kind, held.dag_id, held.pid) == ("dag", "lakesort_nightly", None)
    with pytest.raises(TableBusy, match="lakesort_nightly run n1 is working on this table"):
        acquire_lease(TABLE, LeaseOwner.cli())
    assert acquire_lease(TABLE, LeaseOwner.dag("lakesort_nightly", "n1")) == "reacquired"


def test_sweep_releases_only_the_owners_leases(work):
    mine, theirs = LeaseOwner.dag("lakesort_backfill", "b1"), LeaseOwner.dag("lakesort_nightly", "n1")
    acquire_lease("a.one", mine)
    acquire_lease("a.two", mine)
    acquire_lease("a.three", theirs)
    assert sweep_leases(mine) == 2
    assert [p.parent.name for p in work.glob("*/lease.json")] == ["a.three"]


def test_owner_model(work):
    owner = LeaseOwner.cli()
    with pytest.raises(ValidationError, match="frozen"):
        owner.run_id = "other"
    assert owner.run_id.startswith("cli-") and owner.pid == os.getpid() and owner.acquired_at.tzinfo
    with pytest.raises(ValueError, match="dag_id"):
        LeaseOwner(kind="dag", run_id="r")
    assert LeaseOwner.dag("d", "r").same_run(LeaseOwner.dag("d", "r"))
    assert not LeaseOwner.dag("d", "r").same_run(LeaseOwner.dag("e", "r"))
    assert not LeaseOwner(kind="cli", run_id="r").same_run(LeaseOwner(kind="cleanup", run_id="r"))
