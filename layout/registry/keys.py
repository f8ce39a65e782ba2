"""The keys of a table's configuration, one name per setting whatever source sets it,
and their table properties.

A spec key is the dotted path of a setting in a YAML spec (`target_file_size`, `writer.compression`,
`sort.keys`): the fields of `TableSpec`, descending into its sections (owner, sort, writer, verify,
retention); a mapping or list (`writer.bloom_filters`, `probes`) is one key, set whole. `table` and `catalog`
name the table and are no setting.

Each key has one Iceberg table property, the way Amoro reads `self-optimizing.*`: ``lakesort.`` and the dotted
key with ``_`` written ``-`` (`writer.row_group_size` is ``lakesort.writer.row-group-size``), except the two
keys of the sort, which read as what they are: ``lakesort.sort-keys`` and ``lakesort.strategy``. A property's
value is read as a YAML value (``256MiB``, ``3``, ``[a, b]``, ``{l_orderkey: {ndv: 10000}}``), and
``lakesort.sort-keys`` also as a comma list of ``column [asc|desc] [nulls first|last]``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import BaseModel

from layout.errors import ConfigError
from layout.spec import TableSpec

__all__ = ["PROPERTY_OF", "PROPERTY_PREFIX", "SPEC_KEYS", "flatten", "nest", "parse_property", "spec_key_of"]

PROPERTY_PREFIX = "lakesort."
# Fields that name the table, not how it is laid out: no source but the spec (or the listing) sets them.
_IDENTITY = ("table", "catalog")
# The sort's keys read as Amoro's and the names do, not as `lakesort.sort.keys`.
_SPECIAL = {"sort.keys": "sort-keys", "sort.strategy": "strategy"}


def _section(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _keys() -> tuple[str, ...]:
    keys: list[str] = []
    for name, field in TableSpec.model_fields.items():
        if name in _IDENTITY:
            continue
        section = _section(field.annotation)
        keys.extend(f"{name}.{sub}" for sub in section.model_fields) if section else keys.append(name)
    return tuple(keys)


SPEC_KEYS: tuple[str, ...] = _keys()
SECTIONS = frozenset(k.partition(".")[0] for k in SPEC_KEYS if "." in k)
PROPERTY_OF: dict[str, str] = {
    key: PROPERTY_PREFIX + _SPECIAL.get(key, key.replace("_", "-")) for key in SPEC_KEYS
}
_KEY_OF = {prop: key for key, prop in PROPERTY_OF.items()}


def spec_key_of(loc: tuple[Any, ...]) -> str | None:
    """The spec key a validation error's location falls under (None: the spec as a whole)."""
    if not loc:
        return None
    first = str(loc[0])
    if first in SECTIONS and len(loc) > 1:
        return f"{first}.{loc[1]}"
    return first


def flatten(data: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """A spec-shaped mapping (YAML, a default) as {spec key: value}; an unknown key is a `ConfigError` naming
    `where` and the key, with the nearest valid one."""
    flat: dict[str, Any] = {}
    for name, value in data.items():
        if name in SECTIONS and isinstance(value, Mapping):
            for sub, inner in value.items():
                flat[_known(f"{name}.{sub}", where)] = inner
        else:
            flat[_known(str(name), where)] = value
    return flat


def _known(key: str, where: str) -> str:
    if key in SPEC_KEYS:
        return key
    close = difflib.get_close_matches(key, SPEC_KEYS, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"{where}: {key}: unknown key{hint} (keys: {', '.join(SPEC_KEYS)})")


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{spec key: value} back into the spec's shape."""
    data: dict[str, Any] = {}
    for key, value in flat.items():
        section, dot, sub = key.partition(".")
        if dot:
            data.setdefault(section, {})[sub] = value
        else:
            data[key] = value
    return data


def parse_property(table: str, name: str, text: str) -> tuple[str, Any]:
    """(spec key, value) of the table property `name`; a `lakesort.*` property lakesort does not know (a
    typo) is a `ConfigError` naming the table, the property and the nearest known one."""
    key = _KEY_OF.get(name)
    if key is None:
        close = difflib.get_close_matches(name, _KEY_OF, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"{table}: table property {name}: lakesort knows no such key; {hint}fix: ALTER "
                          f"TABLE {table} UNSET TBLPROPERTIES ('{name}') (the keys and their properties are "
                          "listed in docs/reference/table-spec.md)")
    if key == "sort.keys" and not text.lstrip().startswith("["):
        return key, _sort_keys(table, name, text)
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        value = text  # not YAML: the text itself, which validation then judges
    return key, text if value is None else value


def _sort_keys(table: str, name: str, text: str) -> list[dict[str, str]]:
    """``a, b desc, c asc nulls last`` as sort keys."""
    keys = []
    for item in (part.split() for part in text.split(",")):
        if not item:
            continue
        column, rest = item[0], [w.lower() for w in item[1:]]
        key = {"column": column}
        if rest[:1] and rest[0] in ("asc", "desc"):
            key["direction"] = rest.pop(0)
        if len(rest) == 2 and rest[0] == "nulls" and rest[1] in ("first", "last"):
            key["nulls"] = rest[1]
            rest = []
        if rest:
            raise ConfigError(f"{table}: table property {name}={text!r}: cannot read {' '.join(item)!r}; "
                              "expected `column [asc|desc] [nulls first|last]`, comma separated; fix: ALTER "
                              f"TABLE {table} SET TBLPROPERTIES ('{name}'='l_shipdate, l_orderkey desc')")
        keys.append(key)
    return keys
