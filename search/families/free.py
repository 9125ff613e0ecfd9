"""`free`: any allowed head count in every layer, not necessarily monotone (K^L schedules).

Encoding: one categorical parameter `layer_NN` per layer over the allowed counts; every vector is a distinct valid
schedule, so this is the one family without duplicate vectors. It asks whether non-monotone schedules win.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import optuna

from prism import Schedule
from search.families._base import ScheduleFamily


class FreeFamily(ScheduleFamily):
    name = "free"

    def _param_names(self) -> list[str]:
        return [f"layer_{layer:02d}" for layer in range(self.n_layer)]

    def suggest(self, trial: optuna.Trial) -> Schedule:
        return Schedule(tuple(trial.suggest_categorical(name, self.counts) for name in self._param_names()))

    def params_for(self, schedule: Schedule) -> dict[str, Any]:
        if schedule.n_layer != self.n_layer or not set(schedule.heads) <= set(self.counts):
            raise ValueError(f"{schedule} is not a schedule over {self.counts} with {self.n_layer} layers")
        return dict(zip(self._param_names(), schedule.heads))

    def enumerate(self) -> Iterator[Schedule]:
        return (Schedule(heads) for heads in itertools.product(self.counts, repeat=self.n_layer))

    def size(self) -> int:
        return len(self.counts) ** self.n_layer
