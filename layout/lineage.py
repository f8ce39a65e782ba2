"""OpenLineage events of a compaction run (the optional `lineage` extra: openlineage-python).

One run of lakesort is one OpenLineage run of the job `compact.<table>` in the namespace
$OPENLINEAGE_NAMESPACE (default `lakesort`), whose run id is derived from lakesort's run id (`run_uuid`), so
the same run is the same OpenLineage run wherever it is named: `lakesort compact`'s events, the parent facet
of the Spark job's own events (openlineage-spark),
a rerun of a step. The table is the input and the output dataset:
its namespace is the catalog (`dataset_namespace`), its name `<namespace>.<table>`; the output carries the
output statistics facet (rows and bytes written, files added), the input the input statistics (rows and bytes
read, files removed) where they are known.

The client is openlineage-python's, configured its own way (OPENLINEAGE_CONFIG, an `openlineage.yml` in the
working directory or ~/.openlineage, OPENLINEAGE__TRANSPORT__* variables, OPENLINEAGE_URL;
OPENLINEAGE_DISABLED=true turns it off). Without the extra, or with no configuration, nothing is emitted and
nothing is said beyond one debug line: the client would otherwise print every event to the console. An
event that cannot be built or sent is a logged warning, never a failed compaction. The DAGs emit through the
Airflow provider's listener instead; they only take the datasets from here (`datasets`).

No secret reaches an event: catalog URIs lose their user, password and query before they name anything, and
no catalog property is copied.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.util
import logging
import os
import re
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pyiceberg.utils.config import Config

from layout.models import Frozen

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient
    from openlineage.client.facet_v2 import InputDatasetFacet, OutputDatasetFacet
    from pyiceberg.schema import Schema

__all__ = ["SPARK_LISTENER", "Counts", "ParentJob", "RunLineage", "available", "configured",
           "dataset_namespace", "datasets", "job_name", "job_namespace", "parent_job", "run_event",
           "run_uuid", "spark_listener_enabled", "spark_parent_conf"]

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "lakesort"
PRODUCER = "urn:lakesort"
SPARK_LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
# Fixed: run ids derived from it are stable across processes and versions (`run_uuid`).
_RUN_IDS = uuid.UUID("6c1f3e0a-9b52-5d0e-8f0e-1a2b3c4d5e6f")
EventType = Literal["START", "COMPLETE", "FAIL"]
# `scheme://user:password@` in an error message (a catalog's URI, say): the user and password are dropped.
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][\w+.-]*://)[^/@\s]+@")


class Counts(Frozen):
    """Rows, bytes and files read or written; None where not known."""

    rows: int | None = None
    bytes: int | None = None
    files: int | None = None


class ParentJob(Frozen):
    """The OpenLineage run a Spark job's events name as their parent (and root)."""

    namespace: str
    name: str
    run_id: str  # a UUID


def job_namespace() -> str:
    """$OPENLINEAGE_NAMESPACE, the variable OpenLineage's integrations read, else `lakesort`."""
    return os.environ.get("OPENLINEAGE_NAMESPACE") or DEFAULT_NAMESPACE


def job_name(table: str) -> str:
    return f"compact.{table}"


def run_uuid(run_id: str) -> str:
    """The OpenLineage run id of lakesort's run `run_id`:
    the same for every event of the run, in any process."""
    return str(uuid.uuid5(_RUN_IDS, run_id))


def parent_job(*, table: str, run_id: str) -> ParentJob:
    return ParentJob(namespace=job_namespace(), name=job_name(table), run_id=run_uuid(run_id))


def _without_secrets(uri: str) -> str:
    """`uri` without user, password, query and fragment; a SQLAlchemy driver suffix (`postgresql+psycopg2`)
    goes too. A local path stays a path, `sqlite:////abs/path` keeps its slashes."""
    scheme, colon, rest = uri.partition(":")
    if not colon or not urlsplit(uri).scheme:
        return uri
    rest = rest.split("?", 1)[0].split("#", 1)[0]
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = "//" + authority.rpartition("@")[2] + slash + path
    return f"{scheme.split('+')[0]}:{rest}"


def _catalog_config(catalog: str | None) -> tuple[str, dict[str, Any]]:
    config = Config()  # pyiceberg's own lookup, without connecting to the catalog
    name = catalog or config.get_default_catalog_name()
    return name, dict(config.get_catalog_config(name) or {})


def dataset_namespace(catalog: str | None) -> str:
    """The namespace of the catalog's tables: a catalog reached by a service (REST, Hive, Glue ...) is named
    by its URI, one held in a database (SQL) by its warehouse location; credentials, query and fragment
    removed. A catalog that configures neither: `iceberg://<catalog name>`."""
    name, props = _catalog_config(catalog)
    kind, uri, warehouse = str(props.get("type") or ""), props.get("uri"), props.get("warehouse")
    service = uri and (kind in ("rest", "hive", "glue")
                       or urlsplit(str(uri)).scheme in ("http", "https", "thrift"))
    chosen = uri if service else warehouse or uri
    return _without_secrets(str(chosen)).rstrip("/") if chosen else f"iceberg://{name}"


def available() -> bool:
    """Whether openlineage-python is installed (the `lineage` extra)."""
    return importlib.util.find_spec("openlineage.client") is not None


def configured() -> bool:
    """Whether openlineage-python has a transport configured the standard ways (not turned off)."""
    if os.environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return False
    if os.environ.get("OPENLINEAGE_URL") \
            or any(k.startswith("OPENLINEAGE__TRANSPORT") and v for k, v in os.environ.items()):
        return True
    # The `lineage` extra (local imports of openlineage here and below): lakesort works without it.
    from openlineage.client import OpenLineageClient

    return OpenLineageClient._find_yaml_config_path() is not None  # the client's own lookup (private)


@functools.cache
def _client() -> OpenLineageClient | None:
    """The process's client, or None (no extra, no configuration): decided once."""
    if not available():
        log.debug("openlineage-python is not installed (the `lineage` extra): no lineage events")
        return None
    if not configured():
        log.debug("no OpenLineage transport configured: no lineage events")
        return None
    from openlineage.client import OpenLineageClient  # the extra, installed (checked above)

    return OpenLineageClient()


def datasets(*, table: str, catalog: str | None, read: Counts | None = None, written: Counts | None = None,
             schema: Schema | None = None) -> tuple[list[Any], list[Any]]:
    """The table as OpenLineage's input and output datasets (openlineage-python's `event_v2` classes), with
    the statistics facets of what was read and written (either None: no statistics facet) and, given the
    table's schema, its schema facet. Needs the extra."""
    # The extra's: only reached once `_client` found it, or by the DAG's commit task under the provider.
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import (
        catalog_dataset,
        input_statistics_input_dataset,
        output_statistics_output_dataset,
        schema_dataset,
    )

    catalog_name, props = _catalog_config(catalog)
    namespace = dataset_namespace(catalog)
    facets: dict[str, Any] = {"catalog": catalog_dataset.CatalogDatasetFacet(
        framework="iceberg", type=str(props.get("type") or "unknown"), name=catalog_name, source="lakesort",
        metadataUri=_without_secrets(str(props["uri"])) if props.get("uri") else None,
        warehouseUri=_without_secrets(str(props["warehouse"])) if props.get("warehouse") else None,
        catalogProperties={})}
    if schema is not None:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(fields=[
            schema_dataset.SchemaDatasetFacetFields(name=f.name, type=str(f.field_type), description=f.doc)
            for f in schema.fields])
    inputs: dict[str, InputDatasetFacet] = {} if read is None else {
        "inputStatistics": input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
            rowCount=read.rows, size=read.bytes, fileCount=read.files)}
    outputs: dict[str, OutputDatasetFacet] = {} if written is None else {
        "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=written.rows, size=written.bytes, fileCount=written.files)}
    return ([InputDataset(namespace=namespace, name=table, facets=facets, inputFacets=inputs)],
            [OutputDataset(namespace=namespace, name=table, facets=facets, outputFacets=outputs)])


def run_event(kind: EventType, *, table: str, catalog: str | None, run_id: str, read: Counts | None = None,
              written: Counts | None = None, schema: Schema | None = None, error: str | None = None) -> Any:
    """One RunEvent of lakesort's run `run_id` on `table` (openlineage-python's `event_v2.RunEvent`)."""
    # The extra's: only reached once `_client` found it.
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import error_message_run, job_type_job

    inputs, outputs = datasets(table=table, catalog=catalog, read=read, written=written, schema=schema)
    run_facets: dict[str, Any] = {}
    if error is not None:
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(message=error,
                                                                            programmingLanguage="python")
    return RunEvent(
        eventType=RunState[kind],
        eventTime=dt.datetime.now(dt.UTC).isoformat(),
        producer=PRODUCER,
        run=Run(runId=run_uuid(run_id), facets=run_facets),
        job=Job(namespace=job_namespace(), name=job_name(table), facets={
            "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="LAKESORT",
                                                    jobType="COMPACTION")}),
        inputs=inputs, outputs=outputs)


class RunLineage:
    """The events of one `lakesort compact` run: `start` before Spark, `complete` after the commit, `fail`
    with the error. Each is sent at once; a failure to build or send one is a logged warning."""

    def __init__(self, *, table: str, catalog: str | None, run_id: str) -> None:
        self.table, self.catalog, self.run_id = table, catalog, run_id

    @property
    def parent(self) -> ParentJob:
        """This run as the parent of the Spark job's own events."""
        return parent_job(table=self.table, run_id=self.run_id)

    def start(self, *, read: Counts | None = None) -> None:
        self._emit("START", read=read)

    def complete(self, *, read: Counts | None = None, written: Counts | None = None,
                 schema: Schema | None = None) -> None:
        self._emit("COMPLETE", read=read, written=written, schema=schema)

    def fail(self, error: BaseException | str) -> None:
        message = (str(error) or type(error).__name__) if isinstance(error, BaseException) else error
        self._emit("FAIL", error=_USERINFO.sub(r"\g<scheme>", message))

    def _emit(self, kind: EventType, **facts: Any) -> None:
        client = _client()
        if client is None:
            return
        try:
            client.emit(run_event(kind, table=self.table, catalog=self.catalog, run_id=self.run_id, **facts))
        except Exception as exc:  # noqa: BLE001 - lineage never fails a compaction
            log.warning("%s: the OpenLineage %s event of run %s was not sent: %s", self.table, kind,
                        self.run_id, exc)


def spark_listener_enabled(conf: Mapping[str, str]) -> bool:
    """Whether a Spark job with these confs runs openlineage-spark's listener (`spark.extraListeners`)."""
    return SPARK_LISTENER in {s.strip() for s in str(conf.get("spark.extraListeners", "")).split(",")}


def spark_parent_conf(parent: ParentJob) -> dict[str, str]:
    """openlineage-spark's parent (and root) run confs: the Spark job's events are children of `parent`."""
    return {"spark.openlineage.parentJobNamespace": parent.namespace,
            "spark.openlineage.parentJobName": parent.name,
            "spark.openlineage.parentRunId": parent.run_id,
            "spark.openlineage.rootParentJobNamespace": parent.namespace,
            "spark.openlineage.rootParentJobName": parent.name,
            "spark.openlineage.rootParentRunId": parent.run_id}
