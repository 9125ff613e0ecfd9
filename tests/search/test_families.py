import math

import optuna
import pytest

from prism import ModelConfig, Schedule, allowed_head_counts, is_valid
from search.families import RampFamily, UniformFamily, make_family

CFG = ModelConfig(n_layer=6, d_model=256, dh_min=32, dh_max=256)
COUNTS = allowed_head_counts(CFG)


def test_ramp_space_size_is_stars_and_bars():
    family = RampFamily(CFG.n_layer, COUNTS)
    assert family.size() == math.comb(CFG.n_layer + len(COUNTS) - 1, len(COUNTS) - 1)


def test_every_sampled_ramp_schedule_is_valid_and_monotone():
    family = RampFamily(CFG.n_layer, COUNTS)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(300):
        trial = study.ask()
        schedule = family.suggest(trial)
        assert is_valid(schedule, CFG) and schedule.is_monotone
        seen.add(schedule)
        study.tell(trial, 0.0)
    assert len(seen) > 40  # the encoding reaches much of the 84-schedule space


def test_params_for_inverts_decoding_for_every_member():
    family = RampFamily(CFG.n_layer, COUNTS)
    for schedule in family.enumerate():
        params = family.params_for(schedule)
        assert family.decode(list(params.values())) == schedule
    assert not family.contains(Schedule.parse("8x1,1x5"))
    assert not family.contains(Schedule.parse("3x6"))


def test_uniform_family_and_factory():
    family = make_family("uniform", 4, [1, 2, 4])
    assert isinstance(family, UniformFamily) and family.size() == 3
    assert family.params_for(Schedule.parse("2x4")) == {"heads": 2}
    with pytest.raises(ValueError, match="unknown schedule family"):
        make_family("zigzag", 4, [1, 2])
