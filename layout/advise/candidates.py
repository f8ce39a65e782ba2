"""The layouts the advisor compares: the table as it is, the spec's own sort,
and sorts on the probes' columns.

From the columns the owners' probes filter on (top-level columns a sort can use), most-weighted first
(the summed `weight` of the probes that filter on each), at most `MAX_COLUMNS` of them:

1. the spec's sort (its keys, or the table's sort order), as the next compaction would write it;
2. linear on each column;
3. zorder and hilbert (quantile ranks) on each pair;
4. linear on each ordered pair (the first key most significant), where the first key's runs of equal
   values are long enough for the second to matter: a second key orders rows only within such a run, so
   where runs average under `MIN_TIE_PAGES` of a page (`runs`: the sample's rows per distinct value, in
   pages of the layout) no page's bounds change and the pair is left out;
5. zorder and hilbert on each triple;
6. with `minmax=True`, zorder scaled by min/max (the job's z-order before quantile ranks) beside each
   quantile zorder, for comparison.

Duplicates are dropped (the spec's sort is often one of the generated ones) and the list is cut at
`max_candidates` in that order, so the simple layouts are always compared.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from layout.advise.result import LayoutStrategy
from layout.expr.predicate import columns as predicate_columns
from layout.expr.sql import parse_where
from layout.spec import CURVES, SortKey, TableSpec

if TYPE_CHECKING:
    from pyiceberg.schema import Schema

__all__ = ["MAX_CANDIDATES", "MAX_COLUMNS", "Candidate", "candidates", "probe_columns"]

MAX_COLUMNS = 4
MAX_CANDIDATES = 24
MIN_TIE_PAGES = 0.25
# Iceberg types the Spark job's curves rank
# (layout.compaction.planning.admission allows these for curve keys).
CURVE_TYPES = frozenset({"IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType", "DateType",
                         "TimestampType", "TimestamptzType", "StringType"})
# Types a linear sort may use: any primitive the job writes (the admission refuses the others anyway).
LINEAR_TYPES = CURVE_TYPES | {"BooleanType", "BinaryType"}

Scaling = Literal["quantile", "minmax"]
Origin = Literal["table", "spec", "probes"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One layout: `strategy` over `keys` ("current" for the table as it is, with no keys)."""

    strategy: LayoutStrategy
    keys: tuple[SortKey, ...] = ()
    scaling: Scaling | None = None  # how a curve ranks its keys; None for linear and current
    origin: Origin = "probes"
    columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", tuple(k.column for k in self.keys))

    @property
    def identity(self) -> tuple[str, tuple[str, ...], str | None]:
        """What makes two candidates the same layout (linear directions included)."""
        keys = tuple(f"{k.column} {k.direction} {k.nulls}" for k in self.keys) if self.strategy == "linear" \
            else self.columns
        return self.strategy, keys, self.scaling

    @property
    def label(self) -> str:
        """How reports name it, e.g. `hilbert(a, b)`, `zorder min/max(a, b)`, `linear(a desc, b)`."""
        if self.strategy == "current":
            return "current layout"
        if self.strategy == "linear":
            keys = ", ".join(k.column + (" desc" if k.direction == "desc" else "") for k in self.keys)
            return f"linear({keys})"
        scale = " min/max" if self.scaling == "minmax" else ""
        return f"{self.strategy}{scale}({', '.join(self.columns)})"

    @property
    def incremental(self) -> bool:
        """Whether nightly runs can sort only the new rows into a run of their own (linear sorts keep sorted
        runs; a curve's files span every key, so new rows overlap them all and the partition is rewritten)."""
        return self.strategy == "linear"


def probe_columns(spec: TableSpec, schema: Schema) -> list[str]:
    """Top-level columns the probes filter on that a sort can use, the most weighted first."""
    types = {f.name: type(f.field_type).__name__ for f in schema.fields}
    weight: dict[str, float] = {}
    for probe in spec.probes:
        for column in sorted(predicate_columns(parse_where(probe.where))):
            if types.get(column) in LINEAR_TYPES:
                weight[column] = weight.get(column, 0.0) + probe.weight
    order = {c: i for i, c in enumerate(weight)}
    return sorted(weight, key=lambda c: (-weight[c], order[c]))


def candidates(spec: TableSpec, schema: Schema, spec_keys: Sequence[SortKey] = (), *,
               runs: Mapping[str, float] | None = None, minmax: bool = False,
               max_candidates: int = MAX_CANDIDATES) -> list[Candidate]:
    """The candidate layouts in priority order (module docstring), deduplicated, at most `max_candidates`;
    `spec_keys` are the spec's sort keys as resolved for the table (empty: none); `runs`, per column, the
    average run of equal values in pages (None: every linear pair is kept)."""
    types = {f.name: type(f.field_type).__name__ for f in schema.fields}
    chosen = probe_columns(spec, schema)[:MAX_COLUMNS]
    curve_columns = [c for c in chosen if types.get(c) in CURVE_TYPES]

    def keys(columns: Iterable[str]) -> tuple[SortKey, ...]:
        return tuple(SortKey(column=c) for c in columns)

    def curves(columns: tuple[str, ...]) -> list[Candidate]:
        out = [Candidate(strategy, keys(columns), "quantile") for strategy in CURVES]
        if minmax:
            out.insert(1, Candidate("zorder", keys(columns), "minmax"))
        return out

    ordered: list[Candidate] = []
    if spec_keys:
        strategy = spec.sort.strategy
        ordered.append(Candidate(strategy, tuple(spec_keys),
                                 "quantile" if strategy in CURVES else None, "spec"))
    ordered += [Candidate("linear", keys([c])) for c in chosen]
    for pair in itertools.combinations(curve_columns, 2):
        ordered += curves(pair)
    ordered += [Candidate("linear", keys(pair)) for pair in itertools.permutations(chosen, 2)
                if runs is None or runs.get(pair[0], MIN_TIE_PAGES) >= MIN_TIE_PAGES]
    for triple in itertools.combinations(curve_columns, 3):
        ordered += curves(triple)
    seen: set[tuple[str, tuple[str, ...], str | None]] = set()
    out = []
    for candidate in ordered:
        if candidate.identity not in seen:
            seen.add(candidate.identity)
            out.append(candidate)
    return out[:max_candidates]
