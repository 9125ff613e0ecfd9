"""The model and training settings are declared once, by prism's dataclasses; the study config reads them."""

from dataclasses import fields

import pytest

from prism import ModelConfig, TrainConfig
from search.config import parse_config
from search.errors import ConfigError


def test_sections_are_prism_configs_field_for_field():
    config = parse_config({"name": "x"})
    assert config.model.to_model_config() == ModelConfig()
    assert config.train.to_train_config(seed=0) == TrainConfig()
    assert set(type(config.train).model_fields) == {f.name for f in fields(TrainConfig)} - {"seed", "device"}


@pytest.mark.parametrize(
    "section, values, message",
    [
        ("train", {"beta2": 1.0}, r"train.beta2: Input should be less than 1"),  # a bound declared only in prism.config
        ("model", {"bias": "maybe"}, r'model.bias: "maybe" is a string where a boolean is expected'),
        ("model", {"dh_min": 128, "dh_max": 64}, r"model: dh_min=128 exceeds dh_max=64; swap them"),
        ("train", {"precision": "fp8"}, r"train.precision: 'fp8' is not valid; input should be 'auto', 'fp32', 'bf16' or 'fp16'"),
    ],
)
def test_prism_rules_are_the_config_rules(section, values, message):
    with pytest.raises(ConfigError, match=message) as info:
        parse_config({"name": "x", section: values})
    assert "\n" not in str(info.value)
