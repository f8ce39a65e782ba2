"""Faults across hosts (issue #40), the fastest cases: a Spark master, two workers and the lakesort driver on
hosts of their own (network namespaces; tests/faults/hosts_bed.py), the warehouse on S3 behind Iceberg's REST
catalog, TPC-H lineitem at SF 0.01 (the session's `tpch_cache`). Every fault at every moment, at SF 0.1 to 1,
is tests/benchmarks/bench_faults.py's; the README's "Faults across hosts" has its table.

Needs root (network namespaces): elsewhere the tests skip, saying why; under CI they fail instead.
"""

from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def runner(tmp_path_factory, tpch_cache):
    import object_store
    from host_faults import Runner
    from hosts_bed import HostsBed
    from netns import unavailable

    from layout.demo import generate_lineitem

    why = unavailable() or object_store.missing()
    if why:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(f"faults across hosts: {why}")
    bed = HostsBed(tmp_path_factory.mktemp("hosts"))
    try:
        bed.start()
        yield Runner(bed, generate_lineitem(0.01, tpch_cache))
    finally:
        bed.stop()
        assert not bed.net.hosts


def _check(outcome, expected: str) -> None:
    print(outcome)
    assert outcome.reached, f"{outcome.fault}: the moment {outcome.moment!r} was never seen"
    assert outcome.outcome == expected, outcome


def test_driver_killed_after_staging_then_worker_killed_while_reading(runner):
    """The driver's host dies once the Spark job has staged its output, before verify and commit: the table is
    as it was, every snapshot reads whole, `lakesort cleanup` removes the staged files.

    The next run is the second case (one Spark job less in `make test`): a worker and its executor killed
    while the job reads its input; Spark reruns the lost tasks on the other worker, the run commits the same
    rows once, no staged file is left, and the run after it succeeds (nothing left to do)."""
    first = runner.run("driver killed", "after staging", next_run=False)
    _check(first, "failed cleanly")
    _check(runner.run("worker killed", "reading", table=first.table), "committed")
