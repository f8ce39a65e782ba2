"""What verification reports: findings (one observation each, with a diagnosis that names the fix), the report
of a set of files, the failure that refuses a commit, and the spec's promises flattened for the rules
(`Intent`). The rules themselves are `layout.verify.rules`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from layout.errors import LakesortError
from layout.spec import intended_boundary_orders, order_column

if TYPE_CHECKING:
    from layout.spec import SortKey, TableSpec

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")

class VerificationFailed(LakesortError):
    """The staged files do not have the layout the spec asks for; `report` says what and why."""

    def __init__(self, report: VerifyReport) -> None:
        self.report = report
        errors = [f for f in report.findings if f.severity == "error"]
        lines = [f"{f.rule}: {f.diagnosis}" for f in errors[:10]]
        more = f"\n... and {len(errors) - 10} more" if len(errors) > 10 else ""
        super().__init__(f"{len(errors)} layout error(s):\n" + "\n".join(lines) + more)


@dataclass(frozen=True, slots=True)
class Finding:
    """One observation; `diagnosis` says what happened and which setting fixes it."""

    rule: str
    severity: Severity
    path: str | None
    row_group: int | None
    column: str | None
    observed: str
    intended: str
    diagnosis: str

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class VerifyReport:
    findings: tuple[Finding, ...]
    files: int
    row_groups: int

    @property
    def ok(self) -> bool:
        """True when no finding is an error."""
        return not any(f.severity == "error" for f in self.findings)

    def by_severity(self, severity: Severity) -> list[Finding]:
        return [f for f in self.findings if f.severity == severity]

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "findings": [f.to_json() for f in self.findings]}


@dataclass(frozen=True, slots=True)
class Intent:
    """What the spec promises, flattened for the rules; the defaults check indexes only."""

    index_columns: Literal["all"] | tuple[str, ...] = "all"
    boundary_orders: Mapping[str, str] = field(default_factory=dict)
    first_key: SortKey | None = None
    sort_keys: tuple[SortKey, ...] = ()
    bloom_columns: tuple[str, ...] = ()
    min_row_group_size: int = 0
    max_row_group_size: int | None = None
    min_file_size: int = 0
    max_file_size: int | None = None
    truncate_length: int | None = None
    page_size: int | None = None
    page_row_limit: int | None = None
    max_sorted_runs: int | None = None  # a table's partition may hold this many overlapping runs
    curve: str | None = None  # zorder or hilbert: the keys' clustering is reported, no order asserted
    curve_keys: tuple[SortKey, ...] = ()
    # Whether a rule may read a column's values to explain a finding (why a column index is missing). The
    # planner's adoption check (`layout.compaction.planning.adoption`) reads footers and page indexes only.
    read_values: bool = True

    @classmethod
    def of(cls, spec: TableSpec | None, sort_keys: Sequence[SortKey] | None = None) -> Intent:
        if spec is None:
            return cls()

        keys = tuple(sort_keys if sort_keys is not None else spec.sort.keys)
        linear = not spec.sort.is_curve
        v, w = spec.verify, spec.writer
        return cls(
            index_columns=v.column_index_columns, boundary_orders=intended_boundary_orders(spec, keys),
            # z-order interleaves the keys: no single column orders row groups or files. Nor does a first
            # key of a transform, unless the column itself follows it (`order_column`: day(ts), ts).
            first_key=order_column(keys) if linear else None, sort_keys=keys if linear else (),
            bloom_columns=tuple(v.bloom_filter_columns or ()), min_row_group_size=v.min_row_group_size,
            max_row_group_size=v.max_row_group_size, min_file_size=v.min_file_size,
            max_file_size=v.max_file_size, truncate_length=w.column_index_truncate_length,
            max_sorted_runs=spec.max_sorted_runs,
            page_size=w.page_size, page_row_limit=w.page_row_count_limit,
            curve=None if linear else spec.sort.strategy, curve_keys=() if linear else keys,
        )
