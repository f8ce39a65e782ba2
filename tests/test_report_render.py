"""The HTML report as a browser shows it: headless Chromium (Debian's chromium + chromium-driver) loads
every page from file://, logs no errors, fetches nothing, lays the SVG charts out with a size, and
paints a screenshot that is not blank (decoded here with zlib and numpy: no imaging library)."""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from test_report import T0, MiB, metric, render, run, spec

from layout.report.charts import PALETTE
from layout.report.render import table_page_name

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
WINDOW = (1000, 750)  # small enough to decode the screenshots quickly

# Chromium is an optional system package: a developer's machine without it skips these tests. CI (env CI set)
# installs it in .ci/run, which fails when it cannot, so under CI its absence fails the tests instead.
_MISSING = "chromium/chromedriver not installed: apt-get install chromium chromium-driver (.ci/run does in CI)"
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

    assert CHROMIUM is not None and CHROMEDRIVER is not None, _MISSING  # under CI: the skip above does not apply
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
    """A report with a measured table (two probes, three runs, a failed verification) and an empty one."""
    t = "sales.orders"
    metrics = []
    for day in range(4):
        at = T0 + timedelta(days=day)
        for probe, scale in (("p1", 1), ("p2", 2)):
            metrics.append(metric(t, probe, "before", f"n{day}", at, (30 - 5 * day) * scale * MiB))
            metrics.append(metric(t, probe, "after", f"n{day}", at + timedelta(minutes=20),
                                  (12 - 3 * day) * scale * MiB, ideal=MiB))
    findings = [{"rule": "column-index", "severity": "error", "path": "a.parquet", "row_group": 0,
                 "column": "c", "observed": "absent", "intended": "present", "diagnosis": "set truncation"}]
    runs = [run(t, f"n{day}", T0 + timedelta(days=day), files_before=100 - 20 * day, files_after=10 + day)
            for day in range(3)]
    runs.append(run(t, "n3", T0 + timedelta(days=3), status="failed", verification="failed",
                    findings=findings, error="verification failed"))
    specs = [spec(t, [{"name": "p1", "where": "k = 1"}, {"name": "p2", "where": "k < 'x'"}]),
             spec("sales.never_measured")]
    return render(tmp_path, metrics, runs, specs)


def _load(driver, path: Path) -> None:
    driver.get(path.resolve().as_uri())
    assert driver.execute_script("return document.readyState") == "complete"


def test_report_renders_in_chromium(browser, report, tmp_path):
    from selenium.webdriver.common.by import By  # here, like the fixture's imports

    pages = [report, report.parent / "tables" / table_page_name("sales.orders"),
             report.parent / "tables" / table_page_name("sales.never_measured")]
    for number, path in enumerate(pages):
        browser.get_log("browser")  # drop what earlier pages logged
        _load(browser, path)
        severe = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert severe == [], f"{path.name}: browser errors {severe}"
        fetched = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert all(url.startswith(("file:", "data:")) for url in fetched), fetched
        assert "lakesort" in browser.title
        charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
        assert len(charts) == path.read_text(encoding="utf-8").count("<svg ")
        for chart in charts:
            box = browser.execute_script("const r = arguments[0].getBoundingClientRect(); "
                                         "return [r.width, r.height];", chart)
            assert chart.size["width"] > 100 and chart.size["height"] > 50 and min(box) > 50, (path.name, box)
        shot = tmp_path / f"page{number}.png"
        assert browser.save_screenshot(str(shot))
        count, dominant, _ = colors(shot.read_bytes())
        assert count > 20 and dominant < 0.97, f"{shot.name} looks blank: {count} colors, {dominant:.0%} alike"

    # The measured table draws charts (bar chart first: before and after in the first two palette colors).
    _load(browser, pages[1])
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert len(charts) == 1 + 2 + 1 + 2
    bar = tmp_path / "bar-chart.png"
    bar.write_bytes(charts[0].screenshot_as_png)
    count, _, seen = colors(bar.read_bytes())
    assert count > 10 and {rgb(PALETTE[0]), rgb(PALETTE[1])} <= seen
    assert "1 finding(s)" in browser.find_element(By.TAG_NAME, "main").text
    # the index's links lead to the pages
    _load(browser, pages[0])
    browser.find_element(By.LINK_TEXT, "sales.orders").click()
    assert browser.find_element(By.TAG_NAME, "h1").text == "sales.orders"
