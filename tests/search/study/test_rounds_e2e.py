"""A study confirmed in rounds, end to end through the CLI on local Ray: the example's own trainer (its python
function) with a real effect planted (uniform trains at lr 1e-9, so it learns nothing), stopped by SIGTERM in
confirmation round 2, resumed, and ending "better" on the frozen pick's post-freeze seeds alone."""

import signal
import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState

from search.analysis.budget import budget
from search.analysis.rounds import Rounds
from search.attrs import ATTR_ROUNDS
from search.study import Study
from search.text import method_text, verdict_text
from tests.search.trainers.conftest import EXAMPLE, ROOT

pytestmark = pytest.mark.e2e

UNIFORM = "1x3"  # the example's baseline: one head of 32 in each of 3 layers
PLANTED = """
import dataclasses

import train_gpt


def run(request, reporter):
    if request.schedule == "1x3":  # uniform learns nothing: every other schedule is truly better
        request = dataclasses.replace(request, options={**request.options, "lr": 1e-9})
    train_gpt.run(request, reporter)
"""


def _study_toml(tmp_path) -> str:
    """The example with the product's defaults for the search (no sampler, baseline_seeds or confirmation named) but
    smaller rounds (2 contenders, 2 post-freeze seeds), 3 search runs, no pruning, its trainer as a python function
    behind the planted effect: 10 runs in all."""
    (tmp_path / "planted.py").write_text(PLANTED)
    text = (EXAMPLE / "study.toml").read_text().partition("[trainer]")[0]
    for line in ('sampler = "tpe"\n', "baseline_seeds = 2\n"):
        assert line in text
        text = text.replace(line, "")
    text = text.replace("n_trials = 8", "n_trials = 3").replace('pruner = "median"', 'pruner = "none"\nconfirm_top = 2\nconfirm_seeds = 2')
    text = text.replace('keep_checkpoints = "none"', f'keep_checkpoints = "none"\ncheckpoint_dir = "{tmp_path / "runs"}"')
    text += f'[trainer]\nkind = "python"\nfunction = "planted:run"\npath = ["{tmp_path}", "{EXAMPLE}"]\n'
    path = tmp_path / "study.toml"
    path.write_text(text)
    return str(path)


def _cli(*args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "search.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT
    )


@pytest.mark.long
def test_a_study_stopped_in_round_two_resumes_and_is_better_on_post_freeze_seeds_alone(tmp_path):
    url = f"sqlite:///{tmp_path / 'rounds.db'}"
    proc = _cli("run", _study_toml(tmp_path), "--storage", url)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:  # stop it once round 2 has begun and one of its runs has finished
        lines.append(line)
        if any("confirmation round 2 of 2" in l for l in lines) and sum("COMPLETE" in l for l in lines) >= 7:
            proc.send_signal(signal.SIGTERM)
            break
    out = "".join(lines) + proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out  # SIGTERM stops a run as Ctrl-C does: what to run next, no crash banner
    assert f"prism-search resume own-trainer --storage {url}" in out
    assert "Traceback" not in out and "SIGTERM received" not in out, out
    study = optuna.load_study(study_name="own-trainer", storage=url)
    frozen = Rounds.from_json(study.user_attrs[ATTR_ROUNDS])
    assert len(frozen.contenders) == 2 and frozen.pick in frozen.contenders, out
    assert not study.get_trials(states=(TrialState.RUNNING,))

    proc = _cli("resume", "own-trainer", "--storage", url)
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, out
    study = optuna.load_study(study_name="own-trainer", storage=url)
    trials = study.get_trials()
    done = budget(trials, search_seed=0)
    assert (done.searched, done.confirmation) == (3, 7), [(t.number, t.state, t.user_attrs) for t in trials]
    assert Rounds.from_json(study.user_attrs[ATTR_ROUNDS]) == frozen  # resumed with what it froze

    verdict = Study.load("own-trainer", storage=url).verdict()
    post_freeze = (1001, 1002)
    assert verdict.kind == "better" and verdict.schedule == frozen.pick and verdict.seeds == post_freeze, verdict_text(verdict, "x")
    assert "Holm over 1" in method_text(verdict.method) and verdict.effect < -0.5  # uniform at lr 1e-9 learned nothing
    round_one = [t.number for t in trials if t.user_attrs.get("seed") == 1000 and t.state == TrialState.COMPLETE]
    round_two = [t for t in trials if t.user_attrs.get("seed") in post_freeze and t.state == TrialState.COMPLETE]
    assert {t.user_attrs["schedule"] for t in round_two} == {UNIFORM, frozen.pick} and len(round_two) == 4
    assert min(t.number for t in round_two) > max(round_one)  # every seed it is judged on ran after the freeze

    status = subprocess.run(
        [sys.executable, "-m", "search.cli", "status", "own-trainer", "--storage", url], capture_output=True, text=True, cwd=ROOT
    )
    assert status.stdout.startswith(f"own-trainer: better: {frozen.pick}") and "both rounds over" in status.stdout, status.stdout

    # the search goes on past its rounds: it says that what it adds is never confirmed, and the verdict stands
    proc = _cli("resume", "own-trainer", "--n-trials", "4", "--storage", url)
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0 and f"confirmation rounds: {frozen.pick} (the pick) frozen before this search went on" in out, out
    study = optuna.load_study(study_name="own-trainer", storage=url)
    assert budget(study.get_trials(), search_seed=0).searched == 4 and Rounds.from_json(study.user_attrs[ATTR_ROUNDS]) == frozen
    after = Study.load("own-trainer", storage=url).verdict()  # the blocked model refitted with one more run: same call
    assert (after.kind, after.schedule, after.seeds) == (verdict.kind, verdict.schedule, verdict.seeds), verdict_text(after, "x")
