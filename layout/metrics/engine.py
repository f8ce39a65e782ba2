"""Engine-confirmed: each probe run for real by DataFusion, next to what lakesort's model says it reads.

lakesort's figures are a model of a page-index-aware reader. To know that a real engine reads what the
model says, each measured probe is also run by DataFusion (the `datafusion` Python package, Apache
Arrow's Rust query engine) over the files the plan selects, with its page-index pruning on and filter
pushdown off, so that its scan fetches whole pages of every projected column and the rows it keeps
are those left after row-group and page pruning, as lakesort counts them. From the plan's metrics
(`ExecutionPlan.collect_metrics`, exact counters, unlike EXPLAIN ANALYZE's rounded text): the scan's
`bytes_scanned` (engine_bytes) and `output_rows` (engine_rows), the filter's output rows
(engine_rows_matching). The report flags a probe where DataFusion's bytes or rows differ from
lakesort's over the same files by more than `TOLERANCE` (20%).

What it costs: a real query. It reads what the plan selects, at most `LAKESORT_ENGINE_CHECK_MAX_BYTES`
(64 MiB by default) of compressed pages a probe; a probe that selects more is checked on a seeded
sample of its files up to that budget (engine_status "checked k of n files"), and lakesort's figures
are counted over the same files (engine_model_bytes, engine_model_rows). `LAKESORT_ENGINE_CHECK=false`
or `lakesort measure --no-engine` turns it off (engine_status "off").

Where the files are: local files are given to DataFusion through a temporary directory of links to
exactly the selected files; files on S3 through DataFusion's own object store (`datafusion.object_store.
AmazonS3`, registered for the bucket), one table per selected file, the probe run over their UNION ALL.
The store gets the endpoint, region and credentials of the table the files belong to, as lakesort's own
reads do (`layout.storage.properties_for`: the catalog's settings and the credentials a REST catalog
vends), and addresses the bucket by path, over plain HTTP when the endpoint says `http://`. The
credentials live only in the store object: never in a log line, a status or an error text.

It never fails a measurement. What it cannot check is recorded as "not confirmed: <reason>": the
`datafusion` package missing, files on an object store other than S3 (or on S3 with
`s3.force-virtual-addressing`, which the installed DataFusion's S3 store does not take), a probe column stored
under another name or absent in a file (DataFusion reads Parquet columns by name; Iceberg resolves renamed
columns by field id), a nested projection, or any error DataFusion raises (SQL it does not read,
types it cannot merge).
"""

from __future__ import annotations

import functools
import logging
import os
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
from pyarrow import fs

from layout import storage
from layout.expr.predicate import columns as expr_columns
from layout.metrics.ideal import FileCounter, OpenFiles
from layout.read.plan_values import FilePlan, Plan

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["SETTINGS", "TOLERANCE", "EngineCheck", "check_probe", "difference"]

log = logging.getLogger(__name__)

TOLERANCE = 0.2  # relative difference of bytes or rows beyond which the report flags a probe
# DataFusion's settings for the check (SessionConfig.set refuses a name it does not know, which is then
# recorded as the reason the probe is not confirmed).
SETTINGS = {
    "datafusion.execution.parquet.enable_page_index": "true",  # prune pages by the column index
    "datafusion.execution.parquet.pruning": "true",  # and row groups by statistics
    "datafusion.execution.parquet.bloom_filter_on_read": "true",  # and by bloom filters, as lakesort does
    # Off: with pushdown the scan would decode the predicate columns first and fetch the others only
    # for rows that pass, which lakesort's figures do not model (they count whole pages of each column).
    "datafusion.execution.parquet.pushdown_filters": "false",
    "datafusion.sql_parser.enable_ident_normalization": "false",  # column names as written (case kept)
    "datafusion.sql_parser.parse_float_as_decimal": "true",  # 1.50 is a decimal, as in Spark SQL
}


@dataclass(frozen=True, slots=True)
class EngineCheck:
    """What DataFusion read for a probe, next to lakesort's figures over the same files."""

    status: str  # "checked", "checked k of n files", "off", "not confirmed: <reason>"
    files: int | None = None
    bytes: int | None = None
    rows: int | None = None
    rows_matching: int | None = None
    model_bytes: int | None = None
    model_rows: int | None = None
    ms: float | None = None


def difference(engine: int | None, model: int | None) -> float | None:
    """|engine - model| / model; None when either is unknown; infinite when only the model reads nothing."""
    if engine is None or model is None:
        return None
    if model == 0:
        return 0.0 if engine == 0 else float("inf")
    return abs(engine - model) / model


def check_probe(planned: Plan, *, table: Table | None, max_bytes: int, files: OpenFiles | None = None
                ) -> EngineCheck:
    """Run the plan's probe with DataFusion over the plan's selected files (a seeded sample of them beyond
    `max_bytes` selected); see the module docstring. The predicate is the one lakesort planned, as SQL
    (`str` of the bound, NOT-free predicate: an owner's `SELECT ... WHERE` is reduced to its condition).
    `files`: the measurement's opened files (footers read once per measurement, not once per probe)."""
    started = time.perf_counter()
    c = planned.counts
    if not planned.files:  # nothing selected: DataFusion has nothing to read either
        return EngineCheck("checked", 0, 0, 0, 0, 0, 0, 0.0)
    try:  # optional, and slow to import: here, where it is used, so that a missing package is said clearly
        import datafusion  # noqa: F401
    except ImportError:
        return EngineCheck("not confirmed: the datafusion package is not installed (pip install datafusion; "
                           "lakesort's `pipeline` extra has it)")
    unreadable = next(((f, why) for f in planned.files if (why := _unreadable(f)) is not None), None)
    if unreadable is not None:
        return EngineCheck(f"not confirmed: {unreadable[1]}")
    nested = [name for name in planned.columns or () if "." in name]
    if nested:
        return EngineCheck(f"not confirmed: the probe projects nested field(s) {', '.join(nested)}, which "
                           "the check does not map to DataFusion")
    chosen = _choose(planned, max_bytes)
    opened = files if files is not None else OpenFiles()
    try:
        problem = _renamed(chosen, sorted(expr_columns(planned.predicate) | set(planned.columns or ())),
                           table, opened)
        if problem is not None:
            return EngineCheck(f"not confirmed: {problem}")
        n_files, nbytes, rows, matching = _run(chosen, str(planned.predicate), planned.columns)
        if len(chosen) == len(planned.files):
            status, model_bytes, model_rows = "checked", c.bytes_selected, c.rows_selected
        else:
            status = f"checked {len(chosen)} of {len(planned.files)} files"
            model_bytes, model_rows = _model(planned, chosen, opened)
    except Exception as error:  # noqa: BLE001 - a check that fails is recorded, never fails the measurement
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return EngineCheck(f"not confirmed: DataFusion could not run the probe: {first[:300]}")
    return EngineCheck(status, n_files, nbytes, rows, matching, model_bytes, model_rows,
                       (time.perf_counter() - started) * 1000)


def _local(file: FilePlan) -> bool:
    return file.filesystem is None or isinstance(file.filesystem, fs.LocalFileSystem)


def _is_s3(file: FilePlan) -> bool:
    return isinstance(file.filesystem, fs.S3FileSystem)


def _uri(file: FilePlan) -> str:
    """The file's location as DataFusion takes it: a local path, or s3://bucket/key (pyarrow's S3 paths are
    bucket/key)."""
    return os.path.abspath(file.path) if _local(file) else "s3://" + file.path.lstrip("/")


def _unreadable(file: FilePlan) -> str | None:
    """Why DataFusion cannot be given this file here; None when it can."""
    if _local(file):
        return None
    if not _is_s3(file):
        return (f"the check reads S3 and local files only, and {file.path} is on "
                f"{type(file.filesystem).__name__}")
    properties = storage.properties_for(_uri(file))
    if properties.get("s3.force-virtual-addressing", "false").lower() == "true":
        return (f"{file.path}: the table's storage asks for virtual-hosted addressing "
                "(s3.force-virtual-addressing), which DataFusion's S3 store here does not take")
    return None


def _first(properties: dict[str, str], *keys: str) -> str | None:
    return next((properties[k] for k in keys if properties.get(k)), None)


def _s3_store(bucket: str, location: str) -> Any:
    """DataFusion's S3 store for `bucket`, with the endpoint, region and credentials registered in
    `layout.storage` for `location`, a file of the table in it (pyiceberg's property names, `s3.*` before
    `client.*`). The secrets go into the store and nowhere else."""
    # DataFusion is optional and slow to import (half a second): only for the engine check.
    from datafusion.object_store import AmazonS3

    properties = storage.properties_for(location)
    endpoint = _first(properties, "s3.endpoint")
    return AmazonS3(
        bucket_name=bucket,
        region=_first(properties, "s3.region", "client.region"),
        access_key_id=_first(properties, "s3.access-key-id", "client.access-key-id"),
        secret_access_key=_first(properties, "s3.secret-access-key", "client.secret-access-key"),
        session_token=_first(properties, "s3.session-token", "client.session-token"),
        endpoint=endpoint,
        allow_http=bool(endpoint and endpoint.lower().startswith("http://")),
    )


def _choose(planned: Plan, max_bytes: int) -> list[FilePlan]:
    """Every selected file when their selected bytes fit in `max_bytes`; else files in a seeded order
    (the same for the same plan) while their estimated selected bytes (the plan's bytes per selected
    row, times the file's selected rows) fit, at least one."""
    c = planned.counts
    if c.bytes_selected <= max_bytes:
        return list(planned.files)
    seed = f"{planned.source}|{planned.predicate}|{planned.columns}"
    order = sorted(planned.files, key=lambda f: (zlib.crc32(f"{seed}|{f.path}".encode()), f.path))
    per_row = c.bytes_selected / c.rows_selected if c.rows_selected else 0.0
    chosen: list[FilePlan] = []
    budget = float(max_bytes)
    for f in order:
        cost = per_row * sum(rg.selection.row_count for rg in f.row_groups)
        if chosen and cost > budget:
            continue
        chosen.append(f)
        budget -= cost
    return sorted(chosen, key=lambda f: f.path)


def _renamed(files: Sequence[FilePlan], names: Sequence[str], table: Table | None,
             opened: OpenFiles) -> str | None:
    """Why reading `files` by column name would not read the table's columns `names`; None when it would.

    A file with field ids must hold each column's field id under the column's current name; a file
    without any must hold a column of that name (the name mapping of files written without ids maps
    names, which DataFusion reads as they are)."""
    if table is None:
        return None
    schema = table.schema()
    ids = {}
    for name in sorted({n.split(".")[0] for n in names}):  # a nested column: its top-level field
        try:
            ids[name] = schema.find_field(name).field_id
        except ValueError:
            return f"{name} is not a column of the table's current schema"
    for f in files:
        by_id, stored_names = _stored_columns(f.path) if _local(f) else _footer_columns(opened, f)
        for name, field_id in ids.items():
            if by_id:
                stored = by_id.get(field_id)
                if stored is None:
                    return (f"{f.path} has no column with field id {field_id} ({name}; added after the file "
                            "was written), which DataFusion would read as nulls")
                if stored != name:
                    return (f"{f.path} stores {name} (field id {field_id}) as {stored!r}, its name before a "
                            "rename; DataFusion reads Parquet columns by name, Iceberg by field id")
            elif name not in stored_names:
                return (f"{f.path} has no field ids and no column {name!r}; "
                        "DataFusion reads Parquet columns by name")
    return None


@functools.lru_cache(maxsize=8192)
def _stored_columns(path: str) -> tuple[dict[int, str], frozenset[str]]:
    """The top-level columns of a local Parquet file: field id -> name, and the names. Cached by path:
    only Iceberg data files are checked, and Iceberg never rewrites a data file in place (every probe
    of a measurement checks the same files)."""
    arrow = pq.read_schema(path)
    by_id = {int(field.metadata[b"PARQUET:field_id"]): field.name for field in arrow
             if field.metadata and b"PARQUET:field_id" in field.metadata}
    return by_id, frozenset(arrow.names)


def _footer_columns(opened: OpenFiles, file: FilePlan) -> tuple[dict[int, str], frozenset[str]]:
    """`_stored_columns` of a file on an object store, from its footer as the measurement opened it."""
    schema = opened.open(file).metadata.schema or []
    by_id, names = {}, []
    i, remaining = 1, (schema[0].num_children or 0) if schema else 0
    while remaining and i < len(schema):  # the root's children, each followed by its own subtree
        element = schema[i]
        names.append(element.name)
        if element.field_id is not None:
            by_id[element.field_id] = element.name
        skip, i = element.num_children or 0, i + 1
        while skip and i < len(schema):  # walk past the subtree
            skip += (schema[i].num_children or 0) - 1
            i += 1
        remaining -= 1
    return by_id, frozenset(names)


def _run(files: Sequence[FilePlan], where: str, columns: Sequence[str] | None) -> tuple[int, int, int, int]:
    """(files, bytes scanned, rows after pruning, rows matching) of the probe over `files`."""
    # Optional and half a second to import: only when a probe is checked (check_probe tried it already).
    from datafusion import SessionConfig, SessionContext

    config = SessionConfig()
    for key, value in SETTINGS.items():
        config = config.set(key, value)
    projection = ", ".join('"' + c.replace('"', '""') + '"' for c in columns) if columns else "*"
    ctx = SessionContext(config)
    if all(_local(f) for f in files):
        # DataFusion reads a directory (or one file): links to exactly the selected files, in a directory of
        # our own, so that files of other snapshots under the table location are never read.
        with tempfile.TemporaryDirectory(prefix="lakesort-engine-") as directory:
            for i, f in enumerate(files):
                os.symlink(os.path.abspath(f.path), os.path.join(directory, f"{i:06d}.parquet"))
            ctx.register_parquet("probe", directory)
            metrics = _execute(ctx, f"SELECT {projection} FROM probe WHERE {where}")
    else:
        # On S3 a directory of links is not to be had: each selected file is a table of its own (a single
        # object, so DataFusion lists nothing else), the probe runs over their UNION ALL.
        # A bucket's store with the settings of a selected file in it: the table's own (vended credentials
        # are registered for the table's locations only, not for its bucket).
        in_bucket = {_uri(f).split("/", 3)[2]: _uri(f) for f in files if not _local(f)}
        for bucket in sorted(in_bucket):
            ctx.register_object_store("s3://", _s3_store(bucket, in_bucket[bucket]), bucket)
        parts = []
        for i, f in enumerate(files):
            ctx.register_parquet(f"probe_{i}", _uri(f))
            parts.append(f"SELECT {projection} FROM probe_{i} WHERE {where}")
        metrics = _execute(ctx, " UNION ALL ".join(parts))
    scans = [m for desc, m in metrics if desc.startswith("DataSourceExec")]
    filters = [m for desc, m in metrics if desc.startswith("FilterExec")]
    if not scans:
        raise RuntimeError("no DataSourceExec in DataFusion's plan: " + "; ".join(d for d, _ in metrics))
    nbytes = sum(_sum(m, "bytes_scanned") for m in scans)
    rows = sum(m.output_rows or 0 for m in scans)
    matching = sum(m.output_rows or 0 for m in filters) if filters else rows
    return len(files), nbytes, rows, matching


def _execute(ctx: Any, sql: str) -> list[tuple[str, Any]]:
    """Run `sql` batch by batch (nothing of the result is kept); the plan's metrics."""
    frame = ctx.sql(sql)
    for _ in frame.execute_stream():
        pass
    metrics: list[tuple[str, Any]] = frame.execution_plan().collect_metrics()
    return metrics


def _sum(metrics: Any, name: str) -> int:
    value = metrics.sum_by_name(name)
    return int(value) if value is not None else 0


def _model(planned: Plan, chosen: Sequence[FilePlan], files: OpenFiles | None = None) -> tuple[int, int]:
    """lakesort's bytes and rows selected over `chosen`, by the planner's own counting rules."""
    nbytes = rows = 0
    for f in chosen:
        counter = FileCounter(planned, f, files)
        for rg in f.row_groups:
            nbytes += counter.planned(rg)[1]
            rows += rg.selection.row_count
    return nbytes, rows
