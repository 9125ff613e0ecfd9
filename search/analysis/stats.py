"""The statistics behind every gap, verdict and agreement prism-search shows: pure functions of plain numbers.

A gap to uniform is a contrast: a mean of paired differences (same seed: same initial weights, data order and
validation batches) with its standard error and degrees of freedom, from one schedule's pairs (a paired t on n-1 df)
or from the blocked model over many schedules (search.analysis.blocked: far more df). From a contrast come its
interval, its p-value, its equivalence test at a margin (TOST) and its resolution (the effect it would detect with
80% power). Distributions come from scipy.special (the functions scipy.stats.t uses, at a third of its import
time), so `status` stays fast; tests check every number against statsmodels and scipy.stats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.special import nctdtrinc, stdtr, stdtrit  # Student t CDF and inverse, noncentral t's inverse in its nc

LEVEL = 0.95
ALPHA = 1 - LEVEL  # the error rate of every test (two-sided differences; each side of an equivalence test)
POWER = 0.8  # the resolution is the effect detected with this probability
MIN_PAIRS = 3  # below this one schedule's own t interval (1 df: t = 12.7) is no measurement of noise
MIN_CURVES = 4  # fewer complete learning curves say nothing about rank agreement
RELIABLE_RHO = 0.5  # a rung whose agreement may be below this does not rank trials like the final loss


def t_quantile(q: float, df: float) -> float:
    return float(stdtrit(df, q))


@dataclass(frozen=True)
class Contrast:
    """A gap to uniform (negative = better) with its standard error on `df` degrees of freedom; `se` is None while the
    noise is not measured (one schedule's pairs below MIN_PAIRS, and no pooled variance to borrow)."""

    n: int  # paired seeds behind the mean
    mean: float
    se: float | None
    df: int

    @property
    def measured(self) -> bool:
        return self.se is not None

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        half = t_quantile(0.5 + level / 2, self.df) * self._se()
        return self.mean - half, self.mean + half

    @property
    def p(self) -> float:
        """Two-sided test of a zero gap."""
        se = self._se()
        if se == 0:  # identical differences: no spread to test against
            return 1.0 if self.mean == 0 else 0.0
        return float(2 * stdtr(self.df, -abs(self.mean) / se))

    def p_not_better_by(self, margin: float) -> float:
        """One-sided test of H0 "beats uniform by the margin or more" (gap <= -margin): small p shows it does not."""
        se = self._se()
        return float(stdtr(self.df, -(self.mean + margin) / se)) if se else float(self.mean <= -margin)

    def p_not_worse_by(self, margin: float) -> float:
        """One-sided test of H0 "worse than uniform by the margin or more" (gap >= +margin)."""
        se = self._se()
        return float(stdtr(self.df, (self.mean - margin) / se)) if se else float(self.mean >= margin)

    def tost(self, margin: float) -> float:
        """Two one-sided tests: p below ALPHA shows the gap lies inside (-margin, +margin), i.e. the (1 - 2 ALPHA)
        interval does."""
        return max(self.p_not_better_by(margin), self.p_not_worse_by(margin))

    def detectable(self, alpha: float = ALPHA) -> float:
        """Resolution: the gap a two-sided test at `alpha` finds with probability POWER at this standard error: the
        noncentrality at which the t statistic exceeds its critical value with probability POWER (the far tail,
        below -critical, adds under 1e-6 at 80% power and is left out)."""
        critical = t_quantile(1 - alpha / 2, self.df)
        return float(nctdtrinc(self.df, 1 - POWER, critical)) * self._se()

    def _se(self) -> float:
        if self.se is None:
            raise ValueError("the noise of this gap is not measured yet")
        return self.se


def paired_contrast(diffs: list[float]) -> Contrast | None:
    """One schedule's paired differences: mean, sd / sqrt(n) on n - 1 df. None for no pairs."""
    n = len(diffs)
    if n == 0:
        return None
    mean = math.fsum(diffs) / n
    if n < MIN_PAIRS:
        return Contrast(n, mean, None, max(n - 1, 0))
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1))
    return Contrast(n, mean, sd / math.sqrt(n), n - 1)


def pairs_needed(sd_pair: float, margin: float, cap: int = 1000) -> int | None:
    """The fewest paired seeds whose paired t resolves `margin` (detects it with probability POWER at ALPHA), given
    the sd of one paired difference; None above `cap` (the margin is below what seeds can resolve)."""
    for n in range(MIN_PAIRS, cap + 1):
        if Contrast(n, 0.0, sd_pair / math.sqrt(n), n - 1).detectable() <= margin:
            return n
    return None


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment (family-wise error over a many-to-one family), in the input's order."""
    order = sorted(range(len(p_values)), key=p_values.__getitem__)
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class PairedGap:
    """A gap's display: its mean with its 95% interval and p-value (None while the noise is not measured)."""

    n: int
    mean: float
    low: float | None
    high: float | None
    p: float | None  # two-sided test of mean 0
    verdict: str  # better | worse | inside the noise | noise not measured
    adjusted_p: float | None = None  # within a many-to-one family: Holm-adjusted, and what `verdict` reads

    @classmethod
    def of(cls, c: Contrast, adjusted_p: float | None = None) -> PairedGap:
        """The verdict reads the adjusted p when the gap belongs to a family, else the 95% interval."""
        if not c.measured:
            return cls(c.n, c.mean, None, None, None, "noise not measured")
        low, high = c.interval()
        beyond = adjusted_p < ALPHA if adjusted_p is not None else (high < 0 or low > 0)
        verdict = "inside the noise" if not beyond else "better" if c.mean < 0 else "worse"
        return cls(c.n, c.mean, low, high, c.p, verdict, adjusted_p)


def paired_gap(diffs: list[float]) -> PairedGap | None:
    """None for no pairs; the interval and p only from MIN_PAIRS pairs on (negative gap = better than uniform)."""
    c = paired_contrast(diffs)
    return None if c is None else PairedGap.of(c)
