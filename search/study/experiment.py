"""Run a pre-registered paired experiment (search.analysis.sequential): a pair at a time, both runs at once.

Each pair is the experiment's schedule and uniform at one seed, queued in seed order (search.study.policy.Sequential)
and trained together by two workers (same machine, same time: any load affects both alike), then the test is read;
the next pair is queued only while no look has decided. Everything is an ordinary stored trial (role `race`, its
seed), so a killed experiment resumes where its stored runs left it: the queued or interrupted runs of the current
pair train again, together.
"""

from __future__ import annotations

import optuna

from prism import Schedule
from search.analysis.budget import budget
from search.analysis.sequential import Plan, State
from search.attrs import ROLE_RACE
from search.config import StudyConfig
from search.runner.context import StudyContext
from search.storage.records import enqueue
from search.study.policy import Sequential
from search.text import state_text


def current(study: optuna.Study, config: StudyConfig, plan: Plan) -> State:
    return Sequential(plan, config).state(study.get_trials(deepcopy=False))


def queue_pair(ctx: StudyContext, plan: Plan, seed: int) -> int:
    """Queue the runs of the pair at `seed` that are not finished, queued or training (uniform first); returns how
    many of its runs are left to train. A run that failed MAX_TRIES times stops the experiment (Sequential.pair)."""
    pair = Sequential(plan, ctx.config).pair(ctx.study.get_trials(deepcopy=False), seed)
    for schedule, at in pair.queue:
        enqueue(ctx.study, ctx.family, Schedule.parse(schedule), role=ROLE_RACE, seed=at)
    return pair.left


def run_experiment(ctx: StudyContext, plan: Plan, progress=None) -> State:
    """Train pairs until a look decides or the last look is read; returns where the experiment stands."""
    from search.runner.driver import Driver  # Ray: only the commands that train load it
    from search.study.pruning import make_stopping

    while (now := current(ctx.study, ctx.config, plan)).next_seed is not None:
        left = queue_pair(ctx, plan, now.next_seed)
        if progress is not None:
            progress.note(state_text(now))
        trained = budget(ctx.study.get_trials(deepcopy=False), ctx.config.seed).trained
        # a driver per pair: its failure count (search.max_failed_trials) is per pair, while MAX_TRIES (search.study.policy.sequential)
        # bounds the tries of each run; one driver for all pairs would stop dispatching yet leave the pair queued
        driver = Driver(ctx, progress, stopping=make_stopping(ctx))
        driver.run(trained + left, n_workers=2, queued_only=True)
    if progress is not None:
        progress.note(state_text(now))
    return now
