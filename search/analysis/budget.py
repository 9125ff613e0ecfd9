"""What `n_trials` counts: trained trials. A trial served by the duplicate cache (search.runner.cache) is told to the
sampler, so it learns, but buys nothing, so it does not count. Confirmation runs (`prism-search confirm`) train but
are not the search's: they count apart (`Budget.confirmation`), so confirming never eats the search's budget. The
driver's stop rule, `resume`, `confirm`, progress, `status` and the dashboard all read the study through `budget`, so
they agree on how far a study is.

A sampler that keeps proposing trained schedules has exhausted the space (a small space is fully trained, or the sampler
has converged): after `duplicate_cap(n_trials)` served duplicates in a row, or once every member of the family is
trained at the search seed, the study stops and says so instead of asking forever.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from optuna.trial import FrozenTrial, TrialState

from prism import Schedule
from search.attrs import DUPLICATE_ATTR, ROLE, ROLE_CONFIRM, SCHEDULE, SEED

if TYPE_CHECKING:
    from search.families import ScheduleFamily

_TRAINING = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)


@dataclass(frozen=True)
class Budget:
    trained: int  # COMPLETE or PRUNED trials that trained (not served from the cache)
    running: int  # RUNNING trials that train (a duplicate waiting for its original does not)
    served: int  # finished trials served from the cache
    waiting: int  # enqueued trials not started yet: the sampler is not asked while they last
    streak: int  # served duplicates (finished or waiting) since the last trial that trained, by trial number
    schedules: frozenset[str]  # distinct schedules trained or training at the search seed
    confirmation: int = 0  # of `trained`, the confirmation runs

    @property
    def searched(self) -> int:
        """Trained trials of the search itself (baseline and reference runs included): what `n_trials` counts."""
        return self.trained - self.confirmation


def is_served(trial: FrozenTrial) -> bool:
    return DUPLICATE_ATTR in trial.user_attrs


def budget(trials: Iterable[FrozenTrial], search_seed: int) -> Budget:
    """One pass over a study's trials (any states; FAIL ones count nowhere)."""
    trained = running = served = waiting = streak = confirmation = 0
    schedules = set()
    for t in sorted(trials, key=lambda t: t.number):
        if t.state == TrialState.WAITING:
            waiting += 1
        if t.state not in _TRAINING:
            continue
        if is_served(t):
            served += t.state != TrialState.RUNNING
            streak += 1
            continue
        streak = 0
        if t.state == TrialState.RUNNING:
            running += 1
        else:
            trained += 1
            confirmation += t.user_attrs.get(ROLE) == ROLE_CONFIRM
        if t.user_attrs.get(SEED) == search_seed and SCHEDULE in t.user_attrs:
            schedules.add(t.user_attrs[SCHEDULE])
    return Budget(trained, running, served, waiting, streak, frozenset(schedules), confirmation)


def duplicate_cap(n_trials: int) -> int:
    """Served duplicates in a row that end a study. A served duplicate costs one sampler call, not a training run, so
    the cap is generous: 2 x n_trials (at least 20), above the longest runs TPE made before finding a new schedule in
    the quickstart's space (6 at its 10 trials; 36 hunting the last of its 15 schedules at 20, cap 40; see
    scripts/bench_duplicates.py). In a row, not in total: a converging sampler re-proposes often yet still finds some."""
    return max(20, 2 * n_trials)


def exhausted(b: Budget, family: ScheduleFamily, n_trials: int) -> str | None:
    """Why the sampler can give no new schedule, or None. Enqueued trials still run: they are not the sampler's."""
    if b.waiting:
        return None
    if len(b.schedules) >= family.size() and _members(b.schedules, family) >= family.size():
        return f"the space is exhausted: {_members(b.schedules, family)} distinct schedules trained (all of the {family.name!r} space)"
    if b.streak >= duplicate_cap(n_trials):
        return (
            f"the space is exhausted: {len(b.schedules)} distinct schedules trained "
            f"(the sampler proposed only trained schedules, {b.streak} times in a row)"
        )
    return None


def _members(schedules: frozenset[str], family: ScheduleFamily) -> int:
    return sum(family.contains(Schedule.parse(s)) for s in schedules)
