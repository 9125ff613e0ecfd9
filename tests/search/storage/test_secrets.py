"""Credentials are never stored and never shown: a study keeps its config with the storage URL
masked, every reader takes the real URL from --storage, and every printed URL is masked."""

import json
import re
import subprocess
import sys
import uuid
from urllib.parse import quote

import optuna
import pytest
import sqlalchemy
from hypothesis import given, settings
from hypothesis import strategies as st

from search.config import TrackingSection
from search.outputs.urls import mask_in, mask_url
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.study.create import open_study
from tests.search.conftest import ROOT
from tests.search.pg import ADMIN_URL
from tests.search.storage.test_read_only import snapshot

_URL_REGEX = re.compile(r"[A-Za-z][\w+.-]*://[^\s'\"<>]+")  # what mask_in finds, as a regex states it
_PIECES = ["a", "B", "1", "_", "+", ".", "-", ":", "/", "@", " ", "'", '"', "<", "\t", "é", "://", "pg://u:pw@h/d", "?password=x"]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_mask_in_finds_the_urls_the_regex_finds(text):
    """mask_in finds URLs from each `://` outwards, in linear time (the regex retries every start inside a long word:
    4 s on 40,000 characters); it must find exactly what the regex does, leftmost first."""
    assert mask_in(text) == _URL_REGEX.sub(lambda m: mask_url(m.group(0)), text)


def test_mask_in_masks_a_url_inside_a_long_word_and_after_a_long_one():
    assert mask_in("x" * 40_000 + " pg://u:pw@h/d") == "x" * 40_000 + " pg://u:***@h/d"
    assert mask_in("_pg://u:pw@h/d") == "_pg://u:***@h/d"  # a scheme starts at its first letter


@pytest.mark.parametrize(
    "url, secret",
    [
        ("postgresql+psycopg://prism:s3cret@db:5432/studies", "s3cret"),
        ("postgresql+psycopg://:s3cret@db/studies", "s3cret"),  # a password without a user
        ("postgresql+psycopg://prism:p%40ss%2Fw0rd@db/studies", "p%40ss%2Fw0rd"),  # percent-encoded
        ("postgresql+psycopg://prism:p@ss@db/studies", "p@ss"),  # a raw `@`, as users type it
        ("postgresql+psycopg://db/studies?user=prism&password=s3cret&sslmode=require", "s3cret"),
        ("postgresql+psycopg://db/studies?sslpassword=s3cret", "s3cret"),
        ("http://prism:s3cret@mlflow:5000", "s3cret"),  # a tracking URI
    ],
)
def test_mask_url_hides_every_form_of_password_and_keeps_the_rest(url, secret):
    masked = mask_url(url)
    assert secret not in masked and "***" in masked
    assert masked.split("***")[0] in url and masked.rsplit("***", 1)[1] in url  # only the secret went
    assert mask_url(masked) == masked


@pytest.mark.parametrize("url", ["sqlite:////tmp/a@b:c.db", "postgresql+psycopg://prism@db:5432/studies", "sqlite:///prism_search.db"])
def test_mask_url_leaves_urls_without_a_password_alone(url):
    assert mask_url(url) == url


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "search.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=400)


@pytest.mark.e2e
def test_a_password_in_the_storage_url_is_stored_nowhere_and_resume_takes_it_again(study_toml):
    """A real PostgreSQL role with a password: after `run` and `resume`, no row of any table holds it, nor any output."""
    tag = uuid.uuid4().hex[:10]
    role, database, password = f"prism_secret_{tag}", f"prism_test_{tag}", f"pw@{tag}/:?x"
    admin = sqlalchemy.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT", poolclass=sqlalchemy.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{password}'"))
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{database}" OWNER "{role}"'))
    url = f"postgresql+psycopg://{role}:{quote(password, safe='')}@127.0.0.1:5432/{database}"
    forms = {password, quote(password, safe=""), quote(password)}
    try:
        toml = study_toml(("n_trials = 5", "n_trials = 2"))  # the two baselines
        run = _cli("run", str(toml), "--storage", url, "--workers", "1")
        assert run.returncode == 0, run.stderr
        resume = _cli("resume", "tiny", "--storage", url, "--n-trials", "3", "--workers", "1")  # one more trial, trained
        assert resume.returncode == 0, resume.stderr
        for output in (run.stdout, run.stderr, resume.stdout, resume.stderr):
            assert not any(f in output for f in forms), output

        study = optuna.load_study(study_name="tiny", storage=url)
        assert len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) == 3
        assert json.loads(study.user_attrs["prism.config"])["storage"] == mask_url(url)
        engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
        with engine.connect() as conn:
            tables = sqlalchemy.inspect(conn).get_table_names()
            assert "study_user_attributes" in tables and "trial_user_attributes" in tables
            cells = [str(v) for t in tables for row in conn.execute(sqlalchemy.text(f'SELECT * FROM "{t}"')) for v in row]
        engine.dispose()
        assert any(role in c for c in cells)  # the scan reads the stored config (user name kept, password masked)
        leaks = [c for c in cells if any(f in c for f in forms)]
        assert not leaks, leaks[:3]
    finally:
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
            conn.execute(sqlalchemy.text(f'DROP ROLE IF EXISTS "{role}"'))
        admin.dispose()


@pytest.mark.e2e
def test_tracking_uris_are_stored_masked_and_resume_or_confirm_asks_for_them_again(tmp_path, tiny_config):
    """A study keeps no tracker password either; a command that would log with the masked URI stops at one line
    naming `--track`, before it writes anything."""
    uri = "http://prism:s3cret@127.0.0.1:5999"
    config = tiny_config.model_copy(update={"tracking": TrackingSection(mlflow=uri)})
    storage = open_storage(config.storage)
    stored = open_study(config, storage, check_corpus(config)).study.user_attrs["prism.config"]
    assert "s3cret" not in stored and json.loads(stored)["tracking"]["mlflow"] == mask_url(uri)
    storage.engine.dispose()  # the last connection closed: SQLite folds its write-ahead log into the file

    before = snapshot(tmp_path)
    for command in (["resume", "tiny"], ["confirm", "tiny"]):
        result = _cli(*command, "--storage", config.storage)
        assert result.returncode == 2 and result.stdout == "", result.stderr
        assert result.stderr == (
            f"error: tracking.mlflow {mask_url(uri)!r}: a study stores tracking URIs without their credentials; "
            "fix: give it again with --track mlflow=URI\n"
        )
    assert snapshot(tmp_path) == before


def test_the_resume_command_printed_after_an_interrupt_says_where_the_masked_password_goes(tiny_config):
    from search.config import resume_command

    with_password = tiny_config.model_copy(update={"storage": "postgresql+psycopg://prism:s3cret@db/studies"})
    assert resume_command(with_password) == (
        "prism-search resume tiny --storage postgresql+psycopg://prism:***@db/studies   (your password in place of ***)"
    )
    assert resume_command(tiny_config) == f"prism-search resume tiny --storage {tiny_config.storage}"
