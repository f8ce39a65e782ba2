"""Bad input refused, the table as it was: a corrupt input file fails the run before any Spark work and the
run is recorded as failed naming it; an unknown sort key is refused before Spark; an empty table and an
emptied partition have nothing to do (and naming a partition that does not exist is an error
listing real ones).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from demo_tables import (
    KEYED_SCHEMA,
    MONTHS,
    OWNER,
    SPARK_CONF,
    demo_spec,
    live_files,
    partition_of,
    staged_files,
    state,
)

import layout.compaction.pipeline.driver
from layout.catalog import load_catalog, load_table
from layout.compaction.pipeline.driver import compact
from layout.compaction.planning.planner import plan_rewrite
from layout.errors import LakesortError, ParquetError, UsageError
from layout.io import resolve
from layout.spec import parse_spec

pytestmark = pytest.mark.spark


def test_corrupt_input_file_fails_the_job_and_commits_nothing(demo_home):
    table = load_table("demo.lineitem")
    before = state(table)
    month = MONTHS[0]
    victim = next(f.file_path for f in live_files(table) if partition_of(table, f) == month)
    filesystem, local = resolve(victim)
    size = filesystem.get_file_info(local).size
    Path(local).write_bytes(bytes((i * 37 + 11) % 256 for i in range(size)))  # garbage, same size, no magic
    with pytest.raises(LakesortError) as info:
        compact("demo.lineitem", spec=demo_spec(), partitions=[month], spark_conf=SPARK_CONF,
                work_dir=demo_home / "work")
    # Every input's footer is opened before any Spark work, so the corrupt file is named right away.
    assert isinstance(info.value, ParquetError)
    assert Path(local).name in str(info.value), f"the error does not name the corrupt file:\n{info.value}"
    table = table.refresh()
    assert table.current_snapshot().snapshot_id == before.snapshot_id
    assert {f.file_path for f in live_files(table)} == before.files
    assert staged_files(table) == []
    # The run is recorded as failed, naming the file, so the owners' report shows it.
    from layout.metrics.measure import read_runs

    failed = [r for r in read_runs(load_catalog()).to_pylist() if r["status"] == "failed"]
    assert (len(failed) == 1 and failed[0]["error"].startswith("prepare: ")
            and Path(local).name in failed[0]["error"])


def test_unknown_sort_key_is_refused_before_any_spark_work(demo_home, monkeypatch):
    def no_spark(*args, **kwargs):
        raise AssertionError("spark-submit must not run")

    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", no_spark)
    spec = demo_spec(sort={"keys": [{"column": "l_shipdat"}]})
    with pytest.raises(UsageError, match=r"`l_shipdat` is not a column of demo.lineitem; "
                                         r"did you mean `l_shipdate`"):
        compact("demo.lineitem", spec=spec)


def test_empty_table_has_nothing_to_do(demo_home, monkeypatch):
    def no_spark(*args, **kwargs):
        raise AssertionError("spark-submit must not run")

    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", no_spark)
    catalog = load_catalog()
    catalog.create_namespace_if_not_exists("keyed")
    table = catalog.create_table("keyed.empty", schema=KEYED_SCHEMA)
    spec = parse_spec({"table": "keyed.empty", "catalog": "lakesort", "owner": OWNER,
                       "sort": {"keys": [{"column": "id"}]}}, source="empty-spec")
    result = compact("keyed.empty", spec=spec)
    assert result.nothing_to_do and result.snapshot_id is None and result.files_before == 0
    assert table.refresh().current_snapshot() is None
    with pytest.raises(UsageError, match="no such partition"):
        compact("keyed.empty", spec=spec, partitions=["id=1"])


def test_emptied_partition_has_nothing_to_do(demo_home, monkeypatch):
    """A month whose rows were all deleted has no live files: it is not planned, and naming it is an error
    that lists real partitions."""
    from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

    def no_spark(*args, **kwargs):
        raise AssertionError("spark-submit must not run")

    table = load_table("demo.lineitem")
    table.delete(And(GreaterThanOrEqual("l_shipdate", "1995-03-01"), LessThan("l_shipdate", "1995-04-01")))
    monkeypatch.setattr(layout.compaction.pipeline.driver, "submit", no_spark)
    spec = demo_spec()
    plan = plan_rewrite(table.refresh(), spec, partitions=[MONTHS[1]])
    assert [d.partition for d in plan.partitions] == [MONTHS[1]]
    with pytest.raises(UsageError, match=r"no such partition\(s\): l_shipdate_month=1995-03; partitions look "
                                         r"like: l_shipdate_month=1992-01"):
        compact("demo.lineitem", spec=spec, partitions=[MONTHS[0]])
