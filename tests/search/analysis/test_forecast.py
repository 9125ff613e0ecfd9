"""The budget forecast against hand-computed cases and statsmodels' power, and the cost of deciding an undecided study
(real SQLite, trials through the Optuna API)."""

import inspect
import math
import statistics

import pytest
from statsmodels.stats.power import TTestPower

from search.analysis.blocked import many_to_one
from search.analysis.forecast import (
    CONFIRM_TOP,
    NOISE_PAIRED,
    NOISE_STATED,
    NOISE_UNIFORM,
    SPEED_STATED,
    Noise,
    Speed,
    cost,
    deciding_cost,
    forecast,
    measured_noise,
)
from search.analysis.summary import summarize
from search.analysis.verdict import Verdict
from tests.search.analysis.test_summary import UNIFORM, add, make_study

TINY_TOKENS = 60 * 8 * 32  # studies/tiny.toml: steps x batch x block


@pytest.mark.parametrize("sd, margin", [(0.008, 0.01), (0.0094, 0.01), (0.012, 0.01), (0.02, 0.005), (0.004, 0.01)])
def test_the_seeds_are_statsmodels_paired_t_power_rounded_up(tiny_config, sd, margin):
    """A paired t of n seeds detecting the margin with 80% power at two-sided 0.05: statsmodels' one-sample t power
    on effect size margin / sd gives the fractional n; the forecast needs the next whole seed (and 3 at least)."""
    n = TTestPower().solve_power(effect_size=margin / sd, alpha=0.05, power=0.8, alternative="two-sided")
    f = forecast(tiny_config, Noise(sd, NOISE_STATED), margin, None)
    assert f.pairs == max(3, math.ceil(n))
    assert f.resolution is not None and f.resolution <= margin
    shorter = TTestPower().power(effect_size=margin / sd, nobs=f.pairs - 1, alpha=0.05, alternative="two-sided")
    assert f.pairs == 3 or shorter < 0.8  # one seed fewer does not reach 80%


def test_tiny_at_the_bench_main_noise_by_hand(tiny_config):
    """sd 0.008, margin 0.01: 8 seeds (effect size 1.25: statsmodels' n is 7.1). The search trains n_trials = 5 of
    the 10 schedules; confirm --top 5 trains 5 schedules and uniform on 8 seeds: 48 runs; 53 runs of 15,360 tokens;
    at 15,360 tokens/s each run is one second."""
    f = forecast(tiny_config, Noise(0.008, NOISE_STATED), 0.01, Speed(15360, SPEED_STATED))
    assert (f.pairs, f.search_runs, f.top, f.confirm_runs, f.tokens_per_run) == (8, 5, 5, 48, TINY_TOKENS)
    assert f.total == cost(53, TINY_TOKENS, 15360)
    assert f.total.tokens == 53 * 15360 and f.total.hours == pytest.approx(53 / 3600)
    assert f.confirm_command == "prism-search confirm tiny --top 5 --seeds 8"
    assert f.to_dict()["confirm_command"] == f.confirm_command and f.to_dict()["noise"]["sd_pair"] == 0.008


def test_a_space_smaller_than_n_trials_is_all_the_search_trains(tiny_config):
    """n_trials 40 over tiny's 10 schedules: the 10 at the search seed, plus uniform and each reference at the
    second baseline seed (tiny has baseline_seeds 2 and no references): 11."""
    big = tiny_config.model_copy(update={"n_trials": 40})
    assert forecast(big, Noise(0.008, NOISE_STATED), 0.01, None).search_runs == 11


def test_a_margin_below_what_seeds_resolve_has_no_total(tiny_config):
    f = forecast(tiny_config, Noise(1.0, NOISE_STATED), 0.001, Speed(1000, SPEED_STATED))
    assert f.pairs is None and f.total is None and f.confirm_command is None


def test_without_a_speed_there_are_tokens_and_no_hours(tiny_config):
    f = forecast(tiny_config, Noise(0.008, NOISE_STATED), 0.01, None)
    assert f.total is not None and f.total.tokens == 53 * TINY_TOKENS and f.total.hours is None


def test_the_noise_of_paired_runs_is_the_blocked_models():
    runs = {("u", s): 2.0 + 0.01 * s for s in range(3)} | {("a", 0): 2.01, ("a", 1): 2.025, ("a", 2): 2.018, ("b", 0): 2.03, ("b", 1): 2.02}
    noise = measured_noise(runs, "u", "pilot")
    family = many_to_one(runs, "u")
    assert noise == Noise(family.sd_pair, NOISE_PAIRED, "pilot", family.residual_df, family.method)


def test_uniform_alone_gives_sqrt_2_times_its_sd_across_seeds():
    runs = {("u", 0): 2.0, ("u", 1): 2.012, ("u", 2): 1.995, ("a", 0): 2.02}  # `a` has one pair: nothing paired measured
    noise = measured_noise(runs, "u", "pilot")
    assert noise == Noise(math.sqrt(2) * statistics.stdev([2.0, 2.012, 1.995]), NOISE_UNIFORM, "pilot", 2)
    assert measured_noise({("u", 0): 2.0, ("a", 0): 2.1}, "u", "pilot") is None  # one seed: nothing measured


def test_the_cost_of_deciding_counts_only_the_runs_still_to_train():
    """--top 2 --seeds 5 with uniform and `a` holding 2 confirmation seeds each: 3 + 3 + 5 runs."""
    verdict = Verdict("undecided", 0.01, seeds_needed=5, top=2, command="prism-search confirm s --top 2 --seeds 5")
    c = deciding_cost(verdict, "u", ["a", "b", "c"], {"u": 2, "a": 2, "c": 4}, 1000, 2000.0)
    assert c == cost(11, 1000, 2000.0) and c.hours == pytest.approx(11 * 1000 / 2000 / 3600)
    assert deciding_cost(Verdict("holds", 0.01), "u", ["a"], {}, 1000, 2000.0) is None


def test_an_undecided_study_says_what_deciding_costs_at_its_median_speed(tiny_config):
    """Uniform at seeds 0, 1 and on two confirmation seeds, 4x3 confirmed on the same two, 2x3 at seed 0 only: the
    verdict's command confirms its top schedules on N seeds; uniform and 4x3 already hold 2 of them."""
    study = make_study(tiny_config)
    speeds = iter([900.0, 1000.0, 1100.0, 1200.0, 800.0, 1000.0, 1050.0, 990.0])
    for schedule, seed, loss, role in [
        (UNIFORM, 0, 2.05, "baseline"),
        (UNIFORM, 1, 2.08, "baseline"),
        ("4x3", 0, 2.04, "search"),
        ("2x3", 0, 2.06, "search"),
        (UNIFORM, 1000, 1.50, "confirm"),
        ("4x3", 1000, 1.49, "confirm"),
        (UNIFORM, 1001, 1.60, "confirm"),
        ("4x3", 1001, 1.61, "confirm"),
    ]:
        add(study, schedule, seed, loss, role=role, tokens_per_s=next(speeds))
    s = summarize(study)
    v = s.verdict
    assert v.kind == "undecided" and v.top is not None and v.seeds_needed is not None
    assert v.command == f"prism-search confirm known --top {v.top} --seeds {v.seeds_needed}"
    ranking = [g.schedule for g in s.gaps]
    held = {UNIFORM: 2, "4x3": 2}
    runs = sum(v.seeds_needed - held.get(schedule, 0) for schedule in [UNIFORM, *ranking[: v.top]])
    median = statistics.median([900.0, 1000.0, 1100.0, 1200.0, 800.0, 1000.0, 1050.0, 990.0])
    assert s.deciding == cost(runs, TINY_TOKENS, median)
    assert s.to_dict()["deciding"]["runs"] == runs


def test_the_forecast_assumes_confirms_own_default_top():
    from search.cli import confirm
    from search.study import Study

    assert inspect.signature(Study.confirm).parameters["top"].default == CONFIRM_TOP
    assert inspect.signature(confirm).parameters["top"].default.default == CONFIRM_TOP
