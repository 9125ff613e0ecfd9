"""The interface every schedule family implements (one file per family, as Optuna's pruners)."""

from __future__ import annotations

import abc
from collections.abc import Iterator
from typing import Any

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
