"""The generators and the check of the plan's soundness tests: tests/read/test_plan_soundness.py (Parquet
files and directories) and tests/read/test_plan_soundness_iceberg.py (Iceberg tables).

- `cases()`: a random dataset (`Dataset`: the rows and how its files are written, `FileOptions`) and random
  predicates with projections over it, with literals drawn from the column's values and from outside them;
- `Written`: the data files as written, and pyarrow's read of each row group;
- `check_query`: one plan against the oracle, tests/sql_oracle.py: soundness, the exact rows read, the counts,
  `all_match`, and `to_arrow_filter` (the checks (a) to (e) of tests/read/test_plan_soundness.py).
"""

from __future__ import annotations

import datetime as dt
import math
import random
import time
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import sql_oracle
from hypothesis import strategies as st

import layout.read.plan as lp
from layout.expr.bind import bind, schema_kinds, to_arrow_filter
from layout.expr.predicate import (
    And,
    Eq,
    Expr,
    Gt,
    GtEq,
    In,
    IsNaN,
    IsNull,
    Like,
    Lt,
    LtEq,
    Not,
    NotEq,
    NotIn,
    NotLike,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    StartsWith,
)
from layout.read.scan import read_batches, read_table

# -- columns and their values --------------------------------------------------------------------

SCHEMA = pa.schema([
    ("i64", pa.int64()),
    ("i32", pa.int32()),
    ("f", pa.float64()),
    ("s", pa.string()),
    ("d", pa.date32()),
    ("dec", pa.decimal128(10, 2)),
    ("b", pa.bool_()),
])
COLUMNS = tuple(SCHEMA.names)
BLOOM_CAPABLE = ("i64", "i32", "f", "s", "d", "dec")  # pyarrow writes no bloom filter for booleans
ROW_ID = "__row"

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1
DEC_MAX = Decimal("99999999.99")
PREFIXES = ("", "a", "ab", "abc", "b", "é", "\uffff", "\U0001f600", "a%", "a_")
ALPHABET = "ab_%é\x00\x7f\uffff\U0001f600"

small_ints = st.integers(-20, 20)
i64_values = st.one_of(small_ints, st.sampled_from([I64_MIN, I64_MAX, I64_MIN + 1, I64_MAX - 1]),
                       st.integers(I64_MIN, I64_MAX))
i32_values = st.one_of(small_ints, st.sampled_from([I32_MIN, I32_MAX]), st.integers(I32_MIN, I32_MAX))
finite_floats = st.one_of(
    small_ints.map(float),
    st.sampled_from([0.0, -0.0, 0.5, -0.5, 1e308, -1e308, 5e-324, -5e-324]),
    st.floats(allow_nan=False, allow_infinity=False),
)
f_values = st.one_of(finite_floats, st.sampled_from([math.nan, math.inf, -math.inf]))
short_strings = st.builds(lambda p, t: p + t, st.sampled_from(PREFIXES), st.text(ALPHABET, max_size=4))
long_strings = st.builds(lambda p, n, t: p + "a" * n + t, st.sampled_from(PREFIXES), st.integers(60, 90),
                         st.text(ALPHABET, max_size=3))
s_values = st.one_of(short_strings, short_strings, long_strings)
EPOCH = dt.date(2020, 1, 1)
d_values = st.one_of(
    st.integers(-30, 30).map(lambda k: EPOCH + dt.timedelta(days=k)),
    st.sampled_from([dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1), dt.date(1969, 12, 31)]),
)
dec_values = st.one_of(
    st.integers(-2000, 2000).map(lambda k: Decimal(k).scaleb(-2)),
    st.sampled_from([DEC_MAX, -DEC_MAX, Decimal("0.00"), Decimal("-0.01"), Decimal("0.01")]),
)
b_values = st.booleans()

VALUES = {"i64": i64_values, "i32": i32_values, "f": f_values, "s": s_values, "d": d_values,
          "dec": dec_values, "b": b_values}

# Literals outside the column's values (the pools are also used, so that predicates hit).
LITERALS = {
    "i64": i64_values,
    "i32": st.one_of(i32_values, st.sampled_from([I32_MIN - 1, I32_MAX + 1, I64_MIN, I64_MAX])),
    "f": st.one_of(finite_floats, st.sampled_from([math.inf, -math.inf]), small_ints),
    "s": st.one_of(short_strings, long_strings),
    "d": st.one_of(d_values, d_values.map(dt.date.isoformat)),
    "dec": st.one_of(
        dec_values,
        small_ints,
        # more decimal places than the column: must not be rounded to the column's scale
        st.integers(-20_000, 20_000).map(lambda k: Decimal(k).scaleb(-3)),
        # a float literal is a valid DECIMAL literal too (bound as Decimal(repr(x))): never round it
        st.integers(-20_000, 20_000).map(lambda k: k / 1000),
        st.sampled_from([Decimal("100000000.00"), Decimal("-100000000.00")]),
    ),
    "b": b_values,
}


# -- datasets --------------------------------------------------------------------------------------


@dataclass
class FileOptions:
    row_group_size: int
    max_rows_per_page: int
    data_page_size: int
    use_dictionary: bool
    write_page_index: bool
    write_statistics: bool | list[str]
    bloom: list[str]
    store_decimal_as_integer: bool

    def kwargs(self, num_rows: int) -> dict[str, Any]:
        return {
            "row_group_size": self.row_group_size,
            "max_rows_per_page": self.max_rows_per_page,
            "data_page_size": self.data_page_size,
            "use_dictionary": self.use_dictionary,
            "write_page_index": self.write_page_index,
            "write_statistics": self.write_statistics,
            "store_decimal_as_integer": self.store_decimal_as_integer,
            "bloom_filter_options": {c: {"ndv": max(num_rows, 1), "fpp": 0.05} for c in self.bloom} or None,
        }


@dataclass
class Dataset:
    num_rows: int
    pools: dict[str, list[Any]]
    null_fraction: dict[str, float]
    seed: int
    sort: tuple[str, str, str] | None  # column, "ascending"/"descending", null placement
    files: list[FileOptions]
    huge: bool = False

    def table(self) -> pa.Table:
        rng = random.Random(self.seed)
        data = {}
        for name in COLUMNS:
            pool, nulls = self.pools[name], self.null_fraction[name]
            data[name] = [None if rng.random() < nulls else rng.choice(pool) for _ in range(self.num_rows)]
        if self.huge and self.num_rows:
            # over 4 KiB: pyarrow leaves min/max out of the statistics, and the chunk's column index out
            data["s"][rng.randrange(self.num_rows)] = "a" * 4100 + "z"
        table = pa.table(data, schema=SCHEMA)
        if self.sort is not None:
            column, order, placement = self.sort
            table = table.sort_by([(column, order, placement)])
        return table


file_options = st.builds(
    FileOptions,
    # many tiny row groups, some middling ones, or one row group of many pages
    row_group_size=st.one_of(st.integers(1, 8), st.integers(1, 120), st.just(1_000)),
    max_rows_per_page=st.one_of(st.integers(1, 6), st.integers(1, 40)),
    data_page_size=st.sampled_from([64, 128, 512, 4096]),
    use_dictionary=st.booleans(),
    write_page_index=st.sampled_from([True, True, True, False]),
    write_statistics=st.one_of(st.just(True), st.just(True), st.lists(st.sampled_from(COLUMNS), unique=True)),
    bloom=st.one_of(st.just([]), st.lists(st.sampled_from(BLOOM_CAPABLE), unique=True, min_size=1)),
    store_decimal_as_integer=st.booleans(),
)


@st.composite
def datasets(draw) -> Dataset:
    pools = {name: draw(st.lists(VALUES[name], min_size=1, max_size=8)) for name in COLUMNS}
    nulls = {name: draw(st.sampled_from([0.0, 0.0, 0.1, 0.4, 1.0])) for name in COLUMNS}
    files = draw(st.lists(file_options, min_size=1, max_size=3))
    num_rows = draw(st.integers(0, 300))
    sort_key = st.tuples(st.sampled_from(COLUMNS), st.sampled_from(["ascending", "descending"]),
                         st.sampled_from(["at_start", "at_end"]))
    sort = draw(st.one_of(st.none(), sort_key))
    if draw(st.booleans()):
        # An ordered layout for sure: sorted, several distinct values over many pages of few row groups,
        # with a page index, so that the column index is ASCENDING / DESCENDING and binary search runs.
        sort = draw(sort_key)
        column = sort[0]
        pools[column] = draw(st.lists(VALUES[column], min_size=3, max_size=12))
        nulls[column] = draw(st.sampled_from([0.0, 0.1]))
        num_rows = draw(st.integers(40, 300))
        files = [replace(f, write_page_index=True, write_statistics=True,
                         row_group_size=draw(st.sampled_from([1_000, 150, 64])),
                         max_rows_per_page=draw(st.integers(1, 12))) for f in files]
    return Dataset(
        num_rows=num_rows,
        pools=pools,
        null_fraction=nulls,
        seed=draw(st.integers(0, 2**32 - 1)),
        sort=sort,
        files=files,
        huge=draw(st.integers(0, 15)) == 0,
    )


# -- predicates ------------------------------------------------------------------------------------


def literal(draw, name: str, pool: list[Any]) -> Any:
    usable = [v for v in pool if not (isinstance(v, float) and math.isnan(v))]
    if usable and draw(st.booleans()):
        value = draw(st.sampled_from(usable))
        if name == "dec" and draw(st.integers(0, 3)) == 0:
            # a float just off a value: rounding it to the column's scale would flip comparisons
            return float(value) + draw(st.sampled_from([-0.006, -0.004, 0.004, 0.006]))
        return value
    return draw(LITERALS[name])


@st.composite
def leaves(draw, pools: dict[str, list[Any]]) -> Expr:
    name = draw(st.sampled_from(COLUMNS))
    pool = pools[name]
    kinds = ["cmp", "cmp", "in", "not_in", "between", "null"]
    if name == "f":
        kinds.append("nan")
    if name == "s":
        kinds += ["prefix", "prefix", "like"]
    kind = draw(st.sampled_from(kinds))
    if kind == "cmp":
        op = draw(st.sampled_from([Eq, NotEq, Lt, LtEq, Gt, GtEq]))
        return op(name, literal(draw, name, pool))
    if kind in ("in", "not_in"):
        values = [literal(draw, name, pool) for _ in range(draw(st.integers(0, 4)))]
        return (In if kind == "in" else NotIn)(name, values)
    if kind == "between":
        lo, hi = sorted([literal(draw, name, pool), literal(draw, name, pool)], key=_sort_key)
        if draw(st.integers(0, 4)) == 0:
            lo, hi = hi, lo  # an empty range
        return And(GtEq(name, lo), LtEq(name, hi))
    if kind == "null":
        return draw(st.sampled_from([IsNull, NotNull]))(name)
    if kind == "nan":
        return draw(st.sampled_from([IsNaN, NotNaN]))(name)
    if kind == "prefix":
        source = draw(st.sampled_from([v for v in pool if v is not None] or [""]))
        prefix = draw(st.one_of(
            st.integers(0, len(source)).map(lambda k: source[:k]),
            st.sampled_from(PREFIXES),
            short_strings,
            st.just(source + "a"),
        ))
        return draw(st.sampled_from([StartsWith, NotStartsWith]))(name, prefix)
    pattern = draw(st.sampled_from(["%a%", "a_%", "_b%", "%", "%\uffff", "ab%c", "a\\%%", "%é_"]))
    return draw(st.sampled_from([Like, NotLike]))(name, pattern)


def _sort_key(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            return value
    return value


def predicates(pools: dict[str, list[Any]]) -> st.SearchStrategy[Expr]:
    return st.recursive(
        leaves(pools),
        lambda children: st.one_of(
            st.builds(And, children, children),
            st.builds(Or, children, children),
            st.builds(Not, children),
        ),
        max_leaves=5,
    )


projections = st.one_of(st.none(), st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=3, unique=True))


@dataclass
class Case:
    dataset: Dataset
    queries: list[tuple[Expr, list[str] | None]] = field(default_factory=list)


@st.composite
def cases(draw) -> Case:
    dataset = draw(datasets())
    queries = draw(st.lists(st.tuples(predicates(dataset.pools), projections), min_size=1, max_size=5))
    return Case(dataset, queries)


# -- the files as written, and comparing with the oracle -----------------------------------------------


@dataclass
class Written:
    source: str  # what `plan` is given: a file, a directory or an Iceberg table identifier
    paths: list[Path]  # the data files, in the order the plan visits them
    row_groups: list[list[pa.Table]]  # per file, per row group: the rows as pyarrow reads them
    _rows: list[dict[str, Any]] | None = None

    def full(self) -> pa.Table:
        return pa.concat_tables([t for groups in self.row_groups for t in groups])

    def rows(self) -> list[dict[str, Any]]:
        """Every row of every file, as Python values (in the plan's file / row group / row order)."""
        if self._rows is None:
            self._rows = self.full().to_pylist()
        return self._rows


def read_row_groups(path: Path) -> list[pa.Table]:
    reader = pq.ParquetFile(path)
    return [reader.read_row_group(i) for i in range(reader.metadata.num_row_groups)]


def arrow_matches(table: pa.Table, bound: Expr) -> list[int]:
    """Row numbers (within `table`) where the bound predicate is true, by `to_arrow_filter`."""
    numbered = table.append_column(ROW_ID, pa.array(range(table.num_rows), pa.int64()))
    return numbered.filter(to_arrow_filter(bound)).column(ROW_ID).to_pylist()


def comparable(table: pa.Table) -> pa.Table:
    """The table with floats viewed as their bits, so that NaN equals NaN (and -0.0 differs from 0.0)."""
    table = table.combine_chunks()
    columns = []
    for column in table.columns:
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if pa.types.is_floating(array.type):
            array = array.view(pa.int64())
        columns.append(array)
    return pa.table(columns, names=table.column_names)


# -- checking one plan against the oracle --------------------------------------------------------------

COUNT_KEYS = ("files_total", "files_selected", "row_groups_total", "row_groups_selected", "pages_total",
              "pages_selected", "rows_total", "rows_selected", "bytes_total", "bytes_selected")


def check_query(written: Written, expr: Expr, columns: list[str] | None, cache: Any, *,
                exact_totals: bool = False, footer_totals: bool = True) -> lp.Plan:
    """Check one plan against the oracle; `footer_totals=False`: row_groups_total and pages_total may be
    None (an Iceberg table planned without `exact_totals` leaves the files its manifests prune unopened)."""
    wall = time.perf_counter()
    plan = lp.plan(written.source, expr, columns, cache=cache, exact_totals=exact_totals)
    wall_ms = (time.perf_counter() - wall) * 1000
    where = f"where={expr}, columns={columns}"
    matching = sql_oracle.matches(written.rows(), expr)  # row numbers in the full table
    matching_set = set(matching)

    by_name = {Path(fp.path).name: fp for fp in plan.files}
    assert set(by_name) <= {p.name for p in written.paths}, (
        f"{where}: plan names unknown files {list(by_name)}")
    selected_rows = selected_groups = selected_files = 0
    first_row = 0  # of the current row group, in the full table
    for path, groups in zip(written.paths, written.row_groups, strict=True):
        file_plan = by_name.get(path.name)
        rg_plans = {rg.index: rg for rg in file_plan.row_groups} if file_plan is not None else {}
        assert set(rg_plans) <= set(range(len(groups))), f"{where}: {path.name}: unknown row groups"
        file_selected = False
        for index, group in enumerate(groups):
            matches = [row - first_row for row in range(first_row, first_row + group.num_rows)
                       if row in matching_set]
            first_row += group.num_rows
            rg_plan = rg_plans.get(index)
            if rg_plan is None:
                assert not matches, (
                    f"UNSOUND {where}: {path.name} row group {index} was skipped but "
                    f"rows {matches[:10]} match"
                )
                continue
            assert rg_plan.num_rows == group.num_rows, f"{where}: {path.name} rg {index}: num_rows"
            selection = rg_plan.selection
            assert not selection.ranges or selection.ranges[-1][1] <= group.num_rows, (
                f"{where}: {path.name} rg {index}: selection {selection} past {group.num_rows} rows")
            dropped = [row for row in matches if row not in selection]
            assert not dropped, (
                f"UNSOUND {where}: {path.name} row group {index}: matching rows {dropped[:10]} are not in "
                f"the selection {selection}"
            )
            if rg_plan.all_match and selection:
                matched = set(matches)
                wrong = [row for start, end in selection.ranges for row in range(start, end)
                         if row not in matched]
                assert not wrong, (
                    f"{where}: {path.name} row group {index} is all_match but rows {wrong[:10]} do not match "
                    f"(selection {selection})"
                )
            selected_rows += selection.row_count
            selected_groups += bool(selection)
            file_selected = file_selected or bool(selection)
        selected_files += file_selected

    # (c) counts
    counts = plan.counts
    n_groups = sum(len(groups) for groups in written.row_groups)
    n_rows = sum(g.num_rows for groups in written.row_groups for g in groups)
    assert counts.files_total == len(written.paths), f"{where}: {counts}"
    if footer_totals or counts.row_groups_total is not None:
        assert counts.row_groups_total == n_groups, f"{where}: {counts}"
    assert (counts.row_groups_total is None) == (counts.pages_total is None), f"{where}: {counts}"
    assert counts.rows_total == n_rows, f"{where}: {counts}"
    assert counts.rows_selected == selected_rows, f"{where}: {counts} but the selections hold {selected_rows}"
    assert counts.row_groups_selected == selected_groups, f"{where}: {counts}; selected: {selected_groups}"
    assert counts.files_selected == selected_files, f"{where}: {counts}; selected: {selected_files}"
    for level in ("files", "row_groups", "pages", "rows", "bytes"):
        total, selected = getattr(counts, f"{level}_total"), getattr(counts, f"{level}_selected")
        assert 0 <= selected <= (selected if total is None else total), (
            f"{where}: {level}: {selected} of {total}")
    assert 0 < plan.plan_ms <= wall_ms, f"{where}: plan_ms {plan.plan_ms} outside the call's {wall_ms:.3f} ms"

    doc = plan.to_json()
    assert set(COUNT_KEYS) | {"plan_ms", "selection"} <= set(doc), f"{where}: keys {sorted(doc)}"
    for key in COUNT_KEYS:
        assert doc[key] == getattr(counts, key), f"{where}: to_json()[{key!r}] = {doc[key]} vs {counts}"
    json_rows = sum(end - start for item in doc["selection"] for start, end in item["ranges"])
    assert json_rows == selected_rows, (
        f"{where}: to_json selection holds {json_rows} rows, not {selected_rows}")

    # (b) exact rows, projected, in order
    full = written.full()
    expected = full.take(pa.array(matching, pa.int64()))
    expected = expected.select(columns) if columns is not None else expected
    actual = read_table(plan)
    assert actual.schema.names == expected.schema.names, f"{where}: columns {actual.schema.names}"
    assert actual.schema.types == expected.schema.types, (
        f"{where}: types {actual.schema} vs {expected.schema}")
    assert actual.num_rows == expected.num_rows, (
        f"{where}: {actual.num_rows} rows read, {expected.num_rows} match")
    assert comparable(actual).equals(comparable(expected)), f"{where}: rows differ from the oracle"

    batches = list(read_batches(plan))
    assert sum(b.num_rows for b in batches) == expected.num_rows, f"{where}: to_batches row count"
    if batches:
        from_batches = pa.Table.from_batches(batches)
        assert comparable(from_batches).equals(comparable(expected)), f"{where}: to_batches rows differ"

    # (e) the exact filter lakesort applies agrees with the oracle (a bug in `bind` or `to_arrow_filter`
    # shows up here by name, besides in (b))
    bound = bind(expr, schema_kinds(SCHEMA))
    by_arrow = arrow_matches(full, bound)
    assert by_arrow == matching, (
        f"{where}: to_arrow_filter({bound}) keeps rows {sorted(set(by_arrow) - matching_set)[:10]} the "
        f"oracle rejects and drops rows {sorted(matching_set - set(by_arrow))[:10]} it keeps")
    return plan
