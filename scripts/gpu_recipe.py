"""The GPU recipe's cost per trial: FLOPs per token, tokens per trial and wall time, from a study TOML.

    python scripts/gpu_recipe.py studies/gpu-124m.toml                      # wall time at an ASSUMED MFU on an H100 SXM
    python scripts/gpu_recipe.py studies/gpu-124m.toml --gpu "NVIDIA L4"    # ... on another GPU (its peak from the table)
    python scripts/gpu_recipe.py studies/gpu-124m.toml --tokens-per-s 4.1e5  # wall time at a measured speed
    python scripts/gpu_recipe.py studies/gpu-124m.toml --measure             # time the model here (CUDA GPU)

Without a measurement the wall time is a calculation, printed as such: tokens per trial x FLOPs per token /
(peak x MFU). The peak is the dense 16-bit tensor-core figure of the GPU named (`--gpu`, or the local GPU's name
with `--measure`) from PEAK_TFLOPS, or `--peak-tflops`. `--measure` trains the recipe's model (its precision and
compile settings, the recipe's batch) on random token ids for a few steps per schedule and prints the measured
tokens/s, MFU and peak memory; it needs only torch and prism/ (run it with the repository root on PYTHONPATH), so
it also runs on a bare GPU machine (`--device cpu` checks the script itself where there is none).
"""

from __future__ import annotations

import argparse
import time
import tomllib
from pathlib import Path

import numpy as np

from prism import Corpus, ModelConfig, Schedule, TrainConfig, Trainer, allowed_head_counts, flops_per_token, param_count
from prism.schedule import paper_ramp

# dense (no sparsity) 16-bit tensor-core peaks, TFLOPS, from the vendors' data sheets: bf16 where the GPU runs it,
# fp16 on V100 and T4 (where precision="auto" trains in fp16). First match in a device name wins: the more specific first.
PEAK_TFLOPS = (
    ("H200", 989.0),  # H200 SXM and GH200: the H100 SXM's tensor cores
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),  # SXM, named "NVIDIA H100 80GB HBM3"
    ("A100", 312.0),  # SXM and PCIe alike
    ("L40S", 362.0),
    ("L40", 181.0),
    ("L4", 121.0),
    ("V100", 125.0),
    ("T4", 65.0),
)
ASSUMED_GPU = "NVIDIA H100 80GB HBM3"  # the H100 SXM: the recipe's target when no GPU is named


def peak_tflops(device_name: str) -> float | None:
    """The dense 16-bit tensor-core peak of the GPU `device_name` (as torch.cuda.get_device_name says it); None where
    the table does not know it."""
    return next((tflops for key, tflops in PEAK_TFLOPS if key.lower() in device_name.lower()), None)


def recipe(path: str) -> tuple[ModelConfig, dict, dict]:
    """The [model], [train] and [space] sections, read without the service's config (no corpus check needed)."""
    data = tomllib.loads(Path(path).read_text())
    return ModelConfig(**data.get("model", {})), data.get("train", {}), data.get("space", {})


def default_schedules(cfg: ModelConfig, space: dict) -> list[Schedule]:
    """The uniform baseline and the paper's ramp, computed as the study computes them."""
    counts = allowed_head_counts(cfg)
    heads = space.get("baseline_heads") or min(counts, key=lambda h: abs(cfg.d_model // h - 64))
    return [Schedule.uniform(heads, cfg.n_layer), paper_ramp(cfg.n_layer, counts, heads)]


def measure(cfg: ModelConfig, train: dict, schedule: Schedule, steps: int, warmup: int, device: str) -> tuple[float, float]:
    """Training tokens/s of `schedule` on `device` after `warmup` steps (compilation included there), and the peak
    GPU memory in GiB (nan on the CPU)."""
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
        device=device,
        precision=train.get("precision", "auto"),
        compile=train.get("compile", False),
    )
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    trainer = Trainer(cfg, schedule, tcfg, corpus)
    trainer.train_steps(warmup)
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    trainer.train_steps(steps)  # ends with a device-to-host copy of the losses: the GPU has finished
    speed = steps * trainer.tokens_per_step / (time.perf_counter() - start)
    return speed, torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study")
    p.add_argument("--schedules", help="';'-separated schedules (default: uniform and the paper ramp)")
    p.add_argument("--gpu", help=f"the GPU's name, for its peak (default: the local one with --measure, else {ASSUMED_GPU})")
    p.add_argument("--peak-tflops", type=float, help="the GPU's dense 16-bit peak, where the table lacks it")
    p.add_argument("--assume-mfu", type=float, default=0.4, help="model FLOPs utilisation assumed without a measurement")
    p.add_argument("--tokens-per-s", type=float, help="a measured training speed to compute the wall time from")
    p.add_argument("--measure", action="store_true", help="time the model on this machine's CUDA GPU")
    p.add_argument("--device", default="cuda", help="where --measure trains (cpu: check the script without a GPU)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, help="override the study's train.compile for --measure")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=10)
    args = p.parse_args()

    gpu = args.gpu or (_local_gpu() if args.measure and args.device.startswith("cuda") else ASSUMED_GPU)
    peak = args.peak_tflops or peak_tflops(gpu)
    if peak is None:
        p.error(f"no peak known for GPU {gpu!r}; pass --peak-tflops (its dense bf16, or fp16, tensor-core TFLOPS)")
    print(f"peak: {peak:g} TFLOPS ({'given --peak-tflops' if args.peak_tflops else f'table entry for {gpu}'})")
    cfg, train, space = recipe(args.study)
    if args.compile is not None:
        train = train | {"compile": args.compile}
    schedules = [Schedule.parse(s) for s in args.schedules.split(";")] if args.schedules else default_schedules(cfg, space)
    tokens = train.get("steps", 400) * train.get("batch_size", 16) * cfg.block_size
    print(
        f"{args.study}: {cfg.n_layer} x {cfg.d_model}, T={cfg.block_size}, vocab {cfg.vocab_size}; {tokens / 1e6:.1f} M tokens per trial; "
        f"precision {train.get('precision', 'auto')}, compile {train.get('compile', False)}"
    )
    print(f"{'schedule':<24} {'params':>12} {'GFLOP/token':>12} {'tokens/s':>12} {'MFU':>6} {'time/trial':>11} {'peak GiB':>9}  source")
    for schedule in schedules:
        # prism's count (nanoGPT convention) leaves out the output projection; an MFU must count that matmul too
        flops = flops_per_token(cfg, schedule) + 6 * cfg.d_model * cfg.vocab_size
        memory = float("nan")
        if args.measure:
            (speed, memory), source = measure(cfg, train, schedule, args.steps, args.warmup, args.device), f"measured on {args.device}"
        elif args.tokens_per_s:
            speed, source = args.tokens_per_s, "given --tokens-per-s"
        else:
            speed, source = args.assume_mfu * peak * 1e12 / flops, f"ASSUMED MFU {args.assume_mfu:.0%}"
        mfu = speed * flops / (peak * 1e12)
        print(
            f"{schedule!s:<24} {param_count(cfg, schedule):>12,} {flops / 1e9:>12.3f} {speed:>12,.0f} "
            f"{mfu:>6.1%} {tokens / speed / 60:>9.1f} min {f'{memory:.1f}' if args.measure else '-':>9}  {source}"
        )


def _local_gpu() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA GPU here"


if __name__ == "__main__":
    main()
