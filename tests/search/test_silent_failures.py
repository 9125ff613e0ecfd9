"""Failures that used to pass in silence: a checkpoint folder nothing can be written in, an empty --storage, a
database driver that is not installed, a folder given as a config, and a model that did not fit on the disk. Each is
one line (exit 2) naming its cause, before any compute where it can be known before."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from search.cli import app
from search.errors import ConfigError
from search.runner.preflight import check_folder
from tests.search.analysis.test_summary import UNIFORM, add, make_study
from tests.search.conftest import ROOT, small_file_system
from tests.search.test_adversarial_io import cli

TINY = str(ROOT / "studies" / "tiny.toml")


def one_line(code: int, err: str, *fragments: str) -> None:
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, (code, err)
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_a_checkpoint_dir_the_file_system_refuses_is_refused_before_training(study_toml, tmp_path, monkeypatch, capsys):
    """/proc is a folder root may "write" by its mode bits, yet nothing can be made in it: the check tries."""
    with pytest.raises(ConfigError, match=r"checkpoint_dir '/proc/prism': cannot make a folder in '/proc' \("):
        check_folder("/proc/prism", "checkpoint_dir")
    check_folder(str(tmp_path / "new" / "deeper"), "checkpoint_dir")  # a folder that can be made passes, and is not made
    assert not (tmp_path / "new").exists()
    study_toml(("seed = 0", "seed = 0\ncheckpoint_dir = '/proc/prism'"), name="T.toml")
    code, _, err = cli(monkeypatch, capsys, tmp_path, "run", "T.toml", "--storage", f"sqlite:///{tmp_path / 's.db'}")
    one_line(code, err, "checkpoint_dir '/proc/prism'", "(fix: point checkpoint_dir at a writable folder)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["T.toml"]  # no database, no study


@pytest.mark.parametrize("args", [["status"], ["best", "x"], ["export", "x"], ["resume", "x"], ["dashboard"], ["report", "x"]])
def test_an_empty_storage_is_refused_not_read_as_the_default(args, tmp_path, monkeypatch, capsys):
    code, _, err = cli(monkeypatch, capsys, tmp_path, *args, "--storage", "")
    one_line(code, err, "--storage", "empty")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url, driver", [("mysql://u@h/db", "MySQLdb"), ("mysql+pymysql://u:pw@h/db", "pymysql")])
def test_a_database_driver_that_is_not_installed_is_named_as_missing(url, driver, tmp_path, monkeypatch, capsys):
    code, _, err = cli(monkeypatch, capsys, tmp_path, "status", "--storage", url)
    one_line(code, err, f"needs the database driver {driver!r}, which is not installed", "(fix: ")
    assert "not a valid SQLAlchemy URL" not in err and "pw" not in err


def test_a_folder_given_as_a_config_is_named_a_folder(tmp_path, monkeypatch, capsys):
    (tmp_path / "studies").mkdir()
    for command in (["run", "studies"], ["schedules", "studies"], ["train", "uniform", "--config", "studies"]):
        code, _, err = cli(monkeypatch, capsys, tmp_path, *command)
        one_line(code, err, "'studies' is a folder", "(fix: ")
        assert "not found" not in err


def test_train_save_on_a_disk_with_room_for_the_config_but_not_the_weights(tmp_path, monkeypatch, capsys):
    """The weights' writer (safetensors) reports a full disk as its own error, not an OSError."""
    with small_file_system(tmp_path / "small", "128k") as small:
        target = small / "model"
        code, out, err = cli(
            monkeypatch, capsys, tmp_path, "train", "uniform", "--config", TINY, "--steps", "4", "--save", str(target), "--json"
        )
        one_line(code, err, f"model not saved to {target}: ", "No space left on device")
        assert json.loads(out)["steps"] == 4  # the trained result, printed before the error
        assert not target.exists()  # no half-written checkpoint


def test_status_names_the_models_that_could_not_be_saved(tiny_config, monkeypatch):
    from search import cli as cli_module

    monkeypatch.setattr(cli_module.console, "width", 250)  # one table row per line
    study = make_study(tiny_config, "unsaved")
    add(study, UNIFORM, 0, 2.05, role="baseline", checkpoint_error="model not saved to /ck/unsaved/trial-00000: No space left on device")
    add(study, "4x3", 0, 2.0)
    result = CliRunner().invoke(app, ["status", "unsaved", "--storage", tiny_config.storage])
    assert result.exit_code == 0, result.output
    assert "models not saved" in result.stdout and "trial 0: model not saved to /ck/unsaved/trial-00000: No space left" in result.stdout
