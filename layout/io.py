"""Where files are: local paths, `file://` URIs and object-store URIs, resolved to a pyarrow filesystem."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from pyarrow import fs
from pyiceberg.manifest import ManifestContent

from layout import storage
from layout.catalog import load_table
from layout.errors import InputError

if TYPE_CHECKING:
    from pyarrow.fs import FileInfo, FileSystem
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table


def resolve(location: str | os.PathLike[str]) -> tuple[FileSystem, str]:
    """(filesystem, path) for a local path or a URI such as `file:///w/x.parquet` or `s3://b/k`."""

    text = os.fspath(location)
    if text.startswith("file:") and not text.startswith("file://"):
        # `file:/w/x.parquet`: how Iceberg's Java implementation (Hadoop's Path) writes local locations.
        text = text.removeprefix("file:")
    if "://" not in text:
        return fs.LocalFileSystem(), str(Path(text).absolute())
    if storage.is_object_store(text):
        # With the endpoint, region and credentials of the table the location belongs to (`layout.storage`).
        try:
            return storage.filesystem(text)
        except Exception as exc:
            raise InputError(f"{text}: cannot open this location ({exc}); check the catalog's storage "
                             "settings (s3.endpoint, s3.region, credentials)") from exc
    try:
        resolved: tuple[FileSystem, str] = fs.FileSystem.from_uri(text)
        return resolved
    except Exception as exc:  # pyarrow raises several types for unsupported schemes
        raise InputError(f"{text}: cannot open this location ({exc})") from exc


def find_parquet_files(location: str | os.PathLike[str]) -> list[tuple[FileSystem, str]]:
    """A file itself, or every `*.parquet` file below a directory (recursive, sorted by path)."""
    return [(filesystem, info.path) for filesystem, info in list_parquet_files(location)]


def list_parquet_files(location: str | os.PathLike[str]) -> list[tuple[FileSystem, FileInfo]]:
    """Like `find_parquet_files`, with each file's FileInfo (size, mtime) from the listing itself."""

    filesystem, path = resolve(location)
    info = filesystem.get_file_info(path)
    if info.type == fs.FileType.NotFound:
        raise InputError(f"{location}: no such file or directory")
    if info.type == fs.FileType.File:
        return [(filesystem, info)]
    selector = fs.FileSelector(path, recursive=True)
    found = sorted(
        (i for i in filesystem.get_file_info(selector)
         if i.type == fs.FileType.File and i.path.endswith(".parquet") and not _hidden(i.path, path)),
        key=lambda i: i.path,
    )
    if not found:
        raise InputError(f"{location}: directory holds no .parquet files")
    return [(filesystem, i) for i in found]


def _hidden(path: str, root: str) -> bool:
    # Writers keep temporary and marker files under `_` and `.` names (Spark's _temporary, .crc files).
    # String operations: this runs for every file of every directory plan.
    rel = path[len(root):].lstrip("/") if path.startswith(root) else path
    return rel.startswith(("_", ".")) or "/_" in rel or "/." in rel


def table_identifier(source: str) -> str | None:
    """The Iceberg identifier a SOURCE names, or None when it is a path (a file or a directory).

    A path that exists wins over a table of the same name; a dotted name without a slash or scheme that
    is not a path is a table. Anything else is an error naming the source.
    """

    filesystem, path = resolve(source)
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        return None
    if "://" in source or "/" in source or "." not in source:
        raise InputError(f"{source}: no such file or directory (nor a `namespace.table` identifier)")
    return source


def data_files(source: str) -> list[tuple[FileSystem, str]]:
    """The Parquet files of a SOURCE: a file, a directory, or an Iceberg table identifier (`ns.table`):
    the table's current snapshot's data files."""
    identifier = table_identifier(source)
    if identifier is None:
        return find_parquet_files(source)

    table = load_table(identifier)
    return [resolve(f.file_path) for f in live_data_files(table)]


def live_data_files(table: Table) -> list[DataFile]:
    """The live data files of the table's current snapshot, from its data manifests, as pyiceberg's
    `scan().plan_files()` lists them (empty files left out) but without its planning, which raises on a table
    with equality delete files (merge-on-read: the delete files are not looked at here)."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    files = []
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DATA:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.data_file.record_count > 0:
                files.append(entry.data_file)
    return files
