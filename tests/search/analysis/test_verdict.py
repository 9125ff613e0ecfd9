"""Verdicts on constructed data whose answer is known, and the verdict of each committed benchmark study."""

import pathlib

import numpy as np
import optuna
import pytest

from search.analysis.summary import summarize
from search.analysis.verdict import decide

UNIFORM = "2x6"
ROOT = pathlib.Path(__file__).resolve().parents[3]


def _runs(effects, seeds, noise=0.004, seed_effect=0.03, rng_seed=1):
    rng = np.random.default_rng(rng_seed)
    luck = {s: seed_effect * rng.standard_normal() for s in seeds}
    return {(name, s): 2.0 + effect + luck[s] + noise * rng.standard_normal() for name, effect in effects.items() for s in seeds}


def test_equivalence_shown_when_every_gap_is_inside_the_margin():
    runs = _runs({UNIFORM: 0.0, "a": 0.0, "b": 0.001, "c": -0.001}, range(8), noise=0.002)
    v = decide(runs, UNIFORM, {}, margin=0.01).verdict
    assert v.kind == "equivalent" and len(v.equivalence) == 3 and all(p < 0.05 for _, p in v.equivalence)
    assert v.to_dict()["kind"] == "equivalent" and v.text().startswith("equivalent: every schedule compared is within ±0.01 of uniform")
    assert "; resolution " in v.text()  # every verdict states what its seeds could detect


def test_uniform_holds_is_one_sided_and_never_called_equivalent():
    """No schedule beats uniform by the margin (one-sided), but one is worse by more than it: that is not equivalence."""
    runs = _runs({UNIFORM: 0.0, "a": 0.0, "b": 0.03}, range(8), noise=0.002)
    v = decide(runs, UNIFORM, {}, margin=0.01).verdict
    assert v.kind == "holds" and v.adjusted_p < 0.05
    assert v.text().startswith("uniform holds at margin 0.01: none of the schedules compared beats it by 0.01 or more (one-sided")
    assert "not shown equivalent: two-sided TOST at ±0.01: " in v.text() and "equivalent:" not in v.text().split(";")[0]
    assert "; resolution " in v.text() and dict(v.equivalence)["b"] > 0.05  # b is far outside the margin


def test_equivalence_not_shown_with_few_noisy_seeds_says_how_many_would_resolve_it():
    runs = _runs({UNIFORM: 0.0, "a": 0.0, "b": 0.002}, range(2), noise=0.01)
    v = decide(runs, UNIFORM, {}, margin=0.01, confirm_command="prism-search confirm toy").verdict
    assert v.kind == "undecided" and v.seeds_needed is not None and v.seeds_needed > 2
    assert v.command == f"prism-search confirm toy --top 2 --seeds {v.seeds_needed}" and v.command in v.text()


def test_better_is_judged_only_on_seeds_the_schedule_was_not_selected_on():
    """A schedule that looks far better on the seed it was picked on, and is no better elsewhere, is not 'better';
    one planted 0.02 better on the other seeds is."""
    runs = _runs({UNIFORM: 0.0, "lucky": 0.0, "real": -0.02, "other": 0.0}, range(6), noise=0.003)
    runs[("lucky", 0)] -= 0.05  # its selection seed
    picked = {"lucky": {0}, "real": {0}, "other": {0}}
    v = decide(runs, UNIFORM, picked, margin=0.01).verdict
    assert v.kind == "better" and v.schedule == "real" and 0 not in v.seeds and v.effect < -0.01
    assert v.interval[1] < 0 and v.adjusted_p < 0.05
    without_real = {k: val for k, val in runs.items() if k[0] != "real"}
    assert decide(without_real, UNIFORM, picked, margin=0.01).verdict.kind != "better"


def test_worse_schedules_are_listed_after_correction():
    runs = _runs({UNIFORM: 0.0, "bad": 0.03, "fine": 0.0}, range(5), noise=0.003)
    v = decide(runs, UNIFORM, {}, margin=0.01).verdict
    assert [w[0] for w in v.worse] == ["bad"] and "1 worse than uniform beyond noise" in v.text()


def test_nothing_compared_yet_is_undecided():
    v = decide({(UNIFORM, 0): 2.0}, UNIFORM, {}, margin=0.01).verdict
    assert v.kind == "undecided" and "no schedule has been compared" in v.text()


BENCH = {  # the verdict each committed benchmark study reaches at the default margin (docs/results.md)
    "bench-main": ("holds", "2x2,4x4"),  # one-sided: its top three fail the two-sided TOST
    "bench-long": ("undecided", "2x3,4x3"),
    "bench-width": ("undecided", "2x3,4x3"),
    "bench-free": ("holds", "2x3,1x1,4x1,2x1"),
}


@pytest.mark.parametrize("name", sorted(BENCH))
def test_the_verdict_of_each_benchmark_study_is_pinned(name):
    storage = optuna.storages.RDBStorage(f"sqlite:///{ROOT / 'docs/results/bench.db'}")
    s = summarize(optuna.load_study(study_name=name, storage=storage))
    assert (s.verdict.kind, s.verdict.schedule) == BENCH[name]
    assert s.verdict.margin == 0.01 and s.verdict.resolution is not None
