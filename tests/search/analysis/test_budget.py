"""n_trials counts trained trials: served duplicates are told but not counted (search.analysis.budget)."""

import optuna
import pytest
from optuna.trial import TrialState

from search.analysis.budget import Budget, budget, is_served
from search.attrs import DUPLICATE_ATTR
from search.config import StudyConfig
from search.runner.driver import Driver
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.storage.records import FINISHED
from search.study.create import open_study
from search.study.pruning import make_stopping
from tests.search.synthetic import add_trial


def test_confirmation_runs_train_but_count_apart_from_the_search_s_n_trials(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'c.db'}")
    add_trial(study, "1x3")
    add_trial(study, "4x3", state=TrialState.PRUNED)
    add_trial(study, "1x3", seed=1000, role="confirm")
    add_trial(study, "4x3", seed=1000, role="confirm", **{DUPLICATE_ATTR: 1})  # served: trains nothing
    add_trial(study, "4x3", seed=1001, role="confirm", state=TrialState.RUNNING)
    b = budget(study.get_trials(), search_seed=0)
    assert (b.trained, b.confirmation, b.searched, b.running, b.served) == (3, 1, 2, 1, 1)


def test_every_count_of_the_budget_on_one_study_of_every_kind_of_trial():
    """What each field counts, run by run: the stop rule, progress and `status` read these numbers, and a served
    duplicate or a failure counted as trained would end a study early or late. Trials are read in number order."""
    study = optuna.create_study()
    add_trial(study, "1x3")  # trains at the search seed: a schedule found
    add_trial(study, "2x3", seed=1)  # trains, at another seed: no schedule found
    add_trial(study, "4x3", state=TrialState.PRUNED)  # pruned trials trained too
    add_trial(study, "1x1,2x1,4x1", state=TrialState.RUNNING)  # training now
    add_trial(study, "2x3", state=TrialState.FAIL)  # counts nowhere
    add_trial(study, "1x3", **{DUPLICATE_ATTR: 0})  # served: no training
    add_trial(study, "4x3", state=TrialState.PRUNED, **{DUPLICATE_ATTR: 2})  # a served pruned run
    add_trial(study, "1x1,2x1,4x1", state=TrialState.RUNNING, **{DUPLICATE_ATTR: 3})  # waits for its original: not served yet
    study.enqueue_trial({}, user_attrs={"schedule": "2x3", "seed": 0, "role": "search"})  # queued: no streak, no schedule
    add_trial(study, "2x3", seed=7, role="confirm", state=TrialState.RUNNING)  # pops the queued trial: RUNNING confirm
    trials = study.get_trials()
    b = budget(trials, search_seed=0)
    assert b == Budget(trained=3, running=2, served=2, waiting=0, streak=0, schedules=frozenset({"1x3", "4x3", "1x1,2x1,4x1"}))
    assert budget(list(reversed(trials)), search_seed=0) == b  # in number order, whatever the order given
    study.enqueue_trial({}, user_attrs={"schedule": "4x3", "seed": 0})
    add_trial(study, "1x3", **{DUPLICATE_ATTR: 0})  # the queued one, served
    add_trial(study, "2x3", seed=5, role="confirm")  # a confirmation run trains: the streak ends
    add_trial(study, "4x3", seed=5, role="confirm")
    add_trial(study, "2x3", seed=3)  # a search run trains after them
    add_trial(study, "2x3", **{DUPLICATE_ATTR: 9})
    add_trial(study, "4x3", **{DUPLICATE_ATTR: 2})
    for schedule in ("2x3", "4x3"):
        study.enqueue_trial({}, user_attrs={"schedule": schedule, "seed": 0})
    after = budget(study.get_trials(), search_seed=0)
    assert (after.trained, after.confirmation, after.searched, after.served, after.waiting, after.streak) == (6, 2, 4, 5, 2, 2)
    assert budget(study.get_trials(), search_seed=1).schedules == {"2x3"}  # what trained at that seed
    assert [is_served(t) for t in study.get_trials()[:6]] == [False] * 5 + [True]


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
    assert len(trained) == config.n_trials and budget(trials, config.seed).trained == config.n_trials and driver.stopped is None
    assert len({(t.user_attrs["schedule"], t.user_attrs["seed"]) for t in trained}) == config.n_trials  # all distinct
    assert not [t for t in trials if DUPLICATE_ATTR in t.user_attrs]
