"""From a geometry profile to a ranked list of schedules in a study's family.

The mapping turns the Prism paper's and the LIMEN thread's claims into a rule that can be tested:

1. **Integration onset** o: the relative depth where the model moves from local aggregation to global
   integration. It is the strongest transition zone (`search.priors.zones`) before the late region
   (depth < LATE_FROM); when the profile has none, the LIMEN default of 0.5.
2. **Late zone** t (optional): the strongest zone at depth >= LATE_FROM (the thread's 0.78-0.85 regime).
3. **Ideal schedule** for onset layer m = the zone's first layer: the widest heads (fewest: counts[0]) at layer 0,
   head count rising in log2 steps (level floor(k * l / m) of the k steps, so each count holds an equal share of
   layers 0..m-1) to the study's baseline count b, reached exactly at layer m ("the ramp completes
   where integration begins"), b held after that; with a late zone, one count step above b from the zone's first
   layer on (the "second, smaller ramp").
4. **Variants**, in rank order: the ideal; the ideal without (or, when no late zone was found, with a default
   late step at LATE_DEFAULT); onset one layer later and one layer earlier; the same four shapes ending one count
   above b. Variants are hypotheses about the same geometry, most literal first.
5. **Projection onto the family**: the family need not contain a variant (a `uniform` family holds no ramp), so
   each variant is replaced by the family members nearest to it (L1 distance in log2 head count, summed over
   layers; ties in the family's enumeration order). Each variant contributes its nearest member not already
   listed, until `top_k` distinct schedules are found. Only the family's `contains`/`enumerate` are used, so the rule
   works for any family; at most MAX_ENUMERATE members are scanned (the variants themselves are always tried).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

from prism import Schedule
from search.families import ScheduleFamily
from search.priors.zones import Zone

LATE_FROM = 0.7
LATE_DEFAULT = 0.8
ONSET_DEFAULT = 0.5
MAX_ENUMERATE = 50_000


@dataclass(frozen=True)
class RankedSchedule:
    schedule: str
    rank: int
    variant: str  # which hypothesis it stands for
    distance: float  # log2-head L1 distance to that hypothesis' ideal schedule (0 = the ideal itself)

    def to_dict(self) -> dict:
        return asdict(self)


def _step(counts: list[int], base: int, k: int) -> int:
    """The count k steps above `base` in `counts` (capped at the largest)."""
    return counts[min(len(counts) - 1, counts.index(base) + k)]


def ideal_schedule(
    n_layer: int, counts: list[int], base: int, onset_layer: int, late_layer: int | None = None, top_step: int = 0
) -> Schedule:
    """counts[0] at layer 0 rising in equal log2 steps to `base`, reached at `onset_layer`; +1 step from late_layer."""
    top = _step(counts, base, top_step)
    lo, hi = counts.index(counts[0]), counts.index(top)
    heads = []
    for layer in range(n_layer):
        if layer >= onset_layer or onset_layer == 0:
            level = hi
        else:
            level = lo + (hi - lo) * layer // onset_layer  # equal shares per level, below `top` until the onset
        heads.append(counts[level])
    if late_layer is not None:
        raised = _step(counts, top, 1)
        heads = [raised if layer >= late_layer else h for layer, h in enumerate(heads)]
    return Schedule(tuple(heads))


def onset_and_late(zones: list[Zone]) -> tuple[Zone | None, Zone | None]:
    """The strongest zone before LATE_FROM (integration onset) and the strongest at or after it (late zone)."""
    early = [z for z in zones if z.depth < LATE_FROM]
    late = [z for z in zones if z.depth >= LATE_FROM]
    key = lambda z: (-z.strength, z.depth)
    return min(early, key=key, default=None), min(late, key=key, default=None)


def _layer_at(depth: float, n_layer: int) -> int:
    """The first layer whose relative depth (l + 1) / L is at least `depth`, kept inside the model."""
    return min(n_layer - 1, max(0, math.ceil(depth * n_layer - 1e-9) - 1))


def variants(n_layer: int, counts: list[int], base: int, zones: list[Zone]) -> list[tuple[str, Schedule]]:
    """The ranked hypotheses of step 4, deduplicated, as (name, ideal schedule)."""
    onset, late = onset_and_late(zones)
    m = onset.layer if onset else _layer_at(ONSET_DEFAULT, n_layer)
    late_layer = late.layer if late else None
    other_late = None if late_layer is not None else _layer_at(LATE_DEFAULT, n_layer)
    shapes = [
        ("ideal", m, late_layer),
        ("other-late", m, other_late),
        ("onset+1", min(m + 1, n_layer - 1), late_layer),
        ("onset-1", max(m - 1, 0), late_layer),
    ]
    out: dict[Schedule, str] = {}
    for top_step in (0, 1):
        for name, onset_layer, late_at in shapes:
            label = name if top_step == 0 else f"{name},top+1"
            out.setdefault(ideal_schedule(n_layer, counts, base, onset_layer, late_at, top_step), label)
    return [(name, s) for s, name in out.items()]


def _distance(a: Schedule, b: Schedule) -> float:
    return sum(abs(math.log2(x) - math.log2(y)) for x, y in zip(a.heads, b.heads))


def rank_schedules(family: ScheduleFamily, base: int, zones: list[Zone], top_k: int = 4) -> list[RankedSchedule]:
    """Steps 4-5: up to `top_k` distinct family members, best hypothesis first."""
    if base not in family.counts:
        raise ValueError(f"baseline head count {base} is not among the family's counts {family.counts}")
    members = list(itertools.islice(family.enumerate(), MAX_ENUMERATE))
    ranked: list[RankedSchedule] = []
    seen: set[Schedule] = set()
    for name, ideal in variants(family.n_layer, family.counts, base, zones):
        pool = ([ideal] if family.contains(ideal) else []) + members
        nearest = min((s for s in pool if s not in seen), key=lambda s: _distance(s, ideal), default=None)  # stable
        if nearest is not None:
            seen.add(nearest)
            ranked.append(RankedSchedule(str(nearest), len(ranked) + 1, name, round(_distance(nearest, ideal), 6)))
        if len(ranked) >= top_k:
            break
    return ranked
