"""search.study.experiment: which runs of a pair it queues, on a real SQLite study (no training)."""

import optuna
import pytest
from optuna.trial import TrialState

from search.analysis.sequential import plan_of
from search.attrs import ERROR, RETRY_OF, SCHEDULE, SEED
from search.config import ExperimentSection
from search.errors import PrismSearchError
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.study.create import open_study
from search.study.experiment import current, queue_pair
from search.study.policy import Pair, Sequential
from search.text import best_how, best_label, gap_text


@pytest.fixture
def experiment(tiny_config):
    config = tiny_config.model_copy(
        update={"seed": 2000, "n_trials": 8, "experiment": ExperimentSection(schedule="1x1,2x1,4x1", looks=[3, 4])},
        deep=True,
    )
    config = config.model_copy(update={"search": config.search.model_copy(update={"baseline_seeds": 1, "pruner": "none"})})
    ctx = open_study(config, open_storage(config.storage), check_corpus(config))
    plan = plan_of(config)
    assert plan is not None
    return ctx, plan


def _waiting(study: optuna.Study) -> list[tuple[str, int]]:
    return [(t.user_attrs[SCHEDULE], t.user_attrs[SEED]) for t in study.get_trials(states=(TrialState.WAITING,))]


def _finish(study: optuna.Study, value: float | None, error: str = "") -> optuna.trial.FrozenTrial:
    """Take the oldest queued trial and end it: COMPLETE with `value`, or FAIL with `error`."""
    trial = study.ask()
    if value is None:
        trial.set_user_attr(ERROR, error)
        study.tell(trial, state=TrialState.FAIL)
    else:
        study.tell(trial, value)
    return study.trials[trial.number]


def test_a_new_experiment_queues_its_first_pair_uniform_first(experiment):
    ctx, plan = experiment
    study, config = ctx.study, ctx.config
    assert current(study, config, plan).next_seed == 2000
    assert queue_pair(ctx, plan, 2000) == 2
    assert _waiting(study) == [("1x3", 2000), ("1x1,2x1,4x1", 2000)]  # the baseline open_study queued, then the schedule
    assert queue_pair(ctx, plan, 2000) == 2 and len(_waiting(study)) == 2  # queued once, however often asked


def test_the_policy_asks_for_the_next_pair_s_runs_that_are_not_queued_and_nothing_once_it_has_ended(experiment):
    """What Sequential.next_runs gives is what the experiment queues: the schedule at the first seed (open_study
    queued uniform's run there as a baseline), then the second pair, then nothing after the last look."""
    ctx, plan = experiment
    study, policy = ctx.study, Sequential(plan, ctx.config)
    assert policy.next_runs(study.get_trials()) == [("1x1,2x1,4x1", 2000)]
    for seed, gap in zip((2000, 2001, 2002), (0.10, -0.10, 0.05)):  # too noisy for any test at the first look
        queue_pair(ctx, plan, seed)
        _finish(study, 2.0)
        _finish(study, 2.0 + gap)
        assert policy.pair(study.get_trials(), seed) == Pair(seed, [], 0)  # finished: nothing left of it
    assert policy.next_runs(study.get_trials()) == [("1x3", 2003), ("1x1,2x1,4x1", 2003)]  # the look at 3 did not decide
    for _ in range(2):
        queue_pair(ctx, plan, 2003)
        _finish(study, 2.0)
    assert policy.state(study.get_trials()).next_seed is None and policy.next_runs(study.get_trials()) == []


def test_the_next_pair_follows_a_finished_one(experiment):
    ctx, plan = experiment
    study, config = ctx.study, ctx.config
    queue_pair(ctx, plan, 2000)
    _finish(study, 2.0)
    _finish(study, 2.1)
    now = current(study, config, plan)
    assert now.pairs == 1 and now.next_seed == 2001
    assert queue_pair(ctx, plan, 2001) == 2 and _waiting(study) == [("1x3", 2001), ("1x1,2x1,4x1", 2001)]


def test_only_failures_with_no_retry_stop_the_experiment(experiment):
    ctx, plan = experiment
    study = ctx.study
    queue_pair(ctx, plan, 2000)
    lost = _finish(study, None, "interrupted (Ctrl-C)")  # the driver queues an interrupted try again: it does not count
    study.enqueue_trial({}, user_attrs={**lost.user_attrs, RETRY_OF: lost.number})
    _finish(study, 2.1)  # the schedule's run
    _finish(study, None, "TrainingDiverged")  # uniform's retry fails for good: one try of MAX_TRIES
    assert queue_pair(ctx, plan, 2000) == 1 and _waiting(study) == [("1x3", 2000)]
    _finish(study, None, "TrainingDiverged")
    with pytest.raises(PrismSearchError, match="experiment run 1x3 at seed 2000 failed 2 times"):
        queue_pair(ctx, plan, 2000)


def test_its_summary_names_the_challenger_whichever_way_its_mean_leans(experiment):
    """An experiment's schedule was fixed before its data: `status` calls it the challenger, never "best", and
    reports its own gap when uniform leans lower, not uniform as the winner of a search."""
    from search.analysis import summarize

    ctx, plan = experiment
    study = ctx.study
    for seed, (uniform, challenger) in enumerate([(2.0, 2.1), (2.2, 2.25)], start=2000):
        queue_pair(ctx, plan, seed)
        _finish(study, uniform)
        _finish(study, challenger)
    s = summarize(study, ctx.config)
    assert (best_label(s), best_how(s), s.best_schedule) == ("challenger", "pre-registered, 2 paired seeds", "1x1,2x1,4x1")
    assert s.runner_up is None and s.best_gap is not None and s.best_gap.all_seeds is not None
    assert gap_text(s).startswith("+0.0750 ") and "uniform is the best" not in gap_text(s)


def test_confirm_runs_on_an_experiment_never_enter_its_own_summary(experiment, tiny_config):
    """`confirm` on an experiment trains its schedule and uniform at confirmation seeds: they get their own table,
    while the experiment's gap, seeds and values stay those of its pre-registered pairs."""
    from search.analysis import summarize

    ctx, plan = experiment
    study = ctx.study
    for seed, (uniform, challenger) in enumerate([(2.0, 2.1), (2.2, 2.25), (2.1, 2.12)], start=2000):
        queue_pair(ctx, plan, seed)
        _finish(study, uniform)
        _finish(study, challenger)
    before = summarize(study, ctx.config)
    for seed, (uniform, challenger) in zip((3000, 3001), [(1.0, 3.0), (1.1, 3.2)]):  # far from the pairs' values
        for schedule, value in ((plan.uniform, uniform), (plan.schedule, challenger)):
            study.enqueue_trial({}, user_attrs={"role": "confirm", "schedule": schedule, "seed": seed})
            _finish(study, value)
    after = summarize(study, ctx.config)
    assert best_how(after) == best_how(before) == "pre-registered, 3 paired seeds"
    assert (after.best_seeds, after.best_value, after.baseline_value) == (before.best_seeds, before.best_value, before.baseline_value)
    assert after.best_gap == before.best_gap and after.verdict == before.verdict and after.looks == before.looks
    assert [row.seeds for row in after.confirmation] == [2, 2]  # shown, in the confirmation table
