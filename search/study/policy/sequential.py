"""A pre-registered experiment's plan as the study follows it: a pair at a time, in seed order.

The experiment's test is read from the stored pairs (search.analysis.sequential); this policy says which runs of
the next pair to queue (uniform first, then the schedule, both at the seed the plan reaches next), and refuses to
go on when a run of the pair keeps failing: the plan cannot skip a seed it fixed before any data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from optuna.trial import FrozenTrial, TrialState

from search.analysis.sequential import Plan, State, state
from search.analysis.summary import study_runs
from search.attrs import RETRY_OF, SCHEDULE, SEED
from search.config import StudyConfig
from search.errors import PrismSearchError
from search.study.policy._base import Policy

MAX_TRIES = 2  # a run whose tries fail this often with no retry queued (an interrupt, a lost driver or worker is
# queued again by the driver, up to resources.max_retries) stops the experiment


@dataclass(frozen=True)
class Pair:
    """One pair's runs: those to queue now (not finished, queued or training), and how many are left to train."""

    seed: int
    queue: list[tuple[str, int]]
    left: int


class Sequential(Policy):
    """The plan of the experiment in `config` (`plan`), asked between pairs (search.study.experiment)."""

    name = "experiment"

    def __init__(self, plan: Plan, config: StudyConfig):
        self.plan, self.config = plan, config

    def state(self, trials: Sequence[FrozenTrial]) -> State:
        """Where the experiment stands: the looks read so far and the next pair's seed (None: it has ended)."""
        return state(self.plan, study_runs(list(trials), self.config))

    def pair(self, trials: Sequence[FrozenTrial], seed: int) -> Pair:
        """The pair at `seed`. Raises PrismSearchError when one of its runs failed MAX_TRIES times."""
        retried = {t.user_attrs[RETRY_OF] for t in trials if RETRY_OF in t.user_attrs}  # tries the driver queued again
        queue, left = [], 0
        for schedule in (self.plan.uniform, self.plan.schedule):
            tries = [t for t in trials if t.user_attrs.get(SCHEDULE) == schedule and t.user_attrs.get(SEED) == seed]
            if any(t.state == TrialState.COMPLETE for t in tries):
                continue
            left += 1
            if any(t.state in (TrialState.WAITING, TrialState.RUNNING) for t in tries):
                continue
            if sum(t.state == TrialState.FAIL and t.number not in retried for t in tries) >= MAX_TRIES:
                raise PrismSearchError(
                    f"experiment run {schedule} at seed {seed} failed {MAX_TRIES} times (see `prism-search status {self.config.name}`); "
                    "the pre-registered plan cannot go on without it"
                )
            queue.append((schedule, seed))
        return Pair(seed, queue, left)

    def next_runs(self, trials: Sequence[FrozenTrial]) -> list[tuple[str, int]]:
        seed = self.state(trials).next_seed
        return [] if seed is None else self.pair(trials, seed).queue
