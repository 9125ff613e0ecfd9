"""$PRISM_SEARCH_STORAGE: the database every command and `Study` use when none is given, so the commands after
`run` find a study kept in another database without repeating --storage."""

import json

import pytest
from typer.testing import CliRunner

from search.cli import app
from search.errors import ConfigError
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.study import Study
from search.study.create import open_study

runner = CliRunner()


def test_commands_without_storage_read_the_database_the_variable_names(tiny_config, tmp_path, monkeypatch):
    open_study(tiny_config, open_storage(tiny_config.storage), check_corpus(tiny_config))
    monkeypatch.chdir(tmp_path)  # where the default database would be: it must stay absent
    monkeypatch.setenv("PRISM_SEARCH_STORAGE", tiny_config.storage)
    status = runner.invoke(app, ["status", "tiny", "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)["name"] == "tiny"
    assert Study.load("tiny").storage == tiny_config.storage and Study.all()[0][0].name == "tiny" and Study.all()[1:] == ([], {})
    assert not (tmp_path / "prism_search.db").exists()
    other = f"sqlite:///{tmp_path / 'other.db'}"  # the flag still wins
    assert "no prism-search studies in sqlite:///" in str(runner.invoke(app, ["status", "--storage", other]).exception)


def test_a_study_toml_s_storage_wins_over_the_variable(study_toml, tmp_path, monkeypatch):
    monkeypatch.setenv("PRISM_SEARCH_STORAGE", f"sqlite:///{tmp_path / 'env.db'}")
    named = study_toml(("n_trials = 5", f'n_trials = 5\nstorage = "sqlite:///{tmp_path / "toml.db"}"'))
    assert Study.create(named).storage == f"sqlite:///{tmp_path / 'toml.db'}"
    assert Study.create(study_toml()).storage == f"sqlite:///{tmp_path / 'env.db'}"


def test_an_empty_variable_is_one_line_naming_it(monkeypatch):
    monkeypatch.setenv("PRISM_SEARCH_STORAGE", " ")
    with pytest.raises(ConfigError, match="PRISM_SEARCH_STORAGE is set but empty"):
        Study.load("tiny")
    done = runner.invoke(app, ["status"])
    assert done.exit_code != 0 and "PRISM_SEARCH_STORAGE is set but empty" in str(done.exception)


def test_help_names_the_variable():
    assert "PRISM_SEARCH_STORAGE" in runner.invoke(app, ["status", "--help"]).output
