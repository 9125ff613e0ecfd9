import math
import re

import pytest
import torch

from prism import ModelConfig, PrismLM, Schedule, TrainConfig, Trainer, TrainingDiverged, load_corpus, train, train_batches
from prism.training import SETTLE_STEPS, autocast_dtype, diverged_above

CFG = ModelConfig(n_layer=2, d_model=64, block_size=32, dh_min=16, dh_max=64)
TCFG = TrainConfig(steps=40, batch_size=8, warmup_steps=4, eval_every=10, eval_batches=2, lr=3e-3)


def test_loss_decreases_and_the_record_is_complete():
    result = train(CFG, Schedule.parse("1x1,4x1"), TCFG, load_corpus())
    losses = [p.val_loss for p in result.curve]
    assert [p.step for p in result.curve] == [10, 20, 30, 40]
    assert losses[-1] < losses[0] < math.log(256) + 0.5
    assert result.tokens == 40 * 8 * 32 and result.tokens_per_s > 0 and not result.stopped_early
    assert result.final_val_loss == losses[-1] and result.n_params > 0 and result.flops_per_token > 0


def test_same_seed_is_bitwise_deterministic_and_other_seed_differs():
    corpus = load_corpus()
    a = train(CFG, Schedule.parse("2x2"), TCFG, corpus)
    b = train(CFG, Schedule.parse("2x2"), TCFG, corpus)
    c = train(CFG, Schedule.parse("2x2"), TrainConfig(**{**TCFG.__dict__, "seed": 1}), corpus)
    assert [p.val_loss for p in a.curve] == [p.val_loss for p in b.curve]
    assert a.final_val_loss != c.final_val_loss


def _plain_training_loop(schedule: Schedule, fused: bool, steps: int = 6) -> list[float]:
    """nanoGPT's loop, written out: AdamW with decay on matrices only, the warmup-cosine rate, clipped gradients."""
    corpus = load_corpus()
    torch.manual_seed(TCFG.seed)
    model = PrismLM(CFG, schedule)
    groups = [[p for p in model.parameters() if p.dim() >= 2], [p for p in model.parameters() if p.dim() < 2]]
    opt = torch.optim.AdamW(
        [{"params": groups[0], "weight_decay": TCFG.weight_decay}, {"params": groups[1], "weight_decay": 0.0}],
        lr=TCFG.lr,
        betas=(TCFG.beta1, TCFG.beta2),
        fused=fused,
    )
    batches = train_batches(corpus, CFG.block_size, TCFG.batch_size, seed=TCFG.seed)
    losses = []
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = TCFG.lr_at(step)
        loss = model(*next(batches))[1]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), TCFG.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def test_trainer_steps_equal_a_plain_training_loop():
    """Trainer's step is nanoGPT's loop and nothing more: same losses bit for bit against the same (fused) AdamW,
    and no gradients kept between steps (they are freed right after the optimizer used them)."""
    schedule = Schedule.parse("2x2")
    trainer = Trainer(CFG, schedule, TCFG, load_corpus())
    assert TCFG.fused_adamw == "always"  # the default the loop below mirrors
    assert [trainer.train_steps(1) for _ in range(6)] == _plain_training_loop(schedule, fused=True)
    assert all(p.grad is None for p in trainer.model.parameters())


def test_fused_adamw_matches_the_unfused_update_to_rounding():
    """The fused kernel is the same update as torch's default for-each AdamW, not bit for bit: the two round
    differently, and how differently depends on the CPU's vector kernels (AVX2 and AVX512 differ at step 1 by about
    5e-7 in the loss). Six steps stay within a relative 1e-5 (measured: 1e-7); dropping the weight decay drifts past it by step 3."""
    schedule = Schedule.parse("2x2")
    fused, unfused = _plain_training_loop(schedule, fused=True), _plain_training_loop(schedule, fused=False)
    assert fused[0] == unfused[0]  # the first loss is before any update: the same forward pass
    assert fused == pytest.approx(unfused, rel=1e-5, abs=0)


def test_callback_can_stop_the_run():
    result = train(CFG, Schedule.parse("2x2"), TCFG, load_corpus(), on_eval=lambda p: p.step >= 20)
    assert result.steps == 20 and result.stopped_early and len(result.curve) == 2


def test_non_finite_loss_raises_naming_its_step():
    """Losses are checked once per stretch of steps (no per-step host sync); the first bad step is still named."""
    trainer = Trainer(CFG, Schedule.parse("2x2"), TCFG, load_corpus())
    assert math.isfinite(trainer.train_steps(3)) and trainer.step == 3
    with torch.no_grad():
        trainer.model.wte.weight[:] = float("nan")
    with pytest.raises(TrainingDiverged, match="non-finite training loss nan at step 3 "):
        trainer.run_to_next_eval()


def test_schedule_lr_warmup_and_cosine():
    cfg = TrainConfig(steps=100, warmup_steps=10, lr=1.0, min_lr_ratio=0.1)
    assert cfg.lr_at(0) == pytest.approx(0.1) and cfg.lr_at(9) == pytest.approx(1.0)
    assert cfg.lr_at(100) == pytest.approx(0.1) and 0.1 < cfg.lr_at(50) < 1.0


def test_bf16_autocast_runs_the_same_code_on_cpu():
    corpus = load_corpus()
    fp32 = Trainer(CFG, Schedule.parse("2x2"), TrainConfig(**{**TCFG.__dict__, "steps": 20}), corpus)
    bf16 = Trainer(CFG, Schedule.parse("2x2"), TrainConfig(**{**TCFG.__dict__, "steps": 20, "precision": "bf16"}), corpus)
    assert fp32.autocast_dtype is None and bf16.autocast_dtype is torch.bfloat16
    a, b = [fp32.run_to_next_eval() for _ in range(2)], [bf16.run_to_next_eval() for _ in range(2)]
    assert b[1].val_loss < b[0].val_loss < math.log(256) + 0.5
    assert a[1].val_loss != b[1].val_loss  # autocast really changed the arithmetic
    assert abs(a[1].val_loss - b[1].val_loss) < 0.1
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())  # master weights stay fp32


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision='fp8' is not one of auto, fp32, bf16, fp16"):
        TrainConfig(precision="fp8")


def test_a_finite_but_absurd_loss_is_a_divergence_too():
    """lr 10 blows the model up without producing inf or nan: its val loss, hundreds of nats, must not be ranked."""
    blown = TrainConfig(**{**TCFG.__dict__, "lr": 10.0, "warmup_steps": 0, "steps": 10, "eval_every": 5})
    trainer = Trainer(CFG, Schedule.parse("2x2"), blown, load_corpus())
    assert math.isfinite(trainer.train_steps(5))  # finite all the way: a non-finite check alone never fires
    with pytest.raises(TrainingDiverged) as info:
        trainer.evaluate()
    value = float(re.search(r"validation loss (\S+) at step 5 \(schedule 2x2\)", str(info.value)).group(1))
    assert math.isfinite(value) and value > diverged_above(256)
    assert "is above 4.0 x ln(vocab_size=256) = 22.18" in str(info.value)
    healthy = train(CFG, Schedule.parse("2x2"), TrainConfig(**{**TCFG.__dict__, "steps": 10, "eval_every": 5}), load_corpus())
    assert all(p.val_loss < diverged_above(256) for p in healthy.curve)  # a learning run stays far below the line


@pytest.mark.parametrize(
    "precision, capability, dtype",
    [
        ("auto", None, None),  # the CPU: fp32
        ("auto", (7, 0), torch.float16),  # V100: bf16 only emulated
        ("auto", (7, 5), torch.float16),  # T4
        ("auto", (8, 0), torch.bfloat16),  # A100
        ("auto", (8, 9), torch.bfloat16),  # L4
        ("auto", (9, 0), torch.bfloat16),  # H100, H200
        ("fp32", (9, 0), None),
        ("bf16", None, torch.bfloat16),
        ("fp16", (9, 0), torch.float16),
    ],
)
def test_auto_precision_is_bf16_only_where_the_gpu_runs_it_natively(precision, capability, dtype):
    assert autocast_dtype(precision, capability) is dtype


def test_fp16_trains_with_a_grad_scaler():
    fp16 = Trainer(CFG, Schedule.parse("2x2"), TrainConfig(**{**TCFG.__dict__, "steps": 20, "precision": "fp16"}), load_corpus())
    assert fp16.autocast_dtype is torch.float16 and fp16.scaler.is_enabled()
    first, second = fp16.run_to_next_eval(), fp16.run_to_next_eval()
    assert second.val_loss < first.val_loss < math.log(256) + 0.5
    assert fp16.scaler.get_scale() > 1  # the loss was scaled
    fp32 = Trainer(CFG, Schedule.parse("2x2"), TCFG, load_corpus())
    assert not fp32.scaler.is_enabled()


def test_tokens_per_s_leaves_out_the_settling_steps():
    trainer = Trainer(CFG, Schedule.parse("2x2"), TrainConfig(**{**TCFG.__dict__, "steps": 12, "eval_every": 3}), load_corpus())
    while not trainer.done:
        trainer.run_to_next_eval()
    assert trainer.settled_steps == 12 - SETTLE_STEPS and 0 < trainer.settled_time < trainer.train_time
    assert trainer.result().tokens_per_s == pytest.approx(trainer.settled_steps * trainer.tokens_per_step / trainer.settled_time)
    short = Trainer(CFG, Schedule.parse("2x2"), TrainConfig(**{**TCFG.__dict__, "steps": SETTLE_STEPS}), load_corpus())
    short.run_to_next_eval()
    assert short.settled_steps == 0
    assert short.result().tokens_per_s == pytest.approx(SETTLE_STEPS * short.tokens_per_step / short.train_time)
