"""The stop rule: a study whose sampler only re-proposes trained schedules, or that trained its whole space, stops
and says the space is exhausted (search.study.policy.exhaustion)."""

import json
import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState

from search.analysis.budget import budget
from search.attrs import DUPLICATE_ATTR
from search.dashboard.pages import studies_page
from search.dashboard.views import study_view
from search.families import RampFamily
from search.study.policy import Exhausted, StopWhenExhausted, duplicate_cap, exhausted
from tests.search.synthetic import add_trial


def test_served_duplicates_in_a_row_exhaust_the_space_unless_the_queue_still_holds_trials(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'b.db'}")
    family = RampFamily(3, [1, 2, 4])  # 10 schedules
    add_trial(study, "1x3")
    add_trial(study, "2x3", seed=1)  # another seed: a run of its own, but not a schedule the sampler found
    add_trial(study, "4x3", state=TrialState.RUNNING)
    add_trial(study, "2x3", state=TrialState.FAIL)  # a failure counts nowhere
    cap = duplicate_cap(5)
    for _ in range(cap - 1):
        add_trial(study, "1x3", **{DUPLICATE_ATTR: 0})
    add_trial(study, "4x3", state=TrialState.RUNNING, **{DUPLICATE_ATTR: 2})  # waiting for its running original
    b = budget(study.get_trials(), search_seed=0)
    assert (b.trained, b.running, b.served, b.streak) == (2, 1, cap - 1, cap)
    assert b.schedules == {"1x3", "4x3"}
    assert exhausted(b, family, n_trials=5) == Exhausted(2, "ramp", cap)
    assert exhausted(b, family, n_trials=5).text() == (
        f"the space is exhausted: 2 distinct schedules trained (the sampler proposed only trained schedules, {cap} times in a row)"
    )
    assert StopWhenExhausted(family, 5).stop(b) == Exhausted(2, "ramp", cap)  # the driver asks the same rule
    assert exhausted(budget(study.get_trials(), 0), family, n_trials=cap) is None  # a bigger budget tries longer
    study.enqueue_trial({}, user_attrs={"schedule": "2x3", "seed": 5, "role": "confirm"})
    assert exhausted(budget(study.get_trials(), 0), family, n_trials=5) is None  # queued runs are not the sampler's
    study.tell(study.ask(), 1.0)  # the queued run trains: the run of duplicates is over
    assert budget(study.get_trials(), 0).streak == 0


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "search.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.e2e
def test_a_space_smaller_than_n_trials_stops_the_study_and_says_so(study_toml, tmp_path):
    toml = study_toml(
        ("[train]", '[space]\nfamily = "uniform"\n\n[train]'),
        ("steps = 60", "steps = 20"),
        ("n_trials = 5", "n_trials = 6"),
        ("baseline_seeds = 2", "baseline_seeds = 1\nthroughput_probe_steps = 2"),
        ('sampler = "tpe"', 'sampler = "random"'),
    )
    storage = f"sqlite:///{tmp_path / 'small.db'}"
    message = "the space is exhausted: 3 distinct schedules trained (all of the 'uniform' space)"
    run = _cli("run", str(toml), "--storage", storage)
    assert run.returncode == 0, run.stderr
    assert message in run.stdout and "trained 3 of target 6" in run.stdout
    status = json.loads(_cli("status", "tiny", "--storage", storage, "--json").stdout)
    assert status["trained"] == 3 and status["stopped"] == {"distinct": 3, "family": "uniform", "streak": None, "text": message}
    view = study_view(optuna.load_study(study_name="tiny", storage=storage))
    assert view.status == "finished" and f"trained 3 of target 6; {message[:63]}" in studies_page([view], storage)
    resume = _cli("resume", "tiny", "--storage", storage)
    assert resume.returncode == 0 and f"already has 3/6 trained trials ({message}); nothing to run" in resume.stdout
