"""docker/: the compose deployment agrees with its image, the lock, the repository and the DAGs' conventions.

No Docker engine is needed: compose.yaml is parsed and validated by `docker compose config` (Compose v2, which
the test bed builds), the Dockerfile is read as text, and the Airflow Spark hook resolves the connection the
stack defines. The distributed path itself (spark-submit to a standalone master) is tested without Docker by
tests/compaction/test_standalone_cluster.py::test_compaction_on_a_standalone_cluster.

The Dockerfile's own checks are in tests/test_docker_image.py, the object-store profile's in
tests/test_docker_object_store.py, the stack's safe defaults in tests/test_docker_security.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from urllib.parse import urlparse

import pytest
import yaml
from docker_files import (
    COMPOSE,
    DOCKER,
    DOCKERFILE,
    OBJECT_STORE_ENV,
    OBJECT_STORE_SERVERS,
    REPO,
    airflow_services,
    command_of,
    dag_sources,
    env_of,
    interpolate,
    locked_closure,
    mounts,
    parse_dockerfile,
    project_image,
    project_services,
    service_running,
    workdir,
)

from layout.settings import Settings, variables

AIRFLOW_COMMANDS = {"api-server", "scheduler", "dag-processor", "triggerer"}
STANDALONE_TEST = "tests/compaction/test_standalone_cluster.py::test_compaction_on_a_standalone_cluster"
# Conventions the DAGs follow (dags/README.md): the env var naming the Spark connection id.
CONN_ID_VAR = "LAKESORT_SPARK_CONN_ID"
BED_COMPOSE = REPO / ".testbed" / "compose" / "docker-compose"


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


# ---- compose.yaml ---------------------------------------------------------------------------------------


@pytest.mark.integration  # needs the test bed's Compose (make check does not set it up)
def test_compose_file_validates_with_docker_compose():
    # Compose v2 itself validates compose.yaml: `config` needs no daemon. The test bed builds Compose from its
    # Go module (testbed/README.md); a `docker compose` plugin on the machine is used where the bed has none.
    compose = compose_cli()
    for extra in ([], ["--env-file", str(OBJECT_STORE_ENV)]):
        done = subprocess.run([*compose, "-f", str(COMPOSE), *extra, "--profile", "tools", "config", "-q"],
                              check=False, capture_output=True, text=True)
        assert done.returncode == 0, (
            f"docker compose {' '.join(extra)} config rejects docker/compose.yaml:\n{done.stderr}")


def compose_cli() -> list[str]:
    if BED_COMPOSE.exists():
        return [str(BED_COMPOSE)]
    docker = shutil.which("docker")
    if docker is not None and subprocess.run([docker, "compose", "version"], check=False,
                                             capture_output=True).returncode == 0:
        return [docker, "compose"]
    pytest.fail(f"no Docker Compose v2 to validate docker/compose.yaml with: {BED_COMPOSE.relative_to(REPO)} "
                "is missing and `docker compose` is not installed; run `make testbed`", pytrace=False)


def test_every_setting_has_a_default(compose):
    def walk(node):
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str):
            interpolate(node)

    walk(compose)


def test_the_stack_has_its_services(services):
    assert services["postgres"]["image"].startswith("postgres:"), "postgres must run a postgres:<major> image"
    assert "spark-master" in services, (
        "the Spark master service must be called spark-master (the connection's host)")
    service_running(services, "spark-class", "org.apache.spark.deploy.master.Master")
    workers = [n for n, s in services.items()
               if command_of(s)[:2] == ["spark-class", "org.apache.spark.deploy.worker.Worker"]]
    assert len(workers) >= 2, f"the stack needs two Spark workers; found {workers}"
    for command in AIRFLOW_COMMANDS:
        service_running(services, "airflow", command)
    assert "airflow-init" in services, "airflow-init (DB migration, catalog tables) is missing"


def test_lakesort_services_share_one_image_built_from_the_dockerfile(services, compose):
    lakesort = project_services(services, compose)
    expected = {n for n, s in services.items() if n != "postgres" and n not in OBJECT_STORE_SERVERS}
    assert set(lakesort) == expected, (
        f"every service but postgres must run the lakesort image {project_image(compose)!r}: "
        f"{sorted(expected - set(lakesort))} do not")
    for name, service in lakesort.items():
        build = service.get("build")
        assert build == compose["x-lakesort"]["build"], (
            f"{name}: build it like x-lakesort (one image for all)")
        assert (DOCKER / build["context"]).resolve() == REPO, (
            f"{name}: the build context must be the repository root")
        assert (DOCKER / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE, (
            f"{name}: build.dockerfile must be docker/Dockerfile")


def test_warehouse_and_code_are_mounted_at_the_same_paths_everywhere(services, compose, dockerfile):
    root = workdir(dockerfile)
    warehouse_uri = env_of(services["airflow-scheduler"])["PYICEBERG_CATALOG__LAKESORT__WAREHOUSE"]
    warehouse = urlparse(warehouse_uri).path
    assert warehouse_uri.startswith("file://") and warehouse.startswith(root + "/"), (
        f"the catalog warehouse {warehouse_uri!r} must be a file:// path under the image's {root}")
    for name, service in project_services(services, compose).items():
        mounted = mounts(service)
        assert mounted.get(warehouse) == "warehouse", (
            f"{name}: mount the named volume `warehouse` at {warehouse} (the catalog's warehouse path), as "
            "every driver and executor must see the same files at the same path")
        for code in ("dags", "jobs", "layout"):
            assert mounted.get(f"{root}/{code}") == f"../{code}", (
                f"{name}: mount ../{code} at {root}/{code}, where the image installs the project")
        env = env_of(service)
        assert env["PYICEBERG_CATALOG__LAKESORT__WAREHOUSE"] == warehouse_uri, f"{name}: another warehouse"
    for name, service in services.items():
        for source in mounts(service).values():
            if source.startswith("."):
                assert (DOCKER / source).exists(), (
                    f"{name}: mounts {source} (relative to docker/), which does not exist")
            else:
                assert source in compose["volumes"], (
                    f"{name}: named volume {source!r} is not declared under volumes:")


def test_airflow_finds_dags_table_specs_and_report_dir(services, dockerfile):
    root = workdir(dockerfile)
    assert (REPO / "dags" / "tables").is_dir(), "dags/tables (the table specs) must exist"
    for name, service in airflow_services(services).items():
        env, mounted = env_of(service), mounts(service)
        assert env["AIRFLOW__CORE__DAGS_FOLDER"] == f"{root}/dags", (
            f"{name}: DAGS_FOLDER must be the dags mount")
        assert env["LAKESORT_TABLES_DIR"] == f"{root}/dags/tables", (
            f"{name}: LAKESORT_TABLES_DIR must be {root}/dags/tables")
        report_dir = env["LAKESORT_REPORT_DIR"]
        assert mounted.get(report_dir) == "reports", (
            f"{name}: mount the named volume `reports` at LAKESORT_REPORT_DIR ({report_dir})")
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor", f"{name}: the stack runs the LocalExecutor"


def test_airflow_pool_and_work_dir(services):
    init = (DOCKER / "init.sh").read_text()
    assert re.search(r'airflow pools set "\$pool"', init) and "pool=${LAKESORT_POOL:-" in init, (
        "init.sh must create the pool named by LAKESORT_POOL (Airflow never schedules "
        "tasks of a missing pool)")
    defaults = {Settings.model_fields["pool"].default}  # the DAGs' pool: $LAKESORT_POOL
    for name, service in airflow_services(services).items():
        env, mounted = env_of(service), mounts(service)
        assert env.get("LAKESORT_POOL"), (
            f"{name}: set LAKESORT_POOL, the pool airflow-init creates and the DAGs use")
        assert defaults <= {env["LAKESORT_POOL"]}, (
            f"{name}: LAKESORT_POOL differs from the DAGs' default {defaults}")
        work = env.get("LAKESORT_WORK_DIR")
        assert work and mounted.get(work) == "work", (
            f"{name}: LAKESORT_WORK_DIR must be the named volume `work` (run files and table "
            "leases, shared by tasks)")


def test_compose_sets_only_variables_the_code_reads(services):
    code = "\n".join(p.read_text() for folder in ("layout", "jobs", "dags")
                     for p in (REPO / folder).rglob("*.py"))
    code += (DOCKER / "init.sh").read_text() + (DOCKER / "preflight.py").read_text()
    code += " ".join(variables().values())  # layout.settings reads these
    dags = "\n".join(dag_sources())
    for name, service in services.items():
        for var in env_of(service):
            if not var.startswith("LAKESORT_"):
                continue
            if var == CONN_ID_VAR and not dags:
                continue  # the DAGs that read it are not written yet
            assert var in code, (
                f"{name}: sets {var}, which nothing in layout/, jobs/, dags/, init.sh or preflight.py reads")


def test_spark_connection_points_at_the_master(services):
    master = service_running(services, "spark-class", "org.apache.spark.deploy.master.Master")
    master_cmd = command_of(services[master])
    port = int(master_cmd[master_cmd.index("--port") + 1])
    assert master_cmd[master_cmd.index("--host") + 1] == master, f"{master}: --host must be the service name"
    url = f"spark://{master}:{port}"
    for name, service in airflow_services(services).items():
        env = env_of(service)
        conn_id = env.get(CONN_ID_VAR)
        assert conn_id, f"{name}: set {CONN_ID_VAR} (the connection id the DAGs use)"
        conn_var = f"AIRFLOW_CONN_{conn_id.upper()}"
        assert conn_var in env, f"{name}: {CONN_ID_VAR}={conn_id} but {conn_var} is not defined"
        conn = json.loads(env[conn_var])
        # JSON form with the scheme in the host: the URI form loses spark:// (apache/airflow #46169).
        assert (
            conn["conn_type"] == "spark" and conn["host"] == f"spark://{master}" and conn["port"] == port
        ), f"{name}: {conn_var} must be {{'conn_type': 'spark', 'host': 'spark://{master}', 'port': {port}}}"
        assert conn.get("extra", {}).get("deploy-mode") == "client", (
            f"{name}: {conn_var} needs deploy-mode client (the plan and manifest files "
            "live beside the driver)")
        assert env["LAKESORT_SPARK_MASTER"] == url, f"{name}: LAKESORT_SPARK_MASTER must be {url}"
    for name, service in services.items():
        cmd = command_of(service)
        if cmd[:2] == ["spark-class", "org.apache.spark.deploy.worker.Worker"]:
            assert cmd[-1] == url, f"{name}: a worker must register with {url}"
            assert service["depends_on"][master]["condition"] == "service_healthy", (
                f"{name}: start after {master}")


def test_the_spark_hook_resolves_the_master(services, monkeypatch, tmp_path):
    if "airflow" not in sys.modules:  # importing Airflow must not create ~/airflow
        monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    env = env_of(services["airflow-scheduler"])
    conn_id = env[CONN_ID_VAR]
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", env[f"AIRFLOW_CONN_{conn_id.upper()}"])
    resolved = SparkSubmitHook(conn_id=conn_id)._resolve_connection()
    assert resolved["master"] == env["LAKESORT_SPARK_MASTER"], f"the hook resolves {resolved['master']!r}"
    assert resolved["deploy_mode"] == "client"


def test_connections_the_dags_use_are_defined(services):
    sources = dag_sources()
    assert sources, "no DAG files found in dags/"
    ids = {m for text in sources for m in re.findall(r"conn_id\s*=\s*[\"']([\w.-]+)[\"']", text)}
    ids.add(Settings.model_fields["spark_conn_id"].default)  # the DAGs' conn id: $LAKESORT_SPARK_CONN_ID
    for name, service in airflow_services(services).items():
        env = env_of(service)
        for conn_id in sorted(ids):
            assert f"AIRFLOW_CONN_{conn_id.upper()}" in env, (
                f"{name}: the DAGs use connection {conn_id!r}; "
                f"define AIRFLOW_CONN_{conn_id.upper()} in x-airflow")


def test_airflow_services_share_one_configuration(services):
    airflow = airflow_services(services)
    assert (set(airflow) >= {service_running(services, "airflow", c) for c in AIRFLOW_COMMANDS}
            | {"airflow-init"})
    configs = {name: {k: v for k, v in env_of(s).items() if k.startswith("AIRFLOW")}
               for name, s in airflow.items()}
    first = next(iter(configs.values()))
    for name, config in configs.items():
        assert config == first, (
            f"{name}: its Airflow settings differ from the others; use x-airflow's environment")
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY"):
        assert first.get(key), (
            f"set {key} once for all Airflow services (else each draws its own, and tasks fail)")
    api = service_running(services, "airflow", "api-server")
    url = urlparse(first["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
    port = int(first.get("AIRFLOW__API__PORT", 8080))
    assert (url.hostname, url.port, url.path) == (api, port, "/execution/"), (
        f"AIRFLOW__CORE__EXECUTION_API_SERVER_URL must be http://{api}:{port}/execution/")


def test_postgres_creates_the_databases_the_uris_name(services):
    pg = services["postgres"]
    pg_env = env_of(pg)
    init_sql = [DOCKER / source for target, source in mounts(pg).items()
                if target.startswith("/docker-entrypoint-initdb.d/")]
    created = {pg_env["POSTGRES_DB"]} | {
        m.lower() for path in init_sql for m in re.findall(r"CREATE\s+DATABASE\s+(\w+)", path.read_text(),
                                                           re.IGNORECASE)}
    env = env_of(services["airflow-scheduler"])
    uris = {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"],
            "PYICEBERG_CATALOG__LAKESORT__URI": env["PYICEBERG_CATALOG__LAKESORT__URI"]}
    databases = set()
    for var, uri in uris.items():
        url = urlparse(uri)
        database = url.path.lstrip("/")
        assert url.scheme == "postgresql+psycopg2", f"{var}: use postgresql+psycopg2:// (psycopg2 is locked)"
        assert (url.hostname, url.port or 5432) == ("postgres", 5432), (
            f"{var}: the host must be the postgres service")
        assert (url.username, url.password) == (pg_env["POSTGRES_USER"], pg_env["POSTGRES_PASSWORD"]), (
            f"{var}: user and password must be postgres' POSTGRES_USER / POSTGRES_PASSWORD")
        assert database in created, (
            f"{var} names database {database!r}, which postgres never creates (POSTGRES_DB "
            "or docker/postgres/*.sql)")
        databases.add(database)
    assert len(databases) == 2, "Airflow's metadata and the Iceberg catalog must live in separate databases"
    assert "psycopg2-binary" in locked_closure({"pipeline", "deploy"}), (
        "the deploy extra must lock psycopg2-binary")


def test_airflow_has_a_locked_async_postgres_driver(services):
    # Airflow 3 opens an async engine on its metadata DB (the API server uses it); unless
    # AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC says otherwise it derives postgresql+asyncpg:// from the URI.
    env = env_of(services["airflow-scheduler"])
    scheme = urlparse(env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC", "postgresql+asyncpg://")).scheme
    driver = {"postgresql+asyncpg": "asyncpg", "postgresql+psycopg": "psycopg"}.get(scheme, scheme)
    assert driver in locked_closure({"pipeline", "deploy"}), (
        f"Airflow needs {driver} for {scheme}://, and uv.lock does not install it with --extra pipeline "
        "--extra deploy; add it to the `deploy` extra in pyproject.toml and re-lock")


def test_health_checks_and_start_order(services):
    for name in ("postgres", "spark-master", service_running(services, "airflow", "api-server"),
                 service_running(services, "airflow", "scheduler")):
        assert services[name].get("healthcheck", {}).get("test"), (
            f"{name}: add a healthcheck (others wait on it)")
    for name, service in services.items():
        for dep, spec in (service.get("depends_on") or {}).items():
            condition = spec["condition"] if isinstance(spec, dict) else "service_started"
            if condition == "service_healthy":
                assert services[dep].get("healthcheck"), (
                    f"{name} waits for {dep} to be healthy; {dep} has no healthcheck")
    init = services["airflow-init"]
    assert init["depends_on"]["postgres"]["condition"] == "service_healthy", "airflow-init: wait for postgres"
    assert "restart" not in init, "airflow-init runs once: no restart policy"
    for name in airflow_services(services):
        if name == "airflow-init":
            continue
        deps = services[name]["depends_on"]
        assert deps["postgres"]["condition"] == "service_healthy", f"{name}: wait for postgres to be healthy"
        assert deps["airflow-init"]["condition"] == "service_completed_successfully", (
            f"{name}: start only after airflow-init has exited 0")
    scheduler = services[service_running(services, "airflow", "scheduler")]
    assert scheduler["depends_on"]["spark-master"]["condition"] == "service_healthy", (
        "the scheduler runs the Spark drivers: start it after spark-master is healthy")


def test_spark_conf_dir_is_mounted(services, compose):
    # SPARK_CONF_DIR is ./spark's spark-defaults.conf as preflight copies it into the `secrets` volume, with
    # Spark's RPC secret added (tests/test_docker_security.py): every service mounts both,
    # preflight reads the source.
    source = env_of(services["preflight"])["LAKESORT_SPARK_CONF_SOURCE"]
    for name, service in project_services(services, compose).items():
        conf_dir, mounted = env_of(service).get("SPARK_CONF_DIR"), mounts(service)
        secrets = next((t for t, s in mounted.items() if s == "secrets"), None)
        assert conf_dir and secrets and conf_dir.startswith(secrets + "/"), (
            f"{name}: SPARK_CONF_DIR must lie in the `secrets` volume, where preflight writes it")
        assert mounted.get(source) == "./spark", f"{name}: mount ./spark at {source} (preflight's source)"
    for line in (DOCKER / "spark" / "spark-defaults.conf").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert re.fullmatch(r"spark\.[\w.-]+\s+\S.*", line), (
                f"spark-defaults.conf: {line!r} is not `key value`")


# ---- docker/README.md --------------------------------------------------------------------------------------


def test_readme_points_at_the_standalone_cluster_test():
    readme = (DOCKER / "README.md").read_text()
    assert STANDALONE_TEST in readme, f"docker/README.md must reference {STANDALONE_TEST}"
    path, _, test = STANDALONE_TEST.partition("::")
    assert f"def {test}(" in (REPO / path).read_text(), (
        f"{STANDALONE_TEST} no longer exists: update docker/README.md")


# ---- the in-stack demo load -----------------------------------------------------------------------------


def test_demo_loads_into_the_catalog_the_stack_configures(services, tmp_path, monkeypatch):
    """With the stack's PYICEBERG_* variables, `lakesort demo` writes no SQLite .pyiceberg.yaml: the table
    lands in the stack's catalog and warehouse
    (a SQLite file and tmp_path stand in for Postgres and the volume)."""
    import pyiceberg.catalog
    from pyiceberg.utils.config import Config

    from layout.catalog import load_catalog
    from layout.demo import build_demo

    work, warehouse = tmp_path / "cwd", tmp_path / "warehouse"
    work.mkdir()
    warehouse.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(work))
    monkeypatch.delenv("PYICEBERG_HOME", raising=False)
    for key, value in env_of(services["airflow-cli"]).items():
        if key.startswith("PYICEBERG_"):
            monkeypatch.setenv(key, value)
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKESORT__URI", f"sqlite:///{tmp_path / 'stack.db'}")
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKESORT__WAREHOUSE", warehouse.as_uri())
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())

    summary = build_demo(tmp_path / "demo-home", scale=0.001, batches=1)
    assert summary.created and not (work / ".pyiceberg.yaml").exists()
    table = load_catalog("lakesort").load_table("demo.lineitem")
    assert table.location().startswith(warehouse.as_uri()), "the demo must write into the stack's warehouse"
    assert (tmp_path / "stack.db").exists() and not (tmp_path / "demo-home" / "catalog.db").exists()
