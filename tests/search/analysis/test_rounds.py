"""search.analysis.rounds: what each confirmation round trains and how far a study's rounds are, on trials built in
memory; and the verdict's test of the frozen pick (search.analysis.verdict.Frozen) against an independent fit."""

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from optuna.trial import TrialState, create_trial

from search.analysis.rounds import Rounds, contenders_of, pick_of, round_runs, round_seeds, rounds_progress
from search.analysis.verdict import Frozen, FrozenTest, decide

UNIFORM = "1x3"  # studies/tiny.toml's baseline


@pytest.fixture
def config(tiny_config):
    search = tiny_config.search.model_copy(update={"confirmation": "rounds", "confirm_top": 3, "confirm_seeds": 4})
    return tiny_config.model_copy(update={"search": search, "seed": 7})


def _confirm(schedule, seed, state=TrialState.COMPLETE):
    value = 2.0 if state == TrialState.COMPLETE else None
    return create_trial(state=state, value=value, user_attrs={"schedule": schedule, "seed": seed, "role": "confirm"})


def test_round_one_trains_the_contenders_on_one_fresh_seed_and_round_two_the_pick_on_new_ones(config):
    rounds = Rounds(("a", "b", "c"), pick="b")
    assert round_seeds(config, 1) == [1007] and round_seeds(config, 2) == [1008, 1009, 1010, 1011]
    assert round_runs(config, rounds, 1) == [(UNIFORM, 1007), ("a", 1007), ("b", 1007), ("c", 1007)]
    assert round_runs(config, rounds, 2) == [(s, seed) for seed in (1008, 1009, 1010, 1011) for s in (UNIFORM, "b")]
    assert round_runs(config, Rounds(), 1) == [] and round_runs(config, Rounds(("a",)), 2) == []  # nothing frozen yet


def test_the_contenders_are_the_ranking_s_best_and_the_pick_the_best_contender_after_round_one(config):
    assert contenders_of(["d", "a", "b", "c"], config) == ("d", "a", "b")
    assert pick_of(["x", "c", "a", "b"], ("a", "b", "c")) == "c"  # x was no contender
    assert pick_of(["x"], ("a", "b")) == "a"  # none ranked (their runs failed): the first contender


def test_what_was_frozen_reads_back_and_anything_else_is_nothing_frozen():
    rounds = Rounds(("a", "b"), "a")
    assert Rounds.from_json(rounds.to_json()) == rounds
    for junk in (None, "", "not json", "[1]", '{"contenders": [1]}', '{"pick": 3}', 5):
        assert Rounds.from_json(junk) == Rounds()


def test_round_k_of_n_follows_the_stored_runs(config):
    rounds = Rounds(("a", "b", "c"), None)
    assert rounds_progress([], config, Rounds(), search_done=False).number == 0
    fresh = rounds_progress([], config, Rounds(), search_done=True)
    assert (fresh.number, fresh.planned) == (1, 0)  # the search is over, round 1 not chosen yet
    one = [_confirm(s, 1007) for s in (UNIFORM, "a")] + [_confirm("b", 1007, TrialState.WAITING)]
    p = rounds_progress(one, config, rounds, search_done=True)
    assert (p.number, p.finished, p.planned, p.seeds) == (1, 2, 4, (1007,))  # c is not even queued: open
    done_one = [*one[:2], _confirm("b", 1007), _confirm("c", 1007, TrialState.FAIL)]  # c failed, no retry queued
    p = rounds_progress(done_one, config, rounds, search_done=True)
    assert (p.number, p.planned) == (2, 0)  # round 1 is over; the pick is not frozen yet
    frozen = Rounds(("a", "b", "c"), "b")
    two = done_one + [_confirm(s, seed) for seed in (1008, 1009, 1010, 1011) for s in (UNIFORM, "b")]
    p = rounds_progress(two[:-1], config, frozen, search_done=True)
    assert (p.number, p.finished, p.planned) == (2, 7, 8) and not p.over
    p = rounds_progress(two, config, frozen, search_done=True)
    assert p.over and p.seeds == (1008, 1009, 1010, 1011)
    retried = [*two[:-1], _confirm("b", 1011, TrialState.FAIL), _confirm("b", 1011, TrialState.WAITING)]
    assert rounds_progress(retried, config, frozen, search_done=True).number == 2  # its retry is queued: not over


def _world(pick_effect, rng_seed=3):
    """A study confirmed in rounds: 12 schedules and uniform at the search seed 0, the top 3 and uniform at seed 1000,
    the pick "p" and uniform at 1001-1004; seed effects and residual noise as bench-main measured them."""
    rng = np.random.default_rng(rng_seed)
    luck = {seed: 0.0077 * rng.standard_normal() for seed in (0, 1000, 1001, 1002, 1003, 1004)}
    effect = {UNIFORM: 0.0, "p": pick_effect, "q": 0.0, "r": 0.0} | {f"s{k}": 0.01 for k in range(9)}
    cells = [(s, 0) for s in effect] + [(s, 1000) for s in (UNIFORM, "p", "q", "r")]
    cells += [(s, seed) for seed in (1001, 1002, 1003, 1004) for s in (UNIFORM, "p")]
    return {(s, seed): 2.0 + effect[s] + luck[seed] + 0.0056 * rng.standard_normal() for s, seed in cells}


def _ols_p(runs, pick, seeds):
    """The frozen pick's two-sided p from statsmodels: its post-freeze runs as their own level, schedule + seed."""
    rows = [{"s": f"{s}@" if s == pick and seed in seeds else s, "seed": str(seed), "y": y} for (s, seed), y in runs.items()]
    fit = smf.ols("y ~ C(s, Treatment(reference='1x3')) + C(seed)", data=pd.DataFrame(rows)).fit()
    name = f"C(s, Treatment(reference='1x3'))[T.{pick}@]"
    return fit.params[name], fit.pvalues[name], int(fit.df_resid)


def test_the_frozen_pick_is_better_on_its_post_freeze_seeds_with_the_pooled_residual_variance():
    """Its contrast, p and df are those of an ordinary least-squares fit of schedule + seed over every run; 'better'
    names the pick and its four post-freeze seeds alone."""
    runs, post = _world(pick_effect=-0.02), frozenset({1001, 1002, 1003, 1004})
    v = decide(runs, UNIFORM, {s: {0} for s, _ in runs}, 0.01, frozen=Frozen("p", post, ready=True)).verdict
    effect, p, df = _ols_p(runs, "p", post)
    assert v.kind == "better" and v.schedule == "p" and set(v.seeds) == post
    assert v.effect == pytest.approx(effect) and v.adjusted_p == pytest.approx(p) and p < 0.05  # Holm over 1: p itself
    assert v.method == FrozenTest(4, df) and df == 6  # "..., 6 df, Holm over 1"


def test_only_the_frozen_pick_can_be_better_and_only_once_its_seeds_have_all_run():
    post = frozenset({1001, 1002, 1003, 1004})
    runs = _world(pick_effect=0.0)
    runs[("q", 1000)] -= 0.2  # a contender far ahead on its one fresh seed: plain `decide` would call it better
    picked = {s: {0} for s, _ in runs}
    assert decide(runs, UNIFORM, picked, 0.01).verdict.kind == "better"
    assert decide(runs, UNIFORM, picked, 0.01, frozen=Frozen("p", post, ready=True)).verdict.kind != "better"
    winner = _world(pick_effect=-0.05)
    assert decide(winner, UNIFORM, picked, 0.01, frozen=Frozen("p", post, ready=False)).verdict.kind != "better"
    assert decide(winner, UNIFORM, picked, 0.01, frozen=Frozen(None, post, ready=True)).verdict.kind != "better"
    lucky = _world(pick_effect=0.0)
    for seed in (0, 1000):
        lucky[("p", seed)] -= 0.2  # far ahead where it was selected, level with uniform after the freeze
    assert decide(lucky, UNIFORM, picked, 0.01, frozen=Frozen("p", post, ready=True)).verdict.kind != "better"


def test_a_study_in_round_two_says_so_everywhere_and_is_not_yet_better(config):
    """`status`, the dashboard and the report read the same summary: "confirmation round 2 of 2" with its runs; the
    verdict waits for the round (no `confirm` command: the rounds decide), then names the pick on its seeds."""
    import optuna

    from search.analysis.summary import summarize
    from search.attrs import ATTR_CONFIG, ATTR_ROUNDS
    from search.dashboard.pages import study_page
    from search.dashboard.views import study_view
    from search.text import rounds_text

    config = config.model_copy(update={"n_trials": 4})
    study = optuna.create_study(study_name="r")
    study.set_user_attr(ATTR_CONFIG, config.model_dump_json())
    study.set_user_attr(ATTR_ROUNDS, Rounds(("a", "b", "c"), "a").to_json())

    def add(schedule, seed, loss, role="confirm"):
        study.add_trial(create_trial(value=loss, user_attrs={"schedule": schedule, "seed": seed, "role": role}))

    add(UNIFORM, 7, 2.30, "baseline")
    for schedule, loss in (("a", 2.0), ("b", 2.01), ("c", 2.02)):
        add(schedule, 7, loss, "search")
    for schedule, loss in ((UNIFORM, 2.31), ("a", 2.01), ("b", 2.03), ("c", 2.02)):
        add(schedule, 1007, loss)
    for k, seed in enumerate((1008, 1009, 1010)):
        add(UNIFORM, seed, 2.30 + 0.01 * k)
        add("a", seed, 2.00 + 0.012 * k)
    s = summarize(study, config)
    assert (s.rounds.number, s.rounds.finished, s.rounds.planned) == (2, 6, 8)
    said = rounds_text(s.rounds)
    assert said.startswith("confirmation round 2 of 2: a (frozen) and uniform on seeds 1008-1011, 6 of 8 runs finished")
    assert s.verdict.kind != "better" and s.verdict.next is None  # three of four pairs: the test waits for the fourth
    page = study_page(study_view(study), "sqlite:///unused.db")
    assert 'id="rounds"' in page and "confirmation round 2 of 2: a (frozen)" in page
    add(UNIFORM, 1011, 2.33)
    add("a", 1011, 2.04)
    s = summarize(study, config)
    assert s.rounds.over and s.verdict.kind == "better" and s.verdict.schedule == "a" and s.verdict.seeds == (1008, 1009, 1010, 1011)
    assert rounds_text(s.rounds) == "both rounds over: a frozen after round 1, judged on seeds 1008-1011 alone"
    shown = s.best_gap.unselected  # the best's line is the verdict's own test, never the fresh family's other one
    assert (s.best_schedule, shown.n, shown.verdict) == ("a", 4, "better") and shown.mean == pytest.approx(s.verdict.effect)
    assert (shown.low, shown.high, shown.adjusted_p) == (*s.verdict.interval, s.verdict.adjusted_p)


def test_a_search_that_goes_on_past_its_frozen_rounds_is_told_they_never_confirm_what_it_adds(config, tiny_config):
    """`resume --n-trials` after the rounds froze: the run says so (search.study._lifecycle.drive) before it trains."""
    import optuna

    from search.attrs import ATTR_ROUNDS
    from search.study.rounds import frozen_rounds
    from search.text import search_after_rounds_text

    study = optuna.create_study()
    assert frozen_rounds(study, config) is None  # nothing frozen yet: the rounds will rank what the search adds
    study.set_user_attr(ATTR_ROUNDS, Rounds(("a", "b")).to_json())
    assert frozen_rounds(study, config) == Rounds(("a", "b")) and frozen_rounds(study, tiny_config) is None  # by hand: no rounds
    assert search_after_rounds_text(Rounds(("a", "b"))).startswith("confirmation rounds: a, b (round 1's contenders) frozen before")
    assert "a (the pick) frozen before this search went on; the schedules it adds are ranked but never confirmed" in (
        search_after_rounds_text(Rounds(("a", "b"), "a"))
    )
