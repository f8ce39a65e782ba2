"""Date ranges to partitions: "compact the partitions holding 1995-03-10..1995-04-05".

After a backfill, its owners know the days they rewrote, not the partition paths the planner speaks in.
`lakesort compact TABLE --from DAY --to DAY` and the backfill DAG's `from`/`to` params both end here:
`date_range` checks the request before anything is opened (so a typo costs nothing), and
`partitions_for_dates` maps the days through the table's partition transform onto the partitions that
exist, which the planner then takes like explicit `--partition` values.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from pyiceberg.transforms import HourTransform, IdentityTransform, TimeTransform
from pyiceberg.typedef import Record
from pyiceberg.types import DateType, TimestampType, TimestamptzType

from layout.catalog import load_table
from layout.errors import UsageError
from layout.models import Frozen
from layout.spec import TableSpec

__all__ = ["DateRange", "date_range", "partitions_for_dates"]

_EPOCH = dt.datetime(1970, 1, 1)


class DateRange(Frozen):
    """Days `first`..`last`, both included (built by `date_range`, which checks first <= last)."""

    first: dt.date
    last: dt.date

    def __str__(self) -> str:
        return f"{self.first}..{self.last}"


def _day(value: str | dt.date, name: str) -> dt.date:
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise UsageError(f"{name} {value!r} is not a date: write it as YYYY-MM-DD") from None


def date_range(date_from: str | dt.date | None, date_to: str | dt.date | None, *,
               partitions: Sequence[str] | None = None,
               names: tuple[str, str, str] = ("`from`", "`to`", "`partitions`")) -> DateRange | None:
    """The checked date range of a request, or None when it names no day.

    Refused (UsageError, before any table is opened): a range together with explicit partitions (which
    one would win?), one end without the other (a half-open range would silently mean "until today"),
    and a first day after the last. `names` spells the three inputs as the caller's user knows them
    (the CLI's `--from`, `--to`, `--partition`).
    """
    start, end, parts = names
    if partitions and (date_from or date_to):
        raise UsageError(f"give either {parts} or a date range ({start}/{end}), not both")
    if bool(date_from) != bool(date_to):
        missing = end if date_from else start
        raise UsageError(f"a date range needs both {start} and {end}: "
                         f"add {missing} (the range includes both days)")
    if not date_from or not date_to:
        return None
    first, last = _day(date_from, start), _day(date_to, end)
    if first > last:
        raise UsageError(f"{start} ({first}) is after {end} ({last}): swap them")
    return DateRange(first=first, last=last)


def partitions_for_dates(spec: TableSpec, *, dates: DateRange) -> list[str]:
    """The table's existing partitions that hold rows of the days of `dates`, as partition paths
    (`l_shipdate_month=1995-03`): each day (or hour) of the range through the partition transform,
    intersected with the partitions the current snapshot has (an empty list: no partition to do).

    Only a table partitioned by one field, a year/month/day/hour or identity transform of a date or
    timestamp column, maps; any other is refused with a UsageError: give its partitions instead.
    """
    table = load_table(spec.table, spec.catalog)
    pspec, schema = table.spec(), table.schema()
    if len(pspec.fields) != 1:
        raise UsageError(f"{spec.table} has {len(pspec.fields)} partition fields: a date range maps onto one "
                         "date partition field only; give the partitions instead")
    field = pspec.fields[0]
    source = schema.find_field(field.source_id).field_type
    dated = isinstance(field.transform, TimeTransform | IdentityTransform) and isinstance(
        source, DateType | TimestampType | TimestamptzType)
    if not dated:
        raise UsageError(f"{spec.table} is partitioned by {field.transform} of a {source} column: a date "
                         "range maps onto date partitions only; give the partitions instead")
    transform = field.transform.transform(source)
    step = dt.timedelta(hours=1) if isinstance(field.transform, HourTransform) else dt.timedelta(days=1)
    moment = dt.datetime.combine(dates.first, dt.time())
    end = dt.datetime.combine(dates.last, dt.time(23, 59, 59))
    wanted: set[str] = set()
    while moment <= end:
        delta = moment - _EPOCH
        value = delta.days if isinstance(source, DateType) else delta // dt.timedelta(microseconds=1)
        wanted.add(pspec.partition_to_path(Record(transform(value)), schema))
        moment += step
    if table.current_snapshot() is None:
        return []
    existing = {pspec.partition_to_path(Record(*p.values()), schema)
                for p in table.inspect.partitions().column("partition").to_pylist()}
    return sorted(wanted & existing)
