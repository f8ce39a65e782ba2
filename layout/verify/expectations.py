"""The layout rules as Great Expectations (GX Core 1.x) suites, with Data Docs.

    suite = suite_for(spec, sort_keys)                  # ExpectationSuite "lakesort.<table>" over layout
                                                        # facts
    save_suites(specs, repo_root)                       # <repo_root>/gx/expectations/lakesort/<ns>/
                                                        # <name>.json
    result = validate_facts(facts, spec, sort_keys, docs_dir=Path(".lakesort/reports/gx"))
    result = validate_staged_data(manifest, spec)       # suite "lakesort.<table>.data": rows, keys (figures)
    verify = gx_verifier(spec, sort_keys, docs_dir=...) # the verify step's GX check: raises
                                                        # ExpectationsFailed

The facts suite runs on `layout.verify.rules.layout_facts` (one row per file x row group x column) as a
pandas DataFrame; rules about one column select its rows with a row condition (`column == "x"`,
GX `Condition` objects: string row conditions are deprecated since GX Core 1.9). Each expectation
carries `meta={"severity": "error" | "warning", "rule": <layout.verify.rules rule>, "notes": ...}`; only
error-severity failures fail a verification. `layout.verify.rules` stays the diagnosing checker (it says
why and which setting fixes it); this module makes the same promises reviewable (suites are JSON in
`gx/`) and visible (Data Docs).

Differences from `layout.verify.rules`: the boundary order is checked on row groups with more than one
page (a single page satisfies any order), but a constant multi-page chunk of a DESCENDING key shows
ASCENDING (parquet-mr) and fails here while `layout.verify.rules` accepts it; the minimum row group size
is a warning (a file's last row group is legitimately small); sorted-run overlap is not checked.

Validation runs in an ephemeral GX context (nothing is written to the repository's `gx/`); Data Docs
go to `<docs_dir>/gx-data-docs/` (`lakesort verify --gx --docs DIR`; default `.lakesort/reports/gx`).
Progress bars are off and GX logs only warnings.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from layout.errors import LakesortError
from layout.verify.facts import OpenedFile, layout_facts
from layout.verify.findings import Intent
from layout.verify.sources import resolve_source, staged_files

if TYPE_CHECKING:
    import pandas as pd
    from great_expectations import ExpectationSuite
    from great_expectations.data_context import AbstractDataContext
    from great_expectations.expectations.row_conditions import Condition

    from layout.manifest import StagedManifest
    from layout.spec import SortKey, TableSpec

log = logging.getLogger(__name__)

DOCS_SUBDIR = "gx-data-docs"
GX_DIR = "gx"
SITE_NAME = "lakesort"
# GX's own severity field, next to ours in meta.
_GX_SEVERITY = {"error": "critical", "warning": "warning"}
_ID_NAMESPACE = uuid.UUID("5b0f7a36-7c33-4a59-9a43-1f1f5d6c2a10")


class ExpectationsFailed(LakesortError):
    """An error-severity expectation failed; `errors` says which, `docs_index` where the Data Docs are."""

    def __init__(self, table: str, errors: Sequence[str], docs_index: Path | None = None) -> None:
        self.errors = list(errors)
        self.docs_index = docs_index
        lines = "\n".join(self.errors[:10])
        more = f"\n... and {len(self.errors) - 10} more" if len(self.errors) > 10 else ""
        docs = f"\nData Docs: {docs_index}" if docs_index is not None else ""
        super().__init__(f"{table}: {len(self.errors)} failed expectation(s):\n{lines}{more}{docs}")


@dataclass(frozen=True, slots=True)
class GxResult:
    success: bool  # no error-severity expectation failed
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    docs_index: Path | None = None

    def merge(self, other: GxResult) -> GxResult:
        return GxResult(self.success and other.success, self.errors + other.errors,
                        self.warnings + other.warnings, other.docs_index or self.docs_index)


# --- GX setup ---------------------------------------------------------------------------------------


def _gx() -> Any:
    # Before the first import: no usage statistics from CI or the nightly run.
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    with _quiet():
        # GX is optional (the pipeline extra) and takes ~3.7 s to import: imported where it is used.
        import great_expectations as gx

    return gx


def preload() -> None:
    """Import GX now, so that the verify step does not wait for it (`lakesort compact` calls this in a
    thread while the Spark job runs, when its own process only waits). Without GX installed, nothing."""
    try:
        _gx()
    except ImportError:
        log.debug("Great Expectations is not installed: nothing to preload")


class _BelowWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


_BELOW_WARNING = _BelowWarning()


@contextmanager
def _quiet() -> Any:
    """GX logs at INFO and warns about its own internals; keep the run's log to what matters."""
    # Some GX modules set their own logger to INFO, so the parent's level is not enough: they get a filter.
    # Not setLevel on each: every setLevel clears the level cache of every logger of the process, and the 165
    # GX loggers times two, times the 18 blocks of a verify, took 0.38 s of a verify step (one run, loaded).
    parent = logging.getLogger("great_expectations")
    children = [logger for name, logger in list(logging.root.manager.loggerDict.items())
                if name.startswith("great_expectations.") and isinstance(logger, logging.Logger)]
    level = parent.level
    parent.setLevel(max(level, logging.WARNING))
    for logger in children:
        logger.addFilter(_BELOW_WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"great_expectations(\.|$)")
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            yield
    finally:
        parent.setLevel(level)
        for logger in children:
            logger.removeFilter(_BELOW_WARNING)


def _no_progress_bars(context: AbstractDataContext) -> None:
    # GX is optional (the pipeline extra) and takes ~3.7 s to import: imported where it is used.
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)


class _Session:
    """One ephemeral context: suites validated in it share one Data Docs site."""

    def __init__(self, docs_dir: Path | None) -> None:
        gx = _gx()
        self.gx = gx
        with _quiet():
            self.context = gx.get_context(mode="ephemeral")
            _no_progress_bars(self.context)
            self.source = self.context.data_sources.add_pandas("lakesort")
        self.site_dir = Path(docs_dir) / DOCS_SUBDIR if docs_dir is not None else None
        if self.site_dir is not None:
            self.site_dir.mkdir(parents=True, exist_ok=True)
            self.context.add_data_docs_site(SITE_NAME, {
                "class_name": "SiteBuilder",
                "show_how_to_buttons": False,
                "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                                  "base_directory": str(self.site_dir.resolve())},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            })

    @property
    def docs_index(self) -> Path | None:
        return self.site_dir / "index.html" if self.site_dir is not None else None

    def publish(self) -> None:
        """Build the Data Docs site for every suite this session validated: one build (a build per suite's
        checkpoint, GX's UpdateDataDocsAction, took 0.65-0.71 s for two suites, one build 0.36-0.40 s)."""
        if self.site_dir is not None:
            with _quiet():
                self.context.build_data_docs(site_names=[SITE_NAME])

    def run(self, suite: ExpectationSuite, df: pd.DataFrame,
            parameters: Mapping[str, Any] | None = None) -> GxResult:
        gx = self.gx
        name = suite.name
        with _quiet():
            asset = self.source.add_dataframe_asset(name)
            batch = asset.add_batch_definition_whole_dataframe(name)
            suite = self.context.suites.add(suite)
            definition = self.context.validation_definitions.add(
                gx.ValidationDefinition(name=name, data=batch, suite=suite))
            # No UpdateDataDocsAction: `publish` builds the site once for all of the session's suites.
            checkpoint = self.context.checkpoints.add(gx.Checkpoint(
                name=name, validation_definitions=[definition], actions=[],
                result_format={"result_format": "SUMMARY",
                               "unexpected_index_column_names": _index_columns(df)}))
            result = checkpoint.run(batch_parameters={"dataframe": df},
                                    expectation_parameters=dict(parameters or {}))
        errors: list[str] = []
        warns: list[str] = []
        for validation in result.run_results.values():
            for outcome in validation.results:
                if outcome.success:
                    continue
                config = outcome.expectation_config
                severity = (config.meta or {}).get("severity", "error")
                text = _describe(config, outcome)
                (errors if severity == "error" else warns).append(text)
        for text in warns:
            log.warning("%s: %s", name, text)
        return GxResult(not errors, errors, warns, self.docs_index)


def _index_columns(df: pd.DataFrame) -> list[str]:
    # Facts rows are named by file and row group in the results (and the Data Docs).
    return [c for c in ("path", "row_group", "column") if c in df.columns]


# --- suites -----------------------------------------------------------------------------------------




def _add(suite: list[Any], cls: type, severity: str, rule: str, note: str, **kwargs: Any) -> None:
    expectation = cls(severity=_GX_SEVERITY[severity], meta={"severity": severity, "rule": rule}, **kwargs)
    # Notes are rendered in Data Docs: a reader sees the rule and the expectation type by name.
    expectation.notes = f"**{severity}** `{rule}` ({expectation.expectation_type}): {note}"
    suite.append(expectation)


def suite_for(spec: TableSpec | None, sort_keys: Sequence[SortKey] | None = None) -> ExpectationSuite:
    """The facts suite `lakesort.<table>` (a spec of None: column and offset indexes on every column)."""
    gx = _gx()
    # GX is optional (the pipeline extra) and takes ~3.7 s to import: imported where it is used.
    from great_expectations import expectations as E
    from great_expectations.expectations.row_conditions import Column


    intent = Intent.of(spec, sort_keys)
    name = f"lakesort.{spec.table}" if spec is not None else "lakesort.default"
    suite: list[Any] = []
    with _quiet():
        required = (set(intent.boundary_orders) | set(intent.bloom_columns)
                    | {k.column for k in intent.sort_keys})
        if intent.index_columns != "all":
            required |= set(intent.index_columns)
        if spec is not None and spec.keys is not None:
            required |= set(spec.keys.columns)
        _add(suite, E.ExpectTableRowCountToBeBetween, "error", "files",
             "there are files to check", min_value=1)
        if required:
            _add(suite, E.ExpectColumnDistinctValuesToContainSet, "error", "columns",
                 "every column the spec names is in the files", column="column", value_set=sorted(required))
        index_rows = (None if intent.index_columns == "all"
                      else Column("column").is_in(sorted(intent.index_columns)))
        which = "every column" if index_rows is None else ", ".join(sorted(intent.index_columns))
        # parquet-mr writes no column index for a float/double chunk holding NaN, whatever its settings: such
        # a chunk is reported (a warning), not refused (`layout.verify.rules`, rule nan_column_index).
        no_nan = Column("has_nan") == False
        with_nan = Column("has_nan") == True
        for what in ("column_index", "offset_index"):
            where: Condition | None = index_rows
            if what == "column_index":
                where = no_nan if index_rows is None else index_rows & no_nan
            _add(suite, E.ExpectColumnValuesToBeInSet, "error", "page_index",
                 f"a {what.replace('_', ' ')} in every chunk of {which}"
                 + (" without NaN" if what == "column_index" else ""), column=f"has_{what}", value_set=[True],
                 **({"row_condition": where} if where is not None else {}))
        _add(suite, E.ExpectColumnValuesToBeInSet, "warning", "nan_column_index",
             f"float/double chunks of {which} holding NaN have no column index (parquet-mr writes none): "
             "readers cannot prune them by page", column="has_column_index", value_set=[True],
             row_condition=with_nan if index_rows is None else index_rows & with_nan)
        for column, order in sorted(intent.boundary_orders.items()):
            if order == "UNORDERED":
                continue
            _add(suite, E.ExpectColumnValuesToBeInSet, "error", "boundary_order",
                 f"`{column}` pages are {order} in every row group of more than one page",
                 column="boundary_order", value_set=[order],
                 row_condition=(Column("column") == column) & (Column("pages") > 1))
        if intent.bloom_columns:
            _add(suite, E.ExpectColumnValuesToBeInSet, "error", "bloom_filter",
                 f"a bloom filter in every chunk of {', '.join(intent.bloom_columns)}",
                 column="has_bloom_filter", value_set=[True],
                 row_condition=Column("column").is_in(sorted(intent.bloom_columns)))
        if intent.min_file_size or intent.max_file_size is not None:
            _add(suite, E.ExpectColumnValuesToBeBetween, "error", "file_size",
                 "files within verify.min_file_size .. max_file_size", column="file_size",
                 min_value=intent.min_file_size, max_value=intent.max_file_size)
        if intent.max_row_group_size is not None:
            _add(suite, E.ExpectColumnValuesToBeBetween, "error", "row_group_size",
                 "row groups at most verify.max_row_group_size compressed bytes", column="row_group_bytes",
                 max_value=intent.max_row_group_size)
        if intent.min_row_group_size:
            _add(suite, E.ExpectColumnValuesToBeBetween, "warning", "row_group_size",
                 "row groups at least verify.min_row_group_size (a file's last row group may be smaller)",
                 column="row_group_bytes", min_value=intent.min_row_group_size)
        _add(suite, E.ExpectColumnValuesToBeBetween, "warning", "row_group_size", "no empty row groups",
             column="num_rows", min_value=1)
        if intent.page_row_limit is not None:
            _add(suite, E.ExpectColumnValuesToBeBetween, "warning", "pages",
                 "pages hold at most writer.page_row_count_limit rows", column="max_rows_per_page",
                 max_value=intent.page_row_limit)
        facts_suite: ExpectationSuite = gx.ExpectationSuite(name=name, expectations=suite)
        return facts_suite


def data_suite_for(spec: TableSpec) -> ExpectationSuite:
    """`lakesort.<table>.data`, over the staged groups' figures (one row per group, `staged_figures`): the
    rows Spark read back from the staged files and their footers' rows equal the rows the input holds;
    keyed tables: no duplicate and no null key. Only the manifest is read: the data was read by Spark."""
    gx = _gx()
    # GX is optional (the pipeline extra) and takes ~3.7 s to import: imported where it is used.
    from great_expectations import expectations as E

    suite: list[Any] = []
    with _quiet():
        _add(suite, E.ExpectColumnPairValuesToBeEqual, "error", "row_count",
             "the staged files, read back by Spark, hold the rows the input holds",
             column_A="read_back_rows", column_B="expected_rows")
        _add(suite, E.ExpectColumnPairValuesToBeEqual, "error", "row_count",
             "the staged files' footers count the rows the input holds",
             column_A="footer_rows", column_B="expected_rows")
        if spec.keys is not None:
            for figure in ("duplicate_keys", "null_keys"):
                _add(suite, E.ExpectColumnValuesToBeBetween, "error", "keys",
                     f"no {figure.replace('_', ' ')} in the staged files "
                     f"(keys {', '.join(spec.keys.columns)})",
                     column=figure, min_value=0, max_value=0)
        data_suite: ExpectationSuite = gx.ExpectationSuite(name=f"lakesort.{spec.table}.data",
                                                           expectations=suite)
        return data_suite


# --- the suites as reviewable JSON in the repository --------------------------------------------------


def _project_root(project_dir: str | os.PathLike[str]) -> Path:
    """The directory holding `gx/` (a path to the `gx/` folder itself is accepted too)."""
    path = Path(project_dir)
    return path.parent if path.name == GX_DIR else path


def open_project(project_dir: str | os.PathLike[str]) -> AbstractDataContext:
    """The file-mode GX project `<project_dir>/gx` (created on first use), progress bars off."""
    gx = _gx()
    with _quiet():
        root = str(_project_root(project_dir))
        context: AbstractDataContext = gx.get_context(mode="file", project_root_dir=root)
    _no_progress_bars(context)
    return context


def _suite_json(suite: ExpectationSuite) -> dict[str, Any]:
    """The suite as GX stores it, with ids derived from the content (GX draws random ones)."""
    data: dict[str, Any] = json.loads(json.dumps(suite.to_json_dict(), default=str))
    for index, expectation in enumerate(data["expectations"]):
        expectation.pop("id", None)
        body = json.dumps(expectation, sort_keys=True)
        expectation["id"] = str(uuid.uuid5(_ID_NAMESPACE, f"{suite.name}/{index}/{body}"))
    data["id"] = str(uuid.uuid5(_ID_NAMESPACE, suite.name))
    return data


def save_suites(specs: Iterable[TableSpec], project_dir: str | os.PathLike[str]) -> list[Path]:
    """Write the facts and data suites of each spec into `<project_dir>/gx/expectations/` (deterministic:
    a file is rewritten only when its content changes). Returns the suite files."""
    context = open_project(project_dir)
    assert context.root_directory is not None  # a file-mode project has its directory
    root = Path(context.root_directory) / "expectations"
    written = []
    for spec in specs:
        for suite in (suite_for(spec), data_suite_for(spec)):
            path = root.joinpath(*suite.name.split(".")).with_suffix(".json")
            text = json.dumps(_suite_json(suite), indent=2, sort_keys=True) + "\n"
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                log.info("wrote %s", path)
            written.append(path)
    return written


def _stale(suite: ExpectationSuite, project_dir: str | os.PathLike[str]) -> bool:
    """True (and a warning) when the reviewed suite in the project differs from the spec's."""
    path = (
        (_project_root(project_dir) / GX_DIR / "expectations")
        .joinpath(*suite.name.split("."))
        .with_suffix(".json")
    )
    saved = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    if saved == _suite_json(suite):
        return False
    state = "missing" if saved is None else "out of date"
    log.warning("GX suite %s in %s is %s; run save_suites (the spec's suite is used)", suite.name,
                path, state)
    return True


# --- validation ---------------------------------------------------------------------------------------


def validate_facts(facts: pa.Table, spec: TableSpec | None, sort_keys: Sequence[SortKey] | None = None, *,
                   project_dir: str | os.PathLike[str] | None = None,
                   docs_dir: str | os.PathLike[str] | None = None,
                   _session: _Session | None = None) -> GxResult:
    """Validate a `layout_facts` table with `suite_for(spec, sort_keys)`; Data Docs into
    `<docs_dir>/gx-data-docs/` when `docs_dir` is given. `project_dir`: warn when its saved suite is stale."""
    suite = suite_for(spec, sort_keys)
    if project_dir is not None:
        _stale(suite, project_dir)
    session = _session or _Session(Path(docs_dir) if docs_dir is not None else None)
    result = session.run(suite, facts.to_pandas())
    if _session is None:
        session.publish()
    return result


def _staged_paths(manifest: StagedManifest) -> list[tuple[Any, str, str]]:
    files, partitions = staged_files(manifest)
    return [(filesystem, path, partitions[path]) for filesystem, path in files]


def staged_figures(manifest: StagedManifest) -> pa.Table:
    """One row per staged group: its expected rows, the rows Spark read back and the footers' rows, and
    (keyed tables) duplicate and null keys; the data suite's input."""
    groups = manifest.groups
    return pa.table({
        "group_id": [g.group_id for g in groups],
        "partition": [g.partition for g in groups],
        "expected_rows": [g.expected_rows for g in groups],
        "read_back_rows": [sum(f.read_back_rows or 0 for f in g.outputs) if all(
            f.read_back_rows is not None for f in g.outputs) else None for g in groups],
        "footer_rows": [sum(f.rows for f in g.outputs) for g in groups],
        "duplicate_keys": pa.array([g.duplicate_keys for g in groups], pa.int64()),
        "null_keys": pa.array([g.null_keys for g in groups], pa.int64()),
    })


def validate_staged_data(manifest: StagedManifest, spec: TableSpec,
                         sort_keys: Sequence[SortKey] | None = None, *,
                         docs_dir: str | os.PathLike[str] | None = None,
                         _session: _Session | None = None) -> GxResult:
    """The data suite on the manifest's figures (`staged_figures`): rows as expected; keyed tables: no
    duplicate or null keys. Reads no data: Spark's executors counted it when they read the files back."""

    session = _session or _Session(Path(docs_dir) if docs_dir is not None else None)
    result = session.run(data_suite_for(spec), staged_figures(manifest).to_pandas())
    if _session is None:
        session.publish()
    return result


def gx_verifier(spec: TableSpec, sort_keys: Sequence[SortKey], *,
                docs_dir: str | os.PathLike[str] | None = None) -> Callable[..., None]:
    """The verify step's GX check, after the layout rules (`layout.compaction.pipeline.steps`): run the facts
    and data suites on the staged outputs; raise `ExpectationsFailed` when an error-severity
    expectation fails."""
    def verify(manifest: StagedManifest, opened: Sequence[OpenedFile] | None = None) -> None:
        """`opened`: the staged files already opened for the layout rules (`open_staged`);
        else opened here."""
        if opened is not None:
            facts = layout_facts(opened)
        else:
            files = _staged_paths(manifest)
            facts = layout_facts([(fs, p) for fs, p, _ in files],
                                 partitions={p: part for _, p, part in files})
        session = _Session(Path(docs_dir) if docs_dir is not None else None)
        result = validate_facts(facts, spec, sort_keys, _session=session).merge(
            validate_staged_data(manifest, spec, sort_keys, _session=session))
        session.publish()
        if result.docs_index is not None:
            log.info("GX Data Docs: %s", result.docs_index)
        if not result.success:
            raise ExpectationsFailed(spec.table, result.errors, result.docs_index)
    return verify


def facts_for_source(source: str, spec: TableSpec | None = None
                     ) -> tuple[pa.Table, TableSpec | None, tuple[SortKey, ...] | None]:
    """Facts of a file, a directory or an Iceberg table (resolved as `layout.verify.rules.verify_source`
    resolves them), with the spec and sort keys to validate them against."""
    found = resolve_source(source, spec)
    return layout_facts(found.files, partitions=found.partitions), found.spec, found.sort_keys


# --- messages -----------------------------------------------------------------------------------------


def _condition_text(condition: Any) -> str:
    if condition is None:
        return ""
    if isinstance(condition, Mapping):
        kind = condition.get("type")
        if kind in ("and", "or"):
            return f" {kind.upper()} ".join(_condition_text(c) for c in condition.get("conditions", []))
        if kind == "comparison":
            return f"{condition['column']['name']} {condition['operator']} {condition['parameter']!r}"
        return json.dumps(condition, sort_keys=True, default=str)
    return str(condition)


def _describe(config: Any, outcome: Any) -> str:
    kwargs = dict(config.kwargs)
    meta = config.meta or {}
    pair = " = ".join(kwargs[k] for k in ("column_A", "column_B") if kwargs.get(k))
    target = kwargs.get("column") or ", ".join(kwargs.get("column_list") or ()) or pair or "table"
    bounds = {k: kwargs[k] for k in ("value_set", "min_value", "max_value", "value")
              if kwargs.get(k) is not None}
    where = _condition_text(kwargs.get("row_condition"))
    head = (
        f"[{meta.get('rule', '?')}] {config.type}({target}"
        + "".join(f", {k}={v!r}" for k, v in bounds.items())
        + ")"
        + (f" where {where}" if where else "")
    )
    result = outcome.result or {}
    if "observed_value" in result:
        observed = f"observed {result['observed_value']!r}"
    elif "unexpected_count" in result:
        sample = result.get("partial_unexpected_list") or []
        observed = f"{result['unexpected_count']} of {result.get('element_count', '?')} row(s) unexpected"
        if sample:
            observed += f", e.g. {sample[:3]!r}"
        located = result.get("partial_unexpected_index_list") or []
        if located and isinstance(located[0], Mapping) and "path" in located[0]:
            first = located[0]
            observed += (
                f" (first: {first['path']}"
                + (f", row group {first['row_group']}" if "row_group" in first else "")
                + ")"
            )
    elif outcome.exception_info and outcome.exception_info.get("raised_exception"):
        observed = f"could not be evaluated: {outcome.exception_info.get('exception_message')}"
    else:
        observed = "failed"
    return f"{head}: {observed}"


__all__ = [
    "ExpectationsFailed", "GxResult", "data_suite_for", "facts_for_source", "gx_verifier", "open_project",
    "preload", "save_suites", "suite_for", "validate_facts", "validate_staged_data",
]
