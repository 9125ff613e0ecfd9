"""The dashboard in a real headless Chromium (Debian's /usr/bin/chromium, driven by Playwright).

Every page must load without console errors and draw every figure with data points; links between pages must
work; a screenshot of each page is saved under the test's tmp dir; the report must render with the network cut.
"""

import re
import threading
from pathlib import Path

import optuna
import pytest

from search.dashboard import make_server_for, write_report
from tests.search.dashboard.conftest import quickstart
from tests.search.synthetic import synthetic_study

# one pytest worker runs them all: they share one chromium (README command 2 runs `--dist loadgroup`)
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("browser")]

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]

# Count what plotly actually drew: scatter points and line paths, bars, heatmap images. Empty when nothing rendered.
DRAWN = """() => Array.from(document.querySelectorAll('div.figure')).map(div => ({
  id: div.dataset.name,
  traces: (div.data || []).length,
  values: (div.data || []).reduce((n, t) => n + ((t.z || t.y || []).filter(v => v !== null).length), 0),
  marks: div.querySelectorAll('.scatterlayer .point, .scatterlayer path.js-line, .barlayer .point path, .heatmaplayer image').length,
}))"""

# Figures whose title and plotly's toolbar (the modebar, drawn on hover) cover each other.
COVERED_TITLES = """() => Array.from(document.querySelectorAll('div.figure')).filter(div => {
  const title = div.querySelector('.gtitle'), bar = div.querySelector('.modebar');
  if (!title || !bar) return false;
  const a = title.getBoundingClientRect(), b = bar.getBoundingClientRect();
  return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
}).map(div => div.dataset.name)"""


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is missing: run scripts/install_browser.sh (Debian chromium) to run browser tests")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield b
        b.close()


def serve(url: str):
    server = make_server_for(url, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


@pytest.fixture(scope="module")
def site(dash_url):
    server, base = serve(dash_url)
    yield base
    server.shutdown()
    server.server_close()


class Page:
    """A browser tab that records console errors and failed page scripts."""

    def __init__(self, browser, shots: Path):
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.shots = shots

    def open(self, url: str, shot: str):
        self.page.goto(url)
        self.page.wait_for_load_state("networkidle")
        self.page.screenshot(path=str(self.shots / f"{shot}.png"), full_page=True)
        return self.page.evaluate(DRAWN)


@pytest.fixture
def tab(browser, tmp_path):
    page = Page(browser, tmp_path)
    yield page
    page.page.close()


def assert_drawn(figures, expected: set[str]):
    assert {f["id"] for f in figures} == expected
    for f in figures:
        assert f["traces"] > 0 and f["values"] > 0 and f["marks"] > 0, f


def test_every_page_loads_clean_and_draws_every_figure(tab, site, dash_url, tmp_path):
    study = optuna.load_study(study_name="prism", storage=dash_url)
    audited = next(t.number for t in study.trials if "prism.audit" in t.user_attrs and t.user_attrs["role"] == "search")
    pruned = next(t.number for t in study.trials if t.state.name == "PRUNED")
    running = next(t.number for t in study.trials if t.state.name == "RUNNING")
    study_figs = {"history", "pareto", "importance", "heatmap", "curves", "fidelity", "timeline"}
    assert tab.open(f"{site}/", "studies") == []
    assert_drawn(tab.open(f"{site}/study/prism", "study-prism"), study_figs)
    tab.page.hover("#fig-importance")  # the toolbar shows on hover
    assert tab.page.evaluate(COVERED_TITLES) == []
    assert_drawn(tab.open(f"{site}/study/pareto", "study-pareto"), study_figs - {"importance"})
    assert tab.page.evaluate(COVERED_TITLES) == []
    assert_drawn(tab.open(f"{site}/study/plain", "study-plain"), {"history", "timeline"})
    audit = {"schedule", "curve"} | {
        f"audit-{k}" for k in ("mad", "mad_relative", "attn_entropy", "matrix_entropy", "token_curvature", "depth_curvature")
    }
    assert_drawn(tab.open(f"{site}/study/prism/trial/{audited}", "trial-audited"), audit)
    assert_drawn(tab.open(f"{site}/study/prism/trial/{pruned}", "trial-pruned"), {"schedule", "curve"})
    assert_drawn(tab.open(f"{site}/study/prism/trial/{running}", "trial-running"), {"schedule", "curve"})
    assert tab.errors == []
    assert len(list(tmp_path.glob("*.png"))) == 7


def test_unknown_pages_are_404_pages_in_the_browser(tab, site):
    response = tab.page.goto(f"{site}/study/nope")
    tab.page.screenshot(path=str(tab.shots / "404.png"))
    assert response.status == 404 and "no study named 'nope'" in tab.page.inner_text("#error")
    tab.page.click("text=all studies")
    assert tab.page.url == f"{site}/"


def test_links_lead_from_the_list_to_studies_trials_and_back(tab, site):
    def follow(selector: str, url: str) -> None:
        tab.page.click(selector)
        tab.page.wait_for_url(re.compile(url))

    tab.open(f"{site}/", "links-0")
    follow('#studies a[href="/study/prism"]', r".*/study/prism$")
    best = tab.page.inner_text("table#best tr:nth-child(2) td:first-child")  # the first row under the header
    follow(f'table#best a[href="/study/prism/trial/{best}"]', rf".*/study/prism/trial/{best}$")
    follow("#baseline", r".*/trial/0$")
    assert "baseline" in tab.page.inner_text("#attrs")
    follow("#next", r".*/trial/1$")
    follow('header a[href="/study/prism"]', r".*/study/prism$")  # breadcrumb back to the study
    tab.page.wait_for_selector("#fig-history .scatterlayer .point")
    point = tab.page.locator("#fig-history .scatterlayer .point").first.bounding_box()
    tab.page.mouse.click(point["x"] + point["width"] / 2, point["y"] + point["height"] / 2)  # a click on a point
    tab.page.wait_for_url(re.compile(r".*/study/prism/trial/\d+$"))
    assert tab.errors == []


def test_study_page_fills_in_while_trials_arrive(tab, tmp_path):
    url = f"sqlite:///{tmp_path / 'live.db'}"
    study = synthetic_study(quickstart("live"), url, 2, failed=0)
    server, base = serve(url)
    try:
        tab.open(f"{base}/study/live", "live-before")
        assert "complete 2" in tab.page.inner_text("#summary")
        for value in (2.1, 2.0):  # two more trials finish, written by another "process" through Optuna
            trial = study.ask()
            trial.set_user_attr("schedule", "2x4")
            trial.report(value + 0.3, 1000)
            study.tell(trial, value)
        # a locator, not wait_for_function: that evaluates a string, which the page's Content-Security-Policy refuses
        tab.page.locator("#summary", has_text="complete 4").wait_for(timeout=20000)
        tab.page.screenshot(path=str(tmp_path / "live-after.png"), full_page=True)
        assert tab.errors == []
    finally:
        server.shutdown()
        server.server_close()


def test_report_opens_offline(browser, dash_url, tmp_path):
    report = write_report(dash_url, "prism", tmp_path / "report.html")
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    outside: list[str] = []
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def only_the_file(route):
        if route.request.url.startswith("file:"):
            return route.continue_()
        outside.append(route.request.url)
        return route.abort()

    page.route("**/*", only_the_file)
    page.goto(report.as_uri())
    page.wait_for_load_state("load")
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert_drawn(page.evaluate(DRAWN), {"history", "pareto", "importance", "heatmap", "curves", "fidelity", "timeline"})
    assert outside == [] and errors == []
    page.close()


def test_a_real_study_fills_in_while_the_driver_runs(ray_local, tiny_config, tab):
    """The issue's 'done when': open the dashboard on a study, start real training, watch the page fill in."""
    from search.analysis.stats import MIN_CURVES
    from search.runner.driver import Driver
    from search.runner.preflight import check_corpus
    from search.storage import open_storage
    from search.study.create import open_study
    from search.study.pruning import make_stopping

    # fidelity needs MIN_CURVES complete learning curves: as many trials, none pruned
    search = tiny_config.search.model_copy(update={"pruner": "none"})
    config = tiny_config.model_copy(update={"n_trials": MIN_CURVES, "search": search})
    fingerprint = check_corpus(config)
    ctx = open_study(config, open_storage(config.storage), fingerprint)
    server, base = serve(config.storage)
    try:
        assert tab.open(f"{base}/study/tiny", "real-before") == []  # only queued baselines: notes, no figures
        driver = threading.Thread(target=Driver(ctx, stopping=make_stopping(ctx)).run, args=(config.n_trials, 2))
        driver.start()
        # the page reloads itself as trials report: no reload from the test
        tab.page.locator("#summary", has_text="complete").wait_for(timeout=180_000)
        driver.join(timeout=300)
        tab.page.reload()
        figures = tab.open(f"{base}/study/tiny", "real-after")
        assert_drawn(figures, {"history", "pareto", "heatmap", "curves", "fidelity", "timeline"})  # importance needs >= 10 trials
        assert tab.page.locator('[data-empty="importance"]').count() == 1
        assert tab.errors == []
    finally:
        server.shutdown()
        server.server_close()
