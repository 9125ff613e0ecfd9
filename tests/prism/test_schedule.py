import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism import ModelConfig, PrismLM, Schedule, ScheduleError, allowed_head_counts, enumerate_monotone, validate
from prism.schedule import flops_per_token, is_valid, param_count

CFG = ModelConfig(n_layer=6, d_model=256, block_size=64, dh_min=32, dh_max=256)
COUNTS = allowed_head_counts(CFG)  # [1, 2, 4, 8]

schedules = st.lists(st.sampled_from(COUNTS), min_size=CFG.n_layer, max_size=CFG.n_layer).map(lambda h: Schedule(tuple(h)))


def test_allowed_counts_are_power_of_two_head_dims_within_bounds():
    assert COUNTS == [1, 2, 4, 8]
    assert allowed_head_counts(ModelConfig(d_model=768, dh_min=64, dh_max=256)) == [3, 6, 12]


@given(st.lists(st.integers(1, 64), min_size=1, max_size=40))
def test_text_form_round_trips(heads):
    s = Schedule(tuple(heads))
    assert Schedule.parse(str(s)) == s
    assert str(Schedule.parse(str(s))) == str(s)


def test_text_form_is_run_length():
    assert str(Schedule.parse("4x2,8x5,16x17")) == "4x2,8x5,16x17"
    assert Schedule.parse("4x2,8x5,16x17").n_layer == 24
    assert Schedule.parse("2,2,4").heads == (2, 2, 4)
    assert str(Schedule((2, 2, 4))) == "2x2,4x1"


@pytest.mark.parametrize("text", ["", "4x", "ax2", "4x0", "0x3", "4y2"])
def test_bad_text_is_rejected(text):
    with pytest.raises(ScheduleError):
        Schedule.parse(text)


@pytest.mark.parametrize("text", ["1x1000000000", "1x99999999999999999999", "2x3,1x1000000000000", "1x5,2x" + "9" * 4000])
def test_a_huge_layer_count_is_refused_before_it_is_expanded(text):
    """Summed first (`1x1000000000` grew to 24 GB, a 20-digit count was an OverflowError): instant, one message."""
    with pytest.raises(ScheduleError, match="n_layer=6"):
        Schedule.parse(text, n_layer=6)
    with pytest.raises(ScheduleError, match="at most 65536"):
        Schedule.parse(text)


def test_parse_with_n_layer_accepts_exactly_that_many_layers():
    assert Schedule.parse("1x2,2x4", n_layer=6).heads == (1, 1, 2, 2, 2, 2)
    with pytest.raises(ScheduleError, match="has 5 layers but the model has n_layer=6"):
        Schedule.parse("1x1,2x4", n_layer=6)


def test_monotone():
    assert Schedule.parse("1x2,4x4").is_monotone
    assert not Schedule.parse("4x2,1x4").is_monotone


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("8x5", "has 5 layers"),
        ("3x6", "do not divide d_model=256"),
        ("16x6", "head dim 16"),  # below dh_min
        ("5x6", "do not divide"),
    ],
)
def test_validation_names_the_problem(text, fragment):
    with pytest.raises(ScheduleError, match=fragment):
        validate(Schedule.parse(text), CFG)


def test_head_dim_must_be_power_of_two():
    cfg = ModelConfig(n_layer=2, d_model=192, dh_min=32, dh_max=256)
    assert is_valid(Schedule.parse("3x2"), cfg)  # head dim 64
    assert not is_valid(Schedule.parse("3x2"), ModelConfig(n_layer=2, d_model=192, dh_min=32, dh_max=32))
    with pytest.raises(ScheduleError, match="not a power of two"):
        validate(Schedule.parse("2x2"), cfg)  # dh 96


@settings(max_examples=50, deadline=None)
@given(schedules)
def test_every_valid_schedule_is_parameter_and_flop_neutral(schedule):
    uniform = Schedule.uniform(4, CFG.n_layer)
    assert param_count(CFG, schedule) == param_count(CFG, uniform)
    assert flops_per_token(CFG, schedule) == flops_per_token(CFG, uniform)


VARIANTS = [
    {},  # GPT-2
    dict(positions="rope"),
    dict(norm="rmsnorm", bias=False),
    dict(mlp="swiglu"),
    dict(mlp="gelu-exact"),
    dict(qk_norm=True),
    dict(positions="rope", norm="rmsnorm", mlp="swiglu", qk_norm=True, bias=False),  # Llama-like
]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: ",".join(f"{k}={x}" for k, x in v.items()) or "gpt2")
def test_param_count_matches_the_model_for_every_monotone_schedule(variant):
    small = ModelConfig(n_layer=3, d_model=64, block_size=16, dh_min=16, dh_max=64, **variant)
    schedules = [*enumerate_monotone(3, allowed_head_counts(small)), Schedule.parse("4x1,1x1,2x1")]
    expected = {PrismLM(small, s).num_params() for s in schedules}
    assert expected == {param_count(small, Schedule.uniform(1, 3))}
    assert len({flops_per_token(small, s) for s in schedules}) == 1


def test_variants_change_the_count_as_designed():
    base = ModelConfig(n_layer=2, d_model=64, block_size=16, dh_min=16, dh_max=64)
    s = Schedule.uniform(2, 2)
    n = param_count(base, s)
    assert n - param_count(ModelConfig(**{**base.to_dict(), "positions": "rope"}), s) == 16 * 64  # no wpe
    assert param_count(ModelConfig(**{**base.to_dict(), "qk_norm": True}), s) - n == 2 * 2 * 64  # q, k gains
    assert n - param_count(ModelConfig(**{**base.to_dict(), "norm": "rmsnorm"}), s) == 5 * 64  # 5 norm biases


def test_uniform_gpt2_small_has_its_published_size():
    gpt2 = ModelConfig(vocab_size=50257, n_layer=12, d_model=768, block_size=1024, dh_min=64, dh_max=256)
    assert param_count(gpt2, Schedule.uniform(12, 12)) == 124_439_808
    # nanoGPT convention: 6N + 12 L T d
    n = param_count(gpt2, Schedule.uniform(12, 12), include_embeddings=False)
    assert flops_per_token(gpt2, Schedule.parse("3x4,6x4,12x4")) == 6 * n + 12 * 12 * 1024 * 768


def test_enumerate_monotone_size_is_stars_and_bars():
    for n_layer in range(1, 7):
        for k in range(1, 5):
            all_ = enumerate_monotone(n_layer, range(1, k + 1))
            assert len(all_) == math.comb(n_layer + k - 1, k - 1)
            assert len(set(all_)) == len(all_) and all(s.is_monotone for s in all_)
