"""scripts/bench_decision.py's accounting: paired worlds, each confirmation's runs, and verdicts whose *better* rests
only on seeds run after the pick was frozen (a planted -1.0 winner is called better; a null world rarely is)."""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
bench = pytest.importorskip("bench_decision")


@pytest.fixture(scope="module")
def fitted():
    return bench.fit(str(ROOT / "docs" / "results" / "bench.db"))


@pytest.fixture(scope="module")
def scenarios(fitted):
    return bench.scenarios(fitted, {"2x3,4x3": -1.0})


def _scenario(scenarios, prefix):
    return next(s for s in scenarios if s.name.startswith(prefix))


def test_a_world_is_the_same_for_every_arm_of_a_replicate_and_another_for_another(fitted, scenarios):
    fitted_effects = _scenario(scenarios, "fitted")
    one, again, other = (bench.World(fitted_effects, fitted, r) for r in (3, 3, 4))
    assert one.value("1x6", 1000) == again.value("1x6", 1000) != other.value("1x6", 1000)
    assert one.truth == bench.UNIFORM  # bench-main's fitted effects: nothing beats uniform
    free = _scenario(scenarios, "free")
    assert len(free.schedules) == 729 and bench.World(free, fitted, 3).effects[free.schedules.index(bench.UNIFORM)] == 0.0
    assert not np.array_equal(bench.World(free, fitted, 3).effects, bench.World(free, fitted, 4).effects)  # interactions


def test_a_planted_minus_one_winner_is_picked_and_called_better_by_both_confirmations(fitted, scenarios):
    planted = _scenario(scenarios, "planted")
    for replicate in range(10):
        world = bench.World(planted, fitted, replicate)
        assert world.truth == "2x3,4x3"
        order = [*[s for s in world.schedules if s not in (bench.UNIFORM, "2x3,4x3")][:5], "2x3,4x3"]
        today = bench.score(*bench.today(world, order, 6), world.truth)
        lucb = bench.score(*bench.lucb(world, order, 6, 20, 3), world.truth)
        assert today.runs == 3 + 6 + 6 * 3 and lucb.runs <= 20
        assert today.right_pick and today.better_true and lucb.right_pick and lucb.better_true


def test_lucb_counts_every_seed_before_the_freeze_as_selected_and_tests_better_on_the_fresh_pairs_only(fitted, scenarios):
    world = bench.World(_scenario(scenarios, "planted"), fitted, 0)
    order = ["2x3,4x3", *[s for s in world.schedules if s not in (bench.UNIFORM, "2x3,4x3")][:4]]
    runs, selected = bench.lucb(world, order, 5, 20, 3)
    fresh = {(s, seed) for s, seed in runs if seed >= bench.FRESH_SEED0}
    assert fresh == {(s, bench.FRESH_SEED0 + k) for s in (bench.UNIFORM, "2x3,4x3") for k in range(3)}
    assert selected["2x3,4x3"] == {seed for s, seed in runs if s == "2x3,4x3"} - {seed for _, seed in fresh}
    verdict = bench.decide(runs, bench.UNIFORM, selected, bench.MARGIN).verdict
    assert verdict.kind == "better" and set(verdict.seeds) == {bench.FRESH_SEED0 + k for k in range(3)}


def test_in_a_null_world_lucb_calls_better_at_most_about_alpha(fitted, scenarios):
    """Every schedule as good as uniform: a *better* is always false, and with the frozen pick tested on fresh seeds
    it comes at most at alpha (0.05; here within 3 binomial sd of it over 200 replicates)."""
    null = bench.Scenario("null", _scenario(scenarios, "fitted").family, np.zeros(len(scenarios[0].schedules)))
    wrong = 0
    for replicate in range(200):
        world = bench.World(null, fitted, replicate)
        order = [s for s in world.schedules if s != bench.UNIFORM][:10]
        outcome = bench.score(*bench.lucb(world, order, 10, 20, 3), world.truth)
        wrong += outcome.better_true or outcome.better_other
    assert wrong <= 200 * 0.05 + 3 * (200 * 0.05 * 0.95) ** 0.5


def test_the_product_samplers_drive_the_search_through_ask_and_tell(fitted, scenarios):
    """Each proposal is a distinct schedule other than uniform, and `replicate` costs today's 41 runs and LUCB's <= 20."""
    settings = bench.Settings(fitted, 20, 10, 20, 3, 0.2, 1.0, 1.0)
    bench._init(settings)
    for sampler in ("random", "additive", "tpe"):
        task = bench.Task(_scenario(scenarios, "fitted"), sampler, 1)
        world = bench.World(task.scenario, fitted, 1)
        order = bench.search(world, task.scenario, fitted, sampler, 1, 20, 0.2)
        assert len(order) == len(set(order)) == 20 and bench.UNIFORM not in order
        _, today, lucb = bench.replicate(task)
        assert today.runs == 41 and lucb.runs <= 20
