"""The plain GPT-2 that scripts/bench_throughput.py --reference times Prism against is a fair yardstick: the same
parameters, shapes and FLOPs as uniform Prism, with the same GELU (exact or tanh) the very same function, and with
the same AdamW kernel the very same training run."""

import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from prism import ModelConfig, PrismLM, Schedule, TrainConfig, Trainer, flops_per_token, load_corpus, param_count, train_batches

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
reference_gpt = pytest.importorskip("reference_gpt")

CFG = ModelConfig(n_layer=4, d_model=128, block_size=64)  # the benchmark's shape
UNIFORM = Schedule.uniform(2, 4)


def _pair(activation: str = "none", mlp: str = CFG.mlp) -> tuple[PrismLM, torch.nn.Module]:
    torch.manual_seed(0)
    prism = PrismLM(replace(CFG, mlp=mlp), UNIFORM)
    torch.manual_seed(0)
    return prism, reference_gpt.GPT(CFG.vocab_size, CFG.block_size, CFG.n_layer, CFG.d_model, 2, activation)


def test_same_parameters_shapes_and_flops_as_uniform_prism():
    prism, gpt = _pair()
    shapes = [tuple(p.shape) for p in gpt.parameters()]
    assert shapes == [tuple(p.shape) for p in prism.parameters()]
    n_params = sum(p.numel() for p in gpt.parameters())  # the tied embedding once
    assert n_params == prism.num_params() == param_count(CFG, UNIFORM)
    # FLOPs per token (nanoGPT's 6N + attention) depend on the non-embedding weights and the per-layer head split
    non_embedding = n_params - CFG.vocab_size * CFG.d_model - CFG.block_size * CFG.d_model
    attention = sum(3 * b.attn.n_head * 4 * CFG.block_size * (CFG.d_model // b.attn.n_head) for b in gpt.h)
    assert 6 * non_embedding + attention == flops_per_token(CFG, UNIFORM)
    assert [b.attn.n_head for b in gpt.h] == list(UNIFORM.heads)


@pytest.mark.parametrize("activation, mlp", [("none", "gelu-exact"), ("tanh", "gelu")])
def test_with_the_same_gelu_it_computes_what_prism_computes_bit_for_bit(activation, mlp):
    """Same seed, same initial weights (module order and init match), same loss and gradients: a timing gap
    between the two can only come from how the work is done, never from different work. Prism's default GELU is
    nanoGPT's exact one; `mlp = "gelu"` is GPT-2's tanh form."""
    prism, gpt = _pair(activation, mlp)
    assert all(torch.equal(a, b) for a, b in zip(prism.parameters(), gpt.parameters()))
    idx, targets = torch.randint(0, CFG.vocab_size, (2, 2, CFG.block_size)).unbind(0)
    loss_prism, loss_gpt = prism(idx, targets)[1], gpt(idx, targets)[1]
    loss_prism.backward()
    loss_gpt.backward()
    assert torch.equal(loss_prism, loss_gpt)
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(prism.parameters(), gpt.parameters()))


def test_the_tanh_gelu_is_a_different_function():
    """Compared on the logits: at initialisation the two GELUs can round to the same loss on some CPUs (AVX512)."""
    prism, gpt = _pair("none", "gelu")
    idx, targets = torch.randint(0, CFG.vocab_size, (2, 2, CFG.block_size)).unbind(0)
    with torch.no_grad():
        assert not torch.equal(prism(idx, targets)[0], gpt(idx, targets)[0])


@pytest.mark.parametrize("fused_adamw", ["always", "cuda"])
def test_with_the_same_adamw_kernel_it_trains_what_the_trainer_trains_bit_for_bit(fused_adamw):
    """The benchmark's `nanogpt-fused` side (fused AdamW) is Prism's default step, `nanogpt` (fused on CUDA only)
    its earlier rule: after a few steps on the same batches, every weight is equal."""
    tcfg = TrainConfig(steps=10, warmup_steps=2, batch_size=2, eval_batches=1, fused_adamw=fused_adamw)
    corpus = load_corpus()
    trainer = Trainer(CFG, UNIFORM, tcfg, corpus)
    torch.manual_seed(tcfg.seed)
    gpt = reference_gpt.GPT(CFG.vocab_size, CFG.block_size, CFG.n_layer, CFG.d_model, 2)
    batches = train_batches(corpus, CFG.block_size, tcfg.batch_size, tcfg.seed)
    loop = reference_gpt.ReferenceLoop(gpt, batches, tcfg, fused=True if fused_adamw == "always" else None)
    assert trainer.optimizer.defaults["fused"] == (fused_adamw == "always")  # on this CPU machine
    assert trainer.train_steps(3) == loop.train_steps(3)
    assert all(torch.equal(a, b) for a, b in zip(trainer.model.parameters(), gpt.parameters()))
