"""Adversarial input and environment: odd URLs, names, markup, environment values,
TOML files and databases through the real CLI. Each case is a one-line error (exit 2) that writes nothing, or the
correct behaviour.
"""

from __future__ import annotations

import html
import json
import re
import signal
import socket
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import quote, quote_plus

import optuna
import pytest
import sqlalchemy

from search.cli import main
from search.dashboard import Dashboard
from search.errors import PrismSearchError
from search.outputs.urls import lost_credentials, mask_url
from search.runner.preflight import check_corpus
from search.storage import dispose, driver_lock, open_storage
from search.study.create import open_study
from tests.search.dashboard.test_app import get
from tests.search.pg import ADMIN_URL


def cli(monkeypatch, capsys, folder: Path, *args: str) -> tuple[int, str, str]:
    """`prism-search ARGS` in `folder`, in this process: (exit code, stdout, stderr)."""
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "argv", ["prism-search", *args])
    with pytest.raises(SystemExit) as done:
        main()
    out, err = capsys.readouterr()
    return done.value.code, out, err


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(folder.rglob("*"))}


def refused(monkeypatch, capsys, folder: Path, args: tuple[str, ...], *names: str) -> str:
    """Run a command that must fail with one line naming every one of `names`, exit 2, writing nothing."""
    before = snapshot(folder)
    code, out, err = cli(monkeypatch, capsys, folder, *args)
    assert code == 2, (out, err)
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for name in names:
        assert name in err, (name, err)
    assert snapshot(folder) == before, "a refused command wrote or changed a file"
    return err


# --- item 9: a study name is one safe path component ----------------------------------------------------------------
@pytest.mark.parametrize("name", [".", "..", ".hidden", "-rf", "a/b"])
def test_a_study_name_that_is_not_a_plain_path_component_is_refused(study_toml, name, tmp_path, monkeypatch, capsys):
    study_toml(('name = "tiny"', f'name = "{name}"'), name="T.toml")
    refused(monkeypatch, capsys, tmp_path, ("run", "T.toml"), "T.toml: name:", "fix")


def test_a_bad_storage_field_is_refused_when_the_command_line_gives_another(study_toml, tmp_path, monkeypatch, capsys):
    """The file's field is validated whatever the flag says: nothing is created, nothing trains."""
    study_toml(("n_trials = 5", "n_trials = 5\nstorage = 5"), name="T.toml")
    refused(
        monkeypatch, capsys, tmp_path, ("run", "T.toml", "--storage", f"sqlite:///{tmp_path / 'x.db'}"), "T.toml: storage: 5 is a number"
    )


# --- item 12: numbers, environment values and TOML files ------------------------------------------------------------
@pytest.mark.parametrize(
    "args, names",
    [
        (("train", "1x3", "--config", "T.toml", "--seed", "18446744073709551616"), ("seed",)),
        (("train", "1x3", "--config", "T.toml", "--threads", "100000000000"), ("cpus_per_trial",)),
    ],
    ids=["seed-2^64", "threads-1e11"],
)
def test_train_numbers_beyond_what_torch_takes_are_one_line(study_toml, args, names, tmp_path, monkeypatch, capsys):
    study_toml(name="T.toml")
    refused(monkeypatch, capsys, tmp_path, args, *names)


@pytest.mark.parametrize("variable, value", [("PRISM_SEARCH_HEARTBEAT_S", "abc"), ("PRISM_SEARCH_GRACE_S", "-5")])
def test_a_bad_heartbeat_setting_is_one_line_naming_the_variable(study_toml, variable, value, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(variable, value)
    code, out, _ = cli(monkeypatch, capsys, tmp_path, "--help")
    assert code == 0 and "Usage" in out  # --help reads no storage: the setting does not matter to it
    study_toml(name="T.toml")
    refused(monkeypatch, capsys, tmp_path, ("run", "T.toml"), variable, repr(value))
    refused(monkeypatch, capsys, tmp_path, ("status", "--storage", f"sqlite:///{tmp_path / 'T.toml'}"), variable)


def test_deeply_nested_toml_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "deep.toml").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    refused(monkeypatch, capsys, tmp_path, ("run", "deep.toml"), "deep.toml", "nested")


def test_a_utf8_byte_order_mark_is_accepted(study_toml, tmp_path, monkeypatch, capsys):
    path = study_toml(name="T.toml")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    code, out, err = cli(monkeypatch, capsys, tmp_path, "schedules", "T.toml")
    assert code == 0 and "ramp:" in out, err


# --- item 6: a password with `#`, `?`, a space, a quote or a tab is masked wherever a URL is stored or shown -----------
ODD_PASSWORDS = ["pa#ss", "pa?ss", "pa ss", "pa'ss", 'pa"ss', "pa\tss", "pa/ss", "#?' \t\""]


@pytest.mark.parametrize("password", ODD_PASSWORDS)
@pytest.mark.parametrize(
    "template",
    [
        "postgresql+psycopg://prism:{}@db:5432/studies",
        "postgresql+psycopg://db/s?password={}&sslmode=require",
        "http://prism:{}@mlflow:5000",
    ],
    ids=["userinfo", "query", "tracker"],
)
def test_mask_url_hides_a_password_with_any_character(template, password):
    masked = mask_url(template.format(password))
    assert masked == template.format("***")  # the password went, and nothing else
    assert mask_url(masked) == masked and lost_credentials(masked)


def test_an_unreachable_server_error_never_shows_a_password_with_a_space(tmp_path, monkeypatch, capsys):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql+psycopg://prism:pa ss#1@127.0.0.1:{port}/studies"
    err = refused(monkeypatch, capsys, tmp_path, ("status", "--storage", url), "unreachable", "prism:***@")
    assert "pa ss" not in err and "ss#1" not in err


@pytest.fixture
def odd_password_url():
    """A real PostgreSQL role whose password holds `#`, `?`, a space, both quotes and a tab, owning a fresh database."""
    tag = uuid.uuid4().hex[:10]
    role, database, password = f"prism_odd_{tag}", f"prism_test_{tag}", "pa#ss?w 'q\"\tt"
    admin = sqlalchemy.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT", poolclass=sqlalchemy.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{password.replace(chr(39), chr(39) * 2)}'"))
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{database}" OWNER "{role}"'))
    try:
        yield f"postgresql+psycopg://{role}:{password}@127.0.0.1:5432/{database}", password
    finally:
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
            conn.execute(sqlalchemy.text(f'DROP ROLE IF EXISTS "{role}"'))
        admin.dispose()


def test_a_password_with_odd_characters_is_stored_and_shown_nowhere(odd_password_url, tiny_config, tmp_path, monkeypatch, capsys):
    """The study's stored config, `status`, the report and the dashboard's banner and pages."""
    url, password = odd_password_url
    config = tiny_config.model_copy(update={"storage": url})
    storage = open_storage(url)
    study = open_study(config, storage, check_corpus(config)).study
    forms = {password, quote(password, safe=""), quote_plus(password), "pa#ss", "pa ss", "ss?w"}
    shown = [study.user_attrs["prism.config"]]
    storage.engine.dispose()
    code, out, err = cli(monkeypatch, capsys, tmp_path, "status", "--storage", url)
    assert code == 0, err
    shown += [out, err]
    code, out, err = cli(monkeypatch, capsys, tmp_path, "report", "tiny", "-o", "r.html", "--storage", url)
    assert code == 0, err
    shown += [out, err, (tmp_path / "r.html").read_text()]
    app = Dashboard(url)
    for path in ("/", "/study/tiny"):
        status, page = get(app, path)
        assert status == "200 OK"
        shown.append(page)
    leaks = [(f, text[:200]) for text in shown for f in forms if f in text]
    assert not leaks, leaks
    assert all(html.escape(mask_url(url)) in page for page in shown[-2:])  # the banner names the database, masked


# --- item 7: one driver per SQLite file, whatever the URL says -------------------------------------------------------
@pytest.fixture
def locked_study(tiny_config, tmp_path):
    """The tiny study created in tmp_path/study.db, its driver lock held by this test (as a running driver holds it).
    Its connections are closed first: the last one to close folds the -wal file into study.db, which must not
    happen inside the refused command's snapshot (it did, under load, whenever garbage collection ran late)."""
    storage = open_storage(tiny_config.storage)
    open_study(tiny_config, storage, check_corpus(tiny_config))
    dispose(storage)
    with driver_lock(tiny_config.storage):
        yield tmp_path / "study.db"


@pytest.mark.parametrize("spelling", ["query", "symlink", "relative"])
def test_a_second_driver_is_refused_whatever_the_sqlite_url_says(study_toml, spelling, locked_study, tmp_path, monkeypatch, capsys):
    (tmp_path / "link.db").symlink_to(locked_study)
    path = {"query": f"{locked_study}?timeout=30", "symlink": str(tmp_path / "link.db"), "relative": "./study.db"}[spelling]
    study_toml(name="T.toml")
    lock = Path(f"{locked_study}.driver.lock")
    stamp = lock.stat().st_mtime_ns
    refused(monkeypatch, capsys, tmp_path, ("run", "T.toml", "--storage", f"sqlite:///{path}"), "in use by another prism-search driver")
    assert lock.stat().st_mtime_ns == stamp  # the refused driver did not rewrite the holder's lock file


def test_read_commands_accept_a_query_string_on_a_sqlite_url(tiny_config, tmp_path, monkeypatch, capsys):
    open_study(tiny_config, open_storage(tiny_config.storage), check_corpus(tiny_config))
    code, out, err = cli(monkeypatch, capsys, tmp_path, "status", "tiny", "--storage", f"{tiny_config.storage}?timeout=30")
    assert code == 0 and "study tiny" in out, err
    assert sorted(p.name for p in tmp_path.iterdir() if "?" in p.name) == []


# --- item 8: rich markup in what a user named is printed as written ------------------------------------------------------
def test_markup_in_a_reference_name_is_printed_as_written(tiny_config, tmp_path, monkeypatch, capsys):
    config = tiny_config.model_copy(update={"space": tiny_config.space.model_copy(update={"references": ["[/x]=1x2,2x1", "[bold]w=4x3"]})})
    study = open_study(config, open_storage(config.storage), check_corpus(config)).study
    while study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):  # what the driver stores, untrained
        trial = study.ask()
        study.tell(trial, 2.0 + trial.number / 100)
    code, out, err = cli(monkeypatch, capsys, tmp_path, "status", "--storage", config.storage)
    assert code == 0, err
    assert "reference [/x]" in out and "reference [bold]w" in out, out


# --- item 13: the dashboard's odd requests and its stop ---------------------------------------------------------------
@pytest.fixture
def dash_db(tmp_path) -> Path:
    """A SQLite file with one synthetic prism study, every connection to it closed (no -wal or -shm beside it)."""
    from tests.search.dashboard.conftest import quickstart
    from tests.search.synthetic import synthetic_study

    storage = open_storage(f"sqlite:///{tmp_path / 'dash.db'}")
    synthetic_study(quickstart("s"), storage, 6, failed=0)
    storage.engine.dispose()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dash.db"]
    return tmp_path / "dash.db"


@pytest.mark.parametrize("number", ["%C2%B2", "%D9%A3", "1e3", "-1"])  # superscript two, Arabic-Indic three: isdigit()
def test_a_trial_number_that_is_not_ascii_digits_is_a_404(number, dash_db):
    status = []
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "RAW_URI": f"/study/s/trial/{number}"}  # as our server sends it
    body = b"".join(Dashboard(f"sqlite:///{dash_db}")(environ, lambda s, h: status.append(s)))
    assert status == ["404 Not Found"] and "has no trial" in body.decode()


def test_repeated_study_parameters_cost_one_read_each(dash_db):
    app = Dashboard(f"sqlite:///{dash_db}")
    reads = []
    stamp = app.stamp
    app.stamp = lambda name: reads.append(name) or stamp(name)  # type: ignore[method-assign]
    status, body = get(app, "/api/stamp?" + "&".join(["study=s"] * 2000))
    assert status == "200 OK" and json.loads(body)["stamp"] and reads == ["s"]


def test_sigterm_stops_the_dashboard_and_leaves_no_wal_files(dash_db):
    proc = subprocess.Popen(
        [sys.executable, "-m", "search.cli", "dashboard", "--storage", f"sqlite:///{dash_db}", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        cwd=dash_db.parent,
    )
    try:
        line = proc.stderr.readline()  # "prism-search dashboard on http://127.0.0.1:PORT/ reading ..."
        url = line.split(" on ")[1].split()[0]
        with urllib.request.urlopen(url + "study/s", timeout=60) as page:
            assert page.status == 200
        assert (dash_db.parent / "dash.db-wal").exists() or (dash_db.parent / "dash.db-shm").exists()  # open, in WAL mode
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        proc.kill()
    assert sorted(p.name for p in dash_db.parent.iterdir()) == ["dash.db"]


# --- item 16: trackers are no part of a study's identity, and a failing one is one line ------------------------------
def test_tracking_added_to_an_existing_study_is_not_a_different_config(tiny_config, tmp_path):
    from search.config import TrackingSection

    storage = open_storage(tiny_config.storage)
    open_study(tiny_config, storage, check_corpus(tiny_config))
    tracked = tiny_config.model_copy(update={"tracking": TrackingSection(tensorboard=str(tmp_path / "runs"))})
    study = open_study(tracked, storage, check_corpus(tracked)).study
    assert json.loads(study.user_attrs["prism.config"])["tracking"]["tensorboard"] == str(tmp_path / "runs")


def test_a_failing_mlflow_tracker_prints_one_warning_and_none_of_mlflows(tmp_path):
    """A SQLite tracking store MLflow cannot open: MLflow logs a warning per retry (dozens of lines)."""
    target = f"sqlite:///{tmp_path / 'mlflow.db'}"
    (tmp_path / "mlflow.db").mkdir()  # a folder where the store's file should be: SQLite cannot open it
    script = (
        "import optuna, mlflow.store.db.utils\n"
        "from search.tracking import MLflowTracker\n"
        "optuna.logging.set_verbosity(optuna.logging.WARNING)\n"
        "mlflow.store.db.utils.MAX_RETRY_COUNT = 4  # MLflow's 15 retries take ~100 s; 4 still warn 3 times\n"
        "trial = optuna.trial.create_trial(value=1.0, user_attrs={'schedule': '2x2', 'heads_00': 2, 'heads_01': 2})\n"
        f"MLflowTracker({target!r})(optuna.create_study(study_name='s'), trial)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tracking.mlflow ({target}) failed on trial"), done.stderr


# --- item 10: odd values in a database -----------------------------------------------------------------------------
@pytest.fixture
def odd_trial_db(tiny_config) -> str:
    """Studies whose baselines and one search trial (4x3) finished and whose last trial another tool wrote: `inf`
    holds a value inf (a curve of inf too), `bad` holds the schedule attr "9x9x9" (no schedule of the study) as its
    best trial."""
    storage = open_storage(tiny_config.storage)
    for name, schedule, value in (("inf", "2x3", float("inf")), ("bad", "9x9x9", 1.0)):
        config = tiny_config.model_copy(update={"name": name})
        study = open_study(config, storage, check_corpus(config)).study
        while study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
            trial = study.ask()
            study.tell(trial, 2.0 + trial.number / 100)
        for schedule_attr, heads, final in (("4x3", 4, 2.5), (schedule, 2, value)):
            trial = study.ask()
            attrs = {"schedule": schedule_attr, "role": "search", "seed": 0, "curve": [[100, final]]}
            for key, v in (attrs | {f"heads_0{i}": heads for i in range(3)}).items():
                trial.set_user_attr(key, v)
            study.tell(trial, final)
    storage.engine.dispose()
    return tiny_config.storage


@pytest.mark.parametrize("name", ["inf", "bad"])
def test_odd_trial_values_leave_every_reader_working(name, odd_trial_db, tmp_path, monkeypatch, capsys):
    for args in (("status", name), ("best", name), ("report", name, "-o", "r.html")):
        code, out, err = cli(monkeypatch, capsys, tmp_path, *args, "--storage", odd_trial_db)
        assert code == 0, (args, err)
    code, out, err = cli(monkeypatch, capsys, tmp_path, "export", name, "--format", "json", "--storage", odd_trial_db)
    assert code == 0, err
    rows = json.loads(out, parse_constant=lambda c: pytest.fail(f"invalid JSON constant {c}"))
    assert rows[-1]["val_loss"] == (None if name == "inf" else 1.0)
    app = Dashboard(odd_trial_db)
    for path in ("/", f"/study/{name}", f"/study/{name}/trial/{rows[-1]['number']}", f"/api/stamp?study={name}"):
        assert get(app, path)[0] == "200 OK", path


# --- item 14: a signal at any moment ends with exit 130 and what to do next ------------------------------------------
def _cli_signalled(
    folder: Path, target: str, signum: int, *args: str, background: bool = False, inside: bool = False
) -> subprocess.CompletedProcess:
    """`prism-search ARGS` in a fresh process that sends itself `signum` when `target` (module.function) is
    reached: a real signal, at a moment a test could not hit by timing. `background`: started as a shell starts
    `cmd &`, with SIGINT ignored. `inside`: the target then runs, so the signal arrives inside it, and the file
    `returned` is written if the target returns."""
    module, _, function = target.rpartition(".")
    script = (
        f"import importlib, os, sys\n"
        f"module = importlib.import_module({module!r})\n"
        f"original = getattr(module, {function!r})  # a renamed target must fail the test, not go unreached\n"
        f"def arrive(*args, **kwargs):\n"
        f"    os.kill(os.getpid(), {int(signum)})\n"
        f"    if {inside}:\n"
        f"        result = original(*args, **kwargs)\n"
        f"        open('returned', 'w').close()\n"
        f"        return result\n"
        f"    raise AssertionError('the signal was not acted on')\n"
        f"setattr(module, {function!r}, arrive)\n"
        f"from search.cli import main\n"
        f"sys.argv = ['prism-search', *{list(args)!r}]\n"
        f"main()\n"
    )
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if background else None
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=folder, preexec_fn=ignore)


def test_sigterm_before_ray_is_up_exits_130_with_the_resume_command(study_toml, tmp_path):
    study_toml(name="T.toml")
    done = _cli_signalled(tmp_path, "search.runner.cluster.connect_ray", signal.SIGTERM, "run", "T.toml")
    assert done.returncode == 130, done.stderr
    assert "prism-search resume tiny --storage sqlite:///prism_search.db" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.e2e
def test_ctrl_c_inside_ray_s_start_up_stops_the_run_once_ray_is_up(study_toml, tmp_path):
    """The interrupt is held until `ray.init` returns (an interrupt inside it once crashed the process with a
    segfault, exit 139), then stops the run as anywhere else: nothing trained, the resume command printed."""
    study_toml(name="T.toml")
    done = _cli_signalled(tmp_path, "ray.init", signal.SIGINT, "run", "T.toml", inside=True)
    assert done.returncode == 130, done.stderr
    assert "prism-search resume tiny --storage sqlite:///prism_search.db" in done.stderr and "Traceback" not in done.stderr
    assert (tmp_path / "returned").exists() and "COMPLETE" not in done.stdout + done.stderr  # Ray came up, nothing trained


def test_ctrl_c_before_the_study_exists_offers_no_resume_command(study_toml, tmp_path):
    study_toml(name="T.toml")
    done = _cli_signalled(tmp_path, "search.runner.preflight.preflight", signal.SIGINT, "run", "T.toml")
    assert done.returncode == 130, done.stderr
    assert "before study 'tiny' was created" in done.stderr and "resume" not in done.stderr, done.stderr


@pytest.mark.parametrize("signum, background", [(signal.SIGTERM, False), (signal.SIGINT, True)], ids=["sigterm", "sigint-background"])
def test_an_interrupted_confirm_says_what_was_kept_and_how_to_go_on(signum, background, odd_trial_db, tmp_path):
    done = _cli_signalled(
        tmp_path,
        "search.runner.cluster.connect_ray",
        signum,
        "confirm",
        "inf",
        "--top",
        "1",
        "--storage",
        odd_trial_db,
        background=background,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.startswith("interrupted: the confirmation runs finished so far are stored") and "confirm inf" in done.stderr


def test_the_database_unreachable_message_names_the_storage_to_resume_with(tiny_config):
    from search.runner.driver import Driver

    driver = Driver.__new__(Driver)  # only _db and its config: the message under test
    driver.config, driver.progress = tiny_config, None

    def lost():
        raise sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("server closed the connection"))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("search.runner.driver.DB_RETRY_DELAYS_S", (0.0,))
        with pytest.raises(PrismSearchError, match=f"prism-search resume tiny --storage {re.escape(tiny_config.storage)}"):
            driver._db(lost)


def _one_line(code: int, err: str, *names: str) -> None:
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for name in names:
        assert name in err, (name, err)


def test_a_corrupted_page_is_one_line_in_every_reading_command(odd_trial_db, tmp_path, monkeypatch, capsys):
    """Each page of the file corrupted in turn (the first, the header, stays): every reading command answers or
    fails in one line, and the database file is left as it was."""
    db = Path(odd_trial_db.removeprefix("sqlite:///"))
    clean, page = db.read_bytes(), 4096
    malformed = 0
    for start in range(page, len(clean), page):
        data = clean[: start + 8] + b"\xff" * 1992 + clean[start + 2000 :]
        db.write_bytes(data)
        for args in (("status",), ("best", "inf"), ("export", "bad")):
            code, _out, err = cli(monkeypatch, capsys, tmp_path, *args, "--storage", odd_trial_db)
            if code:
                _one_line(code, err)
                malformed += "database disk image is malformed" in err
        assert db.read_bytes() == data
    assert malformed  # some page held what the commands read


def test_a_database_write_locked_by_another_process_is_one_line_after_the_wait(study_toml, tiny_config, tmp_path, monkeypatch, capsys):
    import sqlite3

    import search.storage.database

    monkeypatch.setattr(search.storage.database, "SQLITE_BUSY_TIMEOUT_S", 2)  # the same wait, shorter
    db = tmp_path / "study.db"
    open_study(tiny_config, open_storage(tiny_config.storage), check_corpus(tiny_config))
    other = sqlite3.connect(db, isolation_level=None)  # another program (a sqlite3 shell) holding the write lock
    other.execute("BEGIN EXCLUSIVE")
    try:
        study_toml(("n_trials = 5", "n_trials = 6"), name="T.toml")  # a new target: run must write
        code, _out, err = cli(monkeypatch, capsys, tmp_path, "run", "T.toml", "--storage", tiny_config.storage)
    finally:
        other.execute("ROLLBACK")
        other.close()
    _one_line(code, err, "database is locked", "fix: wait for the other process")


# --- item 15: the paired baseline by name, whichever trial number it got ---------------------------------------------
def test_audit_and_analyze_find_the_baseline_after_an_interrupted_first_try(study_toml, tiny_config, tmp_path, monkeypatch, capsys):
    """Trial 0 (the baseline's first try) was interrupted; its retry, another trial, finished with a checkpoint."""
    from search.study.create import enqueue_missing_baselines

    study_toml(name="T.toml")
    code, out, err = cli(monkeypatch, capsys, tmp_path, "train", "uniform", "--config", "T.toml", "--steps", "2", "--save", "model")
    assert code == 0, err
    ctx = open_study(tiny_config, open_storage(tiny_config.storage), check_corpus(tiny_config))
    study = ctx.study
    first = study.ask()
    first.set_user_attr("error", "interrupted")
    study.tell(first, state=optuna.trial.TrialState.FAIL)
    enqueue_missing_baselines(ctx, retry_failed=True)  # queued again, as the driver does
    meta = json.loads((tmp_path / "model" / "config.json").read_text())  # the study's own, as its worker records it
    (tmp_path / "model" / "config.json").write_text(json.dumps(meta | {"study_uid": study.user_attrs["prism.study_uid"]}))
    while study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
        trial = study.ask()
        trial.set_user_attr("checkpoint", str(tmp_path / "model"))
        study.tell(trial, 2.0 + trial.number / 100)
    retry = next(t for t in study.trials[1:] if t.user_attrs["role"] == "baseline" and t.user_attrs["seed"] == tiny_config.seed)
    assert retry.number != 0

    storage = ("--storage", tiny_config.storage)
    code, out, err = cli(monkeypatch, capsys, tmp_path, "audit", "tiny:0", *storage)
    _one_line(code, err, "trial 0 of study 'tiny' is FAIL", f"the paired baseline is trial {retry.number} (tiny:baseline)")
    code, out, err = cli(monkeypatch, capsys, tmp_path, "audit", "tiny:baseline", "-o", "p.json", *storage)
    assert code == 0 and json.loads((tmp_path / "p.json").read_text())["schedule"] == "1x3", err
    code, out, err = cli(monkeypatch, capsys, tmp_path, "analyze", "tiny:baseline", *storage)
    assert code == 0 and "schedule 1x3" in out, err


def test_ctrl_c_while_the_config_is_read_says_nothing_was_stored(study_toml, tmp_path):
    """Before the lifecycle starts (reading the config) typer turns Ctrl-C into a silent exit 130: one line too."""
    study_toml(name="T.toml")
    done = _cli_signalled(tmp_path, "search.config.read_toml", signal.SIGINT, "run", "T.toml")
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "interrupted before anything was stored", done.stderr
    assert not (tmp_path / "prism_search.db").exists()
