"""Confirmation: re-train the best schedules and the uniform baseline with fresh seeds, so a winner is not a lucky seed.

Confirmation seeds are fixed (study seed + 1000 + k), never used by the search, so re-running `confirm` (after a stop,
or with more seeds) queues only the runs it does not already hold, finished or still queued. Each schedule's gap to uniform is
paired per seed (same initial weights, data order and validation batches) and reported with a t interval on the
confirmation seeds only (`search.analysis.summary.confirmation_rows`).
"""

from __future__ import annotations

import json

import optuna
from optuna.trial import TrialState

from prism import Schedule
from search.analysis.budget import budget
from search.analysis.rounds import CONFIRM_SEED_OFFSET
from search.analysis.summary import ConfirmationRow, confirmation_rows, schedule_ranking
from search.attrs import ATTR_CONFIRMATION_PLAN, ROLE, ROLE_CONFIRM, SCHEDULE, SEED
from search.config import StudyConfig
from search.errors import PrismSearchError
from search.runner.context import StudyContext
from search.storage.records import enqueue
from search.study.policy import StopWhenExhausted
from search.study.pruning import make_stopping


def confirm_seeds(config: StudyConfig, n: int) -> list[int]:
    return [config.seed + CONFIRM_SEED_OFFSET + k for k in range(n)]


def top_schedules(study: optuna.Study, config: StudyConfig, top: int) -> list[str]:
    """The `top` schedules other than the baseline by paired mean gap to uniform over every seed they ran (the
    ranking the verdict names)."""
    out = schedule_ranking(study.get_trials(deepcopy=False), config)
    if not out:
        raise PrismSearchError(f"study {study.study_name!r} has no complete feasible trial to confirm; run it first")
    return out[:top]


def plan_confirmation(ctx: StudyContext, top: int, seeds: int) -> int:
    """Queue the confirmation runs (baseline first) that the study does not hold yet; returns how many confirmation
    runs are left to train (queued now or by an earlier, interrupted `confirm`)."""
    study, config = ctx.study, ctx.config
    schedules = [str(config.baseline), *top_schedules(study, config, top)]
    queue_missing(ctx, [(schedule, seed) for schedule in schedules for seed in confirm_seeds(config, seeds)])
    study.set_user_attr(ATTR_CONFIRMATION_PLAN, json.dumps({"schedules": schedules, "seeds": seeds}))
    return len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))


def queue_missing(ctx: StudyContext, runs: list[tuple[str, int]]) -> None:
    """Queue each (schedule, seed) confirmation run the study does not hold: finished, training or queued already."""
    held = {TrialState.COMPLETE, TrialState.PRUNED, TrialState.WAITING, TrialState.RUNNING}
    have = {
        (t.user_attrs.get(SCHEDULE), t.user_attrs.get(SEED))
        for t in ctx.study.get_trials(deepcopy=False, states=tuple(held))
        if t.user_attrs.get(ROLE) == ROLE_CONFIRM
    }
    for schedule, seed in runs:
        if (schedule, seed) not in have:
            enqueue(ctx.study, ctx.family, Schedule.parse(schedule), role=ROLE_CONFIRM, seed=seed)


def train_queued(ctx: StudyContext, progress=None) -> None:
    """Train the queued confirmation runs, and runs a dead driver left, under the study's stop rule."""
    from search.runner.driver import Driver  # the driver needs Ray; planning and collecting don't

    # the stop rule still holds: once the queue is trained, a failed run's place must not make it ask a spent sampler forever
    driver = Driver(ctx, progress, stopping=make_stopping(ctx), policies=[StopWhenExhausted(ctx.family, ctx.config.n_trials)])
    # running trials count: a dead driver's whose heartbeat is not stale yet is queued again while this one
    # runs, and its retry must train too
    done = budget(ctx.study.get_trials(deepcopy=False), ctx.config.seed)
    target = done.trained + done.running + done.waiting
    if progress is not None:
        progress.retarget(target)  # what is really left, now that runs held from an earlier `confirm` are known
    driver.run(target, ctx.config.resources.workers)


def collect(study: optuna.Study) -> list[ConfirmationRow]:
    """The confirmation rows of the schedules the last `confirm` planned: val loss mean ± sd, paired gap to uniform."""
    planned = json.loads(study.user_attrs[ATTR_CONFIRMATION_PLAN])["schedules"]
    rows = confirmation_rows(study.get_trials(deepcopy=False), planned[0])
    return [r for r in rows if r.schedule in planned]
