"""Schedule families: pluggable search spaces over per-layer head counts."""

from search.families._base import ScheduleFamily
from search.families.free import FreeFamily
from search.families.ramp import RampFamily
from search.families.ramp_late import DEFAULT_LATE_ZONE, RampLateFamily, late_zone_layers
from search.families.uniform import UniformFamily

FAMILIES: dict[str, type[ScheduleFamily]] = {f.name: f for f in (RampFamily, RampLateFamily, FreeFamily, UniformFamily)}


def make_family(name: str, n_layer: int, counts: list[int], late_zone: tuple[float, float] = DEFAULT_LATE_ZONE) -> ScheduleFamily:
    if name not in FAMILIES:
        raise ValueError(f"unknown schedule family {name!r}; use one of {', '.join(FAMILIES)}")
    if name == RampLateFamily.name:
        return RampLateFamily(n_layer, counts, late_zone)
    return FAMILIES[name](n_layer, counts)


__all__ = [
    "DEFAULT_LATE_ZONE",
    "FAMILIES",
    "FreeFamily",
    "RampFamily",
    "RampLateFamily",
    "ScheduleFamily",
    "UniformFamily",
    "late_zone_layers",
    "make_family",
]
