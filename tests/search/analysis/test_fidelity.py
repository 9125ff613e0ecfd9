"""Rank agreement within seeds on constructed data with known answers."""

import functools
import itertools
import math
import operator

import numpy as np
import pytest
from scipy import stats as sps

from search.analysis.fidelity import Agreement, Curve, RungAgreement, pruning_start, rank_agreement, resample_ranks, rung_fidelity
from search.text import agreement_text, rung_text, rung_warning


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
    assert "exact permutation p=" in agreement_text(r) and r.reliably_high  # rho 0.83, p = 0.03: high, and not chance
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
    assert early.agreement.rho == pytest.approx(1.0) and early.best_kept and early.reliable and rung_warning(early) is None
    assert late.agreement.rho == pytest.approx(-1.0) and late.best_kept is False
    assert "the best schedule by mean (s0) would have been pruned" in rung_warning(late)
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


def test_agreement_reads_its_interval_or_its_permutation_p():
    assert agreement_text(Agreement(12, 3, 0.8123, 0.5, 0.9)) == "rho +0.81 [+0.50, +0.90] (within 3 seeds, n=12)"
    assert agreement_text(Agreement(6, 1, 0.83, p=0.0312)) == "rho +0.83 (n=6, exact permutation p=0.031)"
    assert Agreement(12, 1, 0.7, 0.5, 0.9).reliably_high and not Agreement(12, 1, 0.9, 0.49, 0.99).reliably_high
    assert Agreement(6, 1, 0.5, p=0.049).reliably_high and not Agreement(6, 1, 0.49, p=0.001).reliably_high
    assert not Agreement(6, 1, 0.9, p=0.051).reliably_high and not Agreement(6, 1, 0.9).reliably_high


def test_groups_that_cannot_rank_are_left_out_and_the_rest_weighted_by_points():
    """A 2-point seed and seeds with a constant side carry no ranking; a 3-point seed ranking perfectly and a
    6-point one ranking backwards average to (3 - 6) / 9. The exact p is every ordering inside both seeds, scored by
    scipy's Spearman."""
    up3, up6 = [1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    groups = [(up3, up3), (up6, up6[::-1]), ([1.0, 2.0], [1.0, 2.0]), ([1.0, 1.0, 1.0], up3), (up3, [2.0, 2.0, 2.0])]
    r = rank_agreement(groups)
    assert (r.n, r.groups, r.rho) == (9, 2, pytest.approx(-1 / 3)) and r.low is None
    rho3 = np.array([sps.spearmanr(up3, a).statistic for a in itertools.permutations(up3)])
    rho6 = np.array([sps.spearmanr(up6, b).statistic for b in itertools.permutations(up6)])
    scores = (3 * rho3[:, None] + 6 * rho6[None, :]) / 9  # every pair of orderings
    assert r.p == pytest.approx(np.mean(scores >= -1 / 3 - 1e-12))
    assert rank_agreement(groups[2:]) is None


def test_ten_points_in_one_seed_get_a_bootstrap_of_runs_within_it():
    """Below MIN_CLUSTERS seeds the runs are resampled inside each seed: the 2.5 and 97.5 percentiles of the
    point-weighted rho over resamples (a resample that leaves one side constant counts for nothing), each resample's
    rho from scipy's midranks."""
    rng = np.random.default_rng(5)
    groups = [(x, x + 0.8 * rng.standard_normal(n)) for n in (7, 5) for x in [rng.standard_normal(n)]]
    r = rank_agreement(groups, n_boot=400, seed=3)
    draw, per_group = np.random.default_rng(3), []
    for x, y in groups:
        pick = draw.integers(0, len(x), size=(400, len(x)))
        per_group.append([_scipy_rho(x[p], y[p]) for p in pick])
    stacked, weights = np.array(per_group), np.array([[7.0], [5.0]])
    w = np.where(np.isnan(stacked), 0.0, weights)
    kept = w.sum(axis=0) > 0
    boot = np.nansum(stacked * w, axis=0)[kept] / w.sum(axis=0)[kept]
    assert (r.n, r.groups) == (12, 2) and r.p is None
    assert (r.low, r.high) == pytest.approx(tuple(np.percentile(boot, [2.5, 97.5])), rel=1e-9)
    assert rank_agreement(groups, n_boot=400, seed=4).low != r.low  # the seed is the bootstrap's


def test_five_seeds_are_resampled_as_whole_seeds():
    rng = np.random.default_rng(6)
    groups = [(x, x + 0.5 * rng.standard_normal(3 + k)) for k in range(5) for x in [rng.standard_normal(3 + k)]]
    r = rank_agreement(groups, n_boot=300, seed=1)
    rhos = np.array([sps.spearmanr(x, y).statistic for x, y in groups])
    weights = np.array([len(x) for x, _ in groups], dtype=float)
    idx = np.random.default_rng(1).integers(0, 5, size=(300, 5))
    boot = (weights[idx] * rhos[idx]).sum(axis=1) / weights[idx].sum(axis=1)
    assert r.rho == pytest.approx(weights @ rhos / weights.sum()) and (r.n, r.groups) == (25, 5)
    assert (r.low, r.high) == pytest.approx(tuple(np.percentile(boot, [2.5, 97.5])), rel=1e-9)


def test_a_large_seed_s_permutation_p_is_a_seeded_monte_carlo_of_the_same_test():
    """Nine points have 362,880 orderings, above the exact limit: 20,000 sampled orderings estimate the same p."""
    x = np.arange(9.0)
    y = np.array([1.0, 0.0, 2.0, 4.0, 3.0, 5.0, 8.0, 6.0, 7.0])
    r = rank_agreement([(x, y)], seed=2)
    orders = np.array(list(itertools.permutations(range(9))))  # every ordering of y: Spearman without ties, 1 - 6 sum d^2 / (n^3 - n)
    observed = sps.spearmanr(x, y).statistic
    exact = np.mean(1 - 6 * ((orders - sps.rankdata(y)[None, :] + 1) ** 2).sum(axis=1) / (9**3 - 9) >= observed - 1e-12)
    assert r.n == 9 and r.p == pytest.approx(exact, abs=0.005) and 0 < r.p < 0.05
    assert rank_agreement([(x, y)], seed=2).p == r.p


def _scipy_rho(x, y) -> float:
    if len(set(x)) < 2 or len(set(y)) < 2:
        return float("nan")
    return float(sps.spearmanr(x, y).statistic)


def test_a_rung_needs_four_curves_and_the_cut_keeps_one_in_reduction_factor_per_seed():
    """Seed 0 has six runs (a 1/3 cut keeps two), seed 1 two runs (the cut keeps one); the rung at 150 tokens is
    reached by three curves only and is skipped, the last point (300) is the final loss itself."""
    early = {"a": 3.0, "b": 1.0, "c": 2.0, "d": 4.0, "e": 5.0, "f": 6.0}  # at seed 0 the best by mean, "c", ranks 2nd
    curves = [Curve(s, 0, {100: v, 200: 7 - v, 300: v}, v) for s, v in early.items()]
    curves += [Curve("c", 1, {100: 1.0, 200: 2.0, 300: 1.0}, 1.0), Curve("a", 1, {100: 2.0, 200: 1.0, 300: 2.0}, 2.0)]
    curves += [Curve(s, 2, {150: 1.0 + k, 300: 1.0 + k}, 1.0 + k) for k, s in enumerate("abc")]
    rungs = rung_fidelity(curves, reduction_factor=3, best="c", n_boot=200)
    assert [r.tokens for r in rungs] == [100, 200]
    kept, cut = rungs
    assert kept.best_kept is True and cut.best_kept is False  # at 200, "c" ranks 5th of 6 at seed 0 and 2nd of 2 at seed 1
    assert kept.agreement.groups == 1 and kept.agreement.n == 6  # seed 1's two runs carry no ranking, yet are cut
    assert rung_fidelity(curves, reduction_factor=3, best="zz", n_boot=200)[0].best_kept is None
    assert rung_fidelity(curves, reduction_factor=2, best="a", n_boot=200)[0].best_kept is False  # 3rd of 6: cut at 1/2


def test_a_rung_reads_its_cut_and_its_warning_word_for_word():
    weak = Agreement(12, 2, 0.3, 0.1, 0.6)
    rung = RungAgreement(204_800, weak, 3, "2x6", False)
    assert (
        rung_text(rung) == "rho +0.30 [+0.10, +0.60] (within 2 seeds, n=12); a 1/3 cut per seed: the best by mean (2x6) would have been CUT"
    )
    assert rung_warning(rung) == (
        "pruning at 205k tokens is unreliable: within-seed rank agreement with the final loss is not shown to reach 0.5 "
        "(interval down to +0.10) and the best schedule by mean (2x6) would have been pruned"
    )
    few = RungAgreement(1000, Agreement(6, 1, 0.4, p=0.2), 2, None, None)
    assert rung_text(few).endswith("a 1/2 cut per seed: the best by mean (None) has no curve here") and not few.reliable
    assert rung_warning(few) == (
        "pruning at 1k tokens is unreliable: within-seed rank agreement with the final loss is not shown to reach 0.5 "
        "(rho +0.40, permutation p=0.2)"
    )
    strong = RungAgreement(1000, Agreement(12, 1, 0.9, 0.7, 0.95), 3, "a", True)
    assert strong.reliable and rung_warning(strong) is None and rung_text(strong).endswith("(a) kept")
    assert RungAgreement(1000, Agreement(12, 1, 0.9, 0.7, 0.95), 3, "a", None).reliable


def test_pruning_starts_at_the_first_rung_when_every_rung_is_reliable():
    strong = Agreement(12, 1, 0.9, 0.7, 0.95)
    rungs = [RungAgreement(t, strong, 3, "a", True) for t in (100, 200)]
    assert pruning_start(rungs).tokens == 100 and pruning_start([]) is None


def test_a_rung_is_read_from_exactly_four_curves_and_names_its_cut():
    """MIN_CURVES = 4 is the fewest curves that say anything: four curves are enough for a rung (three are not), and
    the rung keeps the reduction factor it was judged with."""
    curves = [Curve(s, 0, {100: v, 200: v}, v) for s, v in zip("abcd", [1.0, 2.0, 3.0, 4.0], strict=True)]
    (rung,) = rung_fidelity(curves, reduction_factor=3, best="a", n_boot=100)
    assert rung.tokens == 100 and rung.agreement.n == 4 and rung.reduction_factor == 3 and "a 1/3 cut per seed" in rung_text(rung)
    assert rung_fidelity(curves[:3], reduction_factor=3, best="a") is None


def test_a_rung_s_agreement_is_rank_agreement_of_its_seeds_at_the_bootstrap_seed_given():
    """The rung reads each seed's early and final losses (seeds in order) through rank_agreement with the n_boot and
    seed it was given, so a study's report is reproducible; the defaults are 2,000 resamples at seed 0."""
    rng = np.random.default_rng(11)
    curves = []
    for seed in (0, 1):
        finals = rng.standard_normal(7)
        curves += [Curve(f"s{k}", seed, {100: f + 0.7 * rng.standard_normal(), 200: f}, f) for k, f in enumerate(finals)]
    groups = [([c.points[100] for c in curves if c.seed == s], [c.final for c in curves if c.seed == s]) for s in (0, 1)]
    (rung,) = rung_fidelity(curves, reduction_factor=3, best="s0", n_boot=300, seed=7)
    assert rung.agreement == rank_agreement(groups, n_boot=300, seed=7) and rung.agreement.low is not None
    (default,) = rung_fidelity(curves, reduction_factor=3, best="s0")
    assert default.agreement == rank_agreement(groups, n_boot=2000, seed=0) == rank_agreement(groups)
    assert rank_agreement(groups, n_boot=2001) != rank_agreement(groups) and rank_agreement(groups, seed=1) != rank_agreement(groups)


def test_ten_points_are_enough_for_a_bootstrap_interval():
    """EXACT_BELOW = 10: nine points get an exact permutation p, ten an interval."""
    x = np.arange(10.0)
    r = rank_agreement([(x, x + np.array([0.5, -0.5] * 5))], n_boot=200)
    assert r.n == 10 and r.low is not None and r.p is None


def test_a_seed_whose_values_take_two_levels_still_ranks():
    """Ties do not remove a seed: one whose early losses take only two values (or finals only two) still orders its
    runs, and counts with its points. Only a constant side carries no ranking."""
    two = [1.0, 1.0, 2.0, 2.0]
    for x, y in ((two, [1.0, 2.0, 3.0, 4.0]), ([1.0, 2.0, 3.0, 4.0], two)):
        r = rank_agreement([(x, y)])
        assert r.n == 4 and r.rho == pytest.approx(sps.spearmanr(x, y).statistic)


def test_resamples_that_leave_a_seed_constant_count_for_nothing_and_warn_nothing():
    """With heavy ties many within-seed resamples have one side constant (no rho): they get weight 0, so the interval
    is the percentiles of the other resamples' point-weighted rho (checked against scipy per resample), and the
    resamples where no seed ranks are dropped without a numpy warning reaching the user."""
    import warnings

    groups = [(np.array([0.0] * 9 + [1.0]), np.arange(10.0)), (np.array([0.0, 0.0, 0.0, 1.0, 2.0]), np.array([3.0, 1.0, 2.0, 5.0, 4.0]))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = rank_agreement(groups, n_boot=300, seed=2)
    draw, per_group = np.random.default_rng(2), []
    for x, y in groups:
        pick = draw.integers(0, len(x), size=(300, len(x)))
        per_group.append([_scipy_rho(x[p], y[p]) for p in pick])
    stacked, weights = np.array(per_group), np.array([[10.0], [5.0]])
    assert np.isnan(stacked).all(axis=0).any() and (np.isnan(stacked).sum(axis=0) == 1).any()  # both cases occur
    w = np.where(np.isnan(stacked), 0.0, weights)
    kept = w.sum(axis=0) > 0
    boot = np.nansum(stacked * w, axis=0)[kept] / w.sum(axis=0)[kept]
    assert (r.low, r.high) == pytest.approx(tuple(np.percentile(boot, [2.5, 97.5])), rel=1e-9)


def test_the_monte_carlo_permutation_p_counts_20000_orderings():
    """Above the exact limit the p-value is the share of 20,000 sampled orderings at least as good as the observed
    one: a multiple of 1 / 20,000."""
    x = np.arange(9.0)
    for y in ([1.0, 0.0, 2.0, 4.0, 3.0, 5.0, 8.0, 6.0, 7.0], [3.0, 0.0, 2.0, 1.0, 5.0, 4.0, 8.0, 7.0, 6.0]):
        p = rank_agreement([(x, np.array(y))], seed=3).p
        assert p * 20_000 == pytest.approx(round(p * 20_000), abs=1e-6) and 0 < p < 1
