"""Geometry priors: zone detection and the mapping on synthetic profiles, the prior file (seeding a study with it:
tests/search/study/test_seeding.py)."""

import json

import pytest

from prism import Schedule
from search.errors import AuditError, PriorError
from search.families import RampFamily, UniformFamily
from search.priors import Profile, detect_zones, ideal_schedule, make_prior, rank_schedules, read_prior, read_profile


def _step(n_layer: int, at: int, low: float = 0.0, high: float = 1.0, noise: float = 0.0) -> list[float]:
    return [(high if layer >= at else low) + noise * ((-1) ** layer) for layer in range(n_layer)]


def _profile(n_layer: int, steps: list[int]) -> Profile:
    """A synthetic profile whose every curve steps up at each layer in `steps` (later steps smaller)."""
    curve = [sum((1.0 / (i + 1)) * (layer >= at) for i, at in enumerate(steps)) for layer in range(n_layer)]
    curves = {f"corpus.m{k}": [v * (k + 1) for v in curve] for k in range(3)}
    return Profile(n_layer=n_layer, zones=detect_zones(curves), source="synthetic")


# -- zones -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_layer,at", [(4, 2), (8, 3), (12, 9), (24, 7)])
def test_a_step_is_one_zone_at_its_layer(n_layer, at):
    zones = detect_zones({"a": _step(n_layer, at), "b": _step(n_layer, at, 3.0, -1.0, noise=0.01)})
    assert zones[0].layer == at
    assert zones[0].depth == pytest.approx((at + 0.5) / n_layer)
    assert zones[0].strength > 1.0
    assert zones[0].changes["a"] > 0 > zones[0].changes["b"]  # signs say which way each curve moved


def test_steady_drift_and_flat_curves_have_no_zone():
    assert detect_zones({"drift": [0.1 * layer for layer in range(12)], "flat": [2.0] * 12}) == []


def test_two_steps_give_two_zones_strongest_first_and_undefined_values_are_filled():
    curve = _step(12, 3, 0.0, 2.0)
    curve = [v + (1.0 if layer >= 9 else 0.0) for layer, v in enumerate(curve)]
    zones = detect_zones({"x": curve, "depth_curv": [*curve[:-1], None]})
    assert [z.layer for z in zones] == [3, 9]
    assert zones[0].strength > zones[1].strength > 0
    assert detect_zones({"x": curve}) == detect_zones({"x": list(curve)})  # deterministic


def test_curves_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="different lengths"):
        detect_zones({"a": [0, 1, 2], "b": [0, 1]})


# -- mapping -----------------------------------------------------------------------------------------------
def test_ideal_schedule_ramps_in_log2_steps_to_the_baseline_at_the_onset():
    assert ideal_schedule(8, [1, 2, 4, 8], base=4, onset_layer=3) == Schedule((1, 1, 2, 4, 4, 4, 4, 4))
    assert ideal_schedule(8, [1, 2, 4, 8], base=4, onset_layer=3, late_layer=6) == Schedule((1, 1, 2, 4, 4, 4, 8, 8))
    assert ideal_schedule(8, [1, 2, 4, 8], base=8, onset_layer=6) == Schedule((1, 1, 2, 2, 4, 4, 8, 8))
    assert ideal_schedule(4, [1, 2, 4], base=2, onset_layer=0) == Schedule((2, 2, 2, 2))


@pytest.mark.parametrize("n_layer,onset,late", [(8, 3, 6), (12, 5, 10), (12, 4, None)])
def test_synthetic_profile_maps_to_a_ramp_completing_at_the_onset(n_layer, onset, late):
    profile = _profile(n_layer, [onset] + ([late] if late else []))
    family = RampFamily(n_layer, [1, 2, 4, 8])
    ranked = rank_schedules(family, 4, profile.zones, top_k=4)
    first = Schedule.parse(ranked[0].schedule)
    assert ranked[0].distance == 0 and ranked[0].variant == "ideal"
    assert first.heads[onset] == 4 and first.heads[onset - 1] < 4 and first.heads[0] == 1
    if late:
        assert first.heads[late] == 8 and first.heads[late - 1] == 4
    else:
        assert max(first.heads) == 4
    assert len({r.schedule for r in ranked}) == 4 and all(family.contains(Schedule.parse(r.schedule)) for r in ranked)


def test_ramp_late_family_gets_the_late_step_in_its_zone():
    from search.families import RampLateFamily

    zones = _profile(12, [4, 10]).zones
    family = RampLateFamily(12, [1, 2, 4, 8])  # late zone 0.75-0.9: layers 9-10
    ranked = rank_schedules(family, 4, zones, top_k=3)
    first = Schedule.parse(ranked[0].schedule)
    assert ranked[0].distance == 0 and first.heads[4] == 4 > first.heads[3] and first.heads[10] == 8 > first.heads[9]
    assert all(family.contains(Schedule.parse(r.schedule)) for r in ranked)


def test_a_family_without_ramps_gets_its_nearest_members():
    zones = _profile(8, [3]).zones
    ranked = rank_schedules(UniformFamily(8, [1, 2, 4, 8]), 4, zones, top_k=2)
    assert [r.schedule for r in ranked] == ["4x8", "2x8"]  # the ideal 1,1,2,4,4,... is nearest to 4 heads, then 2
    assert ranked[0].distance > 0


def test_make_prior_refuses_a_profile_of_another_depth(tiny_config):
    with pytest.raises(PriorError, match=r"profile is of a 8-layer model.*n_layer=3"):
        make_prior(_profile(8, [3]), tiny_config, tiny_config.family)


def test_read_prior_checks_depth_and_schedules(tiny_config, tmp_path):
    prior = make_prior(_profile(3, [1]), tiny_config, tiny_config.family).to_dict()
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(prior))
    read = read_prior(path, tiny_config)
    assert read.to_dict() == prior and read.schedules[0].schedule == prior["schedules"][0]["schedule"]  # typed, as made
    path.write_text(json.dumps(prior | {"n_layer": 12}))
    with pytest.raises(PriorError, match=r"for 12 layers, the study has model.n_layer=3"):
        read_prior(path, tiny_config)
    path.write_text(json.dumps(prior | {"schedules": [{"schedule": "3x3", "rank": 1, "variant": "ideal", "distance": 0}]}))
    with pytest.raises(PriorError, match="prior schedule '3x3' does not fit"):
        read_prior(path, tiny_config)
    path.write_text(json.dumps(prior | {"schedules": [{"schedule": "1x3", "rank": "first", "variant": "ideal", "distance": 0}]}))
    with pytest.raises(
        PriorError, match=r"prior.json: the prior's schedules.0.rank is malformed \(Input should be a valid integer.*`prism-search prior`"
    ):
        read_prior(path, tiny_config)
    with pytest.raises(PriorError, match="not found"):
        read_prior(tmp_path / "missing.json", tiny_config)


def test_read_profile_types_it_back_and_names_a_malformed_field(tmp_path):
    """A profile read back is the one written, typed; a hand-edited zone with a word for a number gets one line
    naming it, before any mapping."""
    profile = _profile(8, [3])
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile.to_dict()))
    assert read_profile(path) == profile
    broken = profile.to_dict()
    broken["zones"][0]["depth"] = "deep"
    path.write_text(json.dumps(broken))
    with pytest.raises(AuditError, match=r"profile.json: the profile's zones.0.depth is malformed \(Input should be a valid number"):
        read_profile(path)
