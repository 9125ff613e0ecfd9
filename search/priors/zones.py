"""Transition zones: where a model's per-layer geometry changes fastest, found deterministically.

Method (pure function of the curves; no randomness, no fitted parameters):
1. Each curve (one metric on one probe set, one value per layer; undefined values such as the last layer's depth
   curvature take their nearest defined neighbour's value) is z-normalised over layers: a curve that does not
   vary (std ~ 0) carries no transition and is skipped. Normalising makes curves in radians, nats and fractions
   comparable.
2. Curves of 6 or more layers are smoothed with the 3-tap kernel [1, 2, 1] / 4 (edges repeated), so that a single
   noisy layer does not read as a transition; shorter curves are left as they are (smoothing 4 points erases them).
3. Boundary b (between layer b and layer b + 1, b = 0..L-2) gets the change |z[b+1] - z[b]| of every curve; the
   combined score of b is the mean change over all curves.
4. A zone peaks at a boundary whose score is a local maximum (greater than its left neighbour, at least its right
   one) and whose *strength*, its topographic prominence, is at least `min_strength`: on each side, walk away from
   the peak until a higher score (or the last boundary) and take the lowest score passed; strength = score minus
   the higher of the two side minima (a side with no boundaries, at the model's edge, is not counted). A steady
   drift (every boundary the same) has no zone; a step has one; a second, smaller step still has its own.
5. The zone extends left and right over neighbouring boundaries whose score stays at or above half the peak's.

Depths are relative: layer l sits at (l + 1) / L, so boundary b sits halfway between, at (b + 1.5) / L. A zone's
`layer` is the first layer of the new regime (b + 1). Zones come out strongest first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

MIN_STRENGTH = 0.1  # in z-units per layer step, averaged over curves
SMOOTH_MIN_LAYERS = 6


@dataclass(frozen=True)
class Zone:
    depth: float  # relative depth of the peak boundary
    start: float  # relative depth where the zone begins (boundary units)
    end: float
    layer: int  # first layer after the peak boundary: where the new regime starts
    strength: float  # mean |z-change| at the peak minus the median over boundaries
    changes: dict[str, float] = field(default_factory=dict)  # signed z-change of every curve at the peak

    def to_dict(self) -> dict:
        return asdict(self)


def _fill(values: Sequence[float | None]) -> np.ndarray | None:
    """Undefined entries take the nearest defined value; None when fewer than 2 values are defined."""
    x = np.array([np.nan if v is None else float(v) for v in values])
    ok = np.flatnonzero(np.isfinite(x))
    if len(ok) < 2:
        return None
    return np.interp(np.arange(len(x)), ok, x[ok])  # constant beyond the ends = nearest neighbour


def _smooth(z: np.ndarray) -> np.ndarray:
    if len(z) < SMOOTH_MIN_LAYERS:
        return z
    padded = np.concatenate([z[:1], z, z[-1:]])
    return (padded[:-2] + 2 * padded[1:-1] + padded[2:]) / 4


def boundary_changes(curves: Mapping[str, Sequence[float | None]]) -> dict[str, np.ndarray]:
    """Signed z-change at each of the L - 1 boundaries, per curve that varies (steps 1-3 of the method)."""
    out = {}
    for name, values in curves.items():
        x = _fill(values)
        if x is None or x.std() < 1e-9 * max(1.0, float(np.abs(x).max())):
            continue
        out[name] = np.diff(_smooth((x - x.mean()) / x.std()))
    return out


def _side_minimum(score: np.ndarray, b: int, step: int) -> float:
    """Lowest score between boundary b and the next higher one in direction `step`; -inf with no boundary there."""
    lowest, i = -np.inf, b + step
    while 0 <= i < len(score) and score[i] <= score[b]:
        lowest = score[i] if lowest == -np.inf else min(lowest, score[i])
        i += step
    if 0 <= i < len(score) and lowest == -np.inf:
        return float(score[b])  # an immediately higher neighbour: no prominence on this side
    return float(lowest)


def detect_zones(curves: Mapping[str, Sequence[float | None]], min_strength: float = MIN_STRENGTH) -> list[Zone]:
    """Transition zones of per-layer curves (all of one length L), strongest first. See the module docstring."""
    lengths = {len(v) for v in curves.values()}
    if len(lengths) > 1:
        raise ValueError(f"curves have different lengths {sorted(lengths)}; pass one value per layer for each")
    changes = boundary_changes(curves)
    if not changes:
        return []
    L = len(next(iter(changes.values()))) + 1
    score = np.mean([np.abs(d) for d in changes.values()], axis=0)  # (L-1,)
    zones = []
    for b in range(L - 1):
        left = score[b - 1] if b > 0 else -np.inf
        right = score[b + 1] if b < L - 2 else -np.inf
        if not (score[b] > left and score[b] >= right) or L < 3:
            continue
        strength = float(score[b]) - max(_side_minimum(score, b, -1), _side_minimum(score, b, +1))
        if strength < min_strength:
            continue
        lo = hi = b
        while lo > 0 and score[lo - 1] >= score[b] / 2:
            lo -= 1
        while hi < L - 2 and score[hi + 1] >= score[b] / 2:
            hi += 1
        zones.append(
            Zone(
                depth=(b + 1.5) / L,
                start=(lo + 1.5) / L,
                end=(hi + 1.5) / L,
                layer=b + 1,
                strength=round(strength, 6),
                changes={k: round(float(d[b]), 6) for k, d in changes.items()},
            )
        )
    return sorted(zones, key=lambda z: (-z.strength, z.depth))
