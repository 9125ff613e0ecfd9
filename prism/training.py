"""Short-horizon training of one Prism model, evaluated on fixed validation batches.

`Trainer` advances one evaluation interval at a time, so a caller that lives elsewhere (a search driver talking
to a worker) can decide between intervals whether to go on; `train` is the simple loop with a callback.
The same code runs on CPU and CUDA. On CUDA it turns on what a GPU run wants: TF32 matmuls, bf16 autocast where
the GPU runs bf16 natively and fp16 with loss scaling where it does not (precision="auto"), fused AdamW, pinned host
batches copied without blocking; torch.compile is opt-in because its compile time dwarfs a short trial.
Attention always goes through SDPA, which picks the flash or memory-efficient kernel on CUDA for the power-of-two
head dims a schedule may use.
Throughput counts training steps only (forward, backward, optimizer), never evaluation or start-up, and, as
nanoGPT's MFU does, not the first SETTLE_STEPS steps, which pay for compilation and the allocator's warm-up: so the
tokens/s of two schedules compare fairly, compiled or not.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable

import torch

from prism.config import ModelConfig, TrainConfig
from prism.data import Corpus, train_batches, val_batches
from prism.model import PrismLM
from prism.results import EvalPoint, TrainResult
from prism.schedule import Schedule, flops_per_token, param_count


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite, or far worse than knowing nothing (`diverged_above`); the run cannot go on."""


# A model that predicts every token uniformly scores ln(vocab_size): a freshly initialised one starts near it and
# training mostly goes down from there, but an early overshoot can briefly go well above it (measured: 9.4 = 1.7x
# at step 10 of README's `train 1x2,2x1,4x1 --steps 50` example, which then trains normally). 4x is out of reach of
# such transients yet far below the 25-400x of a blown-up run (lr 10: val loss 158-2045), so a finite loss above it
# is a divergence too, never a result to rank.
DIVERGED_FACTOR = 4.0


def diverged_above(vocab_size: int) -> float:
    """The validation loss beyond which a run counts as diverged."""
    return DIVERGED_FACTOR * math.log(vocab_size)


SETTLE_STEPS = 5  # untimed first steps (nanoGPT's MFU skips as many); a run of no more steps is timed whole

NATIVE_BF16_CAPABILITY = (8, 0)  # Ampere and later run bf16 on their tensor cores; V100 and T4 only emulate it
COMPILE_BACKEND_ENV = "PRISM_COMPILE_BACKEND"


def autocast_dtype(precision: str, capability: tuple[int, int] | None) -> torch.dtype | None:
    """The autocast dtype for `precision` on a GPU of compute `capability` (None: the CPU); None means plain fp32.
    "auto" picks bf16 only where the GPU runs it natively: `torch.cuda.is_bf16_supported()` also says yes where it
    is emulated, many times slower. Older GPUs get fp16, which needs loss scaling (Trainer's GradScaler)."""
    if precision in ("bf16", "fp16"):
        return torch.bfloat16 if precision == "bf16" else torch.float16
    if precision == "fp32" or capability is None:
        return None
    return torch.bfloat16 if capability >= NATIVE_BF16_CAPABILITY else torch.float16


def capability_of(device: torch.device) -> tuple[int, int] | None:
    """A CUDA device's compute capability; None for the CPU."""
    return torch.cuda.get_device_capability(device) if device.type == "cuda" else None


def compile_backend() -> str:
    """torch.compile's backend: inductor, or $PRISM_COMPILE_BACKEND (`eager`, `aot_eager`), which trace and guard
    as inductor does without generating code: what a CPU test of recompilation needs, in seconds."""
    return os.environ.get(COMPILE_BACKEND_ENV, "inductor")


class Trainer:
    """Owns the model, optimizer and data stream of one run."""

    def __init__(self, model_cfg: ModelConfig, schedule: Schedule, train_cfg: TrainConfig, corpus: Corpus):
        if corpus.vocab_size > model_cfg.vocab_size:
            raise ValueError(f"corpus vocab {corpus.vocab_size} exceeds model vocab_size={model_cfg.vocab_size}")
        self.started = time.perf_counter()
        self.model_cfg, self.schedule, self.cfg = model_cfg, schedule, train_cfg
        self.device = torch.device(train_cfg.device)
        cuda = self.device.type == "cuda"
        if cuda:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        self.autocast_dtype = autocast_dtype(train_cfg.precision, capability_of(self.device))
        # fp16's narrow range underflows small gradients unless the loss is scaled up; a disabled scaler passes through
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.autocast_dtype == torch.float16)
        torch.manual_seed(train_cfg.seed)  # same seed -> same initial weights for every schedule
        self.model = PrismLM(model_cfg, schedule).to(self.device)
        if train_cfg.compile:
            self.model.compile_parts(backend=compile_backend())
        decay = [p for p in self.model.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.model.parameters() if p.dim() < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": train_cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=train_cfg.lr,
            betas=(train_cfg.beta1, train_cfg.beta2),
            fused=train_cfg.fused_adamw == "always" or cuda,
        )
        self.batches = train_batches(corpus, model_cfg.block_size, train_cfg.batch_size, seed=train_cfg.seed)
        self.val = val_batches(corpus, model_cfg.block_size, train_cfg.batch_size, train_cfg.eval_batches)
        self.step = 0
        self.train_time = 0.0  # every training step's time
        self.settled_time, self.settled_steps = 0.0, 0  # those after the first SETTLE_STEPS: what tokens/s is
        self.curve: list[EvalPoint] = []
        self._last_train_loss = float("nan")

    @property
    def tokens_per_step(self) -> int:
        return self.cfg.batch_size * self.model_cfg.block_size

    @property
    def done(self) -> bool:
        return self.step >= self.cfg.steps

    def _to_device(self, t: torch.Tensor) -> torch.Tensor:
        if self.device.type == "cuda":
            return t.pin_memory().to(self.device, non_blocking=True)  # the copy overlaps the previous step
        return t

    def _loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # fp32 enters no autocast context at all: a disabled one still resets autocast state on every call
        with torch.autocast(self.device.type, dtype=self.autocast_dtype) if self.autocast_dtype else contextlib.nullcontext():
            return self.model(self._to_device(x), self._to_device(y))[1]

    def train_steps(self, n: int) -> float:
        """Run `n` training steps and return the last training loss. The losses stay on the device until all `n`
        steps are queued: a per-step `.item()` would make the GPU idle while Python launches the next step."""
        if n < 1:
            raise ValueError(f"train_steps needs n >= 1, got {n}")
        losses = []
        for _ in range(n):
            losses.append(self._train_step())
            self.step += 1
        values = torch.stack(losses).float().cpu()
        bad = torch.nonzero(~torch.isfinite(values))
        if len(bad):
            step, value = self.step - n + int(bad[0]), float(values[bad[0]])
            raise TrainingDiverged(f"non-finite training loss {value} at step {step} (schedule {self.schedule})")
        return float(values[-1])

    def _train_step(self) -> torch.Tensor:
        x, y = next(self.batches)
        lr = self.cfg.lr_at(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        loss = self._loss(x, y)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)  # clip the true gradients
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.scaler.step(self.optimizer)  # skipped where fp16 gradients overflowed; the scale then shrinks
        self.scaler.update()
        # free the gradients right after use, as nanoGPT does: the next forward (and any evaluation) then runs
        # without a dead copy of them in memory, instead of holding them until the next backward
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    @torch.no_grad()
    def evaluate(self) -> float:
        self.model.eval()
        losses = [self._loss(x, y).item() for x, y in self.val]
        self.model.train()
        value = sum(losses) / len(losses)
        if not math.isfinite(value):
            raise TrainingDiverged(f"non-finite validation loss {value} at step {self.step} (schedule {self.schedule})")
        if value > (limit := diverged_above(self.model_cfg.vocab_size)):
            raise TrainingDiverged(
                f"validation loss {value:.4g} at step {self.step} (schedule {self.schedule}) is above {DIVERGED_FACTOR} x "
                f"ln(vocab_size={self.model_cfg.vocab_size}) = {limit:.2f}, worse than uniform guessing"
            )
        return value

    def run_to_next_eval(self) -> EvalPoint:
        """Train until the next multiple of eval_every (or the last step), then evaluate."""
        if self.done:
            raise RuntimeError("training already finished")
        target = min(self.cfg.steps, (self.step // self.cfg.eval_every + 1) * self.cfg.eval_every)
        start = time.perf_counter()
        if self.step < SETTLE_STEPS < target:  # the settling steps apart, so the rest is timed alone
            self.train_steps(SETTLE_STEPS - self.step)
        settled, first = time.perf_counter(), self.step
        self._last_train_loss = self.train_steps(target - self.step)
        end = time.perf_counter()
        self.train_time += end - start
        if first >= SETTLE_STEPS:
            self.settled_time += end - settled
            self.settled_steps += target - first
        point = EvalPoint(self.step, self.step * self.tokens_per_step, self.evaluate(), self._last_train_loss)
        self.curve.append(point)
        return point

    @property
    def tokens_per_s(self) -> float:
        """Training speed after the settling steps; a run with no more steps than those, over all of them."""
        if self.settled_steps:
            return self.settled_steps * self.tokens_per_step / self.settled_time
        return self.step * self.tokens_per_step / self.train_time if self.train_time else 0.0

    def result(self) -> TrainResult:
        return TrainResult(
            schedule=str(self.schedule),
            final_val_loss=self.curve[-1].val_loss if self.curve else float("nan"),
            curve=list(self.curve),
            tokens_per_s=self.tokens_per_s,
            n_params=param_count(self.model_cfg, self.schedule),
            flops_per_token=flops_per_token(self.model_cfg, self.schedule),
            wall_time_s=time.perf_counter() - self.started,
            steps=self.step,
            tokens=self.step * self.tokens_per_step,
            stopped_early=not self.done,
        )


def train(
    model_cfg: ModelConfig,
    schedule: Schedule,
    train_cfg: TrainConfig,
    corpus: Corpus,
    on_eval: Callable[[EvalPoint], bool] | None = None,
) -> TrainResult:
    """Train one model; `on_eval` sees every evaluation and returns True to stop the run early (pruning)."""
    trainer = Trainer(model_cfg, schedule, train_cfg, corpus)
    while not trainer.done:
        point = trainer.run_to_next_eval()
        if on_eval is not None and on_eval(point):
            break
    return trainer.result()
