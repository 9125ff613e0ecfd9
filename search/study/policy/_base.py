"""The interface every study policy implements (one file per policy, as the schedule families).

A policy is a rule a study follows between trials: which runs to queue next, or when to stop short of the target.
It reads the study's stored trials and nothing else, so a killed and resumed study picks up where its stored
runs left it, and `status` reads the same answer the driver acted on. Policies decide; search.analysis only
reads what the trials show.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from optuna.trial import FrozenTrial

from search.analysis import Budget


class Stop(abc.ABC):
    """Why a policy ends a study short of its target."""

    @abc.abstractmethod
    def text(self) -> str:
        """A line for the run's progress, `status` and the dashboard."""


class Policy:
    """What the driver asks between trials (search.runner.driver.BetweenTrials). A policy overrides what it decides;
    the defaults queue nothing and never stop."""

    name = "policy"  # what the driver's notes call it ("racing: queued ...")

    def next_runs(self, trials: Sequence[FrozenTrial]) -> list[tuple[str, int]]:
        """(schedule, seed) runs to queue next, in order."""
        return []

    def stop(self, done: Budget) -> Stop | None:
        """Why the study must stop now, or None to go on."""
        return None
