"""Every `LAKESORT_*` setting, in one place: its variable, default, meaning and how it is read.

    from layout.settings import settings
    settings().work_dir          # $LAKESORT_WORK_DIR, else <tmp>/lakesort-work

`settings()` reads the environment when it is called (tests and tasks set variables after import) and
returns a frozen `Settings`. A variable that is unset or empty takes the default. A value that cannot be
read is a `ConfigError` naming the variable, the value and what is accepted, raised on first use rather
than deep inside a run.

This module imports the standard library, pydantic and `layout.sizes` only: the DAG files read their
settings (cron, pool, retries) from it when Airflow parses them, and that must stay cheap.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError

from layout.errors import ConfigError
from layout.models import Frozen
from layout.sizes import parse_size

__all__ = ["PREFIX", "Settings", "default_tables_dir", "settings", "variables"]

PREFIX = "LAKESORT_"


def _json_dict(value: object, like: str) -> dict[Any, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object of {like}")  # noqa: TRY004 - pydantic wants ValueError
    return value


def _json_object(value: object) -> object:
    spark = _json_dict(value, "Spark properties, like {\"spark.executor.memory\": \"4g\"}")
    return {str(k): str(v) for k, v in spark.items()}


def _json_fields(value: object) -> object:
    return _json_dict(value, "fields, like {\"max_age\": \"30d\"}")


def _boolean(value: object) -> object:
    # Only the four spellings the docs name: "yes" or "on" would be guesses.
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise ValueError("not a boolean; use true, false, 1 or 0")
    return value


Bytes = Annotated[int, BeforeValidator(parse_size), Field(gt=0)]
Hours = Annotated[float, Field(ge=0, allow_inf_nan=False)]
PositiveSeconds = Annotated[float, Field(gt=0)]
Boolean = Annotated[bool, BeforeValidator(_boolean)]
SparkConf = Annotated[dict[str, str], BeforeValidator(_json_object)]
JsonFields = Annotated[dict[str, Any], BeforeValidator(_json_fields)]
# How the verify step re-reads staged files outside Spark (`layout.compaction.integrity.staged`).
Recheck = Literal["none", "sample", "all"]


def _setting(default: Any, description: str, **kwargs: Any) -> Any:
    return Field(default, description=description, **kwargs)


class Settings(Frozen):
    """The settings, each read from `LAKESORT_<NAME>` (the field name in upper case)."""

    # -- where things are ------------------------------------------------------------------------------
    tables_dir: Path = _setting(Path("dags/tables"), "The table registry: one YAML spec per table "
                                "(relative paths are the working directory's; the DAGs set it to theirs).")
    report_dir: Path = _setting(Path(".lakesort/reports"), "Where HTML reports and GX Data Docs (gx/) go.")
    work_dir: Path = _setting(Path(tempfile.gettempdir()) / "lakesort-work", "Run files (plans, staged "
                              "manifests, the layout zip) and table leases; shared by every worker. The "
                              "command line and the DAGs (the demo's too) default to the same directory, so "
                              "a hand-run `lakesort compact` and a scheduled run share each table's lease.")
    work_keep_days: Hours = _setting(14.0, "Days a table's run directories are kept (one a night).")
    # -- one run per table -----------------------------------------------------------------------------
    lease_ttl_hours: Hours = _setting(12.0, "Age after which a table lease is taken to be a dead run's and "
                                      "broken.")
    cleanup_grace_hours: Hours = _setting(24.0, "`lakesort cleanup` deletes an unreferenced staged file only "
                                          "when it is older than this.")
    # -- checking the staged output --------------------------------------------------------------------
    recheck: Recheck = _setting(
        "sample", "Staged files the verify step re-reads outside Spark (pyarrow, one process) to confirm the "
        "fingerprints Spark read back: `none`, a seeded `sample` up to recheck_sample_bytes, or `all` (small "
        "tables only: about 13 MB/s).")
    recheck_sample_bytes: Bytes = _setting(16 << 20, "Bytes of staged files a `sample` "
                                                     "recheck reads, at most.")
    # -- Spark -----------------------------------------------------------------------------------------
    spark_master: str = _setting("local[*]", "The master `lakesort compact` submits to (the DAGs use the "
                                 "Airflow connection instead).")
    spark_conf: SparkConf = _setting({}, "Extra Spark properties for the DAGs' jobs, as a JSON object.")
    spark_application: str | None = _setting(None, "The job file the DAGs submit (default: jobs/compact.py "
                                              "of this checkout; a cluster image may hold it elsewhere).")
    spark_python: str | None = _setting(None, "The Python of executors (default: $PYSPARK_PYTHON, else the "
                                        "worker's own).")
    ship_layout: Literal["zip", "installed"] = _setting("zip", "`zip`: ship the layout package to executors "
                                                        "with --py-files; `installed`: the image has it.")
    spark_class_archive: bool = _setting(True, "Start the job's driver JVM from the class archive that "
                                         "`lakesort spark-archive` (run by `make setup`) builds, when there "
                                         "is one: 2-3 s less start-up per job on two cores.")
    # -- Airflow (read when the DAG files are parsed) --------------------------------------------------
    spark_conn_id: str = _setting("spark_default", "The Airflow connection of the Spark cluster.")
    nightly_cron: str = _setting("0 2 * * *", "When lakesort_nightly runs (cron, UTC).")
    pool: str = _setting("lakesort", "The Airflow pool of every lakesort Spark task (create it first).")
    spark_retries: Annotated[int, Field(ge=0)] = _setting(2, "Retries of a failed Spark task.")
    spark_retry_delay: Annotated[float, Field(ge=0)] = _setting(60.0, "Seconds before the first retry "
                                                                "(then exponential backoff).")
    spark_parallelism: Annotated[int, Field(gt=0)] = _setting(2, "Spark applications of one DAG run at a "
                                                              "time.")
    nightly_budget_bytes: Bytes | None = _setting(
        None, "Input bytes lakesort_nightly rewrites a night, at most (a number, or 64GiB): the planned runs "
        "go in order of predicted benefit over cost while it lasts, the rest are deferred (recorded, with "
        "why). Unset: unlimited. The backfill DAG and `lakesort compact` are not budgeted.")
    # -- lakesort's own tables (layout.upkeep.housekeeping) ---------------------------------------
    housekeeping_retention: JsonFields = _setting(
        {}, "The history `lakesort housekeep` (and the nightly report task) keeps of lakesort's own tables, "
        "as a JSON object of a table spec's `retention` fields, like {\"max_age\": \"30d\", "
        "\"min_snapshots\": 20}; a field left out keeps its value of max_age 7d, "
        "min_snapshots 10, orphan_grace 1d.")
    # -- measuring (layout.metrics) -------------------------------------------------------------------
    engine_check: Boolean = _setting(True, "Run each measured probe with DataFusion too and record what it "
                                     "reads next to lakesort's model (true/false; `lakesort measure "
                                     "--no-engine` for one run). A real query per probe and snapshot.")
    engine_check_max_bytes: Bytes = _setting(64 << 20, "Compressed bytes the DataFusion check reads per "
                                             "probe, at most: a probe selecting more is checked on a seeded "
                                             "sample of its files.")
    # -- the metadata cache (layout.read.cache) -------------------------------------------------------
    cache_enabled: Boolean = _setting(True, "Cache Parquet footers, page indexes and manifests (true/false).")
    cache_max_bytes: Bytes = _setting(256 << 20, "Bytes the cache may hold (a number, or 256MiB, 1GiB).")
    cache_max_entry_bytes: Bytes = _setting(16 << 20, "Largest single value the cache keeps.")
    cache_expire_seconds: PositiveSeconds = _setting(3600.0, "Seconds an unused value stays (inf: never "
                                                     "expires).")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        given = {name: env[var].strip() for name, var in variables().items() if env.get(var, "").strip()}
        try:
            return cls.model_validate(given)
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                name = str(error["loc"][0]) if error["loc"] else "?"
                var = PREFIX + name.upper()
                description = cls.model_fields[name].description if name in cls.model_fields else ""
                problems.append(f"${var}={given.get(name)!r}: {error['msg']} ({description} Default: "
                                f"{cls.model_fields[name].default!r}; unset it for the default)")
            raise ConfigError("bad lakesort setting(s): " + "; ".join(problems)) from None


def variables() -> dict[str, str]:
    """Field name -> environment variable."""
    return {name: PREFIX + name.upper() for name in Settings.model_fields}


def settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings from the environment now (or `environ`)."""
    return Settings.from_env(environ)


def default_tables_dir(path: Path) -> Path:
    """`settings().tables_dir`, `path` by default: set as $LAKESORT_TABLES_DIR when that is unset or empty, so
    that every later `settings()` of this process, and of the processes it starts, reads it too (the DAG
    files' registry, beside them, for their tasks' `layout` as well)."""
    if "tables_dir" not in settings().model_fields_set:
        os.environ[PREFIX + "TABLES_DIR"] = str(path)
    return settings().tables_dir
