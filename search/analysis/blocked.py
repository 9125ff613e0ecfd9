"""Many schedules against one control (uniform), blocked by seed.

Every schedule is compared with uniform on the seeds both ran (paired). With several schedules per seed, the additive
model y = schedule + seed + e removes each seed's luck (a lucky or unlucky uniform run moves every gap at that seed
alike) and pools the residual variance over all schedules: its contrasts with uniform have the residual degrees of
freedom, far more than one schedule's n - 1. Until some schedule other than uniform has two seeds there is no pooled
variance, and each schedule's gap is its own paired t. Either way the p-values of the family are Holm-adjusted,
because with K schedules against one baseline about K * 0.05 false "differences" appear by chance alone.

Schedules are ranked by a shrunken estimate of their gap, not by their raw paired mean: a schedule run at one seed
has a noisier mean than one run at three, and the best of many noisy means is the luckiest. The family's gaps are
read as draws from a normal population of true gaps (empirical Bayes: its mean and spread estimated from the
family itself, DerSimonian-Laird), and each estimate is pulled toward the population mean by its own noise. Equal
seeds give every schedule the same pull, which keeps the raw ranking; where noise is not measured, or where the spread
of true gaps is estimated at 0 (every estimate is then the family's mean), the raw means rank.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from search.analysis.stats import Contrast, holm, paired_contrast

MIN_RESIDUAL_DF = 2  # a pooled variance on fewer df is no better than one schedule's own


@dataclass(frozen=True)
class ScheduleGap:
    """One schedule's gap to uniform within its family: the paired seeds, the contrast, the Holm-adjusted p."""

    schedule: str
    seeds: tuple[int, ...]
    paired_mean: float  # mean of (schedule - uniform) over `seeds`
    contrast: Contrast
    adjusted_p: float | None  # None while the contrast's noise is not measured
    shrunk: float | None = None  # the empirical-Bayes estimate of its gap (None: the family's noise is not measured)

    @property
    def estimate(self) -> float:
        """What schedules are ranked by, and compared with uniform's 0 by: the shrunken gap where there is one."""
        return self.paired_mean if self.shrunk is None else self.shrunk


@dataclass(frozen=True)
class Fit:
    """How a family's gaps were tested: the blocked model on `residual_df` df (None: a paired t per schedule), Holm
    over `holm_over` gaps (0: no schedule has two paired seeds, so none is tested), and whether the schedules are
    ranked by shrunken gaps (else by raw paired means)."""

    residual_df: int | None
    holm_over: int
    shrunk: bool


@dataclass(frozen=True)
class ManyToOne:
    """Every schedule's gap to uniform, best paired mean first. `residual_df` is set when the blocked model was used;
    `sd_pair` is the sd of one paired difference (what sizes the seeds still needed), when measured."""

    gaps: tuple[ScheduleGap, ...]
    residual_df: int | None
    sd_pair: float | None

    @property
    def method(self) -> Fit:
        shrunk = any(g.shrunk is not None for g in self.gaps)
        if self.residual_df is not None:
            return Fit(self.residual_df, len(self.gaps), shrunk)
        return Fit(None, sum(g.adjusted_p is not None for g in self.gaps), shrunk)

    def gap(self, schedule: str) -> ScheduleGap | None:
        return next((g for g in self.gaps if g.schedule == schedule), None)


def many_to_one(runs: Mapping[tuple[str, int], float], control: str) -> ManyToOne:
    """`runs` maps (schedule, seed) to val loss; only seeds where `control` ran enter (every gap is paired)."""
    control_seeds = {seed for schedule, seed in runs if schedule == control}
    data = {(s, seed): y for (s, seed), y in runs.items() if seed in control_seeds}
    seeds_of: dict[str, list[int]] = {}
    for s, seed in sorted(data):
        if s != control:
            seeds_of.setdefault(s, []).append(seed)
    diffs = {s: [data[(s, seed)] - data[(control, seed)] for seed in seeds] for s, seeds in seeds_of.items()}
    fit = _blocked(data, control, sorted(seeds_of), sorted(control_seeds)) if any(len(d) >= 2 for d in diffs.values()) else None
    if fit is not None:
        contrasts, residual_df, sigma = fit
        sd_pair: float | None = math.sqrt(2) * sigma
    else:
        contrasts = {s: c for s, d in diffs.items() if (c := paired_contrast(d)) is not None}
        residual_df = None
        spreads = [c.se * math.sqrt(c.n) for c in contrasts.values() if c.se is not None]
        sd_pair = math.sqrt(sum(x * x for x in spreads) / len(spreads)) if spreads else None
    measured = [s for s, c in contrasts.items() if c.measured]
    adjusted = dict(zip(measured, holm([contrasts[s].p for s in measured]), strict=True))
    means = {s: math.fsum(d) / len(d) for s, d in diffs.items()}
    shrunk = shrunken(means, _variances(means, contrasts, seeds_of, sd_pair))
    gaps = [ScheduleGap(s, tuple(seeds_of[s]), means[s], contrasts[s], adjusted.get(s), shrunk.get(s)) for s in seeds_of]
    # where the spread of true gaps is estimated at 0, every estimate is the family's mean: the raw means still rank
    return ManyToOne(tuple(sorted(gaps, key=lambda g: (g.estimate, g.paired_mean, -len(g.seeds), g.schedule))), residual_df, sd_pair)


def _variances(
    means: Mapping[str, float], contrasts: Mapping[str, Contrast], seeds_of: Mapping[str, list[int]], sd_pair: float | None
) -> dict[str, float]:
    """Each schedule's sampling variance of its gap: its contrast's se squared, else the pooled sd of one paired
    difference over its seeds. Empty when no noise is measured."""
    if sd_pair is None:
        return {}
    out = {}
    for s in means:
        c = contrasts.get(s)
        out[s] = c.se**2 if c is not None and c.se is not None else sd_pair**2 / len(seeds_of[s])
    return out


def shrunken(means: Mapping[str, float], variances: Mapping[str, float]) -> dict[str, float]:
    """Empirical-Bayes posterior means of the gaps: each `means[s]` pulled toward the random-effects mean by
    tau^2 / (tau^2 + variances[s]), tau^2 the DerSimonian-Laird between-schedule variance. Empty with fewer than two
    schedules, or where a variance is not positive (nothing to weigh by)."""
    names = sorted(variances)
    if len(names) < 2 or any(variances[s] <= 0 for s in names):
        return {}
    d = np.array([means[s] for s in names])
    v = np.array([variances[s] for s in names])
    w = 1.0 / v
    fixed = float(w @ d / w.sum())
    q = float(w @ (d - fixed) ** 2)
    tau2 = max(0.0, (q - (len(names) - 1)) / float(w.sum() - (w @ w) / w.sum()))
    w_random = 1.0 / (v + tau2)
    mu = float(w_random @ d / w_random.sum())
    pulled = mu + tau2 / (tau2 + v) * (d - mu)
    return dict(zip(names, (float(x) for x in pulled), strict=True))


def _blocked(
    data: Mapping[tuple[str, int], float], control: str, schedules: list[str], seeds: list[int]
) -> tuple[dict[str, Contrast], int, float] | None:
    """Least squares of y on an intercept, one indicator per schedule other than the control and one per seed but
    the first; the schedule coefficients are the contrasts with the control. None without MIN_RESIDUAL_DF df."""
    keys = sorted(data)
    column = {s: 1 + i for i, s in enumerate(schedules)} | {seed: 1 + len(schedules) + i for i, seed in enumerate(seeds[1:])}
    x = np.zeros((len(keys), 1 + len(schedules) + len(seeds) - 1))
    x[:, 0] = 1.0
    for row, (s, seed) in enumerate(keys):
        if s != control:
            x[row, column[s]] = 1.0
        if seed != seeds[0]:
            x[row, column[seed]] = 1.0
    y = np.array([data[k] for k in keys])
    rank = int(np.linalg.matrix_rank(x))
    df = len(keys) - rank
    if rank < x.shape[1] or df < MIN_RESIDUAL_DF:
        return None
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    residual = y - x @ beta
    sigma = math.sqrt(float(residual @ residual) / df)
    cov = sigma**2 * np.linalg.inv(x.T @ x)
    counts = {s: sum(1 for k in keys if k[0] == s) for s in schedules}
    contrasts = {s: Contrast(counts[s], float(beta[column[s]]), math.sqrt(float(cov[column[s], column[s]])), df) for s in schedules}
    return contrasts, df, sigma
