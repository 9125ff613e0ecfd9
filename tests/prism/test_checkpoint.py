"""Checkpoints round-trip every variant; local Hugging Face GPT-2 checkpoints load with transformers' logits."""

import json

import pytest
import torch

from prism import CheckpointError, ModelConfig, PrismLM, Schedule, load_checkpoint, load_hf_gpt2, save_checkpoint


@pytest.mark.parametrize("variant", [{}, dict(positions="rope", norm="rmsnorm", mlp="swiglu", qk_norm=True, bias=False)])
def test_save_load_round_trip(tmp_path, variant):
    cfg = ModelConfig(n_layer=3, d_model=64, block_size=32, dh_min=16, dh_max=64, **variant)
    torch.manual_seed(0)
    model = PrismLM(cfg, Schedule.parse("1x1,2x1,4x1"))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))  # not the init: a reload from a fresh init would fail the check
    save_checkpoint(model, tmp_path / "ckpt", result={"final_val_loss": 1.5})
    meta = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert meta["schedule"] == "1x1,2x1,4x1" and meta["model"] == cfg.to_dict() and meta["result"]["final_val_loss"] == 1.5
    loaded, meta = load_checkpoint(tmp_path / "ckpt")
    assert loaded.schedule == model.schedule and loaded.cfg == cfg
    assert loaded.lm_head.weight is loaded.wte.weight  # still tied after loading
    idx = torch.randint(0, 256, (2, 32))
    with torch.no_grad():
        torch.testing.assert_close(loaded(idx)[0], model.eval()(idx)[0], atol=0, rtol=0)


def test_a_checkpoint_written_before_the_gelu_default_changed_loads_with_its_tanh_gelu(tmp_path):
    cfg = ModelConfig(n_layer=2, d_model=64, block_size=16, dh_min=16, dh_max=64, mlp="gelu")
    save_checkpoint(PrismLM(cfg, Schedule.uniform(1, 2)), tmp_path / "ckpt")
    meta = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    del meta["model"]["mlp"]  # as older checkpoints were written, when "gelu" was the default
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(meta))
    assert load_checkpoint(tmp_path / "ckpt")[0].cfg == cfg


def test_loading_a_non_checkpoint_names_the_fix(tmp_path):
    with pytest.raises(CheckpointError, match="is not a checkpoint"):
        load_checkpoint(tmp_path)


@pytest.mark.e2e
def test_hf_gpt2_logits_match_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf_cfg = transformers.GPT2Config(
        vocab_size=97, n_positions=32, n_embd=64, n_layer=3, n_head=2, initializer_range=0.2, bos_token_id=0, eos_token_id=0
    )
    hf = transformers.GPT2LMHeadModel(hf_cfg).eval()
    with torch.no_grad():  # non-zero biases and norm affines, so every mapped tensor matters
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "ln_" in name:
                p.add_(0.1 * torch.randn_like(p))
    hf.save_pretrained(tmp_path / "gpt2-tiny")
    model = load_hf_gpt2(tmp_path / "gpt2-tiny")
    assert model.schedule == Schedule.uniform(2, 3) and model.num_params() == hf.num_parameters()
    assert model.cfg.mlp == "gelu"  # GPT-2's tanh GELU, whatever ModelConfig's default
    idx = torch.randint(0, 97, (2, 32))
    with torch.no_grad():
        expected = hf(idx).logits
        torch.testing.assert_close(model(idx)[0], expected, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(model.trace(idx).logits, expected, atol=1e-4, rtol=1e-4)
    assert expected.std() > 0.5  # logits far from zero: the comparison is not trivially close


def test_hf_non_gpt2_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(CheckpointError, match="model_type 'llama' is not gpt2"):
        load_hf_gpt2(tmp_path)
