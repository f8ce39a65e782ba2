"""Property tests of `layout.read.plan`: pruning is sound, and the plan reads exactly the matching rows.

Random tables (every column nullable: int64, int32, float64 with NaN / ±inf / ±0.0, short, long and
very long strings with common prefixes, date32, decimal128(10, 2), booleans) are written with pyarrow in
tiny pages (pyarrow 26's `max_rows_per_page` and a small `data_page_size`), random row groups, with or
without dictionary encoding, statistics, page index and bloom filters; sorted by one column (ascending or
descending, so the column index is ASCENDING or DESCENDING and the page search is a binary search) or not
sorted; in one file or several files of a directory.

Random predicates over them (comparisons, IN, NOT IN, BETWEEN, IS [NOT] NULL, isnan, LIKE 'p%', other
LIKE patterns, AND / OR / NOT) use literals drawn from the column's values, so that they hit, and from
outside them (decimal columns also get float literals just off their values, e.g. `dec > 1.005`).

The oracle, tests/sql_oracle.py (checked against DuckDB), shares no code with lakesort: it runs the predicate
in plain Python over every row of the full table read by pyarrow, with SQL's three-valued logic and the rules
of `layout.expr.predicate` (NULL and NaN compare as unknown; isnan is two-valued; IN () is FALSE, NOT IN ()
TRUE, on NULLs too; a float literal on a DECIMAL column is exact, never rounded to its scale). Checked:

(a) soundness: every matching row lies in its row group's selection;
(b) `read_table(plan)` is exactly the matching (and projected) rows of the full table, in file / row group /
    row order;
(c) the counts agree with the selections and with the files;
(d) a row group marked `all_match` matches on every row it selects;
(e) `layout.expr.bind.to_arrow_filter` (the exact filter `read_table(plan)` applies) agrees with the oracle.

The generators and the check are tests/plan_soundness.py's; tests/read/test_plan_soundness_iceberg.py checks
the same property on Iceberg tables.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import sql_oracle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plan_soundness import (
    COLUMNS,
    EPOCH,
    Case,
    Dataset,
    FileOptions,
    Written,
    cases,
    check_query,
    read_row_groups,
)

from layout.expr.predicate import And, Eq, Expr, Gt, GtEq, In, Lt, LtEq, NotEq, NotIn, Or

# -- writing the dataset as Parquet files --------------------------------------------------------------


def write(dataset: Dataset, root: Path) -> Written:
    table = dataset.table()
    n_files = len(dataset.files)
    bounds = [round(k * table.num_rows / n_files) for k in range(n_files + 1)]
    paths, groups = [], []
    for k, options in enumerate(dataset.files):
        path = root / f"part-{k:04d}.parquet"
        pq.write_table(table.slice(bounds[k], bounds[k + 1] - bounds[k]), path,
                       **options.kwargs(bounds[k + 1] - bounds[k]))
        groups.append(read_row_groups(path))
        paths.append(path)
    return Written(str(paths[0]) if n_files == 1 else str(root), paths, groups)


# -- the property ------------------------------------------------------------------------------------


@settings(deadline=None, max_examples=200,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=cases(), use_cache=st.booleans())
def test_plan_is_sound_and_exact(case: Case, use_cache: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="lakesort-plan-") as tmp:
        written = write(case.dataset, Path(tmp))
        for expr, columns in case.queries:
            check_query(written, expr, columns, None if use_cache else False)


# -- float literals on a DECIMAL column, and the two zeros -----------------------------------------------


DECIMAL_FLOAT_PREDICATES = [
    Gt("dec", 1.005), GtEq("dec", 1.005), Lt("dec", 1.005), LtEq("dec", 1.004), Eq("dec", 1.005),
    NotEq("dec", 1.005), In("dec", [1.005, 2.5]), NotIn("dec", [1.015, 2.5]), Lt("dec", 1.015),
    And(GtEq("dec", 0.995), LtEq("dec", 1.015)), Or(Eq("dec", 1.0), Gt("dec", 2.495)),
]


@pytest.mark.parametrize("expr", DECIMAL_FLOAT_PREDICATES, ids=str)
def test_float_literals_on_a_decimal_column_are_not_rounded(tmp_path: Path, expr: Expr) -> None:
    """`dec > 1.005` on DECIMAL(10, 2) is `dec >= 1.01`: rounding the literal to the column's scale (1.00 or
    1.01, 1.015 to 1.02) would change the rows, in the plan's pruning and in its exact filter alike."""
    pools = {name: [draw] for name, draw in
             (("i64", 1), ("i32", 2), ("f", 0.5), ("s", "ab"), ("d", EPOCH), ("b", True))}
    pools["dec"] = [Decimal(v) for v in ("0.99", "1.00", "1.01", "1.02", "2.49", "2.50")]
    options = FileOptions(row_group_size=40, max_rows_per_page=4, data_page_size=4096, use_dictionary=False,
                          write_page_index=True, write_statistics=True, bloom=["dec"],
                          store_decimal_as_integer=False)
    dataset = Dataset(num_rows=120, pools=pools, null_fraction=dict.fromkeys(COLUMNS, 0.0) | {"dec": 0.1},
                      seed=7, sort=("dec", "ascending", "at_end"),
                      files=[options, replace(options, bloom=[])])
    written = write(dataset, tmp_path)
    check_query(written, expr, None, False)


@pytest.mark.parametrize("expr",
                         [In("f", [-0.0]), In("f", [0.0, 7.0]), NotIn("f", [-0.0]), NotIn("f", [0.0])],
                         ids=str)
def test_in_on_a_double_column_equates_minus_zero_and_zero(tmp_path: Path, expr: Expr) -> None:
    """`f IN (-0.0)` is `f = -0.0`, true for 0.0 and -0.0 alike (as `=` is, and in Spark and DuckDB);
    Arrow's `is_in` tells the two zeros apart, so it must not decide IN on a float column."""
    assert (sql_oracle.evaluate(expr, {"f": 0.0}) is sql_oracle.evaluate(expr, {"f": -0.0})
            is (type(expr) is In))
    pools = {name: [draw] for name, draw in
             (("i64", 1), ("i32", 2), ("s", "ab"), ("d", EPOCH), ("dec", Decimal("1.00")), ("b", True))}
    pools["f"] = [0.0, -0.0, 1.0, math.nan]
    options = FileOptions(row_group_size=30, max_rows_per_page=5, data_page_size=4096, use_dictionary=True,
                          write_page_index=True, write_statistics=True, bloom=["f"],
                          store_decimal_as_integer=False)
    dataset = Dataset(num_rows=60, pools=pools, null_fraction=dict.fromkeys(COLUMNS, 0.0) | {"f": 0.1},
                      seed=3, sort=None, files=[options])
    check_query(write(dataset, tmp_path), expr, None, False)
