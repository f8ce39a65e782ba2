"""The table registry: a table's configuration, resolved from its sources, for the CLI, the DAGs,
verification, measuring and the reports.

A table is configured, in order of precedence, by its YAML spec among the files of `settings().tables_dir`
(`dags/tables/*.yaml` by default, $LAKESORT_TABLES_DIR), its `lakesort.*` Iceberg table properties
(`keys`), the namespace defaults that match it (`_defaults.yaml` there, `defaults`), and its own Iceberg sort
order and `write.*` properties (`resolution` says how they combine). A table none of them gives a sort key is
not configured: listed as such, never compacted.

A run looks its table up once, at its start, and carries the spec (`layout.compaction.pipeline.config`):
`find_spec` for one table (`find_resolution`: with the source of each key, which the run records),
`nightly_specs` / `nightly_resolutions` for every table the nightly compacts (its first task), `list_catalog`
for `lakesort tables`, `catalog_names` for the catalogs the fleet lives in; `table_names` lists the tables
with a YAML spec cheaply, from each file's `table` key alone (`layout.registered`, light enough for the DAG
files to call when Airflow parses them).

The package owns the property keys (`keys`), the defaults file (`defaults`) and the precedence (`resolution`,
pure: no catalog). It may import the floors below it: `layout.spec`, `layout.catalog`, `layout.registered`,
`layout.settings`, `layout.storage`, `layout.errors`, `layout.models`, PyYAML and pyiceberg; never
`layout.read` or `layout.metrics` (a table's health is `lakesort tables`'s, `layout.cli.tables`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import yaml
from pyiceberg.utils.config import Config

from layout import storage
from layout.catalog import load_catalog, load_table
from layout.errors import ConfigError, LakesortError
from layout.registered import spec_files, table_names
from layout.registry.defaults import DEFAULTS_FILE, Default, load_defaults, matching
from layout.registry.keys import PROPERTY_OF, PROPERTY_PREFIX, SPEC_KEYS
from layout.registry.resolution import KeySource, Resolution, resolve_layers
from layout.settings import settings
from layout.spec import SortKey, TableSpec, load_spec, own_sort_keys
from layout.spec.table_properties import write_properties

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = ["DEFAULTS_FILE", "OWN_NAMESPACE", "PROPERTY_OF", "SPEC_KEYS", "KeySource", "Resolution",
           "catalog_names", "default_catalog", "find_resolution", "find_spec", "list_catalog",
           "nightly_resolutions", "nightly_specs", "registered_specs", "resolve_table", "spec_files",
           "table_names"]

log = logging.getLogger(__name__)

# lakesort's own tables (run records, metrics: `layout.metrics.store.NAMESPACE`, a floor above this one) are
# never listed nor compacted as a table of the fleet.
OWN_NAMESPACE = "lakesort"


def _load(directory: Path) -> tuple[list[TableSpec], list[tuple[Path, LakesortError]]]:
    """Every spec file of the registry, each read once: the specs that load, and the files that do not."""
    specs: list[TableSpec] = []
    broken: list[tuple[Path, LakesortError]] = []
    for path in spec_files(directory):
        try:
            specs.append(load_spec(path))
        except LakesortError as exc:
            broken.append((path, exc))
    return specs, broken


def _named_table(path: Path) -> str | None:
    """The `table` key of a spec file that does not load, if it can be read at all."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return doc.get("table") if isinstance(doc, dict) and isinstance(doc.get("table"), str) else None


def _yaml_spec(table: str, directory: Path, specs: list[TableSpec],
               broken: list[tuple[Path, LakesortError]]) -> TableSpec | None:
    """The table's YAML spec, None without one; a duplicate, or a broken file that may be the table's, is the
    error (a broken spec of another table is logged: it does not stop this one)."""
    found = [spec for spec in specs if spec.table == table]
    if len(found) > 1:
        raise ConfigError(f"{found[1].source}: table: {table!r} is already specified in {found[0].source}; "
                          "keep one spec per table")
    mine = [exc for path, exc in broken if _named_table(path) in (table, None)]
    if not found and mine:
        raise ConfigError(f"no valid spec for table {table!r} in {directory}; broken spec(s), one may be "
                          "this table's:\n" + "\n".join(str(e) for e in mine))
    for _, exc in broken:
        log.warning("ignoring a broken table spec (it is not %s's): %s", table, exc)
    return found[0] if found else None


def _own_sort_order(table: Table) -> tuple[tuple[SortKey, ...], str | None]:
    """The table's sort order as sort keys (transforms included), and why lakesort cannot sort by it (an
    order field of a transform it does not know, named with the fix) or None."""
    try:
        return own_sort_keys(table), None
    except ConfigError as error:
        return (), str(error)


def _resolve(name: str, catalog: str | None, spec: TableSpec | None, defaults: Iterable[Default],
             table: Table | None) -> Resolution:
    matched = matching(tuple(defaults), name, catalog)
    if table is None:
        return resolve_layers(name, catalog, spec=spec, defaults=matched)
    order, problem = _own_sort_order(table)
    return resolve_layers(name, catalog, spec=spec, properties=table.properties, defaults=matched,
                          sort_order=order, sort_order_problem=problem,
                          write_properties=write_properties(table.properties),
                          columns=table.schema().column_names)


def resolve_table(name: str, tables_dir: Path | None = None, *, table: Table | None = None,
                  catalog: str | None = None) -> Resolution:
    """The configuration of the table `name` from every source. The Iceberg table is `table`, else loaded from
    its spec's catalog (else `catalog`, else the first matching default's, else pyiceberg's default). A table
    with a YAML spec that cannot be loaded resolves without its own settings (the run loads it, and says why
    it cannot); without a spec, that is the error."""
    directory = tables_dir or settings().tables_dir
    specs, broken = _load(directory)
    spec = _yaml_spec(name, directory, specs, broken)
    defaults = load_defaults(directory)
    if spec is not None:
        catalog = spec.catalog
    elif catalog is None:
        catalog = next((d.catalog for d in defaults if d.catalog and d.applies(name, d.catalog)), None)
    if table is None:
        try:
            table = load_table(name, catalog)
        except Exception as exc:  # noqa: BLE001 - any catalog failure; with a spec the run reports it
            if spec is None:
                known = ", ".join(s.table for s in specs) or "none"
                raise ConfigError(
                    f"no spec for table {name!r} in {directory} (specs exist for: {known}), and its "
                    f"{PROPERTY_PREFIX}* properties cannot be read: {exc}; add {directory}/<name>.yaml, set "
                    f"its {PROPERTY_OF['sort.keys']} property, or pass --spec") from None
            log.debug("%s: resolved without the Iceberg table's settings: %s", name, exc)
    return _resolve(name, catalog, spec, defaults, table)


def find_spec(table: str, tables_dir: Path | None = None) -> TableSpec:
    """The spec a run of `table` carries, resolved from its sources (`resolve_table`); a `ConfigError` when no
    source configures it, saying how to."""
    return cast("TableSpec", find_resolution(table, tables_dir).spec)  # find_resolution raises for None


def find_resolution(table: str, tables_dir: Path | None = None) -> Resolution:
    """`find_spec`'s resolution: the spec with the source of each key (what a run records)."""
    resolution = resolve_table(table, tables_dir)
    has_file = any(s.kind == "spec" for s in resolution.sources)
    # A spec file is the owner's word and runs as before (the plan names a missing sort key); a table that
    # only defaults or properties reach, with nothing to sort by, is not lakesort's to compact.
    if resolution.spec is None or (not has_file and resolution.reason is not None):
        directory = tables_dir or settings().tables_dir
        known = ", ".join(table_names(directory)) or "none"
        raise ConfigError(f"table {table!r} is not configured: no spec in {directory} (specs exist for: "
                          f"{known}), and {resolution.reason}; add "
                          f"{directory}/<name>.yaml, set its {PROPERTY_OF['sort.keys']} "
                          "property, or pass --spec")
    return resolution


def registered_specs(tables_dir: Path | None = None) -> dict[str, TableSpec]:
    """Every YAML spec of the registry, read once for all of them, without their tables' other sources.

    A broken spec, or a table specified twice, is logged and left out: `find_spec` raises why, for the
    table's own work."""
    specs, broken = _load(tables_dir or settings().tables_dir)
    for _, exc in broken:
        log.warning("a broken table spec: %s", exc)
    by_table: dict[str, list[TableSpec]] = {}
    for spec in specs:
        by_table.setdefault(spec.table, []).append(spec)
    for table, twice in by_table.items():
        if len(twice) > 1:
            log.warning("table %s is specified in %s: keep one spec per table", table,
                        " and ".join(s.source for s in twice))
    return {table: found[0] for table, found in by_table.items() if len(found) == 1}


def default_catalog() -> str:
    """The name of pyiceberg's default catalog (a spec without `catalog:` is in it)."""
    return Config().get_default_catalog_name()


def catalog_names(tables_dir: Path | None = None) -> list[str]:
    """Every catalog the registry configures tables in: pyiceberg's default one, and each one a YAML spec or a
    namespace default names (a broken spec is logged and left out)."""
    directory = tables_dir or settings().tables_dir
    specs, broken = _load(directory)
    for _, exc in broken:
        log.warning("a broken table spec: %s", exc)
    return _catalog_names(specs, load_defaults(directory))


def _catalog_names(specs: Iterable[TableSpec], defaults: Iterable[Default]) -> list[str]:
    """The catalogs the fleet lives in: pyiceberg's default one, and every one a spec or a default names."""
    default = default_catalog()
    return sorted({s.catalog or default for s in specs} | {d.catalog or default for d in defaults}
                  | {default})


def _identifiers(cat: Catalog, namespace: str | None) -> list[str]:
    """Every table of the catalog (of `namespace` and the namespaces under it), lakesort's own left out."""
    pending = [tuple(namespace.split("."))] if namespace else [tuple(n) for n in cat.list_namespaces()]
    names: list[str] = []
    seen: set[tuple[str, ...]] = set()
    while pending:
        ns = pending.pop()
        if ns in seen or ns[:1] == (OWN_NAMESPACE,):
            continue
        seen.add(ns)
        names.extend(".".join(t) for t in cat.list_tables(ns))
        try:
            pending.extend(tuple(c) for c in cat.list_namespaces(ns) if len(c) > len(ns))
        except Exception as exc:  # noqa: BLE001 - a catalog without nested namespaces
            log.debug("no namespaces under %s: %s", ".".join(ns), exc)
    return sorted(names)


def list_catalog(catalog: str | None = None, *, namespace: str | None = None,
                 tables_dir: Path | None = None) -> list[tuple[Resolution, Table | None, str | None]]:
    """Every table of `catalog` (None: every catalog of the registry) with its configuration, its loaded table
    and the error that stopped its resolution (one table's error stops no other; its Resolution is empty)."""
    directory = tables_dir or settings().tables_dir
    specs, broken = _load(directory)
    for _, exc in broken:
        log.warning("a broken table spec: %s", exc)
    defaults = load_defaults(directory)
    out: list[tuple[Resolution, Table | None, str | None]] = []
    default = default_catalog()
    for name in [catalog] if catalog else _catalog_names(specs, defaults):
        cat = load_catalog(name)
        here = [s for s in specs if (s.catalog or default) == name]
        for identifier in _identifiers(cat, namespace):
            table = None
            try:
                table = cat.load_table(identifier)
                # As `load_table` does: later reads of the table's files (its health) need its storage.
                storage.configure(table.location(), table.io.properties)
                mine = [(path, exc) for path, exc in broken if _named_table(path) in (identifier, None)]
                spec = _yaml_spec(identifier, directory, here, mine)
                out.append((_resolve(identifier, name, spec, defaults, table), table, None))
            except LakesortError as exc:
                out.append((Resolution(table=identifier, catalog=name), table, str(exc)))
    return out


def nightly_specs(tables_dir: Path | None = None) -> dict[str, TableSpec | None]:
    """The tables the nightly compacts, with their specs: every table with a YAML spec (None: its spec does
    not load, and its own tasks fail naming why) and every table of the registry's catalogs that another
    source configures. A table with no sort key anywhere is skipped, with a log line; a catalog that cannot be
    listed is logged and its YAML tables still run."""
    return {name: r.spec if r is not None else None for name, r in nightly_resolutions(tables_dir).items()}


def nightly_resolutions(tables_dir: Path | None = None) -> dict[str, Resolution | None]:
    """`nightly_specs` with each table's resolution (its spec and the source of each key)."""
    directory = tables_dir or settings().tables_dir
    found: dict[str, Resolution | None] = {name: None for name in table_names(directory)}
    try:
        listed = list_catalog(tables_dir=directory)
    except Exception as exc:  # noqa: BLE001 - the tables with a spec still run
        log.warning("the catalogs could not be listed (%s): only the tables with a spec run tonight", exc)
        listed = []
    for resolution, _, error in listed:
        if error is not None:
            log.warning("%s: its configuration does not resolve, skipped tonight: %s",
                        resolution.table, error)
        elif resolution.configured:
            found[resolution.table] = resolution
        else:  # a spec without sort keys for an unsorted table too: nothing to sort by is no failure
            found.pop(resolution.table, None)
            log.info("%s: not configured (%s): skipped", resolution.table, resolution.reason)
    for name in [n for n, spec in found.items() if spec is None]:
        try:
            found[name] = find_resolution(name, directory)
        except LakesortError as exc:
            log.warning("the spec of %s does not load: its tasks will fail, naming the problem: %s",
                        name, exc)
    return dict(sorted(found.items()))
