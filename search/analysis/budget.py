"""What `n_trials` counts: trained trials. A trial served by the duplicate cache (search.runner.cache) is told to the
sampler, so it learns, but buys nothing, so it does not count. Confirmation runs (`prism-search confirm`) train but
are not the search's: they count apart (`Budget.confirmation`), so confirming never eats the search's budget. The
driver, its stop rule (search.study.policy.exhaustion), `resume`, `confirm`, progress, `status` and the dashboard all
read the study through `budget`, so they agree on how far a study is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from optuna.trial import FrozenTrial, TrialState

from search.attrs import DUPLICATE_ATTR, FAILED_ITSELF, ROLE, ROLE_CONFIRM, SCHEDULE, SEED

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
    failed: frozenset[str] = frozenset()  # schedules that failed by their own error: never trained again

    @property
    def searched(self) -> int:
        """Trained trials of the search itself (baseline and reference runs included): what `n_trials` counts."""
        return self.trained - self.confirmation


def is_served(trial: FrozenTrial) -> bool:
    return DUPLICATE_ATTR in trial.user_attrs


def budget(trials: Iterable[FrozenTrial], search_seed: int) -> Budget:
    """One pass over a study's trials (any states; a FAIL one counts only as a served proposal or a failed schedule)."""
    trained = running = served = waiting = streak = confirmation = 0
    schedules = set()
    failed = set()
    for t in sorted(trials, key=lambda t: t.number):
        if t.state == TrialState.WAITING:
            waiting += 1
        if t.state == TrialState.FAIL and SCHEDULE in t.user_attrs:
            if is_served(t):
                streak += 1  # a proposal the study answered without training: it bought nothing
            elif t.user_attrs.get(FAILED_ITSELF):
                failed.add(t.user_attrs[SCHEDULE])
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
    return Budget(trained, running, served, waiting, streak, frozenset(schedules), confirmation, frozenset(failed))
