"""Samplers by name: seedable, and `grid` visits every schedule of the family once in a fixed order."""

import optuna
import pytest

from prism import Schedule
from search.attrs import GRID_INDEX
from search.config import StudyConfig
from search.errors import GridExhausted
from search.study.samplers import ScheduleGridSampler, make_sampler


def _config(tiny_config, sampler, family="ramp"):
    data = tiny_config.model_dump()
    data["search"] |= {"sampler": sampler, "n_startup_trials": 2, "population_size": 2}
    data["space"] |= {"family": family}
    if sampler == "nsga2":
        data["search"] |= {"objectives": ["val_loss", "throughput"]}
    return StudyConfig.model_validate(data)


def _walk(config, n):
    """Schedules a sampler proposes for a deterministic objective (the sum of head counts)."""
    family = config.family
    study = optuna.create_study(directions=["minimize"] * len(config.search.objectives), sampler=make_sampler(config, family))
    out = []
    for _ in range(n):
        trial = study.ask()
        schedule = family.suggest(trial)
        out.append(str(schedule))
        study.tell(trial, [float(sum(schedule.heads))] * len(config.search.objectives))
    return out


@pytest.mark.parametrize("sampler", ["tpe", "gp", "nsga2", "random", "additive"])
def test_every_sampler_is_seeded_by_the_study_seed(tiny_config, sampler):
    config = _config(tiny_config, sampler)
    first = _walk(config, 6)
    assert first == _walk(config, 6)
    other = config.model_copy(update={"seed": 7})
    assert _walk(other, 6) != first  # another seed, another walk


@pytest.mark.parametrize("family", ["ramp", "ramp+late", "free", "uniform"])
def test_grid_visits_every_schedule_once_in_family_order(tiny_config, family):
    data = tiny_config.model_dump()
    data["space"] |= {"family": family, "late_zone": (0.5, 0.9)}
    data["search"] |= {"sampler": "grid"}
    config = StudyConfig.model_validate(data)
    members = [str(s) for s in config.family.enumerate()]
    assert _walk(config, len(members)) == members
    with pytest.raises(GridExhausted, match=f"visited all {len(members)} schedules"):
        _walk(config, len(members) + 1)


def test_grid_skips_enqueued_trials_and_continues_where_it_stopped(tiny_config, tmp_path):
    config = _config(tiny_config, "grid")
    family = config.family
    storage = f"sqlite:///{tmp_path / 'g.db'}"
    study = optuna.create_study(study_name="g", storage=storage, sampler=ScheduleGridSampler(family))
    study.enqueue_trial(family.params_for(list(family.enumerate())[-1]))
    first = study.ask()
    assert GRID_INDEX not in study.trials[0].system_attrs and str(family.suggest(first)) == str(list(family.enumerate())[-1])
    study.tell(first, 1.0)
    second = study.ask()
    assert str(family.suggest(second)) == str(next(iter(family.enumerate())))
    study.tell(second, 1.0)
    resumed = optuna.load_study(study_name="g", storage=storage, sampler=ScheduleGridSampler(family))
    assert str(family.suggest(resumed.ask())) == str(list(family.enumerate())[1])


@pytest.mark.parametrize("sampler", ["tpe", "gp", "nsga2", "random", "additive"])
def test_concurrent_proposals_are_distinct_until_the_space_runs_short(tiny_config, sampler):
    """Trials asked while the earlier ones still run (attrs set as the driver sets them) never repeat a schedule
    before every member is taken; seed 0 is the seed whose first random draws decode to one schedule three times."""
    config = _config(tiny_config, sampler)
    family = config.family
    study = optuna.create_study(directions=["minimize"] * len(config.search.objectives), sampler=make_sampler(config, family))
    proposed = []
    for _ in range(family.size() + 1):
        trial = study.ask()
        schedule = str(family.suggest(trial))
        trial.set_user_attr("schedule", schedule)
        trial.set_user_attr("seed", config.seed)
        proposed.append(schedule)
    assert sorted(proposed[:-1]) == sorted(str(s) for s in family.enumerate())  # every member once
    assert proposed[-1] in proposed[:-1]  # then the space is short: a taken one, for the duplicate cache


def test_only_schedules_taken_at_the_search_seed_are_avoided(tiny_config):
    config = _config(tiny_config, "random")
    family = config.family
    members = [str(s) for s in family.enumerate()]
    study = optuna.create_study(sampler=make_sampler(config, family))
    # every member running at another seed (a baseline's or a race's), all but the last at the search seed
    for seed, schedules in ((config.seed + 1, members), (config.seed, members[:-1])):
        for schedule in schedules:
            study.enqueue_trial(family.params_for(Schedule.parse(schedule)), user_attrs={"schedule": schedule, "seed": seed})
            family.suggest(study.ask())
    trial = study.ask()
    assert "schedule" not in trial.user_attrs  # sampled, not queued
    assert str(family.suggest(trial)) == members[-1]


def test_what_is_taken_is_read_past_a_hyperband_bracket():
    """Under a HyperbandPruner, Optuna hands the sampler one bracket's view of the study (optuna.pruners._filter_study):
    the quickstart (TPE + Hyperband) proposed a trained schedule again with 8 of its 15 schedules trained."""
    from optuna.pruners import HyperbandPruner, _filter_study

    from search.attrs import SCHEDULE, SEED
    from search.study.samplers import taken_schedules

    study = optuna.create_study(pruner=HyperbandPruner(min_resource=1, max_resource=81, reduction_factor=3))
    for k in range(12):
        trial = study.ask()
        trial.set_user_attr(SCHEDULE, f"s{k}")
        trial.set_user_attr(SEED, 0)
        trial.report(float(k), 1)
        trial.should_prune()  # the pruner sets up its brackets on first use
        study.tell(trial, float(k))
    bracket = _filter_study(study, study.trials[-1])
    assert len(bracket.get_trials()) < 12  # the view hides the other brackets' trials
    assert taken_schedules(bracket, 0) == {f"s{k}" for k in range(12)}


def _additive(tiny_config, explore, family="free", n_startup=3):
    data = tiny_config.model_dump()
    data["search"] |= {"sampler": "additive", "n_startup_trials": n_startup, "explore": explore}
    data["space"] |= {"family": family}
    return StudyConfig.model_validate(data)


def _toy_loss(schedule: Schedule, best: tuple[int, ...], counts: list[int]) -> float:
    """Noiseless and additive over layers: each layer adds how far its head count is from `best`'s, in count steps."""
    return 2.0 + sum(0.01 * abs(counts.index(h) - counts.index(b)) for h, b in zip(schedule.heads, best, strict=True))


def _additive_walk(config, objective, n):
    family = config.family
    study = optuna.create_study(sampler=make_sampler(config, family))
    out = []
    for _ in range(n):
        trial = study.ask()
        schedule = family.suggest(trial)
        trial.set_user_attr("schedule", str(schedule))
        trial.set_user_attr("seed", config.seed)
        out.append(schedule)
        study.tell(trial, objective(schedule))
    return out


def test_the_additive_sampler_finds_the_best_of_a_noiseless_additive_toy_at_every_seed(tiny_config):
    """In a third of the space's size, at 4 study seeds: a random order would do so at all 4 about once in 81."""
    config = _additive(tiny_config, explore=0.0)
    family = config.family
    counts = family.counts
    assert family.size() >= 27, "the toy needs a space where luck is unlikely"
    best = tuple(counts[(layer + 1) % len(counts)] for layer in range(family.n_layer))  # not uniform, not monotone
    budget = family.size() // 3
    for seed in range(4):
        proposed = _additive_walk(config.model_copy(update={"seed": seed}), lambda s: _toy_loss(s, best, counts), budget)
        assert Schedule(best) in proposed, f"seed {seed}"


def test_the_additive_samplers_explore_share_is_honoured(tiny_config):
    """Proposals that follow the model are its lowest lower bound among the untried; the others are random, in the
    configured share (within 4 binomial sd over 400 trial numbers)."""
    from search.study.samplers import AdditiveSampler

    config = _additive(tiny_config, explore=0.3)
    family = config.family
    counts = family.counts
    study = optuna.create_study()
    for k, schedule in enumerate(list(family.enumerate())[:6]):
        study.enqueue_trial(family.params_for(schedule), user_attrs={"schedule": str(schedule), "seed": config.seed})
        trial = study.ask()
        study.tell(trial, _toy_loss(family.suggest(trial), tuple([counts[-1]] * family.n_layer), counts) + 0.001 * k)
    sampler = AdditiveSampler(family, config.seed, n_startup_trials=3, explore=0.3)
    untried = [s for s in family.enumerate() if str(s) not in {t.user_attrs["schedule"] for t in study.trials}]
    bounds = sampler.lower_bounds(sampler.observed(study), untried)
    greedy = [s for s, b in zip(untried, bounds, strict=True) if b <= min(bounds) + 1e-9]  # ties: broken at random
    assert len(greedy) < len(untried) / 2
    followed = sum(sampler.propose(study, number) in greedy for number in range(400))
    # explored proposals land among the greedy ones by chance with probability len(greedy) / len(untried)
    expected = 400 * (0.7 + 0.3 * len(greedy) / len(untried))
    assert abs(followed - expected) < 4 * (400 * 0.3 * 0.7) ** 0.5


def test_the_additive_sampler_never_repeats_a_schedule_while_others_remain(tiny_config):
    config = _additive(tiny_config, explore=0.2, family="ramp")
    family = config.family
    walked = [str(s) for s in _additive_walk(config, lambda s: float(sum(s.heads)), family.size() + 1)]
    assert sorted(walked[:-1]) == sorted(str(s) for s in family.enumerate())  # every member once
    assert walked[-1] in walked[:-1]  # then the space is short: a taken one, for the duplicate cache


def test_the_explore_share_is_validated(tiny_config):
    with pytest.raises(ValueError, match="explore"):
        _additive(tiny_config, explore=1.5)


def test_random_draws_every_member_of_the_family_equally_often(tiny_config):
    """Uniform over schedules, not over the encoding: ramp's sorted switches give a schedule whose switches coincide
    half the mass of the others, so Optuna's RandomSampler over the parameters fails this test."""
    from scipy.stats import chisquare

    config = _config(tiny_config, "random")
    family = config.family
    members = [str(s) for s in family.enumerate()]
    first = [_walk(config.model_copy(update={"seed": seed}), 1)[0] for seed in range(60 * len(members))]
    counts = [first.count(m) for m in members]
    assert chisquare(counts).pvalue > 0.001
    # the encoding's own draws, for contrast: the same test rejects them
    encoded = optuna.samplers.RandomSampler(seed=0)
    study = optuna.create_study(sampler=encoded)
    drawn = [str(family.suggest(study.ask())) for _ in range(60 * len(members))]
    assert chisquare([drawn.count(m) for m in members]).pvalue < 0.001
