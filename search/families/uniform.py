"""`uniform`: the same head count in every layer (the GPT-2 family; a sanity space)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import optuna

from prism import Schedule
from search.families._base import ScheduleFamily


class UniformFamily(ScheduleFamily):
    """Encoding: one categorical parameter `heads` over the allowed counts."""

    name = "uniform"

    def suggest(self, trial: optuna.Trial) -> Schedule:
        return Schedule.uniform(trial.suggest_categorical("heads", self.counts), self.n_layer)

    def params_for(self, schedule: Schedule) -> dict[str, Any]:
        if not schedule.is_uniform or schedule.heads[0] not in self.counts or schedule.n_layer != self.n_layer:
            raise ValueError(f"{schedule} is not in the uniform family over {self.counts}")
        return {"heads": schedule.heads[0]}

    def enumerate(self) -> Iterator[Schedule]:
        return (Schedule.uniform(h, self.n_layer) for h in self.counts)
