"""search.analysis.sequential: the pre-registered experiment's looks, checked against statsmodels and scipy."""

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import ttost_paired

from search.analysis.sequential import Plan, experiment_verdict, read, state
from search.analysis.stats import MIN_PAIRS
from search.config import MIN_LOOK

PLAN = Plan("2x3,4x3", "2x6", 2000, (4, 6, 8), margin=0.01)


def _diffs(mean: float, sd: float, n: int, seed: int = 0) -> list[float]:
    """n paired differences with exactly this mean and sd, so each outcome below is certain, not luck."""
    z = np.random.default_rng(seed).standard_normal(n)
    z = (z - z.mean()) / z.std(ddof=1)
    return list(mean + sd * z)


def test_each_look_is_the_paired_t_and_tost_at_alpha_split_over_the_looks():
    diffs = _diffs(-0.004, 0.009, 8)
    looks = read(Plan("s", "u", 0, (8,), margin=0.01), diffs)
    (look,) = looks
    a = 0.05
    zeros = np.zeros(8)
    assert look.p_difference == pytest.approx(sps.ttest_1samp(diffs, 0).pvalue)
    assert look.p_equivalence == pytest.approx(ttost_paired(np.array(diffs), zeros, -0.01, 0.01)[0])
    lo, hi = look.interval
    assert (lo, hi) == pytest.approx(sps.t.interval(1 - a, 7, loc=np.mean(diffs), scale=sps.sem(diffs)))
    effect = TTestPower().solve_power(nobs=8, alpha=a, power=0.8, alternative="two-sided") * np.std(diffs, ddof=1)
    assert look.resolution == pytest.approx(effect, rel=1e-3)
    split = read(PLAN, diffs)  # three looks: each at 0.05 / 3, so the interval is wider at the same pairs
    assert PLAN.alpha_per_look == pytest.approx(0.05 / 3)
    assert split[-1].level == pytest.approx(1 - 0.05 / 3) and split[-1].interval[0] < lo


@pytest.mark.parametrize(
    "mean, sd, outcome, pairs",
    [
        (0.0, 0.002, "equivalent", 4),  # a tight gap at 0: TOST rejects at the first look
        (-0.03, 0.004, "better", 4),  # far beyond the margin, below 0
        (0.03, 0.004, "worse", 4),
        (-0.006, 0.012, "undecided", 8),  # neither test rejects at any look: undecided at the cap
    ],
)
def test_the_first_deciding_look_ends_the_experiment(mean, sd, outcome, pairs):
    looks = read(PLAN, _diffs(mean, sd, 8))
    assert looks[-1].outcome == outcome and looks[-1].pairs == pairs
    assert all(look.outcome == "continue" for look in looks[:-1])  # no look after the deciding one is read


def test_equivalence_is_named_first_when_both_tests_reject():
    look = read(PLAN, _diffs(-0.003, 0.0005, 4))[-1]  # 0.003 below uniform beyond doubt, and well inside the margin
    assert look.p_difference < PLAN.alpha_per_look and look.p_equivalence < PLAN.alpha_per_look
    assert look.outcome == "equivalent"
    verdict = experiment_verdict(state(PLAN, _runs(_diffs(-0.003, 0.0005, 4))))
    assert verdict.kind == "equivalent" and "it also differs from uniform, by -0.0030" in verdict.text()


def _runs(diffs: list[float], skip: int | None = None) -> dict[tuple[str, int], float]:
    runs = {}
    for k, d in enumerate(diffs):
        runs[("2x6", 2000 + k)] = 2.0 + 0.01 * k  # seed effects: they cancel in each pair
        if k != skip:
            runs[("2x3,4x3", 2000 + k)] = 2.0 + 0.01 * k + d
    return runs


def test_state_counts_pairs_in_seed_order_and_names_the_next_seed():
    diffs = _diffs(-0.006, 0.012, 6)
    now = state(PLAN, _runs(diffs, skip=2))  # seed 2002's schedule run is missing: later pairs wait for it
    assert now.pairs == 2 and now.looks == () and now.next_seed == 2002 and now.outcome == "running"
    assert "running: 2 of 4 pairs to the next look" in now.text()
    now = state(PLAN, _runs(diffs))
    assert now.pairs == 6 and [look.pairs for look in now.looks] == [4, 6] and now.next_seed == 2006
    verdict = experiment_verdict(now)
    assert verdict.kind == "undecided" and verdict.seeds == tuple(range(2000, 2006))
    assert "last look: 6 pairs" in verdict.text() and "looks at 4/6/8 pairs" in verdict.text()


def test_a_decided_experiment_queues_nothing_more_and_its_verdict_names_its_seeds():
    now = state(PLAN, _runs(_diffs(0.03, 0.004, 8)))
    assert now.outcome == "worse" and now.next_seed is None and now.pairs == 8  # pairs past the look are kept, unread
    verdict = experiment_verdict(now)
    assert verdict.kind == "worse" and verdict.seeds == (2000, 2001, 2002, 2003)
    assert verdict.text().startswith("worse: 2x3,4x3 loses to uniform by +0.02")  # on the first 4 pairs


def test_no_pairs_yet_is_undecided_with_the_plan():
    verdict = experiment_verdict(state(PLAN, {}))
    assert verdict.kind == "undecided" and "running: 0 of 4 pairs" in verdict.text() and "looks at 4/6/8 pairs" in verdict.text()


def test_the_config_bounds_looks_by_the_pairs_that_measure_noise():
    assert MIN_LOOK == MIN_PAIRS
