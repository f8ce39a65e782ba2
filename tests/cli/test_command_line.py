"""One command line: `lakesort --version`; bad inputs exit 2 with one plain line (no terminal escapes); every
command that reports prints one JSON document with --json; --catalog reaches the table; the deprecated flag
name still works. (Flags per command and the exit statuses in every --help: test_dispatch.py.)"""

from __future__ import annotations

import json
from importlib.metadata import version

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from layout.catalog import load_catalog
from layout.cli import EXIT_OK, EXIT_USAGE, build_parser, main

GOOD_PROBE = {"name": "ship_date_point", "where": "d = DATE '1995-02-01'"}


def _spec(tmp_path, **overrides) -> str:
    doc = {"table": "t.events", "owner": {"name": "Test Team", "email": "test@example.com"},
           "sort": {"keys": [{"column": "d"}]}, "probes": [GOOD_PROBE]}
    doc.update(overrides)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _one_plain_line(err: str, command: str) -> str:
    assert err.startswith(f"lakesort {command}: error: "), err
    assert "\x1b" not in err, f"a terminal escape in {err!r}"
    return err


def test_version(capsys):
    assert main(["--version"]) == EXIT_OK
    assert capsys.readouterr().out == f"lakesort {version('lakesort')}\n"


@pytest.mark.parametrize("name", ["ship date point", "9bad", "../../etc", "a.b", ""])
def test_a_probe_name_not_written_like_an_identifier_exits_2(name, tmp_path, capsys):
    spec = _spec(tmp_path, probes=[{**GOOD_PROBE, "name": name}])
    assert main(["measure", "t.events", "--spec", spec]) == EXIT_USAGE
    err = _one_plain_line(capsys.readouterr().err, "measure")
    assert "probes[0].name" in err and "letters, digits, _ and -" in err and repr(name) in err, err


@pytest.mark.parametrize("name", ["ship_date-point", "_x", "Q9"])
def test_identifiers_are_probe_names(name, tmp_path):
    from layout.spec import load_spec

    assert load_spec(_spec(tmp_path, probes=[{**GOOD_PROBE, "name": name}])).probes[0].name == name


def test_a_sql_parse_error_is_plain_text(tmp_path, capsys):
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"d": pa.array([1, 2], pa.int64())}), path)
    assert main(["plan", str(path), "--where", "d >>> = 3 AND"]) == EXIT_USAGE
    _one_plain_line(capsys.readouterr().err, "plan")


def test_an_unknown_catalog_exits_2_naming_the_known_ones(iceberg_catalog, capsys):
    assert main(["inspect", "t.events", "--catalog", "nope"]) == EXIT_USAGE
    err = _one_plain_line(capsys.readouterr().err, "inspect")
    assert "'nope'" in err and "known: lakesort" in err


def test_catalog_names_the_tables_catalog(events, monkeypatch, tmp_path, capsys):
    # A second catalog, made the default: --catalog lakesort still finds t.events, and only for the command.
    monkeypatch.setenv("PYICEBERG_CATALOG__OTHER__TYPE", "sql")
    monkeypatch.setenv("PYICEBERG_CATALOG__OTHER__URI", f"sqlite:///{tmp_path / 'other.db'}")
    monkeypatch.setenv("PYICEBERG_DEFAULT_CATALOG", "other")
    assert main(["inspect", "t.events", "--json"]) == EXIT_USAGE  # not in the default catalog
    capsys.readouterr()
    assert main(["inspect", "t.events", "--json", "--catalog", "lakesort"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["files"]
    assert load_catalog().name == "other"
    # A spec naming one catalog and --catalog another: refused before anything is opened.
    spec = _spec(tmp_path, catalog="lakesort")
    assert main(["measure", "t.events", "--spec", spec, "--catalog", "other"]) == EXIT_USAGE
    assert "names catalog lakesort" in _one_plain_line(capsys.readouterr().err, "measure")


def test_the_old_flag_name_is_a_deprecated_alias(capsys):
    args = build_parser().parse_args(["compact", "t.x", "--no-measure"])
    assert args.no_record is True
    assert "--no-measure is deprecated, use --no-record" in capsys.readouterr().err
    assert build_parser().parse_args(["compact", "t.x"]).no_record is False


def test_json_on_every_command_that_reports(events, registry, capsys):
    """Each prints exactly one JSON document on stdout (whatever it logs goes to stderr)."""
    runs = {
        "inspect": ["inspect", "t.events", "--json"],
        "plan": ["plan", "t.events", "--where", "d >= DATE '1995-03-01'", "--json"],
        "plan-rewrite": ["plan-rewrite", "t.events", "--json"],
        "compact": ["compact", "t.events", "--dry-run", "--json"],
        "verify": ["verify", "t.events", "--json"],
        "cleanup": ["cleanup", "t.events", "--dry-run", "--json"],
        "expire": ["expire", "t.events", "--dry-run", "--json"],
        "housekeep": ["housekeep", "--dry-run", "--json"],
        "tables": ["tables", "--json"],
        "report": ["report", "--json"],
    }
    docs = {}
    for name, argv in runs.items():
        assert main(["-q", *argv]) in (EXIT_OK, 1), name  # verify: 1 on an error finding, still a document
        docs[name] = json.loads(capsys.readouterr().out)
    assert docs["compact"]["status"] == "dry-run" and docs["compact"]["plan"]["partitions"]
    assert docs["cleanup"]["dry_run"] is True and docs["cleanup"]["removed"] == 0
    assert isinstance(docs["housekeep"]["tables"], list)
    report = docs["report"]
    assert report["index"].endswith("index.html") and report["index"] in report["pages"]


def test_a_pyiceberg_yaml_shadowing_the_demos_is_named(tmp_path, monkeypatch, caplog):
    import layout.catalog
    from layout.catalog import check_catalog, write_sql_catalog_config

    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("PYICEBERG_HOME", raising=False)
    monkeypatch.delenv("PYICEBERG_DEFAULT_CATALOG", raising=False)
    monkeypatch.chdir(work)
    monkeypatch.setattr(layout.catalog, "_shadow_warned", set())
    write_sql_catalog_config(work / ".lakesort", work)  # the demo's, in the working directory
    check_catalog()
    assert "not from the demo's" not in caplog.text  # (the tmp path holds the word "shadow")
    mine = home / ".pyiceberg.yaml"  # a user's own, which pyiceberg reads first
    mine.write_text(f"catalog:\n  lakesort:\n    type: sql\n    uri: sqlite:///{tmp_path / 'mine.db'}\n")
    check_catalog("lakesort")
    demo = work / ".pyiceberg.yaml"
    assert f"the Iceberg catalogs come from {mine}, not from the demo's {demo}" in caplog.text
    assert f"PYICEBERG_HOME={work}" in caplog.text
