"""Racing's decisions on constructed runs: who is raced, on which seeds, who is dropped, who is the incumbent."""

import pytest

from search.study.policy import Position, Race, Run, decide, ladder

U = "2x4"  # uniform
SEEDS = [0, 1, 2, 3, 4, 5, 6, 7]
MARGIN = 0.01


def _runs(table: dict[str, dict[int, float | None]]) -> list[Run]:
    return [Run(schedule, seed, value) for schedule, by_seed in table.items() for seed, value in by_seed.items()]


def _decide(table, seeds=SEEDS) -> Race:
    return decide(_runs(table), U, seeds, MARGIN)


@pytest.mark.parametrize("max_seeds, levels", [(8, [1, 2, 4, 8]), (6, [1, 2, 4, 6]), (3, [1, 2, 3]), (16, [1, 2, 4, 8, 16])])
def test_ladder_doubles_up_to_max_seeds(max_seeds, levels):
    assert ladder(max_seeds) == levels


def test_a_challenger_within_the_margin_runs_on_a_second_seed_with_uniform_beside_it():
    race = _decide({U: {0: 3.00, 1: 3.01, 2: 2.99}, "a": {0: 3.005}, "b": {0: 3.02}})
    assert race.incumbent == U  # no schedule has 3 seeds yet: uniform
    assert race.queue == [("a", 1)]  # uniform already ran at seed 1 (a baseline)
    assert race.standing["b"] == Position("not raced", 1, rival=U, gap=pytest.approx(0.02), margin=MARGIN)  # beyond the margin
    assert race.standing["b"].text() == f"not raced: first seed worse than {U} by +0.0200 (> margin {MARGIN})"
    assert race.standing["a"] == Position("racing", 1, upto=2) and race.standing[U] == Position("incumbent")
    assert not race.dropped


def test_a_better_challenger_climbs_the_ladder_and_uniform_follows_it():
    race = _decide({U: {0: 3.00, 1: 3.01, 2: 2.99}, "a": {0: 2.95, 1: 2.96}})
    assert race.queue == [("a", 2), ("a", 3), (U, 3)]  # 2 -> 4 seeds; uniform on every seed a challenger uses


def test_runs_under_way_are_waited_for_and_never_queued_twice():
    race = _decide({U: {0: 3.00, 1: 3.01, 2: 2.99, 3: None}, "a": {0: 2.95, 1: 2.96, 2: None, 3: 2.97}})
    assert race.queue == [] and race.standing["a"] == Position("under way", 3)
    assert race.standing["a"].text() == "racing: 3 seeds, runs under way"


def test_a_challenger_worse_beyond_noise_is_dropped_at_a_look():
    # 4 seeds, worse than uniform by 0.010 +- 0.001: far beyond noise at alpha 0.05 / 3 looks
    race = _decide({U: {0: 3.0, 1: 3.0, 2: 3.0, 3: 3.0}, "a": {0: 3.009, 1: 3.010, 2: 3.011, 3: 3.010}})
    assert race.dropped == {"a"} and race.queue == []
    dropped = race.standing["a"]
    assert (dropped.kind, dropped.seeds, dropped.rival, dropped.gap) == ("dropped", 4, U, pytest.approx(0.010))
    assert dropped.p is not None and dropped.p < 0.05 / 3
    assert dropped.text() == f"dropped at 4 seeds: worse than {U} by +0.0100 (p={dropped.p:.2g})"


def test_bonferroni_over_looks_keeps_a_challenger_a_single_look_would_drop():
    # paired differences with p = 0.030 (search.analysis.stats.paired_gap): below 0.05, above 0.05 / 3 looks
    table = {U: dict.fromkeys(range(4), 3.0), "a": {s: 3.0 + d for s, d in enumerate([0.009, 0.051, 0.049, 0.050])}}
    race = _decide(table)
    assert not race.dropped
    assert race.queue == [("a", s) for s in range(4, 8)] + [(U, s) for s in range(4, 8)]
    assert decide(_runs(table), U, SEEDS, MARGIN, alpha=0.15).dropped == {"a"}  # 0.15 / 3 looks = 0.05


def test_the_incumbent_is_the_best_paired_mean_on_at_least_three_seeds():
    table = {
        U: {0: 3.00, 1: 3.10, 2: 2.90, 3: 3.00},
        "a": {0: 2.98, 1: 3.08, 2: 2.88},  # -0.02 on 3 seeds
        "b": {0: 2.90, 1: 3.05},  # -0.075 on 2 seeds: the best mean, but not on 3 seeds
        "c": {0: 3.02, 1: 3.11, 2: 2.93, 3: 3.01},  # worse than uniform: never the incumbent
    }
    race = _decide(table)
    assert race.incumbent == "a"
    # b is raced against a, paired: b on seeds 2 and 3, a on seed 3 beside it; uniform already ran there
    assert ("b", 2) in race.queue and ("b", 3) in race.queue and ("a", 3) in race.queue


def test_uniform_stays_incumbent_until_a_schedule_beats_it_on_average():
    race = _decide({U: {0: 3.0, 1: 3.0, 2: 3.0}, "a": {0: 3.001, 1: 3.002, 2: 3.0}})
    assert race.incumbent == U


def test_a_challenger_raced_to_max_seeds_asks_for_nothing_more():
    table = {U: dict.fromkeys(range(3), 3.0), "a": {0: 2.99, 1: 3.0, 2: 3.01}}
    race = decide(_runs(table), U, [0, 1, 2], MARGIN)
    assert race.queue == [] and race.standing["a"] == Position("raced", 3) and race.standing["a"].text() == "raced to 3 seeds"


def test_runs_at_seeds_outside_the_race_are_ignored():
    # a confirmation run at seed 100 is no race seed: it neither pairs nor counts toward the ladder
    race = _decide({U: {0: 3.0, 1: 3.0, 100: 3.0}, "a": {0: 3.0, 100: 2.0}})
    assert race.queue == [("a", 1)]


def test_the_first_seed_waits_for_the_incumbent():
    race = _decide({U: {0: None, 1: 3.0}, "a": {0: 3.0}})
    assert race.queue == [] and race.standing["a"] == Position("under way", 1)


def test_a_run_that_failed_for_good_is_not_queued_again_and_stops_its_challenger():
    runs = [*_runs({U: {0: 3.0, 1: 3.0, 2: 3.0}, "a": {0: 2.99}}), Run("a", 1, None, failed=True)]
    race = decide(runs, U, SEEDS, MARGIN)
    assert race.queue == [] and race.standing["a"] == Position("failed", 1, failed_seed=1)
    assert race.standing["a"].text() == "stopped at 1 seeds: its run at seed 1 failed"
    retried = [*runs, Run("a", 1, None)]  # a failure that is retried: its retry is queued, the race waits for it
    assert decide(retried, U, SEEDS, MARGIN).standing["a"].kind == "under way"
