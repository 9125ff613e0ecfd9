"""The budget forecast against hand-computed cases and statsmodels' power, and the cost of deciding an undecided study
(real SQLite, trials through the Optuna API)."""

import inspect
import math
import statistics

import optuna
import pytest
from optuna.trial import TrialState, create_trial
from scipy import stats
from statsmodels.stats.power import TTestPower

from search.analysis.blocked import many_to_one
from search.analysis.forecast import (
    CONFIRM_TOP,
    NOISE_PAIRED,
    NOISE_STATED,
    NOISE_UNIFORM,
    SPEED_STATED,
    SPEED_STORED,
    Noise,
    Speed,
    cost,
    deciding_cost,
    forecast,
    measured_noise,
    pilot_speed,
    search_runs,
    study_deciding_cost,
)
from search.analysis.summary import summarize
from search.analysis.verdict import Confirm, Verdict
from search.attrs import DUPLICATE_ATTR, ROLE, ROLE_CONFIRM, SCHEDULE, SEED, TOKENS_PER_S
from search.config import load_config
from search.text import forecast_command, forecast_json, summary_json
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
    assert forecast_command(f) == "prism-search confirm tiny --top 5 --seeds 8"
    assert forecast_json(f)["noise"] == {"sd_pair": 0.008, "source": NOISE_STATED, "study": None, "df": None, "method": ""}
    assert forecast_json(f)["confirm_command"] == forecast_command(f)


def test_a_study_confirmed_in_rounds_forecasts_its_rounds_and_what_their_test_detects(tiny_config):
    """The default of new studies: 18 search runs (uniform and 17 proposals), round 1 the top 3 and uniform on one seed
    (4 runs), round 2 the pick and uniform on 4 seeds (8 runs): 30 runs. Round 2's test has 6 residual df (30 runs
    less 19 schedules, the pick's round-2 runs one of them, and 6 seeds, plus one); at sd 0.008 its four pairs
    detect what a t on 6 df of se 0.004 detects with 80% power, above the margin 0.01."""
    search = tiny_config.search.model_copy(update={"confirmation": "rounds", "baseline_seeds": 1})
    space = tiny_config.space.model_copy(update={"family": "free"})  # 4**3 - 1 schedules besides uniform: room for 17
    config = tiny_config.model_copy(update={"search": search, "n_trials": 18, "space": space})
    f = forecast(config, Noise(0.008, NOISE_STATED), 0.01, Speed(15360, SPEED_STATED))
    assert f.rounds and (f.search_runs, f.top, f.pairs, f.confirm_runs, f.rounds_df, f.needed) == (18, 3, 4, 12, 6, 8)
    t = stats.t.ppf(0.975, 6)
    power = stats.nct.sf(t, 6, f.resolution / 0.004) + stats.nct.cdf(-t, 6, f.resolution / 0.004)
    assert power == pytest.approx(0.8, abs=1e-3) and f.resolution > 0.01
    assert f.total == cost(30, TINY_TOKENS, 15360) and forecast_command(f) is None  # `run` trains the rounds


def test_a_space_smaller_than_n_trials_is_all_the_search_trains(tiny_config):
    """n_trials 40 over tiny's 10 schedules: the 10 at the search seed, plus uniform and each reference at the
    second baseline seed (tiny has baseline_seeds 2 and no references): 11."""
    big = tiny_config.model_copy(update={"n_trials": 40})
    assert forecast(big, Noise(0.008, NOISE_STATED), 0.01, None).search_runs == 11


def test_a_margin_below_what_seeds_resolve_has_no_total(tiny_config):
    f = forecast(tiny_config, Noise(1.0, NOISE_STATED), 0.001, Speed(1000, SPEED_STATED))
    assert f.pairs is None and f.total is None and forecast_command(f) is None


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
    verdict = Verdict("undecided", 0.01, next=Confirm(2, 5))
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
    assert v.kind == "undecided" and v.next is not None
    assert summary_json(s)["verdict"]["command"] == f"prism-search confirm known --top {v.next.top} --seeds {v.next.seeds}"
    ranking = [g.schedule for g in s.gaps]
    held = {UNIFORM: 2, "4x3": 2}
    runs = sum(v.next.seeds - held.get(schedule, 0) for schedule in [UNIFORM, *ranking[: v.next.top]])
    median = statistics.median([900.0, 1000.0, 1100.0, 1200.0, 800.0, 1000.0, 1050.0, 990.0])
    assert s.deciding == cost(runs, TINY_TOKENS, median)
    assert summary_json(s)["deciding"]["runs"] == runs


def test_the_forecast_assumes_confirms_own_default_top():
    from search.cli import confirm
    from search.study import Study

    assert inspect.signature(Study.confirm).parameters["top"].default == CONFIRM_TOP
    assert inspect.signature(confirm).parameters["top"].default.default == CONFIRM_TOP


def test_the_forecast_reports_what_it_was_asked_and_the_config_s_figures(tiny_config):
    """The plan's table shows the margin, the config's n_trials, space and workers, and the speed behind the hours;
    the resolution is statsmodels' effect for `pairs` seeds (df pairs - 1) at that sd."""
    speed = Speed(15360, SPEED_STATED)
    f = forecast(tiny_config, Noise(0.008, NOISE_STATED), 0.01, speed)
    assert (f.margin, f.n_trials, f.space, f.workers, f.speed, f.study) == (0.01, 5, 10, 2, speed, "tiny")
    effect = TTestPower().solve_power(nobs=f.pairs, alpha=0.05, power=0.8, alternative="two-sided") * 0.008
    assert f.resolution == pytest.approx(effect, rel=1e-4) and f.total.tokens_per_s == 15360


def test_a_small_space_confirms_every_schedule_but_uniform(study_toml):
    """`confirm --top` cannot name more schedules than the space holds besides uniform: a 1-layer ramp has 3
    schedules, so K = 2 (and 3 runs per seed); a 2-layer one has 6, and K stays at CONFIRM_TOP = 5."""
    one = load_config(study_toml(("n_layer = 3", "n_layer = 1")))
    f = forecast(one, Noise(0.008, NOISE_STATED), 0.01, None)
    assert one.family.size() == 3 and f.top == 2 and f.confirm_runs == 3 * f.pairs
    two = load_config(study_toml(("n_layer = 3", "n_layer = 2")))
    assert two.family.size() == 6 and forecast(two, Noise(0.008, NOISE_STATED), 0.01, None).top == CONFIRM_TOP == 5


def test_references_are_queued_at_every_other_baseline_seed(study_toml):
    """tiny's two baseline seeds and two references: the 10 schedules at the search seed, then uniform and both
    references again at the second seed: 13 runs when n_trials allows them."""
    references = '[space]\nreferences = ["1x1,2x1,4x1", "4x1,2x1,1x1"]\n\n[train]'
    config = load_config(study_toml(("[train]", references), ("n_trials = 5", "n_trials = 40")))
    assert len(config.space.references) == 2 and search_runs(config) == 13
    assert forecast(config, Noise(0.008, NOISE_STATED), 0.01, None).search_runs == 13


def test_two_uniform_seeds_measure_the_noise_and_identical_ones_do_not():
    """Two seeds are the fewest with an sd (1 df); two identical losses have sd 0, which measures nothing."""
    noise = measured_noise({("u", 0): 2.0, ("u", 1): 2.01, ("a", 0): 2.02}, "u", "pilot")
    assert noise == Noise(math.sqrt(2) * statistics.stdev([2.0, 2.01]), NOISE_UNIFORM, "pilot", 1)
    assert measured_noise({("u", 0): 2.0, ("u", 1): 2.0, ("a", 0): 2.02}, "u", "pilot") is None


def test_deciding_costs_nothing_without_an_undecided_verdict_naming_top_and_seeds():
    """Only an undecided verdict with a next confirmation has one to price; a schedule already holding more
    confirmation seeds than N trains none (not a negative count, not one more)."""
    undecided = Verdict("undecided", 0.01, next=Confirm(2, 5))
    assert deciding_cost(Verdict("undecided", 0.01), "u", ["a", "b"], {}, 1000, None) is None
    assert deciding_cost(Verdict("better", 0.01, next=Confirm(2, 5)), "u", ["a", "b"], {}, 1000, None) is None
    c = deciding_cost(undecided, "u", ["a", "b"], {"u": 7, "a": 5}, 1000, None)
    assert c == cost(5, 1000, None) and c.hours is None and c.tokens_per_s is None


def _run(schedule: str, seed: int, role: str, tokens_per_s: float | None = None, served: bool = False, state=TrialState.COMPLETE):
    attrs = {SCHEDULE: schedule, SEED: seed, ROLE: role} | ({TOKENS_PER_S: tokens_per_s} if tokens_per_s else {})
    if served:
        attrs[DUPLICATE_ATTR] = 0
    return create_trial(state=state, value=2.0 if state == TrialState.COMPLETE else None, user_attrs=attrs)


def test_a_study_s_deciding_cost_counts_its_confirmation_runs_only(tiny_config):
    """A schedule's search run at a confirmation seed number is no confirmation run, and a failed confirmation run
    holds nothing: only COMPLETE confirm runs are subtracted. The speed is the median of the runs that trained."""
    trials = [
        _run(UNIFORM, 1000, ROLE_CONFIRM, 1000.0),
        _run("a", 1000, "search", 3000.0),
        _run("a", 1001, ROLE_CONFIRM, state=TrialState.FAIL),
        _run("b", 1000, ROLE_CONFIRM, 2000.0),
        _run("b", 1001, ROLE_CONFIRM, 9000.0, served=True),  # a served duplicate trained nothing: no speed
    ]
    family = many_to_one({(UNIFORM, 0): 2.0, ("a", 0): 1.99, ("b", 0): 2.01}, UNIFORM)
    assert str(tiny_config.baseline) == UNIFORM
    verdict = Verdict("undecided", 0.01, next=Confirm(2, 3))
    c = study_deciding_cost(verdict, family, trials, tiny_config)
    assert c == cost((3 - 1) + 3 + (3 - 2), TINY_TOKENS, 2000.0)  # uniform holds 1, a none, b 2


def test_a_pilot_s_stored_speed_counts_only_for_the_same_work(tiny_config):
    """tokens/s depends on the model, the batch, the threads and whether a GPU trains: the pilot's median speed
    (over complete runs that trained) is used only when all four match."""
    study = optuna.create_study(study_name="pilot")  # in memory
    for t in [_run("2x6", 0, "baseline", 1000.0), _run("a", 0, "search", 1300.0), _run("b", 0, "search", 1100.0)]:
        study.add_trial(t)
    study.add_trial(_run("c", 0, "search", 9999.0, served=True))
    study.add_trial(_run("d", 0, "search", 9999.0, state=TrialState.PRUNED))
    assert pilot_speed(study, tiny_config, tiny_config) == Speed(1100.0, SPEED_STORED, "pilot", runs=3)
    cfg = tiny_config
    bigger = cfg.model_copy(update={"model": cfg.model.model_copy(update={"d_model": 128})})
    batch = cfg.model_copy(update={"train": cfg.train.model_copy(update={"batch_size": 16})})
    threads = cfg.model_copy(update={"resources": cfg.resources.model_copy(update={"cpus_per_trial": 2})})
    gpu, gpu2 = (cfg.model_copy(update={"resources": cfg.resources.model_copy(update={"gpus_per_trial": g})}) for g in (1.0, 0.5))
    for other in (bigger, batch, threads, gpu):
        assert pilot_speed(study, cfg, other) is None and pilot_speed(study, other, cfg) is None
    assert pilot_speed(study, gpu, gpu2) == Speed(1100.0, SPEED_STORED, "pilot", runs=3)  # both train on GPUs
    assert pilot_speed(optuna.create_study(), cfg, cfg) is None  # no stored speed
