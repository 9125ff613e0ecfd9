"""`ramp+late`: a ramp, a plateau, then one second increase inside a late zone (the geometry thread's proposal).

Layers split at the late zone [a, b]: a = ceil(lo * L), b = floor(hi * L) for the relative depths (lo, hi)
(default 0.75-0.9), so the zone is the layers whose relative depth l / L lies in [lo, hi].

Encoding (fixed ranges, every vector decodes to a valid member):
- `ramp_1 ... ramp_{K-1}` in [0, a]: the `ramp` family's sorted-switch encoding over the first a layers
  (a switch equal to a means "not reached before the late zone");
- `late_layer` in [a, b]: the layer where the second increase happens;
- `late_jump` in [0, K-1]: how many allowed counts the second increase climbs, capped at the largest count.
From the end of the ramp to `late_layer` the count holds (the plateau); from `late_layer` on it is the raised count.
A jump of 0 is a ramp with a plateau to the last layer. Several vectors decode to one schedule (sorting, capping,
any `late_layer` with jump 0); the search keys results by the decoded schedule.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import optuna

from prism import Schedule, enumerate_monotone
from search.families._base import ScheduleFamily
from search.families.ramp import RampFamily

DEFAULT_LATE_ZONE = (0.75, 0.9)


def late_zone_layers(n_layer: int, zone: tuple[float, float]) -> tuple[int, int]:
    """First and last layer (inclusive) whose relative depth l / L lies in the zone; empty when first > last."""
    lo, hi = zone
    return max(1, math.ceil(lo * n_layer)), min(n_layer - 1, math.floor(hi * n_layer))


class RampLateFamily(ScheduleFamily):
    name = "ramp+late"

    def __init__(self, n_layer: int, counts: list[int], late_zone: tuple[float, float] = DEFAULT_LATE_ZONE):
        super().__init__(n_layer, counts)
        self.first, self.last = late_zone_layers(n_layer, late_zone)
        if self.first > self.last:
            raise ValueError(f"late zone {late_zone[0]}-{late_zone[1]} holds no layer of n_layer={n_layer}; widen space.late_zone")
        self._ramp = RampFamily(self.first, self.counts)  # the part before the zone

    def decode(self, ramp_switches: list[int], late_layer: int, late_jump: int) -> Schedule:
        head = self._ramp.decode(ramp_switches).heads
        level = self.counts.index(head[-1])
        raised = self.counts[min(len(self.counts) - 1, level + late_jump)]
        tail = [head[-1] if layer < late_layer else raised for layer in range(self.first, self.n_layer)]
        return Schedule(head + tuple(tail))

    def suggest(self, trial: optuna.Trial) -> Schedule:
        switches = [trial.suggest_int(f"ramp_{k}", 0, self.first) for k in range(1, len(self.counts))]
        late_layer = trial.suggest_int("late_layer", self.first, self.last)
        late_jump = trial.suggest_int("late_jump", 0, len(self.counts) - 1)
        return self.decode(switches, late_layer, late_jump)

    def params_for(self, schedule: Schedule) -> dict[str, Any]:
        heads = schedule.heads
        if schedule.n_layer != self.n_layer or not schedule.is_monotone or not set(heads) <= set(self.counts):
            raise ValueError(f"{schedule} is not a monotone schedule over {self.counts} with {self.n_layer} layers")
        rises = [layer for layer in range(self.first, self.n_layer) if heads[layer] > heads[layer - 1]]
        if len(rises) > 1 or (rises and rises[0] > self.last):
            raise ValueError(f"{schedule} rises more than once after layer {self.first - 1} or outside the late zone")
        params = self._ramp.params_for(Schedule(heads[: self.first]))
        params = {f"ramp_{k}": v for k, v in enumerate(params.values(), start=1)}
        jump = self.counts.index(heads[-1]) - self.counts.index(heads[self.first - 1])
        return params | {"late_layer": rises[0] if rises else self.first, "late_jump": jump}

    def enumerate(self) -> Iterator[Schedule]:
        top = len(self.counts) - 1
        for ramp in enumerate_monotone(self.first, self.counts):
            level = self.counts.index(ramp.heads[-1])
            yield self.decode(list(self._ramp.params_for(ramp).values()), self.first, 0)
            for jump in range(1, top - level + 1):
                for late_layer in range(self.first, self.last + 1):
                    yield self.decode(list(self._ramp.params_for(ramp).values()), late_layer, jump)

    def size(self) -> int:
        # ramps over a layers ending at level e: C(a - 1 + e, e); each has 1 + (K-1-e) * |zone| members
        a, k, zone = self.first, len(self.counts), self.last - self.first + 1
        return sum(math.comb(a - 1 + e, e) * (1 + (k - 1 - e) * zone) for e in range(k))
