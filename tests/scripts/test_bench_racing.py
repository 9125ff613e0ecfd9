"""scripts/bench_racing.py's simulated curves keep the real shapes, and its successive halving cuts as Optuna's rule
does, only past the product's gate, and only search trials; a cut trial costs its tokens up to the rung and no more."""

import sys
from pathlib import Path

import pytest

from search.analysis.fidelity import Curve

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
bench = pytest.importorskip("bench_racing")

REAL = Curve("a", 1000, {1: 2.9, 2: 2.4, 3: 2.2, 4: 2.1}, 2.1)


def test_a_shifted_curve_ends_at_the_simulated_value_with_the_real_steps():
    moved = bench.shifted(REAL, 2.05)
    assert moved.final == moved.points[4] == pytest.approx(2.05)
    assert [moved.points[t] - REAL.points[t] for t in REAL.points] == pytest.approx([-0.05] * 4)


def _fit(effects: dict[str, float]) -> "bench.Fit":
    """No seed effects or noise; every schedule's one real curve falls by 1 per evaluation to its effect + 2."""
    curves = {s: [Curve(s, 1000, {t: 2.0 + e + 4 - t for t in (1, 2, 3, 4)}, 2.0 + e)] for s, e in effects.items()}
    return bench.Fit(effects, 0.0, 0.0, curves, rungs=[1, 3], eta=3, full=4)


def test_a_simulated_run_is_a_real_curve_of_its_schedule_shifted_and_the_same_in_every_strategy():
    curves = {bench.UNIFORM: [REAL], "a": [REAL, bench.shifted(REAL, 2.5)]}
    fitted = bench.Fit({bench.UNIFORM: 0.0, "a": -0.01}, 0.01, 0.005, curves, rungs=[1, 3], eta=3, full=4)
    world = bench.World(fitted.effects, fitted, replicate=7)
    run = world.train("a", 3)
    assert [run.points[t] - run.final for t in (1, 2, 3)] == pytest.approx([0.8, 0.3, 0.1])  # REAL's steps
    assert run == bench.World(fitted.effects, fitted, replicate=7).train("a", 3)  # paired across strategies
    assert run != bench.World(fitted.effects, fitted, replicate=8).train("a", 3)


def test_the_cut_rule_keeps_the_best_third_at_a_rung_only_from_the_gate_on():
    curve = Curve("x", 0, {1: 3.0, 2: 2.5, 3: 2.2, 4: 2.1}, 2.1)  # worst at rung 1, best at rung 3
    at_rung = {1: [2.0, 2.1, 2.2, 2.3, 2.4], 3: [2.3, 2.4]}
    assert bench.cut_at(curve, [1, 3], {k: list(v) for k, v in at_rung.items()}, None, 3) is None  # no gate: never
    assert bench.cut_at(curve, [1, 3], {k: list(v) for k, v in at_rung.items()}, 3, 3) is None  # gate opens at rung 3
    assert bench.cut_at(curve, [1, 3], {k: list(v) for k, v in at_rung.items()}, 1, 3) == 1
    seen = {k: list(v) for k, v in at_rung.items()}
    assert bench.cut_at(Curve("y", 0, {1: 2.05, 2: 2.5, 3: 2.35, 4: 2.3}, 2.3), [1, 3], seen, 1, 3) == 3  # 3rd of 3 at rung 3
    assert seen == {1: [*at_rung[1], 2.05], 3: [*at_rung[3], 2.35]}  # its values join the rungs it reached


def test_search_trials_are_cut_once_the_studys_own_curves_rank_reliably_and_a_cut_costs_its_tokens():
    effects = {bench.UNIFORM: 0.0} | {s: 0.01 * k for k, s in enumerate("abcdef", start=1)}
    study = bench.Study(bench.World(effects, _fit(effects), replicate=0), auto_pruning=True)
    study.train(bench.UNIFORM, 0)
    for s in "abc":  # c is the worst at every rung, but 3 complete curves say nothing yet (MIN_CURVES)
        study.train(s, 0, search=True)
    assert study.cut == 0 and study.gate() == 1  # 4 curves in perfect agreement: pruning from the first rung
    study.train("f", 0)  # a race run or baseline: never cut
    study.train("e", 0, search=True)  # not in the best third at rung 1: cut there
    assert study.cut == 1 and study.spent == 5 * 4 + 1
    assert ("e", 0) not in study.runs and "e" not in study.selected and len(study.curves) == 5
