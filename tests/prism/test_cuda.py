"""GPU path checks; skipped on machines without CUDA (CI here has none)."""

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from prism import ModelConfig, PrismLM, Schedule, TrainConfig, Trainer, load_corpus

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("variant", [{}, {"positions": "rope", "norm": "rmsnorm", "mlp": "swiglu", "qk_norm": True}])
@pytest.mark.parametrize("head_dim", [32, 64, 128, 256])
def test_sdpa_uses_a_fast_kernel_for_every_allowed_head_dim(head_dim, variant):
    """With the math fallback disabled, SDPA raises unless flash or memory-efficient attention takes the call."""
    cfg = ModelConfig(n_layer=2, d_model=512, block_size=256, dh_min=32, dh_max=256, **variant)
    model = PrismLM(cfg, Schedule.uniform(512 // head_dim, 2)).cuda()
    idx = torch.randint(0, 256, (4, 256), device="cuda")
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = model(idx, idx)
        loss.backward()  # the backward kernels must exist too (flash backward above dh 192 needs sm80+)
    assert torch.isfinite(loss)


def test_trainer_on_cuda_uses_bf16_fused_adamw_and_learns():
    cfg = ModelConfig(n_layer=2, d_model=128, block_size=64, dh_min=32, dh_max=128)
    tcfg = TrainConfig(steps=60, batch_size=16, warmup_steps=5, eval_every=30, eval_batches=2, device="cuda")
    trainer = Trainer(cfg, Schedule.parse("1x1,4x1"), tcfg, load_corpus())
    assert trainer.autocast_dtype is torch.bfloat16 and trainer.optimizer.defaults["fused"]
    assert torch.backends.cuda.matmul.allow_tf32
    first, second = trainer.run_to_next_eval(), trainer.run_to_next_eval()
    assert second.val_loss < first.val_loss
