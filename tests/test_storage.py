"""layout.storage: which settings open which location, what may be written down, and S3A's settings from
pyiceberg's. (The object-store bed runs all of it against real servers: tests/object_stores/, tests/dags/.)"""

from __future__ import annotations

import pytest
from pyarrow import fs

from layout import storage

VENDED = {"s3.endpoint": "http://127.0.0.1:9000", "s3.region": "eu-west-1", "s3.access-key-id": "AKIAEXAMPLE",
          "s3.secret-access-key": "very-secret", "s3.session-token": "token-value", "uri": "http://catalog"}


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setattr(storage, "_by_prefix", {})


def test_secrets_are_never_public():
    assert storage.public(VENDED) == {"s3.endpoint": "http://127.0.0.1:9000", "s3.region": "eu-west-1",
                                      "uri": "http://catalog"}
    for key in ("s3.secret-access-key", "s3.session-token", "s3.access-key-id", "adls.sas-token.acc",
                "gcs.oauth2.token", "client.password", "s3.sse.key-id"):
        assert storage.is_secret(key), key
    # values only str
    assert storage.public({"auth.manager": object(), "s3.region": "x"}) == {"s3.region": "x"}


def test_the_longest_registered_prefix_wins_and_schemes_alias():
    storage.configure("s3://lake/db/t1", {"s3.region": "one"})
    storage.configure("s3a://lake/db/t1/data/special", {"s3.region": "two"})
    storage.configure("file:///w/t", {"s3.region": "ignored"})  # local locations need nothing
    assert storage.properties_for("s3://lake/db/t1/data/x.parquet") == {"s3.region": "one"}
    assert storage.properties_for("s3n://lake/db/t1/data/special/y.parquet") == {"s3.region": "two"}
    assert storage.properties_for("s3://lake/db/t10/data/z.parquet") == {"s3.region": "one"}  # same bucket
    assert storage.properties_for("s3://other/x") == {}
    assert storage.properties_for("/w/t/x") == {}


def test_vended_credentials_open_only_their_tables_paths():
    storage.configure("s3://lake/db/t1", VENDED)
    assert storage.properties_for("s3://lake/db/t1/data/x.parquet") == VENDED
    # Another table of the bucket (or a listing above the tables): the endpoint and region, never the keys.
    for elsewhere in ("s3://lake/db/t10/data/z.parquet", "s3://lake/db", "s3a://lake/db/t2/metadata/m.avro"):
        assert storage.properties_for(elsewhere) == storage.public(VENDED), elsewhere


class _Table:
    def __init__(self, location, properties, io):
        self._location, self.properties = location, properties
        self.io = type("IO", (), {"properties": io})()

    def location(self):
        return self._location


def test_a_tables_write_paths_are_its_locations_too():
    storage.configure_table(_Table("s3://lake/db/t1", {"write.data.path": "s3://data-bucket/t1"}, VENDED))
    assert storage.properties_for("s3://data-bucket/t1/part-0.parquet") == VENDED
    assert storage.properties_for("s3://data-bucket/t2/part-0.parquet") == storage.public(VENDED)


def test_the_file_systems_are_one_per_location_whatever_the_tokens(monkeypatch):
    monkeypatch.setattr(storage, "_file_ios", type(storage._file_ios)())
    for night in range(5):  # a REST catalog vends a new session token with every load of the table
        storage.configure("s3://lake/db/t1", {**VENDED, "s3.session-token": f"token-{night}"})
        storage.filesystem("s3://lake/db/t1/data/x.parquet")
    assert list(storage._file_ios) == ["s3://lake/db/t1"]
    assert dict(storage._file_ios["s3://lake/db/t1"][0])["s3.session-token"] == "token-4"
    for t in range(storage.MAX_FILE_IOS + 3):
        storage.configure(f"s3://lake/db/many{t}", VENDED)
        storage.filesystem(f"s3://lake/db/many{t}/x.parquet")
    assert len(storage._file_ios) == storage.MAX_FILE_IOS


def test_s3a_settings_from_vended_credentials():
    settings = storage.hadoop_settings(VENDED)
    assert settings["fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert settings["fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert settings["fs.s3a.endpoint.region"] == "eu-west-1"
    assert settings["fs.s3a.path.style.access"] == "true"
    assert (settings["fs.s3a.access.key"], settings["fs.s3a.secret.key"],
            settings["fs.s3a.session.token"]) == ("AKIAEXAMPLE", "very-secret", "token-value")
    assert settings["fs.s3a.aws.credentials.provider"].endswith("TemporaryAWSCredentialsProvider")
    static = storage.hadoop_settings({k: v for k, v in VENDED.items() if k != "s3.session-token"})
    assert static["fs.s3a.aws.credentials.provider"].endswith("SimpleAWSCredentialsProvider")
    # No keys: S3A's own chain (instance profile, environment, ...); virtual hosts when asked for.
    chain = storage.hadoop_settings({"s3.endpoint": "https://s3.example.com",
                                     "s3.force-virtual-addressing": "true"})
    assert "fs.s3a.aws.credentials.provider" not in chain and chain["fs.s3a.path.style.access"] == "false"


def test_delete_many_on_a_local_filesystem_deletes_one_by_one(tmp_path):
    paths = []
    for i in range(3):
        (tmp_path / f"f{i}").write_bytes(b"x")
        paths.append(str(tmp_path / f"f{i}"))
    gone = str(tmp_path / "never-there")
    assert storage.delete_many(fs.LocalFileSystem(), [*paths, gone]) == {}
    assert not list(tmp_path.iterdir())


def test_executors_get_the_storage_settings_not_the_catalogs():
    catalog = {"uri": "https://catalog", "credential": "client:secret", "token": "t",
               "header.X-Iceberg-Access-Delegation": "vended-credentials", "warehouse": "lake",
               "auth.type": "oauth2"}
    assert storage.for_files({**VENDED, **catalog}) == {k: v for k, v in VENDED.items() if k != "uri"}
