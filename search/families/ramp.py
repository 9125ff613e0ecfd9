"""`ramp`: monotone non-decreasing head counts with depth (the Prism family).

Encoding. With allowed counts c_0 < c_1 < ... < c_{K-1} and L layers, a monotone schedule is fixed by the
K-1 depths at which it first reaches c_1, c_2, ..., c_{K-1}. The search draws K-1 integers
`switch_1 ... switch_{K-1}`, each in [0, L] (a fixed range), and sorts them: s_(1) <= ... <= s_(K-1). Layer l
gets c_k where k = number of sorted switches <= l. Every parameter vector decodes to a valid monotone
schedule, every monotone schedule is reachable (all its switch depths lie in [0, L]), and a switch equal to L
means "never reaches this count". Sorting makes several vectors decode to one schedule; the search keys
results by the decoded schedule, never by the raw parameters.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from typing import Any

import optuna

from prism import Schedule, enumerate_monotone
from search.families._base import ScheduleFamily


class RampFamily(ScheduleFamily):
    name = "ramp"

    def _param_names(self) -> list[str]:
        return [f"switch_{k}" for k in range(1, len(self.counts))]

    def decode(self, switches: list[int]) -> Schedule:
        switches = sorted(switches)
        return Schedule(tuple(self.counts[bisect.bisect_right(switches, layer)] for layer in range(self.n_layer)))

    def suggest(self, trial: optuna.Trial) -> Schedule:
        return self.decode([trial.suggest_int(name, 0, self.n_layer) for name in self._param_names()])

    def params_for(self, schedule: Schedule) -> dict[str, Any]:
        if schedule.n_layer != self.n_layer or not schedule.is_monotone or not set(schedule.heads) <= set(self.counts):
            raise ValueError(f"{schedule} is not a monotone schedule over {self.counts} with {self.n_layer} layers")
        # switch_k = first layer whose count is >= c_k (L when none is)
        switches = [next((l for l, h in enumerate(schedule.heads) if h >= c), self.n_layer) for c in self.counts[1:]]
        return dict(zip(self._param_names(), switches))

    def enumerate(self) -> Iterator[Schedule]:
        return iter(enumerate_monotone(self.n_layer, self.counts))

    def size(self) -> int:
        return math.comb(self.n_layer + len(self.counts) - 1, len(self.counts) - 1)  # stars and bars
