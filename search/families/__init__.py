"""Schedule families: pluggable search spaces over per-layer head counts."""

from search.families._base import ScheduleFamily
from search.families.ramp import RampFamily
from search.families.uniform import UniformFamily

FAMILIES: dict[str, type[ScheduleFamily]] = {f.name: f for f in (RampFamily, UniformFamily)}


def make_family(name: str, n_layer: int, counts: list[int]) -> ScheduleFamily:
    if name not in FAMILIES:
        raise ValueError(f"unknown schedule family {name!r}; use one of {', '.join(FAMILIES)}")
    return FAMILIES[name](n_layer, counts)


__all__ = ["FAMILIES", "RampFamily", "ScheduleFamily", "UniformFamily", "make_family"]
