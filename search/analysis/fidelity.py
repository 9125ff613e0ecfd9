"""Rung fidelity: does the val loss at an early evaluation rank schedules like the final one?

Pruning at a rung is only as good as that agreement. Runs at different seeds are not exchangeable (a seed moves every
schedule's loss alike), so the agreement is Spearman's rho *within each seed*, averaged with weights by points; its
uncertainty comes from resampling seeds (clusters) when there are enough, from resampling runs within each seed when
there are a few seeds of many runs, and, below EXACT_BELOW points, where any bootstrap interval spans [-1, +1], from an
exact permutation test within seeds instead. "Would the best have been cut" asks about the best schedule by paired
mean, cut at each seed it ran as a pruner would there.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from search.analysis.stats import ALPHA, LEVEL, MIN_CURVES, RELIABLE_RHO

EXACT_BELOW = 10  # points: an exact permutation p-value instead of a bootstrap interval
MIN_CLUSTERS = 5  # seeds: from this many on, the bootstrap resamples whole seeds
_MAX_EXACT = 200_000  # orderings enumerated at most; beyond, a seeded Monte Carlo of the same test


@dataclass(frozen=True)
class Agreement:
    """Within-seed Spearman rho over `n` points at `groups` seeds; an interval, or an exact permutation p-value."""

    n: int
    groups: int
    rho: float
    low: float | None = None  # 95% bootstrap interval (n >= EXACT_BELOW)
    high: float | None = None
    p: float | None = None  # one-sided permutation p of agreement this high by chance (n < EXACT_BELOW)

    @property
    def reliably_high(self) -> bool:
        """The agreement is shown to be at least RELIABLE_RHO (or, with few points, high and not chance)."""
        if self.low is not None:
            return self.low >= RELIABLE_RHO
        return self.rho >= RELIABLE_RHO and self.p is not None and self.p < ALPHA


def rank_agreement(groups: Sequence[tuple[Sequence[float], Sequence[float]]], n_boot: int = 2000, seed: int = 0) -> Agreement | None:
    """Agreement of x with y inside each group (a seed); groups of fewer than 3 points or a constant side carry no
    ranking and are left out. None when nothing is left."""
    usable = [
        (np.asarray(x, dtype=float), np.asarray(y, dtype=float)) for x, y in groups if len(x) >= 3 and len(set(x)) > 1 and len(set(y)) > 1
    ]
    if not usable:
        return None
    weights = np.array([len(x) for x, _ in usable], dtype=float)
    rhos = np.array([_spearman(x, y) for x, y in usable])
    rho = float(weights @ rhos / weights.sum())
    n = int(weights.sum())
    rng = np.random.default_rng(seed)
    if n < EXACT_BELOW:
        return Agreement(n, len(usable), rho, p=_permutation_p(usable, weights, rho, rng))
    if len(usable) >= MIN_CLUSTERS:
        idx = rng.integers(0, len(usable), size=(n_boot, len(usable)))
        boot = (weights[idx] * rhos[idx]).sum(axis=1) / weights[idx].sum(axis=1)
    else:
        per_group = []
        for x, y in usable:
            pick = rng.integers(0, len(x), size=(n_boot, len(x)))
            per_group.append(_rank_pearson(resample_ranks(x, pick), resample_ranks(y, pick)))
        stacked = np.vstack(per_group)  # groups x resamples; NaN where a resample left one side constant
        w = np.where(np.isnan(stacked), 0.0, weights[:, None])
        with np.errstate(invalid="ignore"):
            boot = np.nansum(stacked * w, axis=0) / w.sum(axis=0)
        boot = boot[~np.isnan(boot)]
    low, high = np.percentile(boot, [50 * (1 - LEVEL), 50 * (1 + LEVEL)])
    return Agreement(n, len(usable), rho, float(low), float(high))


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    whole = np.arange(len(x))[None, :]
    return float(_rank_pearson(resample_ranks(x, whole), resample_ranks(y, whole))[0])


def _permutation_p(usable: list[tuple[np.ndarray, np.ndarray]], weights: np.ndarray, observed: float, rng) -> float:
    """P(weighted within-seed rho >= observed) when y's order inside each seed is random: every ordering enumerated,
    or a seeded sample of 20,000 when there are more than _MAX_EXACT."""
    per_group = []
    for x, y in usable:
        ranks_x = resample_ranks(x, np.arange(len(x))[None, :])
        if math.factorial(len(y)) <= _MAX_EXACT:
            orders = np.array(list(itertools.permutations(range(len(y)))))
        else:
            orders = np.argsort(rng.random((20_000, len(y))), axis=1)
        ranks_y = resample_ranks(y, orders)
        per_group.append(_rank_pearson(np.broadcast_to(ranks_x, ranks_y.shape), ranks_y))
    sizes = [len(g) for g in per_group]
    if math.prod(sizes) <= _MAX_EXACT:
        combos = np.array(list(itertools.product(*per_group))) if len(per_group) > 1 else per_group[0][:, None]
    else:
        combos = np.column_stack([g[rng.integers(0, len(g), 20_000)] for g in per_group])
    stats = combos @ weights / weights.sum()
    return float(np.mean(stats >= observed - 1e-12))


def _rank_pearson(rx: np.ndarray, ry: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row pair of ranks (= Spearman's rho); NaN where one row is constant."""
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    denom = np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (rx * ry).sum(axis=1) / denom, np.nan)


def resample_ranks(v: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """`scipy.stats.rankdata(v[idx], axis=1)` (midranks of each resample) from per-value counts instead of a sort
    per resample: O(n) per resample, which keeps a 5,000-trial study's bootstrap to about a second."""
    groups = np.unique(v, return_inverse=True)[1].reshape(-1)  # dense rank of each value, ties share one
    n_groups = int(groups.max()) + 1
    picked = groups[idx]
    offsets = n_groups * np.arange(idx.shape[0])[:, None]
    counts = np.bincount((picked + offsets).ravel(), minlength=idx.shape[0] * n_groups).reshape(idx.shape[0], n_groups)
    midranks = np.cumsum(counts, axis=1) - (counts - 1) / 2
    return np.take_along_axis(midranks, picked, axis=1)


@dataclass(frozen=True)
class Curve:
    """A finished run's learning curve (training tokens -> val loss) and final val loss, with what it ran."""

    schedule: str
    seed: int
    points: dict[int, float]
    final: float


@dataclass(frozen=True)
class RungAgreement:
    """How well the val loss at `tokens` ranks runs like their final val loss within seeds, and whether the best
    schedule by mean would have survived a successive-halving cut there at every seed it ran (kept at each seed:
    the best max(1, n // reduction_factor)). `best_kept` is None when the best has no curve reaching this rung."""

    tokens: int
    agreement: Agreement
    reduction_factor: int
    best: str | None
    best_kept: bool | None

    @property
    def reliable(self) -> bool:
        return self.agreement.reliably_high and self.best_kept is not False


def rung_fidelity(
    curves: Sequence[Curve], reduction_factor: int, best: str | None, n_boot: int = 2000, seed: int = 0
) -> list[RungAgreement] | None:
    """Agreement at each evaluation point (tokens) below the last that at least MIN_CURVES curves share. None when
    fewer than MIN_CURVES curves."""
    if len(curves) < MIN_CURVES:
        return None
    last = max(max(c.points) for c in curves)
    out = []
    for tokens in sorted({t for c in curves for t in c.points if t < last}):
        have = [c for c in curves if tokens in c.points]
        if len(have) < MIN_CURVES:
            continue
        by_seed: dict[int, list[Curve]] = {}
        for c in have:
            by_seed.setdefault(c.seed, []).append(c)
        agreement = rank_agreement(
            [([c.points[tokens] for c in cs], [c.final for c in cs]) for _, cs in sorted(by_seed.items())], n_boot, seed
        )
        if agreement is not None:
            out.append(RungAgreement(tokens, agreement, reduction_factor, best, _best_kept(by_seed, tokens, reduction_factor, best)))
    return out


def _best_kept(by_seed: dict[int, list[Curve]], tokens: int, reduction_factor: int, best: str | None) -> bool | None:
    """Kept at every seed where `best` reached `tokens`: within the best max(1, n // reduction_factor) there
    (Optuna's successive-halving rule, applied to that seed's runs)."""
    verdicts = []
    for cs in by_seed.values():
        mine = [c for c in cs if c.schedule == best]
        if mine:
            kept = max(1, len(cs) // reduction_factor)
            threshold = sorted(c.points[tokens] for c in cs)[kept - 1]
            verdicts.append(mine[0].points[tokens] <= threshold)
    return all(verdicts) if verdicts else None


def pruning_start(fidelity: Sequence[RungAgreement] | None) -> RungAgreement | None:
    """The first rung from which every later rung ranks reliably (`min_resource_evals = "auto"`): before it a pruner
    would judge schedules by a ranking that does not hold at the end. None when no rung does (trials run to the end)."""
    start = None
    for rung in reversed(fidelity or []):
        if not rung.reliable:
            break
        start = rung
    return start
