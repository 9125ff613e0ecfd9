"""Samplers by name: seedable, and `grid` visits every schedule of the family once in a fixed order."""

import optuna
import pytest

from search.config import StudyConfig, family_for
from search.study.samplers import GRID_ATTR, GridExhausted, ScheduleGridSampler, make_sampler


def _config(tiny_config, sampler, family="ramp"):
    data = tiny_config.model_dump()
    data["search"] |= {"sampler": sampler, "n_startup_trials": 2, "population_size": 2}
    data["space"] |= {"family": family}
    if sampler == "nsga2":
        data["search"] |= {"objectives": ["val_loss", "throughput"]}
    return StudyConfig.model_validate(data)


def _walk(config, n):
    """Schedules a sampler proposes for a deterministic objective (the sum of head counts)."""
    family = family_for(config)
    study = optuna.create_study(directions=["minimize"] * len(config.search.objectives), sampler=make_sampler(config))
    out = []
    for _ in range(n):
        trial = study.ask()
        schedule = family.suggest(trial)
        out.append(str(schedule))
        study.tell(trial, [float(sum(schedule.heads))] * len(config.search.objectives))
    return out


@pytest.mark.parametrize("sampler", ["tpe", "gp", "nsga2", "random"])
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
    members = [str(s) for s in family_for(config).enumerate()]
    assert _walk(config, len(members)) == members
    with pytest.raises(GridExhausted, match=f"visited all {len(members)} schedules"):
        _walk(config, len(members) + 1)


def test_grid_skips_enqueued_trials_and_continues_where_it_stopped(tiny_config, tmp_path):
    config = _config(tiny_config, "grid")
    family = family_for(config)
    storage = f"sqlite:///{tmp_path / 'g.db'}"
    study = optuna.create_study(study_name="g", storage=storage, sampler=ScheduleGridSampler(family))
    study.enqueue_trial(family.params_for(list(family.enumerate())[-1]))
    first = study.ask()
    assert GRID_ATTR not in study.trials[0].system_attrs and str(family.suggest(first)) == str(list(family.enumerate())[-1])
    study.tell(first, 1.0)
    second = study.ask()
    assert str(family.suggest(second)) == str(next(iter(family.enumerate())))
    study.tell(second, 1.0)
    resumed = optuna.load_study(study_name="g", storage=storage, sampler=ScheduleGridSampler(family))
    assert str(family.suggest(resumed.ask())) == str(list(family.enumerate())[1])
