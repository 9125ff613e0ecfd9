"""search.analysis.sequential: the pre-registered experiment's looks, checked against statsmodels and scipy."""

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import ttost_paired

from search.analysis.sequential import Plan, plan_of, read, state
from search.analysis.stats import MIN_PAIRS, paired_contrast
from search.analysis.verdict import experiment_verdict
from search.config import MIN_LOOK, load_config
from search.text import look_text, method_text, plan_text, reason_text, state_text, verdict_text
from tests.search.conftest import ROOT

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
    assert verdict.kind == "equivalent" and "it also differs from uniform, by -0.0030" in verdict_text(verdict, "prereg")


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
    assert "running: 2 of 4 pairs to the next look" in state_text(now)
    now = state(PLAN, _runs(diffs))
    assert now.pairs == 6 and [look.pairs for look in now.looks] == [4, 6] and now.next_seed == 2006
    verdict = experiment_verdict(now)
    assert verdict.kind == "undecided" and verdict.seeds == tuple(range(2000, 2006))
    assert "last look: 6 pairs" in verdict_text(verdict, "prereg") and "looks at 4/6/8 pairs" in verdict_text(verdict, "prereg")


def test_a_decided_experiment_queues_nothing_more_and_its_verdict_names_its_seeds():
    now = state(PLAN, _runs(_diffs(0.03, 0.004, 8)))
    assert now.outcome == "worse" and now.next_seed is None and now.pairs == 8  # pairs past the look are kept, unread
    verdict = experiment_verdict(now)
    assert verdict.kind == "worse" and verdict.seeds == (2000, 2001, 2002, 2003)
    assert verdict_text(verdict, "prereg").startswith("worse: 2x3,4x3 loses to uniform by +0.02")  # on the first 4 pairs


def test_no_pairs_yet_is_undecided_with_the_plan():
    verdict = experiment_verdict(state(PLAN, {}))
    said = verdict_text(verdict, "prereg")
    assert verdict.kind == "undecided" and "running: 0 of 4 pairs" in said and "looks at 4/6/8 pairs" in said


def test_the_config_bounds_looks_by_the_pairs_that_measure_noise():
    assert MIN_LOOK == MIN_PAIRS


def _expected_look(diffs: list[float], a: float) -> tuple[float, tuple[float, float], float]:
    """The mean, the 1 - a t interval and the two-sided p of paired differences, from scipy."""
    n = len(diffs)
    interval = sps.t.interval(1 - a, n - 1, loc=np.mean(diffs), scale=sps.sem(diffs))
    return float(np.mean(diffs)), interval, float(sps.ttest_1samp(diffs, 0).pvalue)


def test_a_decided_verdict_carries_the_deciding_look_s_numbers():
    """The study's first line must report the look that ended the experiment: its gap, interval at 1 - alpha / looks,
    p, resolution and seeds, and the plan it was read under; an equivalence verdict reads its TOST p."""
    a = PLAN.alpha_per_look
    assert method_text(PLAN) == f"pre-registered: {plan_text(PLAN)}"  # how every experiment verdict says it was made
    worse = _diffs(0.03, 0.004, 8)
    v = experiment_verdict(state(PLAN, _runs(worse)))
    mean, interval, p = _expected_look(worse[:4], a)
    assert (v.kind, v.margin, v.schedule, v.seeds, v.method) == ("worse", 0.01, "2x3,4x3", (2000, 2001, 2002, 2003), PLAN)
    assert v.effect == pytest.approx(mean) and v.interval == pytest.approx(interval) and v.adjusted_p == pytest.approx(p)
    effect = TTestPower().solve_power(nobs=4, alpha=a, power=0.8, alternative="two-sided") * np.std(worse[:4], ddof=1)
    assert v.resolution == pytest.approx(effect, rel=1e-3) and reason_text(v) == "" and v.equivalence == ()
    close = _diffs(0.0, 0.002, 8)
    v = experiment_verdict(state(PLAN, _runs(close)))
    tost = ttost_paired(np.array(close[:4]), np.zeros(4), -0.01, 0.01)[0]
    mean, interval, p = _expected_look(close[:4], a)
    assert (v.kind, v.schedule, v.seeds, v.method) == ("equivalent", "2x3,4x3", (2000, 2001, 2002, 2003), PLAN)
    assert v.adjusted_p == pytest.approx(tost) and v.equivalence == (("2x3,4x3", pytest.approx(tost)),) and v.effect == pytest.approx(mean)
    assert reason_text(v) == f"gap {mean:+.4f} [{interval[0]:+.4f}, {interval[1]:+.4f}] on 4 pairs"  # it does not also differ (p = 1)


def test_an_undecided_experiment_reads_its_last_look():
    """At the cap the verdict is the last look's (8 pairs, all seeds), not an earlier one's, and nothing more is
    queued; while it runs, the state names the next look it waits for."""
    diffs = _diffs(-0.006, 0.012, 8)
    now = state(PLAN, _runs(diffs))
    assert now.outcome == "undecided" and now.next_seed is None and [look.pairs for look in now.looks] == [4, 6, 8]
    assert state_text(now) == f"undecided at 8 pairs ({plan_text(PLAN)})"
    v = experiment_verdict(now)
    mean, interval, p = _expected_look(diffs, PLAN.alpha_per_look)
    assert v.kind == "undecided" and v.seeds == tuple(range(2000, 2008)) and v.effect == pytest.approx(mean)
    assert v.interval == pytest.approx(interval) and v.adjusted_p == pytest.approx(p) and v.method == PLAN
    assert reason_text(v) == f"{state_text(now)}; last look: {look_text(now.looks[-1], PLAN)}"
    four = state(PLAN, _runs(diffs[:4]))  # the first look read, and continuing: the next look is at 6
    assert four.next_seed == 2004 and state_text(four) == f"running: 4 of 6 pairs to the next look ({plan_text(PLAN)})"
    waiting = experiment_verdict(state(PLAN, _runs(diffs[:2])))  # no look yet: the seeds it has, and the plan
    assert (waiting.kind, waiting.schedule, waiting.seeds, waiting.method) == (
        "undecided",
        "2x3,4x3",
        (2000, 2001),
        PLAN,
    )
    assert waiting.effect is None and reason_text(waiting) == f"running: 2 of 4 pairs to the next look ({plan_text(PLAN)})"


def test_the_plan_and_a_look_read_word_for_word():
    assert plan_text(PLAN) == (
        "2x3,4x3 against 2x6 on paired seeds from 2000, looks at 4/6/8 pairs, margin 0.01, alpha 0.05 split over 3 looks (0.01667 each)"
    )
    look = read(PLAN, [0.02, 0.035, 0.03, 0.031])[0]  # mean 0.029, sd 0.00638: t(0.99167, 3) = 4.86 gives +-0.0155
    assert look_text(look, PLAN) == (
        "4 pairs: +0.0290 [+0.0135, +0.0445] (98.33% interval), difference p=0.0028, equivalence at ±0.01 p=1, resolution 0.0199: worse"
    )


def test_a_p_exactly_at_the_alpha_per_look_rejects_nothing():
    """A test rejects when p < alpha, as everywhere else (search.analysis.stats): one look whose alpha is the
    observed p exactly decides nothing, and an equivalence whose difference p sits at alpha does not also differ."""
    tight = _diffs(0.0, 0.004, 4)  # p of a zero gap is 1; the TOST p is small
    p_eq = paired_contrast(tight).tost(0.01)
    assert p_eq == pytest.approx(ttost_paired(np.array(tight), np.zeros(4), -0.01, 0.01)[0])
    assert read(Plan("s", "u", 0, (4,), margin=0.01, alpha=p_eq), tight)[0].outcome == "undecided"
    assert read(Plan("s", "u", 0, (4,), margin=0.01, alpha=p_eq * 1.0001), tight)[0].outcome == "equivalent"
    far = _diffs(0.03, 0.004, 4)  # the TOST p is about 1; the difference p is small
    p_diff = paired_contrast(far).p
    assert read(Plan("s", "u", 0, (4,), margin=0.01, alpha=p_diff), far)[0].outcome == "undecided"
    assert read(Plan("s", "u", 0, (4,), margin=0.01, alpha=p_diff * 1.0001), far)[0].outcome == "worse"
    runs = _runs(_diffs(-0.003, 0.002, 4))  # shown inside the margin, and below zero at p ~ 0.06
    p_inside = paired_contrast([runs[("2x3,4x3", s)] - runs[("2x6", s)] for s in range(2000, 2004)]).p
    plan = Plan("2x3,4x3", "2x6", 2000, (4,), margin=0.01, alpha=p_inside)
    v = experiment_verdict(state(plan, runs))
    assert v.kind == "equivalent" and reason_text(v).startswith("gap -0.0030 [") and reason_text(v).endswith("on 4 pairs")


def test_the_plan_is_the_config_s_experiment_section():
    """plan_of reads the pre-registered study's fixed plan: the schedule (as Schedule writes it), uniform, the study
    seed as the first seed, the looks, the margin and the alpha; a search has no plan."""
    config = load_config(ROOT / "studies" / "prereg-long.toml")
    assert plan_of(config) == Plan("2x3,4x3", "2x6", 2000, (10, 15, 20), margin=0.01, alpha=0.05)
    other = config.experiment.model_copy(update={"schedule": "4x3, 2x3", "looks": [5, 9], "alpha": 0.1})
    changed = config.model_copy(update={"experiment": other, "seed": 7, "search": config.search.model_copy(update={"margin": 0.02})})
    assert plan_of(changed) == Plan("4x3,2x3", "2x6", 7, (5, 9), margin=0.02, alpha=0.1)
    assert plan_of(load_config(ROOT / "studies" / "tiny.toml")) is None


def test_a_better_experiment_and_an_equivalence_that_also_differs_read_in_full():
    """A look that ends better is the study's verdict (not undecided), on the deciding look's seeds; an equivalence
    that also differs from uniform says by how much and at what p (t = -12 on 3 df: p = 0.0012)."""
    v = experiment_verdict(state(PLAN, _runs(_diffs(-0.03, 0.004, 8))))
    assert v.kind == "better" and v.seeds == (2000, 2001, 2002, 2003)
    assert verdict_text(v, "prereg").startswith("better: 2x3,4x3 beats uniform by -0.03")
    v = experiment_verdict(state(PLAN, _runs(_diffs(-0.003, 0.0005, 4))))
    assert reason_text(v) == "it also differs from uniform, by -0.0030 [-0.0042, -0.0018] (p=0.0012), a gap inside the margin"
