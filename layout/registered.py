"""Which tables the registry holds, cheaply: the spec files of `settings().tables_dir` and each one's `table`
key, read with PyYAML alone. The DAG files call this when Airflow parses them (the backfill DAG offers the
registered tables to pick from), so it imports no spec model, no SQL parser and no pyiceberg; reading and
validating a spec is `layout.registry`'s, inside the tasks."""

from __future__ import annotations

import logging
from pathlib import Path

import yaml

from layout.errors import ConfigError
from layout.settings import settings

__all__ = ["spec_files", "table_names"]

log = logging.getLogger(__name__)


def spec_files(tables_dir: Path | None = None) -> list[Path]:
    """The registry's YAML files, sorted; ConfigError when the directory is missing."""
    directory = tables_dir or settings().tables_dir
    if not directory.is_dir():
        raise ConfigError(f"no table specs: {directory} is not a directory (pass --spec, "
                          "or set LAKESORT_TABLES_DIR)")
    # `_defaults.yaml` (and any `_`-file) holds namespace defaults
    # (`layout.registry.defaults`), no table's spec.
    return sorted(p for p in directory.iterdir()
                  if p.suffix in (".yaml", ".yml") and p.is_file() and not p.name.startswith("_"))


def table_names(tables_dir: Path | None = None) -> list[str]:
    """The registered table ids, sorted, from each file's `table` key alone (nothing is validated: a broken
    spec is reported by whatever reads it). No directory, or a file that is no YAML mapping with a `table`,
    is logged and left out: listing never fails."""
    try:
        files = spec_files(tables_dir)
    except ConfigError as exc:
        log.warning("%s", exc)
        return []
    tables = set()
    for path in files:
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            log.warning("table spec %s unreadable: %s", path, exc)
            continue
        if isinstance(doc, dict) and isinstance(doc.get("table"), str):
            tables.add(doc["table"])
        else:
            log.warning("table spec %s names no table (a `table: namespace.name` key)", path)
    return sorted(tables)
