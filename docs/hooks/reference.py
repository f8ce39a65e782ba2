"""MkDocs hook: the Reference pages, generated from the code at every build, so they never go stale.

- `reference/cli.md`: every command, argument and flag, from `layout.cli.build_parser()`;
- `reference/table-spec.md`: every spec key, from the spec's JSON schema (`layout.spec.schema`), with the
  `lakesort.*` table property that sets it (`layout.registry.keys.PROPERTY_OF`);
- `reference/settings.md`: every `LAKESORT_*` variable, from `layout.settings.Settings`;
- `reference/metrics-tables.md`: the columns of lakesort's own Iceberg tables (`layout.metrics.store`,
  `layout.advise.history`);
- `reference/exit-codes.md`: the exit statuses (`layout.cli`) and what each command's help says of them.

mkdocs.yml names this file under `hooks:`; tests/test_docs.py builds the site with `--strict` and also calls
`pages()` directly.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `layout` from this checkout, whatever the working directory
    sys.path.insert(0, str(ROOT))

GENERATED = "<!-- generated from the code by docs/hooks/reference.py: edit the code, not this page -->\n\n"


# ---- Markdown helpers ----------------------------------------------------------------------------------


def text(value: str) -> str:
    """Help text as Markdown: code spans kept, Markdown's special characters escaped outside them."""
    parts = value.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: escape it too
        parts = [value.replace("`", "\\`")]
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"`{part}`")
        else:
            out.append(re.sub(r"([\\*_\[\]<>|#])", r"\\\1", part))
    return "".join(out).replace("\n", " ")


def code(value: object) -> str:
    shown = str(value)
    return f"`` {shown} ``" if "`" in shown else f"`{shown}`"


def size(n: int) -> str:
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


# ---- the command line ----------------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _option_lines(parser: argparse.ArgumentParser) -> Iterator[str]:
    formatter = parser._get_formatter()
    exclusive = {id(a): group for group in parser._mutually_exclusive_groups for a in group._group_actions}
    for action in parser._actions:
        renamed = getattr(action, "new", None)  # an old flag name, kept working (layout.cli._Deprecated)
        if renamed and action.option_strings:
            yield f"- {code(', '.join(action.option_strings))}: deprecated, the old name of {code(renamed)}"
            continue
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                name += " " + (action.metavar or action.dest.upper())
        else:
            name = str(action.metavar or action.dest)
        help_text = formatter._expand_help(action) if action.help else ""
        notes = []
        if action.required and action.option_strings:
            notes.append("required")
        if isinstance(action, argparse._AppendAction):
            notes.append("repeatable")
        group = exclusive.get(id(action))
        if group is not None:
            others = [o.option_strings[0] for o in group._group_actions
                      if o is not action and o.option_strings]
            notes.append("not with " + ", ".join(others))
        suffix = f" ({'; '.join(notes)})" if notes else ""
        yield f"- {code(name)}: {text(help_text)}{suffix}"


def _usage(parser: argparse.ArgumentParser) -> str:
    usage = parser.format_usage().strip()
    return re.sub(r"\s+", " ", usage.removeprefix("usage: "))


def cli_page() -> str:
    from layout.cli import build_parser

    parser = build_parser()
    lines = [
        "# Command line", "", GENERATED.strip(), "",
        ("`lakesort --help` lists the commands and `lakesort COMMAND --help` explains one. Results go to "
         "stdout; progress, timings and errors go to stderr. The exit statuses are in "
         "[Exit codes](exit-codes.md)."), "",
        "## lakesort", "", "```", _usage(parser), "```", "",
        text(parser.description or ""), "",
        "Options before the command (`-q` and `-v` also work after it):", "",
        *_option_lines(parser), "",
        "| command | what it does |", "|---|---|",
    ]
    commands = _subcommands(parser)
    helps = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
    for name in commands:
        lines.append(f"| [`lakesort {name}`](#lakesort-{name}) | {text(helps.get(name, ''))} |")
    lines.append("")
    for name, sub in commands.items():
        lines += [f"## lakesort {name}", "", "```", _usage(sub), "```", ""]
        if sub.description:
            lines += [text(sub.description), ""]
        lines += list(_option_lines(sub)) + [""]
        if sub.epilog:
            lines += [text(sub.epilog), ""]
    return "\n".join(lines)


# ---- the table spec ------------------------------------------------------------------------------------


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref:
        return {**schema["$defs"][ref.rsplit("/", 1)[1]], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _type(schema: dict[str, Any], node: dict[str, Any]) -> str:
    node = _resolve(schema, node)
    if "enum" in node:
        return " \\| ".join(code(v) for v in node["enum"])
    if "anyOf" in node:
        kinds = [_type(schema, n) for n in node["anyOf"] if n.get("type") != "null"]
        if any(n.get("description", "").startswith("a number with a binary unit") for n in node["anyOf"]):
            return "size (bytes, or e.g. `128MiB`)"
        return " or ".join(dict.fromkeys(kinds)) + (", or null" if len(kinds) < len(node["anyOf"]) else "")
    kind = node.get("type")
    if kind == "array":
        return f"list of {_type(schema, node.get('items', {}))}"
    if kind == "object" and "properties" in node:
        return "mapping (below)"
    if kind == "object":
        return "mapping"
    return str(kind or "any")


def _default(node: dict[str, Any], key: str) -> str:
    if "default" not in node:
        return "required" if key else ""
    value = node["default"]
    if isinstance(value, bool):
        return code(str(value).lower())
    if isinstance(value, int) and value >= 1 << 10 and ("size" in key or "bytes" in key):
        return code(size(value))
    if value is None:
        return "unset"
    return code(json.dumps(value))


def _spec_rows(schema: dict[str, Any], properties: dict[str, Any], required: list[str],
               prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, raw in properties.items():
        key = prefix + name
        node = _resolve(schema, raw)
        node.setdefault("_required", name in required)
        yield key, {**raw, **node}
        if node.get("type") == "object" and "properties" in node:
            yield from _spec_rows(schema, node["properties"], node.get("required", []), key + ".")
        items = _resolve(schema, node.get("items", {})) if node.get("type") == "array" else {}
        if items.get("properties"):
            yield from _spec_rows(schema, items["properties"], items.get("required", []), key + "[].")
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and "$ref" in extra:
            inner = _resolve(schema, extra)
            yield from _spec_rows(schema, inner.get("properties", {}), inner.get("required", []),
                                  key + ".<column>.")


def spec_rows() -> list[tuple[str, str, str, str, str]]:
    """(key, type, default, table property, description) for every key of the spec's JSON schema."""
    from layout.registry.keys import PROPERTY_OF
    from layout.spec.schema import table_spec_schema

    schema = table_spec_schema()
    rows = []
    for key, node in _spec_rows(schema, schema["properties"], schema.get("required", []), ""):
        default = "required" if node.get("_required") and "default" not in node else _default(node, key)
        prop = PROPERTY_OF.get(key, "")
        rows.append((key, _type(schema, node), default, prop, node.get("description", "")))
    return rows


def spec_page() -> str:
    from layout.spec.schema import table_spec_schema

    schema = table_spec_schema()
    lines = [
        "# Table spec", "", GENERATED.strip(), "",
        text(schema.get("description", "")), "",
        ("A spec is a YAML file per table in `dags/tables/` (`$LAKESORT_TABLES_DIR`). Its first line names "
         "the "
        "published JSON schema, so that editors validate and complete it:"), "",
        "```yaml", "# yaml-language-server: $schema=../../schemas/table-spec.schema.json", "```", "",
        ("Every key below can also come from a `lakesort.*` table property, from a namespace default or from "
        "the table's own settings ([Onboard a table](../how-to/onboard-a-table.md) says which wins). "
        "Sizes take a number of bytes or a binary unit (`512KiB`, `128MiB`, `1.5GiB`); durations take "
        "`36h`, `3d`, `2w`. Unknown keys and bad values are errors naming the file and the key."), "",
        "| key | type | default | table property | meaning |", "|---|---|---|---|---|",
    ]
    for key, kind, default, prop, description in spec_rows():
        shown = code(prop) if prop else ""
        lines.append(f"| {code(key)} | {kind} | {default} | {shown} | {text(description)} |")
    lines += ["", ("Regenerate the published schema after changing the model: "
              "`python -m layout.spec --schema > schemas/table-spec.schema.json` (a test fails while it is "
              "stale)."), ""]
    return "\n".join(lines)


# ---- settings ------------------------------------------------------------------------------------------


def _setting_default(value: object) -> str:
    tmp = tempfile.gettempdir()
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return code(str(value).lower())
    if isinstance(value, Path):
        shown = str(value)
        if shown.startswith(tmp):  # the machine's temporary directory, whatever it is
            shown = "<tmp>" + shown[len(tmp):]
        return code(shown)
    if isinstance(value, dict):
        return code(json.dumps(value))
    if isinstance(value, int) and value >= 1 << 20:
        return code(size(value))
    if isinstance(value, float) and value.is_integer():
        return code(int(value))
    return code(value)


def _setting_kind(field: Any) -> str:
    names = " ".join(repr(m) for m in field.metadata) + repr(field.annotation)
    if "parse_size" in names:
        return "size"
    if "_boolean" in names or field.annotation is bool:
        return "boolean"
    if "_json" in names:
        return "JSON object"
    if "Literal" in repr(field.annotation):
        return " \\| ".join(code(a) for a in field.annotation.__args__)
    return {int: "integer", float: "number", str: "text", Path: "path"}.get(field.annotation, "text")


def settings_rows() -> list[tuple[str, str, str, str]]:
    from layout.settings import Settings, variables

    names = variables()
    return [(names[name], _setting_kind(field), _setting_default(field.default), field.description or "")
            for name, field in Settings.model_fields.items()]


def settings_page() -> str:
    lines = [
        "# Settings", "", GENERATED.strip(), "",
        ("Every `LAKESORT_*` environment variable, read by `layout.settings` when a command or task runs "
         "(the DAG files read the Airflow ones when they are parsed). An unset or empty variable takes the "
         "default; "
        "a value that cannot be read is an error naming the variable, the value and what is accepted. Sizes "
        "take a number of bytes or a binary unit (`64GiB`); booleans `true`, `false`, `1` or `0`."), "",
        "| variable | type | default | meaning |", "|---|---|---|---|",
    ]
    for var, kind, default, description in settings_rows():
        lines.append(f"| {code(var)} | {kind} | {default} | {text(description)} |")
    lines += ["", ("The catalog is configured the way pyiceberg configures it (a `.pyiceberg.yaml` or "
              "`PYICEBERG_CATALOG__<NAME>__<KEY>` variables); the Airflow connection of the Spark cluster is "
              "described in [Run from an existing Airflow and Spark]"
              "(../how-to/existing-airflow-and-spark.md)."),
              ""]
    return "\n".join(lines)


# ---- lakesort's own tables ----------------------------------------------------------------------------

# What each column holds. A column missing here is still listed (the names and types come from the code).
COLUMNS: dict[str, str] = {
    "run_id": "the run (a nightly, backfill or `lakesort compact` run id; `measure-<snapshot>` on demand)",
    "phase": "`before` or `after` a compaction, or `on-demand`",
    "table": "the measured table, `namespace.name`",
    "snapshot_id": "the snapshot measured (or current when the run was recorded)",
    "measured_at": "when the measurement was taken",
    "probe": "the probe's name (the owners' from the spec, or a standard probe `std_<key>_...`)",
    "probe_kind": "`owner` or `standard`",
    "predicate": "the probe's SQL condition",
    "columns": "the projected columns, comma-separated; empty for all",
    "files_total": "data files of the snapshot", "files_selected": "data files a reader must open",
    "row_groups_total": "row groups of the snapshot; null when the manifests pruned files (only footers "
                        "count row groups)",
    "row_groups_selected": "row groups a reader must read",
    "pages_total": "pages of the counted columns; null when the manifests pruned files",
    "pages_selected": "pages a reader must read",
    "pages_ideal": "pages holding at least one matching row (the page-level ideal)",
    "rows_total": "rows of the snapshot", "rows_selected": "rows in the selected pages",
    "rows_matching": "rows the predicate matches (exact, or a sample's estimate: see `ideal_method`)",
    "bytes_total": "compressed bytes of the counted columns",
    "bytes_selected": "compressed bytes a reader fetches",
    "bytes_ideal": "compressed bytes of the pages holding a match",
    "efficiency": "`bytes_ideal / bytes_selected`: 1 − efficiency is the share wasted within the pages "
                  "read",
    "plan_cold_ms": "planning time with a cold metadata cache", "plan_warm_ms": "planning time, warm",
    "ideal_method": "`exact`, or `sampled k of n row groups (s.e. of efficiency e)`",
    "pages_clustered": "pages a perfectly clustered table would read for the probe",
    "bytes_clustered": "bytes a perfectly clustered table would read for the probe",
    "efficiency_clustered": "`bytes_clustered / bytes_selected`, at most 1: how close the layout is to the "
                            "best possible",
    "engine_status": "`checked`, `checked k of n files`, `off`, or `not confirmed: <reason>`",
    "engine_files": "files DataFusion read", "engine_bytes": "DataFusion's `bytes_scanned`",
    "engine_rows": "rows DataFusion's scan kept after row-group and page pruning",
    "engine_rows_matching": "rows DataFusion's filter passed",
    "engine_model_bytes": "lakesort's bytes over the same files", "engine_model_rows": "lakesort's rows "
                                                                                       "over the same files",
    "engine_ms": "DataFusion's time",
    "delete_files_total": "delete files a scan of the whole snapshot merges",
    "delete_files_selected": "delete files a reader merges for the selected data files",
    "delete_bytes_total": "their bytes, whole snapshot",
    "delete_bytes_selected": "their bytes, for the probe",
    "sort_key": "the sort key column", "partition_path": "the partition; empty when unpartitioned",
    "files": "data files", "files_unbounded": "files without bounds (counted as overlapping every file)",
    "constant_files": "files holding one key value",
    "average_overlaps": "average number of other files each file overlaps",
    "average_depth": "average overlap depth (1: overlaps nothing)",
    "max_depth": "deepest overlap: what a point lookup may read in the partition",
    "depth_histogram": "JSON: depth bucket (1..16, then powers of two) → files",
    "rows": "rows", "bytes": "bytes",
    "status": "the outcome (compaction: `committed`, `nothing-to-do`, `failed`, `dry-run`, `deferred`; "
              "maintenance: `done`, `dry-run`, `failed`)",
    "trigger": "`nightly`, `backfill` or `manual`", "started_at": "when the run started",
    "duration_s": "seconds the run took", "snapshot_before": "the table's snapshot before the commit",
    "snapshot_after": "the snapshot the commit made", "partitions_rewritten": "partitions rewritten",
    "groups": "rewrite groups", "files_before": "files before", "files_after": "files after",
    "files_removed": "files the commit removed", "files_added": "files the commit added",
    "bytes_before": "bytes before", "bytes_after": "bytes after", "bytes_rewritten": "input bytes rewritten",
    "rows_rewritten": "rows rewritten", "verification": "`passed`, `failed` or `skipped`",
    "findings": "JSON list of the verification's findings", "error": "the error, for a failed run",
    "spec_hash": "hash of the configuration the run carried",
    "config_sources": "JSON: spec key → where it came from (`{kind, origin}`)",
    "reason": "why the run did not rewrite (e.g. a nightly budget's deferral)",
    "max_age_s": "the retention's max age", "min_snapshots": "snapshots kept per branch at least",
    "orphan_grace_s": "age before an orphan is deleted",
    "snapshots_before": "snapshots before", "snapshots_expired": "snapshots expired",
    "snapshots_after": "snapshots after",
    "young_orphans": "orphans kept (younger than the grace period)", "young_orphan_bytes": "their bytes",
    "live_bytes": "bytes the current snapshot reads",
    "advised_at": "when the advice ran", "rank": "the candidate's rank (1 is best)",
    "strategy": "`current`, `linear`, `zorder` or `hilbert`",
    "keys": "the candidate's columns, comma-separated",
    "sort_keys": "JSON list of `{column, direction, nulls}`", "scaling": "`quantile` or `minmax` for curves",
    "origin": "`table`, `spec` or `probes`", "label": "the layout as shown",
    "predicted_bytes": "JSON: probe → predicted bytes",
    "total_bytes": "the probes' predicted bytes, weighted",
    "vs_current": "against the current layout", "write_bytes": "bytes a full rewrite in this layout writes",
    "incremental": "1 when nightly runs keep sorted runs, 0 when they rewrite partitions",
    "recommended": "1 for the recommended candidate", "sample_rows": "rows sampled",
    "table_rows": "rows of the table", "table_bytes": "bytes of the table", "seed": "the sample's seed",
    "probes": "JSON list of the probes `{name, where, weight}`", "seconds": "seconds the advice took",
}
for _kind in ("metadata", "manifest_list", "manifest", "data", "delete", "statistics", "orphan"):
    COLUMNS[f"{_kind}_files"] = f"{_kind.replace('_', ' ')} files deleted (a dry run: would delete)"
    COLUMNS[f"{_kind}_bytes"] = f"{_kind.replace('_', ' ')} bytes deleted"


def metrics_tables() -> list[tuple[str, str, tuple[tuple[str, str, bool], ...], tuple[str, ...]]]:
    from layout.advise import history
    from layout.metrics import store

    return [
        (store.PRUNING_METRICS, "what a page-index-aware reader fetches for one probe on one snapshot",
         store.METRICS_FIELDS, store.METRICS_KEY),
        (store.CLUSTERING_METRICS, "how deeply the files of one partition overlap in one sort key",
         store.CLUSTERING_FIELDS, store.CLUSTERING_KEY),
        (store.COMPACTION_RUNS, "one compaction run of one table", store.RUNS_FIELDS, store.RUNS_KEY),
        (store.MAINTENANCE_RUNS, "one maintenance run (snapshot expiry, file deletion) of one table",
         store.MAINTENANCE_FIELDS, store.MAINTENANCE_KEY),
        (history.ADVICE, "one candidate layout of one `lakesort advise` run", history.ADVICE_FIELDS,
         history.ADVICE_KEY),
    ]


def metrics_page() -> str:
    lines = [
        "# Metrics tables", "", GENERATED.strip(), "",
        ("lakesort records what it does and measures in Iceberg tables of the namespace `lakesort`, in each "
        "table's own catalog, so that any engine can query them and a dashboard can alert on them "
        "([What to monitor](../operations/monitoring.md)). A rerun for the same key replaces its rows, never "
        "adds more. Columns added by a later lakesort are nullable and appended: an older table gets them on "
        "the next write, and its old rows read them as null. Figures are counts or bytes unless said."), "",
    ]
    for name, what, fields, key in metrics_tables():
        lines += [f"## `{name}`", "", f"One row per {', '.join(key)}: {what}.", "",
                  "| column | type | nullable | meaning |", "|---|---|---|---|"]
        for column, kind, required in fields:
            lines.append(f"| {code(column)} | {kind} | {'' if required else 'yes'} | "
                         f"{text(COLUMNS.get(column, ''))} |")
        lines.append("")
    lines += [
        "Read them with any Iceberg reader, for example pyiceberg and DuckDB:", "",
        "```python",
        "from layout.catalog import load_catalog",
        "metrics = load_catalog(\"lakesort\").load_table(\"lakesort.pruning_metrics\")",
        "con = metrics.scan().to_duckdb(\"m\")   # the current snapshot's files",
        "con.sql(\"SELECT probe, phase, bytes_selected, efficiency_clustered FROM m\").show()",
        "```", "",
        ("Read the current snapshot, not a glob of the table's directory: a rerun that replaces rows leaves "
         "the "
        "old files there until maintenance expires their snapshots."), "",
    ]
    return "\n".join(lines)


# ---- exit codes ----------------------------------------------------------------------------------------


def exit_rows() -> list[tuple[str, str]]:
    """(command, what its help says of its exit statuses) for every command whose help mentions one."""
    from layout.cli import build_parser

    rows = []
    for name, sub in _subcommands(build_parser()).items():
        said = " ".join(part for part in (sub.description, sub.epilog) if part)
        sentences = [s for s in re.split(r"(?<=[.;])\s+", said) if re.search(r"\bexit", s, re.IGNORECASE)]
        if sentences:
            rows.append((name, " ".join(sentences)))
    return rows


def exit_page() -> str:
    from layout import cli

    meaning = {cli.EXIT_OK: "ok", cli.EXIT_FAILURE: "a finding, a failure, a busy table or a refusal",
               cli.EXIT_USAGE: "bad usage, a bad configuration or unreadable input: fix the command or the "
                               "input and run it again"}
    lines = [
        "# Exit codes", "", GENERATED.strip(), "",
        "Every `lakesort` command exits with one of three statuses (`layout.cli`):", "",
        "| status | meaning |", "|---|---|",
        *(f"| {code(status)} | {text(meaning[status])} |" for status in sorted(meaning)), "",
        ("Errors go to stderr, as `lakesort COMMAND: error: ...` (status 2) or "
         "`lakesort COMMAND: failed: ...` "
        "(status 1). A failure after a commit (for example while measuring) is status 1, never 2, and says "
        "what was committed before what failed."), "",
    ]
    rows = exit_rows()
    if rows:
        lines += ["What the commands' help says of their statuses:", "", "| command | |", "|---|---|"]
        lines += [f"| [`lakesort {name}`](cli.md#lakesort-{name}) | {text(said)} |" for name, said in rows]
        lines.append("")
    return "\n".join(lines)


PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/table-spec.md": spec_page,
    "reference/settings.md": settings_page,
    "reference/metrics-tables.md": metrics_page,
    "reference/exit-codes.md": exit_page,
}


def pages() -> dict[str, str]:
    """Every generated page's path under docs/ and its Markdown."""
    return {path: make() for path, make in PAGES.items()}


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, content in pages().items():
        files.append(File.generated(config, path, content=content))
    return files
