"""Where object-store files are and how to reach them: the FileIO properties (endpoint, region, credentials)
of each table location, kept per process, and the pyarrow filesystem and Hadoop (S3A) settings made from them.

A table's storage settings come from its catalog: the catalog's own configuration, and on a REST catalog the
credentials it vends with each table (`s3.access-key-id`, `s3.secret-access-key`, `s3.session-token` in the
load-table response). `layout.catalog.load_table` registers them here for the table's locations (its location
and its `write.*.path` properties), so every path lakesort later opens under them (`layout.io.resolve`) is
opened with them: there is no second place to configure. Credentials are used only under the locations they
were registered for: a path under no table's location (a warehouse listing above the tables, say) gets the
non-secret settings (endpoint, region) of the nearest table of its bucket, never another table's keys or
session token. Secrets live only in this process's memory: `public` strips them from anything that is written
down (a plan, a manifest, a run record), and Spark executors get them inside their task closures
(`hadoop_settings`, the executor code's own `configure`), never on a command line or in a file.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyarrow.fs import FileSystem
    from pyiceberg.io.pyarrow import PyArrowFileIO

__all__ = ["OBJECT_STORE_SCHEMES", "configure", "configure_table", "delete_many", "filesystem", "for_files",
           "hadoop_settings", "is_object_store", "is_secret", "properties_for", "public"]

OBJECT_STORE_SCHEMES = frozenset({"s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "wasb", "wasbs", "oss"})
_SECRET_WORDS = ("secret", "token", "password", "credential", "session", "sas", "key-id",
                 "access-key", "private")

_lock = threading.Lock()
_by_prefix: dict[str, dict[str, str]] = {}
# One FileIO per registered location (the key `_key` makes of it; the bucket for paths under none), built
# with the properties it was registered with last: a REST catalog vends a new session token with every load
# of a table, and a cache keyed by the properties would keep one file system per token for the process's life.
_file_ios: OrderedDict[str, tuple[frozenset[tuple[str, str]], PyArrowFileIO]] = OrderedDict()
# Least recently used ones beyond this many are dropped (a process visiting thousands of tables, a report).
MAX_FILE_IOS = 32
# A table's properties naming where it writes besides its location (Iceberg's TableProperties).
_LOCATION_PROPERTIES = ("write.data.path", "write.metadata.path", "write.object-storage.path")


def is_secret(key: str) -> bool:
    """True for a FileIO property that must never be written down (keys, tokens, passwords)."""
    lowered = key.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def public(properties: Mapping[str, str]) -> dict[str, str]:
    """The properties without secrets: what a plan or a manifest may carry (endpoint, region, path style)."""
    return {k: v for k, v in properties.items() if not is_secret(k) and isinstance(v, str)}


# A catalog's own properties that pyiceberg passes to its FileIO too: how to reach and authenticate to the
# catalog, which no reader of files needs (`for_files` leaves them out of what travels to Spark executors).
_CATALOG_KEYS = frozenset({"uri", "credential", "token", "scope", "oauth2-server-uri", "warehouse", "prefix",
                           "type", "audience", "resource"})
_CATALOG_PREFIXES = ("header.", "auth.", "rest.", "jdbc.")


def for_files(properties: Mapping[str, str]) -> dict[str, str]:
    """The properties a reader or writer of the table's files needs: without the catalog's own (its URI and
    credentials), which would otherwise travel with every Spark task."""
    return {k: v for k, v in properties.items() if isinstance(v, str) and k not in _CATALOG_KEYS
            and not k.startswith(_CATALOG_PREFIXES)}


def is_object_store(location: str) -> bool:
    return "://" in location and location.split("://", 1)[0].lower() in OBJECT_STORE_SCHEMES


def _key(location: str) -> str:
    split = urlsplit(location)
    scheme = "s3" if split.scheme in ("s3a", "s3n") else split.scheme
    return f"{scheme}://{split.netloc}/{split.path.strip('/')}".rstrip("/")


def configure(location: str, properties: Mapping[str, str]) -> None:
    """Use these FileIO properties for every file under `location` (a table's location) in this process."""
    if not is_object_store(location):
        return
    clean = {k: v for k, v in properties.items() if isinstance(v, str)}
    with _lock:
        _by_prefix[_key(location)] = clean


def configure_table(table: Any) -> None:
    """`configure` for every location of a pyiceberg `Table`: its location and the `write.data.path`,
    `write.metadata.path` and `write.object-storage.path` it may write under instead."""
    properties = table.io.properties
    for location in (table.location(), *(table.properties.get(p) for p in _LOCATION_PROPERTIES)):
        if location:
            configure(location, properties)


def _registered(key: str) -> str | None:
    """The longest registered location `key` is under (the lock held)."""
    return max((p for p in _by_prefix if key == p or key.startswith(p + "/")), key=len, default=None)


def properties_for(location: str) -> dict[str, str]:
    """The FileIO properties registered for the longest prefix of `location`; for a location under none, the
    non-secret ones (endpoint, region, path style) of the nearest registered location of its bucket; else {}
    (the SDK's defaults)."""
    key = _key(location)
    with _lock:
        best = _registered(key)
        if best is None:  # a location of the same bucket (a warehouse listing above the tables, say): the
            # table location sharing most of its path with it, the shorter one of a tie; its endpoint and
            # region, never its credentials (vended for that table's paths only)
            parts = key.split("/")

            def shared(prefix: str) -> tuple[int, int]:
                other = prefix.split("/")
                common = next((i for i, (a, b) in enumerate(zip(parts, other)) if a != b),
                              min(len(parts), len(other)))
                return common, -len(other)

            same_bucket = [p for p in _by_prefix if p.split("/")[:3] == parts[:3]]
            nearest = max(same_bucket, key=shared, default=None)
            return public(_by_prefix[nearest]) if nearest is not None else {}
        return dict(_by_prefix[best])


def filesystem(location: str) -> tuple[FileSystem, str]:
    """(pyarrow filesystem, path inside it) for an object-store location, configured by `configure`, through
    pyiceberg's PyArrowFileIO (its S3 settings: endpoint, region, keys, session token,
    path style, retries)."""
    # Imported here: layout.catalog (hence this module) is imported by every Spark job driver and Python
    # worker, and pyiceberg's Arrow I/O costs 0.5 s to import.
    from pyiceberg.io.pyarrow import PyArrowFileIO

    properties = properties_for(location)
    frozen = frozenset(properties.items())
    with _lock:
        key = _key(location)
        registered = _registered(key) or "/".join(key.split("/")[:3])  # else one per bucket
        cached = _file_ios.get(registered)
        if cached is not None and cached[0] == frozen:
            io = cached[1]
            _file_ios.move_to_end(registered)
        else:  # new, or its credentials were vended again: the old file system goes with the old token
            io = PyArrowFileIO(properties)
            _file_ios[registered] = (frozen, io)
            _file_ios.move_to_end(registered)
            while len(_file_ios) > MAX_FILE_IOS:
                _file_ios.popitem(last=False)
    scheme, netloc, path = PyArrowFileIO.parse_location(location, properties)
    return io.fs_by_scheme(scheme, netloc), path


# pyiceberg's S3 property names -> Hadoop S3A's. Only S3 is mapped: the other stores' Hadoop connectors take
# their own settings from the cluster's configuration.
_S3A = {
    "s3.endpoint": "fs.s3a.endpoint",
    "s3.region": "fs.s3a.endpoint.region",
    "client.region": "fs.s3a.endpoint.region",
    "s3.access-key-id": "fs.s3a.access.key",
    "s3.secret-access-key": "fs.s3a.secret.key",
    "s3.session-token": "fs.s3a.session.token",
    "s3.path-style-access": "fs.s3a.path.style.access",
}


def hadoop_settings(properties: Mapping[str, str]) -> dict[str, str]:
    """Hadoop configuration for Spark's S3A connector from a table's FileIO properties: `s3://` read by S3A,
    its endpoint, region and credentials (temporary ones with a session token). Secrets included: for the
    driver's Hadoop configuration at run time only, which Spark ships to executors with each task."""
    out = {"fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
           "fs.s3n.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
    for key, hadoop in _S3A.items():
        if properties.get(key):
            out[hadoop] = properties[key]
    if "fs.s3a.endpoint" in out and "fs.s3a.path.style.access" not in out:
        # A custom endpoint (MinIO, Ceph, moto, ...) rarely has virtual-host buckets; pyiceberg's pyarrow
        # filesystem also addresses by path unless `s3.force-virtual-addressing` is set.
        out["fs.s3a.path.style.access"] = str(
            properties.get("s3.force-virtual-addressing", "false").lower() != "true"
        ).lower()
    if "fs.s3a.session.token" in out:
        out["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    elif "fs.s3a.access.key" in out:
        out["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
    return out


# S3's DeleteObjects takes at most 1,000 keys a request.
DELETE_BATCH = 1000


def delete_many(filesystem: FileSystem, paths: Sequence[str]) -> dict[str, OSError]:
    """Delete files of one pyarrow filesystem (paths as it names them); the ones it could not delete, with
    why. A file already gone is no failure (someone else deleted it).

    On S3, with boto3 installed (the `pipeline` extra), through DeleteObjects: 1,000 keys a request, with the
    table's endpoint and credentials (`configure`), where pyarrow can only delete one object a request (or a
    whole directory). Maintenance deletes thousands of files a night; S3 bills and rate-limits requests.
    Elsewhere one delete a file."""
    if paths and filesystem.type_name == "s3":
        try:
            import boto3  # noqa: F401 - optional: the `pipeline` extra
        except ImportError:
            pass
        else:
            return _delete_objects(paths)
    failed: dict[str, OSError] = {}
    for path in paths:
        try:
            filesystem.delete_file(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            failed[path] = exc
    return failed


def _s3_client(properties: dict[str, str]) -> Any:  # a boto3 S3 client (boto3 has no types)
    # boto3 is optional (the `pipeline` extra) and takes 0.3 s to import: only where S3 batches are deleted.
    import boto3
    from botocore.config import Config

    endpoint = properties.get("s3.endpoint")
    config = Config(retries={"mode": "standard", "max_attempts": 5},
                    s3={"addressing_style": "virtual"
                        if properties.get("s3.force-virtual-addressing") == "true" or not endpoint
                        else "path"})
    return boto3.client("s3", endpoint_url=endpoint, config=config,
                        region_name=properties.get("s3.region") or properties.get("client.region"),
                        aws_access_key_id=properties.get("s3.access-key-id"),
                        aws_secret_access_key=properties.get("s3.secret-access-key"),
                        aws_session_token=properties.get("s3.session-token"))


def _delete_objects(paths: Sequence[str]) -> dict[str, OSError]:
    # Optional, as boto3 above.
    from botocore.exceptions import BotoCoreError, ClientError

    # Per bucket and the settings its keys open with: each table's files with that table's credentials.
    by_bucket: dict[tuple[str, frozenset[tuple[str, str]]], list[str]] = {}
    for path in paths:
        bucket, _, key = path.partition("/")
        opened = frozenset(properties_for(f"s3://{bucket}/{key}").items())
        by_bucket.setdefault((bucket, opened), []).append(key)
    failed: dict[str, OSError] = {}
    for (bucket, opened), keys in by_bucket.items():
        client = _s3_client(dict(opened))
        for start in range(0, len(keys), DELETE_BATCH):
            batch = keys[start:start + DELETE_BATCH]
            try:
                answer = client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in batch],
                                                                      "Quiet": True})
            # the whole request refused, after the client's retries
            except (BotoCoreError, ClientError) as exc:
                failed.update({f"{bucket}/{k}": OSError(f"DeleteObjects: {exc}") for k in batch})
                continue
            for error in answer.get("Errors", []):
                if error.get("Code") != "NoSuchKey":
                    failed[f"{bucket}/{error['Key']}"] = OSError(
                        f"{error.get('Code')}: {error.get('Message')}"
                    )
    return failed
