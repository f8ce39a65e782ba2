"""The documentation site (docs/, mkdocs.yml) builds with `mkdocs build --strict`: every link and anchor
resolves, the Reference pages are generated from the code (docs/hooks/reference.py), a new user reaches
"onboard my table" and "deploy on several machines" in one click from the navigation, the README stays short,
and no page speaks of issue numbers, of the repository's outside, or of paths of the machine it was built on.
No JVM: the fast tier."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MKDOCS = Path(sys.executable).with_name("mkdocs")
README_MAX_LINES = 150
# One click from the navigation: (nav title, page).
ONE_CLICK = {"Onboard a table": "how-to/onboard-a-table.md",
             "Deploy on several machines": "how-to/deploy-on-several-machines.md"}
FORBIDDEN = [
    (re.compile(r"issue\s*#\s*\d*|#\d{2,}\b", re.IGNORECASE), "an issue number"),
    (re.compile(r"\.\./shared"), "a path outside the repository"),
    (re.compile(r"(?<![\w.])/(work|tmp|root|home/\w+)/"), "a path of the machine"),
    (re.compile(r"this machine", re.IGNORECASE), "the machine the docs were written on"),
]


def _hook():
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS / "hooks" / "reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return _hook().pages()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {"NO_MKDOCS_2_WARNING": "1", "PATH": os.environ.get("PATH", "")}
    run = subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(out)], check=False, cwd=ROOT,
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stderr[-4000:]}"
    return out


def _nav() -> list:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    # strict and every validation at warn (with --strict: an error), broken anchors included
    assert config.get("strict") is True
    assert config["validation"]["anchors"] == "warn" and config["validation"]["unrecognized_links"] == "warn"
    return config["nav"]


def test_the_site_builds_strictly(site):
    assert (site / "index.html").is_file()
    for page in ("reference/cli", "reference/table-spec", "reference/settings", "reference/metrics-tables",
                 "reference/exit-codes", "architecture", "benchmarks"):
        assert (site / page / "index.html").is_file(), page


def test_onboarding_and_deploying_are_one_click_from_the_navigation(site):
    top = {}
    for entry in _nav():
        (title, value), = entry.items()
        for sub in value if isinstance(value, list) else [{title: value}]:
            (sub_title, page), = sub.items()
            top[sub_title] = page
    home = (site / "index.html").read_text(encoding="utf-8")
    for title, page in ONE_CLICK.items():
        assert top.get(title) == page, f"nav: {title!r} -> {page} within a top-level section"
        url = page.removesuffix(".md") + "/"
        assert f'href="{url}"' in home, f"the home page's navigation links {url}"


def test_the_readme_is_short_and_points_into_the_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES
    for needle in ("make demo", "make test", "make check", "docs/"):
        assert needle in readme


def test_no_page_speaks_of_issues_the_outside_or_the_machine(generated):
    pages = {p.relative_to(DOCS).as_posix(): p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md")}
    pages.update(generated)
    pages["README.md"] = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in ("docker/README.md", "dags/README.md", "jobs/README.md", "tests/README.md",
                 "testbed/README.md"):
        pages[name] = (ROOT / name).read_text(encoding="utf-8")
    for name, text in pages.items():
        for pattern, what in FORBIDDEN:
            if "/README.md" in name and what != "a path outside the repository":
                continue  # the folders' READMEs, for developers, may cite upstream issues and container paths
            match = pattern.search(text)
            assert match is None, f"{name}: {what}: {match.group(0)!r}"


def test_the_cli_reference_has_every_command_and_flag(generated):
    from layout.cli import build_parser

    page = generated["reference/cli.md"]
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, sub in subparsers.choices.items():
        section = page.split(f"## lakesort {name}\n", 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            for flag in action.option_strings:
                assert f"`{flag}" in section or f", {flag}" in section, f"lakesort {name} {flag}"


def test_the_settings_reference_has_every_variable(generated):
    from layout.settings import variables

    for var in variables().values():
        assert f"`{var}`" in generated["reference/settings.md"], var


def test_the_spec_reference_has_every_key_and_property(generated):
    from layout.registry.keys import PROPERTY_OF
    from layout.spec.schema import table_spec_schema

    page = generated["reference/table-spec.md"]
    for key in table_spec_schema()["properties"]:
        assert f"| `{key}` |" in page, key
    for key, prop in PROPERTY_OF.items():
        assert re.search(rf"\| `{re.escape(key)}` \|.*\| `{re.escape(prop)}` \|", page), prop


def test_the_metrics_reference_has_every_column(generated):
    hook = _hook()
    page = generated["reference/metrics-tables.md"]
    for name, _, fields, _ in hook.metrics_tables():
        section = page.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
        for column, _, _ in fields:
            assert f"| `{column}` |" in section, f"{name}.{column}"


def test_the_license_matches_pyproject():
    import tomllib

    license_id = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert license_id == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
