"""search.analysis.stats on inputs whose answers are known by hand or from scipy's reference implementations."""

import math

import pytest
from scipy import stats as sps

from search.analysis.stats import paired_gap, rung_fidelity, spearman_ci, tokens_text


def test_paired_gap_is_a_t_interval_on_n_minus_1_df():
    gap = paired_gap([-1.0, -2.0, -3.0])  # mean -2, sd 1, t(0.975, 2) = 4.303 -> half width 4.303 / sqrt(3) = 2.484
    assert gap.n == 3 and gap.mean == pytest.approx(-2.0)
    assert gap.low == pytest.approx(-2 - 2.4841, abs=1e-4) and gap.high == pytest.approx(-2 + 2.4841, abs=1e-4)
    assert gap.p == pytest.approx(sps.ttest_1samp([-1, -2, -3], 0).pvalue)  # t = -3.464 on 2 df: p = 0.074
    assert gap.verdict == "inside the noise"  # the interval reaches above 0
    assert gap.text() == "-2.0000 [-4.4841, +0.4841] (n=3, p=0.074)"


def test_paired_gap_verdicts_and_a_clear_difference():
    better = paired_gap([-0.012, -0.010, -0.011, -0.013])
    assert better.verdict == "better" and better.high < 0 and better.p < 0.001 and "p=<0.001" in better.text()
    assert paired_gap([0.02, 0.03, 0.025]).verdict == "worse"
    assert paired_gap([0.01, 0.01, 0.01]).p == 0.0 and paired_gap([0.0, 0.0, 0.0]).p == 1.0


def test_paired_gap_below_three_pairs_says_the_noise_is_not_measured():
    assert paired_gap([]) is None
    one = paired_gap([-0.0123])
    assert one.low is None and one.p is None and one.verdict == "noise not measured"
    command = "prism-search confirm quick --top 1 --seeds 3"
    assert one.text(command) == f"-0.0123 (n=1: noise not measured yet; run `{command}`)"
    assert paired_gap([-0.01, -0.02]).text() == "-0.0150 (n=2: noise not measured yet)"


def test_spearman_of_a_monotone_transform_is_one_with_a_degenerate_interval():
    x = [0.3, 1.2, 2.5, 3.1, 4.8, 5.0, 7.7]
    r = spearman_ci(x, [math.exp(v) for v in x], n_boot=500, seed=1)
    assert r.n == 7 and r.rho == pytest.approx(1.0) and r.low == pytest.approx(1.0) and r.high == pytest.approx(1.0)
    assert spearman_ci(x, [-v for v in x], n_boot=200).rho == pytest.approx(-1.0)


def test_spearman_matches_scipy_and_is_deterministic_per_seed():
    x = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    y = [2, 1, 4, 3, 6, 5, 8, 7, 10, 9]  # rho = 1 - 6 * 10 / (10 * 99) = 0.9394
    r = spearman_ci(x, y, n_boot=1000, seed=3)
    assert r.rho == pytest.approx(1 - 60 / 990) == pytest.approx(sps.spearmanr(x, y).statistic)
    assert r.low < r.rho <= r.high <= 1.0
    assert spearman_ci(x, y, n_boot=1000, seed=3) == r and spearman_ci(x, y, n_boot=1000, seed=4) != r
    tied_x, tied_y = [1, 1, 2, 3, 3, 3, 4, 5], [2, 1, 1, 4, 3, 3, 5, 5]  # midranks, as scipy ranks ties
    assert spearman_ci(tied_x, tied_y, n_boot=100).rho == pytest.approx(sps.spearmanr(tied_x, tied_y).statistic)
    with pytest.raises(ValueError, match="at least 3 values"):
        spearman_ci([1, 2], [1, 2])


def test_rung_fidelity_agreement_and_the_successive_halving_cut():
    finals = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    # at 100 tokens the ranking is the final one; at 200 it is reversed, so the best (trial 0) ranks last and is cut
    curves = [{100: f + 1, 200: 10 - f, 300: f} for f in finals]
    early, late = rung_fidelity(curves, finals, reduction_factor=3, n_boot=300)
    assert early.tokens == 100 and early.rank.rho == pytest.approx(1.0) and early.kept == 2 and early.best_kept
    assert early.reliable and early.warning() is None
    assert late.tokens == 200 and late.rank.rho == pytest.approx(-1.0) and not late.best_kept
    assert late.warning() == (
        "pruning at 200 tokens is unreliable: rank agreement with the final loss may be below 0.5 "
        "(interval down to -1.00) and the eventual best would have been pruned"
    )
    assert rung_fidelity(curves[:3], finals[:3], reduction_factor=3) is None  # too few complete curves


def test_tokens_text():
    assert tokens_text(204_800) == "205k" and tokens_text(614_400) == "614k" and tokens_text(1_228_800) == "1.23M"
    assert tokens_text(512) == "512"


def test_resample_ranks_are_scipy_midranks_with_ties():
    import numpy as np

    from search.analysis.stats import resample_ranks

    rng = np.random.default_rng(0)
    v = rng.integers(0, 5, size=40).astype(float)  # many ties, and more inside each resample
    idx = rng.integers(0, 40, size=(60, 40))
    assert np.array_equal(resample_ranks(v, idx), sps.rankdata(v[idx], axis=1))
