"""The probes of a table: its owners' queries (`probes:` in the table spec) and a standard set per sort key.

The standard probes are a point lookup and ranges of about 0.1%, 1% and 10% of the rows per sort key,
drawn once per table and then kept: `probes_for` takes each standard probe's predicate from the newest
measurement `lakesort.pruning_metrics` holds for the table, and draws only the ones never recorded (a new
sort key's). So a standard probe names one query for the table's whole life, as an owner's does: every
measurement of it (before and after a compaction, on demand, of any snapshot) is of the same predicate, and
its figures over time compare. Drawn afresh from each snapshot's data, the probes of the snapshot a
compaction wrote would differ from those its `after` phase measured (drawn from the snapshot before), and a
report would pair one predicate with another's figures.

A draw samples the data with a seed derived from the table and column, so the same data gives the same
probes. Its values come from at most `SAMPLE_ROW_GROUPS` row groups (one column each): files drawn with
probability proportional to their rows, a row group drawn in each, and the same number of rows taken from
each, so every row of the snapshot is about equally likely to be drawn.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import random
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.expressions import And
from pyiceberg.table import Table

from layout.io import resolve
from layout.literals import sql_literal
from layout.metrics import store
from layout.read.iceberg import snapshot_files
from layout.spec import TableSpec, resolve_sort_keys

__all__ = ["SAMPLE_ROWS", "SAMPLE_ROW_GROUPS", "STANDARD_SELECTIVITIES", "Probe", "ProbeKind", "owner_probes",
           "probes_for", "recorded_standard_probes", "standard_names", "standard_probes"]

log = logging.getLogger(__name__)

ProbeKind = Literal["owner", "standard"]

# Ranges of about these fractions of the rows, plus one point lookup, per sort key.
STANDARD_SELECTIVITIES: tuple[tuple[str, float], ...] = (("0_1pct", 0.001), ("1pct", 0.01), ("10pct", 0.1))
# Standard probes draw the key from SAMPLE_ROW_GROUPS row groups (a bounded read: one column of 32 row
# groups, whatever the table's size), SAMPLE_ROWS values in all (the 0.1% range then spans ~200 of them).
SAMPLE_ROW_GROUPS = 32
SAMPLE_ROWS = 200_000


@dataclass(frozen=True, slots=True)
class Probe:
    name: str
    where: str  # SQL
    columns: tuple[str, ...] | None = None  # projection; None: every column
    kind: ProbeKind = "owner"


def owner_probes(spec: TableSpec) -> list[Probe]:
    return [Probe(p.name, p.where, tuple(p.columns) if p.columns else None, "owner") for p in spec.probes]


def standard_names(column: str) -> tuple[str, ...]:
    """The names of a sort key's standard probes: its point lookup, then its ranges by selectivity."""
    safe = column.replace(".", "_")
    return (f"std_{safe}_point", *(f"std_{safe}_{label}" for label, _ in STANDARD_SELECTIVITIES))


def standard_probes(table: Table, columns: Sequence[str], snapshot_id: int | None = None) -> list[Probe]:
    """A point lookup and 0.1% / 1% / 10% ranges per column, values sampled from the data (seeded)."""
    probes = []
    name = ".".join(table.name())
    for column in columns:
        # An Arrow array: only the few values a probe uses become Python values.
        values = _sample(table, column, snapshot_id, random.Random(zlib.crc32(f"{name}:{column}".encode())))
        n = len(values)
        if not n or _probe_literal(values[0].as_py()) is None:
            log.info("%s: no standard probes on %s (no values, or a type without SQL literals)", name, column)
            continue
        rng = random.Random(zlib.crc32(f"{name}:{column}:probes".encode()))
        point_name, *range_names = standard_names(column)
        point = values[rng.randrange(n)].as_py()
        probes.append(Probe(point_name, f"{column} = {_probe_literal(point)}", None, "standard"))
        for probe_name, (_, fraction) in zip(range_names, STANDARD_SELECTIVITIES, strict=True):
            width = max(1, round(fraction * n))
            start = rng.randrange(max(1, n - width))
            lo, hi = values[start].as_py(), values[min(start + width, n - 1)].as_py()
            probes.append(Probe(probe_name, f"{column} BETWEEN {_probe_literal(lo)} "
                                            f"AND {_probe_literal(hi)}",
                                None, "standard"))
    return probes


def _sample(table: Table, column: str, snapshot_id: int | None, rng: random.Random) -> pa.Array:
    """Sorted non-null values of `column` from a seeded sample of the snapshot's row groups.

    Two stages, each row about equally likely: files drawn with probability proportional to their rows
    (with replacement), a row group drawn uniformly in each draw's file, and the same number of rows
    taken from each drawn row group. Reads `SAMPLE_ROW_GROUPS` row groups of one column at most.
    """
    files = [f for f in sorted(snapshot_files(table, None, None, snapshot_id), key=lambda f: f.path)
             if f.record_count > 0]
    if not files:
        return pa.array([])
    draws = Counter(rng.choices(range(len(files)), weights=[f.record_count for f in files],
                                k=SAMPLE_ROW_GROUPS))
    per_draw = SAMPLE_ROWS // SAMPLE_ROW_GROUPS
    picks: Counter[tuple[int, int]] = Counter()
    handles: dict[int, pq.ParquetFile] = {}
    for i in sorted(draws):
        filesystem, path = resolve(files[i].path)
        handles[i] = pq.ParquetFile(path, filesystem=filesystem)
        n_groups = handles[i].metadata.num_row_groups
        for _ in range(draws[i]):
            if n_groups:
                picks[i, rng.randrange(n_groups)] += 1
    chunks = []
    rows = np.random.default_rng(rng.getrandbits(64))  # positions in bulk: random.sample is slow at this size
    for (i, rg), times in sorted(picks.items()):
        values = pc.drop_null(handles[i].read_row_group(rg, columns=[column]).column(0))
        want = per_draw * times
        if len(values) > want:
            values = values.take(pa.array(np.sort(rows.choice(len(values), want, replace=False))))
        chunks.extend(values.chunks)
    for handle in handles.values():
        handle.close()
    if not chunks:
        return pa.array([])
    values = pa.chunked_array(chunks, type=chunks[0].type).combine_chunks()
    return values.take(pc.sort_indices(values))


def _probe_literal(value: Any) -> str | None:
    """`value` as SQL text for a standard probe (None: a type we make no standard probes for)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dt.date | int | Decimal | float | str):  # datetime is a date
        return sql_literal(value)
    return None


def recorded_standard_probes(catalog: Catalog, table: str) -> dict[str, Probe]:
    """The standard probes `lakesort.pruning_metrics` holds for `table`, each with the predicate of its newest
    measurement (by measured_at, then run id); none when nothing was recorded yet."""
    try:
        metrics = catalog.load_table(store.PRUNING_METRICS)
    except (NoSuchTableError, NoSuchNamespaceError):  # nothing measured in this catalog yet
        return {}
    where = And(store.equal_to("table", table), store.equal_to("probe_kind", "standard"))
    scan = metrics.scan(row_filter=where, selected_fields=("probe", "predicate", "measured_at", "run_id"))
    rows = scan.to_arrow().to_pylist()
    newest: dict[str, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: (r["measured_at"], r["run_id"])):
        newest[row["probe"]] = row
    return {name: Probe(name, row["predicate"], None, "standard") for name, row in newest.items()}


def probes_for(spec: TableSpec, table: Table, snapshot_id: int | None = None,
               catalog: Catalog | None = None) -> list[Probe]:
    """The owners' probes, then the standard set for each sort key: as recorded in `catalog`'s metrics for
    the table (default: the catalog the table was loaded from), drawn from the snapshot's data only for a
    key whose probes were never recorded (module docstring)."""
    keys = [k.column for k in resolve_sort_keys(spec, table)]
    recorded = recorded_standard_probes(catalog if catalog is not None else table.catalog, spec.table)
    standard: list[Probe] = []
    for key in keys:
        names = standard_names(key)
        if all(name in recorded for name in names):  # the usual case: nothing sampled
            standard.extend(recorded[name] for name in names)
        else:  # a new key's, or one drawn before it had every selectivity: the recorded ones kept
            standard.extend(recorded.get(p.name, p) for p in standard_probes(table, [key], snapshot_id))
    return owner_probes(spec) + standard
