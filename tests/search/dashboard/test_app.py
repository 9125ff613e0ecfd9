"""The WSGI app called directly: routes, 404/503 pages, read-only, password masking, live stamp."""

import hashlib
import json
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import optuna
import pytest

from search.dashboard import Dashboard, DashboardError, bind_warning, make_server_for
from search.storage import change_stamp
from tests.search.conftest import ROOT
from tests.search.dashboard.conftest import quickstart
from tests.search.synthetic import synthetic_study


def get(app, path: str, method: str = "GET") -> tuple[str, str]:
    status = []
    path, _, query = path.partition("?")
    body = b"".join(app({"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query}, lambda s, h: status.append(s)))
    return status[0], body.decode()


def figure_ids(html: str) -> set[str]:
    return set(re.findall(r'data-figure="fig-([a-z_-]+)"', html))


def test_studies_list_links_every_study_with_its_summary(dash_url):
    status, html = get(Dashboard(dash_url), "/")
    assert status == "200 OK"
    for name in ("prism", "pareto", "plain"):
        assert f'href="/study/{name}"' in html
    assert "gap to uniform" in html and "σ" not in html  # prism study: a paired gap, no normal-noise language
    assert "n=1: noise not measured yet; run `prism-search confirm prism --top 5 --seeds 3`" in html  # the verdict's command
    assert "selected as best of" in html  # the best of N on one seed, not confirmed
    assert "plain Optuna study" in html and 'class="badge running"' in html
    assert 'href="/study/pareto/trial/' in html  # the two-objective study: its best val_loss trial, linked


def test_study_page_has_every_figure_and_links_to_trials(dash_url):
    status, html = get(Dashboard(dash_url), "/study/prism")
    assert status == "200 OK"
    assert figure_ids(html) == {"history", "pareto", "importance", "heatmap", "curves", "fidelity", "timeline"}
    assert re.search(r'href="/study/prism/trial/\d+"', html) and "TrainingDiverged" in html
    assert 'src="/static/plotly.min.js"' in html and "cdn" not in html.lower()


def test_plain_optuna_study_degrades_to_what_it_has(dash_url):
    status, html = get(Dashboard(dash_url), "/study/plain")
    assert status == "200 OK" and "history" in figure_ids(html) and 'data-empty="heatmap"' in html


def test_trial_page_shows_audit_profiles_when_stored(dash_url):
    app = Dashboard(dash_url)
    study = optuna.load_study(study_name="prism", storage=dash_url)
    audited = next(t.number for t in study.trials if "prism.audit" in t.user_attrs and t.user_attrs["role"] == "search")
    bare = next(t.number for t in study.trials if "prism.audit" not in t.user_attrs and t.state.name == "COMPLETE")
    status, html = get(app, f"/study/prism/trial/{audited}")
    assert status == "200 OK" and {"schedule", "curve", "audit-mad", "audit-matrix_entropy"} <= figure_ids(html)
    status, html = get(app, f"/study/prism/trial/{bare}")
    assert status == "200 OK" and not any(i.startswith("audit") for i in figure_ids(html)) and 'data-empty="audit"' in html


@pytest.mark.parametrize(
    "path", ["/study/nope", "/study/prism/trial/999", "/study/prism/trial/abc", "/study/prism/trial/-1", "/nothing/here"]
)
def test_unknown_study_trial_or_page_is_a_404_page(dash_url, path):
    status, html = get(Dashboard(dash_url), path)
    assert status == "404 Not Found" and "Not found" in html and "Traceback" not in html


def test_only_get_is_served(dash_url):
    assert get(Dashboard(dash_url), "/study/prism", method="POST")[0] == "405 Method Not Allowed"


def test_browsing_every_page_leaves_the_database_untouched(dash_url):
    db = Path(dash_url.removeprefix("sqlite:///"))
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    app = Dashboard(dash_url)
    for path in ["/", "/study/prism", "/study/pareto", "/study/plain", "/study/prism/trial/3", "/api/stamp", "/api/stamp?study=prism"]:
        assert get(app, path)[0] == "200 OK", path
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_unreachable_database_is_a_clear_page_without_the_password():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = Dashboard(f"postgresql+psycopg://prism:s3cret-pw@127.0.0.1:{port}/studies")
    for path in ("/", "/study/prism", "/api/stamp"):
        status, html = get(app, path)
        assert status == "503 Service Unavailable" and "unreachable" in html
        assert "s3cret-pw" not in html and "prism:***@" in html


def test_a_config_from_another_version_degrades_to_the_plain_optuna_view(tmp_path):
    url = f"sqlite:///{tmp_path / 'odd.db'}"
    synthetic_study(quickstart("odd"), url, 3, failed=0)
    study = optuna.load_study(study_name="odd", storage=url)
    raw = json.loads(study.user_attrs["prism.config"])
    study.set_user_attr("prism.config", json.dumps({**raw, "mirror": "postgresql://prism:s3cret-pw@db/studies"}))
    app = Dashboard(url)
    status, html = get(app, "/study/odd")
    assert status == "200 OK" and "unreadable by this version" in html and "s3cret" not in html
    assert "stored config of study &#39;odd&#39;: mirror: unknown field" in html and 'data-figure="fig-curves"' in html
    status, html = get(app, "/")
    assert status == "200 OK" and "stored config unreadable by this version" in html


def test_a_trial_another_tool_wrote_is_left_out_of_the_page_not_fatal(tmp_path):
    """A trial attr written by another tool (a URL where a loss curve belongs) used to break the study view; the
    malformed trial is now left out and the page answers, showing no password."""
    url = f"sqlite:///{tmp_path / 'odd.db'}"
    synthetic_study(quickstart("odd"), url, 3, failed=0)
    study = optuna.load_study(study_name="odd", storage=url)
    study.add_trial(optuna.trial.create_trial(value=1.0, user_attrs={"curve": [["postgresql://prism:s3cret-pw@db/studies", 1.0]]}))
    status, html = get(Dashboard(url), "/study/odd")
    assert status == "200 OK" and "s3cret" not in html


def test_a_page_that_fails_is_a_500_page_and_the_logged_traceback_is_masked(tmp_path, caplog, monkeypatch):
    """A bug in a view (a fault no stored data causes any more, hence the stand-in) is a 500 page; the traceback
    logged for it masks the password of a URL in its message."""
    import search.dashboard.app as app_module

    url = f"sqlite:///{tmp_path / 'odd.db'}"
    synthetic_study(quickstart("odd"), url, 3, failed=0)

    def broken(*args, **kwargs):
        raise ValueError("could not convert string to float: 'postgresql://prism:s3cret-pw@db/studies'")

    monkeypatch.setattr(app_module, "study_view", broken)
    status, html = get(Dashboard(url), "/study/odd")
    assert status == "500 Internal Server Error" and "Internal error" in html and "s3cret" not in html
    assert "could not convert string to float" in caplog.text and "prism:***@db" in caplog.text
    assert "s3cret" not in caplog.text


def test_missing_sqlite_file_is_reported_not_created_and_recovers(tmp_path):
    db = tmp_path / "later.db"
    app = Dashboard(f"sqlite:///{db}")
    status, html = get(app, "/")
    assert status == "503 Service Unavailable" and "no database file" in html and not db.exists()
    synthetic_study(quickstart("later"), f"sqlite:///{db}", 3, failed=0)  # a study starts writing
    status, html = get(app, "/")
    assert status == "200 OK" and 'href="/study/later"' in html


def test_stamp_changes_when_a_running_study_moves(tmp_path):
    url = f"sqlite:///{tmp_path / 'live.db'}"
    study = synthetic_study(quickstart("live"), url, 3, failed=0)
    app = Dashboard(url)
    first = get(app, "/api/stamp?study=live")[1]
    assert get(app, "/api/stamp?study=live")[1] == first  # nothing moved
    trial = study.ask()
    assert get(app, "/api/stamp?study=live")[1] != first  # a trial started
    second = get(app, "/api/stamp?study=live")[1]
    trial.report(2.0, 1000)
    assert get(app, "/api/stamp?study=live")[1] != second  # it reported a point


def test_requests_at_once_share_the_stamp_read_under_way_and_a_later_one_reads_again(dash_url, monkeypatch):
    """A stamp read counts every attr row of the study (tens of milliseconds at 5,000 trials): 20 page requests at
    once wait for the one under way instead of queueing 20 (the stand-in holds the real read open while they come)."""
    import search.dashboard.app as app_module

    reads, release = [], threading.Event()

    def held(storage, name):
        reads.append(name)
        release.wait(10)
        return change_stamp(storage, name)

    monkeypatch.setattr(app_module, "change_stamp", held)
    app = Dashboard(dash_url)
    with ThreadPoolExecutor(20) as pool:
        stamps = [pool.submit(app.stamp, "prism") for _ in range(20)]
        time.sleep(0.5)  # every request is waiting, one of them reading
        release.set()
        assert {f.result() for f in stamps} == {change_stamp(app.storage(), "prism")}
    assert reads == ["prism"]
    assert app.stamp("prism") == stamps[0].result() and len(reads) == 2  # a later request reads the database again
    with pytest.raises(app_module._NotFound):
        app.stamp("nope")
    app.close()


def test_binding_beyond_localhost_warns_and_a_busy_port_is_a_clear_error(dash_url):
    assert bind_warning("127.0.0.1") is None and bind_warning("localhost") is None
    assert "0.0.0.0" in bind_warning("0.0.0.0") and "no login" in bind_warning("0.0.0.0")
    server = make_server_for(dash_url, "127.0.0.1", 0)
    try:
        with pytest.raises(DashboardError, match=f"cannot listen on 127.0.0.1:{server.server_port}.*--port"):
            make_server_for(dash_url, "127.0.0.1", server.server_port)
    finally:
        server.server_close()


@pytest.fixture
def postgres_url():
    """A fresh PostgreSQL database for one test, dropped afterwards (the server at 127.0.0.1:5432, trust auth)."""
    import uuid

    import psycopg

    name = f"prism_dash_{uuid.uuid4().hex[:12]}"
    admin = "postgresql://postgres@127.0.0.1:5432/test"
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as e:
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 is not reachable ({e})")
    yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.mark.e2e
def test_dashboard_reads_a_postgresql_study(postgres_url):
    synthetic_study(quickstart("pg"), postgres_url, 12, failed=1, audit=True)
    app = Dashboard(postgres_url)
    status, html = get(app, "/")
    assert status == "200 OK" and 'href="/study/pg"' in html and postgres_url.rsplit("/", 1)[1] in html
    status, html = get(app, "/study/pg")
    assert status == "200 OK" and {"history", "pareto", "heatmap", "curves", "fidelity", "timeline"} <= figure_ids(html)
    assert get(app, "/study/pg/trial/2")[0] == "200 OK"


@pytest.mark.e2e
def test_a_database_with_optunas_tables_and_no_study_says_so_like_the_cli(tmp_path):
    """Optuna's schema but no study yet (a fresh PostgreSQL database after `run` was refused, a file made by
    another Optuna tool): not an empty table, the same sentence as `status`."""
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    optuna.storages.RDBStorage(url).engine.dispose()  # the tables, no study
    status, html = get(Dashboard(url), "/")
    assert status == "200 OK" and 'id="studies"' not in html
    assert "no prism-search studies in this storage yet; start one with <code>prism-search run" in html
    cli = subprocess.run([sys.executable, "-m", "search.cli", "status", "--storage", url], capture_output=True, text=True, cwd=ROOT)
    assert cli.returncode == 0 and cli.stdout.startswith(f"no prism-search studies in {url} yet; start one with"), cli


@pytest.mark.e2e
def test_status_of_a_storage_with_a_plain_optuna_study_summarizes_the_others_and_names_it(dash_url):
    """The dashboard lists another tool's study as a plain one; `status` must not stop on it either."""
    cli = subprocess.run([sys.executable, "-m", "search.cli", "status", "--storage", dash_url], capture_output=True, text=True, cwd=ROOT)
    assert cli.returncode == 0, cli.stderr
    assert "study prism" in cli.stdout and "study pareto" in cli.stdout
    assert cli.stdout.rstrip().endswith("not created by prism-search (left out): plain")
    one = subprocess.run(
        [sys.executable, "-m", "search.cli", "status", "plain", "--storage", dash_url], capture_output=True, text=True, cwd=ROOT
    )
    assert one.returncode == 2 and one.stderr.count("\n") == 1 and "not created by prism-search" in one.stderr, one.stderr
