"""The plain GPT-2 that scripts/bench_throughput.py --reference times Prism against is a fair yardstick: the same
parameters, shapes and FLOPs as uniform Prism, and with the same GELU (tanh or exact) the very same function."""

import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from prism import ModelConfig, PrismLM, Schedule, flops_per_token, param_count

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
reference_gpt = pytest.importorskip("reference_gpt")

CFG = ModelConfig(n_layer=4, d_model=128, block_size=64)  # the benchmark's shape
UNIFORM = Schedule.uniform(2, 4)


def _pair(activation: str, mlp: str = "gelu") -> tuple[PrismLM, torch.nn.Module]:
    torch.manual_seed(0)
    prism = PrismLM(replace(CFG, mlp=mlp), UNIFORM)
    torch.manual_seed(0)
    return prism, reference_gpt.GPT(CFG.vocab_size, CFG.block_size, CFG.n_layer, CFG.d_model, 2, activation)


def test_same_parameters_shapes_and_flops_as_uniform_prism():
    prism, gpt = _pair("none")
    shapes = [tuple(p.shape) for p in gpt.parameters()]
    assert shapes == [tuple(p.shape) for p in prism.parameters()]
    n_params = sum(p.numel() for p in gpt.parameters())  # the tied embedding once
    assert n_params == prism.num_params() == param_count(CFG, UNIFORM)
    # FLOPs per token (nanoGPT's 6N + attention) depend on the non-embedding weights and the per-layer head split
    non_embedding = n_params - CFG.vocab_size * CFG.d_model - CFG.block_size * CFG.d_model
    attention = sum(3 * b.attn.n_head * 4 * CFG.block_size * (CFG.d_model // b.attn.n_head) for b in gpt.h)
    assert 6 * non_embedding + attention == flops_per_token(CFG, UNIFORM)
    assert [b.attn.n_head for b in gpt.h] == list(UNIFORM.heads)


@pytest.mark.parametrize("activation, mlp", [("tanh", "gelu"), ("none", "gelu-exact")])
def test_with_the_same_gelu_it_computes_what_prism_computes_bit_for_bit(activation, mlp):
    """Same seed, same initial weights (module order and init match), same loss and gradients: a timing gap
    between the two can only come from how the work is done, never from different work. Prism's default GELU is
    GPT-2's tanh form; `mlp = "gelu-exact"` is nanoGPT's."""
    prism, gpt = _pair(activation, mlp)
    assert all(torch.equal(a, b) for a, b in zip(prism.parameters(), gpt.parameters()))
    idx, targets = torch.randint(0, CFG.vocab_size, (2, 2, CFG.block_size)).unbind(0)
    loss_prism, loss_gpt = prism(idx, targets)[1], gpt(idx, targets)[1]
    loss_prism.backward()
    loss_gpt.backward()
    assert torch.equal(loss_prism, loss_gpt)
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(prism.parameters(), gpt.parameters()))


def test_the_default_is_nanogpts_exact_gelu_a_different_function():
    prism, gpt = _pair("none")
    idx, targets = torch.randint(0, CFG.vocab_size, (2, 2, CFG.block_size)).unbind(0)
    with torch.no_grad():
        assert not torch.equal(prism(idx, targets)[1], gpt(idx, targets)[1])
