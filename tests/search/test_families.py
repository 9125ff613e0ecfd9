import math

import optuna
import pytest

from prism import ModelConfig, Schedule, allowed_head_counts, is_valid
from search.families import FreeFamily, RampFamily, RampLateFamily, UniformFamily, late_zone_layers, make_family

CFG = ModelConfig(n_layer=6, d_model=256, dh_min=32, dh_max=256)
COUNTS = allowed_head_counts(CFG)


@pytest.mark.parametrize("n_layer, k", [(6, 4), (3, 3), (12, 3), (5, 1)])
def test_ramp_space_size_is_stars_and_bars(n_layer, k):
    family = RampFamily(n_layer, [2**i for i in range(k)])
    members = set(family.enumerate())  # counted, not computed: size() is the formula itself
    assert len(members) == family.size() == math.comb(n_layer + k - 1, k - 1)
    assert all(s.is_monotone for s in members)


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
    members = list(family.enumerate())
    assert len(members) == math.comb(CFG.n_layer + len(COUNTS) - 1, len(COUNTS) - 1) == 84  # 6 layers, 4 counts
    for schedule in members:
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


@pytest.mark.parametrize("name", ["ramp", "ramp+late", "free", "uniform"])
def test_every_family_enumerates_its_size_distinct_valid_members_and_inverts(name):
    family = make_family(name, CFG.n_layer, COUNTS)
    members = list(family.enumerate())
    assert len(members) == len(set(members)) == family.size()
    for schedule in members:
        assert is_valid(schedule, CFG) and family.contains(schedule)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(200):  # every parameter vector decodes to a member, never to anything else
        trial = study.ask()
        assert family.suggest(trial) in set(members)
        study.tell(trial, 0.0)


def test_ramp_late_is_a_ramp_a_plateau_and_one_rise_in_the_late_zone():
    family = RampLateFamily(12, [1, 2, 4, 8])  # zone 0.75-0.9 of 12 layers: layers 9 and 10
    assert (family.first, family.last) == (9, 10)
    members = set(family.enumerate())
    assert Schedule.parse("1x3,2x3,4x3,4x1,8x2") in members  # ramp to 4, plateau, rise to 8 at layer 10
    assert Schedule.parse("1x3,2x6,8x3") in members  # rise at layer 9, the zone's first layer
    assert not family.contains(Schedule.parse("1x3,2x8,8x1"))  # rise at layer 11: outside the zone
    assert not family.contains(Schedule.parse("1x9,2x1,4x1,8x1"))  # two rises inside the zone
    assert not family.contains(Schedule.parse("2x6,1x6"))  # not monotone
    for schedule in members:
        rises = [l for l in range(9, 12) if schedule.heads[l] > schedule.heads[l - 1]]
        assert schedule.is_monotone and len(rises) <= 1 and all(9 <= l <= 10 for l in rises)
    assert family.params_for(Schedule.parse("1x3,2x6,8x3")) == {"ramp_1": 3, "ramp_2": 9, "ramp_3": 9, "late_layer": 9, "late_jump": 2}


def test_free_family_holds_non_monotone_schedules():
    family = FreeFamily(3, [1, 2, 4])
    assert family.size() == 27 and family.contains(Schedule.parse("4x1,1x1,2x1"))


def test_a_late_zone_without_layers_is_refused():
    with pytest.raises(ValueError, match=r"late zone 0.75-0.9 holds no layer of n_layer=3"):
        RampLateFamily(3, [1, 2, 4])


@pytest.mark.parametrize("name", ["ramp", "ramp+late", "free", "uniform"])
def test_from_params_rebuilds_the_schedule_suggest_drew(name):
    """What a Ray Tune trial's config (the define-by-run parameters) holds decodes to the schedule suggest drew."""
    import pickle

    family = make_family(name, 6, [1, 2, 4, 8])
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(5):
        trial = study.ask()
        drawn = family.suggest(trial)
        assert family.from_params(trial.params) == drawn and family.contains(drawn)
    space = pickle.loads(pickle.dumps(family.define_by_run()))  # Tune pickles its searcher
    trial = study.ask()
    space(trial)
    assert family.contains(family.from_params(trial.params))


def _distributions(family, seed: int = 0) -> dict:
    """The Optuna distributions one `suggest` declares (fixed ranges: the same for every trial)."""
    trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed)).ask()
    family.suggest(trial)
    return trial.distributions


def test_each_family_declares_its_fixed_parameter_ranges():
    IntD, CatD = optuna.distributions.IntDistribution, optuna.distributions.CategoricalDistribution
    assert _distributions(RampFamily(6, [1, 2, 4, 8])) == {f"switch_{k}": IntD(0, 6) for k in (1, 2, 3)}
    late = RampLateFamily(12, [1, 2, 4, 8])
    assert _distributions(late) == {f"ramp_{k}": IntD(0, 9) for k in (1, 2, 3)} | {"late_layer": IntD(9, 10), "late_jump": IntD(0, 3)}
    assert _distributions(FreeFamily(3, [4, 1, 2])) == {f"layer_0{layer}": CatD([1, 2, 4]) for layer in range(3)}
    assert _distributions(UniformFamily(4, [2, 1])) == {"heads": CatD([1, 2])}


def test_ramp_decoding_and_its_inverse_by_hand():
    """Layer l gets the count whose index is the number of sorted switches at or below l."""
    family = RampFamily(6, [1, 2, 4, 8])
    assert family.decode([2, 4, 6]) == Schedule.parse("1x2,2x2,4x2")
    assert family.decode([3, 0, 3]) == Schedule.parse("2x3,8x3")  # sorted 0, 3, 3: count 2 from layer 0, 8 from layer 3
    assert family.decode([6, 6, 6]) == Schedule.parse("1x6") and family.decode([0, 0, 0]) == Schedule.parse("8x6")
    assert family.params_for(Schedule.parse("1x2,2x2,4x2")) == {"switch_1": 2, "switch_2": 4, "switch_3": 6}
    assert family.params_for(Schedule.parse("2x3,8x3")) == {"switch_1": 0, "switch_2": 3, "switch_3": 3}


def test_ramp_late_decoding_and_its_inverse_by_hand():
    family = RampLateFamily(12, [1, 2, 4, 8])  # the zone: layers 9 and 10
    assert family.decode([3, 6, 9], 10, 1) == Schedule.parse("1x3,2x3,4x4,8x2")  # ramp to 4, plateau, up one count at 10
    assert family.decode([3, 9, 9], 9, 3) == Schedule.parse("1x3,2x6,8x3")  # a jump past the largest count is capped
    assert family.decode([9, 9, 9], 10, 0) == Schedule.parse("1x12")  # no jump: the plateau holds to the end
    assert family.params_for(Schedule.parse("1x3,2x3,4x4,8x2")) == {"ramp_1": 3, "ramp_2": 6, "ramp_3": 9, "late_layer": 10, "late_jump": 1}
    assert family.params_for(Schedule.parse("1x12")) == {"ramp_1": 9, "ramp_2": 9, "ramp_3": 9, "late_layer": 9, "late_jump": 0}


@pytest.mark.parametrize("n_layer, counts", [(12, [1, 2, 4, 8]), (20, [1, 2, 4]), (8, [1, 3])])
def test_ramp_late_size_is_its_counted_members_at_other_depths(n_layer, counts):
    family = RampLateFamily(n_layer, counts)
    members = list(family.enumerate())
    assert len(members) == len(set(members)) == family.size() and all(family.contains(s) for s in members)
    assert {family.decode(*_split(family, family.params_for(s))) for s in members} == set(members)


def _split(family: RampLateFamily, params: dict) -> tuple[list[int], int, int]:
    return [params[f"ramp_{k}"] for k in range(1, len(family.counts))], params["late_layer"], params["late_jump"]


def test_late_zone_layers_are_the_relative_depths_inside_the_zone():
    assert late_zone_layers(12, (0.75, 0.9)) == (9, 10) and late_zone_layers(10, (0.75, 0.9)) == (8, 9)
    assert late_zone_layers(8, (0.75, 0.9)) == (6, 7) and late_zone_layers(4, (0.0, 1.0)) == (1, 3)  # never layer 0, nor past L - 1
    assert make_family("ramp+late", 12, [1, 2, 4, 8], late_zone=(0.5, 0.6)).first == 6
    assert (make_family("ramp+late", 12, [1, 2, 4, 8], late_zone=(0.5, 0.6)).last, RampLateFamily(12, [1, 2]).last) == (7, 10)


@pytest.mark.parametrize(
    "family, schedule, message",
    [
        (RampFamily(6, [1, 2, 4]), "1x5", "not a monotone schedule over"),
        (RampFamily(6, [1, 2, 4]), "4x3,2x3", "not a monotone schedule over"),
        (RampFamily(6, [1, 2, 4]), "1x3,8x3", "not a monotone schedule over"),
        (RampLateFamily(12, [1, 2, 4]), "1x11", "not a monotone schedule over"),
        (RampLateFamily(12, [1, 2, 4]), "1x9,4x1,2x2", "not a monotone schedule over"),
        (RampLateFamily(12, [1, 2, 4]), "1x3,8x9", "not a monotone schedule over"),
        (RampLateFamily(12, [1, 2, 4]), "1x10,2x1,4x1", "rises more than once after layer 8 or outside the late zone"),
        (RampLateFamily(12, [1, 2, 4]), "1x11,2x1", "rises more than once after layer 8 or outside the late zone"),
        (FreeFamily(3, [1, 2]), "1x4", "not a schedule over"),
        (FreeFamily(3, [1, 2]), "1x2,4x1", "not a schedule over"),
        (UniformFamily(4, [1, 2]), "1x2,2x2", "not in the uniform family"),
        (UniformFamily(4, [1, 2]), "4x4", "not in the uniform family"),
        (UniformFamily(4, [1, 2]), "2x3", "not in the uniform family"),
    ],
)
def test_params_for_refuses_a_non_member_by_name(family, schedule, message):
    with pytest.raises(ValueError, match=message):
        family.params_for(Schedule.parse(schedule))
    assert not family.contains(Schedule.parse(schedule))


def test_a_family_sorts_its_counts_and_refuses_none():
    assert FreeFamily(2, [4, 1, 2]).counts == [1, 2, 4] and FreeFamily(2, [4, 1, 2]).params_for(Schedule.parse("4x1,1x1")) == {
        "layer_00": 4,
        "layer_01": 1,
    }
    with pytest.raises(ValueError, match=r"^a schedule family needs at least one allowed head count$"):
        RampFamily(4, [])
    assert [str(s) for s in UniformFamily(3, [2, 1]).enumerate()] == ["1x3", "2x3"]
    assert make_family("free", 3, [1, 2]).size() == 8 and isinstance(make_family("ramp", 3, [1, 2]), RampFamily)
    with pytest.raises(ValueError, match="use one of ramp, ramp\\+late, free, uniform"):
        make_family("zigzag", 4, [1, 2])


def test_a_one_layer_uniform_family_inverts_its_members():
    family = UniformFamily(1, [1, 2])
    assert [family.params_for(s) for s in family.enumerate()] == [{"heads": 1}, {"heads": 2}]
