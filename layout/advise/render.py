"""The text `lakesort advise` prints: the ranked layouts, the recommendation per probe, the spec snippet."""

from __future__ import annotations

from collections.abc import Sequence

from layout.advise.result import Advice, CandidateAdvice
from layout.sizes import format_size

__all__ = ["render_advice"]


def _change(value: float | None) -> str:
    """A ratio to the current layout as a change: 0.25 -> -75%, 1.5 -> +50%."""
    if value is None:
        return "-"
    change = value - 1
    return "same" if abs(change) < 0.005 else f"{100 * change:+.0f}%"


def _table(rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  "
        + "  ".join(
            v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]


def _nightly(c: CandidateAdvice) -> str:
    if c.incremental is None:
        return "-"
    return "sorted runs" if c.incremental else "rewrites partitions"


def render_advice(advice: Advice) -> list[str]:
    """The advice as lines of text."""
    weighted = any(p.weight != 1 for p in advice.probes)
    lines = [(f"{advice.table}: {len(advice.candidates)} layouts compared on a sample of "
             f"{advice.sample_rows:,} of {advice.table_rows:,} rows (seed {advice.seed}) in "
             f"{advice.seconds:.1f}s; bytes the probes would read{' (weighted)' if weighted else ''}:")]
    rows = [("rank", "layout", "bytes read", "vs current", "write (full rewrite)", "nightly")]
    for c in advice.candidates:
        rows.append((str(c.rank), c.label, format_size(c.total_bytes), _change(c.vs_current),
                     format_size(c.write_bytes), _nightly(c)))
    lines += _table(rows, right={0, 2, 3, 4})
    chosen, current = advice.recommendation, advice.current
    if chosen is None:
        lines.append("no candidate layout: the probes filter on no column a sort can use")
        return lines
    lines.append("")
    lines.append(f"recommendation ({chosen.action}): {chosen.label}")
    lines.append(f"  {chosen.reason}")
    if chosen.write_change is not None:
        lines.append(f"  a full rewrite writes {format_size(chosen.write_bytes)} "
                     f"({_change(chosen.write_change + 1)} against the table's bytes now)")
    picked = next((c for c in advice.candidates if c.label == chosen.label), None)
    if picked is not None and current is not None and picked is not current:
        lines.append("  per probe, against the current layout:")
        probe_rows = [("probe", "weight", "current", "predicted", "change")]
        for p in advice.probes:
            now, then = current.predicted_bytes.get(p.name, 0), picked.predicted_bytes.get(p.name, 0)
            probe_rows.append((p.name, f"{p.weight:g}", format_size(now), format_size(then),
                               _change(then / now) if now else "-"))
        lines += ["  " + line for line in _table(probe_rows, right={1, 2, 3, 4})]
    if chosen.spec_snippet:
        lines.append("  table spec:")
        lines += ["    " + line for line in chosen.spec_snippet.splitlines()]
    return lines
