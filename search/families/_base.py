"""The interface every schedule family implements (one file per family, as Optuna's pruners)."""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Iterator
from typing import Any, cast

import optuna

from prism import Schedule


class ScheduleFamily(abc.ABC):
    """A set of schedules with a fixed-range Optuna encoding that can only decode to members of the set.

    `counts` are the allowed head counts (ascending), `n_layer` the depth. Families never see a model: validity
    (head dims, divisibility) is guaranteed by building `counts` from the model config.
    """

    name: str

    def __init__(self, n_layer: int, counts: list[int]):
        if not counts:
            raise ValueError("a schedule family needs at least one allowed head count")
        self.n_layer, self.counts = n_layer, sorted(counts)

    @abc.abstractmethod
    def suggest(self, trial: optuna.Trial) -> Schedule:
        """Draw this trial's parameters and decode them into a schedule."""

    def define_by_run(self) -> Callable[[optuna.Trial], None]:
        """This space as a define-by-run function, for Ray Tune's `OptunaSearch(space=...)` (picklable: Tune saves
        its searcher); a Tune trial's config holds the parameters, which `from_params` turns back into the schedule."""
        return functools.partial(_draw, self)

    def from_params(self, params: dict[str, Any]) -> Schedule:
        """The schedule the parameters of `suggest` decode to (a Tune trial's config, a stored trial's params)."""
        fixed = optuna.trial.FixedTrial(dict(params))  # answers suggest_* as a Trial does, from the given values
        return self.suggest(cast(optuna.Trial, fixed))

    @abc.abstractmethod
    def params_for(self, schedule: Schedule) -> dict[str, Any]:
        """Parameters that decode to `schedule` (for enqueueing baselines and references)."""

    @abc.abstractmethod
    def enumerate(self) -> Iterator[Schedule]:
        """Every member, in a deterministic order."""

    def size(self) -> int:
        return sum(1 for _ in self.enumerate())

    def contains(self, schedule: Schedule) -> bool:
        try:
            self.params_for(schedule)
        except ValueError:
            return False
        return True


def _draw(family: ScheduleFamily, trial: optuna.Trial) -> None:
    family.suggest(trial)  # the parameters are what Tune keeps; the schedule is rebuilt from them
