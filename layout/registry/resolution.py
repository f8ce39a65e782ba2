"""A table's configuration resolved from every source, each key with the source it came from.

Precedence, per key (`layout.registry.keys`), highest first:

1. the table's YAML spec in the registry (`dags/tables/*.yaml`);
2. the table's `lakesort.*` Iceberg table properties;
3. the namespace defaults that match the table (`layout.registry.defaults`, the later entry first);
4. the table's own Iceberg sort order (for `sort.keys`) and its `write.*` properties
   (`layout.spec.table_properties`, for the sizes and the Parquet writer settings);

then lakesort's defaults. Sources 1-3 make the spec a run carries (`Resolution.spec`, hashed as before:
a table configured by its YAML alone keeps its spec, file and hash). Source 4 is applied by the run at its
plan, where the table is loaded anyway (`RunConfig.resolved`, `resolve_sort_keys`), and here for the
listing (`Resolution.effective`). This module is pure: the caller reads the table and the files.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

from pydantic import ValidationError

from layout.errors import ConfigError
from layout.models import Frozen
from layout.registry.defaults import Default
from layout.registry.keys import (
    PROPERTY_OF,
    PROPERTY_PREFIX,
    SPEC_KEYS,
    flatten,
    nest,
    parse_property,
    spec_key_of,
)
from layout.spec import SortKey, TableSpec
from layout.spec.table_properties import CODEC, LEVEL, TARGET_FILE_SIZE, resolve_spec

__all__ = ["PLACEHOLDER_OWNER", "KeySource", "Layer", "Resolution", "SourceKind", "merge", "resolve_layers"]

SourceKind = Literal["spec", "property", "default", "sort-order", "write-property", "lakesort"]
# Owner is required in a spec; a table onboarded without one still runs, and the listing says who is missing.
PLACEHOLDER_OWNER = {"name": "unassigned", "email": "unassigned@lakesort.invalid"}


class KeySource(Frozen):
    """Where one key of a table's configuration came from: its kind, the file,
    property or entry, the value."""

    key: str
    kind: SourceKind
    origin: str
    value: Any = None

    def describe(self) -> str:
        return {"spec": f"spec {self.origin}", "property": f"table property {self.origin}",
                "default": f"namespace default {self.origin}", "sort-order": self.origin,
                "write-property": f"table property {self.origin}",
                "lakesort": "lakesort's default"}[self.kind]


class Layer(Frozen):
    """One source's keys, {spec key: (value, origin)}."""

    kind: SourceKind
    values: dict[str, tuple[Any, str]]


class Resolution(Frozen):
    """A table's configuration: the run's spec (sources 1-3), the effective one (with the table's own
    settings), the effective sort keys, and the source of every key a source set."""

    table: str
    catalog: str | None = None
    spec: TableSpec | None = None  # what a run carries; None: no source configures the table
    effective: TableSpec | None = None  # with the table's write properties (the listing's)
    sort_keys: tuple[SortKey, ...] = ()
    sources: tuple[KeySource, ...] = ()
    reason: str | None = None  # why the table is not configured

    @property
    def configured(self) -> bool:
        """A sort key from some source: lakesort has something to do."""
        return self.spec is not None and bool(self.sort_keys)

    def source_of(self, key: str) -> KeySource | None:
        return next((s for s in self.sources if s.key == key), None)

    def keys(self) -> dict[str, KeySource]:
        """Every key with its effective value and source; lakesort's defaults for the keys none sets."""
        spec = self.effective or self.spec
        values = (flatten(spec.model_dump(mode="json", exclude={"table", "catalog"}), where=self.table)
                  if spec else {})
        if self.sort_keys:
            values["sort.keys"] = [k.model_dump(mode="json") for k in self.sort_keys]
        out = {}
        for key in SPEC_KEYS:
            found = self.source_of(key)
            value = values.get(key)
            out[key] = (found.model_copy(update={"value": value}) if found is not None
                        else KeySource(key=key, kind="lakesort", origin="lakesort", value=value))
        return out


def merge(layers: Sequence[Layer]) -> dict[str, KeySource]:
    """{key: its source}: per key, the first of `layers` (highest precedence first) that sets it."""
    merged: dict[str, KeySource] = {}
    for layer in layers:
        for key, (value, origin) in layer.values.items():
            merged.setdefault(key, KeySource(key=key, kind=layer.kind, origin=origin, value=value))
    return merged


def _layers(table: str, spec: TableSpec | None, properties: Mapping[str, str],
            defaults: Sequence[Default]) -> list[Layer]:
    layers = []
    if spec is not None:
        dumped = spec.model_dump(mode="json", exclude_unset=True, exclude={"table", "catalog"})
        layers.append(Layer(kind="spec", values={k: (v, spec.source) for k, v in
                                                 flatten(dumped, where=spec.source).items()}))
    props = {}
    for name in sorted(properties):
        if name.startswith(PROPERTY_PREFIX):
            key, value = parse_property(table, name, properties[name])
            props[key] = (value, name)
    layers.append(Layer(kind="property", values=props))
    default_values: dict[str, tuple[Any, str]] = {}
    for entry in defaults:  # the later entry wins
        default_values.update({k: (v, entry.origin) for k, v in entry.values.items()})
    layers.append(Layer(kind="default", values=default_values))
    return layers


def resolve_layers(table: str, catalog: str | None = None, *, spec: TableSpec | None = None,
                   properties: Mapping[str, str] | None = None, defaults: Sequence[Default] = (),
                   sort_order: Sequence[SortKey] | None = None, sort_order_problem: str | None = None,
                   write_properties: Mapping[str, str] | None = None,
                   columns: Collection[str] | None = None) -> Resolution:
    """The configuration of `table` from its sources: its YAML `spec` (None: none), its table `properties`
    (all of them; the `lakesort.*` ones are read), the matching namespace `defaults`, its own `sort_order`
    (None: the table is unknown; empty: unsorted; `sort_order_problem`: why lakesort cannot sort by it) and
    `write_properties`. `columns` (the table's, when known) are checked against the sort keys and the bloom
    filters. A value no source can hold is a `ConfigError` naming the table, the key,
    its source and the fix."""
    layers = _layers(table, spec, properties or {}, defaults)
    merged = merge(layers)
    run_spec = _run_spec(table, catalog, spec, merged) if merged else None
    if columns is not None and run_spec is not None:
        _check_columns(table, run_spec, merged, columns)
    sources = list(merged.values())
    sort_keys: tuple[SortKey, ...] = run_spec.sort.keys if run_spec is not None else ()
    reason = None
    if not sort_keys and (sort_order or sort_order_problem):
        if sort_order_problem is None:
            sort_keys = tuple(sort_order or ())
            sources.append(KeySource(key="sort.keys", kind="sort-order", origin=f"the sort order of {table}",
                                     value=[k.model_dump(mode="json") for k in sort_keys]))
        else:
            reason = sort_order_problem
    if run_spec is None and sort_keys:  # configured by its own sort order alone
        run_spec = _validate(table, catalog, {}, {}, f"the sort order of {table}")
    if not sort_keys and reason is None:
        reason = ("no sort key anywhere: no spec, no lakesort.sort-keys property, no namespace default sets "
                  "sort.keys, and the Iceberg table has no sort order" if not merged else
                  f"no sort key: {', '.join(sorted({s.describe() for s in merged.values()}))} set no "
                  "sort.keys, and the Iceberg table has no sort order")
    effective = run_spec
    if run_spec is not None and write_properties:
        effective = resolve_spec(run_spec, write_properties, columns=columns)
        values = flatten(effective.model_dump(mode="json", exclude={"table", "catalog"}), where=table)
        for key in _set_keys(effective) - _set_keys(run_spec):
            sources.append(KeySource(key=key, kind="write-property", origin=_write_property(key),
                                     value=values[key]))
    return Resolution(table=table, catalog=catalog, spec=run_spec, effective=effective, sort_keys=sort_keys,
                      sources=tuple(sorted(sources, key=lambda s: SPEC_KEYS.index(s.key))), reason=reason)


def _set_keys(spec: TableSpec) -> set[str]:
    dumped = spec.model_dump(mode="json", exclude_unset=True, exclude={"table", "catalog"})
    return set(flatten(dumped, where=spec.source))


# The key each of the table's write properties fills (`layout.spec.table_properties` reads them).
_WRITE_PROPERTY = {
    "target_file_size": TARGET_FILE_SIZE, "max_group_size": TARGET_FILE_SIZE,
    "writer.row_group_size": "write.parquet.row-group-size-bytes",
    "writer.page_size": "write.parquet.page-size-bytes",
    "writer.page_row_count_limit": "write.parquet.page-row-limit",
    "writer.dictionary_page_size": "write.parquet.dict-size-bytes",
    "writer.compression": CODEC, "writer.compression_level": LEVEL,
    "writer.bloom_filters": "write.parquet.bloom-filter-enabled.column.*",
}


def _write_property(key: str) -> str:
    return _WRITE_PROPERTY.get(key, "write.parquet.*")


def _run_spec(table: str, catalog: str | None, spec: TableSpec | None,
              merged: Mapping[str, KeySource]) -> TableSpec:
    """The spec of sources 1-3: the YAML spec itself when nothing else sets a key (its file and hash kept)."""
    if spec is not None and all(s.kind == "spec" for s in merged.values()):
        return spec
    kinds = {s.kind for s in merged.values()}
    label = " + ".join(part for kind, part in (
        ("spec", spec.source if spec is not None else ""),
        ("property", f"lakesort.* properties of {table}"),
        ("default",
         next((s.origin.partition(": defaults")[0] for s in merged.values() if s.kind == "default"), "")),
    ) if kind in kinds)
    return _validate(table, catalog if spec is None else spec.catalog, merged, nest({k: s.value for k, s in
                                                                                      merged.items()}), label)


def _validate(table: str, catalog: str | None, merged: Mapping[str, KeySource], data: dict[str, Any],
              label: str) -> TableSpec:
    data = {"table": table, **data, "owner": {**PLACEHOLDER_OWNER, **data.get("owner", {})}}
    if catalog is not None:
        data["catalog"] = catalog
    try:
        resolved = TableSpec.model_validate(data)
    except ValidationError as error:
        raise ConfigError("\n".join(_problem(table, merged, item)
                                    for item in error.errors(include_url=False))) \
            from None
    resolved._source = label
    return resolved


def _problem(table: str, merged: Mapping[str, KeySource], item: Any) -> str:
    key = spec_key_of(item["loc"])
    detail = (str(item["ctx"]["error"]) if item["type"] == "value_error"
              else f"{item['msg'][0].lower()}{item['msg'][1:]}, got {item.get('input')!r}")
    source = merged.get(key) if key else None
    if source is None:
        set_by = ", ".join(sorted({f"{s.key} ({s.describe()})" for s in merged.values()}))
        return (f"{table}: {key or 'the configuration'}: {detail} (the keys set: {set_by}); fix the source "
                "that sets a conflicting key")
    return f"{table}: {key}: {detail}, set by {source.describe()}; fix: {fix_for(table, source)}"


def fix_for(table: str, source: KeySource, value: str = "<value>") -> str:
    """How to change the key where its source sets it."""
    if source.kind == "property":
        return (f"ALTER TABLE {table} SET TBLPROPERTIES ('{source.origin}'='{value}'), or UNSET it, or set "
                f"{source.key} in the table's spec, which wins over it")
    if source.kind == "default":
        return f"change {source.key} in {source.origin}, or set it for {table} in its spec or as table " \
               f"property {PROPERTY_OF[source.key]}, which win over it"
    if source.kind == "spec":
        return f"edit {source.key} in {source.origin}"
    return f"set {source.key} in the table's spec or as table property {PROPERTY_OF.get(source.key, '')}"


def _check_columns(table: str, spec: TableSpec, merged: Mapping[str, KeySource],
                   columns: Collection[str]) -> None:
    """Sort keys and bloom filters name columns of the table: refused here, naming where they were set."""
    named = [("sort.keys", [k.column for k in spec.sort.keys]),
             ("writer.bloom_filters", list(spec.writer.bloom_filters))]
    for key, wanted in named:
        source = merged.get(key)
        for column in wanted:
            if column not in columns and source is not None:
                close = difflib.get_close_matches(column, list(columns), n=3)
                hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
                raise ConfigError(f"{table}: {key}: {column!r} is not a column of {table}{hint}, set by "
                                  f"{source.describe()}; fix: "
                                  f"{fix_for(table, source, 'a column of the table')}")
