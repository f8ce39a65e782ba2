"""What a report shows, per table: its probes (before vs after, history, latest measurement), its runs,
its latest verification (`layout.report.findings`) and its clustering health
(`layout.report.health`), as frozen values made from the rows of `layout.report.rows`.

    views = table_views(measurements, runs, specs)   # one TableView per table, sorted by name

A probe's before vs after comes from the latest run with both phases for it; its history is the first
`before` measurement, then every `after` and `on-demand` one by measured_at, of the predicate the page shows
for it (`ProbeView.shown_predicate`: the pair's, else the latest measurement's). Every figure is shown with
the predicate it was measured with: an owner may have changed a probe's `where` since, and standard probes
drawn before they were kept per table (`layout.metrics.probes`) may differ between measurements; history
of another predicate is counted (`ProbeView.other_predicates`), never drawn on the same line.
Files and average file size are files_before/bytes_before of the first run, then files_after/bytes_after of
each committed run; the last run is the newest that was not a dry run.
A probe's delete files (a merge-on-read table: the delete files a reader merges for the files it reads)
are shown only where a pair read any, and the snapshot's only when the newest measurement found some.
Storage is what each maintenance run found under the table location when it started (and, a real run,
left when it ended) next to the live data, the bytes the current snapshot reads. A table's trend (the
index's sparkline) is `layout.metrics.trend`'s.

Values only, no HTML: the templates (`templates/`) lay them out and `layout.report.figures` draws them.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from layout.advise import Advice
from layout.metrics.trend import TrendPoint, efficiency_trend
from layout.report.findings import Verification
from layout.report.health import KeyHealth, key_health
from layout.report.rows import ClusteringRow, MaintenanceRun, Measurement, Run

if TYPE_CHECKING:
    from layout.spec import TableSpec

__all__ = ["LAST_RUNS", "FilePoint", "Pair", "ProbeView", "StoragePoint", "TableView", "table_views"]

LAST_RUNS = 20  # runs a table page lists; earlier failed verifications are shown among these only
_VERIFIED = ("passed", "failed")  # a nothing-to-do or dry run verifies nothing


# --- per probe and per table ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProbeView:
    """A probe of a table: from its table spec (kind "owner") or, if not there, from its measurements."""

    name: str
    kind: str
    predicate: str | None
    columns: str | None  # "k, v"; None: all columns
    before: Measurement | None = None  # the latest run with both phases for the probe: its before
    after: Measurement | None = None  # and its after (both set or neither)
    # the first before, then every after and on-demand, by time: of `shown_predicate` only
    history: tuple[Measurement, ...] = ()
    latest: Measurement | None = None  # the newest measurement of any phase
    all: tuple[Measurement, ...] = ()  # every measurement, by time
    other_predicates: int = 0  # measurements left out of `history`: of another predicate

    @property
    def shown_predicate(self) -> str | None:
        """The predicate the probes table shows: its before/after pair's, else its latest measurement's,
        else (never measured) the spec's."""
        measured = self.after or self.latest
        return measured.predicate if measured is not None else self.predicate

    @property
    def spec_predicate_differs(self) -> bool:
        """The spec's predicate (an owner's probe) is not the one its shown figures were measured with: the
        owner changed it since; the next measurement measures the new one."""
        return self.kind == "owner" and self.predicate is not None and self.predicate != self.shown_predicate

    @property
    def latest_predicate_differs(self) -> bool:
        """The latest measurement is of another predicate than `shown_predicate` (its row says which)."""
        return self.latest is not None and self.latest.predicate != self.shown_predicate

    @property
    def change(self) -> float | None:
        """Relative change of bytes read, before to after (negative = fewer); None: nothing to compare."""
        if self.before is None or self.after is None or self.before.bytes_selected <= 0:
            return None
        return (self.after.bytes_selected - self.before.bytes_selected) / self.before.bytes_selected

    @property
    def pair(self) -> tuple[Measurement, Measurement]:
        """(before, after) of a probe of `TableView.paired`."""
        assert self.before is not None and self.after is not None  # both set or neither
        return self.before, self.after

    @property
    def reads_deletes(self) -> bool:
        """Its pair read delete files before or after (a merge-on-read table); rows from before the delete
        columns existed read none."""
        return any(m is not None and (m.delete_files_selected or 0) > 0 for m in (self.before, self.after))

    @property
    def engine_rows(self) -> tuple[Measurement, ...]:
        """The measurements whose DataFusion check the page lists: the pair's before and after, else the
        latest."""
        pair = tuple(m for m in (self.before, self.after) if m is not None)
        return pair or ((self.latest,) if self.latest is not None else ())

    @property
    def flagged(self) -> bool:
        """DataFusion read more than 20% more or less than lakesort's model says, in one of `engine_rows`."""
        return any(m.engine_differs for m in self.engine_rows)


@dataclass(frozen=True, slots=True)
class Pair:
    """The newest run that measured probes of a table before and after, and the probes it measured."""

    run_id: str
    measured_at: datetime
    probes: tuple[ProbeView, ...]

    @property
    def best(self) -> ProbeView | None:
        """The probe whose bytes read fell most (or rose least), the owners' own probes first (they are the
        queries the owners run); None when none can be compared."""
        comparable = [p for p in self.probes if p.change is not None]
        owners = [p for p in comparable if p.kind == "owner"]
        return min(owners or comparable, key=lambda p: (p.change, p.name), default=None)

    @property
    def changes(self) -> Counter[str]:
        """How many probes read "fewer", "more" or the "same" bytes after than before."""
        return Counter("fewer" if change < 0 else "more" if change > 0 else "same"
                       for p in self.probes if (change := p.change) is not None)


@dataclass(frozen=True, slots=True)
class FilePoint:
    """Data files and their bytes at a moment."""

    moment: datetime
    files: int
    bytes: int

    @property
    def average(self) -> int | None:
        return self.bytes // self.files if self.files else None


@dataclass(frozen=True, slots=True)
class StoragePoint:
    """Bytes under the table location and live bytes (what the current snapshot reads) at a moment."""

    moment: datetime
    total: int
    live: int


@dataclass(frozen=True, slots=True)
class TableView:
    """Everything a table's page shows."""

    table: str
    spec: TableSpec | None
    probes: tuple[ProbeView, ...]  # the spec's in its order, then the others (owner kind first, by name)
    runs: tuple[Run, ...]  # by started_at, oldest first
    maintenance: tuple[MaintenanceRun, ...] = ()  # by started_at, oldest first
    clustering: tuple[ClusteringRow, ...] = ()  # lakesort.clustering_metrics rows of the table
    # "What would help": the last `lakesort advise` of the table (None: never advised; the page says how).
    advice: Advice | None = None

    @property
    def health(self) -> tuple[KeyHealth, ...]:
        """Clustering health per sort key over time, the spec's keys first in its order."""
        keys = [k.column for k in self.spec.sort.keys] if self.spec is not None else []
        return key_health(self.clustering, keys)

    @property
    def flagged(self) -> tuple[ProbeView, ...]:
        """Probes where DataFusion and lakesort's model differ by more than 20%."""
        return tuple(p for p in self.probes if p.flagged)

    @property
    def reads_deletes(self) -> bool:
        """Any probe's before/after pair read delete files: the probes table then shows them."""
        return any(p.reads_deletes for p in self.probes)

    @property
    def live_deletes(self) -> Measurement | None:
        """The newest measurement of any probe, when its snapshot has delete files a reader must merge
        (`delete_files_total`); None when it has none, or predates the delete columns."""
        latest = [p.latest for p in self.probes if p.latest is not None]
        newest = max(latest, key=lambda m: (m.measured_at, m.run_id, m.phase), default=None)
        return newest if newest is not None and (newest.delete_files_total or 0) > 0 else None

    @property
    def engine_checked(self) -> bool:
        """Any probe's measurement carries an engine check (rows from before it existed have none)."""
        return any(m.engine_status is not None for p in self.probes for m in p.engine_rows)

    @property
    def trend(self) -> tuple[TrendPoint, ...]:
        """The headline efficiency at each measurement (`layout.metrics.trend`)."""
        return efficiency_trend(m for p in self.probes for m in p.all)

    @property
    def storage_points(self) -> tuple[StoragePoint, ...]:
        """Each maintenance run's start (what had accumulated),
        and the end of each real one (what it left)."""
        points = []
        for run in self.maintenance:
            if run.status == "failed":
                continue
            points.append(StoragePoint(run.started_at, run.bytes_before, run.live_bytes))
            if run.status == "done":
                points.append(StoragePoint(run.ended_at, run.bytes_after, run.live_bytes))
        return tuple(points)

    @property
    def recent_maintenance(self) -> tuple[MaintenanceRun, ...]:
        """The last LAST_RUNS maintenance runs, newest first."""
        return self.maintenance[::-1][:LAST_RUNS]

    @property
    def last_run(self) -> Run | None:
        """The newest run that was not a dry run: a dry run changes nothing (`lakesort compact --dry-run`),
        so it never stands for the table's state; the runs table lists it."""
        return next((r for r in reversed(self.runs) if r.status != "dry-run"), None)

    @property
    def last_rewrite(self) -> Run | None:
        """The newest run that rewrote, or tried to (committed or failed): what last ran,
        beside a deferral."""
        return next((r for r in reversed(self.runs) if r.status in ("committed", "failed")), None)

    @property
    def deferred(self) -> Run | None:
        """The last run, when the nightly's budget deferred it (its `reason` says why)."""
        last = self.last_run
        return last if last is not None and last.status == "deferred" else None

    @property
    def measured(self) -> bool:
        return any(p.latest is not None for p in self.probes)

    @property
    def probes_measured(self) -> int:
        return sum(1 for p in self.probes if p.latest is not None)

    @property
    def paired(self) -> tuple[ProbeView, ...]:
        """The probes with a before and an after."""
        return tuple(p for p in self.probes if p.after is not None)

    @property
    def with_history(self) -> tuple[ProbeView, ...]:
        return tuple(p for p in self.probes if p.history)

    @property
    def last_pair(self) -> Pair | None:
        paired = self.paired
        if not paired:
            return None
        newest = max(paired, key=lambda p: (p.pair[1].measured_at, p.pair[1].run_id)).pair[1]
        return Pair(newest.run_id, newest.measured_at,
                    tuple(p for p in paired if p.pair[1].run_id == newest.run_id))

    @property
    def file_points(self) -> tuple[FilePoint, ...]:
        """Before the first run, then after each committed run."""
        if not self.runs:
            return ()
        first = self.runs[0]
        points = [FilePoint(first.started_at, first.files_before, first.bytes_before)]
        for run in self.runs:
            if run.status == "committed":
                points.append(FilePoint(run.ended_at, run.files_after, run.bytes_after))
        return tuple(points)

    @property
    def current_files(self) -> FilePoint | None:
        """The files as the last run left the table."""
        run = self.last_run
        if run is None:
            return None
        if run.status == "committed":
            return FilePoint(run.ended_at, run.files_after, run.bytes_after)
        return FilePoint(run.started_at, run.files_before, run.bytes_before)

    @property
    def latest_verification(self) -> Verification | None:
        """The latest run that verified anything (a nothing-to-do run verifies nothing, so it does not
        hide the state of the files a previous run wrote)."""
        verified = [run for run in self.runs if run.verification in _VERIFIED]
        return Verification.of(verified[-1]) if verified else None

    @property
    def earlier_failures(self) -> tuple[Verification, ...]:
        """The failed verifications before the latest, newest first, of the runs the page lists."""
        verified = [run for run in self.runs if run.verification in _VERIFIED]
        shown = {run.run_id for run in self.runs[-LAST_RUNS:]}
        return tuple(Verification.of(run) for run in reversed(verified[:-1])
                     if run.verification == "failed" and run.run_id in shown)

    @property
    def recent_runs(self) -> tuple[Run, ...]:
        """The last LAST_RUNS runs, newest first."""
        return self.runs[::-1][:LAST_RUNS]

    @property
    def older_runs(self) -> int:
        """Runs not listed."""
        return max(len(self.runs) - LAST_RUNS, 0)


def _probe_views(spec: TableSpec | None, rows: Sequence[Measurement]) -> tuple[ProbeView, ...]:
    from_spec = {probe.name: ProbeView(probe.name, "owner", probe.where,
                                       ", ".join(probe.columns) if probe.columns else None)
                 for probe in (spec.probes if spec is not None else ())}
    by_probe: defaultdict[str, list[Measurement]] = defaultdict(list)
    for row in rows:
        by_probe[row.probe].append(row)
    views, extra = dict(from_spec), []
    for name, measured in by_probe.items():
        measured.sort(key=lambda r: (r.measured_at, r.run_id, r.phase))
        latest = measured[-1]
        view = from_spec.get(name)
        if view is None:
            columns = ", ".join(c.strip() for c in latest.columns.split(",") if c.strip()) or None
            view = ProbeView(name, latest.probe_kind, latest.predicate, columns)
        phases: defaultdict[str, dict[str, Measurement]] = defaultdict(dict)
        for row in measured:
            phases[row.run_id][row.phase] = row
        pairs = [(ph["after"], ph["before"]) for ph in phases.values() if "before" in ph and "after" in ph
                 and ph["before"].predicate == ph["after"].predicate]
        after, before = (max(pairs, key=lambda pair: (pair[0].measured_at, pair[0].run_id)) if pairs
                         else (None, None))
        # One line per predicate: the one shown (the pair's, else the latest's) is the one charted.
        shown = (after or latest).predicate
        befores = [r for r in measured if r.phase == "before" and r.predicate == shown]
        history = (*befores[:1], *(r for r in measured
                                   if r.phase in ("after", "on-demand") and r.predicate == shown))
        others = sum(1 for r in measured if r.phase in ("after", "on-demand") and r.predicate != shown)
        view = dataclasses.replace(view, before=before, after=after, history=history, latest=latest,
                                   all=tuple(measured), other_predicates=others)
        if name in from_spec:
            views[name] = view
        else:
            extra.append(view)
    extra.sort(key=lambda v: (v.kind != "owner", v.name))
    return (*views.values(), *extra)


def table_views(measurements: Iterable[Measurement], runs: Iterable[Run], specs: Sequence[TableSpec] = (),
                maintenance: Iterable[MaintenanceRun] = (), clustering: Iterable[ClusteringRow] = ()
                ) -> list[TableView]:
    """One view per table of the specs, the measurements, the runs, the maintenance runs and the
    clustering rows, sorted by table name."""
    by_spec = {spec.table: spec for spec in specs}
    measured: defaultdict[str, list[Measurement]] = defaultdict(list)
    for row in measurements:
        measured[row.table].append(row)
    ran: defaultdict[str, list[Run]] = defaultdict(list)
    for run in sorted(runs, key=lambda r: (r.started_at, r.run_id)):
        ran[run.table].append(run)
    maintained: defaultdict[str, list[MaintenanceRun]] = defaultdict(list)
    for done in sorted(maintenance, key=lambda r: (r.started_at, r.run_id)):
        maintained[done.table].append(done)
    clustered: defaultdict[str, list[ClusteringRow]] = defaultdict(list)
    for record in clustering:
        clustered[record.table].append(record)
    names = sorted(set(by_spec) | set(measured) | set(ran) | set(maintained) | set(clustered))
    return [TableView(name, by_spec.get(name), _probe_views(by_spec.get(name), measured.get(name, ())),
                      tuple(ran.get(name, ())), tuple(maintained.get(name, ())),
                      tuple(sorted(clustered.get(name, ()), key=lambda r: (r.measured_at, r.run_id, r.phase,
                                                                           r.sort_key, r.partition_path))))
            for name in names]
