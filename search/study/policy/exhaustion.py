"""The stop rule: end a study whose sampler can give no new schedule, instead of asking forever.

A sampler that keeps proposing trained schedules has exhausted the space (a small space is fully trained, or the
sampler has converged). A served duplicate costs one sampler call, not a training run (search.analysis.budget),
so the study stops only after `duplicate_cap(n_trials)` served duplicates in a row, or once every member of the
family is trained at the search seed or failed by its own error.
"""

from __future__ import annotations

from dataclasses import dataclass

from prism import Schedule
from search.analysis import Budget
from search.families import ScheduleFamily
from search.study.policy._base import Policy, Stop


@dataclass(frozen=True)
class Exhausted(Stop):
    """The space is exhausted: `distinct` schedules trained, the whole `family` (streak None) or the sampler
    proposed only trained ones `streak` times in a row."""

    distinct: int
    family: str
    streak: int | None = None

    def text(self) -> str:
        if self.streak is None:
            return f"the space is exhausted: {self.distinct} distinct schedules trained (all of the {self.family!r} space)"
        return (
            f"the space is exhausted: {self.distinct} distinct schedules trained "
            f"(the sampler proposed only trained schedules, {self.streak} times in a row)"
        )


def duplicate_cap(n_trials: int) -> int:
    """Served duplicates in a row that end a study: 2 x n_trials (at least 20), above the longest runs TPE made
    before finding a new schedule in the quickstart's space (6 at its 10 trials; 36 hunting the last of its 15
    schedules at 20, cap 40; see scripts/bench_duplicates.py). In a row, not in total: a converging sampler
    re-proposes often yet still finds some."""
    return max(20, 2 * n_trials)


def exhausted(done: Budget, family: ScheduleFamily, n_trials: int) -> Exhausted | None:
    """Why the sampler can give no new schedule, or None. Enqueued trials still run: they are not the sampler's."""
    if done.waiting:
        return None
    done_with = done.schedules | done.failed  # trained, or failed by their own error: neither is trained again
    members = sum(family.contains(Schedule.parse(s)) for s in done_with) if len(done_with) >= family.size() else 0
    if members >= family.size():
        return Exhausted(members, family.name)
    if done.streak >= duplicate_cap(n_trials):
        return Exhausted(len(done.schedules), family.name, done.streak)
    return None


class StopWhenExhausted(Policy):
    """The stop rule as the driver asks it."""

    name = "stop rule"

    def __init__(self, family: ScheduleFamily, n_trials: int):
        self.family, self.n_trials = family, n_trials

    def stop(self, done: Budget) -> Exhausted | None:
        return exhausted(done, self.family, self.n_trials)
