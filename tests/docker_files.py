"""Reading docker/: compose.yaml as Compose interpolates it, the Dockerfile's instructions, the lock's closure
(the helpers of tests/test_docker*.py)."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"
OBJECT_STORE_ENV = DOCKER / "object-store.env"
# The object-store profile's servers, from their own pinned images;
# every other service but postgres runs lakesort's.
OBJECT_STORE_SERVERS = {"s3": "motoserver/moto", "iceberg-rest": "apache/iceberg-rest-fixture"}


def interpolate(value: object, env: dict[str, str] | None = None) -> str:
    """A compose value as `up` sees it: ${NAME:-default} -> env's NAME if set and not empty, else default
    (nested defaults resolved first, as Compose does);
    $$ -> $. `env` stands for .env or --env-file (None: none)."""
    env = env or {}
    text = str(value).replace("$$", "\0")

    def one(match: re.Match) -> str:
        token = match.group(0)
        name, sep, default = re.fullmatch(r"\$\{(\w+)(:?-)?(.*)\}", token, re.DOTALL).groups()
        assert sep, (
            f"{value!r}: give ${{{name}}} a default (${{{name}:-value}}) so the stack starts without a .env")
        given = env.get(name)
        return given if given or (given is not None and sep == "-") else default

    while True:  # innermost first: a default may hold ${...} itself
        text, n = re.subn(r"\$\{[^{}]*\}", one, text)
        if not n:
            return text.replace("\0", "$")


def parse_dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, buf = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if line.startswith("#") or (not buf and not line):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        op, _, rest = (buf + line).partition(" ")
        out.append((op.upper(), rest.strip()))
        buf = ""
    return out


def instr(dockerfile, name: str) -> list[str]:
    return [args for op, args in dockerfile if op == name]


def image_env(dockerfile) -> dict[str, str]:
    env = {}
    for args in instr(dockerfile, "ENV"):
        for item in shlex.split(args):
            key, _, value = item.partition("=")
            env[key] = value
    return env


def env_of(service: dict, given: dict[str, str] | None = None) -> dict[str, str]:
    """The service's environment, interpolated with `given` (an --env-file's variables) or the defaults."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: interpolate(v, given) for k, v in env.items()}


def command_of(service: dict) -> list[str]:
    cmd = service.get("command") or []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def mounts(service: dict) -> dict[str, str]:
    """target -> source for the service's volumes (short syntax)."""
    out = {}
    for volume in service.get("volumes") or []:
        source, target, *_ = interpolate(volume).split(":")
        out[target] = source
    return out


def project_image(compose) -> str:
    return interpolate(compose["x-lakesort"]["image"])


def read_env_file(path: Path) -> dict[str, str]:
    """NAME=value lines of a Compose --env-file (comments and blank lines skipped)."""
    pairs = [line.split("=", 1) for line in path.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    return {name.strip(): value.strip() for name, value in pairs}


def project_services(services, compose) -> dict[str, dict]:
    return {n: s for n, s in services.items() if interpolate(s.get("image", "")) == project_image(compose)}


def airflow_services(services) -> dict[str, dict]:
    return {n: s for n, s in services.items()
            if "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in (s.get("environment") or {})}


def service_running(services, *command: str) -> str:
    found = [n for n, s in services.items() if command_of(s)[: len(command)] == list(command)]
    assert len(found) == 1, f"exactly one service must run {' '.join(command)!r}; found {found or 'none'}"
    return found[0]


def workdir(dockerfile) -> str:
    return instr(dockerfile, "WORKDIR")[-1]


def dag_sources() -> list[str]:
    return [p.read_text() for p in sorted((REPO / "dags").rglob("*.py"))]


def locked_closure(extras: set[str]) -> set[str]:
    """Every package uv.lock installs for the project with these extras (markers ignored)."""
    packages: dict[str, list[dict]] = {}
    for package in tomllib.loads((REPO / "uv.lock").read_text())["package"]:
        packages.setdefault(package["name"], []).append(package)
    todo, seen = [("lakesort", frozenset(extras))], set()
    while todo:
        name, wanted = todo.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        for package in packages.get(name, []):
            deps = list(package.get("dependencies", []))
            for extra in wanted:
                deps += package.get("optional-dependencies", {}).get(extra, [])
            todo += [(d["name"], frozenset(d.get("extra", []))) for d in deps]
    return {name for name, _ in seen}
