"""docker/: the object-store profile (docker/object-store.env): moto's S3 and Iceberg's REST catalog server
on pinned images, the catalog storing on the stack's S3 and vending credentials, lakesort's services switched
to the REST catalog, and a Spark conf with the S3A jars the image fetches. No Docker engine is needed:
compose.yaml is parsed with the profile's --env-file as Compose interpolates it, the Dockerfile is read as
text.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
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
    command_of,
    env_of,
    instr,
    interpolate,
    mounts,
    parse_dockerfile,
    project_services,
    read_env_file,
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


# ---- the object-store profile ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def profile_env() -> dict[str, str]:
    return read_env_file(OBJECT_STORE_ENV)


def _url_of_service(services, url: str) -> tuple[str, int]:
    """(service, container port) a URL inside the compose network names; the service must exist."""
    parsed = urlparse(url)
    assert parsed.hostname in services, f"{url}: {parsed.hostname} is no service of the stack"
    return parsed.hostname, parsed.port


def test_object_store_profile_has_its_services_on_pinned_images(services, profile_env):
    assert "object-store" in profile_env["COMPOSE_PROFILES"].split(","), (
        "object-store.env must turn the profile on")
    for name in (*OBJECT_STORE_SERVERS, "s3-init"):
        assert services[name].get("profiles") == ["object-store"], (
            f"{name}: only with the object-store profile")
    for name, repository in OBJECT_STORE_SERVERS.items():
        image, _, tag = services[name]["image"].partition(":")
        assert image == repository and re.fullmatch(r"\d+\.\d+\.\d+", tag), (
            f"{name}: pin {repository} by a version tag")
    locked = {p["name"]: p["version"] for p in tomllib.loads((REPO / "uv.lock").read_text())["package"]}
    if "moto" in locked:  # the tests' moto and the stack's: the same minor version
        tag = services["s3"]["image"].partition(":")[2]
        assert tag.split(".")[:2] == locked["moto"].split(".")[:2], (
            f"s3: moto {tag}, uv.lock has {locked['moto']}")


def test_the_rest_catalog_stores_on_the_stacks_s3_and_vends_credentials(services):
    env, raw = env_of(services["iceberg-rest"]), services["iceberg-rest"]["environment"]
    host, port = _url_of_service(services, env["CATALOG_S3_ENDPOINT"])
    assert host == "s3" and f":{port}" in services["s3"]["ports"][0], (
        "CATALOG_S3_ENDPOINT: the s3 service's port")
    assert env["CATALOG_IO__IMPL"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert env["CATALOG_S3_PATH__STYLE__ACCESS"] == "true" and env["CATALOG_INCLUDE__CREDENTIALS"] == "true"
    assert env["AWS_REGION"]
    bucket = urlparse(env["CATALOG_WAREHOUSE"]).netloc
    assert urlparse(env["CATALOG_WAREHOUSE"]).scheme == "s3" and f"create_dir('{bucket}')" in " ".join(
        command_of(services["s3-init"])), "s3-init must create the warehouse's bucket"
    assert services["iceberg-rest"]["depends_on"]["s3-init"]["condition"] == "service_completed_successfully"
    uri = env["CATALOG_URI"]
    assert uri.startswith("jdbc:sqlite:/") and any(
        uri.removeprefix("jdbc:sqlite:").startswith(target + "/")
        for target in mounts(services["iceberg-rest"])
    ), "CATALOG_URI: a SQLite file on a volume (the image has no Postgres driver)"
    # Credentials from variables (defaults for a local machine only),
    # the same ones s3-init creates the bucket with.
    init = services["s3-init"]["environment"]
    for catalog_key, aws_key in (("CATALOG_S3_ACCESS__KEY__ID", "AWS_ACCESS_KEY_ID"),
                                 ("CATALOG_S3_SECRET__ACCESS__KEY", "AWS_SECRET_ACCESS_KEY")):
        assert re.fullmatch(r"\$\{\w+:-[^}]+\}", raw[catalog_key]), (
            f"iceberg-rest: {catalog_key} from a variable")
        assert raw[catalog_key] == init[aws_key], f"s3-init's {aws_key} must be the catalog's {catalog_key}"


def test_profile_ports_are_published_on_localhost_only(services):
    for name in OBJECT_STORE_SERVERS:
        for port in services[name].get("ports", []):
            assert interpolate(port).startswith("127.0.0.1:"), f"{name}: publish {port} on 127.0.0.1 only"


def test_lakesort_services_use_the_rest_catalog_under_the_profile(
    services, compose, profile_env, monkeypatch
):
    rest = env_of(services["iceberg-rest"])
    for name, service in project_services(services, compose).items():
        plain, env = env_of(service), env_of(service, profile_env)
        assert plain["PYICEBERG_CATALOG__LAKESORT__TYPE"] == "sql", (
            f"{name}: the SQL catalog without the profile")
        assert env["PYICEBERG_CATALOG__LAKESORT__TYPE"] == "rest", (
            f"{name}: the REST catalog with the profile")
        assert _url_of_service(services, env["PYICEBERG_CATALOG__LAKESORT__URI"]) == ("iceberg-rest", 8181)
        assert env["PYICEBERG_CATALOG__LAKESORT__WAREHOUSE"] == rest["CATALOG_WAREHOUSE"], (
            f"{name}: the catalog's bucket")
        assert env["PYICEBERG_CATALOG__LAKESORT__S3__ENDPOINT"] == rest["CATALOG_S3_ENDPOINT"], (
            f"{name}: the store")
        if name != "s3-init":
            assert not any(k.startswith("AWS_") or "SECRET_ACCESS" in k for k in env), (
                f"{name}: no store credentials in lakesort's environment: the catalog vends them per table")
    # The variables say what pyiceberg reads: its REST catalog's properties, the delegation header included.
    from pyiceberg.utils.config import Config

    for key, value in env_of(services["airflow-scheduler"], profile_env).items():
        if key.startswith("PYICEBERG_"):
            monkeypatch.setenv(key, value)
    catalog = Config().get_catalog_config("lakesort")
    assert catalog["type"] == "rest" and catalog["uri"] == "http://iceberg-rest:8181"
    assert (catalog["s3.endpoint"] == rest["CATALOG_S3_ENDPOINT"]
            and catalog["s3.region"] == rest["AWS_REGION"])
    assert catalog["header.x-iceberg-access-delegation"] == "vended-credentials"
    init = services["airflow-init"]["depends_on"]["iceberg-rest"]
    assert init == {"condition": "service_healthy", "required": False}, (
        "airflow-init: the REST catalog, if there")


def test_profile_spark_conf_adds_the_s3a_jars_the_image_fetches(services, profile_env, dockerfile):
    conf_dir = env_of(services["preflight"], profile_env)["LAKESORT_SPARK_CONF_SOURCE"]
    mounted = env_of(services["preflight"])["LAKESORT_SPARK_CONF_SOURCE"]
    assert conf_dir.startswith(mounted + "/"), "the profile's Spark conf source lies inside the ./spark mount"
    profile_conf = DOCKER / "spark" / conf_dir.removeprefix(mounted + "/") / "spark-defaults.conf"

    def settings(path: Path) -> dict[str, str]:
        return dict(line.split(None, 1) for line in path.read_text().splitlines()
                    if line.strip() and not line.startswith("#"))

    base, profile = settings(DOCKER / "spark" / "spark-defaults.conf"), settings(profile_conf)
    assert base.items() <= profile.items(), (
        "the profile's spark-defaults.conf must keep every line of the base one")
    jars = profile["spark.jars"].strip()
    assert profile["spark.hadoop.fs.s3.impl"].strip() == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    fetch = [r for r in instr(dockerfile, "RUN") if "spark-jars --fetch" in r]
    assert fetch, "the Dockerfile must fetch the S3A jars with `lakesort spark-jars --fetch`"
    target = re.search(r"spark-jars --fetch (\S+)", fetch[0]).group(1)
    assert jars == f"{target}/*.jar", f"spark.jars must name the jars fetched into {target}"
    assert "apt-get purge" in fetch[0] and "maven" in fetch[0], "Maven is removed again in the same layer"
    text = DOCKERFILE.read_text()
    assert text.index("SPARK_HOME=") < text.index("spark-jars --fetch"), (
        "after the ENV naming pyspark's Spark")


def test_readme_describes_the_object_store_profile():
    readme = (DOCKER / "README.md").read_text()
    assert "## Object store and REST catalog" in readme
    assert "--env-file object-store.env" in readme and "lakesort spark-jars" in readme
