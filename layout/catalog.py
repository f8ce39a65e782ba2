"""Finding the Iceberg catalog, through pyiceberg's own configuration.

pyiceberg reads `.pyiceberg.yaml` from $PYICEBERG_HOME, the home directory, then the working directory,
and `PYICEBERG_CATALOG__<NAME>__<KEY>` variables. `make demo` writes a `.pyiceberg.yaml` in the
repository root (git ignores it) so that every `lakesort` command run there finds the demo catalog.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.utils.config import Config

from layout import storage
from layout.errors import ConfigError, InputError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

CONFIG_FILE = ".pyiceberg.yaml"
DEFAULT_CATALOG = "lakesort"

# Snapshot summary properties lakesort writes on every commit: the planner derives a partition's sorted
# runs from them (`layout.compaction.planning.sorted_runs`), verification and maintenance read them too.
RUN_ID = "lakesort.run-id"
SPEC_HASH = "lakesort.spec-hash"
# Where a run's files live, under the table's data directory: `<STAGING>/<run id>/spec=<spec hash>/...`. The
# path says which run wrote a file under which spec after its snapshot (and summary) has been expired.
STAGING = "lakesort-staging"
_STAMPED = re.compile(rf"/{STAGING}/(?P<run>[^/]+)/spec=(?P<spec>[0-9a-f]+)/")


def stamped_dir(data_dir: str, run_id: str, spec_hash: str) -> str:
    """The directory a run writes its files to, under the table's data directory `data_dir`."""
    return f"{data_dir.rstrip('/')}/{STAGING}/{run_id}/spec={spec_hash}"


def stamp_of(path: str) -> tuple[str, str] | None:
    """(run id, spec hash) of a file lakesort wrote (`stamped_dir`), from its path; None for other files."""
    found = _STAMPED.search(path)
    return (found["run"], found["spec"]) if found else None


def check_catalog(name: str | None = None) -> tuple[str, dict[str, Any]]:
    """(name, configuration) of the named catalog, or of pyiceberg's default one; a `ConfigError` naming the
    known catalogs when it is not configured."""
    config = Config()
    _warn_if_shadowed()
    name = name or config.get_default_catalog_name()
    catalog_config = config.get_catalog_config(name)
    if catalog_config is None:
        known = ", ".join(config.get_known_catalogs()) or "none"
        raise ConfigError(
            f"no Iceberg catalog named {name!r} is configured (known: {known}); run `make demo` for the "
            f"embedded SQLite catalog, or write {CONFIG_FILE} / PYICEBERG_CATALOG__{name.upper()}__URI "
            "as docs/how-to/onboard-a-table.md explains"
        )
    return name, dict(catalog_config)


# The first line of the `.pyiceberg.yaml` `make demo` writes (`write_sql_catalog_config`): how a file found
# elsewhere is told to shadow the demo's.
DEMO_MARK = "# Written by `make demo`"
_shadow_warned: set[str] = set()


def config_files() -> list[Path]:
    """Every `.pyiceberg.yaml` pyiceberg would look at, in its order ($PYICEBERG_HOME, the home directory, the
    working directory): the first one is the one read, the others are ignored."""
    found: list[Path] = []
    for directory in (os.environ.get("PYICEBERG_HOME"), os.path.expanduser("~"), os.getcwd()):
        if directory:
            path = Path(directory, CONFIG_FILE)
            if path.is_file() and all(path.resolve() != f.resolve() for f in found):
                found.append(path)
    return found


def _warn_if_shadowed() -> None:
    """Warn (once a process) when pyiceberg reads another `.pyiceberg.yaml` than the one `make demo` wrote,
    which is there but ignored: a user's `~/.pyiceberg.yaml` silently wins over the demo's catalog."""
    files = config_files()
    demo = next((f for f in files[1:] if _is_demos(f)), None)
    if demo is None or str(files[0]) in _shadow_warned:
        return
    _shadow_warned.add(str(files[0]))
    log.warning("the Iceberg catalogs come from %s, not from the demo's %s, which pyiceberg ignores (it "
                "reads $PYICEBERG_HOME, then the home directory, then the working directory): set "
                "PYICEBERG_HOME=%s to use the demo's", files[0], demo, demo.parent)


def _is_demos(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().startswith(DEMO_MARK)
    except OSError:
        return False


def load_catalog(name: str | None = None) -> Catalog:
    """The named catalog, or pyiceberg's default one; a clear error when none is configured."""

    name, catalog_config = check_catalog(name)
    # Imported here: Spark jobs and their executors import this module for its path helpers, and pyiceberg's
    # catalogs cost about 0.2 s to import (one run).
    from pyiceberg.catalog import load_catalog as _load

    # pyiceberg's own lookup uses the configuration it read once at import: pass the current one (its values
    # as pyiceberg reads them, nested ones too, though load_catalog's signature says str).
    return _load(name, **catalog_config)


def load_table(identifier: str, catalog: str | None = None) -> Table:
    """An Iceberg table by `namespace.name`, with an error that lists the namespace's tables."""

    cat = load_catalog(catalog)
    try:
        table = cat.load_table(identifier)
    except NoSuchTableError:
        namespace = identifier.rpartition(".")[0]
        try:
            tables = [".".join(t) for t in cat.list_tables(namespace)] if namespace else []
        except Exception:  # noqa: BLE001 - only for the hint
            tables = []
        hint = (f"tables in {namespace!r}: {', '.join(tables)}" if tables
                else "check the name with the catalog")
        raise InputError(f"Iceberg table {identifier!r} not found in catalog {cat.name!r}; {hint}") from None
    # Every later path under the table's locations opens with its storage settings (vended credentials
    # included), and only those paths.
    storage.configure_table(table)
    return table


def write_sql_catalog_config(home: Path, config_dir: Path, name: str = DEFAULT_CATALOG) -> Path:
    """Write a `.pyiceberg.yaml` in `config_dir` for a SQLite catalog and a warehouse under `home`."""
    home = home.resolve()
    (home / "warehouse").mkdir(parents=True, exist_ok=True)
    path = config_dir / CONFIG_FILE
    text = (
        f"{DEMO_MARK}: the embedded Iceberg catalog (SQLite) and local warehouse.\n"
        f"default-catalog: {name}\n"
        "catalog:\n"
        f"  {name}:\n"
        "    type: sql\n"
        f"    uri: sqlite:///{home / 'catalog.db'}\n"
        f"    warehouse: file://{home / 'warehouse'}\n"
    )
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
        log.info("wrote %s (catalog %r, warehouse %s)", path, name, home / "warehouse")
    return path
