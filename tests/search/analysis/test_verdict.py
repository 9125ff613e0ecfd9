"""Verdicts on constructed data whose answer is known, and the verdict of each committed benchmark study."""

import pathlib

import numpy as np
import optuna
import pytest

from search.analysis.blocked import many_to_one
from search.analysis.stats import pairs_needed
from search.analysis.summary import summarize
from search.analysis.verdict import Confirm, Open, Uncompared, Verdict, decide
from search.text import reason_text, verdict_text

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
    assert verdict_text(v, "toy").startswith("equivalent: every schedule compared is within ±0.01 of uniform")
    assert "; resolution " in verdict_text(v, "toy")  # every verdict states what its seeds could detect


def test_uniform_holds_is_one_sided_and_never_called_equivalent():
    """No schedule beats uniform by the margin (one-sided), but one is worse by more than it: that is not equivalence."""
    runs = _runs({UNIFORM: 0.0, "a": 0.0, "b": 0.03}, range(8), noise=0.002)
    v = decide(runs, UNIFORM, {}, margin=0.01).verdict
    assert v.kind == "holds" and v.adjusted_p < 0.05
    text = verdict_text(v, "toy")
    assert text.startswith("uniform holds at margin 0.01: none of the schedules compared beats it by 0.01 or more (one-sided")
    assert "not shown equivalent: two-sided TOST at ±0.01: " in text and "equivalent:" not in text.split(";")[0]
    assert "; resolution " in text and dict(v.equivalence)["b"] > 0.05  # b is far outside the margin


def test_equivalence_not_shown_with_few_noisy_seeds_says_how_many_would_resolve_it():
    runs = _runs({UNIFORM: 0.0, "a": 0.0, "b": 0.002}, range(2), noise=0.01)
    v = decide(runs, UNIFORM, {}, margin=0.01).verdict
    assert v.kind == "undecided" and v.next is not None and v.next.seeds > 2 and v.next.top == 2
    assert f"run `prism-search confirm toy --top 2 --seeds {v.next.seeds}`" in verdict_text(v, "toy")


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
    assert [w[0] for w in v.worse] == ["bad"] and "1 worse than uniform beyond noise" in verdict_text(v, "toy")


def test_nothing_compared_yet_is_undecided():
    v = decide({(UNIFORM, 0): 2.0}, UNIFORM, {}, margin=0.01).verdict
    assert v.kind == "undecided" and "no schedule has been compared" in verdict_text(v, "toy")


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


def test_an_undecided_verdict_is_about_the_best_by_mean_on_its_fresh_seeds():
    """Every field read from the two families: the best by paired mean, its interval, resolution and adjusted p,
    the seeds it was not selected on, and the seeds the margin needs at the pooled paired sd."""
    runs = _runs({UNIFORM: 0.0, "a": -0.003, "b": 0.002}, range(4), noise=0.006, rng_seed=2)
    d = decide(runs, UNIFORM, {"a": {0}}, margin=0.01)
    v, best = d.verdict, d.family.gaps[0]
    c = best.contrast
    assert v.kind == "undecided" and v.schedule == best.schedule == "a" and v.seeds == (1, 2, 3) == d.fresh.gap("a").seeds
    assert (v.effect, v.interval, v.adjusted_p) == (c.mean, c.interval(), best.adjusted_p)
    assert (v.resolution, v.method) == (c.detectable(), d.family.method)
    lo, hi = c.interval()
    needed = pairs_needed(d.family.sd_pair, 0.01)
    assert v.reason == Open("a", c, 2)
    assert reason_text(v) == (
        f"best other schedule by mean a {c.mean:+.4f} [{lo:+.4f}, {hi:+.4f}] on 4 seeds; 2 schedules may still beat uniform by 0.01 or more"
    )
    assert needed is not None and v.next == Confirm(2, needed)
    assert verdict_text(v, "toy").endswith(f"run `prism-search confirm toy --top 2 --seeds {needed}`")


def test_undecided_without_noise_asks_for_three_seeds_of_the_open_schedules():
    v = decide({(UNIFORM, 0): 2.0, ("a", 0): 1.99, ("b", 0): 2.02}, UNIFORM, {}, margin=0.01).verdict
    assert reason_text(v) == (
        "best other schedule by mean a -0.0100 on 1 seed, noise not measured; 2 schedules may still beat uniform by 0.01 or more"
    )
    assert (v.next, v.interval, v.resolution) == (Confirm(2, 3), None, None)
    assert v.seeds == (0,) and v.adjusted_p is None


def test_a_margin_below_what_seeds_resolve_is_said_and_at_most_five_schedules_are_named():
    effects = {UNIFORM: 0.0} | {f"s{k}": 0.0 for k in range(7)}
    d = decide(_runs(effects, range(3), noise=0.004), UNIFORM, {}, margin=1e-6)
    v = d.verdict
    below = f"(the margin is below what seeds resolve at paired sd {d.family.sd_pair:.4f})"
    assert reason_text(v).endswith(f"; 7 schedules may still beat uniform by 1e-06 or more {below}")
    assert v.next == Confirm(5, 3) and isinstance(v.reason, Open) and v.reason.sd_beyond == d.family.sd_pair


def test_one_open_schedule_is_named_in_the_singular():
    """`far` is shown not to beat uniform by the margin; only `a` stays open, so the command confirms one schedule."""
    runs = _runs({UNIFORM: 0.0, "a": -0.003, "far": 0.03}, range(3), noise=0.008)
    d = decide(runs, UNIFORM, {}, margin=0.01)
    v = d.verdict
    assert d.family.gap("far").contrast.p_not_better_by(0.01) < 0.05 <= d.family.gap("a").contrast.p_not_better_by(0.01)
    assert v.kind == "undecided" and reason_text(v).endswith("on 3 seeds; 1 schedule may still beat uniform by 0.01 or more")
    assert v.next is not None and v.next.top == 1


def test_equivalence_reports_the_largest_tost_p_and_the_top_three_tost():
    effects = {UNIFORM: 0.0, "a": 0.0, "b": 0.001, "c": -0.001, "d": 0.0005}
    d = decide(_runs(effects, range(8), noise=0.002), UNIFORM, {}, margin=0.01)
    v = d.verdict
    assert v.kind == "equivalent" and v.adjusted_p == max(g.contrast.tost(0.01) for g in d.family.gaps)
    assert v.equivalence == tuple((g.schedule, g.contrast.tost(0.01)) for g in d.family.gaps[:3])
    assert v.schedule == d.family.gaps[0].schedule and v.next is None and v.reason is None
    assert v.resolution == d.family.gaps[0].contrast.detectable()


def test_the_better_verdict_names_the_best_winner_by_mean_with_its_fresh_family_p():
    runs = _runs({UNIFORM: 0.0, "good": -0.015, "best": -0.03, "bad": 0.03}, range(6), noise=0.003)
    d = decide(runs, UNIFORM, {"good": {0}}, margin=0.01)
    v, fresh = d.verdict, d.fresh.gap("best")
    assert v.kind == "better" and v.schedule == "best" and v.adjusted_p == fresh.adjusted_p and v.method == d.fresh.method
    assert v.seeds == tuple(range(6)) and d.fresh.gap("good").seeds == (1, 2, 3, 4, 5)
    assert [w[0] for w in v.worse] == ["bad"] and v.worse[0][1:] == (d.family.gap("bad").contrast.mean, d.family.gap("bad").adjusted_p)


def test_the_undecided_reason_counts_seeds_in_the_singular_and_plural():
    two = decide({(UNIFORM, 0): 2.0, (UNIFORM, 1): 2.1, ("a", 0): 1.99, ("a", 1): 2.08}, UNIFORM, {}, margin=0.01).verdict
    assert "a -0.0150 on 2 seeds, noise not measured;" in reason_text(two)
    runs = _runs({UNIFORM: 0.0, "a": 0.0}, range(4), noise=0.012)
    runs[("b", 0)] = runs[(UNIFORM, 0)] - 0.015  # b: one seed, its noise the pooled one
    one = decide(runs, UNIFORM, {}, margin=0.01).verdict
    assert one.schedule == "b" and one.interval is not None and " on 1 seed;" in reason_text(one)


def test_nothing_compared_yet_keeps_both_families_and_says_why():
    """With uniform alone the decision still carries the (empty) families the summary and dashboard read, and the
    verdict says, word for word, that nothing has been compared, at the margin asked."""
    runs = {(UNIFORM, 0): 2.0, (UNIFORM, 1): 2.01}
    d = decide(runs, UNIFORM, {}, margin=0.02)
    assert d.family.gaps == () and d.fresh.gaps == () and d.family == many_to_one(runs, UNIFORM)
    assert d.verdict == Verdict("undecided", 0.02, reason=Uncompared())
    assert verdict_text(d.verdict, "toy") == "undecided at margin 0.02: no schedule has been compared with uniform yet"


def test_a_better_verdict_is_read_at_the_margin_asked():
    runs = _runs({UNIFORM: 0.0, "real": -0.02, "other": 0.0}, range(6), noise=0.003)
    v = decide(runs, UNIFORM, {}, margin=0.015).verdict
    assert v.kind == "better" and v.margin == 0.015 and v.schedule == "real"
