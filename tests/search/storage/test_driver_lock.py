"""One driver at a time on a SQLite file: SQLite has no row locks, so two drivers could both
claim one queued trial. A second driver is refused in one line naming the fix; a killed driver leaves no lock."""

import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
from optuna.trial import TrialState

from search.errors import StorageError
from search.storage import driver_lock
from tests.search.conftest import ROOT

pytestmark = pytest.mark.e2e


def test_a_second_driver_on_one_sqlite_file_is_refused_and_a_killed_one_leaves_no_lock(tmp_path, study_toml):
    url = f"sqlite:///{tmp_path / 'two.db'}"
    # the free family's 27 schedules: the first driver cannot finish its 40 runs (and free the lock) before the second
    # has started, as tiny's 10-schedule space once did on a loaded machine
    toml = str(study_toml(("n_trials = 5", "n_trials = 40"), ("[train]", '[space]\nfamily = "free"\n\n[train]')))
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(
            [sys.executable, "-m", "search.cli", "run", toml, "--storage", url, "--workers", "1"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its local Ray dies with its group below
            cwd=ROOT,
        )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # the first driver is training
            try:
                if optuna.load_study(study_name="tiny", storage=url).get_trials(states=(TrialState.RUNNING,)):
                    break
            except Exception:  # no file, tables or study yet
                pass
            assert first.poll() is None, (tmp_path / "first.log").read_text()
            time.sleep(0.5)
        else:
            raise AssertionError("the first driver never started a trial")

        second = subprocess.run(
            [sys.executable, "-m", "search.cli", "run", toml, "--storage", url, "--workers", "1"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr
        assert "in use by another prism-search driver" in second.stderr and f"pid {first.pid}" in second.stderr
        assert "fix: wait for it to finish, or put the study on PostgreSQL" in second.stderr
        assert "Ray" not in second.stdout  # refused before any compute
        with pytest.raises(StorageError, match="in use by another prism-search driver"), driver_lock(url):
            pass
        assert first.poll() is None  # the first one drives on
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # kill -9, Ray and all
        first.wait()
    with driver_lock(url):  # the flock died with its process: no stale lock
        pass
