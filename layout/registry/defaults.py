"""Namespace-wide defaults: `_defaults.yaml` in the registry, settings for every table whose name matches.

    defaults:
      - match: "*"                  # every table: who to tell
        owner: {name: Data Platform, email: platform@example.com}
      - match: "sales.*"            # the tables of the namespace sales (fnmatch patterns on namespace.name)
        catalog: lakesort           # optional: only the tables of this catalog
        sort: {keys: [{column: order_date}]}
        target_file_size: 256MiB

Each entry holds spec keys as a spec file writes them (`layout.registry.keys`). Every entry that matches a
table applies; where two set the same key, the later one wins, so the file reads from general to specific.
The file's name starts with `_`, so the registry never reads it as a table's spec.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from layout.errors import ConfigError
from layout.models import Frozen
from layout.registry.keys import flatten

__all__ = ["DEFAULTS_FILE", "Default", "load_defaults", "matching"]

DEFAULTS_FILE = "_defaults.yaml"


class Default(Frozen):
    """One entry of the defaults file: its pattern, its catalog (None: any) and its keys, flattened."""

    index: int
    match: str
    catalog: str | None = None
    values: dict[str, Any]
    source: str  # the file, for messages

    @property
    def origin(self) -> str:
        return f"{self.source}: defaults[{self.index}] (match {self.match!r})"

    def applies(self, table: str, catalog: str | None) -> bool:
        return fnmatch.fnmatchcase(table, self.match) and (self.catalog is None or self.catalog == catalog)


def load_defaults(directory: Path) -> tuple[Default, ...]:
    """The entries of `directory/_defaults.yaml`, none when there is no such file; a `ConfigError` naming the
    file, the entry and the key for anything else than a list of mappings of spec keys with a `match`."""
    path = directory / DEFAULTS_FILE
    if not path.is_file():
        return ()
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: the namespace defaults cannot be read: {exc}") from None
    entries = doc.get("defaults") if isinstance(doc, Mapping) else None
    if not isinstance(entries, list) or set(doc) != {"defaults"}:
        raise ConfigError(f"{path}: expected one key, `defaults:`, a list of entries like "
                          "{match: \"sales.*\", owner: ..., sort: ...}")
    return tuple(_entry(path, index, entry) for index, entry in enumerate(entries))


def _entry(path: Path, index: int, entry: Any) -> Default:
    where = f"{path}: defaults[{index}]"
    if not isinstance(entry, Mapping) or not isinstance(entry.get("match"), str) or not entry["match"]:
        raise ConfigError(f"{where}: expected a mapping with `match: <pattern>` (e.g. "
                          "\"sales.*\") and spec keys")
    catalog = entry.get("catalog")
    if catalog is not None and not isinstance(catalog, str):
        raise ConfigError(f"{where}: catalog: expected a catalog name, got {catalog!r}")
    rest = {k: v for k, v in entry.items() if k not in ("match", "catalog")}
    if "table" in rest:
        raise ConfigError(f"{where}: table: a default applies to the tables its "
                          "`match` names; remove `table`")
    return Default(index=index, match=entry["match"], catalog=catalog, values=flatten(rest, where=where),
                   source=str(path))


def matching(defaults: Sequence[Default], table: str, catalog: str | None) -> tuple[Default, ...]:
    """The entries that apply to `table`, in the file's order (the later wins)."""
    return tuple(d for d in defaults if d.applies(table, catalog))
