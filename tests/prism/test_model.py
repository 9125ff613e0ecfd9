import pytest
import torch

from prism import ModelConfig, PrismLM, Schedule

CFG = ModelConfig(n_layer=3, d_model=64, block_size=32, dh_min=16, dh_max=64)


@pytest.mark.parametrize("text", ["1x3", "1x1,2x1,4x1", "4x3", "4x1,1x2"])
def test_sdpa_and_explicit_paths_agree(text):
    torch.manual_seed(0)
    model = PrismLM(CFG, Schedule.parse(text)).eval()
    idx = torch.randint(0, 256, (2, 32))
    with torch.no_grad():
        logits, _ = model(idx)
        trace = model.trace(idx)
    torch.testing.assert_close(trace.logits, logits, atol=1e-5, rtol=1e-5)
    assert len(trace.hidden_states) == CFG.n_layer + 1
    assert [a.shape[1] for a in trace.attentions] == list(Schedule.parse(text).heads)
    for a in trace.attentions:
        torch.testing.assert_close(a.sum(-1), torch.ones_like(a.sum(-1)))
        assert torch.all(a.triu(1) == 0)  # causal


def test_future_tokens_do_not_change_past_logits():
    torch.manual_seed(0)
    model = PrismLM(CFG, Schedule.parse("1x1,2x1,4x1")).eval()
    a = torch.randint(0, 256, (1, 32))
    b = a.clone()
    b[0, 20:] = (b[0, 20:] + 7) % 256
    with torch.no_grad():
        la, lb = model(a)[0], model(b)[0]
    torch.testing.assert_close(la[0, :20], lb[0, :20])
    assert not torch.allclose(la[0, 20:], lb[0, 20:])


def test_same_seed_gives_identical_weights_across_schedules():
    torch.manual_seed(3)
    a = PrismLM(CFG, Schedule.parse("1x3"))
    torch.manual_seed(3)
    b = PrismLM(CFG, Schedule.parse("4x3"))
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert na == nb and torch.equal(pa, pb)


def test_embeddings_are_tied_and_sequence_length_is_checked():
    model = PrismLM(CFG, Schedule.parse("2x3"))
    assert model.lm_head.weight is model.wte.weight
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 33, dtype=torch.long))


VARIANT_CFG = ModelConfig(
    n_layer=3, d_model=64, block_size=32, dh_min=16, dh_max=64, positions="rope", norm="rmsnorm", mlp="swiglu", qk_norm=True, bias=False
)


@pytest.mark.parametrize("text", ["1x3", "1x1,2x1,4x1"])
def test_variant_model_paths_agree_and_stay_causal(text):
    torch.manual_seed(0)
    model = PrismLM(VARIANT_CFG, Schedule.parse(text)).eval()
    a = torch.randint(0, 256, (2, 32))
    b = a.clone()
    b[:, 20:] = (b[:, 20:] + 7) % 256
    with torch.no_grad():
        logits, _ = model(a)
        torch.testing.assert_close(model.trace(a).logits, logits, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(model(b)[0][:, :20], logits[:, :20])


def test_rope_makes_attention_depend_on_relative_position_only():
    """RoPE scores q_i.k_j depend on i - j: shifting both by the same offset leaves them unchanged."""
    from prism.model import _rope_tables, _rotate

    cos, sin = _rope_tables(32, 64)
    q, k = torch.randn(32), torch.randn(32)
    score = lambda i, j: (_rotate(q, cos[i], sin[i]) @ _rotate(k, cos[j], sin[j])).item()
    assert score(10, 3) == pytest.approx(score(40, 33), rel=1e-4, abs=1e-5)
    assert score(10, 3) != pytest.approx(score(10, 9), rel=1e-3)


def test_unknown_variant_is_rejected():
    with pytest.raises(ValueError, match="positions='alibi' is not one of learned, rope"):
        ModelConfig(positions="alibi")


@pytest.mark.parametrize("variant", [{}, {"positions": "rope", "norm": "rmsnorm", "mlp": "swiglu", "qk_norm": True}])
@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_training_attention_takes_the_fused_kernel_for_every_head_dim(variant, dtype):
    """The CPU twin of test_cuda's kernel check: no mask or layout that would send SDPA to its slow math path."""
    cfg = ModelConfig(n_layer=4, d_model=512, block_size=16, dh_min=32, dh_max=256, **variant)
    model = PrismLM(cfg, Schedule.parse("2x1,4x1,8x1,16x1"))  # head dims 256, 128, 64, 32
    idx = torch.randint(0, 256, (2, 16))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
            _, loss = model(idx, idx)
        loss.backward()
    calls = {e.key: e.count for e in prof.key_averages()}
    assert calls.get("aten::_scaled_dot_product_flash_attention_for_cpu") == 4
    assert calls.get("aten::_scaled_dot_product_flash_attention_for_cpu_backward") == 4
    assert not {"aten::_scaled_dot_product_attention_math", "aten::_softmax"} & set(calls)
