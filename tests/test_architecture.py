"""The house (DESIGN.md): the import contracts of pyproject.toml hold, and the rules they cannot express.

- import-linter's contracts: floors import only downwards, no cycles inside any package, no Spark or
  Airflow in `layout`, the reader library independent of the pipeline, light settings.
- Function-local imports only for heavy optional dependencies (GX, Spark, DataFusion), each with its reason in
  a comment right above it: a local import must never again hide an import cycle.
- The one lazy loading by name: `layout/cli/__init__.py` imports a command's module (`layout.cli.<name>`) when
  the command runs; every command of its table has a module with a `run`, and `import layout.cli` loads none
  of the heavy libraries (pyiceberg, pyarrow, pandas, pydantic, numpy, sqlglot).
- Every `LAKESORT_*` variable is read by `layout.settings` and nowhere else.
- Every package says in its docstring what it owns and what it may import.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from layout.cli import COMMANDS

REPO = Path(__file__).resolve().parents[1]
LAYOUT = REPO / "layout"
# Optional (the `pipeline` extra) and slow to import: imported only where they are used (DataFusion: half a
# second, for the engine check of a measurement only; the report reads the metrics rows without it).
# pyiceberg's catalogs and Arrow I/O: 0.2 s and 0.5 s to import (one run), in every Spark job driver and
# Python worker that imports `layout.catalog` or `layout.compaction.executor.inputs` for their names but never
# loads a catalog or reads a file through pyiceberg.
# boto3 (the `pipeline` extra): S3's batched deletes only (`layout.storage.delete_many`).
# openlineage (the `lineage` extra): `layout.lineage` works, and emits nothing, without it.
LOCAL_IMPORTS_ALLOWED = ("great_expectations", "pyspark", "datafusion", "pyiceberg.catalog",
                         "pyiceberg.io.pyarrow", "boto3", "botocore.config", "botocore.exceptions",
                         "openlineage")
# The Spark job's driver imports pyiceberg's reader (the executors' path for files Spark cannot read as
# Iceberg does) only when a plan has such files: 0.4 s of the job's start, before Spark, otherwise.
# Its readers of delete files likewise, only when a plan applies deletes.
JOB_LOCAL_IMPORTS_ALLOWED = ("layout.compaction.executor.inputs", "layout.compaction.executor.deletes")


def _sources(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py"))


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    assert lint.exists(), f"import-linter is a dev dependency; {lint.name} should be beside {sys.executable}"
    done = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, check=False)
    report = done.stdout + done.stderr
    assert done.returncode == 0, (
        f"an import contract of pyproject.toml [tool.importlinter] is broken:\n{report}")
    kept = re.search(r"Contracts: (\d+) kept, 0 broken", report)
    assert kept and int(kept.group(1)) >= 6, report


def _local_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    module_level = {id(node) for node in tree.body}
    for node in tree.body:
        if isinstance(node, ast.If | ast.Try):  # TYPE_CHECKING blocks and optional imports at the top
            module_level.update(id(n) for n in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in module_level:
            name = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            found.append((node.lineno, name or ""))
    return found


@pytest.mark.parametrize("path", _sources(LAYOUT, REPO / "jobs"), ids=lambda p: str(p.relative_to(REPO)))
def test_local_imports_only_for_heavy_optional_dependencies(path):
    lines = path.read_text().splitlines()
    allowed = (LOCAL_IMPORTS_ALLOWED
               + (JOB_LOCAL_IMPORTS_ALLOWED if path.is_relative_to(REPO / "jobs") else ()))
    for lineno, name in _local_imports(path):
        where = f"{path.relative_to(REPO)}:{lineno}"
        assert name.startswith(allowed), (
            f"{where}: `{name}` is imported inside a function; import it at the top of the module (a local "
            "import of a layout module hides an import cycle: move the code to the floor it belongs on)")
        above = lines[lineno - 2].strip() if lineno >= 2 else ""
        reason = above.startswith(("#", "import ", "from ")) or "#" in lines[lineno - 1]
        assert reason, f"{where}: say in a comment above the local import of `{name}` why it is local"


CLI = LAYOUT / "cli" / "__init__.py"
# What `import layout.cli` must not load: the parser and the dispatch need none of it
# (a command's module does).
HEAVY = ("pyiceberg", "pyarrow", "pandas", "pydantic", "numpy", "sqlglot")


def _loads_by_name(path: Path) -> list[ast.Call]:
    """Calls of importlib.import_module or __import__ (however imported): imports a contract cannot see."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            name = (func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name)
                    else "")
            if name in ("import_module", "__import__"):
                found.append(node)
    return found


@pytest.mark.parametrize("path", _sources(LAYOUT, REPO / "jobs"), ids=lambda p: str(p.relative_to(REPO)))
def test_modules_loaded_by_name_only_by_the_cli_dispatch(path):
    for call in _loads_by_name(path):
        where = f"{path.relative_to(REPO)}:{call.lineno}"
        assert path == CLI, f"{where}: a module imported by name; import it at the top of the module"
        (arg,) = call.args
        by_table = (isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Name)
                    and arg.value.id == "COMMANDS")
        own = (isinstance(arg, ast.Constant) and isinstance(arg.value, str)
               and arg.value.startswith("layout.cli."))
        assert by_table or own, (
            f"{where}: the CLI loads only its own modules by name (COMMANDS[...], layout.cli.*)")


def test_every_command_has_a_module_with_run():
    modules = {p.stem for p in CLI.parent.glob("*.py")} - {"__init__", "__main__", "args"}
    assert sorted(COMMANDS.values()) == sorted(f"layout.cli.{m}" for m in modules), (
        "one module per command in layout/cli/, each in COMMANDS (shared helpers go in layout/cli/args.py)")
    for command, module in COMMANDS.items():
        assert callable(getattr(importlib.import_module(module), "run", None)), (
            f"{module}: no run(args) for {command}")


def test_importing_the_cli_loads_no_heavy_library():
    code = "import sys, layout.cli; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert not heavy, f"`import layout.cli` loads {', '.join(heavy[:10])}: parsing the command line must not"
    # Of layout itself, only the ground floor's exception hierarchy, which the dispatch maps to exit codes.
    ours = sorted(m for m in loaded if m.split(".")[0] == "layout")
    assert ours == ["layout", "layout.cli", "layout.errors"], ours


def test_lakesort_variables_are_read_only_by_settings():
    offenders = []
    for path in _sources(LAYOUT, REPO / "dags", REPO / "jobs"):
        if path == LAYOUT / "settings.py":
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            # Reads only: a DAG may set a variable's default for its tasks (the registry beside it).
            if re.search(r"(environ\.get|getenv)\(\s*[\"']LAKESORT_", line) or \
                    re.search(r"environ\[[\"']LAKESORT_\w*[\"']\](?!\s*=[^=])", line):
                offenders.append(f"{path.relative_to(REPO)}:{lineno}: {line.strip()}")
    assert not offenders, "read LAKESORT_* through layout.settings.settings():\n" + "\n".join(offenders)


@pytest.mark.parametrize("package", sorted(p.parent for p in LAYOUT.rglob("__init__.py")),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_every_package_says_what_it_owns_and_may_import(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    assert len(doc) > 80, f"{package.relative_to(REPO)}/__init__.py: a docstring saying what the package owns"
    assert "may import" in doc.lower(), f"{package.relative_to(REPO)}/__init__.py: say what it may import"
