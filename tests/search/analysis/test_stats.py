"""search.analysis.stats on inputs whose answers are known by hand or from scipy's reference implementations."""

import numpy as np
import pytest
from scipy import stats as sps

from search.analysis.stats import (
    ALPHA,
    Contrast,
    PairedGap,
    holm,
    paired_contrast,
    paired_gap,
    pairs_needed,
    t_quantile,
)
from search.text import p_text, paired_gap_text, tokens_text


def test_paired_gap_is_a_t_interval_on_n_minus_1_df():
    gap = paired_gap([-1.0, -2.0, -3.0])  # mean -2, sd 1, t(0.975, 2) = 4.303 -> half width 4.303 / sqrt(3) = 2.484
    assert gap.n == 3 and gap.mean == pytest.approx(-2.0)
    assert gap.low == pytest.approx(-2 - 2.4841, abs=1e-4) and gap.high == pytest.approx(-2 + 2.4841, abs=1e-4)
    assert gap.p == pytest.approx(sps.ttest_1samp([-1, -2, -3], 0).pvalue)  # t = -3.464 on 2 df: p = 0.074
    assert gap.verdict == "inside the noise"  # the interval reaches above 0
    assert paired_gap_text(gap) == "-2.0000 [-4.4841, +0.4841] (n=3, p=0.074)"


def test_paired_gap_verdicts_and_a_clear_difference():
    better = paired_gap([-0.012, -0.010, -0.011, -0.013])
    assert better.verdict == "better" and better.high < 0 and better.p < 0.001 and "p=<0.001" in paired_gap_text(better)
    assert paired_gap([0.02, 0.03, 0.025]).verdict == "worse"
    assert paired_gap([0.01, 0.01, 0.01]).p == 0.0 and paired_gap([0.0, 0.0, 0.0]).p == 1.0


def test_paired_gap_below_three_pairs_says_the_noise_is_not_measured():
    assert paired_gap([]) is None
    one = paired_gap([-0.0123])
    assert one.low is None and one.p is None and one.verdict == "noise not measured"
    command = "prism-search confirm quick --top 1 --seeds 3"
    assert paired_gap_text(one, command) == f"-0.0123 (n=1: noise not measured yet; run `{command}`)"
    assert paired_gap_text(paired_gap([-0.01, -0.02])) == "-0.0150 (n=2: noise not measured yet)"


def test_tokens_text():
    assert tokens_text(204_800) == "205k" and tokens_text(614_400) == "614k" and tokens_text(1_228_800) == "1.23M"
    assert tokens_text(512) == "512"


def test_tost_matches_statsmodels_ttost_paired():
    """Equivalence shown and not shown, against statsmodels' reference TOST on the same paired samples."""
    from statsmodels.stats.weightstats import ttost_paired

    uniform = [2.010, 2.020, 2.015, 2.030, 2.025, 2.018, 2.022, 2.012]
    close = [u + d for u, d in zip(uniform, [0.001, -0.002, 0.0015, 0.0, -0.001, 0.002, -0.0005, 0.001], strict=True)]
    far = [u + d for u, d in zip(uniform, [0.012, 0.006, 0.015, 0.009, 0.011, 0.004, 0.013, 0.010], strict=True)]
    for schedule, shown in ((close, True), (far, False)):
        c = paired_contrast([a - b for a, b in zip(schedule, uniform, strict=True)])
        reference = ttost_paired(np.array(schedule), np.array(uniform), -0.005, 0.005)[0]
        assert c.tost(0.005) == pytest.approx(reference, rel=1e-9)
        assert (c.tost(0.005) < 0.05) is shown


def test_resolution_is_the_power_analysis_of_statsmodels():
    """The effect detected with 80% power by a two-sided paired t at 0.05, as statsmodels solves it (noncentral t)."""
    from statsmodels.stats.power import TTestPower

    sd, n = 0.008, 10
    ours = Contrast(n, 0.0, sd / n**0.5, n - 1).detectable()
    exact = TTestPower().solve_power(nobs=n, alpha=0.05, power=0.8, alternative="two-sided") * sd
    assert ours == pytest.approx(exact, rel=1e-4)
    assert pairs_needed(sd, ours) == n and pairs_needed(sd, 0.9 * ours) > n
    assert pairs_needed(sd, 1e-6) is None  # the margin is below what any affordable number of seeds resolves


def test_holm_matches_statsmodels_multipletests():
    from statsmodels.stats.multitest import multipletests

    p = [0.01, 0.04, 0.03, 0.005, 0.5, 0.02]
    assert holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]))
    assert holm([]) == []


def test_one_sided_tests_are_scipy_s_one_sample_t_against_the_margin():
    """p_not_better_by tests H0 "gap <= -margin" (alternative: greater), p_not_worse_by H0 "gap >= +margin"
    (alternative: less): scipy's one-sample t on the same differences, at either side of the margin."""
    for diffs in ([-0.004, 0.001, -0.002, 0.003, -0.001], [-0.012, -0.008, -0.011, -0.006], [0.009, 0.012, 0.007]):
        c = paired_contrast(diffs)
        for margin in (0.002, 0.005, 0.01):
            assert c.p_not_better_by(margin) == pytest.approx(sps.ttest_1samp(diffs, -margin, alternative="greater").pvalue, rel=1e-9)
            assert c.p_not_worse_by(margin) == pytest.approx(sps.ttest_1samp(diffs, margin, alternative="less").pvalue, rel=1e-9)
            assert c.tost(margin) == max(c.p_not_better_by(margin), c.p_not_worse_by(margin))


def test_identical_differences_decide_the_one_sided_tests_by_the_mean_alone():
    """No spread: the gap is its mean exactly, so H0 holds (p = 1) from the margin's edge on and fails (p = 0) inside."""
    at_edge, inside, beyond = Contrast(3, -0.01, 0.0, 2), Contrast(3, -0.005, 0.0, 2), Contrast(3, 0.01, 0.0, 2)
    assert at_edge.p_not_better_by(0.01) == 1.0 and inside.p_not_better_by(0.01) == 0.0
    assert beyond.p_not_worse_by(0.01) == 1.0 and inside.p_not_worse_by(0.01) == 0.0 and at_edge.p_not_worse_by(0.01) == 0.0
    assert Contrast(3, -0.02, 0.0, 2).p == 0.0 and Contrast(3, 0.0, 0.0, 2).p == 1.0


def test_intervals_and_resolution_at_other_levels_are_scipy_s_and_statsmodels():
    from statsmodels.stats.power import TTestPower

    diffs = [-0.004, 0.001, -0.002, 0.003, -0.001, -0.003]
    c = paired_contrast(diffs)
    for level in (0.8, 0.9, 0.99):
        assert c.interval(level) == pytest.approx(sps.t.interval(level, 5, loc=np.mean(diffs), scale=sps.sem(diffs)), rel=1e-9)
    assert c.interval() == pytest.approx(sps.t.interval(0.95, 5, loc=np.mean(diffs), scale=sps.sem(diffs)), rel=1e-9)
    exact = TTestPower().solve_power(nobs=6, alpha=0.1, power=0.8, alternative="two-sided") * np.std(diffs, ddof=1)
    assert c.detectable(alpha=0.1) == pytest.approx(exact, rel=1e-4)


def test_below_three_pairs_the_contrast_keeps_its_df_and_refuses_its_noise():
    one, two = paired_contrast([0.01]), paired_contrast([0.01, 0.03])
    assert (one.n, one.df, one.se, one.mean) == (1, 0, None, 0.01) and (two.n, two.df, two.se) == (2, 1, None)
    assert two.mean == pytest.approx(0.02) and paired_contrast([]) is None
    with pytest.raises(ValueError, match=r"^the noise of this gap is not measured yet$"):
        two.interval()
    three = paired_contrast([0.01, 0.03, 0.05])
    assert (three.df, three.measured) == (2, True) and three.se == pytest.approx(sps.sem([0.01, 0.03, 0.05]))


def test_pairs_needed_searches_up_to_its_cap():
    sd = 0.008
    n = pairs_needed(sd, 0.01)
    assert n is not None and n > 3
    assert pairs_needed(sd, 0.01, cap=n) == n and pairs_needed(sd, 0.01, cap=n - 1) is None
    assert pairs_needed(sd, 1.0) == 3  # a huge margin: the fewest pairs that measure noise at all


def test_a_family_s_gap_reads_its_adjusted_p_not_its_interval():
    """Inside a family the verdict follows the Holm-adjusted p: a gap whose own interval excludes 0 stays inside the
    noise at adjusted p 0.051, and is better just below 0.05."""
    c = paired_contrast([-0.012, -0.010, -0.011, -0.013])
    assert PairedGap.of(c).verdict == "better"
    assert PairedGap.of(c, adjusted_p=0.051).verdict == "inside the noise"
    better = PairedGap.of(c, adjusted_p=0.049)
    assert better.verdict == "better" and better.adjusted_p == 0.049 and better.p == c.p
    assert paired_gap_text(better).endswith(f"(n=4, p={p_text(c.p)}, adjusted p=0.049)")
    assert PairedGap.of(paired_contrast([0.012, 0.010, 0.011]), adjusted_p=0.01).verdict == "worse"
    unmeasured = PairedGap.of(paired_contrast([0.1, 0.2]), adjusted_p=0.01)
    assert unmeasured.verdict == "noise not measured" and unmeasured.adjusted_p is None


def test_p_text_and_tokens_text_at_their_boundaries():
    assert p_text(None) == "n/a" and p_text(0.001) == "0.001" and p_text(0.000999) == "<0.001" and p_text(0.0456) == "0.046"
    assert tokens_text(1e9) == "1G" and tokens_text(1e6) == "1M" and tokens_text(1000) == "1k" and tokens_text(999) == "999"
    assert tokens_text(-2500) == "-2.5k"


def test_pairs_needed_is_the_fewest_pairs_statsmodels_power_analysis_allows():
    """Just above the effect n pairs detect, n pairs suffice; just below it, n + 1 are needed. The search stops at its
    cap: 1000 pairs by default."""
    from statsmodels.stats.power import TTestPower

    sd = 0.01
    for n in (3, 4, 5, 8):
        effect = TTestPower().solve_power(nobs=n, alpha=0.05, power=0.8, alternative="two-sided") * sd
        assert pairs_needed(sd, effect * 1.0001) == n and pairs_needed(sd, effect * 0.9999) == n + 1
    beyond_cap = Contrast(1001, 0.0, sd / 1001**0.5, 1000).detectable()
    assert pairs_needed(sd, beyond_cap) is None and pairs_needed(sd, beyond_cap, cap=1001) == 1001


def test_an_interval_that_ends_at_zero_or_an_adjusted_p_at_alpha_is_inside_the_noise():
    se = 0.004
    half = t_quantile(0.975, 3) * se
    assert PairedGap.of(Contrast(4, -half, se, 3)).high == 0.0 and PairedGap.of(Contrast(4, -half, se, 3)).verdict == "inside the noise"
    assert PairedGap.of(Contrast(4, half, se, 3)).low == 0.0 and PairedGap.of(Contrast(4, half, se, 3)).verdict == "inside the noise"
    assert PairedGap.of(Contrast(4, -0.02, se, 3), adjusted_p=ALPHA).verdict == "inside the noise"


def test_holm_caps_adjusted_p_values_at_one():
    """An adjusted p is a probability: (m - rank) x p above 1 is capped at 1 (statsmodels' Holm agrees), and the cap
    carries down the step-down order."""
    from statsmodels.stats.multitest import multipletests

    p = [0.6, 0.7, 0.2]
    assert holm(p) == pytest.approx(list(multipletests(p, method="holm")[1])) and holm(p) == pytest.approx([1.0, 1.0, 0.6])
