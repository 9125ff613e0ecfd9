"""The GPU recipe's cost per trial: FLOPs per token, tokens per trial and wall time, from a study TOML.

    python scripts/gpu_recipe.py studies/gpu-124m.toml                      # wall time at an ASSUMED MFU
    python scripts/gpu_recipe.py studies/gpu-124m.toml --tokens-per-s 4.1e5  # wall time at a measured speed
    python scripts/gpu_recipe.py studies/gpu-124m.toml --measure             # time the model here (CUDA GPU)

Without a measurement the wall time is a calculation, printed as such: tokens per trial x FLOPs per token /
(peak x MFU). `--measure` trains the recipe's model (its precision and compile settings, the recipe's batch) on
random token ids for a few steps per schedule and prints the measured tokens/s and MFU; it needs only torch and
prism/ (run it with the repository root on PYTHONPATH), so it also runs on a bare GPU machine.
"""

from __future__ import annotations

import argparse
import time
import tomllib
from pathlib import Path

import numpy as np

from prism import Corpus, ModelConfig, Schedule, TrainConfig, Trainer, allowed_head_counts, flops_per_token, param_count

PEAK_BF16_TFLOPS = 989.0  # dense bf16 Tensor-Core peak of an H100/H200 SXM (vendor figure)


def recipe(path: str) -> tuple[ModelConfig, dict, dict]:
    """The [model], [train] and [space] sections, read without the service's config (no corpus check needed)."""
    data = tomllib.loads(Path(path).read_text())
    return ModelConfig(**data.get("model", {})), data.get("train", {}), data.get("space", {})


def default_schedules(cfg: ModelConfig, space: dict) -> list[Schedule]:
    """The uniform baseline and the paper's ramp, computed as the study computes them."""
    from search.families.references import paper_ramp  # needs the service's packages; pass --schedules where they are missing

    counts = allowed_head_counts(cfg)
    heads = space.get("baseline_heads") or min(counts, key=lambda h: abs(cfg.d_model // h - 64))
    return [Schedule.uniform(heads, cfg.n_layer), paper_ramp(cfg.n_layer, counts, heads)]


def measure(cfg: ModelConfig, train: dict, schedule: Schedule, steps: int, warmup: int) -> float:
    """Training tokens/s of `schedule` on the local CUDA GPU, after `warmup` steps (compilation included there)."""
    import torch

    batch = train.get("batch_size", 16)
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, size=(steps + warmup + 4) * batch * (cfg.block_size + 1) * 2)
    corpus = Corpus("random", ids.astype(np.int64), cfg.vocab_size)
    tcfg = TrainConfig(
        steps=steps + warmup + 1,
        batch_size=batch,
        lr=train.get("lr", 6e-4),
        warmup_steps=1,
        eval_batches=1,
        device="cuda",
        precision=train.get("precision", "auto"),
        compile=train.get("compile", False),
    )
    trainer = Trainer(cfg, schedule, tcfg, corpus)
    trainer.train_steps(warmup)
    torch.cuda.synchronize()
    start = time.perf_counter()
    trainer.train_steps(steps)  # ends with a device-to-host copy of the losses: the GPU has finished
    return steps * trainer.tokens_per_step / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study")
    p.add_argument("--schedules", help="';'-separated schedules (default: uniform and the paper ramp)")
    p.add_argument("--peak-tflops", type=float, default=PEAK_BF16_TFLOPS, help="the GPU's dense bf16 peak")
    p.add_argument("--assume-mfu", type=float, default=0.4, help="model FLOPs utilisation assumed without a measurement")
    p.add_argument("--tokens-per-s", type=float, help="a measured training speed to compute the wall time from")
    p.add_argument("--measure", action="store_true", help="time the model on this machine's CUDA GPU")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=10)
    args = p.parse_args()

    cfg, train, space = recipe(args.study)
    schedules = [Schedule.parse(s) for s in args.schedules.split(";")] if args.schedules else default_schedules(cfg, space)
    tokens = train.get("steps", 400) * train.get("batch_size", 16) * cfg.block_size
    print(f"{args.study}: {cfg.n_layer} x {cfg.d_model}, T={cfg.block_size}, vocab {cfg.vocab_size}; {tokens / 1e6:.1f} M tokens per trial")
    print(f"{'schedule':<24} {'params':>12} {'GFLOP/token':>12} {'tokens/s':>12} {'MFU':>6} {'time/trial':>11}  source")
    for schedule in schedules:
        # prism's count (nanoGPT convention) leaves out the output projection; an MFU must count that matmul too
        flops = flops_per_token(cfg, schedule) + 6 * cfg.d_model * cfg.vocab_size
        if args.measure:
            speed, source = measure(cfg, train, schedule, args.steps, args.warmup), "measured here"
        elif args.tokens_per_s:
            speed, source = args.tokens_per_s, "given --tokens-per-s"
        else:
            speed, source = args.assume_mfu * args.peak_tflops * 1e12 / flops, f"ASSUMED MFU {args.assume_mfu:.0%}"
        mfu = speed * flops / (args.peak_tflops * 1e12)
        print(
            f"{schedule!s:<24} {param_count(cfg, schedule):>12,} {flops / 1e9:>12.3f} {speed:>12,.0f} "
            f"{mfu:>6.1%} {tokens / speed / 60:>9.1f} min  {source}"
        )


if __name__ == "__main__":
    main()
