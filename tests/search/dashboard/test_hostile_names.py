"""Hostile strings in study names and trial attrs: figures still parse, every link reaches the right page.

Studies with such names come from other tools writing the same Optuna storage (prism-search's own config only
allows [A-Za-z0-9_.-]); schedule attrs are free text in the database.
"""

import html
import json
import re
import threading
import urllib.request

import optuna
import pytest

from search.dashboard import Dashboard, make_server_for, write_report
from search.dashboard.pages import plotly_js
from tests.search.dashboard.conftest import quickstart
from tests.search.synthetic import synthetic_study

HOSTILE = "<!--<script>alert(1)</script>\u2028&x</script>"
NAMES = ["with space", "a/b", "what?", "hash#tag", "100%", "%41", "ünï ✓", "a/trial/1", HOSTILE]
FIGURE = re.compile(r'<script type="application/json" data-figure="fig-[^"]+">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def hostile_url(tmp_path_factory) -> str:
    """A prism study with a trial whose schedule attr is hostile, and a plain Optuna study per hostile name."""
    url = f"sqlite:///{tmp_path_factory.mktemp('hostile') / 'hostile.db'}"
    study = synthetic_study(quickstart("prism"), url, 12, failed=0)
    study.add_trial(optuna.trial.create_trial(value=2.5, user_attrs={"schedule": HOSTILE, "role": "search", "seed": 0}))
    for name in NAMES:
        plain = optuna.create_study(study_name=name, storage=url)
        for x in (0.1, 0.5):
            plain.add_trial(optuna.trial.create_trial(value=x, user_attrs={"schedule": HOSTILE}))
    return url


def figures_of(page: str, scripts_besides: int) -> list:
    """The decoded figures of a page, after checking that the HTML parser sees exactly the expected script elements."""
    blocks = FIGURE.findall(page)
    assert len(blocks) == page.count('data-figure="fig-')
    assert all("<" not in b and ">" not in b and "\u2028" not in b for b in blocks)  # nothing can end or derail it
    assert page.count("<script") == len(blocks) + scripts_besides and page.count("</script>") == page.count("<script")
    return [json.loads(b) for b in blocks]


def carries_hostile(figures: list) -> bool:
    return any(HOSTILE in json.dumps(f, ensure_ascii=False) for f in figures)


def get(app, path: str) -> tuple[str, str]:
    status = []
    body = b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": ""}, lambda s, h: status.append(s)))
    return status[0], body.decode()


def test_a_hostile_schedule_attr_leaves_every_figure_parseable(hostile_url, tmp_path):
    app = Dashboard(hostile_url)
    status, page = get(app, "/study/prism")
    assert status == "200 OK"
    assert carries_hostile(figures_of(page, scripts_besides=3))  # plotly.js, the figure loader, the refresh poll
    hostile = len(optuna.load_study(study_name="prism", storage=hostile_url).trials) - 1
    status, page = get(app, f"/study/prism/trial/{hostile}")
    assert status == "200 OK" and figures_of(page, scripts_besides=3) == [] and html.escape(HOSTILE) in page  # no heads
    report = write_report(hostile_url, "prism", tmp_path / "r.html").read_text()
    assert carries_hostile(figures_of(report.replace(plotly_js(), ""), scripts_besides=2))  # inlined plotly, the loader


def test_a_study_with_a_hostile_name_renders_its_figures(hostile_url, tmp_path):
    report = write_report(hostile_url, HOSTILE, tmp_path / "r.html").read_text()
    assert carries_hostile(figures_of(report.replace(plotly_js(), ""), scripts_besides=2))
    assert html.escape(HOSTILE, quote=False) in report


@pytest.fixture(scope="module")
def server(hostile_url):
    server = make_server_for(hostile_url, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def fetch(base: str, href: str) -> str:
    return urllib.request.urlopen(base + html.unescape(href), timeout=30).read().decode()


def test_every_study_link_reaches_its_study_through_the_real_server(server):
    listing = fetch(server, "/")
    links = re.findall(r'<tr>\s*<td><a href="(/study/[^"]+)">(.*?)</a></td>', listing)  # the study column
    assert sorted(html.unescape(text) for _, text in links) == sorted([*NAMES, "prism"])
    for href, text in links:
        name = html.unescape(text)
        page = fetch(server, href)
        assert f"<h1>Study {html.escape(name)} " in page, (name, href)
        trial = re.search(r'<td><a href="([^"]+/trial/(\d+))">', page)
        assert trial, name
        assert f"Trial {trial[2]} of {html.escape(name)}:" in fetch(server, trial[1])
        crumb = re.search(r'<span class="crumbs">/ <a href="([^"]+)">', page)[1]
        assert crumb == href
        stamp_query = re.search(r'api/stamp(\?study=[^"]+)"', page)[1]
        assert json.loads(fetch(server, "/api/stamp" + stamp_query))["stamp"] != "empty"
