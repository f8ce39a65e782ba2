"""`lakesort tables` over a real SQL catalog of 50 small tables, configured the four ways (a YAML spec,
lakesort.* table properties, a namespace default, their own sort order) and some not at all: each table's
effective configuration and the source of each key, its health and last run; the nightly compacts the
configured ones."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.transforms import IdentityTransform

from layout.catalog import RUN_ID
from layout.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, main
from layout.cli.tables import newest_rows
from layout.compaction.pipeline import runs
from layout.errors import ConfigError
from layout.metrics.runs import RunRecord, record_run
from layout.registry import find_spec, nightly_specs
from layout.sizes import MiB

DATA = pa.table({"k": pa.array([3, 1, 2], pa.int64()), "d": pa.array(["x", "y", "z"]),
                 "v": pa.array([0.5, 1.5, 2.5])})
SPEC = """table: {table}
owner: {{name: Team, email: team@example.com}}
sort: {{keys: [{{column: k, direction: desc}}]}}
"""
DEFAULTS = """defaults:
  - match: "*"
    owner: {name: Platform, email: platform@example.com}
  - match: "sales.*"
    sort: {keys: [{column: d}]}
    target_file_size: 64MiB
"""


@pytest.fixture
def fleet(iceberg_catalog, registry):
    """50 tables: 12 with a spec (one also with a property), 12 by properties, 12 by the sales default (one
    overriding it by property), 8 by their own sort order (one with a write property), 6 not configured."""
    (registry / "events.yaml").unlink()  # the registry fixture's table is not in this catalog
    (registry / "_defaults.yaml").write_text(DEFAULTS)
    tables = {}
    for namespace in ("yaml", "props", "sales", "ordered", "raw"):
        iceberg_catalog.create_namespace(namespace)
    for i in range(12):
        (registry / f"y{i}.yaml").write_text(SPEC.format(table=f"yaml.t{i}"))
        tables[f"yaml.t{i}"] = {"lakesort.max-sorted-runs": "2"} if i == 0 else {}
        tables[f"props.t{i}"] = {"lakesort.sort-keys": "v, k desc", "lakesort.target-file-size": "32MiB"}
        tables[f"sales.t{i}"] = {"lakesort.sort-keys": "k"} if i == 0 else {}
    for i in range(8):
        tables[f"ordered.t{i}"] = {"write.target-file-size-bytes": str(16 * MiB)} if i == 0 else {}
    for i in range(6):
        tables[f"raw.t{i}"] = {"lakesort.owner.name": "Nobody"} if i == 0 else {}
    for name, properties in tables.items():
        table = iceberg_catalog.create_table(name, schema=DATA.schema, properties=properties)
        if name.startswith("ordered."):
            with table.update_sort_order() as order:
                order.asc("v", IdentityTransform())
        if name.endswith(".t1"):  # two small files, overlapping in every key
            for _ in range(2):
                table.append(DATA.cast(table.schema().as_arrow()))
    return tables


def test_tables_lists_each_effective_configuration_and_its_sources(fleet, iceberg_catalog, capsys):
    # Last runs: a commit of lakesort's (its run id in the snapshot summary), and a failed run on record (in
    # lakesort's own namespace, which the listing leaves out).
    committed = iceberg_catalog.load_table("yaml.t4")
    committed.append(DATA.cast(committed.schema().as_arrow()), snapshot_properties={RUN_ID: "run-4"})
    started = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    record_run(iceberg_catalog, RunRecord(run_id="run-9", table="props.t4", status="failed",
                                          trigger="nightly", started_at=started, duration_s=3.0,
                                          error="boom"))
    assert main(["tables", "--json"]) == EXIT_OK
    listed = {row["table"]: row for row in json.loads(capsys.readouterr().out)["tables"]}
    assert set(listed) == set(fleet)  # lakesort's own namespace is not listed

    def source(table, key):
        return listed[table]["sources"][key]["kind"], listed[table]["sources"][key]["origin"]

    for name, row in listed.items():
        assert row["error"] is None, row
        configured = not name.startswith("raw.")
        assert row["configured"] is configured and (row["reason"] is None) is configured, row
    # a YAML spec; a property fills a key the spec does not set
    assert (source("yaml.t3", "sort.keys")[0] == "spec"
            and source("yaml.t3", "sort.keys")[1].endswith("y3.yaml"))
    assert listed["yaml.t3"]["config"]["sort.keys"] == [{"column": "k", "direction": "desc", "nulls": "last"}]
    assert source("yaml.t0", "max_sorted_runs") == ("property", "lakesort.max-sorted-runs")
    assert listed["yaml.t0"]["config"]["max_sorted_runs"] == 2
    assert source("yaml.t3", "owner.name")[0] == "spec"  # the spec wins over the "*" default
    assert source("yaml.t3", "target_file_size")[0] == "lakesort"
    # lakesort.* properties
    assert source("props.t5", "sort.keys") == ("property", "lakesort.sort-keys")
    assert [k["column"] for k in listed["props.t5"]["config"]["sort.keys"]] == ["v", "k"]
    assert listed["props.t5"]["config"]["target_file_size"] == 32 * MiB
    assert source("props.t5", "owner.name")[0] == "default"
    # the namespace default; a property overrides it
    assert source("sales.t4", "sort.keys") == ("default", source("sales.t4", "sort.keys")[1])
    assert "defaults[1] (match 'sales.*')" in source("sales.t4", "sort.keys")[1]
    assert listed["sales.t4"]["config"]["target_file_size"] == 64 * MiB
    assert source("sales.t0", "sort.keys") == ("property", "lakesort.sort-keys")
    assert source("sales.t0", "target_file_size")[0] == "default"
    # the table's own sort order and write properties
    assert source("ordered.t2", "sort.keys") == ("sort-order", "the sort order of ordered.t2")
    assert source("ordered.t0", "target_file_size") == ("write-property", "write.target-file-size-bytes")
    assert listed["ordered.t0"]["config"]["target_file_size"] == 16 * MiB
    # not configured: listed, with why, and its health
    assert "no sort key" in listed["raw.t2"]["reason"] and source("raw.t2", "owner.name")[0] == "default"
    assert "lakesort.owner.name set no sort.keys" in listed["raw.t0"]["reason"]  # what it has, shown
    assert source("raw.t0", "owner.name") == ("property", "lakesort.owner.name")
    # health from metadata: the tables with two appends hold two small overlapping files
    for name in ("yaml.t1", "props.t1", "sales.t1", "ordered.t1"):
        health = listed[name]["health"]
        assert (health["data_files"], health["small_files"], health["delete_files"]) == (2, 2, 0), name
        first_key = listed[name]["config"]["sort.keys"][0]["column"]
        assert health["overlap"][first_key]["max_depth"] == 2, name
    assert listed["raw.t1"]["health"]["data_files"] == 2 and listed["raw.t1"]["health"]["overlap"] == {}
    assert listed["yaml.t2"]["health"]["snapshot_id"] is None and listed["yaml.t2"]["last_run"] is None
    assert listed["yaml.t4"]["last_run"]["run_id"] == "run-4"
    assert listed["yaml.t4"]["last_run"]["status"] == "committed"
    last = listed["props.t4"]["last_run"]
    assert (last["run_id"], last["status"], last["error"]) == ("run-9", "failed", "boom")
    # the same resolution is what a run carries; a table no source configures is no run
    assert find_spec("props.t5").sort.keys[0].column == "v"
    assert find_spec("sales.t4").target_file_size == 64 * MiB
    with pytest.raises(ConfigError, match="raw.t2.*no sort key"):
        find_spec("raw.t2")
    nightly = nightly_specs()
    assert set(nightly) == {name for name in fleet if not name.startswith("raw.")}
    assert nightly["yaml.t3"].source.endswith("y3.yaml")  # a spec alone keeps its file and hash
    requests = {r.table: r for r in runs.nightly_requests()}  # the nightly DAG's first task
    assert requests["props.t5"].config.spec_hash == find_spec("props.t5").spec_hash
    assert not requests["props.t5"].config.on_disk and requests["yaml.t3"].config.on_disk
    # a run plans with it: the property's keys, the table's own order (no Spark needed to plan)
    for name, keys in (("props.t1", ["v", "k"]), ("ordered.t1", ["v"])):
        capsys.readouterr()
        assert main(["plan-rewrite", name, "--json"]) == EXIT_OK
        plan = json.loads(capsys.readouterr().out)
        assert [k["column"] for k in plan["sort_keys"]] == keys and plan["groups"], name
    _text_exit_codes_and_a_bad_property(iceberg_catalog, capsys)


def _text_exit_codes_and_a_bad_property(iceberg_catalog, capsys):
    """On the same fleet (built once: the suite's time is counted)."""
    assert main(["tables", "--namespace", "nowhere"]) == EXIT_USAGE
    assert "no such namespace" in capsys.readouterr().err
    assert main(["tables", "--catalog", "elsewhere"]) == EXIT_USAGE
    assert "no Iceberg catalog named 'elsewhere'" in capsys.readouterr().err
    assert main(["tables", "--namespace", "ordered"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "ordered.t1 (lakesort): configured" in out and "[sort-order: the sort order of ordered.t1]" in out
    assert "yaml." not in out
    with iceberg_catalog.load_table("props.t2").transaction() as tx:
        tx.set_properties({"lakesort.sort-keys": "nope"})
    assert main(["tables", "--namespace", "props", "--json"]) == EXIT_FAILURE
    rows = {r["table"]: r for r in json.loads(capsys.readouterr().out)["tables"]}
    assert "props.t2: sort.keys: 'nope' is not a column of props.t2" in rows["props.t2"]["error"]
    assert "ALTER TABLE props.t2 SET TBLPROPERTIES ('lakesort.sort-keys'=" in rows["props.t2"]["error"]
    assert rows["props.t3"]["error"] is None  # one table's error stops no other
    assert "props.t2" not in nightly_specs()  # and fails no nightly


def test_nested_namespaces(iceberg_catalog, registry, capsys):
    """Tables in namespaces of several levels (a.b.t): listed, resolved from every source (a default's pattern
    matches across the levels), listed by a nested --namespace (with what lies under it),
    run by the nightly."""
    (registry / "events.yaml").unlink()
    (registry / "_defaults.yaml").write_text(DEFAULTS + '  - match: "a.b.*"\n    min_small_files: 7\n')
    (registry / "abt.yaml").write_text(SPEC.format(table="a.b.t"))
    for namespace in ("a", "a.b", "a.b.c", "sales", "sales.eu"):
        iceberg_catalog.create_namespace(tuple(namespace.split(".")))
    iceberg_catalog.create_table("a.b.t", schema=DATA.schema)
    iceberg_catalog.create_table("a.b.c.t", schema=DATA.schema, properties={"lakesort.sort-keys": "v"})
    iceberg_catalog.create_table("sales.eu.orders", schema=DATA.schema)
    iceberg_catalog.create_table("a.flat", schema=DATA.schema)
    assert main(["tables", "--json"]) == EXIT_OK
    listed = {row["table"]: row for row in json.loads(capsys.readouterr().out)["tables"]}
    assert set(listed) == {"a.b.t", "a.b.c.t", "sales.eu.orders", "a.flat"}

    def source(table, key):
        return listed[table]["sources"][key]["kind"], listed[table]["sources"][key]["origin"]

    assert source("a.b.t", "sort.keys")[0] == "spec" and source("a.b.t", "sort.keys")[1].endswith("abt.yaml")
    assert source("a.b.t", "min_small_files")[0] == "default"  # "a.b.*" matches a.b.t
    assert source("a.b.c.t", "sort.keys") == ("property", "lakesort.sort-keys")
    assert "match 'a.b.*'" in source("a.b.c.t", "min_small_files")[1]  # fnmatch's * crosses the dots
    assert listed["a.b.c.t"]["config"]["min_small_files"] == 7
    assert "match 'sales.*'" in source("sales.eu.orders", "sort.keys")[1]
    assert listed["a.flat"]["configured"] is False
    assert main(["tables", "--namespace", "a.b", "--json"]) == EXIT_OK
    assert {r["table"] for r in json.loads(capsys.readouterr().out)["tables"]} == {"a.b.t", "a.b.c.t"}
    assert find_spec("a.b.c.t").min_small_files == 7
    assert set(nightly_specs()) == {"a.b.t", "a.b.c.t", "sales.eu.orders"}
    requests = {r.table: r for r in runs.nightly_requests()}
    assert requests["a.b.c.t"].config.sources["sort.keys"].kind == "property"
    assert main(["tables", "--namespace", "a.nope"]) == EXIT_USAGE
    assert "--namespace a.nope: no such namespace" in capsys.readouterr().err


@settings(max_examples=60, deadline=None)
@given(st.permutations([("a", 1, "r1"), ("a", 2, "r2"), ("a", 2, "r2-deferred"), ("b", 1, "r3"),
                        ("b", 1, "r0")]))
def test_the_newest_run_per_table_does_not_depend_on_the_rows_order(rows):
    """A trimmed night's commit and its `-deferred` row share a start: the newest is the one the report shows
    last (by start, then run id), in whatever order the catalog gave the rows."""
    at = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    listed = [{"table": t, "started_at": at + dt.timedelta(hours=h), "run_id": r} for t, h, r in rows]
    newest = newest_rows(listed)
    assert {t: row["run_id"] for t, row in newest.items()} == {"a": "r2-deferred", "b": "r3"}
