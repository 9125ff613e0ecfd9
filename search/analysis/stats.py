"""The statistics behind every gap and agreement prism-search shows: pure functions of plain numbers.

A gap to uniform is a mean of paired differences (same seed: same initial weights, data order and validation
batches), read with a Student-t interval on n-1 degrees of freedom; one pair says nothing about noise, so it is
shown as such. Rank agreement between an early evaluation and the final loss is a Spearman correlation with a
seeded percentile bootstrap interval, which is what tells whether pruning at that rung can be trusted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtr, stdtrit  # Student t CDF and inverse: what scipy.stats.t uses, at a third of its import time

LEVEL = 0.95
MIN_PAIRS = 3  # below this the t interval (1 df: t = 12.7) is no measurement of noise
MIN_CURVES = 4  # fewer complete learning curves say nothing about rank agreement
RELIABLE_RHO = 0.5  # a rung whose interval reaches below this does not rank trials like the final loss


@dataclass(frozen=True)
class PairedGap:
    """Mean of paired differences (schedule - uniform at the same seed) with its 95% t interval and p-value."""

    n: int
    mean: float
    low: float | None  # None while n < MIN_PAIRS
    high: float | None
    p: float | None  # two-sided one-sample t test of mean 0
    verdict: str  # better | worse | inside the noise | noise not measured

    def text(self, next_step: str = "") -> str:
        """`next_step`: the command that measures the noise, named while it is not measured."""
        if self.low is None:
            run = f"; run `{next_step}`" if next_step else ""
            return f"{self.mean:+.4f} (n={self.n}: noise not measured yet{run})"
        return f"{self.mean:+.4f} [{self.low:+.4f}, {self.high:+.4f}] (n={self.n}, p={_p(self.p)})"


def _p(p: float | None) -> str:
    if p is None:
        return "n/a"
    return f"{p:.2g}" if p >= 0.001 else "<0.001"


def paired_gap(diffs: list[float]) -> PairedGap | None:
    """None for no pairs; the interval and p only from MIN_PAIRS pairs on (negative gap = better than uniform)."""
    n = len(diffs)
    if n == 0:
        return None
    mean = math.fsum(diffs) / n
    if n < MIN_PAIRS:
        return PairedGap(n, mean, None, None, None, "noise not measured")
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = float(stdtrit(n - 1, 0.5 + LEVEL / 2)) * sd / math.sqrt(n)
    if sd == 0:  # identical differences: no spread to test against
        p = 1.0 if mean == 0 else 0.0
    else:
        p = float(2 * stdtr(n - 1, -abs(mean) / (sd / math.sqrt(n))))
    low, high = mean - half, mean + half
    verdict = "better" if high < 0 else "worse" if low > 0 else "inside the noise"
    return PairedGap(n, mean, low, high, p, verdict)


@dataclass(frozen=True)
class RankCorrelation:
    n: int
    rho: float
    low: float  # percentile bootstrap interval
    high: float


def spearman_ci(x: list[float], y: list[float], n_boot: int = 2000, seed: int = 0) -> RankCorrelation:
    """Spearman's rho of x and y with a seeded percentile bootstrap interval (resampling pairs).
    Resamples in which one side is constant have no rank correlation and are left out."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(xs) != len(ys) or len(xs) < 3:
        raise ValueError(f"spearman_ci needs two equally long samples of at least 3 values, got {len(xs)} and {len(ys)}")
    whole = np.arange(len(xs))[None, :]
    rho = float(_rank_pearson(resample_ranks(xs, whole), resample_ranks(ys, whole))[0])
    idx = np.random.default_rng(seed).integers(0, len(xs), size=(n_boot, len(xs)))
    boot = _rank_pearson(resample_ranks(xs, idx), resample_ranks(ys, idx))
    boot = boot[~np.isnan(boot)]
    low, high = np.percentile(boot, [50 * (1 - LEVEL), 50 * (1 + LEVEL)]) if boot.size else (math.nan, math.nan)
    return RankCorrelation(len(x), rho, float(low), float(high))


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
class RungAgreement:
    """How well the val loss at `tokens` ranks trials like their final val loss, and whether the eventual best
    would have survived a successive-halving cut there (kept: the best max(1, n // reduction_factor))."""

    tokens: int
    rank: RankCorrelation
    kept: int
    best_kept: bool

    @property
    def reliable(self) -> bool:
        return self.rank.low >= RELIABLE_RHO and self.best_kept

    def text(self) -> str:
        r = self.rank
        cut = "best kept" if self.best_kept else "best would have been CUT"
        return f"rho {r.rho:+.2f} [{r.low:+.2f}, {r.high:+.2f}] (n={r.n}); keep {self.kept}: {cut}"

    def warning(self) -> str | None:
        if self.reliable:
            return None
        why = []
        if self.rank.low < RELIABLE_RHO:
            why.append(f"rank agreement with the final loss may be below {RELIABLE_RHO} (interval down to {self.rank.low:+.2f})")
        if not self.best_kept:
            why.append("the eventual best would have been pruned")
        return f"pruning at {tokens_text(self.tokens)} tokens is unreliable: {' and '.join(why)}"


def rung_fidelity(
    curves: list[dict[int, float]], finals: list[float], reduction_factor: int, n_boot: int = 2000, seed: int = 0
) -> list[RungAgreement] | None:
    """Agreement of each evaluation point (tokens) with the final loss, over finished trials' full curves.

    `curves[i]` maps training tokens to val loss of trial i, `finals[i]` is its final val loss. Points are the
    token counts below the last that at least MIN_CURVES curves share. None when fewer than MIN_CURVES curves.
    """
    if len(curves) < MIN_CURVES:
        return None
    best = min(range(len(finals)), key=finals.__getitem__)
    last = max(max(c) for c in curves)
    points = sorted({t for c in curves for t in c if t < last})
    out = []
    for tokens in points:
        have = [i for i, c in enumerate(curves) if tokens in c]
        if len(have) < MIN_CURVES or best not in have:
            continue
        at = [curves[i][tokens] for i in have]
        kept = max(1, len(have) // reduction_factor)
        threshold = sorted(at)[kept - 1]  # Optuna's rule: promoted while within the best `kept`
        rank = spearman_ci(at, [finals[i] for i in have], n_boot, seed)
        out.append(RungAgreement(tokens, rank, kept, curves[best][tokens] <= threshold))
    return out


def tokens_text(tokens: float) -> str:
    """205k, 1.2M: token counts as people say them."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(tokens) >= scale:
            return f"{tokens / scale:.3g}{unit}"
    return f"{tokens:.0f}"
