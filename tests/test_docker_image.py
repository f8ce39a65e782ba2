"""docker/Dockerfile: uv at the Makefile's version, the Python packages from uv.lock as `make test`
installs them, on the locked Python version with Java 17; the Spark class archive built as `make setup`
builds it; every COPY a file of the repository the .dockerignore lets through, airflow-init's script among
them. No Docker engine is needed: the Dockerfile is read as text, compose.yaml parsed.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from docker_files import (
    COMPOSE,
    DOCKER,
    DOCKERFILE,
    REPO,
    command_of,
    image_env,
    instr,
    parse_dockerfile,
    workdir,
)

# ---- the files ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict]:
    return compose["services"]


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return parse_dockerfile()


# ---- Dockerfile -----------------------------------------------------------------------------------------


def test_uv_is_the_makefiles_version(dockerfile):
    make = re.search(r"^UV_VERSION\s*:=\s*(\S+)", (REPO / "Makefile").read_text(), re.MULTILINE).group(1)
    args = dict(a.split("=", 1) for a in instr(dockerfile, "ARG") if "=" in a)
    assert args.get("UV_VERSION") == make, (
        f"docker/Dockerfile: ARG UV_VERSION must be {make}, as in the Makefile")
    assert any('"uv==${UV_VERSION}"' in run for run in instr(dockerfile, "RUN")), "install uv==${UV_VERSION}"


def test_python_install_uses_the_lock_of_make_test(dockerfile):
    copies = [a.split() for a in instr(dockerfile, "COPY")]
    assert any("uv.lock" in c and "pyproject.toml" in c for c in copies), "COPY pyproject.toml and uv.lock"
    runs = instr(dockerfile, "RUN")
    syncs = [r for r in runs if "uv sync" in r]
    assert syncs, "install the Python packages with `uv sync`"
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    for run in syncs:
        assert "--frozen" in run, f"`{run}`: add --frozen (install uv.lock as is, as `make setup` does)"
        assert "--no-dev" in run, f"`{run}`: add --no-dev (no test tools in the image)"
        named = set(re.findall(r"--extra[ =](\S+)", run))
        assert named == {"pipeline", "deploy", "lineage"} and named <= extras, (
            f"`{run}`: install --extra pipeline --extra deploy --extra lineage")
    for run in runs:
        assert "uv lock" not in run and "--upgrade" not in run, (
            f"`{run}`: the image must not re-resolve the lock")
        if "pip install" in run and "uv pip install" not in run:
            assert re.search(r'pip install --no-cache-dir "uv==\$\{UV_VERSION\}"', run), (
                f"`{run}`: pip installs only uv")
        if "uv pip install" in run:
            assert "uv export --frozen" in run and "--require-hashes" in run, (
                f"`{run}`: extra packages must come hash-checked from `uv export --frozen` of the same lock")
    env = image_env(dockerfile)
    assert env["UV_PYTHON_DOWNLOADS"] == "never", "as in the Makefile: uv must use the image's Python"
    venv = env["UV_PROJECT_ENVIRONMENT"]
    assert venv == f"{workdir(dockerfile)}/.venv" and env["PATH"].startswith(f"{venv}/bin:"), (
        "the project venv is <WORKDIR>/.venv and comes first on PATH (spark-submit, airflow, lakesort)")


def test_python_version_is_the_locked_one(dockerfile):
    from packaging.specifiers import SpecifierSet

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    locked = {m for e in pyproject["tool"]["uv"]["environments"]
              for m in re.findall(r"python_version == '([\d.]+)'", e)}
    base = instr(dockerfile, "FROM")[0]
    found = re.fullmatch(r"python:(\d+\.\d+)-slim-\w+", base)
    assert found, f"FROM {base}: expected python:<X.Y>-slim-<debian>"
    version = found.group(1)
    assert locked == {version}, f"FROM {base}: uv.lock is locked for Python {sorted(locked)}"
    assert version + ".0" in SpecifierSet(pyproject["project"]["requires-python"])
    env = image_env(dockerfile)
    assert f"/python{version}/site-packages/pyspark" in env["SPARK_HOME"], (
        "SPARK_HOME must be the venv's pyspark")
    assert env["PYSPARK_PYTHON"] == f"{env['UV_PROJECT_ENVIRONMENT']}/bin/python", (
        "executors use the venv's Python")


def test_java_17_is_installed(dockerfile):
    assert any(
        re.search(r"apt-get install .*openjdk-17-jre-headless", r) for r in instr(dockerfile, "RUN")
    ), "install openjdk-17-jre-headless (Spark 4 needs Java 17+)"
    assert image_env(dockerfile)["JAVA_HOME"].endswith("java-17"), (
        "JAVA_HOME must point at the Java 17 install")


def test_the_image_builds_the_spark_class_archive(dockerfile):
    """As `make setup` does (layout.compaction.pipeline.class_archive): every job's driver in the image starts
    from it. It runs Spark, so it comes after the ENV that puts the venv on PATH and names Java."""
    text = DOCKERFILE.read_text()
    runs = [r for r in instr(dockerfile, "RUN") if "spark-archive" in r]
    assert runs and runs[0].startswith("lakesort --quiet spark-archive"), "RUN lakesort --quiet spark-archive"
    assert "|| echo" in runs[0], "as in the Makefile, a failed build only warns"
    assert text.index("JAVA_HOME=") < text.index("RUN lakesort --quiet spark-archive"), (
        "after the ENV naming Java")


def test_copied_files_exist_and_pass_the_dockerignore(dockerfile):
    allowed = [line[1:].rstrip("/") for line in (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
               if line.startswith("!")]
    for args in instr(dockerfile, "COPY"):
        *sources, _target = [a for a in args.split() if not a.startswith("--")]
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: no such file in the repository"
            assert any(source.rstrip("/") == a or source.startswith(a + "/") for a in allowed), (
                f"COPY {source}: docker/Dockerfile.dockerignore leaves it out of the build "
                f"context; add !{source}")


def test_init_script_is_in_the_image(services, dockerfile):
    command = command_of(services["airflow-init"])
    copies = {a.split()[-1]: a.split()[-2] for a in instr(dockerfile, "COPY")}
    on_path = {Path(target).name: source for target, source in copies.items()
               if target.startswith("/usr/local/bin/")}
    source = copies.get(command[0]) or on_path.get(command[0])
    assert source, f"airflow-init runs {command[0]}, which the Dockerfile does not COPY (to /usr/local/bin/)"
    script = REPO / source
    assert os.access(script, os.X_OK), f"{script.relative_to(REPO)} must be executable"
    assert subprocess.run(["bash", "-n", str(script)], check=False, capture_output=True).returncode == 0, (
        "init.sh: syntax error")
    text = script.read_text()
    assert "airflow db migrate" in text and "load_catalog" in text, (
        "init must migrate Airflow and load the catalog")
