"""Run a pre-registered paired experiment (search.analysis.sequential): a pair at a time, both runs at once.

Each pair is the experiment's schedule and uniform at one seed, queued in seed order and trained together by two
workers (same machine, same time: any load affects both alike), then the test is read; the next pair is queued
only while no look has decided. Everything is an ordinary stored trial (role `race`, its seed), so a killed
experiment resumes where its stored runs left it: the queued or interrupted runs of the current pair train again,
together.
"""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from prism import Schedule
from search.analysis.budget import budget
from search.analysis.sequential import Plan, State, state
from search.analysis.summary import study_runs
from search.attrs import RETRY_OF, ROLE_RACE, SCHEDULE, SEED
from search.config import StudyConfig
from search.errors import PrismSearchError
from search.runner.context import StudyContext
from search.storage.records import enqueue

MAX_TRIES = 2  # a run whose tries fail this often with no retry queued (an interrupt, a lost driver or worker is
# queued again by the driver, up to resources.max_retries) stops the experiment


def current(study: optuna.Study, config: StudyConfig, plan: Plan) -> State:
    return state(plan, study_runs(study.get_trials(deepcopy=False), config))


def queue_pair(ctx: StudyContext, plan: Plan, seed: int) -> int:
    """Queue the runs of the pair at `seed` that are not finished, queued or training (uniform first); returns how
    many of its runs are left to train. A run that failed MAX_TRIES times stops the experiment."""
    trials = ctx.study.get_trials(deepcopy=False)
    retried = {t.user_attrs[RETRY_OF] for t in trials if RETRY_OF in t.user_attrs}  # tries the driver queued again
    left = 0
    for schedule in (plan.uniform, plan.schedule):
        tries = [t for t in trials if t.user_attrs.get(SCHEDULE) == schedule and t.user_attrs.get(SEED) == seed]
        if any(t.state == TrialState.COMPLETE for t in tries):
            continue
        left += 1
        if any(t.state in (TrialState.WAITING, TrialState.RUNNING) for t in tries):
            continue
        if sum(t.state == TrialState.FAIL and t.number not in retried for t in tries) >= MAX_TRIES:
            raise PrismSearchError(
                f"experiment run {schedule} at seed {seed} failed {MAX_TRIES} times (see `prism-search status {ctx.config.name}`); "
                "the pre-registered plan cannot go on without it"
            )
        enqueue(ctx.study, ctx.family, Schedule.parse(schedule), role=ROLE_RACE, seed=seed)
    return left


def run_experiment(ctx: StudyContext, plan: Plan, progress=None) -> State:
    """Train pairs until a look decides or the last look is read; returns where the experiment stands."""
    from search.runner.driver import Driver  # Ray: only the commands that train load it
    from search.study.pruning import make_stopping

    while (now := current(ctx.study, ctx.config, plan)).next_seed is not None:
        left = queue_pair(ctx, plan, now.next_seed)
        if progress is not None:
            progress.note(now.text())
        trained = budget(ctx.study.get_trials(deepcopy=False), ctx.config.seed).trained
        # a driver per pair: its failure count (search.max_failed_trials) is per pair, while MAX_TRIES above
        # bounds the tries of each run; one driver for all pairs would stop dispatching yet leave the pair queued
        driver = Driver(ctx, progress, stopping=make_stopping(ctx))
        driver.run(trained + left, n_workers=2, queued_only=True)
    if progress is not None:
        progress.note(now.text())
    return now
