"""What a check looks at: the data files of a source (a file, a directory, an Iceberg table, or a run's
staged output), each with its partition, and the spec and sort keys to hold them to.

The layout rules (`rules`) and the GX suites (`expectations`) resolve sources here, so both always
check the same files against the same spec.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pyarrow import fs
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from layout.catalog import RUN_ID, load_table, stamp_of
from layout.errors import ConfigError
from layout.io import data_files, live_data_files, resolve
from layout.manifest import StagedManifest
from layout.registry import find_spec
from layout.spec import SortKey, TableSpec, resolve_sort_keys
from layout.spec.table_properties import resolve_for_table
from layout.verify.facts import OpenedFile, open_files

__all__ = ["Source", "open_staged", "resolve_source", "staged_files", "table_files", "table_runs"]

log = logging.getLogger(__name__)

Files = list[tuple[Any, str]]  # (pyarrow filesystem, path)


@dataclass(frozen=True, slots=True)
class Source:
    files: Files
    partitions: dict[str, str] | None  # path -> partition; None: files outside a table
    spec: TableSpec | None  # None: the default rules
    sort_keys: tuple[SortKey, ...] | None  # resolved against the table (its sort order by default)
    table: Table | None
    runs: dict[str, str] | None = None  # path -> its sorted run (`table_runs`); None: one run per partition


def resolve_source(source: str, spec: TableSpec | None = None) -> Source:
    """A file or directory (checked with `spec` as given), else an Iceberg table `ns.table`: its live
    data files, with `spec` or the registry's (none there: the default rules, with a warning)."""
    filesystem, path = resolve(source)
    if filesystem.get_file_info(path).type != fs.FileType.NotFound or "/" in source:
        return Source(data_files(source), None, spec, None, None)
    spec = spec or _registered_spec(source)
    table = load_table(source, spec.catalog if spec is not None else None)
    if spec is not None:  # the table's write properties where the spec is silent, as a compaction writes
        spec = resolve_for_table(spec, table)
    files, partitions = table_files(table)
    keys = tuple(resolve_sort_keys(spec, table)) if spec is not None else None
    return Source(files, partitions, spec, keys, table, table_runs(table))


def table_files(table: Table) -> tuple[Files, dict[str, str]]:
    """The live data files of the table's current snapshot, with their partition paths."""
    spec, schema = table.spec(), table.schema()
    files, partitions = [], {}
    for data_file in live_data_files(table):
        filesystem, path = resolve(data_file.file_path)
        values = data_file.partition
        # A Record iterates by __getitem__ (it declares no __iter__).
        partitions[path] = (spec.partition_to_path(Record(*values), schema)  # type: ignore[misc]
                            if spec.fields else "")
        files.append((filesystem, path))
    return files, partitions


def table_runs(table: Table) -> dict[str, str]:
    """Each live data file's sorted run: the lakesort run that committed it (its snapshot summary's
    `lakesort.run-id`, or its path once the snapshot has expired: `layout.catalog.stamp_of`), or the file
    alone when another writer added it. Paths as `table_files` gives them."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return {}
    run_of: dict[int | None, str | None] = {
        s.snapshot_id: s.summary.additional_properties.get(RUN_ID) for s in table.snapshots()
        if s.summary is not None}
    runs = {}
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            _, path = resolve(entry.data_file.file_path)
            stamp = stamp_of(entry.data_file.file_path)
            runs[path] = run_of.get(entry.snapshot_id) or (stamp[0] if stamp else f"file {path}")
    return runs


def open_staged(manifest: StagedManifest) -> list[OpenedFile]:
    """A run's staged output files opened (footers read), each group's files one partition: what the layout
    rules and the GX facts both read (`verify_staged(..., opened=)`,
    `gx_verifier(...)(manifest, opened=)`)."""
    return open_files(*staged_files(manifest))


def staged_files(manifest: StagedManifest) -> tuple[Files, dict[str, str]]:
    """A run's staged output files; the files of one group in one partition of the table's current spec count
    as one partition (the overlap rule). A group's files can land in several: a group of files under an older
    partition spec is rewritten under the current one (e.g. a bucket field added),
    one file per new partition."""
    files, partitions = [], {}
    for group in manifest.groups:
        for out in group.outputs:
            filesystem, path = resolve(out.path)
            files.append((filesystem, path))
            partitions[path] = (group.partition if out.partition_key == "[]"
                                else f"{group.partition} -> {out.partition_key}")
    return files, partitions


def _registered_spec(table: str) -> TableSpec | None:
    try:
        return find_spec(table)
    except ConfigError as error:
        log.warning("%s; verifying with the default rules (column and offset index on every column)", error)
        return None
