"""The report's charts and their text (layout.report.charts, axes, formats, svg): sizes, durations and
percentages formatted, nice ticks, time-axis labels that never overlap, and no two texts of a line or bar
chart overlapping or leaving the chart, for any data (the browser checks the same with its own font:
test_report_render.py).
"""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

from hypothesis import example, given, settings
from hypothesis import strategies as st
from report_rows import T0, MiB

from layout.report.axes import GAP, _box, time_ticks
from layout.report.charts import Series, bar_chart, line_chart, nice_ticks
from layout.report.formats import format_duration, format_percent
from layout.report.svg import text_width
from layout.sizes import byte_unit, format_size


def test_formats():
    assert [format_size(n) for n in (0, 1023, 1024, 1536, 12 * MiB + MiB // 3, 300 * MiB, 5 << 40)] == [
        "0 B", "1023 B", "1.00 KiB", "1.50 KiB", "12.3 MiB", "300 MiB", "5.00 TiB"]
    assert format_size(None) == format_size(float("nan")) == "\u2013"
    assert [format_duration(s) for s in (0.84, 42.4, 725, 7384)] == [
        "0.8 s", "42 s", "12 min 05 s", "2 h 03 min"]
    assert [format_percent(f) for f in (0.875, 0.045, 1.0)] == ["88%", "4.5%", "100%"]
    assert byte_unit(3 * MiB) == MiB and byte_unit(100) == 1
    assert nice_ticks(37) == [0, 10, 20, 30, 40]
    assert nice_ticks(3 * MiB, unit=MiB) == [0, MiB, 2 * MiB, 3 * MiB]


def test_time_axis_labels_never_overlap_and_stay_on_the_axis():
    """Any span and number of points, any room: the labels fit side by side, GAP apart, inside the axis."""
    for room in (60, 120, 200, 340, 900):
        for span in (0, 60, 3600, 86_400, 2 * 86_400, 400 * 86_400):
            labels = time_ticks(1_700_000_000, 1_700_000_000 + span, room)
            assert labels, (room, span)
            boxes = [_box(label) for label in labels]
            assert all(b[0] - a[1] >= GAP for a, b in itertools.pairwise(boxes)), (room, span, labels)
            assert len(labels) == 1 or (boxes[0][0] >= 0 and boxes[-1][1] <= room + 1e-9), (room, span,
                                                                                             labels)
    assert len(time_ticks(0, 86_400 * 365, 900)) > len(time_ticks(0, 86_400 * 365, 200)) >= 2


def test_a_line_of_many_points_keeps_its_labels_apart():
    """300 points over a year in a small multiple: a few labels, none overlapping, one dot (the last)."""
    points = [(T0.timestamp() + i * 86_400 * 1.2, float(i % 17)) for i in range(300)]
    svg = ET.fromstring(str(line_chart([Series("a series with a long name", points), Series("b", points[:3])],
                                       title="t", y_format=lambda v: f"{v:g}")))
    labels = [(float(e.get("x")), e.text, e.get("text-anchor") or "start") for e in svg.iter("text")
              if e.get("fill") == "#555555"]
    assert 2 <= len(labels) <= 12
    assert len(list(svg.iter("circle"))) == 1 + 3


def _text_boxes(svg: ET.Element) -> list[tuple[tuple[float, float, float, float], str]]:
    """Each text's box as laid out with the widths the charts use (DejaVu Sans' advances) and its 11 px
    line (ascent 0.93 em above the baseline, descent 0.24 em below)."""
    boxes = []
    for e in svg.iter("text"):
        label = "".join(e.itertext()) if e.find("title") is None else (e.find("title").tail or "")
        x, y, w = float(e.get("x")), float(e.get("y")), text_width(label)
        left = {"start": x, "middle": x - w / 2, "end": x - w}[e.get("text-anchor") or "start"]
        boxes.append(((left, y - 10.2, left + w, y + 2.6), label))
    return boxes


@settings(max_examples=60, deadline=None)
# A long category label in the narrowest chart once pushed a bar's value label past the right edge.
@example(n=2, days=0.0, width=200, height=120, top=3.0, names=["_" * 22])
@given(n=st.integers(1, 400), days=st.floats(0, 800), width=st.integers(200, 700),
       height=st.integers(120, 300), top=st.floats(0, 1e13),
       names=st.lists(st.text("abcdefghij_ ", min_size=1, max_size=40), min_size=1, max_size=4))
def test_no_two_chart_texts_overlap_for_any_data(n, days, width, height, top, names):
    """Line and bar charts of any size, span, number of points and series: no two texts' boxes overlap and
    every text lies within the chart (the browser checks the same with its own font, test_report_render)."""
    start = T0.timestamp()
    series = [Series(name, [(start + days * 86_400 * i / max(n - 1, 1), top * ((i * 7 + k) % 11) / 10)
                            for i in range(n)]) for k, name in enumerate(names)]
    charts = [line_chart(series, title="t", y_format=format_size, width=width, height=height),
              bar_chart([f"{name} {i}" for i in range(min(n, 20)) for name in names[:1]],
                        [(name, [top * ((i * 3 + k) % 5) / 4 for i in range(min(n, 20))]) for k, name in
                         enumerate(names)], title="t", y_format=format_size, width=width)]
    for chart in charts:
        svg = ET.fromstring(str(chart))
        boxes = _text_boxes(svg)
        for (a, text_a), (b, text_b) in itertools.combinations(boxes, 2):
            assert min(a[2], b[2]) <= max(a[0], b[0]) or min(a[3], b[3]) <= max(a[1], b[1]), (text_a, text_b)
        w, h = float(svg.get("width")), float(svg.get("height"))
        assert all(b[0] >= -0.5 and b[2] <= w + 0.5 and b[1] >= -0.5 and b[3] <= h + 0.5 for b, _ in boxes)
