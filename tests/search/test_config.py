import pytest

from search.config import ConfigError, load_config, parse_config


def test_tiny_config_loads_with_defaults(tiny_config):
    assert tiny_config.model.n_layer == 3 and tiny_config.space.family == "ramp"
    assert str(tiny_config.baseline) == "1x3"  # head dim 64 at d_model 64
    assert parse_config({"name": "x"}).baseline.heads == (2,) * 6  # d_model 128 -> 2 heads of 64


@pytest.mark.parametrize(
    "data, message",
    [
        ({"name": "x", "modle": {}}, "config.*modle: unknown field"),
        ({"name": "x", "model": {"dh_min": 48}}, "model.dh_min: 48 is not a power of two; use 32 or 64"),
        ({"name": "x", "model": {"d_model": -4}}, "model.d_model: .*greater than 0"),
        ({"name": "x", "train": {"steps": 0}}, "train.steps: .*greater than 0"),
        ({"name": "x", "space": {"baseline_heads": 3}}, "space.baseline_heads=3 is not allowed for d_model=128"),
        ({"name": "x", "space": {"references": ["3x6"]}}, "space.references '3x6'.*do not divide d_model=128"),
        ({"name": "x", "space": {"family": "zigzag"}}, "space.family: 'zigzag' is not valid; input should be 'ramp' or 'uniform'"),
        ({"name": "x", "model": {"d_model": 100}}, "no power-of-two head dim .* divides d_model=100"),
        ({"name": "x", "data": {"corpus": "wiki"}}, "data.corpus: unknown corpus 'wiki'"),
        ({}, "name: required field is missing"),
        ({"name": "x", "resources": {"gpus_per_trial": 1.5}}, "resources.gpus_per_trial: 1.5 GPUs: .*use 1 or 2"),
    ],
)
def test_bad_config_gives_one_line_error_naming_the_field(data, message):
    with pytest.raises(ConfigError, match=message) as info:
        parse_config(data, "config")
    assert "\n" not in str(info.value)


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
