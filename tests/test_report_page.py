"""`bench plot`'s index.html opened in headless Chromium: every image loads, the console stays quiet,
the page fits the window and a screenshot shows it drawn; for a measured run, a simulated record
and a topology study. A page with one image removed must fail the same check.

Skips where no Chromium is installed (.ci/setup.d/browser.sh installs Debian's). With
A2A_SCREENSHOTS=DIR, the screenshots are kept there.
"""
from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest
from browser import Browser, Report, find, served
from support import mpiexec, python

from a2a.record.results import Recorder, Row

pytestmark = [pytest.mark.browser, pytest.mark.launches,
              pytest.mark.skipif(find() is None, reason="no Chromium installed (.ci/setup.d/browser.sh installs it)")]


@pytest.fixture(scope="module")
def browser():
    pytest.importorskip("matplotlib")
    chromium = Browser()
    yield chromium
    chromium.close()


def plotted(directory: Path) -> Path:
    """`bench plot DIRECTORY`; its plots directory."""
    done = python("-m", "bench", "plot", str(directory), timeout=600)  # matplotlib is slow on a loaded machine
    assert done.returncode == 0, done.stderr
    return directory / "plots"


@pytest.fixture(scope="module")
def real_page(plotted_run) -> Path:
    """The plots of a real two-rank run, as `make demo` runs them, but of five algorithms and shorter (test_plot checks
    the same run's files)."""
    return plotted_run.run / "plots"


def opened(browser: Browser, plots: Path, name: str) -> Report:
    """The page as the browser showed it, served over HTTP; the screenshot kept where A2A_SCREENSHOTS says."""
    with served(plots) as url:
        report = browser.check(url + "index.html")
    if os.environ.get("A2A_SCREENSHOTS"):
        Path(os.environ["A2A_SCREENSHOTS"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["A2A_SCREENSHOTS"]) / f"{name}.png").write_bytes(report.screenshot)
    return report


def assert_drawn(report: Report, plots: Path, height: int = 2000) -> None:
    """Nothing broken, every figure on the page, and a screenshot of a whole page with something on it."""
    from matplotlib.image import imread

    assert report.problems() == []
    assert sorted(src for src, _, _ in report.images) == sorted(p.name for p in plots.glob("*.png"))
    pixels = imread(io.BytesIO(report.screenshot), format="png")
    assert pixels.shape[1] == 1400 and pixels.shape[0] > height, pixels.shape
    ink = (pixels[..., :3].min(axis=2) < 0.9).mean()  # share of pixels that are not (nearly) white
    assert 0.03 < ink < 0.9, ink
    assert len({tuple(p) for p in (pixels[::7, ::7, :3] * 255).astype(int).reshape(-1, 3)}) > 50  # not flat


def test_the_page_of_a_real_run_renders_in_a_browser(browser, real_page):
    report = opened(browser, real_page, "measured")
    assert_drawn(report, real_page)
    assert report.title.startswith("All-to-all measured") and "locality_aware" in report.text
    assert {"time_vs_size.png", "speedup_heatmap.png", "samples_p2.png"} <= {src for src, _, _ in report.images}


def test_the_check_reports_a_missing_image(browser, real_page, tmp_path):
    broken = shutil.copytree(real_page, tmp_path / "plots")
    (broken / "busbw_vs_size.png").unlink()
    problems = opened(browser, broken, "missing-image").problems()
    assert "image busbw_vs_size.png did not load" in problems
    assert any("404" in p and "busbw_vs_size.png" in p for p in problems), problems


def test_an_overlap_run_gets_its_page(browser, tmp_path):
    """The overlap protocol's own figure beside the measured ones, a panel per test count; native's non-blocking form
    (the baseline) and one algorithm draw every figure kind."""
    done = mpiexec(2, "-m", "bench", "run", "--timing", "overlap", "--sizes", "1K,64K", "--tests", "0,3",
                   "--algorithms", "native:form=nonblocking,pairwise", "--iterations", "3", "--output",
                   str(tmp_path / "run"), "--quiet", timeout=300)
    assert done.returncode == 0, done.stderr
    plots = plotted(tmp_path / "run")
    report = opened(browser, plots, "overlap")
    assert_drawn(report, plots)
    assert {"overlap_vs_size.png", "time_vs_size.png"} <= {src for src, _, _ in report.images}
    assert "Overlap vs message size" in report.text and "IMB-NBC" in report.text


def test_a_simulated_record_gets_its_page(browser, tmp_path):
    from a2a.simulate.simgrid import missing

    if missing():
        pytest.skip(f"bench simulate needs SimGrid: {missing()}")
    done = python("-m", "bench", "simulate", "--nprocs", "8,16", "--sizes", "8,1K,64K", "--algorithms",
                  "linear,pairwise,bruck,native", "--output", str(tmp_path / "sim"), timeout=600)
    assert done.returncode == 0, done.stderr
    plots = plotted(tmp_path / "sim")
    report = opened(browser, plots, "simulated")
    assert_drawn(report, plots)
    for said in ("All-to-all simulated", "Simulated, not measured", "platform", "switch", "link", "message cost"):
        assert said in report.text, said
    assert "samples_p8.png" not in {src for src, _, _ in report.images}  # one sample per simulated point


def test_a_topology_study_gets_its_page(browser, tmp_path):
    manifest = [{"name": "switch", "topology": "switch", "title": "8 nodes x 1 slot"},
                {"name": "ring", "topology": "ring", "title": "8 nodes x 1 slot on ring"},
                {"name": "torus-2x4", "topology": "torus:2x4", "title": "never ran"}]
    (tmp_path / "topology-study.json").write_text(json.dumps({"runs": manifest}))
    for slower, entry in enumerate(manifest[:2], start=1):
        recorder = Recorder(tmp_path / entry["name"])
        for k, name in enumerate(("pairwise", "linear", "bruck")):
            for size in (8, 1024, 65536):
                median = slower * (10 + 5 * k + size / (100 + 400 * k))
                recorder.add(Row(8, 8, 1, name, "", "uint8", size, size, 5, 1, t_p50_us=median, t_min_us=median,
                                 valid=True, topology=entry["topology"]), [])
        recorder.close()
    plots = plotted(tmp_path)
    report = opened(browser, plots, "topology-study")
    assert_drawn(report, plots, 1000)
    assert report.title.startswith("Topology study")
    assert "torus:2x4" in report.text and "no results (the run did not finish)" in report.text
