"""Reading table specs: YAML files in, `TableSpec` out, or a `ConfigError` with one line per problem.

Each line names the file and the dotted key:
``dags/tables/x.yaml: sort.keys[0].direction: expected one of 'asc', 'desc', got 'up'``.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from layout.errors import ConfigError
from layout.spec.models import TableSpec

__all__ = ["load_spec", "load_specs", "parse_spec"]


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys silently; a spec with one is almost surely a mistake."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def load_spec(path: str | Path) -> TableSpec:
    """Read and validate one spec file; any problem raises `ConfigError` naming the file and key."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{source}: cannot read the table spec: {error.strerror or error}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"{source}{where}: invalid YAML: {problem}") from None
    return parse_spec(data, source=source)


def parse_spec(data: object, *, source: str = "<spec>") -> TableSpec:
    """Validate an already-parsed YAML document; `source` names it in errors."""
    if data is None:
        raise ConfigError(f"{source}: the table spec is empty; it needs at least table and owner")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping of keys (table, owner, sort, ...), "
                          f"got {type(data).__name__}")
    try:
        spec = TableSpec.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_describe(error, source)) from None
    spec._source = source
    return spec


def load_specs(directory: str | Path) -> list[TableSpec]:
    """Every ``*.yaml``/``*.yml`` in `directory`, sorted by file name; one table per file. A file whose name
    starts with ``_`` is no table's spec (`_defaults.yaml`: namespace defaults,
    `layout.registry.defaults`)."""
    root = Path(directory)
    if not root.is_dir():
        raise ConfigError(f"{root}: not a directory of table specs")
    files = sorted(p for p in root.iterdir()
                   if p.suffix in (".yaml", ".yml") and p.is_file() and not p.name.startswith("_"))
    specs: list[TableSpec] = []
    # Keyed with the catalog: the same identifier in two catalogs is two tables.
    by_table: dict[tuple[str | None, str], TableSpec] = {}
    for path in files:
        spec = load_spec(path)
        other = by_table.get((spec.catalog, spec.table))
        if other is not None:
            raise ConfigError(
                f"{spec.source}: table: {spec.table!r} is already specified in {other.source}; "
                "keep one spec per table"
            )
        by_table[(spec.catalog, spec.table)] = spec
        specs.append(spec)
    return specs


def _describe(error: ValidationError, source: str) -> str:
    lines = []
    for item in error.errors(include_url=False):
        loc = item["loc"]
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        lines.append(f"{source}: {path + ': ' if path else ''}{_message(item)}")
    return "\n".join(lines)


def _message(item: Any) -> str:
    kind, given = item["type"], item.get("input")
    if kind == "extra_forbidden":
        valid = _valid_keys(item["loc"][:-1])
        close = difflib.get_close_matches(str(item["loc"][-1]), valid, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown key{hint} (valid keys: {', '.join(valid)})"
    if kind == "literal_error":
        expected = item["ctx"]["expected"].replace(" or ", ", ")
        return f"expected one of {expected}, got {given!r}"
    if kind == "missing":
        return "required key is missing"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"expected a mapping of keys, got {given!r}"
    if kind == "too_short":
        return f"expected at least {item['ctx']['min_length']} item(s), got {given!r}"
    if kind == "value_error":
        return str(item["ctx"]["error"])
    return f"{item['msg'][0].lower()}{item['msg'][1:]}, got {given!r}"


def _valid_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed at `loc`: follow model fields;
    list indexes and mapping keys keep the element's model."""
    model: Any = TableSpec
    for part in loc:
        if model is not None and isinstance(part, str) and part in model.model_fields:
            model = _model_in(model.model_fields[part].annotation)
    return list(model.model_fields) if model is not None else []


def _model_in(annotation: Any) -> Any:
    """The model class inside an annotation (`X | None`, `tuple[X, ...]`, `dict[str, X]`, `Annotated`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for arg in typing.get_args(annotation) if (m := _model_in(arg)) is not None), None)
