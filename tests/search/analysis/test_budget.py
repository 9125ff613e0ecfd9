"""n_trials counts trained trials: served duplicates are told but not counted, and a study whose sampler only
re-proposes trained schedules stops and says the space is exhausted (search.analysis.budget)."""

import json
import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState

from search.analysis.budget import budget, duplicate_cap, exhausted
from search.attrs import DUPLICATE_ATTR
from search.config import StudyConfig
from search.dashboard.pages import studies_page
from search.dashboard.views import study_view
from search.families import RampFamily
from search.runner.driver import Driver
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.storage.records import FINISHED
from search.study import open_study
from search.study.pruning import make_stopping


def _trial(study, schedule, seed=0, state=TrialState.COMPLETE, **attrs):
    trial = study.ask()
    for key, value in {"schedule": schedule, "seed": seed, "role": "search", **attrs}.items():
        trial.set_user_attr(key, value)
    if state != TrialState.RUNNING:
        study.tell(trial, 1.0 if state == TrialState.COMPLETE else None, state=state)
    return trial


def test_served_duplicates_in_a_row_exhaust_the_space_unless_the_queue_still_holds_trials(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'b.db'}")
    family = RampFamily(3, [1, 2, 4])  # 10 schedules
    _trial(study, "1x3")
    _trial(study, "2x3", seed=1)  # another seed: a run of its own, but not a schedule the sampler found
    _trial(study, "4x3", state=TrialState.RUNNING)
    _trial(study, "2x3", state=TrialState.FAIL)  # a failure counts nowhere
    cap = duplicate_cap(5)
    for _ in range(cap - 1):
        _trial(study, "1x3", **{DUPLICATE_ATTR: 0})
    _trial(study, "4x3", state=TrialState.RUNNING, **{DUPLICATE_ATTR: 2})  # waiting for its running original
    b = budget(study.get_trials(), search_seed=0)
    assert (b.trained, b.running, b.served, b.streak) == (2, 1, cap - 1, cap)
    assert b.schedules == {"1x3", "4x3"}
    assert exhausted(b, family, n_trials=5) == (
        f"the space is exhausted: 2 distinct schedules trained (the sampler proposed only trained schedules, {cap} times in a row)"
    )
    assert exhausted(budget(study.get_trials(), 0), family, n_trials=cap) is None  # a bigger budget tries longer
    study.enqueue_trial({}, user_attrs={"schedule": "2x3", "seed": 5, "role": "confirm"})
    assert exhausted(budget(study.get_trials(), 0), family, n_trials=5) is None  # queued runs are not the sampler's
    study.tell(study.ask(), 1.0)  # the queued run trains: the run of duplicates is over
    assert budget(study.get_trials(), 0).streak == 0


def test_confirmation_runs_train_but_count_apart_from_the_search_s_n_trials(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'c.db'}")
    _trial(study, "1x3")
    _trial(study, "4x3", state=TrialState.PRUNED)
    _trial(study, "1x3", seed=1000, role="confirm")
    _trial(study, "4x3", seed=1000, role="confirm", **{DUPLICATE_ATTR: 1})  # served: trains nothing
    _trial(study, "4x3", seed=1001, role="confirm", state=TrialState.RUNNING)
    b = budget(study.get_trials(), search_seed=0)
    assert (b.trained, b.confirmation, b.searched, b.running, b.served) == (3, 1, 2, 1, 1)


def _config(tiny_config: StudyConfig, **search) -> StudyConfig:
    data = tiny_config.model_dump()
    data["n_trials"] = 6
    data["train"] |= {"steps": 20}
    data["search"] |= {"sampler": "random", "baseline_seeds": 1, "throughput_probe_steps": 2} | search
    return StudyConfig.model_validate(data)


@pytest.mark.e2e
def test_a_study_trains_n_trials_distinct_schedules_and_the_sampler_proposes_no_duplicate(ray_local, tiny_config):
    """Seed 0's random walk over the 10 ramp schedules proposes trained ones again; the distinct-proposal sampler
    (search.study.samplers) draws again instead, so while the space has untried schedules nothing is served."""
    config = _config(tiny_config)
    fingerprint = check_corpus(config)
    ctx = open_study(config, open_storage(config.storage), fingerprint)
    driver = Driver(ctx, stopping=make_stopping(ctx))
    driver.run(config.n_trials, n_workers=2)
    trials = optuna.load_study(study_name=config.name, storage=config.storage).trials
    trained = [t for t in trials if t.state in FINISHED and DUPLICATE_ATTR not in t.user_attrs]
    assert len(trained) == config.n_trials and budget(trials, config.seed).trained == config.n_trials and driver.exhausted is None
    assert len({(t.user_attrs["schedule"], t.user_attrs["seed"]) for t in trained}) == config.n_trials  # all distinct
    assert not [t for t in trials if DUPLICATE_ATTR in t.user_attrs]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "search.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.e2e
def test_a_space_smaller_than_n_trials_stops_the_study_and_says_so(study_toml, tmp_path):
    toml = study_toml(
        ("[train]", '[space]\nfamily = "uniform"\n\n[train]'),
        ("steps = 60", "steps = 20"),
        ("n_trials = 5", "n_trials = 6"),
        ("baseline_seeds = 2", 'baseline_seeds = 1\nsampler = "random"\nthroughput_probe_steps = 2'),
    )
    storage = f"sqlite:///{tmp_path / 'small.db'}"
    message = "the space is exhausted: 3 distinct schedules trained (all of the 'uniform' space)"
    run = _cli("run", str(toml), "--storage", storage)
    assert run.returncode == 0, run.stderr
    assert message in run.stdout and "trained 3 of target 6" in run.stdout
    status = json.loads(_cli("status", "tiny", "--storage", storage, "--json").stdout)
    assert status["trained"] == 3 and status["exhausted"] == message
    view = study_view(optuna.load_study(study_name="tiny", storage=storage))
    assert view.status == "finished" and f"trained 3 of target 6; {message[:63]}" in studies_page([view], storage)
    resume = _cli("resume", "tiny", "--storage", storage)
    assert resume.returncode == 0 and f"already has 3/6 trained trials ({message}); nothing to run" in resume.stdout
