"""The dispatch of `lakesort`: the table of commands, each command's flags in its help, exit codes of the
errors a command raises, and that parsing (and any --help) imports no command module."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

import pytest

import layout.cli.report
from layout.advise.sample import DEFAULT_SAMPLE_ROWS
from layout.cli import COMMANDS, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, build_parser, main
from layout.errors import InputError, LakesortError, UsageError

LOGGING = {"-h", "--help", "-v", "--verbose", "-q", "--quiet"}
RANGE = ["TABLE", "--spec", "--partition", "--from", "--to", "--force", "--full"]
# Every command's positionals and options besides the logging ones: what scripts and DAGs call it with.
# `--catalog` wherever a table is named, `--json` on every command that reports, `--no-record` for "write no
# measurement" (compact's old `--no-measure` is a hidden alias).
FLAGS = {
    "inspect": ["SOURCE", "--catalog", "--columns", "--json", "--summary"],
    "plan": ["SOURCE", "--catalog", "--where", "--columns", "--json"],
    "plan-rewrite": [*RANGE, "--catalog", "--json"],
    "compact": [*RANGE, "--catalog", "--master", "--no-record", "--dry-run", "--json"],
    "measure": ["TABLE", "--catalog", "--spec", "--snapshot", "--no-record", "--no-engine", "--json"],
    "report": ["--out", "--json"],
    "verify": ["SOURCE", "--spec", "--catalog", "--json", "--gx", "--docs"],
    "cleanup": ["TABLE", "--catalog", "--grace-hours", "--dry-run", "--json"],
    "expire": ["TABLE", "--catalog", "--spec", "--dry-run", "--json"],
    "housekeep": ["--catalog", "--dry-run", "--json"],
    "spark-archive": ["--force", "--path"],
    "spark-jars": ["--hadoop-version", "--print-pom", "--fetch", "--offline"],
    "advise": ["TABLE", "--catalog", "--spec", "--json", "--sample", "--seed", "--no-record"],
    "demo": ["--home", "--scale", "--batches", "--replace"],
    "tables": ["--catalog", "--namespace", "--json"],
}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    (sub,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_the_parser_has_exactly_the_commands_of_the_table():
    assert list(_subparsers()) == list(COMMANDS) == list(FLAGS)


def test_top_level_help_lists_every_command(capsys):
    assert main(["--help"]) == EXIT_OK
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert re.search(rf"^ +{re.escape(command)}\s", out, re.MULTILINE), command


@pytest.mark.parametrize("command", list(FLAGS))
def test_every_command_help_exits_0_and_names_its_flags(command, capsys):
    assert main([command, "--help"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith(f"usage: lakesort {command} "), out
    for flag in FLAGS[command]:
        assert flag in out, f"{command} --help does not name {flag}"
    declared = {name for a in _subparsers()[command]._actions if a.help != argparse.SUPPRESS
                for name in (a.option_strings or [a.metavar])}
    assert declared - LOGGING == set(FLAGS[command]), f"{command}: flags changed; update FLAGS if on purpose"
    # Every help ends with the exit statuses: 0, what 1 means for this command, 2.
    assert re.search(r"Exit status: 0 .+; 1 .+; 2 bad usage or configuration", " ".join(out.split())), out


@pytest.mark.parametrize("argv", [["frobnicate"], [], ["plan", "x"], ["demo", "--scale", "many"]])
def test_unknown_commands_and_bad_usage_exit_2(argv, capsys):
    assert main(argv) == EXIT_USAGE
    assert "usage: lakesort" in capsys.readouterr().err


def test_an_unknown_command_names_the_valid_ones(capsys):
    assert main(["frobnicate"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "invalid choice: 'frobnicate'" in err and all(f"'{c}'" in err for c in COMMANDS)


@pytest.mark.parametrize(("raised", "status", "line"), [
    (UsageError("bad option"), EXIT_USAGE, "lakesort report: error: bad option\n"),
    (InputError("no such file"), EXIT_USAGE, "lakesort report: error: no such file\n"),
    (LakesortError("it broke"), EXIT_FAILURE, "lakesort report: failed: it broke\n"),
    (BrokenPipeError(), EXIT_OK, ""),
])
def test_the_dispatch_runs_the_command_module_and_maps_its_errors(raised, status, line, monkeypatch, capsys):
    seen = []

    def run(args):
        seen.append(args.out)
        raise raised

    monkeypatch.setattr(layout.cli.report, "run", run)
    assert main(["report", "--out", "x"]) == status
    assert seen == ["x"] and capsys.readouterr().err == line


def test_the_command_status_is_the_exit_status(monkeypatch):
    monkeypatch.setattr(layout.cli.report, "run", lambda args: EXIT_FAILURE)
    assert main(["-q", "report"]) == EXIT_FAILURE


def test_advise_sample_default_is_the_advisors():
    # Stated in the parser as a number so that parsing imports no pandas.
    assert build_parser().parse_args(["advise", "t.x"]).sample == DEFAULT_SAMPLE_ROWS


def test_help_of_any_command_imports_no_command_module():
    """In a fresh interpreter, every --help
    (which parses only) loads no command module and no heavy library."""
    code = (
        "import contextlib, io, json, sys\n"
        "from layout.cli import COMMANDS, main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    codes = [main([]), main(['--help'])] + [main([c, '--help']) for c in COMMANDS]\n"
        "print(json.dumps({'codes': codes, 'modules': sorted(sys.modules)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)
    assert result["codes"] == [EXIT_USAGE] + [EXIT_OK] * (1 + len(COMMANDS))
    loaded = [m for m in result["modules"] if m.startswith(("layout.", "pyiceberg", "pyarrow", "pandas",
                                                            "pydantic", "numpy", "sqlglot"))]
    assert loaded == ["layout.cli", "layout.errors"], loaded


def test_python_dash_m_runs_the_command_line():
    done = subprocess.run([sys.executable, "-m", "layout.cli", "report", "--help"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == EXIT_OK and done.stdout.startswith("usage: lakesort report"), done.stderr
