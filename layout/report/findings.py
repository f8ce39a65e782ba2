"""Verification findings as people read them: grouped, counted, errors first.

A run records every finding of `layout.verify.rules` (one per file, row group or column where it
holds), so a rule that fires for each of 83 files records 83 findings that say the same. The report
groups them by severity, rule, column and diagnosis (the message): one line per group, with how many
findings and files it covers, what was observed and intended (the value, up to three different ones, or
how many with the first as an example), and up to `EXAMPLES` example places. Errors come first, then warnings,
then information; within a severity the larger groups first. An informational group that holds for every
file the run wrote (its files_added; for a run that added none, every file any finding names) reads
as one line for all of them, without examples.

Grouping is presentation only: the runs keep every finding as recorded (`compaction_runs.findings`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from layout.report.rows import Run

__all__ = ["EXAMPLES", "Finding", "FindingGroup", "Verification", "group_findings"]

EXAMPLES = 3  # example places a group shows
_VALUES = 3  # different observed (intended) values a group spells out before it only counts them
_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """One finding of `layout.verify.rules` as a run recorded it; a text field absent there is ""."""

    severity: str
    rule: str
    path: str
    row_group: int | str | None
    column: str
    observed: str
    intended: str
    diagnosis: str

    @classmethod
    def of(cls, item: dict[str, Any]) -> Finding:
        def text(key: str) -> str:
            value = item.get(key)
            return str(value) if value else ""

        group = item.get("row_group")
        return cls(text("severity"), text("rule"), text("path"),
                   group if group is None or isinstance(group, int) else str(group), text("column"),
                   text("observed"), text("intended"), text("diagnosis"))

    @property
    def where(self) -> str:
        """``path, row group 0, column k``, of what is known; "" when nothing is."""
        parts = (self.path, "" if self.row_group is None else f"row group {self.row_group}",
                 f"column {self.column}" if self.column else "")
        return ", ".join(part for part in parts if part)

    def sort_key(self) -> tuple[Any, ...]:
        """By severity (errors first), rule, path, row group, column and diagnosis."""
        group = self.row_group if isinstance(self.row_group, int) else -1
        return (_SEVERITY_ORDER.get(self.severity, 3), [self.rule, self.path], group,
                [self.column, self.diagnosis])


@dataclass(frozen=True, slots=True)
class FindingGroup:
    """Findings with the same severity, rule, column and diagnosis, in `Finding.sort_key` order."""

    severity: str
    rule: str
    column: str
    diagnosis: str
    findings: tuple[Finding, ...]
    every_file: int | None = None  # informational, on each of this many files the run wrote: one line for all

    @property
    def count(self) -> int:
        return len(self.findings)

    @property
    def files(self) -> int:
        """Distinct files the group's findings name."""
        return len({f.path for f in self.findings if f.path})

    @property
    def examples(self) -> tuple[str, ...]:
        """Up to EXAMPLES distinct places (file, row group, column), in order."""
        seen: list[str] = []
        for f in self.findings:
            if f.where and f.where not in seen:
                seen.append(f.where)
            if len(seen) == EXAMPLES:
                break
        return tuple(seen)

    @property
    def more_places(self) -> int:
        """Places not among the examples."""
        return max(len({f.where for f in self.findings if f.where}) - len(self.examples), 0)

    @property
    def observed(self) -> str:
        return _values([f.observed for f in self.findings])

    @property
    def intended(self) -> str:
        return _values([f.intended for f in self.findings])

    def sort_key(self) -> tuple[Any, ...]:
        """Errors first, then the larger groups, then by rule, column and diagnosis."""
        return _SEVERITY_ORDER.get(self.severity, 3), -self.count, self.rule, self.column, self.diagnosis


def _values(values: list[str]) -> str:
    """The one value, the few different ones, or how many with the first as an example (in order)."""
    distinct = list(dict.fromkeys(v for v in values if v))
    if len(distinct) <= 1:
        return distinct[0] if distinct else ""
    if len(distinct) <= _VALUES:
        return "; ".join(distinct)
    return f"{len(distinct)} different values, e.g. {distinct[0]}"


def group_findings(findings: tuple[Finding, ...], files_written: int) -> tuple[FindingGroup, ...]:
    """The findings grouped (module docstring); `files_written`: the files the run wrote, which an
    informational group must cover, each, to read as one line for all of them."""
    groups: dict[tuple[str, str, str, str], list[Finding]] = {}
    for f in sorted(findings, key=Finding.sort_key):
        groups.setdefault((f.severity, f.rule, f.column, f.diagnosis), []).append(f)
    out = []
    for (severity, rule, column, diagnosis), members in groups.items():
        group = FindingGroup(severity, rule, column, diagnosis, tuple(members))
        if severity == "info" and files_written > 1 and group.files == files_written:
            group = FindingGroup(severity, rule, column, diagnosis, tuple(members), every_file=files_written)
        out.append(group)
    return tuple(sorted(out, key=FindingGroup.sort_key))


@dataclass(frozen=True, slots=True)
class Verification:
    """A run that verified the files it wrote, with its findings sorted by `Finding.sort_key`."""

    run: Run
    findings: tuple[Finding, ...]
    unreadable: str | None  # the recorded findings when they are not a JSON list of objects

    @classmethod
    def of(cls, run: Run) -> Verification:
        text = run.findings
        if not text or not text.strip():
            return cls(run, (), None)
        try:
            data = json.loads(text)
        except ValueError:
            return cls(run, (), text)
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            return cls(run, (), text)
        return cls(run, tuple(sorted(map(Finding.of, data), key=Finding.sort_key)), None)

    @property
    def groups(self) -> tuple[FindingGroup, ...]:
        """The findings grouped; the files the run wrote are its files_added, else every file named."""
        written = self.run.files_added or len({f.path for f in self.findings if f.path})
        return group_findings(self.findings, written)

    @property
    def counts(self) -> dict[str, int]:
        """Findings per severity, errors first."""
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.severity] = out.get(f.severity, 0) + 1
        return dict(sorted(out.items(), key=lambda item: _SEVERITY_ORDER.get(item[0], 3)))
