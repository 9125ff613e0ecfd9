"""One bad value cannot poison a study's numbers: a COMPLETE run whose value is inf is a failed run for the
statistics (left out, counted and named), and RUNNING trials whose driver was killed are named with the command
that recovers them."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from search.analysis import stored_study, summarize
from search.analysis.summary import DriverGone, NotFinite
from search.cli import app
from search.text import driver_gone_text, gap_text, not_finite_text, summary_json, verdict_text
from tests.search.analysis.test_summary import UNIFORM, add, make_study
from tests.search.conftest import ROOT
from tests.search.study.test_export import strict_json

runner = CliRunner()


def _numbers(value) -> list[float]:
    """Every float in a JSON-like value."""
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v)]
    return []


def test_an_infinite_value_is_left_out_of_every_number_and_named(tiny_config, monkeypatch):
    from search import cli

    monkeypatch.setattr(cli.console, "width", 250)  # one table row per line
    study = make_study(tiny_config, "inf")
    for seed, base in enumerate((2.05, 2.08, 2.03)):
        add(study, UNIFORM, seed, base, role="baseline")
    for seed, value in enumerate((2.00, 2.02, 1.99)):
        add(study, "4x3", seed, value, role="search" if seed == 0 else "race")
    add(study, "2x3", 0, math.inf)  # trial 6: a run that diverged without raising
    add(study, "2x3", 1, 2.04, role="race")
    s = summarize(study)
    assert s.not_finite == [NotFinite(6, "2x3", 0, {"val_loss": math.inf})]
    assert not_finite_text(s.not_finite) == "trial 6 (2x3 seed 0): val_loss inf: failed runs for the statistics, in no mean or gap"
    assert "nan" not in verdict_text(s.verdict, s.name) and "nan" not in gap_text(s) and s.best_schedule == "4x3"
    stats = {k: v for k, v in summary_json(s).items() if k != "not_finite"}  # the row naming the run holds its inf
    assert all(math.isfinite(x) for x in _numbers(stats))
    assert [g.schedule for g in s.gaps] == ["4x3", "2x3"] and s.gaps[1].seeds == (1,)  # its finite run still counts

    url = ["--storage", tiny_config.storage]
    status = runner.invoke(app, ["status", "inf", *url])
    assert status.exit_code == 0 and "nan" not in status.stdout, status.output
    assert "left out (not finite)" in status.stdout and "trial 6 (2x3 seed 0): val_loss inf" in status.stdout
    best = runner.invoke(app, ["best", "inf", *url])
    assert best.exit_code == 0 and "nan" not in best.stdout and best.stdout.splitlines()[1].startswith("4x3\t"), best.output
    as_json = strict_json(runner.invoke(app, ["status", "inf", *url, "--json"]).stdout)
    assert as_json["not_finite"] == [{"number": 6, "schedule": "2x3", "seed": 0, "values": {"val_loss": None}}] and all(
        math.isfinite(x) for x in _numbers(as_json)
    )


def test_an_infinite_baseline_is_no_baseline(tiny_config):
    study = make_study(tiny_config, "inf-base")
    add(study, UNIFORM, 0, math.inf, role="baseline")
    add(study, "4x3", 0, 2.0)
    s = summarize(study)
    assert s.baseline_value is None and s.best_gap is None and s.not_finite == [NotFinite(0, "1x3", 0, {"val_loss": math.inf})]
    assert "nan" not in verdict_text(s.verdict, s.name) and s.best_value == 2.0


_HOLDER = """
import sys, time
import optuna
from search.storage import driver_lock, open_storage, storage_of, trial_id
url, locked = sys.argv[1], sys.argv[2] == "locked"
with driver_lock(url) if locked else open(__file__):
    study = optuna.load_study(study_name="killed", storage=open_storage(url))
    trial = study.ask()  # RUNNING, with a heartbeat, as the driver's
    storage_of(study).record_heartbeat(trial_id(trial))
    print(trial.number, flush=True)
    while True:  # beating, as a live driver does
        time.sleep(0.5)
        storage_of(study).record_heartbeat(trial_id(trial))
"""


@pytest.mark.parametrize("locked", [True, False], ids=["driver-lock", "heartbeat"])
def test_status_says_the_driver_of_running_trials_is_gone_and_resume_recovers_them(tiny_config, tmp_path, monkeypatch, locked):
    """kill -9 a process that holds a RUNNING trial as the driver does: on a SQLite file its driver lock names a
    process that has ended (said at once); without it (PostgreSQL's case) its heartbeat goes stale."""
    from search import cli

    monkeypatch.setattr(cli.console, "width", 250)  # one table row per line
    monkeypatch.setenv("PRISM_SEARCH_HEARTBEAT_S", "1")
    monkeypatch.setenv("PRISM_SEARCH_GRACE_S", "2")
    study = make_study(tiny_config, "killed")
    add(study, UNIFORM, 0, 2.05, role="baseline")
    script = tmp_path / "holder.py"
    script.write_text(textwrap.dedent(_HOLDER))
    holder = subprocess.Popen(
        [sys.executable, str(script), tiny_config.storage, "locked" if locked else "plain"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )
    try:
        number = int(holder.stdout.readline())  # type: ignore[union-attr]
        alive = runner.invoke(app, ["status", "killed", "--storage", tiny_config.storage])
        assert alive.exit_code == 0 and "driver gone" not in alive.stdout, alive.output  # its driver lives
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    if not locked:
        import time

        time.sleep(3)  # past the grace period
    s = summarize(stored_study("killed", tiny_config.storage))  # opened as `status` opens it: with heartbeats
    why = f"its driver (pid {holder.pid}) has ended" if locked else "its driver sent no heartbeat within the grace period"
    assert s.driver_gone == DriverGone([number], holder.pid if locked else None)
    assert driver_gone_text(s.driver_gone, "killed") == (
        f"trial {number} RUNNING, but {why}: nothing trains it; `prism-search resume killed` runs it again"
    )
    status = runner.invoke(app, ["status", "killed", "--storage", tiny_config.storage])
    assert "driver gone" in status.stdout and "prism-search resume killed" in status.stdout, status.output
