"""scripts/bench_decision.py: paired worlds, each confirmation's runs, verdicts whose *better* rests only on the last
stage's seeds, and the intervals and pass rule that judge an arm against the yardstick (cases with known answers)."""

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import ttest_rel
from statsmodels.stats.proportion import confint_proportions_2indep

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
bench = pytest.importorskip("bench_decision")
UNIFORM = "2x6"  # bench-main's baseline


@pytest.fixture(scope="module")
def fitted():
    return bench.fit(str(ROOT / "docs" / "results" / "bench.db"))


@pytest.fixture(scope="module")
def scenarios(fitted):
    return bench.scenarios(fitted, {"2x3,4x3": -1.0})


def _scenario(scenarios, prefix):
    return next(s for s in scenarios if s.name.startswith(prefix))


def _table(a, b, c, d):
    """Paired outcomes with a replicates where both hit, b where only the arm does, c only the yardstick, d neither."""
    return [True] * (a + b) + [False] * (c + d), [True] * a + [False] * b + [True] * c + [False] * d


def test_the_paired_interval_is_newcombes_independent_one_where_the_table_shows_no_correlation():
    arm, yardstick = _table(20, 20, 40, 40)  # a*d == b*c: phi = 0, the hybrid score interval of two Wilson intervals
    difference, low, high = bench.paired_difference(arm, yardstick)
    expected = confint_proportions_2indep(40, 120, 60, 120, method="newcomb", compare="diff")
    assert difference == pytest.approx(40 / 120 - 60 / 120)
    assert (low, high) == pytest.approx(expected, abs=1e-12)


def test_the_paired_interval_narrows_with_agreement_and_flips_with_the_arms():
    wide = bench.paired_difference(*_table(20, 20, 40, 40))
    narrow = bench.paired_difference(*_table(50, 5, 25, 40))  # the same margins' difference, mostly concordant
    assert narrow[2] - narrow[1] < wide[2] - wide[1]
    swapped = bench.paired_difference(*reversed(_table(50, 5, 25, 40)))
    assert swapped == pytest.approx((-narrow[0], -narrow[2], -narrow[1]))
    none = bench.paired_difference([False] * 300, [False] * 300)  # nothing discordant: still an interval, not a point
    assert none[0] == 0 and none[1] < 0 < none[2] and none[2] == pytest.approx(bench.wilson(0, 300)[1])


def test_the_paired_interval_covers_the_true_difference_about_95_percent_of_the_time():
    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(400):  # outcomes correlated through a shared draw, as arms meeting the same runs are
        u = rng.random(300)
        arm, yardstick = u < 0.30, (u < 0.25) | (rng.random(300) < 0.02)
        true = 0.30 - (0.25 + 0.75 * 0.02)
        _, low, high = bench.paired_difference(list(arm), list(yardstick))
        covered += low <= true <= high
    assert 0.92 <= covered / 400 <= 0.99


def test_the_ratio_of_better_keeps_the_pairing_and_is_none_without_a_yardstick_hit():
    arm, yardstick = _table(100, 100, 0, 800)  # the arm hits wherever the yardstick does, and as often again
    ratio, low, high = bench.paired_ratio(arm, yardstick)
    assert ratio == 2.0 and 1.7 < low < 2.0 < high < 2.4
    assert bench.paired_ratio([True] * 10, [False] * 10) is None


def test_the_regret_difference_is_the_paired_t_interval():
    rng = np.random.default_rng(1)
    arm, yardstick = rng.normal(0.002, 0.001, 300), rng.normal(0.0015, 0.001, 300)
    mean, low, high = bench.mean_difference(arm, yardstick)
    ci = ttest_rel(arm, yardstick).confidence_interval()
    assert mean == pytest.approx(float(np.mean(arm - yardstick))) and (low, high) == pytest.approx((ci.low, ci.high))


def _outcomes(right, better, false, runs=30, regret=0.0):
    return [bench.Outcome(runs, r, b, f, regret) for r, b, f in zip(right, better, false, strict=True)]


def test_the_pass_rule_keeps_an_arm_as_good_as_the_yardstick_and_names_each_condition_it_fails():
    n = 1000
    right, better, none = [k % 10 < 7 for k in range(n)], [k % 5 == 0 for k in range(n)], [False] * n
    yardstick = _outcomes(right, better, none, runs=41)
    same = bench.judge(_outcomes(right, better, none), yardstick, by_regret=False, null=False)
    assert same.passes and same.token_share == pytest.approx(30 / 41)
    fewer = [r and k % 10 != 0 for k, r in enumerate(right)]  # 10 points fewer right picks
    failed = bench.judge(_outcomes(fewer, better, none), yardstick, by_regret=False, null=False)
    assert [f.split(" pt")[0] for f in failed.failures] == [f"right pick {100 * (-0.03 - failed.pick[1]):.1f}"]
    weaker = [b and k % 10 != 0 for k, b in enumerate(better)]  # 'better' 10 points less often
    assert bench.judge(_outcomes(right, weaker, none), yardstick, False, False).failures[0].startswith("better")
    false = [k % 20 == 1 for k in range(n)]  # 5 points of false 'better'
    assert bench.judge(_outcomes(right, better, false), yardstick, False, False).failures[0].startswith("false better 5.")
    null = bench.judge(_outcomes(none, none, false), _outcomes(none, none, none), by_regret=True, null=True)
    assert null.false_rate_high > 0.05 and null.failures == (f"false better rate {100 * (null.false_rate_high - 0.05):.1f} pt above alpha",)
    spent = [k % 40 == 1 for k in range(n)]  # 2.5 points: alpha spent on one frozen pick, more than the yardstick's
    assert bench.judge(_outcomes(none, none, spent), _outcomes(none, none, none), by_regret=True, null=True).passes


def test_a_family_scored_by_regret_passes_on_regret_not_on_the_exact_pick():
    n = 1000  # at 300, 0 false 'better' in both arms still leaves +1.3 points: the false-'better' bound needs 1000
    never, none = [False] * n, [False] * n
    yardstick = _outcomes([True] * n, none, none, regret=0.002)
    close = bench.judge(_outcomes(never, none, none, regret=0.0025), yardstick, by_regret=True, null=False)
    assert close.passes  # never the exact best, but within 0.001 of the yardstick's regret
    far = bench.judge(_outcomes([True] * n, none, none, regret=0.004), yardstick, by_regret=True, null=False)
    assert far.failures[0].startswith("regret")


def test_a_confirmation_reads_back_from_its_words_and_counts_its_runs():
    for words in bench.CONFIRMATIONS:
        assert str(bench.Confirmation.parse(words)) == words
    assert bench.Confirmation.parse(bench.TODAY).runs_at_most() == 41
    assert bench.Confirmation.parse("b1 n19 top3 r1 k1 s3 pooled").runs_at_most() == 30
    assert bench.Confirmation.parse("b1 n15 top4 r2 k1 s3 pooled").runs_at_most() == 1 + 15 + 5 + 3 + 2 * 3
    with pytest.raises(SystemExit, match="'x2' is not one of"):
        bench.Confirmation.parse("b1 x2")


def test_a_world_is_the_same_for_every_arm_of_a_replicate_and_another_for_another(fitted, scenarios):
    fitted_effects = _scenario(scenarios, "fitted")
    one, again, other = (bench.World(fitted_effects, fitted, r) for r in (3, 3, 4))
    assert one.value("1x6", 1000) == again.value("1x6", 1000) != other.value("1x6", 1000)
    assert fitted.uniform == UNIFORM and fitted_effects.name == "fitted (uniform best)"
    assert one.truth == UNIFORM  # bench-main's fitted effects: nothing beats uniform
    assert bench.World(_scenario(scenarios, "global null"), fitted, 3).truth == UNIFORM
    free = _scenario(scenarios, "free")
    assert len(free.schedules) == 729 and bench.World(free, fitted, 3).effects[free.schedules.index(UNIFORM)] == 0.0
    assert not np.array_equal(bench.World(free, fitted, 3).effects, bench.World(free, fitted, 4).effects)  # interactions


def test_seed_effects_change_no_decision(fitted, scenarios):
    """Why the benchmark scales only the residual: paired gaps and the blocked model cancel seed luck."""
    favoured = _scenario(scenarios, "favoured 2x2,4x4 -0.01")
    for replicate in range(3):
        lucky, flat = (bench.World(favoured, fitted, replicate, seed_scale=scale) for scale in (1.0, 0.0))
        order = [s for s in lucky.schedules if s != UNIFORM][:20]
        for words in (bench.TODAY, "b1 n19 top3 r1 k1 s3 pooled"):
            c = bench.Confirmation.parse(words)
            one, other = c.run(lucky, order), c.run(flat, order)
            assert (one.pick, one.better, one.runs) == (other.pick, other.better, other.runs)


def test_a_planted_minus_one_winner_is_picked_and_called_better_by_every_confirmation(fitted, scenarios):
    planted = _scenario(scenarios, "planted")
    for replicate in range(5):
        world = bench.World(planted, fitted, replicate)
        assert world.truth == "2x3,4x3"
        order = [*[s for s in world.schedules if s not in (UNIFORM, "2x3,4x3")][:5], "2x3,4x3"]
        for words in bench.CONFIRMATIONS:
            c = bench.Confirmation.parse(words)
            verdict = c.run(world, order)
            outcome = bench.score(verdict, world)
            assert verdict.runs == c.runs_at_most() - max(0, c.search - len(order))
            assert outcome.right_pick and outcome.better_true and not outcome.better_false and outcome.regret == 0


def test_the_pooled_test_reads_the_last_stage_alone_for_its_mean(fitted, scenarios):
    """The pick's runs before the last stage may be anything: only its paired gap on the last stage's seeds is its
    mean (a -1.0 gap there is better, a 0 gap there is not, whatever came before)."""
    world = bench.World(_scenario(scenarios, "planted"), fitted, 0)
    runs = {(UNIFORM, 0): 2.0, ("a", 0): 1.0, ("b", 0): 2.01, (UNIFORM, 1000): 2.0, ("a", 1000): 1.0, ("b", 1000): 2.0}
    last = {(s, 1001 + k): world.value(s, 1001 + k) for s in (UNIFORM, "2x6") for k in range(3)}
    good = runs | {(s, seed): y + (s == "a") * 0.0 for (s, seed), y in last.items()} | {("a", 1001 + k): 1.0 + 0.001 * k for k in range(3)}
    good |= {(UNIFORM, 1001 + k): 2.0 + 0.002 * (k % 2) for k in range(3)}
    assert bench.pooled_better(good, ["a"], 1001, UNIFORM) == "a"
    flat = runs | {("a", 1001 + k): 2.0 + 0.003 * (k - 1) for k in range(3)} | {(UNIFORM, 1001 + k): 2.0 for k in range(3)}
    assert bench.pooled_better(flat, ["a"], 1001, UNIFORM) is None  # -1.0 before the last stage counts for nothing


def test_on_the_global_null_the_pooled_elimination_calls_better_at_most_about_alpha(fitted, scenarios):
    """Every schedule as good as uniform: every *better* is false; the frozen pick tested with the pooled variance
    calls it at most at alpha (0.05; here within 3 binomial sd of it over 200 replicates)."""
    null = _scenario(scenarios, "global null")
    c = bench.Confirmation.parse("b1 n19 top3 r1 k1 s3 pooled")
    wrong = 0
    for replicate in range(200):
        world = bench.World(null, fitted, replicate)
        order = list(np.random.default_rng(replicate).permutation([s for s in world.schedules if s != UNIFORM]))
        wrong += bench.score(c.run(world, order[:19]), world).better_false
    assert wrong <= 200 * 0.05 + 3 * (200 * 0.05 * 0.95) ** 0.5


def test_plant_takes_any_member_of_the_free_family(fitted):
    scenario = bench.scenarios(fitted, {"4x1,1x5": -0.02})[-1]
    assert scenario.family.name == "free" and scenario.by_regret
    world = bench.World(scenario, fitted, 0)
    assert world.truth == "4x1,1x5" and world.effect("4x1,1x5") == -0.02
    with pytest.raises(SystemExit, match="2x6"):
        bench.scenarios(fitted, {"2x6": -0.01})


def test_the_product_samplers_drive_the_search_and_every_arm_meets_the_same_world(fitted, scenarios):
    """Each proposal is a distinct schedule other than uniform; `replicate` returns one outcome per arm, the yardstick
    first, at the runs each confirmation costs."""
    arms = (bench.YARDSTICK, bench.Arm("random", bench.Confirmation.parse("b1 n19 top3 r1 k1 s3 pooled")))
    bench._init(bench.Settings(fitted, arms, 0.25, 1.0))
    scenario = _scenario(scenarios, "fitted")
    for sampler in ("random", "additive", "tpe"):
        order = bench.search(bench.World(scenario, fitted, 1), scenario, fitted, sampler, 1, 20, 0.25)
        assert len(order) == len(set(order)) == 20 and UNIFORM not in order
    yardstick, arm = bench.replicate((scenario, 1))
    assert yardstick.runs == 41 and arm.runs == 30


def test_a_shorter_search_horizon_costs_its_share_and_adds_the_error_bench_mains_rung_fidelity_implies(fitted, scenarios):
    rho = dict(fitted.fidelity)[80]
    assert 0 < rho < 1 and fitted.horizon_sd(80) == pytest.approx(fitted.within_sd * (1 / rho**2 - 1) ** 0.5)
    with pytest.raises(SystemExit, match="h40"):
        fitted.horizon_sd(40)  # bench-main's loss at 40% ranks schedules against the final one: no error model fits
    world = bench.World(_scenario(scenarios, "fitted"), fitted, 0)
    assert world.value("1x6", 0, 80) != world.value("1x6", 0) and world.value("1x6", 1000) == bench.World(
        _scenario(scenarios, "fitted"), fitted, 0
    ).value("1x6", 1000)
    c = bench.Confirmation.parse("b1 n12 top3 r1 k1 s3 h80 pooled")
    assert str(c) == "b1 n12 top3 r1 k1 s3 h80 pooled" and c.runs_at_most() == pytest.approx(0.8 * 13 + 4 + 6)
    order = [s for s in world.schedules if s != UNIFORM][:12]
    assert c.run(world, order).runs == pytest.approx(0.8 * 13 + 4 + 6)


def test_the_product_s_frozen_pick_test_is_the_benchmarked_pooled_test():
    """The verdict of a study confirmed in rounds (search.analysis.verdict.Frozen) decides as the promoted arm's
    `pooled` test did in the benchmark, on worlds of its shape with and without a real winner."""
    from search.analysis.verdict import Frozen, decide

    agree = better = 0
    for replicate in range(120):
        rng = np.random.default_rng(replicate)
        effects = {UNIFORM: 0.0} | {f"s{k}": rng.normal(0, 0.005) for k in range(17)}
        pick = "s0"
        effects[pick] = -0.01 * (replicate % 2)
        luck = {seed: rng.normal(0, 0.0077) for seed in (0, 1000, 1001, 1002, 1003, 1004)}
        cells = [(s, 0) for s in effects] + [(s, 1000) for s in (UNIFORM, pick, "s1", "s2")]
        cells += [(s, seed) for seed in (1001, 1002, 1003, 1004) for s in (UNIFORM, pick)]
        runs = {(s, seed): 2.0 + effects[s] + luck[seed] + rng.normal(0, 0.0056) for s, seed in cells}
        benchmarked = bench.pooled_better(runs, [pick], 1001, UNIFORM)
        frozen = Frozen(pick, frozenset({1001, 1002, 1003, 1004}), ready=True)
        verdict = decide(runs, UNIFORM, {s: {0} for s in effects}, bench.MARGIN, frozen=frozen).verdict
        agree += benchmarked == (verdict.schedule if verdict.kind == "better" else None)
        better += benchmarked is not None
    assert agree == 120 and 10 < better < 110  # both outcomes occur: the agreement is not one answer repeated


def test_the_positive_controls_real_runs_fit_a_world_where_one_schedule_truly_wins():
    """docs/results/control.db (every ramp schedule of the control at 3 seeds): fitted with its own baseline, 8x2
    is the true best by far more than the margin, and every arm's confirmation can find it."""
    control = bench.fit(str(ROOT / "docs" / "results" / "control.db"), "control-all")
    assert control.uniform == "1x2" and len(control.effects) == 10
    fitted = _scenario(bench.scenarios(control, {}), "fitted")
    assert fitted.name == "fitted (8x2 best, -0.842)"
    world = bench.World(fitted, control, 0)
    assert world.truth == "8x2" and world.effect("8x2") < -0.8 and world.effect("1x1,4x1") > 0
    order = bench.search(world, fitted, control, "tpe", 0, 9, 0.25)
    assert sorted(order) == sorted(s for s in world.schedules if s != "1x2")  # the space is that small: all 9
    verdict = bench.Confirmation.parse("b1 n9 top3 r1 k1 s4 pooled").run(world, order)
    assert bench.score(verdict, world).better_true
