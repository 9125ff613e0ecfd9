"""Rank agreement within seeds on constructed data with known answers."""

import functools
import math
import operator

import numpy as np
import pytest
from scipy import stats as sps

from search.analysis.fidelity import Curve, pruning_start, rank_agreement, resample_ranks, rung_fidelity


def test_seed_effects_inflate_a_pooled_rho_but_not_the_within_seed_one():
    """Inside each seed the early value ranks runs backwards; a seed that shifts every loss alike makes the pooled
    ranking look perfect. The within-seed agreement sees through it."""
    early, final = [], []
    for seed_shift in (0.0, 1.0, 2.0):
        x = [seed_shift + 0.1 * k for k in range(6)]
        early.append(x)
        final.append([seed_shift + 0.1 * (5 - k) for k in range(6)])
    pooled = sps.spearmanr(functools.reduce(operator.iadd, early, []), functools.reduce(operator.iadd, final, [])).statistic
    within = rank_agreement(list(zip(early, final, strict=True)), n_boot=300)
    assert pooled > 0.7 and within.rho == pytest.approx(-1.0) and within.high < 0
    assert within.groups == 3 and within.n == 18


def test_six_points_give_an_exact_permutation_p_not_a_bootstrap_interval():
    x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    perfect = rank_agreement([(x, x)])
    assert perfect.low is None and perfect.p == pytest.approx(1 / math.factorial(6))  # one ordering of 720 is this good
    y = [2.0, 1.0, 4.0, 3.0, 6.0, 5.0]
    r = rank_agreement([(x, y)])
    exact = sps.permutation_test((y,), lambda v: sps.spearmanr(x, v).statistic, permutation_type="pairings", alternative="greater")
    assert r.rho == pytest.approx(sps.spearmanr(x, y).statistic) and r.p == pytest.approx(exact.pvalue)
    assert "exact permutation p=" in r.text() and r.reliably_high  # rho 0.83, p = 0.03: high, and not chance
    weak = rank_agreement([(x, [3.0, 1.0, 2.0, 6.0, 4.0, 5.0])])  # rho 0.66 on 6 points happens by chance
    assert weak.rho > 0.5 and weak.p > 0.05 and not weak.reliably_high


def test_many_seeds_are_resampled_as_clusters():
    rng = np.random.default_rng(0)
    groups = []
    for _ in range(6):
        x = rng.standard_normal(5)
        groups.append((x, x + 0.3 * rng.standard_normal(5)))
    r = rank_agreement(groups, n_boot=500)
    assert r.groups == 6 and r.low is not None and r.low <= r.rho <= r.high


def test_would_the_best_by_mean_have_been_cut_per_seed():
    """At 100 tokens the ranking is the final one within each seed; at 200 it is reversed, so the best schedule
    ranks last at every seed and a 1/3 cut removes it."""
    curves = [
        Curve(f"s{k}", seed, {100: f + 1 + seed, 200: 10 - f + seed, 300: f + seed}, f + seed)
        for seed in (0, 1)
        for k, f in enumerate([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    ]
    early, late = rung_fidelity(curves, reduction_factor=3, best="s0", n_boot=300)
    assert early.agreement.rho == pytest.approx(1.0) and early.best_kept and early.reliable and early.warning() is None
    assert late.agreement.rho == pytest.approx(-1.0) and late.best_kept is False
    assert "the best schedule by mean (s0) would have been pruned" in late.warning()
    assert rung_fidelity(curves[:3], reduction_factor=3, best="s0") is None  # too few complete curves


def test_resample_ranks_are_scipy_midranks_with_ties():
    rng = np.random.default_rng(0)
    v = rng.integers(0, 5, size=40).astype(float)  # many ties, and more inside each resample
    idx = rng.integers(0, 40, size=(60, 40))
    assert np.array_equal(resample_ranks(v, idx), sps.rankdata(v[idx], axis=1))


def test_pruning_starts_at_the_first_rung_from_which_every_later_rung_is_reliable():
    """Rungs at 100 (reliable), 200 (reversed), 300 and 400 (reliable): pruning may start only at 300, since a
    reliable early rung followed by an unreliable one says nothing about where the ranking settles."""
    finals = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    curves = [Curve(f"s{k}", 0, {100: f, 200: 20 - f, 300: f + 0.5, 400: f + 0.1, 500: f}, f) for k, f in enumerate(finals)]
    rungs = rung_fidelity(curves, reduction_factor=3, best="s0", n_boot=300)
    assert [r.reliable for r in rungs] == [True, False, True, True]
    assert pruning_start(rungs).tokens == 300
    assert pruning_start(rungs[:2]) is None and pruning_start(None) is None
