"""The table registry: which spec belongs to a table, among the YAML files of `settings().tables_dir`.

`dags/tables/*.yaml` by default ($LAKESORT_TABLES_DIR): the CLI, the DAGs, verification, measuring and
the reports all find a table's spec here, so a table is configured in exactly one place.

A run looks its table up once, at its start, and carries the spec (`layout.compaction.pipeline.config`):
`find_spec` for one table, `registered_specs` for all of them at once (the nightly DAG's first task);
`table_names` lists the registered tables cheaply, from each file's `table` key alone
(`layout.registered`, light enough for the DAG files to call when Airflow parses them).
"""

from __future__ import annotations

import logging
from pathlib import Path

from layout.errors import ConfigError, LakesortError
from layout.registered import spec_files, table_names
from layout.settings import settings
from layout.spec import TableSpec, load_spec

__all__ = ["find_spec", "registered_specs", "spec_files", "table_names"]

log = logging.getLogger(__name__)


def _load(directory: Path) -> tuple[list[TableSpec], list[LakesortError]]:
    """Every file of the registry, each read once: the specs that load and the errors of those that do not."""
    specs: list[TableSpec] = []
    broken: list[LakesortError] = []
    for path in spec_files(directory):
        try:
            specs.append(load_spec(path))
        except LakesortError as exc:
            broken.append(exc)
    return specs, broken


def find_spec(table: str, tables_dir: Path | None = None) -> TableSpec:
    """The spec of `table` in the registry.

    Each file is loaded on its own: a broken spec of another table is logged and does not stop this one.
    """
    directory = tables_dir or settings().tables_dir
    specs, broken = _load(directory)
    found = [spec for spec in specs if spec.table == table]
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
    known = ", ".join(spec.table for spec in specs) or "none"
    raise ConfigError(f"no spec for table {table!r} in {directory} (specs exist for: {known}); "
                      f"add {directory}/<name>.yaml or pass --spec")


def registered_specs(tables_dir: Path | None = None) -> dict[str, TableSpec]:
    """Every registered table's spec, the registry read once for all of them (`find_spec` reads it for one).

    A broken spec, or a table specified twice, is logged and left out: `find_spec` raises why, for the
    table's own work."""
    specs, broken = _load(tables_dir or settings().tables_dir)
    for exc in broken:
        log.warning("a broken table spec: %s", exc)
    by_table: dict[str, list[TableSpec]] = {}
    for spec in specs:
        by_table.setdefault(spec.table, []).append(spec)
    for table, twice in by_table.items():
        if len(twice) > 1:
            log.warning("table %s is specified in %s: keep one spec per table", table,
                        " and ".join(s.source for s in twice))
    return {table: found[0] for table, found in by_table.items() if len(found) == 1}
