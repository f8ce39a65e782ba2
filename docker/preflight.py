#!/usr/bin/env python3
"""lakesort-preflight: the stack's first one-shot service (`preflight` in compose.yaml). Every other service
waits for it to exit 0, so the stack refuses to start while its secrets are compose.yaml's public defaults.

    lakesort-preflight                          check the secrets, then make Spark's (the `preflight` service)
    lakesort-preflight --airflow-passwords F    give every Airflow user a password in F (docker/init.sh)
    python3 docker/preflight.py --write-env docker/.env    generate the secrets once, on the host

Why a service and not compose's `${NAME:?message}`: a required variable fails every compose command, `down`
and `logs` included, and cannot be waived for a laptop (LAKESORT_LOCAL=1). Only the standard library: it runs
in the image and, for --write-env, on the host's own python3.

No secret is ever printed: messages name variables and files, never values (tests/test_docker_security.py
runs this script and looks for the values in its output).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import ipaddress
import json
import os
import secrets
import sys
from pathlib import Path

PROG = "lakesort-preflight"
MIN_LENGTH = 16
# Every secret compose.yaml takes from the environment: its fallback there (public: it is in the repository),
# and what it guards. tests/test_docker_security.py keeps the fallbacks equal to compose.yaml's.
SECRETS = {
    "POSTGRES_PASSWORD": ("lakesort", "Postgres: Airflow's metadata and the Iceberg catalog"),
    "AIRFLOW_JWT_SECRET": ("lakesort-local-jwt-secret-change-me-0123456789",
                           "signs the tokens of Airflow's API and of its task processes"),
    "AIRFLOW_SECRET_KEY": ("lakesort-local-secret-key-change-me-0123456789", "signs Airflow's UI sessions"),
    "AIRFLOW_FERNET_KEY": ("", "encrypts Airflow's connections and variables in its database"),
    "S3_SECRET_ACCESS_KEY": ("lakesort-local-secret-change-me", "the object store's key (object-store profile)"),
}
# Spark's RPC secret (spark.authenticate) is no variable: made here once, in the `secrets` volume.
SECRETS_DIR = Path(os.environ.get("LAKESORT_SECRETS_DIR", "/opt/lakesort/secrets"))
SPARK_SECRET = "spark-auth-secret"
SPARK_CONF = "spark-conf"  # the SPARK_CONF_DIR every lakesort service reads
# The checked-in spark-defaults.conf must turn these on: the secret alone authenticates nothing.
SPARK_REQUIRED = {"spark.authenticate": "true", "spark.network.crypto.enabled": "true"}


def fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 1


def new_value(name: str) -> str:
    if name == "AIRFLOW_FERNET_KEY":
        return base64.urlsafe_b64encode(os.urandom(32)).decode()
    # Hex: the Postgres password sits inside URIs (user:password@host), where it needs no escaping.
    return secrets.token_hex(32)


def problem(name: str, value: str) -> str | None:
    """Why `value` is no secret for `name` (None: it will do)."""
    default = SECRETS[name][0]
    if not value:
        return "empty"
    if value == default or "change-me" in value:
        return "compose.yaml's public default"
    if name == "AIRFLOW_FERNET_KEY":
        try:
            if len(base64.urlsafe_b64decode(value.encode())) != 32:
                raise ValueError
        except (binascii.Error, ValueError):
            return "not a Fernet key (32 url-safe base64-encoded bytes)"
    elif len(value) < MIN_LENGTH:
        return f"shorter than {MIN_LENGTH} characters"
    return None


def loopback(bind: str) -> bool:
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind.strip("[]")).is_loopback
    except ValueError:
        return False


# What the stack publishes on LAKESORT_BIND with no authentication of its own: reachable by anyone who can reach
# the address. Beyond loopback only with LAKESORT_EXPOSE=1, the operator's word that something else (a firewall,
# an authenticating proxy) guards them.
UNAUTHENTICATED = ("the Spark web UIs (master, workers, the driver's: jobs, their configuration, kill buttons)",
                   "with the object-store profile, Iceberg's REST catalog, which vends the object store's keys "
                   "with every table it loads, and the S3 server")


def check(env: dict[str, str]) -> int:
    """The variables of SECRETS present in `env` (each service passes the ones it uses) against their defaults;
    then what LAKESORT_BIND would expose."""
    local = env.get("LAKESORT_LOCAL", "") == "1"
    bind = env.get("LAKESORT_BIND", "127.0.0.1")
    if not loopback(bind) and env.get("LAKESORT_EXPOSE", "") != "1":
        return fail(f"refusing to start: LAKESORT_BIND={bind} publishes services that have no login of their own "
                    f"beyond this machine: {'; '.join(UNAUTHENTICATED)}. Unset LAKESORT_BIND (127.0.0.1) and reach "
                    "them through an SSH tunnel, or guard them (a firewall, an authenticating proxy) and set "
                    "LAKESORT_EXPOSE=1 (docker/README.md, \"Secrets\").")
    weak = {name: why for name in SECRETS if name in env and (why := problem(name, env[name]))}
    if local and weak:
        if not loopback(bind):
            return fail(f"LAKESORT_LOCAL=1 keeps the public default secrets, so it publishes the ports on a loopback "
                        f"address only, and LAKESORT_BIND={bind} is not one. Either unset LAKESORT_BIND (127.0.0.1), "
                        "or unset LAKESORT_LOCAL and set your own secrets (docker/README.md, \"Secrets\").")
        print(f"{PROG}: LAKESORT_LOCAL=1: starting with default secrets ({', '.join(sorted(weak))}), ports on "
              f"{bind} only. For this machine alone.")
        return 0
    if not weak:
        names = ", ".join(sorted(name for name in SECRETS if name in env))
        exposed = "" if loopback(bind) else " (LAKESORT_EXPOSE=1: the services without a login are reachable too)"
        print(f"{PROG}: secrets set ({names}); ports published on {bind}{exposed}")
        return 0
    lines = [f"refusing to start: {len(weak)} secret(s) not set."]
    lines += [f"  {name}: {why} ({SECRETS[name][1]})" for name, why in sorted(weak.items())]
    lines += [("Generate them once, from the repository root (appends what is missing to docker/.env, mode 600, and "
              "prints no value):"),
              "    python3 docker/preflight.py --write-env docker/.env",
              ("then run `docker compose up -d` again. On a laptop that nothing else can reach, keep the defaults "
              "instead: put LAKESORT_LOCAL=1 in docker/.env (or in the environment of every compose command)."),
              ("(POSTGRES_PASSWORD is read when the Postgres volume is created: for a stack that already has one, "
              "docker/README.md, \"Secrets\", says how to change it.)")]
    return fail("\n".join(lines))


def write_private(path: Path, text: str) -> None:
    """`text` into `path`, readable by its owner only, replaced in one rename (a reader never sees half of it)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def spark_secret(directory: Path) -> str:
    """Spark's RPC secret: made once (the master, the workers and every driver must share it), then reused."""
    path = directory / SPARK_SECRET
    if not path.exists():
        write_private(path, secrets.token_hex(32) + "\n")
        print(f"{PROG}: made Spark's RPC secret ({path})")
    return path.read_text().strip()


def spark_conf(source: Path, directory: Path) -> Path:
    """The SPARK_CONF_DIR of the stack: the checked-in one's files, and its spark-defaults.conf with the secret.
    A file, not a --conf or -D option: those are command lines (`ps`, the Airflow task log of spark-submit).
    Spark standalone reads no secret file (spark.authenticate.secret.file is for Kubernetes only), so the
    master, the workers and spark-submit all read it from spark-defaults.conf; the workers hand it to their
    executors in an environment variable."""
    defaults = source / "spark-defaults.conf"
    settings = dict(line.split(None, 1) for line in defaults.read_text().splitlines()
                    if line.strip() and not line.lstrip().startswith("#"))
    off = [key for key, value in SPARK_REQUIRED.items() if settings.get(key, "").strip() != value]
    if off:
        raise SystemExit(fail(f"{defaults}: set {', '.join(f'{k} {SPARK_REQUIRED[k]}' for k in off)}: Spark's RPC must "
                              "be authenticated and encrypted"))
    if "spark.authenticate.secret" in settings:
        raise SystemExit(fail(f"{defaults}: holds spark.authenticate.secret; remove it: the secret is made in the "
                              "`secrets` volume, never written into the repository"))
    secret = spark_secret(directory)
    target = directory / SPARK_CONF
    target.mkdir(mode=0o700, exist_ok=True)
    for path in source.iterdir():
        if path.is_file() and path.name != "spark-defaults.conf":
            write_private(target / path.name, path.read_text())
    write_private(target / "spark-defaults.conf",
                  defaults.read_text().rstrip("\n") + "\n\n# Added by lakesort-preflight from the `secrets` volume.\n"
                  f"spark.authenticate.secret       {secret}\n")
    print(f"{PROG}: SPARK_CONF_DIR {target}: {defaults} with Spark's RPC secret")
    return target


def airflow_passwords(path: Path, users: str) -> int:
    """A password for every user of AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS that has none in `path`, before
    the api-server starts: Airflow's simple auth manager would make them itself, and print them in its log."""
    names = [item.split(":")[0].strip() for item in users.split(",") if item.strip()]
    passwords = json.loads(path.read_text() or "{}") if path.exists() else {}
    added = [name for name in names if name not in passwords]
    for name in added:
        passwords[name] = secrets.token_urlsafe(18)
    if added or not path.exists():
        write_private(path, json.dumps(passwords) + "\n")
    else:
        path.chmod(0o600)
    said = f"new password(s) for {', '.join(added)}" if added else "every user has a password"
    print(f"{PROG}: Airflow users {', '.join(names)}: {said}, in {path} (read it there; it is never printed)")
    return 0


def write_env(path: Path) -> int:
    """Append a fresh value for every secret that `path` (a compose .env file) does not set yet."""
    text = path.read_text() if path.exists() else ""
    present = {line.split("=", 1)[0].strip() for line in text.splitlines() if "=" in line and not line.startswith("#")}
    missing = [name for name in SECRETS if name not in present]
    if missing:
        lines = [f"{name}={new_value(name)}" for name in missing]
        body = (text.rstrip("\n") + "\n" if text else "") + "# Generated by docker/preflight.py --write-env\n"
        write_private(path, body + "\n".join(lines) + "\n")
    else:
        path.chmod(0o600)
    print(f"{path}: {'added ' + ', '.join(missing) if missing else 'every secret is already set'} (mode 600)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-env", type=Path, metavar="FILE", help="generate the missing secrets into FILE")
    parser.add_argument("--airflow-passwords", type=Path, metavar="FILE",
                        help="give every simple-auth-manager user a password in FILE")
    parser.add_argument("--check-only", action="store_true", help="check the secrets; make no Spark secret")
    args = parser.parse_args(argv)
    if args.write_env:
        return write_env(args.write_env)
    if args.airflow_passwords:
        return airflow_passwords(args.airflow_passwords,
                                 os.environ.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "admin:admin"))
    status = check(dict(os.environ))
    if status or args.check_only:
        return status
    source = Path(os.environ.get("LAKESORT_SPARK_CONF_SOURCE", "/opt/lakesort/spark-conf"))
    spark_conf(source, SECRETS_DIR)
    return 0


if __name__ == "__main__":
    sys.exit(main())
