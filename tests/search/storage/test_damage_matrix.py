"""The damage matrix: one storage holding an intact study and one study per kind of damaged value
(tests/search/storage/damage.py), on SQLite and on PostgreSQL. Every reading command and dashboard page is asked
about each: no traceback, no 500, exit 2 only where the study named is the damaged one, every command saying the
same line about it, and the intact study shown wherever studies are listed."""

import html
import sys
from pathlib import Path

import pytest

from search.cli import main
from search.dashboard import Dashboard
from tests.search.storage.damage import DAMAGE, INTACT, build

# one pytest worker builds each storage once (--dist loadgroup): spread over two, each built them all
pytestmark = pytest.mark.xdist_group("damage_matrix")

RENAMED = "study-name-not-utf8"  # its damage is its name: the name it had no longer finds it
TRIAL_LEFT_OUT = ["schedule-a-number", "seed-text"]  # trial 0 holds an attr of another type: left out, with a warning
UNREADABLE = [kind for kind, damage in DAMAGE.items() if damage.says is not None]
READERS = [  # every reading command, about one study
    ["status", "{name}"],
    ["status", "{name}", "--json"],
    ["best", "{name}"],
    ["export", "{name}", "--format", "csv"],
    ["export", "{name}", "--format", "json"],
    ["export", "{name}", "--schedule", "best", "--format", "json"],
    ["export", "{name}", "--schedule", "best", "--format", "hf"],
    ["export", "{name}", "--schedule", "best", "--format", "nanogpt"],
    ["report", "{name}", "-o", "{folder}/report.html"],
]
# status, best, export and report; the other forms read through the same paths (SQLite runs every one)
ON_POSTGRESQL = [r for r in READERS if "--schedule" not in r and "--json" not in r]


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.e2e)])
def damaged(request, tmp_path_factory):
    """(url, the kinds stored) of one storage per module and database."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('matrix') / 'matrix.db'}"
        refused = build(url)
        assert refused == {}, refused  # SQLite stores anything anywhere
        yield url, list(DAMAGE)
        return
    from tests.search.pg import fresh_database

    with fresh_database() as url:
        refused = build(url)
        # what PostgreSQL's column types refuse, it refuses when written: such a value is never read
        assert sorted(refused) == sorted(k for k, d in DAMAGE.items() if d.postgresql == "refuses"), refused
        yield url, [k for k, d in DAMAGE.items() if d.postgresql == "same"]


def cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """The real CLI in this process: an exception other than its exit would fail the test with its traceback."""
    monkeypatch.setattr(sys, "argv", ["prism-search", *args])
    with pytest.raises(SystemExit) as done:
        main()
    out = capsys.readouterr()
    assert "Traceback" not in out.err, out.err
    return done.value.code, out.out, out.err


def test_status_of_the_storage_shows_the_intact_study_and_one_line_per_unreadable_one(monkeypatch, capsys, damaged):
    url, stored = damaged
    code, out, err = cli(monkeypatch, capsys, "status", "--storage", url)
    assert code == 0 and f"{INTACT}: " in out
    left_out = [line for line in err.splitlines() if line.startswith("study ") and " left out: " in line]
    unreadable = [k for k in stored if k in UNREADABLE]
    assert len(left_out) == len(unreadable), err
    for kind in unreadable:
        assert any(DAMAGE[kind].says in line for line in left_out), (kind, err)
    for kind in stored:
        if kind not in UNREADABLE:
            assert f"{kind}: " in out, kind  # damage a reader tolerates: its study is summarised


def test_study_all_names_each_study_whose_own_data_is_damaged(damaged):
    """From Python too, no damaged study is left out unsaid: the ones `Study.all` cannot open come back with why,
    each with the line `status` prints about it."""
    from search.study import Study

    url, stored = damaged
    studies, _, unreadable = Study.all(url)
    assert INTACT in {s.name for s in studies}
    own = {k for k in stored if DAMAGE[k].says is not None} - {s.name for s in studies}  # unreadable before a summary
    for kind in own:
        assert any(DAMAGE[kind].says in why for why in unreadable.values()), (kind, unreadable)
    assert own and len(unreadable) == len(own)


def test_every_reading_command_reads_the_intact_study(monkeypatch, capsys, tmp_path, damaged):
    url, _ = damaged
    for args in READERS:
        code, out, err = cli(monkeypatch, capsys, *(a.format(name=INTACT, folder=tmp_path) for a in args), "--storage", url)
        assert code == 0 and (out or "wrote" in err or Path(tmp_path / "report.html").exists()), (args, err)


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_every_reading_command_on_a_damaged_study_says_the_same_line(monkeypatch, capsys, tmp_path, damaged, kind):
    url, stored = damaged
    if kind not in stored:
        pytest.skip(f"{kind} is no damage this database stores")
    answers = set()
    for args in READERS if url.startswith("sqlite") else ON_POSTGRESQL:
        code, out, err = cli(monkeypatch, capsys, *(a.format(name=kind, folder=tmp_path) for a in args), "--storage", url)
        if DAMAGE[kind].says is None:  # readable: the study reads, its tolerated damage at most a warning
            assert code == 0, (args, err)
            continue
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and out == "", (args, err)
        answers.add(err)
    says = "no study named" if kind == RENAMED else DAMAGE[kind].says
    assert all(says in answer for answer in answers) and (len(answers) <= 1 or kind == RENAMED), answers  # they agree
    assert not (tmp_path / "report.html").exists() or DAMAGE[kind].says is None


def get(app: Dashboard, path: str, query: str = "") -> tuple[str, str]:
    status = []
    body = b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query}, lambda s, h: status.append(s)))
    return status[0], html.unescape(body.decode())


def test_dashboard_lists_every_study_and_each_damaged_page_says_what_is_damaged(damaged):
    url, stored = damaged
    app = Dashboard(url)
    try:
        status, index = get(app, "/")
        assert status == "200 OK" and f'href="/study/{INTACT}"' in index
        for kind in stored:
            if kind in UNREADABLE:
                assert DAMAGE[kind].says in index, kind
            if kind != RENAMED:
                assert f'href="/study/{kind}"' in index, kind
        assert get(app, f"/study/{INTACT}")[0] == "200 OK"
        assert get(app, "/api/stamp")[0] == "200 OK"
        for kind in stored:
            if kind == RENAMED:
                continue
            for path in (f"/study/{kind}", f"/study/{kind}/trial/0", f"/study/{kind}/trial/1"):
                status, page = get(app, path)
                readable_trial_left_out = kind in TRIAL_LEFT_OUT and path.endswith("/trial/0")
                assert status == ("404 Not Found" if readable_trial_left_out else "200 OK"), (kind, path, status)
                shown_as_plain_optuna = (DAMAGE[kind].says or "").startswith("stored config") and "/trial/" in path
                assert DAMAGE[kind].says is None or shown_as_plain_optuna or DAMAGE[kind].says in page, (kind, path)
            assert get(app, "/api/stamp", f"study={kind}")[0] == "200 OK", kind
    finally:
        app.close()


def test_the_stock_dashboard_reads_the_intact_study_and_answers_each_damaged_one_with_its_line(damaged, caplog):
    """`dashboard --optuna`: optuna-dashboard lists the intact study and reads it; a request about a damaged study
    gets that study's one line as the `reason` the stock page shows, and every failure it logs is one line (it logs
    its stack otherwise). A study prism reads (an extra direction) may still fail in optuna-dashboard's own code."""
    import json

    import sqlalchemy

    from search.dashboard.app import stock_app

    url, stored = damaged
    engine = sqlalchemy.create_engine(url)
    query = sqlalchemy.text("SELECT study_id FROM studies WHERE study_name = :name")  # one name is not UTF-8 text
    with engine.connect() as conn:
        ids = {name: conn.execute(query, {"name": name}).scalar_one() for name in (INTACT, *stored) if name != RENAMED}
    engine.dispose()
    app = stock_app(url)

    def api(path: str) -> tuple[str, dict]:
        status = []
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "after=0", "wsgi.errors": sys.stderr}
        body = b"".join(app(environ, lambda s, h, *exc: status.append(s)))
        return status[0], json.loads(body)

    status, index = api("/api/studies")
    assert status == "200 OK" and INTACT in {s["study_name"] for s in index["study_summaries"]}
    assert api(f"/api/studies/{ids[INTACT]}")[0] == "200 OK"
    for kind in stored:
        if kind == RENAMED:
            continue
        status, answer = api(f"/api/studies/{ids[kind]}")
        if kind not in UNREADABLE:
            continue
        if status == "200 OK":  # what Optuna decodes, such as prism's config of the wrong JSON type, it shows
            assert not (DAMAGE[kind].says or "").startswith("trial 0's"), kind  # a trial Optuna cannot decode never is
            continue
        assert status.startswith("500") and answer["reason"].startswith(f"study {kind!r} is unreadable"), (kind, answer)
        assert DAMAGE[kind].says in answer["reason"], (kind, answer)
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("optuna_dashboard")]
    assert logged and all("\n" not in line for line in logged), logged
