"""docker/: the stack is safe by default (issue 39, part 5), checked without a Docker engine.

- every published port binds to LAKESORT_BIND, 127.0.0.1 unless set;
- every service waits for `preflight` (docker/preflight.py), which refuses compose.yaml's default secrets
  unless LAKESORT_LOCAL=1 (run here as the plain script it is, with the defaults and with real values);
- Spark's RPC is authenticated and encrypted, with a secret made once and read from a file,
  never a command line;
- Airflow's API requires a login, and the passwords are made before the api-server could print them;
- no secret appears on a command line or in what the scripts print.
"""

from __future__ import annotations

import ast
import base64
import importlib.util
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from docker_files import (
    COMPOSE,
    DOCKER,
    DOCKERFILE,
    OBJECT_STORE_ENV,
    airflow_services,
    command_of,
    env_of,
    interpolate,
    mounts,
    project_services,
    read_env_file,
    service_running,
)

PREFLIGHT = DOCKER / "preflight.py"
BIND = "LAKESORT_BIND"
BIND_DEFAULT = "${LAKESORT_BIND:-127.0.0.1}"
# the services that run the check, with its arguments
CHECKERS = {"preflight": [], "s3-init": ["--check-only"]}


def load_preflight():
    spec = importlib.util.spec_from_file_location("lakesort_preflight", PREFLIGHT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


preflight = load_preflight()


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict]:
    return compose["services"]


def run_preflight(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """The script as the image runs it: a plain process, with only `env` (no inherited secrets)."""
    return subprocess.run([sys.executable, str(PREFLIGHT), *args], env={"PATH": os.environ["PATH"], **env},
                          check=False, capture_output=True, text=True, timeout=60)


def secret_variables_in_compose() -> dict[str, set[str]]:
    """NAME -> the defaults compose.yaml gives it, for every variable that names a secret."""
    found: dict[str, set[str]] = {}
    for name, default in re.findall(r"\$\{(\w*(?:PASSWORD|SECRET|FERNET)\w*):-([^}]*)\}",
                                    COMPOSE.read_text()):
        found.setdefault(name, set()).add(default)
    return found


def checked_env(services, name: str, given: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the checking service `name` runs with, interpolated as `up` would
    (no .env: defaults)."""
    return {k: v for k, v in env_of(services[name], given).items()
            if k in preflight.SECRETS or k in ("LAKESORT_LOCAL", BIND, "LAKESORT_EXPOSE")}


# ---- ports ----------------------------------------------------------------------------------------------


def test_every_published_port_binds_to_lakesort_bind_defaulting_to_localhost(services):
    published = 0
    for name, service in services.items():
        for port in service.get("ports") or []:
            assert isinstance(port, str), f"{name}: write ports as \"{BIND_DEFAULT}:<host>:<container>\""
            assert port.startswith(BIND_DEFAULT + ":"), (
                f"{name}: {port!r} must publish on {BIND_DEFAULT} (all interfaces only "
                "when LAKESORT_BIND says so)")
            host, host_port, container = interpolate(port).split(":")
            assert host == "127.0.0.1" and host_port.isdigit() and container.isdigit(), f"{name}: {port!r}"
            assert interpolate(port, {BIND: "0.0.0.0"}).startswith("0.0.0.0:"), (
                f"{name}: LAKESORT_BIND is honoured")
            published += 1
        assert "network_mode" not in service, (
            f"{name}: network_mode host would publish every port on every interface")
    assert published >= 5, "the UIs (Airflow, the Spark master, workers and driver) are published"


# ---- the secret check -----------------------------------------------------------------------------------


def test_every_service_waits_for_preflight(services, compose):
    check = services["preflight"]
    assert (command_of(check) == ["lakesort-preflight"] and "depends_on" not in check
            and "restart" not in check)
    assert "ports" not in check and "profiles" not in check, "preflight runs first, with every profile"
    for name, service in services.items():
        if name == "preflight":
            continue
        condition = ((service.get("depends_on") or {}).get("preflight") or {}).get("condition")
        assert condition == "service_completed_successfully", (
            f"{name}: depend on preflight with condition service_completed_successfully (no "
            "start with default secrets)")
    copies = {a.split()[-1]: a.split()[-2]
              for a in re.findall(r"^COPY (.+)$", DOCKERFILE.read_text(), re.MULTILINE)}
    assert copies.get("/usr/local/bin/lakesort-preflight") == "docker/preflight.py"
    assert re.search(r"COPY --chmod=0755 docker/preflight\.py", DOCKERFILE.read_text())
    assert "!docker/preflight.py" in (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
    assert os.access(PREFLIGHT, os.X_OK), "docker/preflight.py must be executable"
    assert project_services(services, compose).keys() >= {"preflight", "s3-init"}, (
        "they run the lakesort image")


def test_every_secret_in_compose_is_checked_with_the_same_default(services):
    found = secret_variables_in_compose()
    assert (found.keys()
            >= {"POSTGRES_PASSWORD", "AIRFLOW_JWT_SECRET", "AIRFLOW_SECRET_KEY", "AIRFLOW_FERNET_KEY"})
    for name, defaults in found.items():
        assert name in preflight.SECRETS, (
            f"compose.yaml takes secret {name} from the environment; preflight.py ignores it")
        assert defaults == {preflight.SECRETS[name][0]}, (
            f"{name}: compose.yaml's default(s) {defaults} differ from preflight.py's "
            f"{preflight.SECRETS[name][0]!r}")
        checkers = [c for c in CHECKERS if name in (services[c].get("environment") or {})]
        assert checkers, (
            f"{name}: pass it to preflight (or, for the object-store profile only, s3-init) to be checked")
    assert command_of(services["preflight"]) == ["lakesort-preflight"]
    s3_init = command_of(services["s3-init"])
    assert s3_init[:2] == ["bash", "-c"] and s3_init[2].startswith("lakesort-preflight --check-only && "), (
        "s3-init: check the store's key before it creates the bucket")
    for checker in CHECKERS:
        env = services[checker]["environment"]
        assert env["LAKESORT_LOCAL"] == "${LAKESORT_LOCAL:-0}" and env[BIND] == BIND_DEFAULT, checker
    # s3-init's keys are the ones iceberg-rest holds, so checking them there checks the catalog's.
    rest = services["iceberg-rest"]["environment"]
    assert (services["s3-init"]["environment"]["S3_SECRET_ACCESS_KEY"]
            == rest["CATALOG_S3_SECRET__ACCESS__KEY"])


def test_the_defaults_are_refused_with_a_message_naming_the_variables_and_the_fix(services):
    for checker, args in CHECKERS.items():
        env = checked_env(services, checker)
        done = run_preflight(env, *args)
        assert done.returncode == 1, (
            f"{checker}: the stack must not start with compose.yaml's default secrets")
        for name in preflight.SECRETS.keys() & env.keys():
            assert re.search(rf"^\s+{name}: ", done.stderr, re.MULTILINE), (
                f"{checker}: the message names {name}")
        assert "python3 docker/preflight.py --write-env docker/.env" in done.stderr
        assert "LAKESORT_LOCAL=1" in done.stderr
        # (the Postgres default, `lakesort`, is in every line: too short to look for)
        for name, value in env.items():
            if name in preflight.SECRETS and len(value) >= 12:
                assert value not in done.stdout + done.stderr, f"{checker}: printed the value of {name}"


@pytest.mark.parametrize(("name", "value", "why"), [
    ("AIRFLOW_JWT_SECRET", "", "empty"),
    ("AIRFLOW_JWT_SECRET", "short-secret", "shorter than 16"),
    ("AIRFLOW_SECRET_KEY", "my-own-change-me-secret-0123456789", "public default"),
    ("POSTGRES_PASSWORD", "lakesort", "public default"),
    ("AIRFLOW_FERNET_KEY", "not-a-fernet-key-but-long-enough", "not a Fernet key"),
    ("AIRFLOW_FERNET_KEY", base64.urlsafe_b64encode(b"x" * 16).decode(), "not a Fernet key"),
])
def test_weak_values_are_refused(tmp_path, name, value, why):
    env = good_env(tmp_path) | {name: value}
    done = run_preflight(env, "--check-only")
    assert done.returncode == 1 and re.search(rf"{name}: [^\n]*{why}", done.stderr), done.stderr
    if len(value) >= 12:
        assert value not in done.stdout + done.stderr


def good_env(tmp_path: Path) -> dict[str, str]:
    """Secrets as `--write-env` makes them, read back from the file it wrote."""
    env_file = tmp_path / "dot.env"
    done = run_preflight({}, "--write-env", str(env_file))
    assert done.returncode == 0, done.stderr
    values = read_env_file(env_file)
    for value in values.values():
        assert value not in done.stdout + done.stderr, "--write-env printed a secret"
    return values


def test_write_env_makes_every_secret_once_in_a_private_file(tmp_path):
    values = good_env(tmp_path)
    env_file = tmp_path / "dot.env"
    assert values.keys() == preflight.SECRETS.keys()
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600, "the .env holds secrets: mode 600"
    assert all(preflight.problem(name, value) is None for name, value in values.items())
    assert len(set(values.values())) == len(values), "every secret is its own"
    env_file.write_text("# mine\nPOSTGRES_PASSWORD=kept-as-it-is-0123456789\n")
    assert run_preflight({}, "--write-env", str(env_file)).returncode == 0
    again = read_env_file(env_file)
    assert again["POSTGRES_PASSWORD"] == "kept-as-it-is-0123456789" and again.keys() == values.keys()
    assert (again["AIRFLOW_JWT_SECRET"] != values["AIRFLOW_JWT_SECRET"]
            and env_file.read_text().startswith("# mine\n"))


def test_real_secrets_start_the_stack_and_spark_gets_its_secret_from_a_file(tmp_path, services):
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir(mode=0o700)
    env = good_env(tmp_path)
    source = DOCKER / "spark"
    run_env = env | {"LAKESORT_SECRETS_DIR": str(secrets_dir), "LAKESORT_SPARK_CONF_SOURCE": str(source)}
    done = run_preflight(run_env)
    assert done.returncode == 0, done.stderr
    spark_secret = (secrets_dir / preflight.SPARK_SECRET).read_text().strip()
    assert len(spark_secret) >= 32
    conf = secrets_dir / preflight.SPARK_CONF / "spark-defaults.conf"
    written = dict(line.split(None, 1) for line in conf.read_text().splitlines()
                   if line and not line.startswith("#"))
    checked_in = dict(line.split(None, 1)
                      for line in (source / "spark-defaults.conf").read_text().splitlines()
                      if line and not line.startswith("#"))
    assert written == checked_in | {"spark.authenticate.secret": spark_secret}
    for path in (conf, secrets_dir / preflight.SPARK_SECRET):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, f"{path.name}: readable by its owner only"
    for value in [*env.values(), spark_secret]:
        assert value not in done.stdout + done.stderr, "preflight printed a secret"
    # Made once: a second `up` keeps the secret the running master and workers hold.
    assert run_preflight(run_env).returncode == 0
    assert (secrets_dir / preflight.SPARK_SECRET).read_text().strip() == spark_secret
    # The object-store profile's conf, chosen by STACK_SPARK_CONF_DIR, gets the same treatment.
    profile_source = env_of(services["preflight"],
                            read_env_file(OBJECT_STORE_ENV))["LAKESORT_SPARK_CONF_SOURCE"]
    mounted = {t: s for t, s in mounts(services["preflight"]).items() if s == "./spark"}
    (target,) = mounted
    profile_dir = DOCKER / "spark" / profile_source.removeprefix(target).lstrip("/")
    done = run_preflight(run_env | {"LAKESORT_SPARK_CONF_SOURCE": str(profile_dir)})
    assert done.returncode == 0, done.stderr
    assert ("spark.jars" in conf.read_text()
            and f"spark.authenticate.secret       {spark_secret}" in conf.read_text())


def test_local_mode_keeps_the_defaults_on_loopback_only(services):
    env = checked_env(services, "preflight")
    assert env["LAKESORT_LOCAL"] == "0" and env[BIND] == "127.0.0.1", "not local, on 127.0.0.1: the defaults"
    done = run_preflight(env | {"LAKESORT_LOCAL": "1"}, "--check-only")
    assert done.returncode == 0 and "LAKESORT_LOCAL=1" in done.stdout, done.stderr
    for bind in ("0.0.0.0", "192.168.1.20", "::"):
        done = run_preflight(env | {"LAKESORT_LOCAL": "1", BIND: bind}, "--check-only")
        assert done.returncode == 1 and f"LAKESORT_BIND={bind}" in done.stderr, (
            "default secrets on the network")
    for bind in ("127.0.0.1", "::1", "localhost"):
        assert run_preflight(env | {"LAKESORT_LOCAL": "1", BIND: bind}, "--check-only").returncode == 0
    for other in ("true", "yes", "0", ""):
        assert run_preflight(env | {"LAKESORT_LOCAL": other}, "--check-only").returncode == 1, (
            f"LAKESORT_LOCAL={other}")


def test_a_bind_beyond_loopback_exposes_nothing_without_a_login_unless_lakesort_expose_says_so(tmp_path,
                                                                                              services):
    for name in ("preflight", "s3-init"):  # the checks of the stack and of the object-store profile
        assert checked_env(services, name)["LAKESORT_EXPOSE"] == "0", f"{name}: LAKESORT_EXPOSE not passed"
    env = good_env(tmp_path)
    for bind in ("0.0.0.0", "192.168.1.20", "[::]"):  # strong secrets are not enough
        done = run_preflight(env | {BIND: bind}, "--check-only")
        assert done.returncode == 1, done.stdout
        assert f"LAKESORT_BIND={bind}" in done.stderr and "LAKESORT_EXPOSE=1" in done.stderr
        assert "Spark web UIs" in done.stderr and "REST catalog" in done.stderr
        done = run_preflight(env | {BIND: bind, "LAKESORT_EXPOSE": "1"}, "--check-only")
        assert done.returncode == 0 and "LAKESORT_EXPOSE=1" in done.stdout, done.stderr
    for bind in ("127.0.0.1", "::1", "localhost"):
        assert run_preflight(env | {BIND: bind}, "--check-only").returncode == 0
    # default secrets stay on loopback whatever LAKESORT_EXPOSE says
    done = run_preflight({"LAKESORT_LOCAL": "1", BIND: "0.0.0.0", "LAKESORT_EXPOSE": "1",
                          "POSTGRES_PASSWORD": "lakesort"}, "--check-only")
    assert done.returncode == 1, done.stdout


# ---- Spark ----------------------------------------------------------------------------------------------


def spark_confs() -> list[Path]:
    return sorted((DOCKER / "spark").rglob("spark-defaults.conf"))


def test_spark_rpc_is_authenticated_and_encrypted_in_every_conf():
    assert len(spark_confs()) == 2, "the base conf and the object-store profile's"
    for path in spark_confs():
        settings = dict(line.split(None, 1) for line in path.read_text().splitlines()
                        if line.strip() and not line.startswith("#"))
        for key, value in preflight.SPARK_REQUIRED.items():
            assert settings.get(key, "").strip() == value, f"{path.relative_to(DOCKER)}: set {key} {value}"
        assert "spark.authenticate.secret" not in settings, "the secret never lives in the repository"
    assert preflight.SPARK_REQUIRED == {"spark.authenticate": "true", "spark.network.crypto.enabled": "true"}


def test_preflight_refuses_a_conf_without_authentication(tmp_path):
    source, secrets_dir = tmp_path / "conf", tmp_path / "secrets"
    source.mkdir()
    secrets_dir.mkdir()
    (source / "spark-defaults.conf").write_text("spark.authenticate "
                                                "false\nspark.network.crypto.enabled true\n")
    env = (good_env(tmp_path)
           | {"LAKESORT_SECRETS_DIR": str(secrets_dir), "LAKESORT_SPARK_CONF_SOURCE": str(source)})
    done = run_preflight(env)
    assert done.returncode == 1 and "spark.authenticate true" in done.stderr
    (source / "spark-defaults.conf").write_text(
        "spark.authenticate true\nspark.network.crypto.enabled true\nspark.authenticate.secret oops\n")
    done = run_preflight(env)
    assert (done.returncode == 1 and "holds spark.authenticate.secret" in done.stderr
            and "oops" not in done.stderr)


def test_every_spark_process_reads_the_conf_dir_preflight_writes(services, compose):
    """The master and the workers (Master/Worker load SPARK_CONF_DIR's spark-defaults.conf), the drivers in
    the Airflow tasks and `lakesort compact` (spark-submit): one SPARK_CONF_DIR, in the `secrets` volume."""
    target = str(preflight.SECRETS_DIR / preflight.SPARK_CONF)
    for name, service in project_services(services, compose).items():
        assert env_of(service)["SPARK_CONF_DIR"] == target, f"{name}: SPARK_CONF_DIR must be {target}"
        volume = [v for v in service["volumes"] if v.startswith("secrets:")]
        expected = (f"secrets:{preflight.SECRETS_DIR}" if name == "preflight"
                    else f"secrets:{preflight.SECRETS_DIR}:ro")
        assert volume == [expected], (
            f"{name}: mount the `secrets` volume as {expected} (only preflight writes it)")
    assert "secrets" in compose["volumes"]
    spark = [service_running(services, "spark-class", "org.apache.spark.deploy.master.Master")]
    spark += [n for n, s in services.items()
              if command_of(s)[:2] == ["spark-class", "org.apache.spark.deploy.worker.Worker"]]
    assert set(spark) <= set(project_services(services, compose)), "the master and workers read the same conf"
    assert "/opt/lakesort/secrets" in DOCKERFILE.read_text(), (
        "the image owns the volume's mount point (uid 50000)")


# ---- Airflow --------------------------------------------------------------------------------------------

AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"


def test_the_airflow_api_requires_a_login(services):
    for name, service in airflow_services(services).items():
        env = env_of(service)
        assert env["AIRFLOW__CORE__AUTH_MANAGER"] == AUTH_MANAGER, f"{name}: the auth manager is stated"
        assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] == "False", f"{name}: never all-admins"
        users = env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"]
        assert users and all(len(u.split(":")) == 2 for u in users.split(",")), f"{name}: users as name:role"
        passwords = Path(env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
        assert mounts(service).get(str(passwords.parent)) == "airflow-home", (
            f"{name}: the passwords file lives in the airflow-home volume (init writes it, "
            "the api-server reads it)")
    text = "\n".join(p.read_text() for p in DOCKER.rglob("*")
                     if p.is_file() and p.suffix in {".yaml", ".env", ".sh", ".py"})
    assert not re.search(r"ALL_ADMINS\W+\"?true", text, re.IGNORECASE), "all-admins mode is never on"
    init = (DOCKER / "init.sh").read_text()
    assert re.search(
        r'lakesort-preflight --airflow-passwords '
        r'\\\n\s+"\$\{AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE',
        init,
    )
    api = service_running(services, "airflow", "api-server")
    assert services[api]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"


def test_airflow_passwords_are_made_before_the_api_server_and_never_printed(tmp_path, monkeypatch, capsys):
    path = tmp_path / "passwords.json"
    env = {"AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,ops:op"}
    done = run_preflight(env, "--airflow-passwords", str(path))
    assert done.returncode == 0, done.stderr
    passwords = json.loads(path.read_text())
    assert passwords.keys() == {"admin", "ops"} and stat.S_IMODE(path.stat().st_mode) == 0o600
    for password in passwords.values():
        assert len(password) >= 16 and password not in done.stdout + done.stderr
    assert run_preflight(env, "--airflow-passwords", str(path)).returncode == 0
    assert json.loads(path.read_text()) == passwords, "kept across restarts"
    # Airflow's own simple auth manager, given that file, has nothing to make and so nothing to print.
    if "airflow" not in sys.modules:  # importing Airflow must not create ~/airflow
        monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS",
                       env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"])
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(path))
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False")
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

    capsys.readouterr()
    SimpleAuthManager().init()
    said = capsys.readouterr()
    assert "Password for user" not in said.out + said.err
    assert json.loads(path.read_text()) == passwords


# ---- no secret on a command line or in a log line --------------------------------------------------------


def test_no_secret_on_a_command_line(services):
    secret_vars = set(preflight.SECRETS) | {"AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY",
                                            "AIRFLOW__CORE__FERNET_KEY", "AWS_SECRET_ACCESS_KEY"}
    for name, service in services.items():
        lines = [command_of(service), service.get("entrypoint") or [],
                 (service.get("healthcheck") or {}).get("test") or []]
        text = " ".join(" ".join(map(str, line)) for line in lines)
        for var in secret_vars:
            assert var not in text, f"{name}: {var} on a command line (visible in `ps` and `docker inspect`)"
        assert "spark.authenticate.secret" not in text and "_SPARK_AUTH_SECRET" not in text, name
        for key, value in env_of(service).items():
            if key.startswith("AIRFLOW_CONN_"):
                assert not re.search(r"secret|password", value, re.IGNORECASE), (
                    f"{name}: {key} holds a secret")
    for text in (DOCKER / "init.sh").read_text(), *(p.read_text() for p in spark_confs()):
        assert "spark.authenticate.secret" not in text.replace("no spark.authenticate.secret", "")


def test_no_secret_in_a_log_line_of_the_scripts():
    """What the scripts print names variables and files only: no formatted value holds a secret. (The runs
    above check the same on the actual output.)"""
    tree = ast.parse(PREFLIGHT.read_text())
    holding = {"secret", "value", "values", "passwords", "text", "body", "env", "lines_of_values"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in {"print", "fail"}:
            for part in ast.walk(node):
                if isinstance(part, ast.FormattedValue):
                    names = {n.id for n in ast.walk(part.value) if isinstance(n, ast.Name)}
                    assert not names & holding, f"preflight.py line {node.lineno} prints {names & holding}"
    for number, line in enumerate((DOCKER / "init.sh").read_text().splitlines(), 1):
        if re.match(r"\s*(echo|printf)\b", line):
            assert not re.search(r"PASSWORD|SECRET|FERNET|_KEY", line), (
                f"init.sh line {number} prints a secret variable")


# ---- documentation --------------------------------------------------------------------------------------


def test_the_readmes_say_how_to_start_safely():
    readme = (DOCKER / "README.md").read_text()
    for needle in ("## Secrets", "python3 docker/preflight.py --write-env docker/.env", "LAKESORT_LOCAL=1",
                   "LAKESORT_BIND=0.0.0.0", "spark.authenticate", "spark.network.crypto.enabled",
                   "docker compose logs preflight", "tests/test_docker_security.py"):
        assert needle in readme, f"docker/README.md: say {needle!r}"
    top = (DOCKER.parent / "README.md").read_text()
    assert "LAKESORT_LOCAL=1" in top, "README.md: where docker is mentioned, say how it starts safely"
