"""Output files: every one written by `search.outputs.write_output`, a temporary file beside the
target renamed over it, so a place that refuses the write, or a full disk, is one line and leaves the old file whole."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import optuna
import pytest

from search.errors import OutputError
from search.outputs import write_output
from search.storage import open_storage
from search.study.create import open_study
from tests.search.conftest import ROOT


def _cli(*args: str, cwd, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "search.cli", *args]
    return subprocess.run(command, cwd=cwd, env=env, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120)


def test_a_write_replaces_the_file_whole_and_keeps_its_mode(tmp_path):
    target = tmp_path / "report.html"
    target.write_text("old")
    target.chmod(0o640)
    write_output(target, "new", "-o", ".html")
    assert target.read_text() == "new" and target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary file left beside it


def test_a_full_disk_keeps_the_existing_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    """ENOSPC cannot be caused for real here (no small file system to fill): the data's sync to disk raises it."""
    target = tmp_path / "report.html"
    target.write_text("the old report")

    def full(_fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError) as info:
        write_output(target, "x" * 100_000, "-o", ".html")
    assert "No space left on device" in str(info.value) and "the existing file is unchanged" in str(info.value)
    assert target.read_text() == "the old report" and [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_a_place_that_refuses_files_is_one_error(tmp_path):
    """/sys takes no new files, even from root (who passes every permission check)."""
    with pytest.raises(OutputError, match=r"-o '/sys/r.html': cannot write in '/sys' \(Permission denied\)"):
        write_output("/sys/r.html", "x", "-o", ".html")


@pytest.fixture
def plain_study(tmp_path):
    """A study another Optuna client made (nothing to train): enough for report and export."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    optuna.create_study(study_name="plain", storage=url)
    return url


def test_report_to_a_read_only_place_is_one_line_and_keeps_the_old_report(tmp_path, plain_study):
    (tmp_path / "report.html").write_text("the old report")
    done = _cli("report", "plain", "-o", "/sys/report.html", "--storage", plain_study, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Permission denied" in done.stderr, done.stderr
    done = _cli("report", "plain", "-o", "report.html", "--storage", plain_study, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report.html").read_text().startswith("<!doctype html>")


def test_export_to_a_full_device_is_one_line(tmp_path, tiny_config):
    """A created study (its baselines queued, nothing trained) exports its header row, to a device that is full."""
    open_study(tiny_config, open_storage(tiny_config.storage), "fingerprint")
    with open("/dev/full", "w") as full:
        done = _cli("export", "tiny", "--storage", tiny_config.storage, cwd=tmp_path, stdout=full)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: export: cannot write to standard output (No space left on device) (fix: "), done.stderr
