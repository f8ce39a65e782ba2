"""The HTML report as a browser shows it: headless Chromium (Debian's chromium + chromium-driver) loads
every page from file://, logs no errors, fetches nothing, lays the SVG charts out with a size, and
paints a screenshot that is not blank (decoded here with zlib and numpy: no imaging library).

At two widths, 1300 and 400 CSS pixels (set through the DevTools protocol: headless Chromium's window is
at least 500 px wide), nothing overflows the page horizontally: the document is no wider than the
window, and no element's box reaches beyond it, except inside a box that scrolls or clips its own
content (the tables' `overflow-x: auto` wrappers, the charts' SVG); and no table hides a column: every
table's box is as wide as its content (its scroll width is its client width), at 1300 px as a table and
at 400 px as cards of labelled cells, each label its column's header. Inside every chart, no two texts
overlap and every text stays within the chart. Full-page screenshots of every page at both widths are
kept as artifacts under the test's tmp_path (`screenshots/`)."""

from __future__ import annotations

import itertools
import os
import shutil
import struct
import zlib
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from report_rows import T0, MiB, clustered, metric, render, run, spec

from layout.report.charts import PALETTE
from layout.report.render import table_page_name

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
WINDOW = (1000, 750)  # small enough to decode the screenshots quickly
WIDTHS = (1300, 400)  # a laptop and a phone, in CSS pixels
OVERLAP = 0.5  # pixels two text boxes may share (anti-aliasing, rounding) before they count as overlapping

# Elements whose box reaches beyond the window, outside any box that scrolls or clips its content.
_OVERFLOWING = """
const width = window.innerWidth, out = [];
const clips = el => { for (let p = el.parentElement; p; p = p.parentElement) {
  if (['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(p).overflowX)) return true; } return false; };
for (const el of document.body.querySelectorAll('*')) {
  const r = el.getBoundingClientRect();
  if ((r.width || r.height) && (r.left < -0.5 || r.right > width + 0.5) && !clips(el))
    out.push(`${el.tagName.toLowerCase()}.${el.getAttribute('class') || ''} ${r.left.toFixed(1)}..${r.right.toFixed(1)}`);
}
return [document.documentElement.scrollWidth, width, out];
"""  # noqa: E501 - JavaScript, run as written
# Tables whose box scrolls: a column (part of one) is out of sight. Per table, its class and the widths.
_HIDDEN_COLUMNS = """
return [...document.querySelectorAll('div.scroll')].filter(box => box.scrollWidth > box.clientWidth + 0.5)
  .map(box => [box.querySelector('table').getAttribute('class'), box.scrollWidth, box.clientWidth]);
"""
# The label a narrow screen shows before each cell of a table's first row, and the cell's text.
_LABELS = """
const row = document.querySelector(`table.${arguments[0]} tbody tr`);
return [...row.querySelectorAll('td')].map(td => [getComputedStyle(td, '::before').content, td.textContent]);
"""
# Per chart: its box and the box and text of each of its texts.
_CHART_TEXTS = """
return [...document.querySelectorAll('svg.chart')].map(svg => {
  const box = r => [r.left, r.top, r.right, r.bottom];
  return [svg.querySelector('title').textContent, box(svg.getBoundingClientRect()),
          [...svg.querySelectorAll('text')].map(t => [box(t.getBoundingClientRect()), t.textContent])];
});
"""

# Chromium is an optional system package: a developer's machine without it skips these tests. CI (env CI set)
# installs it in .ci/run, which fails when it cannot, so under CI its absence fails the tests instead.
_MISSING = ("chromium/chromedriver not installed: apt-get install chromium "
            "chromium-driver (.ci/run does in CI)")
pytestmark = pytest.mark.skipif(
    (CHROMIUM is None or CHROMEDRIVER is None) and not os.environ.get("CI"), reason=_MISSING)


def decode_png(data: bytes) -> np.ndarray:
    """Pixels (height, width, channels) of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes).

    Unfiltering runs along anti-diagonals: a pixel needs only its left, upper and upper-left neighbours,
    which all lie on earlier diagonals, so each diagonal is one vectorized step for every filter type."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unsupported PNG {header}"
    bpp = 3 if color == 2 else 4
    rows = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(height, 1 + width * bpp)
    kinds, filtered = rows[:, 0], rows[:, 1:].reshape(height, width, bpp).astype(np.int16)
    out = np.zeros((height + 1, width + 1, bpp), np.int16)  # a zero row above and column to the left
    ys = np.arange(height)
    for d in range(height + width - 1):
        y = ys[max(0, d - width + 1):min(height, d + 1)]
        x = d - y
        a, b, c = out[y + 1, x], out[y, x + 1], out[y, x]  # left, up, up-left
        k = kinds[y][:, None]
        p = a + b - c
        pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
        paeth = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
        predicted = np.select([k == 0, k == 1, k == 2, k == 3], [0, a, b, (a + b) >> 1], paeth)
        out[y + 1, x + 1] = (filtered[y, x] + predicted) & 255
    return out[1:, 1:].astype(np.uint8)


def colors(png: bytes) -> tuple[int, float, set[tuple[int, int, int]]]:
    """Distinct colors, the share of the most common one, and the set of RGB colors."""
    pixels = decode_png(png)[:, :, :3].reshape(-1, 3).astype(np.uint32)
    packed = pixels[:, 0] << 16 | pixels[:, 1] << 8 | pixels[:, 2]
    unique, counts = np.unique(packed, return_counts=True)
    return len(unique), counts.max() / counts.sum(), {(int(c) >> 16, int(c) >> 8 & 255, int(c) & 255)
                                                      for c in unique}


def rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))


@pytest.fixture(scope="module")
def browser():
    # Imported here: a machine without Chromium skips these tests and need not import selenium.
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    # under CI: the skip above does not apply
    assert CHROMIUM is not None and CHROMEDRIVER is not None, _MISSING
    options = webdriver.ChromeOptions()
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                f"--window-size={WINDOW[0]},{WINDOW[1]}", "--force-device-scale-factor=1",
                "--hide-scrollbars"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    except WebDriverException as error:
        pytest.fail(f"chromium and chromedriver are installed but do not start: {error.msg}")
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def report(tmp_path) -> Path:
    """A report with a measured table (three probes, one with a long name, measured over 40 nights, DataFusion
    confirming two and differing on one; clustering health of two keys; a failed verification whose
    findings hold long paths) and an empty one."""
    t = "sales.orders"
    metrics, clustering = [], []
    probes = (("p1", 1), ("p2", 2), ("a_probe_with_a_rather_long_name_for_its_own_good", 3))
    for day in range(40):
        at = T0 + timedelta(days=day)
        for probe, scale in probes:
            before, after = (30 - day % 5) * scale * MiB, (12 - day % 7) * scale * MiB
            check = {"engine_status": "checked", "engine_files": 4, "engine_rows": 1000,
                     "engine_model_rows": 1000, "engine_rows_matching": 17, "engine_ms": 25.0}
            metrics.append(metric(t, probe, "before", f"n{day}", at, before, engine_bytes=before,
                                  engine_model_bytes=before, **check))
            metrics.append(metric(t, probe, "after", f"n{day}", at + timedelta(minutes=20), after, ideal=MiB,
                                  engine_bytes=after * (2 if scale == 2 else 1),
                                  engine_model_bytes=after, **check))
        for key in ("k", "a_sort_key_with_a_long_name"):
            for month in range(1, 13):
                clustering.append(clustered(t, key, f"month={month:02d}", f"n{day}", "before", at,
                                            [1 + day % 4] * (1 + day % 4)))
                clustering.append(clustered(t, key, f"month={month:02d}", f"n{day}", "after",
                                            at + timedelta(minutes=20), [1, 2, 2] if month == 3 else [1]))
    long_path = ("s3://warehouse/" + "/".join(["deeply_nested_directory"] * 8)
                 + "/part-00000-0123456789abcdef.parquet")
    findings = [{"rule": "column-index", "severity": "error", "path": long_path, "row_group": 0,
                 "column": "c", "observed": "absent", "intended": "present", "diagnosis": "set truncation"}]
    findings += [{"rule": "pages", "severity": "info", "path": f"{long_path}.{i}", "observed": f"{i} pages",
                  "diagnosis": "for the record"} for i in range(12)]
    runs = [run(t, f"n{day}", T0 + timedelta(days=day), files_before=100 - day, files_after=10 + day % 3,
                files_added=12) for day in range(39)]
    runs.append(run(t, "n39", T0 + timedelta(days=39), status="failed", verification="failed", files_added=12,
                    findings=findings, error="verification failed"))
    specs = [spec(t, [{"name": name, "where": "k = 1"} for name, _ in probes]), spec("sales.never_measured")]
    return render(tmp_path, metrics, runs, specs, clustering=clustering)


def _load(driver, path: Path, width: int = WINDOW[0], height: int = WINDOW[1]) -> None:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    driver.get(path.resolve().as_uri())
    assert driver.execute_script("return document.readyState") == "complete"


def _overlapping(texts: list) -> list[tuple[str, str]]:
    """Pairs of texts whose boxes share more than OVERLAP pixels each way."""
    pairs = []
    for (a, text_a), (b, text_b) in itertools.combinations(texts, 2):
        if min(a[2], b[2]) - max(a[0], b[0]) > OVERLAP and min(a[3], b[3]) - max(a[1], b[1]) > OVERLAP:
            pairs.append((text_a, text_b))
    return pairs


def test_report_renders_in_chromium(browser, report, tmp_path):
    from selenium.webdriver.common.by import By  # here, like the fixture's imports

    pages = [report, report.parent / "tables" / table_page_name("sales.orders"),
             report.parent / "tables" / table_page_name("sales.never_measured")]
    shots = tmp_path / "screenshots"
    shots.mkdir()
    for number, path in enumerate(pages):
        browser.get_log("browser")  # drop what earlier pages logged
        _load(browser, path)
        severe = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert severe == [], f"{path.name}: browser errors {severe}"
        fetched = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert all(url.startswith(("file:", "data:")) for url in fetched), fetched
        assert "lakesort" in browser.title
        charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
        html = path.read_text(encoding="utf-8")
        assert len(charts) == html.count("<svg ") - html.count('<svg class="spark"')
        for chart in charts:
            box = browser.execute_script("const r = arguments[0].getBoundingClientRect(); "
                                         "return [r.width, r.height];", chart)
            assert chart.size["width"] > 100 and chart.size["height"] > 50 and min(box) > 50, (path.name, box)
        shot = tmp_path / f"page{number}.png"
        assert browser.save_screenshot(str(shot))
        count, dominant, _ = colors(shot.read_bytes())
        assert count > 20 and dominant < 0.97, (
            f"{shot.name} looks blank: {count} colors, {dominant:.0%} alike")
        for width in WIDTHS:
            _load(browser, path, width)
            scroll_width, inner, overflowing = browser.execute_script(_OVERFLOWING)
            assert inner == width and scroll_width <= width, (
                f"{path.name} at {width} px: {scroll_width} px wide")
            assert overflowing == [], f"{path.name} at {width} px: beyond the page: {overflowing[:10]}"
            hidden = browser.execute_script(_HIDDEN_COLUMNS)
            assert hidden == [], (
                f"{path.name} at {width} px: tables hiding columns (class, scroll width, width): {hidden}")
            for title, svg, texts in browser.execute_script(_CHART_TEXTS):
                assert _overlapping(texts) == [], f"{path.name} at {width} px, {title}: overlapping texts"
                outside = [text for box, text in texts
                           if box[0] < svg[0] - OVERLAP or box[2] > svg[2] + OVERLAP
                           or box[1] < svg[1] - OVERLAP or box[3] > svg[3] + OVERLAP]
                assert outside == [], (
                    f"{path.name} at {width} px, {title}: texts outside the chart: {outside}")
            # the whole page, kept as an artifact (CI uploads tmp_path)
            height = browser.execute_script("return document.documentElement.scrollHeight")
            _load(browser, path, width, min(height, 20_000))
            assert browser.save_screenshot(str(shots / f"{path.stem}-{width}.png"))

    # The measured table draws charts (bar chart first: before and after in the first two palette colors):
    # per probe a bytes and an efficiency chart, per sort key a depth chart and a histogram, files, size.
    _load(browser, pages[1])
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert len(charts) == 1 + 3 * 2 + 2 * 2 + 2
    bar = tmp_path / "bar-chart.png"
    bar.write_bytes(charts[0].screenshot_as_png)
    count, _, seen = colors(bar.read_bytes())
    assert count > 10 and {rgb(PALETTE[0]), rgb(PALETTE[1])} <= seen
    main = browser.find_element(By.TAG_NAME, "main").text
    assert ("13 finding(s): 1 error, 12 info in 2 group(s)" in main
            and "every file this run wrote (12)" in main)
    # p2 in the probes and engine tables
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr.flagged")) >= 2
    # At 400 px, each cell is labelled with its column's header (the probes table: the first row's cells).
    _load(browser, pages[1], 400)
    labels = browser.execute_script(_LABELS, "probes")
    assert [label for label, _ in labels[:4]] == ['"Probe"', '"Kind"', '"Predicate"', '"Columns"'], labels
    # the index's links lead to the pages
    _load(browser, pages[0])
    assert browser.find_elements(By.CSS_SELECTOR, "svg.spark")
    browser.find_element(By.LINK_TEXT, "sales.orders").click()
    assert browser.find_element(By.TAG_NAME, "h1").text == "sales.orders"
    assert (sorted(p.name for p in shots.iterdir())
            == sorted(f"{p.stem}-{w}.png" for p in pages for w in WIDTHS))
