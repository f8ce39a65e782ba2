"""The table registry: which spec belongs to a table, among the YAML files of `settings().tables_dir`.

`dags/tables/*.yaml` by default ($LAKESORT_TABLES_DIR): the CLI, the DAGs, verification, measuring and
the reports all find a table's spec here, so a table is configured in exactly one place.
"""

from __future__ import annotations

import logging
from pathlib import Path

from layout.errors import ConfigError, LakesortError
from layout.settings import settings
from layout.spec import TableSpec, load_spec

__all__ = ["find_spec", "spec_files"]

log = logging.getLogger(__name__)


def spec_files(tables_dir: Path | None = None) -> list[Path]:
    """The registry's YAML files, sorted; ConfigError when the directory is missing."""
    directory = tables_dir or settings().tables_dir
    if not directory.is_dir():
        raise ConfigError(f"no table specs: {directory} is not a directory (pass --spec, or set LAKESORT_TABLES_DIR)")
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def find_spec(table: str, tables_dir: Path | None = None) -> TableSpec:
    """The spec of `table` in the registry.

    Each file is loaded on its own: a broken spec of another table is logged and does not stop this one.
    """
    directory = tables_dir or settings().tables_dir
    found, broken, known = [], [], []
    for path in spec_files(directory):
        try:
            spec = load_spec(path)
        except LakesortError as exc:
            broken.append(exc)
            continue
        known.append(spec.table)
        if spec.table == table:
            found.append(spec)
    if len(found) > 1:
        raise ConfigError(f"{found[1].source}: table: {table!r} is already specified in {found[0].source}; "
                          "keep one spec per table")
    if found:
        for exc in broken:
            log.warning("ignoring a broken table spec (it is not %s's): %s", table, exc)
        return found[0]
    if broken:
        raise ConfigError(f"no valid spec for table {table!r} in {directory}; broken spec(s), one may be "
                          "this table's:\n" + "\n".join(str(e) for e in broken))
    raise ConfigError(f"no spec for table {table!r} in {directory} (specs exist for: {', '.join(known) or 'none'}); "
                      f"add {directory}/<name>.yaml or pass --spec")
